"""A minimal workmem adapter: ``dictstore://NAME``, records in dicts behind one lock per store.

The example of ``docs/adapters.md``. Every connection to the same NAME in one
process shares one store, so the conformance suite's multi-connection checks
mean something. Atomicity comes from the store's lock: every read-check-write
happens while it is held (a database adapter gets it from its database instead:
one statement, a row lock, a script, a conditional update). Records go in and
come out as ``private_copy``: the store shares no dict with a caller, as a
database that serializes what it writes and parses what it reads shares none.

It imports :mod:`workmem.kit` and :mod:`workmem.errors` only, and implements
only the hooks of :class:`workmem.kit.StorageHooks`: the
arguments arrive checked, so nothing here validates. Its hooks call no async
driver, so it is a sync adapter; ``workmem.connect_async("dictstore://NAME")``
runs it on worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

from workmem.errors import StorageClosedError, ThreadExistsError, ThreadNotFoundError
from workmem.kit import (
    UNSET,
    Capabilities,
    ListQuery,
    MemoryStorage,
    MergeChange,
    RecordPage,
    Resource,
    ResourceChange,
    ScopeTarget,
    Thread,
    ThreadChange,
    ThreadPage,
    check_create,
    check_options,
    check_owner,
    merge_document,
    private_copy,
    replaced_thread,
    thread_working_memory_to_merge,
    updated_resource,
    updated_thread,
    with_thread_memory,
)

__all__ = ["DictStorage"]


class _Store:
    """One namespace: what a database would hold."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.resources: dict[str, Resource] = {}
        self.threads: dict[str, Thread] = {}


_stores: dict[str, _Store] = {}
_stores_lock = threading.Lock()


class DictStorage(MemoryStorage):
    """``dictstore://NAME``: atomic between the threads of one process; nothing outlives it."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=False, persistent=False)

    def __init__(self, name: str) -> None:
        self.name = name
        self._closed = False
        with _stores_lock:
            self._store = _stores.setdefault(name, _Store())

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        check_options(options, {"create"}, "dictstore")  # a typo in an option is an error, not ignored
        check_create(options.get("create", True))  # nothing to create: a store is made on first use
        parts = urlsplit(url)
        return cls((parts.netloc + parts.path).strip("/") or "default")

    def __repr__(self) -> str:
        return f"DictStorage(name={self.name!r})"

    def _open_store(self) -> _Store:
        if self._closed:
            raise StorageClosedError(f"{self!r} is closed")
        return self._store

    # -- resources -----------------------------------------------------------------

    async def _get_resource(self, resource_id: str) -> Resource | None:
        store = self._open_store()
        with store.lock:
            resource = store.resources.get(resource_id)
        return None if resource is None else private_copy(resource)  # the caller's own: its edits stay with it

    async def _save_resource(self, resource: Resource) -> Resource:
        store = self._open_store()
        with store.lock:
            store.resources[resource.id] = private_copy(resource)  # the caller may edit its record after the call
        return resource

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        store = self._open_store()
        with store.lock:  # read, build the new record, write: one step under the lock (change.max_chars too)
            new = updated_resource(store.resources.get(resource_id), resource_id, change)
            store.resources[resource_id] = new
        return private_copy(new)

    # -- threads -------------------------------------------------------------------

    async def _get_thread(self, thread_id: str) -> Thread | None:
        store = self._open_store()
        with store.lock:
            thread = store.threads.get(thread_id)
        return None if thread is None else private_copy(thread)

    async def _create_thread(self, thread: Thread) -> Thread:
        store = self._open_store()
        with store.lock:
            if thread.id in store.threads:
                raise ThreadExistsError(thread.id)
            store.threads[thread.id] = private_copy(thread)
        return thread

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        store = self._open_store()
        with store.lock:  # replaced_thread refuses another owner's id (ThreadOwnershipError)
            new = replaced_thread(store.threads.get(thread.id), private_copy(thread), now)
            store.threads[thread.id] = new
        return private_copy(new)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        store = self._open_store()
        with store.lock:  # updated_thread refuses a thread another owner holds now (ThreadOwnershipError)
            old = store.threads.get(thread_id)
            if old is None:
                raise ThreadNotFoundError(thread_id)
            new = updated_thread(old, change)
            store.threads[thread_id] = new
        return private_copy(new)

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        store = self._open_store()
        with store.lock:
            old = store.threads.get(thread_id)
            if old is None:
                return False
            check_owner(old, owner)  # only the owner's thread, checked under the same lock
            del store.threads[thread_id]
            return True

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        store = self._open_store()
        with store.lock:
            owned = [t for t in store.threads.values() if t.resource_id == query.resource_id]
        # Ties on the timestamp are broken by id, in the same direction: pages never overlap or skip.
        owned.sort(key=lambda t: (getattr(t, query.order_by), t.id), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of([private_copy(t) for t in owned[query.offset : end]], len(owned))

    async def _replace_thread(self, thread: Thread) -> bool:
        store = self._open_store()
        with store.lock:  # the owner check and the write in one step
            old = store.threads.get(thread.id)
            if old is None or old.resource_id != thread.resource_id:
                return False
            store.threads[thread.id] = private_copy(thread)
        return True

    # -- every record: pages by id, bulk inserts -------------------------------------

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        store = self._open_store()
        with store.lock:
            ids = sorted(i for i in store.resources if after is None or i > after)[:limit]  # str order: code points
            records = tuple(private_copy(store.resources[i]) for i in ids)
        return RecordPage(records, (), ids[-1] if len(ids) == limit else None)

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        store = self._open_store()
        with store.lock:
            ids = sorted(i for i in store.threads if after is None or i > after)[:limit]
            records = tuple(private_copy(store.threads[i]) for i in ids)
        return RecordPage(records, (), ids[-1] if len(ids) == limit else None)

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        store = self._open_store()
        with store.lock:  # each check-then-insert under the lock
            present = frozenset(r.id for r in resources if r.id in store.resources)
            store.resources.update((r.id, private_copy(r)) for r in resources if r.id not in present)
        return present

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        store = self._open_store()
        with store.lock:  # a present id keeps its thread and its owner
            present = frozenset(t.id for t in threads if t.id in store.threads)
            store.threads.update((t.id, private_copy(t)) for t in threads if t.id not in present)
        return present

    # -- working memory ------------------------------------------------------------

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        store = self._open_store()
        with store.lock:  # the whole read-merge-write under the lock: no lost updates
            if target.scope == "resource":
                assert target.resource_id is not None
                old = store.resources.get(target.resource_id)
                merged, text = merge_document(None if old is None else old.working_memory, patch, max_chars)
                store.resources[target.resource_id] = updated_resource(
                    old, target.resource_id, ResourceChange(text, UNSET, now)
                )
                return merged
            assert target.thread_id is not None
            thread = store.threads.get(target.thread_id)
            if thread is None:
                raise ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(thread.metadata), patch, max_chars)
            store.threads[thread.id] = with_thread_memory(thread, text, now)
            return merged

    async def _close(self) -> None:
        self._closed = True
