"""The PostgreSQL adapter's port: psycopg's connections and statements, blocking and awaited side by side.

:class:`~.storage.PostgresHooks` is written once over :class:`PostgresPort`; the two
implementations differ only in the awaiting: :class:`BlockingPort` calls psycopg's
blocking API and never suspends (see :func:`workmem.kit.run_sync`),
:class:`AwaitedPort` awaits its asyncio API. Each keeps its pool (:mod:`.pool`) and
opens the connections it lacks as :func:`.connections.connection_class` makes them.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from workmem.adapters.sql import Result

from .driverlog import statement
from .pool import AsyncConnectionPool, ConnectionPool
from .settings import PostgresSettings

__all__ = ["AwaitedPort", "BlockingPort", "PostgresPort"]

SESSION_SETUP: Final = "SET TIME ZONE 'UTC'"
"""Run on every new connection: timestamps come back in UTC (psycopg then uses ``datetime.UTC``).

Every statement names its time zone explicitly, so this changes no value,
only how psycopg hands timestamps over: the row mapper takes them as they are.
"""


class PostgresPort(Protocol):
    """What :class:`~.storage.PostgresHooks` does with psycopg."""

    pool: ConnectionPool | AsyncConnectionPool
    """The connections, each lent to one caller at a time."""

    async def take(self) -> Any:
        """A live connection for this caller alone, until :meth:`give`; the driver's error if none can be opened."""

    def give(self, conn: Any) -> None:
        """Back to the pool: kept only when open and idle (no transaction left open); never suspends."""

    async def query(self, conn: Any, sql: str, params: Any = None) -> Result:
        """Run ``sql`` on ``conn`` (on the cursor it keeps); the driver's error as raised."""

    async def close(self) -> None: ...


class _Port:
    """What both ports keep: how to open a connection, and how to read a statement's rows."""

    def __init__(self, psycopg: Any, settings: PostgresSettings, connections: type[Any]) -> None:
        self._connections = connections
        self._conninfo = settings.conninfo
        self._options = settings.connect_options(psycopg)
        if connections.workmem_fast_path:  # psycopg prepares nothing itself: see .keyreads
            self._options["prepare_threshold"] = None
        # rows came back: read from the result's status (cursor.description builds a Column per column each call)
        self._tuples_ok = psycopg.pq.ExecStatus.TUPLES_OK

    def _has_rows(self, cursor: Any) -> bool:
        result = cursor.pgresult
        return result is not None and result.status == self._tuples_ok

    def give(self, conn: Any) -> None:
        self.pool.give(conn)

    pool: Any


class BlockingPort(_Port):
    """:class:`PostgresPort` on psycopg's blocking connections: nothing here suspends."""

    def __init__(self, psycopg: Any, settings: PostgresSettings, connections: type[Any], **pool: Any) -> None:
        super().__init__(psycopg, settings, connections)
        self.pool = ConnectionPool(
            self._open, max_size=settings.pool_size(awaited=False), timeout=settings.timeout, **pool
        )

    def _open(self) -> Any:
        """One new connection, set up; the driver's error when the server cannot be reached."""
        conn = self._connections.connect(self._conninfo, **self._options)
        try:
            conn.execute(SESSION_SETUP)
        except BaseException:
            conn.close()
            raise
        return conn

    async def take(self) -> Any:
        return self.pool.take()

    async def query(self, conn: Any, sql: str, params: Any = None) -> Result:
        cursor = conn.workmem_cursor
        with statement():
            cursor.execute(sql, params)
        return Result(cursor.fetchall() if self._has_rows(cursor) else [], cursor.rowcount)

    async def close(self) -> None:
        self.pool.close()


class AwaitedPort(_Port):
    """:class:`PostgresPort` on psycopg's asyncio connections."""

    def __init__(self, psycopg: Any, settings: PostgresSettings, connections: type[Any], **pool: Any) -> None:
        super().__init__(psycopg, settings, connections)
        self.pool = AsyncConnectionPool(
            self._open, max_size=settings.pool_size(awaited=True), timeout=settings.timeout, **pool
        )

    async def _open(self) -> Any:
        """One new connection, set up; the driver's error when the server cannot be reached."""
        conn = await self._connections.connect(self._conninfo, **self._options)
        try:
            await conn.execute(SESSION_SETUP)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def take(self) -> Any:
        return await self.pool.take()

    async def query(self, conn: Any, sql: str, params: Any = None) -> Result:
        cursor = conn.workmem_cursor
        with statement():  # psycopg's warning on a cancellation it cannot complete: a debug record of ours
            await cursor.execute(sql, params)
        return Result(await cursor.fetchall() if self._has_rows(cursor) else [], cursor.rowcount)

    async def close(self) -> None:
        await self.pool.close()
