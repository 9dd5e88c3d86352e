"""The Upstash adapter: workmem on Upstash Redis through its REST API, sync and async.

:class:`UpstashHooks` holds every hook once, as coroutines over the client's two
I/O primitives (``execute`` one command, ``evaluate`` one Lua script): each
write is a plan (a pure function of the current document text) applied by one
compare-and-set script, retried on conflict. :class:`UpstashStorage` runs them
on the blocking ``upstash_redis`` client, :class:`AsyncUpstashStorage` on its
``asyncio`` client. See the package docstring for URLs, keys and the atomicity design.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar, overload

from workmem.aio import AsyncMemoryStorage
from workmem.errors import BackendBusyError, ThreadExistsError, ThreadNotFoundError, UnreadableRecordError
from workmem.hooks import Capabilities, ListQuery, ScopeTarget, StorageHooks, read_record_page
from workmem.kit import (
    ErasedResource,
    HistoryKey,
    MemoryStorage,
    MemoryVersion,
    MergeChange,
    Recording,
    ResourceChange,
    ThreadChange,
    backoff,
    check_create,
    check_owner,
    merge_document,
    replaced_thread,
    run_sync,
    thread_working_memory,
    thread_working_memory_to_merge,
    updated_resource,
    updated_thread,
    with_thread_memory,
)
from workmem.records import UNSET, OrderBy, RecordPage, Resource, Thread, ThreadPage, trusted_thread

from .documents import decode_resource, decode_thread, encode_resource, encode_thread, epoch_ms, raw_owner
from .keys import KeySpace, glob_escape
from .listing import owner_filter, scanned_page
from .port import AsyncRestClient, BaseRestClient, RestClient, ready
from .scripts import (
    ADD_IDS,
    CAS_DELETE,
    CAS_SET,
    ERASE_RESOURCE,
    ERASE_THREADS,
    ID_PAGE,
    INDEX_IF_UNCHANGED,
    INSERT_ABSENT,
    INSERT_VERSIONS,
    LIST_PAGE,
    OWNED_THREADS,
    PUT,
    UNINDEX_IF_UNCHANGED,
)
from .settings import UpstashSettings
from .versions import decode_version, imported_payload, recorded_payload

__all__ = ["AsyncUpstashStorage", "ReindexResult", "UpstashHooks", "UpstashStorage"]

T = TypeVar("T")
_log = logging.getLogger("workmem.adapters.upstash")
_MAX_ATTEMPTS = 1000
_BATCH = 200
_SCAN_COUNT = 1000
_LIST_SCAN_COUNT = 10_000
"""``SCAN ... COUNT`` of a ``listing="scan"`` list (each round trip walks this many slots of the keyspace)."""
_OWNED_KEYS = 1000
"""Thread documents read by one :data:`OWNED_THREADS` script (bounds its run time and request size)."""
_SCRIPT_BYTES = 512 * 1024
"""About how much text one bulk-insert script carries (a batch closes before it would exceed this)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_RANK = 2**62
"""Ranks sent to Redis are clamped to this (it takes signed 64-bit integers; no index is that long)."""


def _settings(url: str, options: dict[str, Any]) -> UpstashSettings:
    """The settings of ``url`` and ``options`` (``create`` is accepted: keys are written as they are needed)."""
    check_create(options.pop("create", True))
    return UpstashSettings.from_url(url, **options)


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
class _Version:
    """The version a write records, in its script: the history key, its owner's set of history keys, the payload."""

    history: str
    history_keys: str
    payload: str
    keep: int | None


@dataclass(frozen=True, slots=True)
class _Write(Generic[T]):
    """One planned compare-and-set: the new document text (``None`` deletes) and what the call returns."""

    text: str | None
    result: T
    thread: Thread | None = None
    """The thread whose index entries the write maintains (thread documents only)."""
    version: _Version | None = None
    """The history version the write records in the same script (history on and the write sets working memory)."""


@dataclass(frozen=True, slots=True)
class _Done(Generic[T]):
    """Nothing to write; the call returns ``result``."""

    result: T


_Plan = Callable[[str | None], "_Write[T] | _Done[T]"]


class UpstashHooks(StorageHooks):
    """Resources and threads as Mastra's JSON documents, with per-resource sorted-set thread indexes.

    The hooks, once, over :class:`~.port.BaseRestClient` (blocking or async).
    """

    capabilities: ClassVar[Capabilities] = Capabilities(
        cross_process_atomic=True, persistent=True, history=True, erase=True
    )

    def __init__(self, settings: UpstashSettings, client: BaseRestClient) -> None:
        self._settings = settings
        self.keys = KeySpace(settings.prefix)
        self._client = client
        self._foreign_seen = False
        if settings.listing == "scan":  # a listing SCANs in several round trips: not one instant's page
            vars(self)["capabilities"] = replace(self.capabilities, snapshot_listing=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self._settings.rest_url!r}, prefix={self._settings.prefix!r})"

    # -- plumbing ------------------------------------------------------------------

    async def _get(self, key: str) -> str | None:
        value = await self._client.execute("GET", key)
        return value if isinstance(value, str) else None

    async def _cas(self, key: str, record_id: str, plan: _Plan[T]) -> T:
        """Read ``key`` (the document of ``record_id``), let ``plan`` compute the write, apply it if nothing
        changed meanwhile, else retry."""
        current = await self._get(key)
        for attempt in range(_MAX_ATTEMPTS):
            step = plan(current)
            if isinstance(step, _Done):
                return step.result
            applied, current = await self._apply(key, record_id, current, step)
            if applied:
                return step.result
            await self._pause(backoff(attempt))
        raise BackendBusyError(f"gave up on {key!r} after {_MAX_ATTEMPTS} conflicting concurrent writes")

    def _version(
        self, record: Recording | None, key: HistoryKey, content: str | None, now: datetime
    ) -> _Version | None:
        """What a write told to ``record`` stores in ``key``'s history (``None``: nothing, history is off)."""
        if record is None:
            return None
        payload = recorded_payload(record, content, now)
        return _Version(self.keys.history(key), self.keys.history_keys(key.resource_id), payload, record.keep)

    async def _apply(
        self, key: str, record_id: str, expected: str | None, step: _Write[Any]
    ) -> tuple[bool, str | None]:
        """One compare-and-set script: all of the write (document, id set, index entries, version) or none of it."""
        if step.text is None:
            assert step.thread is not None and expected is not None
            owner = step.thread.resource_id
            keys = [key, self.keys.thread_ids, *self.keys.thread_indexes(owner)]
            keys += [self.keys.history(HistoryKey(owner, record_id)), self.keys.history_keys(owner)]
            reply = await self._client.evaluate(CAS_DELETE, keys, [expected, record_id])
            if reply[0] == 1 and reply[1] == 0:  # gone already (a racing delete): this one deleted nothing
                return False, None
        else:
            args: list[str | int] = ["0" if expected is None else "1", expected or "", step.text, record_id]
            if step.thread is None:
                keys = [key, self.keys.resource_ids]
            else:
                keys = [key, self.keys.thread_ids, *self.keys.thread_indexes(step.thread.resource_id)]
                args += [epoch_ms(step.thread.created_at), epoch_ms(step.thread.updated_at)]
            if step.version is not None:
                version = step.version
                keys += [version.history, version.history_keys]
                args += [] if step.thread is not None else ["", ""]
                args += [version.payload, "" if version.keep is None else version.keep]
            reply = await self._client.evaluate(CAS_SET, keys, args)
        if reply[0] == 1:
            return True, None
        return False, reply[1] if len(reply) > 1 else None

    # -- resources -----------------------------------------------------------------

    async def _get_resource(self, resource_id: str) -> Resource | None:
        key = self.keys.resource(resource_id)
        text = await self._get(key)
        return None if text is None else decode_resource(text, key, resource_id)[0]

    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        key = self.keys.resource(resource.id)
        if record is None:
            await self._client.evaluate(PUT, [key, self.keys.resource_ids], [encode_resource(resource), resource.id])
            return resource

        def plan(current: str | None) -> _Write[Resource]:
            # A version only where the memory read (none: None) differs: the script writes only while it is that one.
            old = None if current is None else decode_resource(current, key, resource.id)[0]
            changed = (None if old is None else old.working_memory) != resource.working_memory
            memory = resource.working_memory
            version = self._version(record if changed else None, HistoryKey(resource.id), memory, record.at)
            return _Write(encode_resource(resource), resource, version=version)

        return await self._cas(key, resource.id, plan)

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        key = self.keys.resource(resource_id)

        def plan(current: str | None) -> _Write[Resource]:
            # The size limit is decided on the document read: the script writes only while it is still that one.
            old, raw = (None, None) if current is None else decode_resource(current, key, resource_id)
            new = updated_resource(old, resource_id, change)
            version = self._version(change.record, HistoryKey(resource_id), new.working_memory, change.now)
            return _Write(encode_resource(new, raw), new, version=version)

        return await self._cas(key, resource_id, plan)

    # -- threads -------------------------------------------------------------------

    async def _get_thread(self, thread_id: str) -> Thread | None:
        key = self.keys.thread(thread_id)
        text = await self._get(key)
        return None if text is None else decode_thread(text, key, thread_id)[0]

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        memory = thread_working_memory(thread.metadata)
        history_key = HistoryKey(thread.resource_id, thread.id)
        version = None if record is None else self._version(record, history_key, memory, record.at)

        def plan(current: str | None) -> _Write[Thread]:
            if current is not None:
                raise ThreadExistsError(thread.id)
            return _Write(encode_thread(thread), thread, thread, version)

        # The script writes only while the key is missing (else it returns the text, and plan raises).
        return await self._cas(self.keys.thread(thread.id), thread.id, plan)

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        key = self.keys.thread(thread.id)

        def plan(current: str | None) -> _Write[Thread]:
            old, raw = (None, None) if current is None else decode_thread(current, key, thread.id)
            new = replaced_thread(old, thread, now)
            memory = thread_working_memory(new.metadata)
            changed = (None if old is None else thread_working_memory(old.metadata)) != memory
            version = self._version(record if changed else None, HistoryKey(new.resource_id, new.id), memory, now)
            return _Write(encode_thread(new, raw), new, new, version)

        return await self._cas(key, thread.id, plan)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        key = self.keys.thread(thread_id)

        def plan(current: str | None) -> _Write[Thread]:
            if current is None:
                raise ThreadNotFoundError(thread_id)
            old, raw = decode_thread(current, key, thread_id)
            new = updated_thread(old, change)
            memory = thread_working_memory(new.metadata)
            version = self._version(change.record, HistoryKey(new.resource_id, thread_id), memory, change.now)
            return _Write(encode_thread(new, raw), new, new, version)

        return await self._cas(key, thread_id, plan)

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        key = self.keys.thread(thread_id)

        def plan(current: str | None) -> _Write[bool] | _Done[bool]:
            if current is None:
                return _Done(False)
            if owner is not None:
                check_owner(decode_thread(current, key, thread_id)[0], owner)
            return _Write(None, True, _deletable(current, key, thread_id))

        return await self._cas(key, thread_id, plan)

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        if self._settings.listing == "scan":
            return scanned_page(query, await self._owned_documents(query.resource_id), self.keys.thread)
        # Redis takes ranks as signed 64-bit integers: a page past 2**62 is past every index, and empty.
        stop = -1 if query.per_page is None else min(query.offset + query.per_page - 1, _MAX_RANK)
        reply = await self._client.evaluate(
            LIST_PAGE,
            [self.keys.thread_index(query.order_by, query.resource_id)],
            [self.keys.thread_key_start, min(query.offset, _MAX_RANK), stop, query.direction],
        )

        def read(entry: tuple[str, str]) -> Thread | None:
            thread_id, text = entry
            if not text:
                self._foreign_write(thread_id, "deleted")  # reindex() removes the entry
                return None
            thread = decode_thread(text, self.keys.thread(thread_id), thread_id)[0]
            if thread.resource_id != query.resource_id:
                self._foreign_write(thread_id, f"moved to another resource ({thread.resource_id!r})")
                return None
            return thread

        entries = [(reply[index], reply[index + 1]) for index in range(1, len(reply), 2)]
        return query.read_page(entries, read, int(reply[0]))

    def _foreign_write(self, thread_id: str, what: str) -> None:
        """Log, once per storage, that an index entry shows a write workmem did not make (a list may miss threads)."""
        if not self._foreign_seen:
            self._foreign_seen = True
            _log.warning(
                "list_threads: thread %r was %s by a program that keeps no workmem index (the TypeScript "
                "@mastra/upstash adapter?): with listing='index' a list misses the threads such a program creates "
                "or moves in, and counts the ones it deleted or moved out, until reindex() runs. Where another "
                "program writes threads, connect with listing='scan'",
                thread_id,
                what,
            )

    async def _owned_documents(self, resource_id: str) -> dict[str, str]:
        """Thread id -> document text of every thread document that may be ``resource_id``'s (``listing="scan"``).

        One ``SCAN`` of the thread keys (:data:`_LIST_SCAN_COUNT` slots a round trip, as ``@mastra/upstash``
        scans); every :data:`_OWNED_KEYS` keys found, one :data:`OWNED_THREADS` script reads their documents and
        keeps the resource's, so only those travel. Not a snapshot: a thread created, moved or deleted while
        the scan runs may be seen either way (``capabilities.snapshot_listing`` is ``False``).
        """
        start = self.keys.thread_key_start
        found: dict[str, str] = {}
        pending: list[str] = []
        cursor: int | str = 0
        while True:
            cursor, batch = await self._client.execute(
                "SCAN", cursor, "MATCH", self.keys.thread_pattern(), "COUNT", _LIST_SCAN_COUNT
            )
            pending += (key for key in batch if key.startswith(start))
            done = int(cursor) == 0
            while pending and (done or len(pending) >= _OWNED_KEYS):
                keys, pending = pending[:_OWNED_KEYS], pending[_OWNED_KEYS:]
                reply = await self._client.evaluate(OWNED_THREADS, keys, owner_filter(resource_id))
                found.update((reply[i][len(start) :], reply[i + 1]) for i in range(0, len(reply), 2))
            if done:
                return found

    # -- working memory ------------------------------------------------------------

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars, record = change.patch, change.now, change.max_chars, change.record
        # Merged and measured in Python on the document read (Lua's cjson writes other JSON text); the
        # compare-and-set script stores the result only while the document is still that one.
        if target.scope == "resource":
            assert target.resource_id is not None
            owner = target.resource_id
            key = self.keys.resource(owner)

            def plan_resource(current: str | None) -> _Write[dict[str, Any]]:
                old, raw = (None, None) if current is None else decode_resource(current, key, owner)
                merged, text = merge_document(old.working_memory if old else None, patch, max_chars)
                new = updated_resource(old, owner, ResourceChange(text, UNSET, now))
                version = self._version(record, HistoryKey(owner), text, now)
                return _Write(encode_resource(new, raw), merged, version=version)

            return await self._cas(key, owner, plan_resource)

        assert target.thread_id is not None
        thread_id = target.thread_id
        key = self.keys.thread(thread_id)

        def plan_thread(current: str | None) -> _Write[dict[str, Any]]:
            if current is None:
                raise ThreadNotFoundError(thread_id)
            old, raw = decode_thread(current, key, thread_id)
            check_owner(old, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(old.metadata), patch, max_chars)
            new = with_thread_memory(old, text, now)
            version = self._version(record, HistoryKey(old.resource_id, thread_id), text, now)
            return _Write(encode_thread(new, raw), merged, new, version)

        return await self._cas(key, thread_id, plan_thread)

    # -- iteration and bulk writes -------------------------------------------------
    #
    # Every workmem write keeps the id sets exact in the same script as the document. Documents another
    # program wrote (the TypeScript adapter keeps no id set) are found by the first page of an iteration
    # (``after is None``): one SCAN of the kind's keys adds their ids (memory flat, batch by batch); ids
    # whose document is gone are dropped by the page script. So a record present for a whole iteration
    # is in the id set from its first page on, and ``ZRANGEBYLEX`` keyset pages return it exactly once.

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        return await self._page("resource", self.keys.resource_ids, self.keys.resource_key_start, after, limit)

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        return await self._page("thread", self.keys.thread_ids, self.keys.thread_key_start, after, limit)

    @overload
    async def _page(
        self, kind: Literal["resource"], ids_key: str, key_start: str, after: str | None, limit: int
    ) -> RecordPage[Resource]: ...

    @overload
    async def _page(
        self, kind: Literal["thread"], ids_key: str, key_start: str, after: str | None, limit: int
    ) -> RecordPage[Thread]: ...

    async def _page(
        self, kind: Literal["resource", "thread"], ids_key: str, key_start: str, after: str | None, limit: int
    ) -> RecordPage[Resource] | RecordPage[Thread]:
        """The ids after ``after`` in the id set ``ids_key``, in byte order, with their documents: one script."""
        if after is None:
            await self._add_scanned_ids(ids_key, key_start)
        reply = await self._client.evaluate(ID_PAGE, [ids_key], [key_start, after or "", limit])
        rows: list[tuple[str, str, str]] = [(reply[i], reply[i + 1], reply[i + 2]) for i in range(0, len(reply), 3)]
        found = [row for row in rows if row[1] != "m"]  # 'm': deleted by a writer that keeps no id set

        def key(row: tuple[str, str, str]) -> str:
            return row[0]

        def text_of(row: tuple[str, str, str]) -> str:
            record_id, state, text = row
            if state != "d":
                raise UnreadableRecordError(kind, record_id, f"{key_start + record_id!r} does not hold a string")
            return text

        def read_resource(row: tuple[str, str, str]) -> Resource:
            return decode_resource(text_of(row), key_start + row[0], row[0])[0]

        def read_thread(row: tuple[str, str, str]) -> Thread:
            return decode_thread(text_of(row), key_start + row[0], row[0])[0]

        next_after = rows[-1][0] if len(rows) >= limit else None
        if kind == "resource":
            resources = read_record_page(found, read_resource, key, limit)
            return RecordPage(resources.records, resources.unreadable, next_after)
        threads = read_record_page(found, read_thread, key, limit)
        return RecordPage(threads.records, threads.unreadable, next_after)

    async def _add_scanned_ids(self, ids_key: str, key_start: str) -> None:
        """Add to ``ids_key`` the id of every document under ``key_start`` (SCAN batch by batch, memory flat)."""
        pattern = f"{glob_escape(key_start)}*"
        cursor: int | str = 0
        while True:
            cursor, batch = await self._client.execute("SCAN", cursor, "MATCH", pattern, "COUNT", _SCAN_COUNT)
            ids = [key[len(key_start) :] for key in batch if key.startswith(key_start)]
            if ids:
                await self._client.evaluate(ADD_IDS, [ids_key], [key_start, *ids])
            if int(cursor) == 0:
                return

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        entries = (([self.keys.resource(r.id)], [r.id, encode_resource(r)]) for r in resources)
        return await self._insert_absent(self.keys.resource_ids, 1, entries)

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        def entry(t: Thread) -> tuple[list[str], list[str | int]]:
            keys = [self.keys.thread(t.id), *self.keys.thread_indexes(t.resource_id)]
            return keys, [t.id, encode_thread(t), epoch_ms(t.created_at), epoch_ms(t.updated_at)]

        entries = (entry(t) for t in threads)
        return await self._insert_absent(self.keys.thread_ids, 3, entries)

    async def _insert_absent(
        self, ids_key: str, width: int, entries: Iterable[tuple[Sequence[str], Sequence[str | int]]]
    ) -> frozenset[str]:
        """One :data:`INSERT_ABSENT` script per batch (at most :data:`_BATCH` records or about
        :data:`_SCRIPT_BYTES` of text); each record is inserted only where its document is missing."""
        present: set[str] = set()
        keys: list[str] = [ids_key]
        args: list[str | int] = [width]
        size = 0
        for entry_keys, entry_args in entries:
            cost = sum(len(str(part)) for part in (*entry_keys, *entry_args))
            if len(keys) > 1 and (size + cost > _SCRIPT_BYTES or len(keys) > _BATCH * width):
                present.update(await self._client.evaluate(INSERT_ABSENT, keys, args) or ())
                keys, args, size = [ids_key], [width], 0
            keys += entry_keys
            args += entry_args
            size += cost
        if len(keys) > 1:
            present.update(await self._client.evaluate(INSERT_ABSENT, keys, args) or ())
        return frozenset(present)

    async def _replace_thread(self, thread: Thread) -> bool:
        key = self.keys.thread(thread.id)

        def plan(current: str | None) -> _Write[bool] | _Done[bool]:
            owner, raw = (None, None) if current is None else _stored_owner(current, key, thread.id)
            if owner != thread.resource_id:
                return _Done(False)  # no such thread, or another owner's (or one whose owner cannot be read)
            return _Write(encode_thread(thread, raw), True, thread)

        # The script writes only while the document is still the one whose owner was checked.
        return await self._cas(key, thread.id, plan)

    # -- history and erasure -------------------------------------------------------
    #
    # A version is written by the write's own compare-and-set script (CAS_SET: numbered one above the newest,
    # retention applied, its key added to the owner's set of history keys); CAS_DELETE drops a thread's history
    # with the thread. delete_resource cannot be one script (the threads of a resource are found by a SCAN, and
    # one request carries a bounded batch): it is the steps of _delete_resource, each atomic, re-runnable.

    async def _history(self, key: HistoryKey, limit: int, before: int | None) -> list[MemoryVersion]:
        high = "+inf" if before is None else f"({before}"
        members = await self._client.execute(
            "ZREVRANGEBYSCORE", self.keys.history(key), high, "-inf", "LIMIT", 0, limit
        )
        return [decode_version(key, member) for member in members]

    async def _insert_versions(self, versions: Sequence[MemoryVersion]) -> int:
        added = 0
        for start in range(0, len(versions), _BATCH):
            keys: list[str] = []
            args: list[str | int] = []
            for version in versions[start : start + _BATCH]:
                keys += [self.keys.history(version.key), self.keys.history_keys(version.resource_id)]
                args += [version.version, imported_payload(version)]
            added += int(await self._client.evaluate(INSERT_VERSIONS, keys, args))
        return added

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        """The resource, its threads and the history of both scopes, in steps that are each one script.

        1. One ``SCAN`` of the thread documents finds the resource's threads (also those the TypeScript
           adapter wrote, which no index holds). 2. :data:`ERASE_THREADS` deletes them in batches, each thread
           with its index entries and history, each only while its document is the one whose owner was read.
           3. :data:`ERASE_RESOURCE` deletes the resource document, its indexes and every history key left
           (both scopes) -- unless the resource's index names a thread created since, which goes back to 2.
        An interrupted run leaves a part of the user; running it again removes the rest.
        """
        start = self.keys.thread_key_start
        pending = {
            thread_id: text
            for thread_id, text in (await self._owned_documents(resource_id)).items()
            if _stored_owner(text, start + thread_id, thread_id)[0] == resource_id
        }
        foreign: dict[str, str] = {}  # index entries of threads that are another resource's now
        threads: set[str] = set()
        versions = 0
        indexes = list(self.keys.thread_indexes(resource_id))
        history_keys = self.keys.history_keys(resource_id)
        for attempt in range(_MAX_ATTEMPTS):
            while pending:
                batch = _erase_batch(pending)
                keys = [self.keys.thread_ids, *indexes, history_keys]
                args: list[str | int] = []
                for thread_id in batch:
                    keys += [self.keys.thread(thread_id), self.keys.history(HistoryKey(resource_id, thread_id))]
                    args += [thread_id, pending.pop(thread_id)]
                reply = await self._client.evaluate(ERASE_THREADS, keys, args)
                versions += int(reply[0])
                for index in range(1, len(reply), 3):
                    thread_id, state, text = reply[index], reply[index + 1], reply[index + 2]
                    if state == "d":
                        threads.add(thread_id)
                    elif state == "c" and _stored_owner(text, start + thread_id, thread_id)[0] == resource_id:
                        pending[thread_id] = text  # rewritten since it was read: still the user's, again
            args = [resource_id, start]
            for thread_id, text in foreign.items():
                args += [thread_id, text]
            reply = await self._client.evaluate(
                ERASE_RESOURCE, [self.keys.resource(resource_id), self.keys.resource_ids, *indexes, history_keys], args
            )
            if reply[0] == 1:
                erased = ErasedResource(resource_id, reply[1] == 1, tuple(sorted(threads)), versions + int(reply[2]))
                return erased
            left: list[str] = reply[1:]
            for thread_id, text in zip(left, await self._mget([start + i for i in left]), strict=True):
                if text is None:
                    pending[thread_id] = ""  # gone: its index entries and history still go (state 'g')
                elif _stored_owner(text, start + thread_id, thread_id)[0] == resource_id:
                    pending[thread_id] = text  # created since the scan
                else:
                    foreign[thread_id] = text
            await self._pause(backoff(attempt))
        raise BackendBusyError(f"gave up erasing resource {resource_id!r} after {_MAX_ATTEMPTS} concurrent writes")

    # -- maintenance ---------------------------------------------------------------

    async def _scan(self, pattern: str) -> list[str]:
        keys: list[str] = []
        cursor: int | str = 0
        while True:
            cursor, batch = await self._client.execute("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            keys.extend(batch)
            if int(cursor) == 0:
                return sorted(set(keys))

    async def _mget(self, keys: list[str]) -> list[str | None]:
        values: list[str | None] = []
        for start in range(0, len(keys), _BATCH):
            values.extend(await self._client.execute("MGET", *keys[start : start + _BATCH]))
        return values

    async def _reindex(self) -> ReindexResult:
        """Rebuild the thread indexes from the thread documents; safe to run while others write.

        workmem keeps its indexes exact on every write it makes. Run this after
        threads were written, moved or deleted by something that keeps no index
        -- the TypeScript ``@mastra/upstash`` adapter, a restore, a hand edit --
        and before relying on ``list_threads`` for those threads. It reads every
        thread key (O(number of threads)); each index change is applied only if
        the document is still the one read, so concurrent writes are never undone.
        It also adds the ids of such records to the id sets that ``resource_page`` /
        ``thread_page`` walk (which the first page of every iteration does too).
        """
        await self._add_scanned_ids(self.keys.resource_ids, self.keys.resource_key_start)
        await self._add_scanned_ids(self.keys.thread_ids, self.keys.thread_key_start)
        start = len(self.keys.thread_key_start)
        doc_keys = await self._scan(self.keys.thread_pattern())
        owners: dict[str, tuple[str, str]] = {}  # thread id -> (owner, document text)
        unreadable: list[str] = []
        indexed = 0
        for begin in range(0, len(doc_keys), _BATCH):
            batch_keys = doc_keys[begin : begin + _BATCH]
            keys: list[str] = []
            args: list[str | int] = []
            for key, text in zip(batch_keys, await self._mget(batch_keys), strict=True):
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
                indexed += int(await self._client.evaluate(INDEX_IF_UNCHANGED, keys, args))
        removed = 0
        order: OrderBy
        for order in ("created_at", "updated_at"):
            for index_key in await self._scan(self.keys.index_pattern(order)):
                owner = self.keys.index_owner(order, index_key)
                members: list[str] = await self._client.execute("ZRANGE", index_key, 0, -1)
                stale = [m for m in members if owners.get(m, ("", ""))[0] != owner]
                for begin in range(0, len(stale), _BATCH):
                    chunk = stale[begin : begin + _BATCH]
                    texts = await self._mget([self.keys.thread(m) for m in chunk])
                    keys, args = [], []
                    for member, text in zip(chunk, texts, strict=True):
                        if text is not None and self._owned_or_unreadable(text, member, owner):
                            continue  # written since the scan (the entry is right), or unreadable (left alone)
                        keys += [self.keys.thread(member), index_key]
                        args += [text or "", member]
                    if keys:
                        removed += int(await self._client.evaluate(UNINDEX_IF_UNCHANGED, keys, args))
        return ReindexResult(indexed, removed, tuple(sorted(set(unreadable))))

    def _owned_or_unreadable(self, text: str, thread_id: str, owner: str) -> bool:
        try:
            return decode_thread(text, self.keys.thread(thread_id), thread_id)[0].resource_id == owner
        except UnreadableRecordError:
            return True

    async def _close(self) -> None:
        await self._client.shutdown()


def _stored_owner(text: str, key: str, thread_id: str) -> tuple[str | None, dict[str, Any] | None]:
    """The owner of a stored thread document and the document, as far as they can be read."""
    try:
        old, raw = decode_thread(text, key, thread_id)
    except UnreadableRecordError:
        return raw_owner(text)
    return old.resource_id, raw


def _erase_batch(pending: dict[str, str]) -> list[str]:
    """The thread ids of one :data:`ERASE_THREADS` script: at most :data:`_BATCH`, about :data:`_SCRIPT_BYTES`."""
    batch: list[str] = []
    size = 0
    for thread_id, text in pending.items():
        if batch and (len(batch) >= _BATCH or size + len(text) > _SCRIPT_BYTES):
            break
        batch.append(thread_id)
        size += len(text)
    return batch


def _deletable(text: str, key: str, thread_id: str) -> Thread:
    """The thread to delete, for its index entries; an unreadable one as far as its owner can be read."""
    try:
        return decode_thread(text, key, thread_id)[0]
    except UnreadableRecordError:
        owner = raw_owner(text)[0]
        # No readable owner: only the document goes; list_threads skips the stale entry, reindex() removes it.
        return trusted_thread(thread_id, owner or "", "", None, _EPOCH, _EPOCH)


class UpstashStorage(UpstashHooks, MemoryStorage):
    """The Upstash adapter, sync: the blocking ``upstash_redis.Redis`` client."""

    _client: RestClient

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        settings = _settings(url, options)
        return cls(settings, run_sync(ready(RestClient(settings))))

    def reindex(self) -> ReindexResult:
        """Rebuild the thread indexes from the thread documents (see :meth:`UpstashHooks._reindex`)."""
        return run_sync(self._reindex())


class AsyncUpstashStorage(UpstashHooks, AsyncMemoryStorage):
    """The Upstash adapter, async: the ``upstash_redis.asyncio.Redis`` client, on the same keys and scripts.

    Each write is one Lua script, so a cancelled call has written all of it or
    nothing, and the next call works.
    """

    _client: AsyncRestClient

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        settings = _settings(url, options)
        return cls(settings, await ready(AsyncRestClient(settings)))

    async def reindex(self) -> ReindexResult:
        """See :meth:`UpstashStorage.reindex`."""
        return await self._reindex()


UpstashStorage.async_adapter = "workmem.adapters.upstash.storage:AsyncUpstashStorage"
