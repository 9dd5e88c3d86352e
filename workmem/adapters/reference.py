"""In-process reference adapter: ``memory://`` (private) or ``memory://NAME`` (shared by name).

Thread-safe and atomic within one process (one lock per store); nothing is
persisted. Every connection to ``memory://NAME`` in a process sees the same
store, so the conformance suite's multi-connection checks mean the same here.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

from workmem.changes import merge_document, updated_resource, updated_thread, with_thread_memory
from workmem.errors import ThreadExistsError, ThreadNotFoundError, ThreadOwnershipError, ValidationError
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

__all__ = ["InMemoryStorage"]


class _Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.resources: dict[str, Resource] = {}
        self.threads: dict[str, Thread] = {}


_named: dict[str, _Store] = {}
_named_lock = threading.Lock()


class InMemoryStorage(MemoryStorage):
    """The reference adapter: plain dicts behind a lock."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=False, persistent=False)

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        if name is None:
            self._store = _Store()
        else:
            with _named_lock:
                self._store = _named.setdefault(name, _Store())

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        check_create(options.pop("create", True))  # nothing to create: the store is made on first use
        if options:
            raise ValidationError(f"memory:// takes no options but create, got {sorted(options)}")
        parts = urlsplit(url)
        name = (parts.netloc + parts.path).strip("/")
        return cls(name or None)

    def __repr__(self) -> str:
        return f"InMemoryStorage(name={self.name!r})"

    # -- resources -----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        validate_id(resource_id, "resource id")
        with self._store.lock:
            return self._store.resources.get(resource_id)

    def save_resource(self, resource: Resource) -> Resource:
        if not isinstance(resource, Resource):
            raise ValidationError(f"expected a Resource, got {type(resource).__name__}")
        with self._store.lock:
            self._store.resources[resource.id] = resource
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
        with self._store.lock:
            return self._update_resource_locked(resource_id, working_memory, metadata)

    def _update_resource_locked(
        self, resource_id: str, working_memory: str | Unset | None, metadata: dict[str, Any] | Unset | None
    ) -> Resource:
        old = self._store.resources.get(resource_id)
        new = updated_resource(old, resource_id, working_memory, metadata, utc_now())
        self._store.resources[resource_id] = new
        return new

    # -- threads -------------------------------------------------------------------

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        validate_id(thread_id, "thread id")
        if resource_id is not None:
            validate_id(resource_id, "resource id")
        with self._store.lock:
            thread = self._store.threads.get(thread_id)
        if thread is None or (resource_id is not None and thread.resource_id != resource_id):
            return None
        return thread

    def create_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        with self._store.lock:
            if thread.id in self._store.threads:
                raise ThreadExistsError(thread.id)
            self._store.threads[thread.id] = thread
        return thread

    def save_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        with self._store.lock:
            old = self._store.threads.get(thread.id)
            if old is None:
                new = thread
            elif old.resource_id != thread.resource_id:
                raise ThreadOwnershipError(thread.id, thread.resource_id)
            else:
                new = dataclasses.replace(old, title=thread.title, metadata=thread.metadata, updated_at=utc_now())
            self._store.threads[thread.id] = new
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
        with self._store.lock:
            old = self._store.threads.get(thread_id)
            if old is None:
                raise ThreadNotFoundError(thread_id)
            new = updated_thread(old, title, metadata, utc_now())
            self._store.threads[thread_id] = new
            return new

    def delete_thread(self, thread_id: str) -> bool:
        validate_id(thread_id, "thread id")
        with self._store.lock:
            return self._store.threads.pop(thread_id, None) is not None

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
        with self._store.lock:
            owned = [t for t in self._store.threads.values() if t.resource_id == query.resource_id]
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
        with self._store.lock:
            if target.scope == "resource":
                assert target.resource_id is not None
                resource = self._store.resources.get(target.resource_id)
                merged, text = merge_document(resource.working_memory if resource else None, patch)
                self._update_resource_locked(target.resource_id, text, UNSET)
                return merged
            assert target.thread_id is not None
            thread = self._store.threads.get(target.thread_id)
            if thread is None:
                raise ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(thread.metadata), patch)
            self._store.threads[thread.id] = with_thread_memory(thread, text, utc_now())
            return merged

    def close(self) -> None:
        pass
