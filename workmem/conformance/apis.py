"""The two APIs the suite can drive: the sync one as it is, the async one through :class:`AsyncStorageView`.

The checks are written once, against :class:`~workmem.storage.MemoryStorage`.
To run them on the async API, every connection is an
:class:`~workmem.aio.AsyncMemoryStorage` wrapped in a view: each public method
submits the async storage's coroutine of the same name to one event loop
running on a dedicated thread (:class:`EventLoopThread`) and waits for its
result, as zarr drives its async stores from a sync state machine. The threads
of a concurrency check then become concurrent tasks on that loop: real async
concurrency, on the async face's own code.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import Any, Self, TypeVar

from workmem.aio import AsyncMemoryStorage, ThreadedAsyncStorage
from workmem.checks import ListQuery, ScopeTarget
from workmem.flows import StorageHooks
from workmem.records import UNSET, Direction, OrderBy, RecordPage, Resource, Scope, Thread, ThreadPage, Unset
from workmem.storage import MemoryStorage

from .report import APIS, Api

__all__ = [
    "APIS",
    "Api",
    "AsyncStorageView",
    "EventLoopThread",
    "adapter_module",
    "adapter_name",
    "check_api",
    "opened",
    "unwrap",
]

T = TypeVar("T")


def check_api(api: object) -> Api:
    """``api`` if it names an API; ``ValueError`` otherwise."""
    if api not in APIS:
        raise ValueError(f"api must be one of {', '.join(map(repr, APIS))}, not {api!r}")
    return api


class EventLoopThread:
    """An event loop running on a daemon thread of its own; :meth:`run` submits a coroutine and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="workmem-conformance-loop", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()

    def run(self, awaitable: Coroutine[Any, Any, T]) -> T:
        """Run ``awaitable`` on the loop, wait for it here, return its result or raise its exception."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(awaitable, self.loop)
        return future.result()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop the loop (its leftover tasks are cancelled) and wait for the thread; idempotent."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=60)


class AsyncStorageView(MemoryStorage):
    """An async storage seen through the sync API: each method awaits its async twin on the loop thread.

    The checks call it from any thread; the async storage only ever runs on
    the loop. Its hooks forward the async storage's hooks the same way, so the
    view is a complete :class:`MemoryStorage` (the public methods never use them).
    """

    def __init__(self, storage: AsyncMemoryStorage, loop: EventLoopThread) -> None:
        self.storage = storage
        """The async storage the checks run on."""
        self.loop = loop
        self.capabilities = storage.capabilities  # type: ignore[misc]

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        raise TypeError("an AsyncStorageView is made by the conformance suite around an open async storage")

    def __repr__(self) -> str:
        return f"AsyncStorageView({self.storage!r})"

    # -- the public API: the async storage's own methods -------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        return self.loop.run(self.storage.get_resource(resource_id))

    def save_resource(self, resource: Resource) -> Resource:
        return self.loop.run(self.storage.save_resource(resource))

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        max_chars: int | None = None,
    ) -> Resource:
        return self.loop.run(
            self.storage.update_resource(
                resource_id, working_memory=working_memory, metadata=metadata, max_chars=max_chars
            )
        )

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        return self.loop.run(self.storage.get_thread(thread_id, resource_id=resource_id))

    def create_thread(self, thread: Thread) -> Thread:
        return self.loop.run(self.storage.create_thread(thread))

    def save_thread(self, thread: Thread) -> Thread:
        return self.loop.run(self.storage.save_thread(thread))

    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        resource_id: str | None = None,
        max_chars: int | None = None,
    ) -> Thread:
        update = self.storage.update_thread(
            thread_id, title=title, metadata=metadata, resource_id=resource_id, max_chars=max_chars
        )
        return self.loop.run(update)

    def delete_thread(self, thread_id: str, *, resource_id: str | None = None) -> bool:
        return self.loop.run(self.storage.delete_thread(thread_id, resource_id=resource_id))

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        listing = self.storage.list_threads(
            resource_id, page=page, per_page=per_page, order_by=order_by, direction=direction
        )
        return self.loop.run(listing)

    def get_working_memory(
        self, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> str | None:
        return self.loop.run(self.storage.get_working_memory(scope=scope, resource_id=resource_id, thread_id=thread_id))

    def set_working_memory(
        self,
        content: str,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
    ) -> None:
        self.loop.run(
            self.storage.set_working_memory(
                content, scope=scope, resource_id=resource_id, thread_id=thread_id, max_chars=max_chars
            )
        )

    def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
    ) -> dict[str, Any]:
        merge = self.storage.merge_working_memory(
            patch, scope=scope, resource_id=resource_id, thread_id=thread_id, max_chars=max_chars
        )
        return self.loop.run(merge)

    def iter_resources(self, *, page_size: int = 500) -> Iterator[Resource]:
        return self._iterate(self.storage.iter_resources(page_size=page_size))

    def iter_threads(self, *, page_size: int = 500) -> Iterator[Thread]:
        return self._iterate(self.storage.iter_threads(page_size=page_size))

    def _iterate(self, iterator: AsyncIterator[T]) -> Iterator[T]:
        """The async iterator's items, each step awaited on the loop thread."""
        try:
            while True:
                try:
                    item = self.loop.run(_next(iterator))
                except StopAsyncIteration:
                    return
                yield item
        finally:
            self.loop.run(_close_iterator(iterator))

    def resource_page(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Resource]:
        return self.loop.run(self.storage.resource_page(after, limit=limit))

    def thread_page(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Thread]:
        return self.loop.run(self.storage.thread_page(after, limit=limit))

    def insert_resources(self, resources: Iterable[Resource]) -> frozenset[str]:
        return self.loop.run(self.storage.insert_resources(resources))

    def insert_threads(self, threads: Iterable[Thread]) -> frozenset[str]:
        return self.loop.run(self.storage.insert_threads(threads))

    def replace_thread(self, thread: Thread) -> bool:
        return self.loop.run(self.storage.replace_thread(thread))

    def close(self) -> None:
        self.loop.run(self.storage.close())

    # -- the hooks, forwarded (a complete MemoryStorage; the methods above do not use them) ----

    def _forward(self, hook: Coroutine[Any, Any, T]) -> T:
        return self.loop.run(hook)

    async def _get_resource(self, resource_id: str) -> Resource | None:
        return self._forward(self.storage._get_resource(resource_id))

    async def _save_resource(self, resource: Resource) -> Resource:
        return self._forward(self.storage._save_resource(resource))

    async def _update_resource(
        self,
        resource_id: str,
        working_memory: str | Unset | None,
        metadata: dict[str, Any] | Unset | None,
        now: datetime,
        *,
        max_chars: int | None = None,
    ) -> Resource:
        update = self.storage._update_resource(resource_id, working_memory, metadata, now, max_chars=max_chars)
        return self._forward(update)

    async def _get_thread(self, thread_id: str) -> Thread | None:
        return self._forward(self.storage._get_thread(thread_id))

    async def _create_thread(self, thread: Thread) -> Thread:
        return self._forward(self.storage._create_thread(thread))

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        return self._forward(self.storage._save_thread(thread, now))

    async def _update_thread(
        self,
        thread_id: str,
        title: str | Unset,
        metadata: dict[str, Any] | Unset | None,
        now: datetime,
        *,
        owner: str | None,
        max_chars: int | None = None,
    ) -> Thread:
        update = self.storage._update_thread(thread_id, title, metadata, now, owner=owner, max_chars=max_chars)
        return self._forward(update)

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        return self._forward(self.storage._delete_thread(thread_id, owner=owner))

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        return self._forward(self.storage._list_threads(query))

    async def _merge_working_memory(
        self, target: ScopeTarget, patch: dict[str, Any], now: datetime, *, max_chars: int | None = None
    ) -> dict[str, Any]:
        return self._forward(self.storage._merge_working_memory(target, patch, now, max_chars=max_chars))

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        return self._forward(self.storage._resource_page(after, limit))

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        return self._forward(self.storage._thread_page(after, limit))

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        return self._forward(self.storage._insert_resources(resources))

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        return self._forward(self.storage._insert_threads(threads))

    async def _replace_thread(self, thread: Thread) -> bool:
        return self._forward(self.storage._replace_thread(thread))

    async def _close(self) -> None:
        self._forward(self.storage._close())


async def _next(iterator: AsyncIterator[T]) -> T:
    return await anext(iterator)


async def _close_iterator(iterator: AsyncIterator[Any]) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


async def opened(result: object) -> AsyncMemoryStorage:
    """What an async factory returned (awaited if it is awaitable), checked to be an :class:`AsyncMemoryStorage`."""
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, AsyncMemoryStorage):
        raise TypeError(f"the async factory returned {type(result).__name__}, not an AsyncMemoryStorage")
    return result


def unwrap(storage: MemoryStorage) -> StorageHooks:
    """The storage the checks really run on: the async one behind a view, else ``storage`` itself."""
    return storage.storage if isinstance(storage, AsyncStorageView) else storage


def adapter_name(storage: MemoryStorage) -> str:
    """``module:Class`` of the adapter behind ``storage`` (a sync adapter run on threads: both names)."""
    inner = unwrap(storage)
    cls = type(inner)
    name = f"{cls.__module__}:{cls.__qualname__}"
    if isinstance(inner, ThreadedAsyncStorage):
        sync = type(inner.storage)
        name += f"[{sync.__module__}:{sync.__qualname__}]"
        inner = inner.storage
    store = getattr(inner, "store", None)  # a store over the wire: what it called itself
    return f"{name} ({store})" if isinstance(store, str) else name


def adapter_module(storage: MemoryStorage) -> str:
    """The module of the adapter doing the I/O behind ``storage`` (a report's backend when it has no URL)."""
    inner = unwrap(storage)
    return type(inner.storage if isinstance(inner, ThreadedAsyncStorage) else inner).__module__
