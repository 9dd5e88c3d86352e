"""A minimal workmem adapter: ``dictstore://NAME``, records in dicts behind one lock per store.

The example of ``docs/adapters.md``. Every connection to the same NAME in one
process shares one store, so the conformance suite's multi-connection checks
mean something. Atomicity comes from the store's lock: every read-check-write
happens while it is held (a database adapter gets it from its database instead:
one statement, a row lock, a script, a conditional update).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

from workmem.changes import merge_document, updated_resource, updated_thread, with_thread_memory
from workmem.errors import (
    StorageClosedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
)
from workmem.kit import check_options
from workmem.records import UNSET, Direction, OrderBy, Resource, Scope, Thread, ThreadPage, Unset
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

    def get_resource(self, resource_id: str) -> Resource | None:
        validate_id(resource_id, "resource id")
        store = self._open_store()
        with store.lock:
            return store.resources.get(resource_id)

    def save_resource(self, resource: Resource) -> Resource:
        if not isinstance(resource, Resource):
            raise ValidationError(f"expected a Resource, got {type(resource).__name__}")
        store = self._open_store()
        with store.lock:
            store.resources[resource.id] = resource
        return resource

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        validate_id(resource_id, "resource id")
        working_memory, metadata = check_resource_update(working_memory, metadata)
        store = self._open_store()
        with store.lock:  # read, build the new record, write: one step under the lock
            new = updated_resource(store.resources.get(resource_id), resource_id, working_memory, metadata, utc_now())
            store.resources[resource_id] = new
            return new

    # -- threads -------------------------------------------------------------------

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        validate_id(thread_id, "thread id")
        if resource_id is not None:
            validate_id(resource_id, "resource id")
        store = self._open_store()
        with store.lock:
            thread = store.threads.get(thread_id)
        if thread is None or (resource_id is not None and thread.resource_id != resource_id):
            return None
        return thread

    def create_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        store = self._open_store()
        with store.lock:
            if thread.id in store.threads:
                raise ThreadExistsError(thread.id)
            store.threads[thread.id] = thread
        return thread

    def save_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        store = self._open_store()
        with store.lock:
            old = store.threads.get(thread.id)
            if old is not None and old.resource_id != thread.resource_id:
                raise ThreadOwnershipError(thread.id, thread.resource_id)
            new = thread
            if old is not None:
                new = dataclasses.replace(old, title=thread.title, metadata=thread.metadata, updated_at=utc_now())
            store.threads[thread.id] = new
            return new

    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Thread:
        validate_id(thread_id, "thread id")
        title, metadata = check_thread_update(title, metadata)
        store = self._open_store()
        with store.lock:
            old = store.threads.get(thread_id)
            if old is None:
                raise ThreadNotFoundError(thread_id)
            new = updated_thread(old, title, metadata, utc_now())
            store.threads[thread_id] = new
            return new

    def delete_thread(self, thread_id: str) -> bool:
        validate_id(thread_id, "thread id")
        store = self._open_store()
        with store.lock:
            return store.threads.pop(thread_id, None) is not None

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
        store = self._open_store()
        with store.lock:
            owned = [t for t in store.threads.values() if t.resource_id == query.resource_id]
        owned.sort(key=lambda t: (getattr(t, query.order_by), t.id), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of(owned[query.offset : end], len(owned))

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
        patch = validate_json_object(patch, "patch")
        store = self._open_store()
        with store.lock:  # the compare and the set are one step: no concurrent merge is lost
            if target.scope == "resource":
                assert target.resource_id is not None
                old = store.resources.get(target.resource_id)
                merged, text = merge_document(old.working_memory if old else None, patch)
                store.resources[target.resource_id] = updated_resource(old, target.resource_id, text, UNSET, utc_now())
                return merged
            assert target.thread_id is not None
            thread = store.threads.get(target.thread_id)
            if thread is None:
                raise ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(thread.metadata), patch)
            store.threads[thread.id] = with_thread_memory(thread, text, utc_now())
            return merged

    def close(self) -> None:
        self._closed = True
