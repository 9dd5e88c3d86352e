"""The sync driver: a coroutine that never suspends, run to its end without an event loop.

The operations (:mod:`workmem.operations`) and the agent flows are coroutines.
The async API awaits them; the sync API runs them with :func:`run_sync`: a sync
adapter's hooks call their blocking driver and never suspend, so the whole
operation runs to its end in a single ``send``, in this thread, and works from
inside a running event loop too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["SuspendedInSyncFlow", "iterate_sync", "run_sync"]

T = TypeVar("T")


class SuspendedInSyncFlow(RuntimeError):
    """A sync storage's hook awaited something that suspends: it must call a blocking driver instead."""


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end now, in this thread, without an event loop.

    It must never suspend: the hooks of a sync adapter call their blocking
    driver directly. One that does suspend is closed and
    :class:`SuspendedInSyncFlow` raised (a bug in the adapter, never in data).
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise SuspendedInSyncFlow(
        f"{getattr(coroutine, '__qualname__', coroutine)!s} suspended: a sync storage's hooks must not await "
        "anything that waits (use the blocking driver; async drivers belong to an AsyncMemoryStorage)"
    )


async def _next(iterator: AsyncIterator[T]) -> T:
    return await anext(iterator)


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    """A sync storage's async iterator as a plain iterator: each step run with :func:`run_sync`."""
    try:
        while True:
            try:
                item = run_sync(_next(iterator))
            except StopAsyncIteration:
                return
            yield item
    finally:
        run_sync(iterator.aclose())  # type: ignore[attr-defined]
