"""The libSQL adapter's connections: :class:`_Pool`, each connection lent to one thread at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from workmem.errors import BackendBusyError, BackendUnavailableError, StorageClosedError, WorkmemError


class _Pool:
    """Up to ``size`` connections, each lent to one thread at a time (a libSQL connection is one session).

    Idle connections wait in a list used as a stack: taking pops the connection
    given back last (its caches are the warmest), giving back appends, each one
    C call that the GIL keeps atomic. Only a take that finds the stack empty
    locks: it opens a connection while fewer than ``size`` are open, else waits
    up to ``wait`` seconds for one to come back. A hot path may pop from
    :attr:`idle` itself and call :meth:`take` only when it is empty (a closed
    pool's stack is always empty); every connection goes back by :meth:`give`.
    """

    def __init__(
        self,
        opener: Callable[[], Any],
        size: int,
        wait: float,
        released: Callable[[], None] | None = None,
        close: Callable[[Any], None] | None = None,
    ) -> None:
        self._opener = opener
        self._close = _release if close is None else close
        """Closes a connection let go (given its last reference); by default the reference is dropped."""
        self._released = released
        self._size = size
        self._wait = wait
        self.idle: list[Any] = []
        """Idle connections, the last given back on top."""
        self._open = 0  # connections lent out or idle; changed under _changed only
        self._waiting = 0  # takers in _take_slow; a give looks at it after appending
        self._changed = threading.Condition(threading.Lock())
        self.closed = False

    def take(self, wait: float | None = None) -> Any:
        """A connection for this thread alone, until :meth:`give`; waits up to ``wait`` seconds (the pool's own
        wait when ``None``) for one to come back, then raises :class:`BackendBusyError`."""
        if self.closed:
            raise StorageClosedError("the libSQL storage is closed")
        try:
            return self.idle.pop()
        except IndexError:
            return self._take_slow(self._wait if wait is None else wait)

    def _take_slow(self, wait: float) -> Any:
        deadline = time.monotonic() + wait
        with self._changed:
            # Counted as waiting before looking at the stack: a give that appends after the look sees the count.
            self._waiting += 1
            try:
                while True:
                    if self.closed:
                        raise StorageClosedError("the libSQL storage is closed")
                    with suppress(IndexError):  # a take outside the lock may empty it first
                        return self.idle.pop()
                    if self._open < self._size:
                        self._open += 1
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BackendBusyError("no free libSQL connection (pool_size reached)")
                    self._changed.wait(remaining)
            finally:
                self._waiting -= 1
        try:
            return self._opener()
        except BaseException:
            self._forget()
            raise

    def give(self, conn: Any, healthy: bool) -> None:
        """Return ``conn``; one that is not ``healthy`` (or of a closed pool) is let go, its place freed."""
        if healthy and not self.closed:
            self.idle.append(conn)
            if self._waiting:
                with self._changed:
                    self._changed.notify()
            if self.closed:  # close() ran meanwhile and may have missed it
                self._close_idle()
            return
        self._let_go(conn)

    def _let_go(self, conn: Any) -> None:
        """Let ``conn`` go; a caller that passes its last reference has it closed before it is counted out."""
        self._close(conn)
        del conn
        if self._released is not None:
            self._released()
        self._forget()

    def _forget(self) -> None:
        """One connection fewer is open (it failed to open, or was let go)."""
        with self._changed:
            self._open -= 1
            self._changed.notify()

    @contextmanager
    def connection(self, wait: float | None = None) -> Iterator[Any]:
        conn = self.take(wait)
        healthy = False
        try:
            yield conn
            healthy = True
        except WorkmemError as exc:
            healthy = not isinstance(exc, BackendUnavailableError)
            raise
        finally:
            self.give(conn, healthy)

    def _close_idle(self) -> None:
        while True:
            try:
                self._let_go(self.idle.pop())  # its last reference, handed over
            except IndexError:
                return

    def close(self, last: Callable[[Any], object] | None = None) -> None:
        """Close the pool: idle connections now, lent ones as they come back; ``last(conn)`` on an idle one first."""
        if last is not None and not self.closed:
            with suppress(IndexError):
                conn = self.idle.pop()
                try:
                    last(conn)
                finally:
                    self.idle.append(conn)
                    del conn
        self.closed = True
        self._close_idle()
        with self._changed:
            self._changed.notify_all()  # waiting takers see the pool closed


def _release(conn: Any) -> None:
    """Let a connection go by dropping the caller's last reference (see :meth:`.port.WheelEngine.release`)."""
    del conn
