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
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, Self, TypeVar

from workmem.aio import AsyncMemoryStorage, ThreadedAsyncStorage
from workmem.hooks import ForwardingHooks, StorageHooks
from workmem.operations import OPERATIONS
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage

from .report import APIS, Api

__all__ = [
    "APIS",
    "FORWARDED",
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


class AsyncStorageView(ForwardingHooks, MemoryStorage):
    """An async storage seen through the sync API: each method awaits its async twin on the loop thread.

    The checks call it from any thread; the async storage only ever runs on
    the loop. Each public method of :data:`FORWARDED` runs the async storage's
    method of the same name there, with the same arguments; the hooks are
    forwarded the same way (:class:`~workmem.hooks.ForwardingHooks`), so the view
    is a complete :class:`MemoryStorage` (the public methods never use them).
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

    async def _forward(self, hook: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.loop.run(getattr(self.storage, hook)(*args, **kwargs))


FORWARDED: tuple[str, ...] = (*(name for name in OPERATIONS if not name.startswith("iter_")), "close")
"""The public methods :class:`AsyncStorageView` runs as the async storage's coroutine of the same name."""


def _awaited_on_loop(name: str) -> Any:
    def method(self: AsyncStorageView, *args: Any, **kwargs: Any) -> Any:
        return self.loop.run(getattr(self.storage, name)(*args, **kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``await storage.{name}(...)`` on the loop thread (see :meth:`MemoryStorage.{name}`)."
    return method


for _name in FORWARDED:
    setattr(AsyncStorageView, _name, _awaited_on_loop(_name))


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
