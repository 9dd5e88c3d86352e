"""The only code touching python-oracledb's pools and connections: :class:`OraclePool` and
:class:`OracleConnection`, each with its blocking and its asyncio implementation side by side.

What differs between the two is only the awaiting (and what a cancelled call leaves: a session
that may be waiting on a reply is dropped, never pooled). :class:`~.storage.OracleHooks` is
written once over these.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from types import ModuleType
from typing import Any, Protocol, Self

from workmem.adapters.sql import Result

from .dialect import CLOB_PARAMS, SESSION_SETUP, decode_row, is_unique_violation

__all__ = [
    "AsyncOracleConnection",
    "AsyncOraclePool",
    "BlockingOracleConnection",
    "BlockingOraclePool",
    "OracleConnection",
    "OraclePool",
    "prepare_cursor",
]


class OracleConnection(Protocol):
    """One pooled Oracle connection (a session); Oracle opens its transaction with the first change."""

    @property
    def raw(self) -> Any:
        """python-oracledb's connection (``Connection`` or ``AsyncConnection``)."""

    @property
    def version(self) -> str:
        """The server's version, ``"23.5.0.24.7"``."""

    async def run(self, sql: str, params: dict[str, Any] | None = None) -> Result:
        """Execute ``sql`` with ``params`` bound (CLOB handling by :func:`prepare_cursor`); rows fetched."""

    async def run_many(self, sql: str, rows: list[dict[str, Any]]) -> list[int]:
        """Execute ``sql`` once per bind set of ``rows`` in one round trip (array DML); each row's count."""

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...


class OraclePool(Protocol):
    """python-oracledb's connection pool, as :class:`~.storage.OracleHooks` uses it."""

    async def acquire(self) -> OracleConnection: ...

    async def release(self, conn: OracleConnection, failure: BaseException | None) -> None:
        """Back to the pool (errors ignored: the pool drops a dead session); after a cancelled call, dropped."""

    async def close(self) -> None:
        """Close the pool, connections in use included (the driver's errors as raised)."""


# -- one statement on a cursor, sync or async (what differs is only the awaiting) -----------------


def prepare_cursor(oracledb: ModuleType, cursor: Any, params: dict[str, Any]) -> None:
    """CLOB columns read as ``str``, and the long-text parameters (:data:`CLOB_PARAMS`) bound as CLOB.

    Past 32 KiB a string bind is a LONG, which ``SELECT … FROM dual`` refuses
    (ORA-01461); a CLOB read as a LOB would need another round trip per value.
    """

    def lobs_as_text(cursor: Any, metadata: Any) -> Any:  # python-oracledb >= 2: the two-argument form
        if metadata.type_code is oracledb.DB_TYPE_CLOB:
            return cursor.var(oracledb.DB_TYPE_LONG, arraysize=cursor.arraysize)
        return None

    cursor.outputtypehandler = lobs_as_text
    clobs = {name: oracledb.DB_TYPE_CLOB for name in params if name in CLOB_PARAMS}
    if clobs:
        cursor.setinputsizes(**clobs)


def array_counts(oracledb: ModuleType, cursor: Any) -> list[int]:
    """The row count of each row of an ``executemany(..., batcherrors=True, arraydmlrowcounts=True)``.

    A row that lost an insert race (ORA-00001: a concurrent insert of its id won) counts 0, like a
    row the ``MERGE`` found present; any other row error is raised.
    """
    counts = [int(n) for n in cursor.getarraydmlrowcounts()]
    for error in cursor.getbatcherrors():
        if not is_unique_violation(getattr(error, "code", 0), getattr(error, "full_code", "")):
            raise oracledb.DatabaseError(error)
        counts[error.offset] = 0
    return counts


def _result(cursor: Any, rows: list[Any]) -> Result:
    names = [column[0] for column in cursor.description]
    return Result([decode_row(names, row) for row in rows], cursor.rowcount)


class _Session:
    """What both :class:`OracleConnection` implementations hold: the driver module and its connection."""

    __slots__ = ("_oracledb", "raw")

    def __init__(self, oracledb: ModuleType, raw: Any) -> None:
        self._oracledb = oracledb
        self.raw = raw

    @property
    def version(self) -> str:
        return str(self.raw.version)


class BlockingOracleConnection(_Session):
    """An :class:`OracleConnection` over a blocking python-oracledb ``Connection``: nothing here suspends."""

    __slots__ = ()

    async def run(self, sql: str, params: dict[str, Any] | None = None) -> Result:
        with self.raw.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, params or {})
            cursor.execute(sql, params)
            return _result(cursor, cursor.fetchall()) if cursor.description else Result([], cursor.rowcount)

    async def run_many(self, sql: str, rows: list[dict[str, Any]]) -> list[int]:
        with self.raw.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, rows[0])
            cursor.executemany(sql, rows, batcherrors=True, arraydmlrowcounts=True)
            return array_counts(self._oracledb, cursor)

    async def commit(self) -> None:
        self.raw.commit()

    async def rollback(self) -> None:
        self.raw.rollback()


class AsyncOracleConnection(_Session):
    """An :class:`OracleConnection` over a python-oracledb ``AsyncConnection``."""

    __slots__ = ()

    async def run(self, sql: str, params: dict[str, Any] | None = None) -> Result:
        with self.raw.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, params or {})
            await cursor.execute(sql, params)
            return _result(cursor, await cursor.fetchall()) if cursor.description else Result([], cursor.rowcount)

    async def run_many(self, sql: str, rows: list[dict[str, Any]]) -> list[int]:
        with self.raw.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, rows[0])
            await cursor.executemany(sql, rows, batcherrors=True, arraydmlrowcounts=True)
            return array_counts(self._oracledb, cursor)

    async def commit(self) -> None:
        await self.raw.commit()

    async def rollback(self) -> None:
        await self.raw.rollback()


class _Pool:
    """What both :class:`OraclePool` implementations hold: the driver module and its pool."""

    __slots__ = ("_oracledb", "_pool")

    def __init__(self, oracledb: ModuleType, pool: Any) -> None:
        self._oracledb = oracledb
        self._pool = pool


class BlockingOraclePool(_Pool):
    """An :class:`OraclePool` over python-oracledb's blocking pool (``oracledb.create_pool``)."""

    __slots__ = ()

    @classmethod
    def open(cls, oracledb: ModuleType, options: dict[str, Any]) -> Self:
        """``oracledb.create_pool(**options)``: no connection yet; each new session set up once."""
        return cls(oracledb, oracledb.create_pool(**options, session_callback=_setup_session))

    async def acquire(self) -> OracleConnection:
        return BlockingOracleConnection(self._oracledb, self._pool.acquire())

    async def release(self, conn: OracleConnection, failure: BaseException | None) -> None:
        with suppress(self._oracledb.Error):
            self._pool.release(conn.raw)

    async def close(self) -> None:
        self._pool.close(force=True)


class AsyncOraclePool(_Pool):
    """An :class:`OraclePool` over python-oracledb's asyncio pool (``oracledb.create_pool_async``)."""

    __slots__ = ()

    @classmethod
    def open(cls, oracledb: ModuleType, options: dict[str, Any]) -> Self:
        """``oracledb.create_pool_async(**options)`` (a plain call): no connection yet; each new session set up once."""
        return cls(oracledb, oracledb.create_pool_async(**options, session_callback=_setup_session_async))

    async def acquire(self) -> OracleConnection:
        return AsyncOracleConnection(self._oracledb, await self._pool.acquire())

    async def release(self, conn: OracleConnection, failure: BaseException | None) -> None:
        with suppress(self._oracledb.Error):
            if isinstance(failure, asyncio.CancelledError):
                # Cancelled mid-call: the session may be waiting on a reply; the pool replaces it.
                await self._pool.drop(conn.raw)
            else:
                await self._pool.release(conn.raw)

    async def close(self) -> None:
        await self._pool.close(force=True)


def _setup_session(connection: Any, requested_tag: str | None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(SESSION_SETUP)


async def _setup_session_async(connection: Any, requested_tag: str | None) -> None:
    with connection.cursor() as cursor:
        await cursor.execute(SESSION_SETUP)
