"""``AsyncConnectionPool`` (workmem/adapters/postgres/pool.py) on fake connections: places, hand-overs, cancellation.

The real-server behaviour (outages through a proxy, cancel storms) is in
``tests/postgres/test_postgres_async.py``; here each race is made to happen exactly.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from workmem.adapters.postgres.pool import AsyncConnectionPool
from workmem.errors import BackendBusyError, StorageClosedError, ValidationError


class _PgConn:
    def __init__(self) -> None:
        self.transaction_status = 0  # IDLE
        self.finished = False

    def finish(self) -> None:
        self.finished = True
        self.transaction_status = 4  # UNKNOWN, as libpq says of a closed connection


class _Conn:
    """What the pool reads of a psycopg connection: ``closed``, ``pgconn`` and a socket to poll."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pgconn = _PgConn()
        self._ours, self._theirs = socket.socketpair()

    @property
    def closed(self) -> bool:
        return self.pgconn.finished

    def fileno(self) -> int:
        return self._ours.fileno()

    def server_closes(self) -> None:
        self._theirs.close()  # the pooled end becomes readable (EOF), as after the server's FATAL

    def close_sockets(self) -> None:
        self._ours.close()
        if self._theirs.fileno() != -1:
            self._theirs.close()


class _Server:
    """Connects on demand; ``gate`` (when set) holds every connect until it is opened; ``refuse`` fails them."""

    def __init__(self) -> None:
        self.opened: list[_Conn] = []
        self.connecting = 0
        self.gate: asyncio.Event | None = None
        self.refuse: Exception | None = None

    async def connect(self) -> _Conn:
        self.connecting += 1
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.refuse is not None:
                raise self.refuse
            conn = _Conn(len(self.opened))
            self.opened.append(conn)
            return conn
        finally:
            self.connecting -= 1

    def close(self) -> None:
        for conn in self.opened:
            conn.close_sockets()


def _run(test: Callable[[_Server], Awaitable[None]]) -> None:
    server = _Server()
    try:
        asyncio.run(test(server))
    finally:
        server.close()


def _pool(server: _Server, max_size: int = 2, timeout: float = 5.0) -> AsyncConnectionPool:
    return AsyncConnectionPool(server.connect, max_size=max_size, timeout=timeout, where="fake")


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_waiter_cancelled_after_the_hand_over_gives_the_connection_back() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=1)
        held = await pool.take()
        waiter = asyncio.ensure_future(pool.take())
        await _settle()
        assert pool.get_stats()["requests_waiting"] == 1
        pool.give(held)  # handed to the waiter...
        waiter.cancel()  # ...which is cancelled before it runs again
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert pool.get_stats() == {"pool_size": 1, "pool_available": 1, "requests_waiting": 0}
        assert await pool.take() is held and len(server.opened) == 1

    _run(main)


def test_a_waiter_cancelled_after_being_given_a_place_frees_it() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=1)
        held = await pool.take()
        waiter = asyncio.ensure_future(pool.take())
        await _settle()
        held.pgconn.transaction_status = 2  # left in a transaction: closed when given back, its place handed on
        pool.give(held)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert held.closed
        assert pool.get_stats() == {"pool_size": 0, "pool_available": 0, "requests_waiting": 0}
        assert (await pool.take()).n == 1  # the place was not lost

    _run(main)


def test_no_more_than_max_size_connect_and_the_waiters_fail_with_a_failed_connect() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=2)
        server.gate = asyncio.Event()
        server.refuse = ConnectionRefusedError("refused")
        calls = [asyncio.ensure_future(pool.take()) for _ in range(6)]
        await _settle()
        assert server.connecting == 2  # the other four wait: every connect counts against max_size
        assert pool.get_stats() == {"pool_size": 2, "pool_available": 0, "requests_waiting": 4}
        server.gate.set()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, ConnectionRefusedError) for r in results), results  # at once, not one by one
        assert pool.get_stats() == {"pool_size": 0, "pool_available": 0, "requests_waiting": 0}
        server.refuse = None
        assert (await pool.take()).n == 0  # the first call after the server is back connects

    _run(main)


def test_a_connect_whose_caller_is_cancelled_still_joins_the_pool() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=1)
        server.gate = asyncio.Event()
        caller = asyncio.ensure_future(pool.take())
        await _settle()
        caller.cancel()  # a deadline shorter than the connect
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert pool.get_stats()["pool_size"] == 1  # the connect goes on, in its place
        server.gate.set()
        await _settle()
        assert pool.get_stats() == {"pool_size": 1, "pool_available": 1, "requests_waiting": 0}
        assert (await pool.take()).n == 0 and len(server.opened) == 1

    _run(main)


def test_a_connect_whose_caller_is_cancelled_hands_its_connection_to_a_waiter() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=1)
        server.gate = asyncio.Event()
        first = asyncio.ensure_future(pool.take())
        await _settle()
        second = asyncio.ensure_future(pool.take())
        await _settle()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        server.gate.set()
        assert (await second).n == 0 and len(server.opened) == 1

    _run(main)


def test_waiting_past_timeout_is_busy_and_a_server_closed_idle_connection_is_replaced() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=1, timeout=0.05)
        held = await pool.take()
        with pytest.raises(BackendBusyError, match="max_size"):
            await pool.take()
        pool.give(held)
        held.server_closes()
        fresh = await pool.take()
        assert fresh is not held and held.closed and fresh.n == 1
        assert pool.get_stats()["pool_size"] == 1

    _run(main)


def test_close_fails_the_waiters_and_closes_what_comes_back() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=1)
        held = await pool.take()
        waiter = asyncio.ensure_future(pool.take())
        await _settle()
        await pool.close()
        with pytest.raises(StorageClosedError):
            await waiter
        pool.give(held)
        assert held.closed and pool.get_stats()["pool_size"] == 0
        with pytest.raises(StorageClosedError):
            await pool.take()

    _run(main)


def test_the_first_waiting_is_served_first() -> None:
    async def main(server: _Server) -> None:
        pool = _pool(server, max_size=1)
        held = await pool.take()
        order: list[int] = []

        async def take(n: int) -> Any:
            conn = await pool.take()
            order.append(n)
            pool.give(conn)

        waiters = []
        for n in range(4):
            waiters.append(asyncio.ensure_future(take(n)))
            await _settle()
        pool.give(held)
        await asyncio.gather(*waiters)
        assert order == [0, 1, 2, 3] and len(server.opened) == 1

    _run(main)


def test_the_default_pool_is_twenty_connections_for_threads_and_ten_for_the_tasks_of_an_event_loop() -> None:
    """16 threads on one sync storage each hold a connection; 64 tasks on one loop gain nothing from more than 10
    in flight but a slower loop (p99 lag 11.6 ms with 20, 4.9 ms with 10, the same merges/s)."""
    from workmem.adapters.postgres.settings import TASKS_MAX_SIZE, THREADS_MAX_SIZE, PostgresSettings

    default = PostgresSettings("host=x")
    assert (default.pool_size(awaited=False), default.pool_size(awaited=True)) == (THREADS_MAX_SIZE, TASKS_MAX_SIZE)
    assert (THREADS_MAX_SIZE, TASKS_MAX_SIZE) == (20, 10)
    given = PostgresSettings("host=x", max_size=3)
    assert (given.pool_size(awaited=False), given.pool_size(awaited=True)) == (3, 3)
    assert PostgresSettings("host=x", min_size=12).pool_size(awaited=True) == 12  # never below min_size
    with pytest.raises(ValidationError, match="max_size"):
        PostgresSettings("host=x", max_size=0)


@pytest.mark.backend("postgres")
def test_each_face_opens_its_default_pool() -> None:
    from servers import server_url

    import workmem

    url = server_url("postgres")
    with workmem.connect(url) as storage:
        assert storage._pool._max_size == 20  # type: ignore[attr-defined]

    async def awaited() -> int:
        async with await workmem.connect_async(url) as storage:
            return storage._pool._max_size  # type: ignore[attr-defined,no-any-return]

    assert asyncio.run(awaited()) == 10
