"""The storage contract as coroutines: :class:`AsyncMemoryStorage` (opened by :func:`workmem.connect_async`).

The same operations, rules and errors as :class:`~workmem.storage.MemoryStorage`
(whose docstrings are normative for both): every method here awaits the same
operation of :mod:`workmem.operations` on the adapter's hooks. A native async adapter
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
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from workmem import operations
from workmem._drive import run_sync
from workmem.errors import StorageClosedError
from workmem.history import ErasedResource, HistoryPage, HistoryPolicy
from workmem.hooks import Capabilities, ForwardingHooks, StorageHooks
from workmem.records import UNSET, Direction, OrderBy, RecordPage, Resource, Scope, Thread, ThreadPage, Unset
from workmem.storage import MemoryStorage, renamed

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
        return await operations.get_resource(self, resource_id)

    async def save_resource(self, resource: Resource) -> Resource:
        """See :meth:`MemoryStorage.save_resource`."""
        return await operations.save_resource(self, resource)

    async def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        max_chars: int | None = None,
    ) -> Resource:
        """See :meth:`MemoryStorage.update_resource`."""
        return await operations.update_resource(self, resource_id, working_memory, metadata, max_chars)

    # -- threads -------------------------------------------------------------------

    async def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        """See :meth:`MemoryStorage.get_thread`."""
        return await operations.get_thread(self, thread_id, resource_id)

    async def create_thread(self, thread: Thread) -> Thread:
        """See :meth:`MemoryStorage.create_thread`."""
        return await operations.create_thread(self, thread)

    async def save_thread(self, thread: Thread) -> Thread:
        """See :meth:`MemoryStorage.save_thread`."""
        return await operations.save_thread(self, thread)

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
        return await operations.update_thread(self, thread_id, title, metadata, resource_id, max_chars)

    async def delete_thread(self, thread_id: str, *, resource_id: str | None = None) -> bool:
        """See :meth:`MemoryStorage.delete_thread`."""
        return await operations.delete_thread(self, thread_id, resource_id)

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
        return await operations.list_threads(self, resource_id, page, per_page, order_by, direction)

    # -- working memory ------------------------------------------------------------

    async def get_working_memory(
        self, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> str | None:
        """See :meth:`MemoryStorage.get_working_memory`."""
        return await operations.get_working_memory(self, scope, resource_id, thread_id)

    async def set_working_memory(
        self,
        content: str,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        """See :meth:`MemoryStorage.set_working_memory`."""
        await operations.set_working_memory(self, content, scope, resource_id, thread_id, max_chars, source)

    async def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """See :meth:`MemoryStorage.merge_working_memory`."""
        return await operations.merge_working_memory(self, patch, scope, resource_id, thread_id, max_chars, source)

    # -- history and erasure ---------------------------------------------------------

    async def working_memory_history(
        self,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        limit: int = 20,
        before: int | None = None,
    ) -> HistoryPage:
        """See :meth:`MemoryStorage.working_memory_history`."""
        return await operations.working_memory_history(self, scope, resource_id, thread_id, limit, before)

    async def restore_working_memory(
        self,
        version: int,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str | None:
        """See :meth:`MemoryStorage.restore_working_memory`."""
        return await operations.restore_working_memory(self, version, scope, resource_id, thread_id, max_chars, source)

    async def delete_resource(self, resource_id: str) -> ErasedResource:
        """See :meth:`MemoryStorage.delete_resource`."""
        return await operations.delete_resource(self, resource_id)

    # -- every record: iteration and bulk writes ------------------------------------

    def iter_resources(self, *, page_size: int = 500) -> AsyncIterator[Resource]:
        """See :meth:`MemoryStorage.iter_resources` (``async for``)."""
        return operations.iter_resources(self, page_size)

    def iter_threads(self, *, page_size: int = 500) -> AsyncIterator[Thread]:
        """See :meth:`MemoryStorage.iter_threads` (``async for``)."""
        return operations.iter_threads(self, page_size)

    async def resources_after(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Resource]:
        """See :meth:`MemoryStorage.resources_after`."""
        return await operations.resources_after(self, after, limit)

    async def threads_after(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Thread]:
        """See :meth:`MemoryStorage.threads_after`."""
        return await operations.threads_after(self, after, limit)

    async def insert_resources(self, resources: Iterable[Resource]) -> frozenset[str]:
        """See :meth:`MemoryStorage.insert_resources`."""
        return await operations.insert_resources(self, resources)

    async def insert_threads(self, threads: Iterable[Thread]) -> frozenset[str]:
        """See :meth:`MemoryStorage.insert_threads`."""
        return await operations.insert_threads(self, threads)

    async def restore_thread(self, thread: Thread) -> bool:
        """See :meth:`MemoryStorage.restore_thread`."""
        return await operations.restore_thread(self, thread)

    resource_page = renamed("resource_page", "resources_after")
    thread_page = renamed("thread_page", "threads_after")
    replace_thread = renamed("replace_thread", "restore_thread")

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


class ThreadedAsyncStorage(ForwardingHooks, AsyncMemoryStorage):
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

    @property
    def history(self) -> HistoryPolicy | None:
        """The sync adapter's own: its hooks record the versions (and delete a thread's with the thread)."""
        return self.storage.history

    @history.setter
    def history(self, policy: HistoryPolicy | None) -> None:
        self.storage.history = policy

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

    async def _forward(self, hook: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return await self._in_thread(functools.partial(_drive, getattr(self.storage, hook), args, kwargs))

    async def _close(self) -> None:
        if self._closed:
            return
        try:
            await self._forward("_close", (), {})
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


def _drive(hook: Callable[..., Coroutine[Any, Any, T]], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    return run_sync(hook(*args, **kwargs))
