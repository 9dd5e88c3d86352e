"""Where each record lives in the Redis keyspace (no I/O).

Records use the keys of the TypeScript ``@mastra/upstash`` adapter, so both
read and write the same data: ``mastra_resources:{id}`` and
``mastra_threads:id:{id}``, one JSON document each. The thread indexes are
workmem's own: two sorted sets per resource,
``workmem:thread_index:created_at:{resource_id}`` and
``workmem:thread_index:updated_at:{resource_id}``, member = thread id, score =
the timestamp in epoch milliseconds. Two more sorted sets hold every id, all
scores 0 so ``ZRANGEBYLEX`` walks them in byte order (keyset iteration):
``workmem:ids:resources`` and ``workmem:ids:threads``. None of them starts
with ``mastra_threads:`` or ``mastra_resources:``, which the TypeScript
adapter scans and reads as JSON. Every key is preceded by the optional prefix.

History (``connect(url, history=...)``): one sorted set per working memory,
``workmem:history:["{resource_id}",null]`` (resource scope) or
``workmem:history:["{resource_id}","{thread_id}"]`` (thread scope; the owner
first), the JSON array naming the pair unambiguously whatever the ids hold.
Member ``{version}:{payload}`` (payload: the version's JSON), score = version.
One set per resource, ``workmem:history_keys:{resource_id}``, names every
history key of that resource (both scopes), so ``delete_resource`` finds them
without a ``SCAN``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from workmem.history import HistoryKey
from workmem.records import OrderBy
from workmem.validation import dump_json

__all__ = [
    "HISTORY_KEYS_PART",
    "HISTORY_PART",
    "IDS_PART",
    "INDEX_PART",
    "RESOURCE_PART",
    "THREAD_PART",
    "KeySpace",
    "glob_escape",
]

RESOURCE_PART = "mastra_resources:"
THREAD_PART = "mastra_threads:id:"
INDEX_PART = "workmem:thread_index:"
IDS_PART = "workmem:ids:"
HISTORY_PART = "workmem:history:"
HISTORY_KEYS_PART = "workmem:history_keys:"


def glob_escape(text: str) -> str:
    """``text`` with the glob characters of ``SCAN ... MATCH`` escaped."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


@dataclass(frozen=True, slots=True)
class KeySpace:
    """The keys of one workmem namespace: Mastra's key names behind an optional prefix."""

    prefix: str = ""
    thread_key_start: str = field(init=False, repr=False, compare=False)
    """What every thread key starts with (the thread id follows)."""
    resource_key_start: str = field(init=False, repr=False, compare=False)
    """What every resource key starts with (the resource id follows)."""
    resource_ids: str = field(init=False, repr=False, compare=False)
    """The sorted set of every resource id (all scores 0: ``ZRANGEBYLEX`` order is byte order)."""
    thread_ids: str = field(init=False, repr=False, compare=False)
    """The sorted set of every thread id (all scores 0)."""

    def __post_init__(self) -> None:
        # Fixed by the prefix: built once, not on each of the many calls that name a key.
        for name, part in (
            ("thread_key_start", THREAD_PART),
            ("resource_key_start", RESOURCE_PART),
            ("resource_ids", f"{IDS_PART}resources"),
            ("thread_ids", f"{IDS_PART}threads"),
        ):
            object.__setattr__(self, name, self.prefix + part)

    def resource(self, resource_id: str) -> str:
        return self.resource_key_start + resource_id

    def thread(self, thread_id: str) -> str:
        return self.thread_key_start + thread_id

    def thread_index(self, order_by: OrderBy, resource_id: str) -> str:
        return f"{self.prefix}{INDEX_PART}{order_by}:{resource_id}"

    def thread_indexes(self, resource_id: str) -> tuple[str, str]:
        """The ``created_at`` and ``updated_at`` index keys of one resource."""
        return self.thread_index("created_at", resource_id), self.thread_index("updated_at", resource_id)

    def history(self, key: HistoryKey) -> str:
        """The sorted set of one working memory's versions (score = version number)."""
        return f"{self.prefix}{HISTORY_PART}{dump_json([key.resource_id, key.thread_id])}"

    def history_keys(self, resource_id: str) -> str:
        """The set of every history key of ``resource_id`` (both scopes), for ``delete_resource``."""
        return f"{self.prefix}{HISTORY_KEYS_PART}{resource_id}"

    def thread_pattern(self) -> str:
        """``SCAN`` pattern of every thread document."""
        return f"{glob_escape(self.prefix)}{THREAD_PART}*"

    def resource_pattern(self) -> str:
        """``SCAN`` pattern of every resource document."""
        return f"{glob_escape(self.prefix)}{RESOURCE_PART}*"

    def index_pattern(self, order_by: OrderBy) -> str:
        """``SCAN`` pattern of every thread index ordered by ``order_by``."""
        return f"{glob_escape(self.prefix)}{INDEX_PART}{order_by}:*"

    def index_owner(self, order_by: OrderBy, key: str) -> str:
        """The resource id of a thread index key."""
        start = f"{self.prefix}{INDEX_PART}{order_by}:"
        if not key.startswith(start):
            raise ValueError(f"{key!r} is not a {order_by} thread index")
        return key[len(start) :]

    def everything_pattern(self) -> str:
        """``SCAN`` pattern of every key under the prefix (all keys when there is none)."""
        return f"{glob_escape(self.prefix)}*"
