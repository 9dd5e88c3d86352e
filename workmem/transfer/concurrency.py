"""Work a transfer's flow runs beside itself: worker threads under the sync API, tasks under the async one.

The flows of :mod:`workmem.transfer.engine` are coroutines over storage hooks,
written once (as :mod:`workmem.operations` is): the sync API drives them with
:func:`~workmem._drive.run_sync`, the async API awaits them. What a copy overlaps
-- reading the source's next page while the destination writes earlier ones --
is started through a :class:`Runner`: :class:`ThreadRunner` runs each piece on
a worker thread (a sync storage's hooks block; storages are thread-safe), and
:meth:`Pending.result` waits for it without suspending, so the flow stays
drivable by ``run_sync``; :class:`TaskRunner` runs each piece as an
``asyncio`` task. Leaving either (a ``with`` / ``async with`` block) waits for,
or cancels, whatever is still running, so nothing touches a storage after the
flow that started it has ended and before the storage is closed.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from workmem._drive import run_sync

__all__ = ["Pending", "Runner", "TaskRunner", "ThreadRunner"]

T = TypeVar("T")
Work = Callable[..., Coroutine[Any, Any, T]]


class Pending(ABC, Generic[T]):
    """A piece of work started by a :class:`Runner`."""

    @abstractmethod
    async def result(self) -> T:
        """Its result once done (its exception raised)."""


class Runner(ABC):
    """Starts work that runs while the flow that started it goes on."""

    @abstractmethod
    def start(self, work: Work[T], *args: Any) -> Pending[T]:
        """Run ``work(*args)`` (a coroutine function, called where it runs) beside the caller."""


class _Done(Pending[T]):
    __slots__ = ("_future",)

    def __init__(self, future: Future[T]) -> None:
        self._future = future

    async def result(self) -> T:
        return self._future.result()  # blocks, never suspends: the flow stays drivable by run_sync


class ThreadRunner(Runner):
    """Each piece on one of ``workers`` threads, run there with :func:`run_sync` (sync storages only).

    A context manager: leaving it cancels what has not begun and waits for what is running.
    """

    def __init__(self, workers: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="workmem-transfer")

    def start(self, work: Work[T], *args: Any) -> Pending[T]:
        return _Done(self._executor.submit(_drive, work, args))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _drive(work: Work[T], args: tuple[Any, ...]) -> T:
    return run_sync(work(*args))


class _Task(Pending[T]):
    __slots__ = ("_task",)

    def __init__(self, task: asyncio.Task[T]) -> None:
        self._task = task

    async def result(self) -> T:
        return await self._task


class TaskRunner(Runner):
    """Each piece as an ``asyncio`` task (async storages).

    An async context manager: leaving it cancels the tasks still running and waits until they end
    (a cancelled storage call leaves no partial write: each is atomic).
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, work: Work[T], *args: Any) -> Pending[T]:
        task = asyncio.ensure_future(work(*args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return _Task(task)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
