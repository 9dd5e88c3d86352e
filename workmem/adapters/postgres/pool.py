"""The PostgreSQL adapter's connection pools: connections opened by the caller that needs one, no background work.

A pool that connects in the background (``psycopg_pool``) makes a caller wait
out its whole ``timeout`` while the server is down and then says only that no
connection came, retries on a backoff that delays recovery by up to half a
minute after the server is back, and logs every failed attempt. These open a
connection when a caller needs one and none is idle, in that caller's thread
(:class:`ConnectionPool`) or task (:class:`AsyncConnectionPool`): the caller
gets the driver's own error (``Connection refused``, ``timeout expired``)
within ``connect_timeout``, and the first call after the server is back
connects at once. Every connection, idle, lent out or being opened, counts
against ``max_size``, also while the server is unreachable. Unreachable and
reachable again are each logged once per outage, on the
``workmem.adapters.postgres`` logger.
"""

from __future__ import annotations

import asyncio
import logging
import select
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final, Generic, NotRequired, TypedDict, TypeVar, Unpack

from workmem.errors import BackendBusyError, StorageClosedError

__all__ = [
    "AsyncConnectionPool",
    "ConnectionPool",
    "OutageLog",
    "PoolLimits",
    "busy_error",
    "closed_by_server",
    "keepable",
]

log = logging.getLogger("workmem.adapters.postgres")

_Connect = TypeVar("_Connect")

_IDLE: Final = 0  # psycopg.pq.TransactionStatus.IDLE: no transaction open, no statement running


def closed_by_server(conn: Any) -> bool:
    """An idle connection with something to read was closed by the server (it sends FATAL, then EOF)."""
    if conn.closed:  # a broken connection is closed too
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def keepable(conn: Any) -> bool:
    """Whether a connection given back can serve the next caller: open, and no transaction or statement left."""
    return bool(conn.pgconn.transaction_status == _IDLE)  # libpq: UNKNOWN once the connection is closed or broken


def busy_error(max_size: int, timeout: float, where: str) -> BackendBusyError:
    """No connection came within ``timeout`` because all ``max_size`` were in use."""
    return BackendBusyError(
        f"all {max_size} connections to {where} stayed in use for {timeout:g} s (the max_size and timeout options)"
    )


class OutageLog:
    """Says once per outage that the server is unreachable (a warning), and once that it is reachable again.

    ``is_outage`` tells a failed connect that means the server cannot be reached
    from one the server (or libpq) refused, which is no outage; ``describe``
    gives an error's text with the secrets masked.
    """

    def __init__(
        self, where: str, describe: Callable[[BaseException], str], is_outage: Callable[[BaseException], bool]
    ) -> None:
        self._where = where
        self._describe = describe
        self._is_outage = is_outage
        self._down = False  # the last connect failed (logged once, until one succeeds)

    def failed(self, exc: BaseException) -> None:
        """A connect failed with ``exc``."""
        if self._is_outage(exc) and not self._down:
            self._down = True
            log.warning("PostgreSQL at %s is unreachable: %s", self._where, self._describe(exc))

    def succeeded(self) -> None:
        """A connect succeeded."""
        if self._down:
            self._down = False
            log.info("PostgreSQL at %s is reachable again", self._where)


class PoolLimits(TypedDict):
    """The pools' keyword settings, as :class:`ConnectionPool` and :class:`AsyncConnectionPool` take them."""

    max_size: int
    """At most this many connections open, lent out, idle or being opened."""
    timeout: float
    """How long a caller waits for a connection when all ``max_size`` are in use, in seconds."""
    where: str
    """The server, its URL masked, for messages."""
    describe: NotRequired[Callable[[BaseException], str]]
    """An error's text with the secrets masked (default ``str``)."""
    is_outage: NotRequired[Callable[[BaseException], bool]]
    """Whether a failed connect means the server cannot be reached (default: always)."""


class _Pool(Generic[_Connect]):
    """What both pools keep: the limits, the outage log, the idle connections, the count, and the lock over them."""

    def __init__(
        self,
        connect: _Connect,
        *,
        max_size: int,
        timeout: float,
        where: str,
        describe: Callable[[BaseException], str] = str,
        is_outage: Callable[[BaseException], bool] = lambda exc: True,
    ) -> None:
        self._connect = connect
        self._outages = OutageLog(where, describe, is_outage)
        self._max_size = max_size
        self._timeout = timeout
        self._where = where
        self._idle: list[Any] = []  # the last given back is lent first: its socket and server process are warm
        self._open = 0  # connections lent out, idle or being opened
        self._closed = False
        self._lock = threading.Lock()
        """Guards ``_idle``, ``_open``, ``_closed`` and a pool's own state (callers may run on several threads)."""

    @property
    def closed(self) -> bool:
        return self._closed


class ConnectionPool(_Pool[Callable[[], Any]]):
    """Up to ``max_size`` connections, each lent to one caller at a time.

    :meth:`take` returns an idle connection the server has not closed (checked
    without a round trip; closed ones are dropped), or opens a new one while
    fewer than ``max_size`` are open, or waits up to ``timeout`` seconds for
    one to be given back. ``connect`` opens one connection and raises the
    driver's error; ``where`` (the masked URL) names the server in messages;
    ``is_outage`` tells a failed connect that is worth logging as an outage
    (server unreachable) from one the server or libpq refused.
    """

    def __init__(self, connect: Callable[[], Any], **limits: Unpack[PoolLimits]) -> None:
        super().__init__(connect, **limits)
        self._changed = threading.Condition(self._lock)

    def take(self) -> Any:
        """A live connection for this caller alone, until :meth:`give`; the driver's error if none can be opened."""
        deadline = time.monotonic() + self._timeout
        while True:
            with self._changed:
                while True:
                    if self._closed:
                        raise StorageClosedError(f"this PostgresStorage is closed ({self._where})")
                    if self._idle:
                        conn = self._idle.pop()
                        break
                    if self._open < self._max_size:
                        self._open += 1
                        conn = None
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise busy_error(self._max_size, self._timeout, self._where)
                    self._changed.wait(remaining)
            if conn is None:
                return self._open_one()
            if not closed_by_server(conn):
                return conn
            log.debug("dropping a connection to %s that the server closed", self._where)
            self._discard(conn)

    def _open_one(self) -> Any:
        try:
            conn = self._connect()
        except BaseException as exc:
            self._forget()
            self._outages.failed(exc)
            raise
        self._outages.succeeded()
        return conn

    def give(self, conn: Any) -> None:
        """Return ``conn``: kept when it is open and idle (no transaction left open), else closed."""
        if self._closed or not keepable(conn):
            self._discard(conn)
            return
        with self._changed:
            self._idle.append(conn)
            self._changed.notify()

    def _discard(self, conn: Any) -> None:
        try:
            conn.close()
        except Exception:  # closing a dead connection must not hide the error being raised
            log.debug("error ignored closing a connection to %s", self._where, exc_info=True)
        self._forget()

    def _forget(self) -> None:
        with self._changed:
            self._open -= 1
            self._changed.notify()

    def close(self) -> None:
        """Close the idle connections; those lent out are closed when given back."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._changed.notify_all()
        for conn in idle:
            self._discard(conn)


_SLOT: Final = object()
"""Handed to a waiting caller instead of a connection: a place under ``max_size`` to open one in."""


class AsyncConnectionPool(_Pool[Callable[[], Awaitable[Any]]]):
    """:class:`ConnectionPool` for asyncio: up to ``max_size`` connections, each lent to one task at a time.

    ``connect`` is a coroutine function opening one connection (the driver's
    error if it cannot). :meth:`take` returns an idle connection the server has
    not closed, or opens one in the calling task while fewer than ``max_size``
    are open or opening, or waits (first come, first served) up to ``timeout``
    for one to be given back. A connect that fails fails the callers waiting at
    that moment too, with the same error, at once: they wait for a connection
    the server will not give now.

    Cancellation is safe at every await: a task cancelled while connecting
    gives up its place, and one cancelled after a connection (or a place) was
    handed to it gives that back. :meth:`give` never suspends, so a cancelled
    caller cannot lose a connection half way through giving it back.

    Usable from any event loop, several at once: the pool's state is guarded by
    a thread lock (never held across an await), and a connection, a place or an
    error for a caller waiting on another loop is handed over on that loop
    (``call_soon_threadsafe``); one whose loop has closed goes to the next caller.
    A connection belongs to no loop: each call waits for its socket on the
    running loop.
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]], **limits: Unpack[PoolLimits]) -> None:
        super().__init__(connect, **limits)
        self._waiters: deque[asyncio.Future[Any]] = deque()

    def get_stats(self) -> dict[str, int]:
        """``pool_size`` (open or opening), ``pool_available`` (idle) and ``requests_waiting``, as psycopg_pool's."""
        with self._lock:
            waiting = sum(not waiter.done() for waiter in self._waiters)
            return {"pool_size": self._open, "pool_available": len(self._idle), "requests_waiting": waiting}

    async def take(self) -> Any:
        """A live connection for this task alone, until given back; the driver's error if none can be opened."""
        while True:
            waiter: asyncio.Future[Any] | None = None
            with self._lock:
                if self._closed:
                    raise StorageClosedError(f"this AsyncPostgresStorage is closed ({self._where})")
                if self._idle:
                    conn = self._idle.pop()
                elif self._open < self._max_size:
                    self._open += 1
                    conn = _SLOT
                else:  # queued under the lock: a connection given back meanwhile cannot miss this caller
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.append(waiter)
            if waiter is not None:
                conn = await self._wait(waiter)
            if conn is _SLOT:
                return await self._open_one()
            if not closed_by_server(conn):
                return conn
            log.debug("dropping a connection to %s that the server closed", self._where)
            self._drop(conn)

    async def _wait(self, waiter: asyncio.Future[Any]) -> Any:
        """A connection or a place (:data:`_SLOT`) handed to ``waiter`` by :meth:`give` or :meth:`_forget`."""
        timer = asyncio.get_running_loop().call_later(self._timeout, self._expire, waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._handed_back(waiter.result())  # handed over, then this task was cancelled: not lost
            raise
        finally:
            timer.cancel()
            if not waiter.done():
                waiter.cancel()  # still queued: give and _forget skip it

    def _expire(self, waiter: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_exception(busy_error(self._max_size, self._timeout, self._where))

    async def _open_one(self) -> Any:
        """Connect in this task's place; a connect this task stops waiting for (cancelled) still joins the pool.

        Otherwise callers with deadlines shorter than a connect would each begin one and
        abandon it, and none would ever get a connection.
        """
        connecting = asyncio.ensure_future(self._connect())
        try:
            conn = await asyncio.shield(connecting)
        except asyncio.CancelledError:
            if connecting.done() and not connecting.cancelled() and connecting.exception() is None:
                self._connected(connecting)  # it came, but this task was cancelled meanwhile
            else:
                connecting.add_done_callback(self._connected)
            raise
        except BaseException as exc:
            self._failed(exc)
            raise
        self._outages.succeeded()
        if self._closed:  # closed while connecting
            self._drop(conn)
            raise StorageClosedError(f"this AsyncPostgresStorage is closed ({self._where})")
        return conn

    def _connected(self, connecting: asyncio.Future[Any]) -> None:
        """A connect whose caller was cancelled ended: its connection joins the pool, or its place is freed."""
        if connecting.cancelled():
            self._forget()
        elif (exc := connecting.exception()) is not None:
            self._failed(exc)
        else:
            self._outages.succeeded()
            self.give(connecting.result())

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, Exception):
            self._outages.failed(exc)
            self._fail_waiters(exc)
        self._forget()

    def give(self, conn: Any) -> None:
        """Return ``conn``: kept (handed to the first waiting caller) when it is open and idle, else closed.

        Never suspends. A connection closed here with a transaction or a statement still open
        on it is rolled back by the server.
        """
        if not keepable(conn):
            self._drop(conn)
            return
        with self._lock:
            closed = self._closed
            waiter = None if closed else self._next_waiter()
            if not closed and waiter is None:
                self._idle.append(conn)
                return
        if waiter is None:
            self._drop(conn)
        else:
            self._hand(waiter, conn)

    def _drop(self, conn: Any) -> None:
        try:
            # What psycopg's AsyncConnection.close() does, minus its flag for broken (a coroutine to await,
            # which a cancelled caller could leave half done): libpq closes the socket, nothing waits.
            conn.pgconn.finish()
        except Exception:  # closing a dead connection must not hide the error being raised
            log.debug("error ignored closing a connection to %s", self._where, exc_info=True)
        self._forget()

    def _forget(self) -> None:
        """One connection fewer: its place goes to the first waiting caller, who opens one in it."""
        with self._lock:
            waiter = self._next_waiter()
            if waiter is None:
                self._open -= 1
                return
        self._hand(waiter, _SLOT)

    def _next_waiter(self) -> asyncio.Future[Any] | None:
        """The first caller still waiting, taken off the queue (under the lock)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                return waiter
        return None

    def _hand(self, waiter: asyncio.Future[Any], handed: Any) -> None:
        """Give a connection or a place to ``waiter``, on its loop; if it no longer waits, to the next caller."""
        if not _on_loop_of(waiter, self._arrive, waiter, handed):
            self._handed_back(handed)  # its loop has closed

    def _arrive(self, waiter: asyncio.Future[Any], handed: Any) -> None:
        if waiter.done():  # it stopped waiting (timed out, cancelled) while this was on its way
            self._handed_back(handed)
        else:
            waiter.set_result(handed)

    def _handed_back(self, handed: Any) -> None:
        self._forget() if handed is _SLOT else self.give(handed)

    def _fail_waiters(self, exc: BaseException) -> None:
        with self._lock:
            waiting, self._waiters = self._waiters, deque()
        for waiter in waiting:
            _on_loop_of(waiter, _fail, waiter, exc)

    async def close(self) -> None:
        """Close the idle connections and fail the waiting callers; those lent out are closed when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._drop(conn)
        self._fail_waiters(StorageClosedError(f"this AsyncPostgresStorage is closed ({self._where})"))


def _on_loop_of(future: asyncio.Future[Any], callback: Callable[..., None], *args: Any) -> bool:
    """Run ``callback(*args)`` on ``future``'s loop: now if that loop runs here, else scheduled on it.

    ``False`` if that loop is closed (nothing waits on it any more; the callback did not run).
    """
    loop = future.get_loop()
    try:
        here = asyncio.get_running_loop() is loop
    except RuntimeError:
        here = False
    if here:
        callback(*args)
        return True
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        return False
    return True


def _fail(waiter: asyncio.Future[Any], exc: BaseException) -> None:
    if not waiter.done():
        waiter.set_exception(exc)
