"""Working memory's history: the versions a change records, what a hook is told to record, an erased user.

With ``workmem.connect(url, history=...)`` every change of working memory, in
either scope, records a :class:`MemoryVersion` in the same atomic step as the
change: the text after it, the time, the kind of change and the caller's
``source``. Versions of one working memory are numbered 1, 2, 3, ... with no gap
and no repeat; retention (``history=50``) drops the oldest in that same step.
History lives beside Mastra's tables and keys (``workmem_memory_history`` and its
counterparts), never in them.

This module holds the records and the checks, no I/O. An adapter receives a
:class:`Recording` with each write it must record and writes the version itself,
atomically with the write (see :class:`~workmem.hooks.StorageHooks`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, get_args

from workmem.errors import ValidationError
from workmem.records import Scope
from workmem.timestamps import normalize
from workmem.validation import validate_id, validated_json_object

__all__ = [
    "HISTORY_TABLE",
    "MAX_SOURCE_BYTES",
    "ErasedResource",
    "HistoryKey",
    "HistoryPage",
    "HistoryPolicy",
    "MemoryVersion",
    "Recording",
    "VersionKind",
    "check_history",
    "check_source",
    "check_version",
    "history_page",
    "kept_versions",
    "with_version",
]

VersionKind = Literal["set", "merge", "restore", "import"]
"""How a version came to be: a text written whole (``set_working_memory``, ``update_resource``,
``update_thread``), a merge patch applied, an earlier version restored, a record imported."""
VERSION_KINDS: Final[tuple[str, ...]] = get_args(VersionKind)

HISTORY_TABLE: Final = "workmem_memory_history"
"""The table (collection, key prefix) that holds history, beside Mastra's ``mastra_threads``/``mastra_resources``."""

MAX_SOURCE_BYTES: Final = 16 * 1024
"""The largest ``source`` a version carries, as compact JSON (UTF-8 bytes)."""


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    """What ``connect(url, history=...)`` asked for: record versions, keeping at most :attr:`keep` of each memory."""

    keep: int | None = None
    """The newest versions kept per working memory; ``None`` keeps every version."""


def check_history(value: object) -> HistoryPolicy | None:
    """The policy of ``connect``'s ``history``: ``None``/``False`` off, ``True`` all, an int N the newest N."""
    if value is None or value is False:
        return None
    if value is True:
        return HistoryPolicy()
    if isinstance(value, HistoryPolicy):
        return value if value.keep is None else HistoryPolicy(_keep(value.keep))
    if isinstance(value, int):
        return HistoryPolicy(_keep(value))
    raise ValidationError(f"history must be True, False, None or a number of versions to keep, not {value!r}")


def _keep(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ValidationError(f"history must keep from 1 to 1000000 versions, not {value!r}")
    return value


def check_source(value: object) -> tuple[dict[str, Any] | None, str | None]:
    """A caller's ``source``: a JSON object of at most :data:`MAX_SOURCE_BYTES`, and its compact JSON text."""
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        raise ValidationError(f"source must be a JSON object (a mapping) or None, not {type(value).__name__}")
    source, text = validated_json_object(value, "source")
    if len(text.encode()) > MAX_SOURCE_BYTES:
        raise ValidationError(f"source is {len(text.encode())} bytes as JSON; at most {MAX_SOURCE_BYTES}")
    return source, text


def check_version(value: object, what: str = "version") -> int:
    """A version number: an ``int`` ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{what} must be an int from 1, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class HistoryKey:
    """Which working memory a version belongs to: a resource's (``thread_id`` ``None``) or one of its threads'."""

    resource_id: str
    """The resource, or the thread's owner (history is erased with its user)."""
    thread_id: str | None = None
    """The thread, for thread-scoped working memory; ``None`` for the resource's own."""

    @property
    def scope(self) -> Scope:
        return "resource" if self.thread_id is None else "thread"

    @property
    def memory_id(self) -> str:
        """The id of the record that holds this working memory: the thread's, else the resource's."""
        return self.resource_id if self.thread_id is None else self.thread_id


@dataclass(frozen=True, slots=True)
class Recording:
    """What a write hook records, when history is on: the version's kind and source, and the retention.

    The hook writes, in the atomic step of the change, a :class:`MemoryVersion`
    numbered one above the newest of that working memory (1 for the first),
    whose ``content`` is the working memory after the change and ``changed_at``
    the time of the change; then drops what :func:`kept_versions` says is over
    :attr:`keep`. A refused write records nothing.
    """

    kind: VersionKind
    at: datetime
    """The time of the call: the version's ``changed_at`` (a write's ``now`` where it has one, the same time; the
    timestamps of the records ``create_thread`` and ``save_resource`` are given are the caller's, not this)."""
    source: dict[str, Any] | None = None
    source_text: str | None = None
    """``source`` as compact JSON (serialized once, at the door)."""
    keep: int | None = None

    def version(self, key: HistoryKey, number: int, content: str | None, changed_at: datetime) -> MemoryVersion:
        """The version this recording makes of ``key``'s working memory (for adapters that build it in Python)."""
        return MemoryVersion(key.resource_id, key.thread_id, number, content, changed_at, self.kind, self.source)


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """One version of one working memory: what it said after a change, when, how, and who wrote it."""

    resource_id: str
    """The resource (for thread scope, the thread's owner)."""
    thread_id: str | None
    """The thread, in thread scope; ``None`` in resource scope."""
    version: int
    """1 for the first version of this working memory, then one more for each change."""
    content: str | None
    """The working memory after the change (``None``: cleared)."""
    changed_at: datetime
    """When the change happened (UTC, milliseconds)."""
    kind: VersionKind
    """``"set"``, ``"merge"``, ``"restore"`` or ``"import"``."""
    source: dict[str, Any] | None = None
    """What the caller said wrote it (the agent layer: ``threadId``, ``agent``, ``toolCallId``, ...)."""

    def __post_init__(self) -> None:
        validate_id(self.resource_id, "resource id")
        if self.thread_id is not None:
            validate_id(self.thread_id, "thread id")
        check_version(self.version)
        if self.kind not in VERSION_KINDS:
            raise ValidationError(f"kind must be one of {', '.join(VERSION_KINDS)}, not {self.kind!r}")
        if self.content is not None and not isinstance(self.content, str):
            raise ValidationError(f"content must be a str or None, not {type(self.content).__name__}")
        object.__setattr__(self, "changed_at", normalize(self.changed_at))
        object.__setattr__(self, "source", check_source(self.source)[0])

    @property
    def scope(self) -> Scope:
        return "resource" if self.thread_id is None else "thread"

    @property
    def key(self) -> HistoryKey:
        return HistoryKey(self.resource_id, self.thread_id)


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """Versions of one working memory, newest first."""

    versions: tuple[MemoryVersion, ...]
    next_before: int | None = None
    """Pass as ``before`` for the next (older) page; ``None``: no older version."""


def history_page(versions: Sequence[MemoryVersion], limit: int) -> HistoryPage:
    """The page of ``versions`` fetched newest first (at most ``limit``)."""
    chosen = tuple(versions[:limit])
    more = len(chosen) == limit and chosen[-1].version > 1
    return HistoryPage(chosen, chosen[-1].version if more else None)


def kept_versions(newest: int, keep: int | None) -> int:
    """The oldest version number retention keeps once ``newest`` is written (drop every version below it)."""
    return 1 if keep is None else max(1, newest - keep + 1)


@dataclass(frozen=True, slots=True)
class ErasedResource:
    """What ``delete_resource`` removed (all empty when there was nothing left to remove)."""

    resource_id: str
    resource: bool
    """Whether the resource record itself existed."""
    threads: tuple[str, ...]
    """The ids of the threads it owned, each removed with its working memory."""
    versions: int
    """How many history versions of both scopes were removed."""

    @property
    def removed_anything(self) -> bool:
        return self.resource or bool(self.threads) or self.versions > 0


def with_version(
    versions: Sequence[MemoryVersion], recording: Recording, key: HistoryKey, content: str | None, changed_at: datetime
) -> list[MemoryVersion]:
    """``versions`` of ``key`` (oldest first) with the one ``recording`` makes appended, retention applied.

    For an adapter that keeps a working memory's versions as one value it rewrites in its atomic step.
    """
    number = versions[-1].version + 1 if versions else 1
    oldest = kept_versions(number, recording.keep)
    return [*(v for v in versions if v.version >= oldest), recording.version(key, number, content, changed_at)]
