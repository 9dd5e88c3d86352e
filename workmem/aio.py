"""The storage contract as coroutines: :class:`AsyncMemoryStorage` (opened by :func:`workmem.connect_async`).

The same operations, rules and errors as :class:`~workmem.storage.MemoryStorage`
(whose docstrings are normative for both): every method here awaits the same
flow of :mod:`workmem.flows` on the adapter's hooks. A native async adapter
implements the hooks with its async driver; :class:`ThreadedAsyncStorage` runs
a sync-only adapter (the ``libsql`` wheel, a third party's) on worker threads,
so the event loop never blocks on it.

Cancelling a call is safe: every storage write is one atomic step in the
database, so a cancelled call has either written whole or not at all, its
connection goes back to the pool, and the next call works. (The agent layer's
``create_thread`` with initial resource memory is two such writes.)
"""

from __future__ import annotations

import asyncio
import functools
import os
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from workmem import flows
from workmem.checks import ListQuery, ScopeTarget
from workmem.errors import StorageClosedError
from workmem.flows import Capabilities, StorageHooks, run_sync
from workmem.records import UNSET, Direction, OrderBy, RecordPage, Resource, Scope, Thread, ThreadPage, Unset
from workmem.storage import MemoryStorage

__all__ = ["AsyncMemoryStorage", "ThreadedAsyncStorage", "opened_in_thread"]

T = TypeVar("T")


class AsyncMemoryStorage(StorageHooks):
    """Durable resources, threads and working memory on one backend, as coroutines.

    Usable as an async context manager (``await close()`` on exit) and safe to
    share between tasks. Each method is :class:`~workmem.storage.MemoryStorage`'s
    method of the same name, awaited.
    """

    @classmethod
    @abstractmethod
    async def open(cls, url: str, **options: Any) -> Self:
        """Open the backend named by ``url`` (used by :func:`connect_async`); options as the sync adapter's."""

    async def _pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    # -- resources -----------------------------------------------------------------

    async def get_resource(self, resource_id: str) -> Resource | None:
        """See :meth:`MemoryStorage.get_resource`."""
        return await flows.get_resource(self, resource_id)

    async def save_resource(self, resource: Resource) -> Resource:
        """See :meth:`MemoryStorage.save_resource`."""
        return await flows.save_resource(self, resource)

    async def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        max_chars: int | None = None,
    ) -> Resource:
        """See :meth:`MemoryStorage.update_resource`."""
        return await flows.update_resource(self, resource_id, working_memory, metadata, max_chars)

    # -- threads -------------------------------------------------------------------

    async def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        """See :meth:`MemoryStorage.get_thread`."""
        return await flows.get_thread(self, thread_id, resource_id)

    async def create_thread(self, thread: Thread) -> Thread:
        """See :meth:`MemoryStorage.create_thread`."""
        return await flows.create_thread(self, thread)

    async def save_thread(self, thread: Thread) -> Thread:
        """See :meth:`MemoryStorage.save_thread`."""
        return await flows.save_thread(self, thread)

    async def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        resource_id: str | None = None,
        max_chars: int | None = None,
    ) -> Thread:
        """See :meth:`MemoryStorage.update_thread`."""
        return await flows.update_thread(self, thread_id, title, metadata, resource_id, max_chars)

    async def delete_thread(self, thread_id: str, *, resource_id: str | None = None) -> bool:
        """See :meth:`MemoryStorage.delete_thread`."""
        return await flows.delete_thread(self, thread_id, resource_id)

    async def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        """See :meth:`MemoryStorage.list_threads`."""
        return await flows.list_threads(self, resource_id, page, per_page, order_by, direction)

    # -- working memory ------------------------------------------------------------

    async def get_working_memory(
        self, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> str | None:
        """See :meth:`MemoryStorage.get_working_memory`."""
        return await flows.get_working_memory(self, scope, resource_id, thread_id)

    async def set_working_memory(
        self,
        content: str,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
    ) -> None:
        """See :meth:`MemoryStorage.set_working_memory`."""
        await flows.set_working_memory(self, content, scope, resource_id, thread_id, max_chars)

    async def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
    ) -> dict[str, Any]:
        """See :meth:`MemoryStorage.merge_working_memory`."""
        return await flows.merge_working_memory(self, patch, scope, resource_id, thread_id, max_chars)

    # -- every record: iteration and bulk writes ------------------------------------

    def iter_resources(self, *, page_size: int = 500) -> AsyncIterator[Resource]:
        """See :meth:`MemoryStorage.iter_resources` (``async for``)."""
        return flows.iter_resources(self, page_size)

    def iter_threads(self, *, page_size: int = 500) -> AsyncIterator[Thread]:
        """See :meth:`MemoryStorage.iter_threads` (``async for``)."""
        return flows.iter_threads(self, page_size)

    async def resource_page(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Resource]:
        """See :meth:`MemoryStorage.resource_page`."""
        return await flows.resource_page(self, after, limit)

    async def thread_page(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Thread]:
        """See :meth:`MemoryStorage.thread_page`."""
        return await flows.thread_page(self, after, limit)

    async def insert_resources(self, resources: Iterable[Resource]) -> frozenset[str]:
        """See :meth:`MemoryStorage.insert_resources`."""
        return await flows.insert_resources(self, resources)

    async def insert_threads(self, threads: Iterable[Thread]) -> frozenset[str]:
        """See :meth:`MemoryStorage.insert_threads`."""
        return await flows.insert_threads(self, threads)

    async def replace_thread(self, thread: Thread) -> bool:
        """See :meth:`MemoryStorage.replace_thread`."""
        return await flows.replace_thread(self, thread)

    # -- lifecycle -----------------------------------------------------------------

    async def close(self) -> None:
        """See :meth:`MemoryStorage.close`."""
        await self._close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _default_workers() -> int:
    return min(32, (os.cpu_count() or 1) + 4)


class ThreadedAsyncStorage(AsyncMemoryStorage):
    """A sync adapter behind the async API: each hook runs on a worker thread of its own pool.

    The arguments are checked on the event loop (the flows are shared); only the
    adapter's I/O runs on the threads, ``max_workers`` at a time. A cancelled call
    stops waiting at once; its hook, one atomic write or a read, runs to its end
    on its thread and gives its connection back.
    """

    def __init__(self, storage: MemoryStorage, *, max_workers: int | None = None) -> None:
        self.storage = storage
        """The sync adapter doing the I/O."""
        self.capabilities = storage.capabilities  # type: ignore[misc]
        workers = max_workers or getattr(storage, "pool_size", None) or _default_workers()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="workmem")
        self._closed = False

    capabilities: ClassVar[Capabilities]

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        from workmem.registry import connect

        return cls(await opened_in_thread(functools.partial(connect, url, **options)))

    def __repr__(self) -> str:
        return f"ThreadedAsyncStorage({self.storage!r})"

    async def _in_thread(self, call: Callable[[], T]) -> T:
        """``call()`` on one of this storage's worker threads."""
        if self._closed:  # the executor is shut down: it would raise RuntimeError
            raise StorageClosedError(f"{type(self.storage).__name__} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def _run(self, hook: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        return await self._in_thread(functools.partial(_drive, hook, args))

    async def _get_resource(self, resource_id: str) -> Resource | None:
        return await self._run(self.storage._get_resource, resource_id)

    async def _save_resource(self, resource: Resource) -> Resource:
        return await self._run(self.storage._save_resource, resource)

    async def _update_resource(
        self,
        resource_id: str,
        working_memory: str | Unset | None,
        metadata: dict[str, Any] | Unset | None,
        now: datetime,
        *,
        max_chars: int | None = None,
    ) -> Resource:
        update = functools.partial(self.storage._update_resource, max_chars=max_chars)
        return await self._run(update, resource_id, working_memory, metadata, now)

    async def _get_thread(self, thread_id: str) -> Thread | None:
        return await self._run(self.storage._get_thread, thread_id)

    async def _create_thread(self, thread: Thread) -> Thread:
        return await self._run(self.storage._create_thread, thread)

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        return await self._run(self.storage._save_thread, thread, now)

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
        update = functools.partial(self.storage._update_thread, owner=owner, max_chars=max_chars)
        return await self._run(update, thread_id, title, metadata, now)

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        return await self._run(functools.partial(self.storage._delete_thread, owner=owner), thread_id)

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        return await self._run(self.storage._list_threads, query)

    async def _merge_working_memory(
        self, target: ScopeTarget, patch: dict[str, Any], now: datetime, *, max_chars: int | None = None
    ) -> dict[str, Any]:
        merge = functools.partial(self.storage._merge_working_memory, max_chars=max_chars)
        return await self._run(merge, target, patch, now)

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        return await self._run(self.storage._resource_page, after, limit)

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        return await self._run(self.storage._thread_page, after, limit)

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        return await self._run(self.storage._insert_resources, resources)

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        return await self._run(self.storage._insert_threads, threads)

    async def _replace_thread(self, thread: Thread) -> bool:
        return await self._run(self.storage._replace_thread, thread)

    async def _close(self) -> None:
        if self._closed:
            return
        try:
            await self._run(self.storage._close)
        finally:
            self._closed = True
            self._executor.shutdown(wait=False)


S = TypeVar("S", bound=MemoryStorage)


async def opened_in_thread(open_storage: Callable[[], S]) -> S:
    """``open_storage()`` (a blocking connect) on a worker thread; the storage it opened.

    A caller cancelled meanwhile does not leak it: the open runs to its end on its
    thread, and what it opened is closed there once it arrives.
    """
    future = asyncio.get_running_loop().run_in_executor(None, open_storage)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(_close_opened)
        raise


def _close_opened(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()


def _drive(hook: Callable[..., Coroutine[Any, Any, T]], args: tuple[Any, ...]) -> T:
    return run_sync(hook(*args))
