"""In-process reference adapter: ``memory://`` (private) or ``memory://NAME`` (shared by name).

Thread-safe and atomic within one process (one lock per store); nothing is
persisted. Every connection to ``memory://NAME`` in a process sees the same
store, so the conformance suite's multi-connection checks mean the same here.
The store keeps records of its own: each comes in and goes out as a
:func:`~workmem.records.private_copy`, as the contract asks of returned records.
The hooks do no I/O, so one class body serves both APIs:
:class:`ReferenceStorage` (sync) and :class:`AsyncReferenceStorage`. (Their former names,
``InMemoryStorage`` and ``AsyncInMemoryStorage``, still import, with a :class:`DeprecationWarning`:
one letter pair away from ``MemoryStorage``, they read as the contract itself.)
"""

from __future__ import annotations

import bisect
import threading
import warnings
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Self, TypeVar
from urllib.parse import urlsplit

from workmem.errors import StorageClosedError, ThreadExistsError, ThreadNotFoundError, ValidationError
from workmem.kit import (
    AsyncMemoryStorage,
    Capabilities,
    ErasedResource,
    HistoryKey,
    ListQuery,
    MemoryStorage,
    MemoryVersion,
    MergeChange,
    Recording,
    RecordPage,
    Resource,
    ResourceChange,
    ScopeTarget,
    StorageHooks,
    Thread,
    ThreadChange,
    ThreadPage,
    Unset,
    check_create,
    check_owner,
    merge_document,
    private_copy,
    replaced_thread,
    thread_working_memory,
    thread_working_memory_to_merge,
    updated_resource,
    updated_thread,
    with_thread_memory,
    with_version,
)

__all__ = ["AsyncReferenceStorage", "ReferenceHooks", "ReferenceStorage"]


R = TypeVar("R", Resource, Thread)
V = TypeVar("V")


class _Records(dict[str, V]):
    """A dict that also keeps its keys sorted (code point order), so a page is a bisection, not a sort."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def __setitem__(self, key: str, value: V) -> None:
        if key not in self:
            bisect.insort(self.ids, key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        del self.ids[bisect.bisect_left(self.ids, key)]

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            del self.ids[bisect.bisect_left(self.ids, key)]
        return super().pop(key, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def popitem(self) -> tuple[str, V]:
        key, value = super().popitem()
        del self.ids[bisect.bisect_left(self.ids, key)]
        return key, value

    def clear(self) -> None:
        super().clear()
        self.ids.clear()


class _Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.resources: _Records[Resource] = _Records()
        self.threads: _Records[Thread] = _Records()
        self.history: dict[HistoryKey, list[MemoryVersion]] = {}
        """Each working memory's versions, oldest first."""

    def copy_of(self, records: _Records[R], key: str) -> R | None:
        """A private copy of the record ``key`` of ``records`` (one of this store's), or ``None``."""
        with self.lock:
            found = records.get(key)
        return None if found is None else private_copy(found)

    def record(self, recording: Recording | None, key: HistoryKey, content: str | None, now: datetime) -> None:
        """Append the version ``recording`` makes (none without one); the caller holds the lock."""
        if recording is not None:
            self.history[key] = with_version(self.history.get(key, []), recording, key, content, now)


def _page(records: _Records[R], after: str | None, limit: int) -> RecordPage[R]:
    """Records with ids after ``after`` in code point order (Python's ``str`` order), at most ``limit``."""
    ids = records.ids
    start = 0 if after is None else bisect.bisect_right(ids, after)
    chosen = ids[start : start + limit]
    next_after = chosen[-1] if len(chosen) == limit else None
    return RecordPage(tuple(private_copy(records[i]) for i in chosen), (), next_after)


_named: dict[str, _Store] = {}
_named_lock = threading.Lock()


def _name_of(url: str, options: dict[str, Any]) -> str | None:
    check_create(options.pop("create", True))  # nothing to create: the store is made on first use
    if options:
        raise ValidationError(f"memory:// takes no options but create, got {sorted(options)}")
    parts = urlsplit(url)
    return (parts.netloc + parts.path).strip("/") or None


class ReferenceHooks(StorageHooks):
    """The hooks on plain dicts behind a lock: the executable reading of the contract."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        cross_process_atomic=False, persistent=False, history=True, erase=True
    )

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._closed = False
        if name is None:
            self._shared = _Store()
        else:
            with _named_lock:
                self._shared = _named.setdefault(name, _Store())

    @property
    def _store(self) -> _Store:
        """The records, for a hook; once this connection is closed, :class:`StorageClosedError` (the contract)."""
        if self._closed:
            raise StorageClosedError(f"{self!r} is closed")
        return self._shared

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # -- resources -----------------------------------------------------------------

    async def _get_resource(self, resource_id: str) -> Resource | None:
        store = self._store
        return store.copy_of(store.resources, resource_id)

    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        with self._store.lock:
            old = self._store.resources.get(resource.id)
            self._store.resources[resource.id] = private_copy(resource)
            if record is not None and (None if old is None else old.working_memory) != resource.working_memory:
                self._store.record(record, HistoryKey(resource.id), resource.working_memory, record.at)
        return resource

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        with self._store.lock:
            new = updated_resource(self._store.resources.get(resource_id), resource_id, change)
            self._store.resources[resource_id] = new
            self._store.record(change.record, HistoryKey(resource_id), new.working_memory, change.now)
        return private_copy(new)

    # -- threads -------------------------------------------------------------------

    async def _get_thread(self, thread_id: str) -> Thread | None:
        store = self._store
        return store.copy_of(store.threads, thread_id)

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        with self._store.lock:
            if thread.id in self._store.threads:
                raise ThreadExistsError(thread.id)
            self._store.threads[thread.id] = private_copy(thread)
            if record is not None:
                memory = thread_working_memory(thread.metadata)
                self._store.record(record, HistoryKey(thread.resource_id, thread.id), memory, record.at)
        return thread

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        with self._store.lock:
            old = self._store.threads.get(thread.id)
            new = replaced_thread(old, private_copy(thread), now)
            self._store.threads[thread.id] = new
            memory = thread_working_memory(new.metadata)
            if (None if old is None else thread_working_memory(old.metadata)) != memory:
                self._store.record(record, HistoryKey(new.resource_id, new.id), memory, now)
        return private_copy(new)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        with self._store.lock:
            new = updated_thread(self._locked_thread(thread_id), change)
            self._store.threads[thread_id] = new
            memory = thread_working_memory(new.metadata)
            self._store.record(change.record, HistoryKey(new.resource_id, thread_id), memory, change.now)
        return private_copy(new)

    def _locked_thread(self, thread_id: str) -> Thread:
        thread = self._store.threads.get(thread_id)
        if thread is None:
            raise ThreadNotFoundError(thread_id)
        return thread

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        with self._store.lock:
            thread = self._store.threads.get(thread_id)
            if thread is None:
                return False
            check_owner(thread, owner)
            del self._store.threads[thread_id]
            self._store.history.pop(HistoryKey(thread.resource_id, thread_id), None)
            return True

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        with self._store.lock:
            owned = [t for t in self._store.threads.values() if t.resource_id == query.resource_id]
        owned.sort(key=lambda t: (getattr(t, query.order_by), t.id), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of([private_copy(t) for t in owned[query.offset : end]], len(owned))

    # -- every record ----------------------------------------------------------------

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        with self._store.lock:
            return _page(self._store.resources, after, limit)

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        with self._store.lock:
            return _page(self._store.threads, after, limit)

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        with self._store.lock:
            present = frozenset(r.id for r in resources if r.id in self._store.resources)
            self._store.resources.update((r.id, private_copy(r)) for r in resources if r.id not in present)
        return present

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        with self._store.lock:
            present = frozenset(t.id for t in threads if t.id in self._store.threads)
            self._store.threads.update((t.id, private_copy(t)) for t in threads if t.id not in present)
        return present

    async def _replace_thread(self, thread: Thread) -> bool:
        with self._store.lock:
            stored = self._store.threads.get(thread.id)
            if stored is None or stored.resource_id != thread.resource_id:
                return False
            self._store.threads[thread.id] = private_copy(thread)
        return True

    # -- working memory ------------------------------------------------------------

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars, record = change.patch, change.now, change.max_chars, change.record
        with self._store.lock:
            if target.scope == "resource":
                assert target.resource_id is not None
                old = self._store.resources.get(target.resource_id)
                merged, text = merge_document(None if old is None else old.working_memory, patch, max_chars)
                self._store.resources[target.resource_id] = updated_resource(
                    old, target.resource_id, ResourceChange(text, Unset.UNSET, now)
                )
                self._store.record(record, HistoryKey(target.resource_id), text, now)
                return merged
            assert target.thread_id is not None
            thread = self._locked_thread(target.thread_id)
            check_owner(thread, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(thread.metadata), patch, max_chars)
            self._store.threads[thread.id] = with_thread_memory(thread, text, now)
            self._store.record(record, HistoryKey(thread.resource_id, thread.id), text, now)
            return merged

    # -- history and erasure -------------------------------------------------------------

    async def _history(self, key: HistoryKey, limit: int, before: int | None) -> list[MemoryVersion]:
        with self._store.lock:
            versions = self._store.history.get(key, [])
            older = [v for v in reversed(versions) if before is None or v.version < before]
        return older[:limit]  # a version is frozen and its source a copy of its own (MemoryVersion checks it)

    async def _versioned_keys(self, after: HistoryKey | None, limit: int) -> list[HistoryKey] | None:
        with self._store.lock:
            keys = sorted((k for k, kept in self._store.history.items() if kept), key=_key_order)
        return [k for k in keys if after is None or _key_order(k) > _key_order(after)][:limit]

    async def _insert_versions(self, versions: Sequence[MemoryVersion]) -> int:
        added = 0
        with self._store.lock:
            for version in versions:
                kept = self._store.history.setdefault(version.key, [])
                if all(v.version != version.version for v in kept):
                    kept.append(version)
                    kept.sort(key=lambda v: v.version)
                    added += 1
        return added

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        with self._store.lock:
            store = self._store
            resource = store.resources.pop(resource_id, None) is not None
            threads = tuple(t.id for t in store.threads.values() if t.resource_id == resource_id)
            for thread_id in threads:
                del store.threads[thread_id]
            keys = [key for key in store.history if key.resource_id == resource_id]
            versions = sum(len(store.history.pop(key)) for key in keys)
        return ErasedResource(resource_id, resource, tuple(sorted(threads)), versions)

    async def _close(self) -> None:
        self._closed = True  # the named store lives on for other connections to it


class ReferenceStorage(ReferenceHooks, MemoryStorage):
    """The reference adapter, sync: plain dicts behind a lock."""

    async_adapter = "workmem.adapters.reference:AsyncReferenceStorage"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        return cls(_name_of(url, options))


class AsyncReferenceStorage(ReferenceHooks, AsyncMemoryStorage):
    """The reference adapter, async: the same store (``memory://NAME`` is shared with the sync one)."""

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        return cls(_name_of(url, options))


_RENAMED = {"InMemoryStorage": ReferenceStorage, "AsyncInMemoryStorage": AsyncReferenceStorage}


def __getattr__(name: str) -> Any:
    renamed = _RENAMED.get(name)
    if renamed is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{name} is renamed {renamed.__name__}", DeprecationWarning, stacklevel=2)
    return renamed


def _key_order(key: HistoryKey) -> tuple[str, str, str]:
    return key.resource_id, key.scope, key.memory_id
