"""``UpstashStorage``: workmem on Upstash Redis through its REST API.

See the package docstring for URLs, keys and the atomicity design.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Self, TypeVar

from workmem.changes import merge_document, updated_resource, updated_thread, with_thread_memory
from workmem.errors import (
    BackendBusyError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    UnreadableRecordError,
    ValidationError,
)
from workmem.records import UNSET, Direction, OrderBy, Resource, Scope, Thread, ThreadPage, Unset, trusted_thread
from workmem.storage import (
    Capabilities,
    MemoryStorage,
    check_create,
    check_list_args,
    check_owner,
    check_resource_update,
    check_scope,
    check_thread_update,
    thread_working_memory_to_merge,
)
from workmem.timestamps import utc_now
from workmem.validation import validate_id, validate_json_object

from .connection import RestClient, UpstashSettings
from .documents import decode_resource, decode_thread, encode_resource, encode_thread, epoch_ms
from .keys import KeySpace
from .scripts import CAS_DELETE, CAS_SET, INDEX_IF_UNCHANGED, LIST_PAGE, UNINDEX_IF_UNCHANGED, Script

__all__ = ["ReindexResult", "UpstashStorage"]

T = TypeVar("T")
_SCRIPTS: tuple[Script, ...] = (CAS_SET, CAS_DELETE, LIST_PAGE, INDEX_IF_UNCHANGED, UNINDEX_IF_UNCHANGED)
_MAX_ATTEMPTS = 1000
_BATCH = 200
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_RANK = 2**62
"""Ranks sent to Redis are clamped to this (it takes signed 64-bit integers; no index is that long)."""


@dataclass(frozen=True, slots=True)
class ReindexResult:
    """What :meth:`UpstashStorage.reindex` did."""

    threads: int
    """Thread documents found and (re)indexed."""
    removed: int
    """Stale index entries removed (threads deleted, or moved to another owner, by other writers)."""
    unreadable: tuple[str, ...] = ()
    """Ids of thread documents that could not be read (:class:`~workmem.errors.UnreadableRecordError`):
    skipped, their index entries left as they were, so ``list_threads`` names them in ``unreadable``."""


@dataclass(frozen=True, slots=True)
class _Write(Generic[T]):
    """One planned compare-and-set: the new document text (``None`` deletes) and what the call returns."""

    text: str | None
    result: T
    thread: Thread | None = None
    """The thread whose index entries the write maintains (thread documents only)."""


@dataclass(frozen=True, slots=True)
class _Done(Generic[T]):
    """Nothing to write; the call returns ``result``."""

    result: T


_Plan = Callable[[str | None], "_Write[T] | _Done[T]"]


class UpstashStorage(MemoryStorage):
    """Resources and threads as Mastra's JSON documents, with per-resource sorted-set thread indexes."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=True, persistent=True)

    def __init__(self, settings: UpstashSettings) -> None:
        self._settings = settings
        self.keys = KeySpace(settings.prefix)
        self._client = RestClient(settings)
        self._closed = False
        try:
            self._client.load(_SCRIPTS)
        except BaseException:
            self._client.close()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        check_create(options.pop("create", True))  # nothing to create: keys are written as they are needed
        return cls(UpstashSettings.from_url(url, options))

    def __repr__(self) -> str:
        return f"UpstashStorage(url={self._settings.rest_url!r}, prefix={self._settings.prefix!r})"

    # -- plumbing ------------------------------------------------------------------

    def _get(self, key: str) -> str | None:
        value = self._client.call("GET", key)
        return value if isinstance(value, str) else None

    def _cas(self, key: str, plan: _Plan[T]) -> T:
        """Read ``key``, let ``plan`` compute the write, apply it if nothing changed meanwhile, else retry."""
        current = self._get(key)
        for attempt in range(_MAX_ATTEMPTS):
            step = plan(current)
            if isinstance(step, _Done):
                return step.result
            applied, current = self._apply(key, current, step)
            if applied:
                return step.result
            time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))
        raise BackendBusyError(f"gave up on {key!r} after {_MAX_ATTEMPTS} conflicting concurrent writes")

    def _apply(self, key: str, expected: str | None, step: _Write[Any]) -> tuple[bool, str | None]:
        if step.text is None:
            assert step.thread is not None and expected is not None
            keys = [key, *self.keys.thread_indexes(step.thread.resource_id)]
            reply = self._client.run(CAS_DELETE, keys, [expected, step.thread.id])
        else:
            keys = [key]
            args: list[str | int] = ["0" if expected is None else "1", expected or "", step.text]
            if step.thread is not None:
                keys += self.keys.thread_indexes(step.thread.resource_id)
                args += [step.thread.id, epoch_ms(step.thread.created_at), epoch_ms(step.thread.updated_at)]
            reply = self._client.run(CAS_SET, keys, args)
        if reply[0] == 1:
            return True, None
        return False, reply[1] if len(reply) > 1 else None

    # -- resources -----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        validate_id(resource_id, "resource id")
        key = self.keys.resource(resource_id)
        text = self._get(key)
        return None if text is None else decode_resource(text, key, resource_id)[0]

    def save_resource(self, resource: Resource) -> Resource:
        if not isinstance(resource, Resource):
            raise ValidationError(f"expected a Resource, got {type(resource).__name__}")
        self._client.call("SET", self.keys.resource(resource.id), encode_resource(resource))
        return resource

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        validate_id(resource_id, "resource id")
        new_memory, new_metadata = check_resource_update(working_memory, metadata)
        key = self.keys.resource(resource_id)

        def plan(current: str | None) -> _Write[Resource]:
            old, raw = (None, None) if current is None else decode_resource(current, key, resource_id)
            new = updated_resource(old, resource_id, new_memory, new_metadata, utc_now())
            return _Write(encode_resource(new, raw), new)

        return self._cas(key, plan)

    # -- threads -------------------------------------------------------------------

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        validate_id(thread_id, "thread id")
        if resource_id is not None:
            validate_id(resource_id, "resource id")
        key = self.keys.thread(thread_id)
        text = self._get(key)
        if text is None:
            return None
        thread = decode_thread(text, key, thread_id)[0]
        return None if resource_id is not None and thread.resource_id != resource_id else thread

    def create_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        key = self.keys.thread(thread.id)

        def plan(current: str | None) -> _Write[Thread]:
            if current is not None:
                raise ThreadExistsError(thread.id)
            return _Write(encode_thread(thread), thread, thread)

        # The script writes only while the key is missing (else it returns the text, and plan raises).
        return self._cas(key, plan)

    def save_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        key = self.keys.thread(thread.id)

        def plan(current: str | None) -> _Write[Thread]:
            if current is None:
                return _Write(encode_thread(thread), thread, thread)
            old, raw = decode_thread(current, key, thread.id)
            if old.resource_id != thread.resource_id:
                raise ThreadOwnershipError(thread.id, thread.resource_id)
            new = dataclasses.replace(old, title=thread.title, metadata=thread.metadata, updated_at=utc_now())
            return _Write(encode_thread(new, raw), new, new)

        return self._cas(key, plan)

    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Thread:
        validate_id(thread_id, "thread id")
        new_title, new_metadata = check_thread_update(title, metadata)
        key = self.keys.thread(thread_id)

        def plan(current: str | None) -> _Write[Thread]:
            if current is None:
                raise ThreadNotFoundError(thread_id)
            old, raw = decode_thread(current, key, thread_id)
            new = updated_thread(old, new_title, new_metadata, utc_now())
            return _Write(encode_thread(new, raw), new, new)

        return self._cas(key, plan)

    def delete_thread(self, thread_id: str) -> bool:
        validate_id(thread_id, "thread id")
        key = self.keys.thread(thread_id)

        def plan(current: str | None) -> _Write[bool] | _Done[bool]:
            if current is None:
                return _Done(False)
            return _Write(None, True, self._deletable(current, key, thread_id))

        return self._cas(key, plan)

    def _deletable(self, text: str, key: str, thread_id: str) -> Thread:
        """The thread to delete, for its index entries; an unreadable one as far as its owner can be read."""
        try:
            return decode_thread(text, key, thread_id)[0]
        except UnreadableRecordError:
            try:
                owner = json.loads(text).get("resourceId")
            except (ValueError, RecursionError, AttributeError):
                owner = None
            # No readable owner: only the document goes; list_threads skips the stale entry, reindex() removes it.
            return trusted_thread(thread_id, owner if isinstance(owner, str) else "", "", None, _EPOCH, _EPOCH)

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        # Redis takes ranks as signed 64-bit integers: a page past 2**62 is past every index, and empty.
        stop = -1 if query.per_page is None else min(query.offset + query.per_page - 1, _MAX_RANK)
        reply = self._client.run(
            LIST_PAGE,
            [self.keys.thread_index(query.order_by, query.resource_id)],
            [self.keys.thread_key_start, min(query.offset, _MAX_RANK), stop, query.direction],
        )

        def read(entry: tuple[str, str]) -> Thread | None:
            thread_id, text = entry
            if not text:
                return None  # deleted by a writer that keeps no index; reindex() removes the entry
            thread = decode_thread(text, self.keys.thread(thread_id), thread_id)[0]
            return thread if thread.resource_id == query.resource_id else None

        entries = [(reply[index], reply[index + 1]) for index in range(1, len(reply), 2)]
        return query.read_page(entries, read, int(reply[0]))

    # -- working memory ------------------------------------------------------------

    def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
    ) -> dict[str, Any]:
        target = check_scope(scope, resource_id, thread_id)
        valid_patch = validate_json_object(patch, "patch")

        if target.scope == "resource":
            assert target.resource_id is not None
            owner = target.resource_id
            key = self.keys.resource(owner)

            def plan_resource(current: str | None) -> _Write[dict[str, Any]]:
                old, raw = (None, None) if current is None else decode_resource(current, key, owner)
                merged, text = merge_document(old.working_memory if old else None, valid_patch)
                new = updated_resource(old, owner, text, UNSET, utc_now())
                return _Write(encode_resource(new, raw), merged)

            return self._cas(key, plan_resource)

        assert target.thread_id is not None
        key = self.keys.thread(target.thread_id)

        def plan_thread(current: str | None) -> _Write[dict[str, Any]]:
            if current is None:
                raise ThreadNotFoundError(str(target.thread_id))
            old, raw = decode_thread(current, key, target.thread_id)
            check_owner(old, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(old.metadata), valid_patch)
            new = with_thread_memory(old, text, utc_now())
            return _Write(encode_thread(new, raw), merged, new)

        return self._cas(key, plan_thread)

    # -- maintenance ---------------------------------------------------------------

    def _scan(self, pattern: str) -> list[str]:
        keys: list[str] = []
        cursor: int | str = 0
        while True:
            cursor, batch = self._client.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            keys.extend(batch)
            if int(cursor) == 0:
                return sorted(set(keys))

    def _mget(self, keys: list[str]) -> list[str | None]:
        values: list[str | None] = []
        for start in range(0, len(keys), _BATCH):
            values.extend(self._client.call("MGET", *keys[start : start + _BATCH]))
        return values

    def reindex(self) -> ReindexResult:
        """Rebuild the thread indexes from the thread documents; safe to run while others write.

        workmem keeps its indexes exact on every write it makes. Run this after
        threads were written, moved or deleted by something that keeps no index
        -- the TypeScript ``@mastra/upstash`` adapter, a restore, a hand edit --
        and before relying on ``list_threads`` for those threads. It reads every
        thread key (O(number of threads)); each index change is applied only if
        the document is still the one read, so concurrent writes are never undone.
        """
        start = len(self.keys.thread_key_start)
        doc_keys = self._scan(self.keys.thread_pattern())
        owners: dict[str, tuple[str, str]] = {}  # thread id -> (owner, document text)
        unreadable: list[str] = []
        indexed = 0
        for begin in range(0, len(doc_keys), _BATCH):
            batch_keys = doc_keys[begin : begin + _BATCH]
            keys: list[str] = []
            args: list[str | int] = []
            for key, text in zip(batch_keys, self._mget(batch_keys), strict=True):
                if text is None:
                    continue
                try:
                    thread = decode_thread(text, key, key[start:])[0]
                except UnreadableRecordError:
                    unreadable.append(key[start:])  # skipped: its index entries stay as they are
                    continue
                owners[key[start:]] = (thread.resource_id, text)
                keys += [key, *self.keys.thread_indexes(thread.resource_id)]
                args += [text, key[start:], epoch_ms(thread.created_at), epoch_ms(thread.updated_at)]
            if keys:
                indexed += int(self._client.run(INDEX_IF_UNCHANGED, keys, args))
        removed = 0
        order: OrderBy
        for order in ("created_at", "updated_at"):
            for index_key in self._scan(self.keys.index_pattern(order)):
                owner = self.keys.index_owner(order, index_key)
                members: list[str] = self._client.call("ZRANGE", index_key, 0, -1)
                stale = [m for m in members if owners.get(m, ("", ""))[0] != owner]
                for begin in range(0, len(stale), _BATCH):
                    chunk = stale[begin : begin + _BATCH]
                    texts = self._mget([self.keys.thread(m) for m in chunk])
                    keys, args = [], []
                    for member, text in zip(chunk, texts, strict=True):
                        if text is not None and self._owned_or_unreadable(text, member, owner):
                            continue  # written since the scan (the entry is right), or unreadable (left alone)
                        keys += [self.keys.thread(member), index_key]
                        args += [text or "", member]
                    if keys:
                        removed += int(self._client.run(UNINDEX_IF_UNCHANGED, keys, args))
        return ReindexResult(indexed, removed, tuple(sorted(set(unreadable))))

    def _owned_or_unreadable(self, text: str, thread_id: str, owner: str) -> bool:
        try:
            return decode_thread(text, self.keys.thread(thread_id), thread_id)[0].resource_id == owner
        except UnreadableRecordError:
            return True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()
