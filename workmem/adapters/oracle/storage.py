"""Oracle Database: ``oracle://USER:PASSWORD@HOST:1521/?service_name=SERVICE`` or ``oracle://USER:PASSWORD@HOST:1521/SERVICE``.

The scheme may also be spelled ``oracle+oracledb``; the port defaults to 1521;
user and password are URL-decoded. ``table_prefix=PREFIX`` (query parameter or
option) puts the tables and index under ``PREFIX`` + Mastra's names: it exists
so that test runs get fresh tables, and real deployments never need it.
Options: ``min_size`` (pooled sessions kept open, default 0), ``max_size``
(default 8), ``timeout`` (seconds to wait for a pooled session, default 10),
``connect_timeout`` (seconds for one TCP connect, default 5), ``table_prefix``.

Driver: python-oracledb in thin mode (``pip install 'workmem[oracle]'``; no
Oracle Client libraries, ``init_oracle_client`` is never called), with its
connection pool: :class:`OracleStorage` (the sync API) uses its blocking pool,
:class:`AsyncOracleStorage` (the async API, ``workmem.connect_async``) its
asyncio pool (``oracledb.create_pool_async``). Oracle 19c or later: ``metadata``
is native ``JSON`` from 21c on, ``CLOB CHECK (metadata IS JSON)`` before
(:mod:`workmem.adapters.oracle.dialect`).

Both classes are :class:`OracleHooks`: the SQL core's hooks
(:class:`~workmem.adapters.sql.SqlHooks`: the attempt loop, transactions), with
Oracle's port over :mod:`.port` (its blocking or its asyncio pool), its two
policies (errors by ORA/DPY code, :func:`~.dialect.runs_again`), the schema setup
and the ``MERGE``s that return no row; the two classes differ only in opening the
pool (:mod:`.settings` holds where and how).

Atomicity: ``save_thread`` is one ``MERGE`` whose update branch runs only for
the same owner (row count 0 = another owner); of two racing creates of one id
the loser gets ORA-00001 and runs the ``MERGE`` again, which then decides.
``create_thread`` is the same ``MERGE`` without the update branch (row count 0 =
the id exists). Updates and working-memory merges lock the row (``SELECT … FOR UPDATE``), compute
the new record in Python and write it back in the same transaction; a missing
resource is first created by a ``MERGE`` that takes a lost insert race as done.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime
from typing import Any, ClassVar, Final, Self

from workmem.adapters.sql import Attempt, Result, SqlHooks, Statement
from workmem.adapters.sql.rows import thread_from_row
from workmem.aio import AsyncMemoryStorage
from workmem.errors import StorageClosedError, ThreadExistsError, ThreadOwnershipError, ValidationError, WorkmemError
from workmem.kit import (
    Capabilities,
    MemoryVersion,
    Recording,
    driver_error,
    import_driver,
    missing_tables,
    raise_unchained,
    run_sync,
)
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage

from .dialect import (
    ALREADY_EXISTS,
    INVALID_DATATYPE,
    RESOURCE_BUSY,
    OracleDialect,
    error_kind,
    oracle_error_code,
    runs_again,
)
from .port import AsyncOraclePool, BlockingOraclePool, OracleConnection, OraclePool
from .settings import OracleSettings

__all__ = ["AsyncOracleStorage", "OracleHooks", "OracleStorage"]

_DDL_ATTEMPTS: Final = 5
_NATIVE_JSON_VERSION: Final = 21
"""Oracle's JSON data type exists from 21c; older servers get ``CLOB CHECK (metadata IS JSON)``."""
_TABLE_GONE: Final = 942
"""ORA-00942: table or view does not exist."""


def _error(settings: OracleSettings, oracledb: Any, exc: Exception, action: str) -> WorkmemError | None:
    """The workmem error of a python-oracledb error (:func:`~.dialect.error_kind`), the password masked."""
    if not isinstance(exc, oracledb.Error):
        return None
    code, full_code = oracle_error_code(exc)
    context = f"Oracle {action} failed on {settings.masked_url}"
    return driver_error(error_kind(code, full_code), context, exc, settings.password, code=full_code or None)


def _open_pool(settings: OracleSettings, pool: type[BlockingOraclePool | AsyncOraclePool]) -> OraclePool:
    """The pool (blocking or asyncio: neither connects yet), the driver's errors mapped."""
    oracledb = import_driver("oracledb", "oracle")
    try:
        return pool.open(oracledb, settings.pool_options(oracledb))
    except Exception as exc:
        error = _error(settings, oracledb, exc, "connect")
        if error is None:
            raise
        raise_unchained(error)


class OracleHooks(SqlHooks):
    """Working memory in Oracle, in the tables the TypeScript Mastra adapter (``@mastra/oracledb``) uses.

    Everything but opening the pool, for :class:`OracleStorage` and :class:`AsyncOracleStorage`.
    """

    capabilities: ClassVar[Capabilities] = Capabilities(
        cross_process_atomic=True, persistent=True, history=True, erase=True
    )
    autocommit: ClassVar[bool] = False
    dialect: OracleDialect

    def __init__(self, settings: OracleSettings, pool: OraclePool) -> None:
        """Keep an opened pool; :meth:`_setup` then reads (or creates) the tables and sets :attr:`dialect`."""
        super().__init__(OracleDialect(settings.table_prefix))
        self._settings = settings
        self._oracledb = import_driver("oracledb", "oracle")  # its error classes
        self._pool = pool
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._settings.masked_url!r})"

    # -- the port, over .port ------------------------------------------------------------

    async def _checkout(self) -> OracleConnection:
        if self._closed:
            raise StorageClosedError(f"this {type(self).__name__} is closed ({self._settings.masked_url})")
        return await self._pool.acquire()

    async def _give(self, conn: OracleConnection, failure: BaseException | None = None) -> None:
        await self._pool.release(conn, failure)

    async def _query(self, conn: OracleConnection, sql: str, params: Any = None) -> Result:
        return await conn.run(sql, params)

    async def _commit(self, conn: OracleConnection) -> None:
        await conn.commit()

    async def _rollback(self, conn: OracleConnection, cause: BaseException) -> None:
        if isinstance(cause, asyncio.CancelledError):
            return  # the session may be waiting on a reply: _give drops it, and the server rolls back
        with suppress(self._oracledb.Error):  # keep the first error; the pool drops a dead session
            await conn.rollback()

    # -- the two policies ------------------------------------------------------------------

    def _error(self, exc: Exception) -> WorkmemError | None:
        return _error(self._settings, self._oracledb, exc, "statement")

    def _again(self, exc: Exception, attempt: Attempt) -> float | None:
        return 0.0 if runs_again(exc, attempt.number, read=attempt.read) else None

    # -- what Oracle does differently: a MERGE returns no rows ------------------------------

    async def _merge_then_read(self, merge: Statement, thread_id: str, refused: Callable[[], WorkmemError]) -> Thread:
        """Run ``merge``; row count 0 raises ``refused()``; else the stored row, read in the same transaction."""
        merge_sql, merge_params = self.dialect.render(merge)
        read_sql, read_params = self.dialect.render(self.dialect.select_thread(thread_id))

        async def work(conn: OracleConnection) -> Thread:
            if (await conn.run(merge_sql, merge_params)).rowcount == 0:
                raise refused()
            return thread_from_row((await conn.run(read_sql, read_params)).rows[0])

        return await self._attempts(work, read=False, transaction=True)

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        if record is not None:  # the SQL core's transaction, which records the version too
            return await super()._create_thread(thread, record)
        statement = self.dialect.create_thread(thread)  # inserts, or changes nothing when the id exists
        return await self._merge_then_read(statement, thread.id, lambda: ThreadExistsError(thread.id))

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        if record is not None:
            return await super()._save_thread(thread, now, record)
        statement = self.dialect.save_thread(thread, now)  # its update branch runs for the same owner only
        refused = functools.partial(ThreadOwnershipError, thread.id, thread.resource_id)
        return await self._merge_then_read(statement, thread.id, refused)

    # -- bulk inserts: one insert-only MERGE, array DML (executemany) over the batch -----------

    async def _run_each(self, statements: Sequence[Statement]) -> list[int]:
        """Run the same insert-only ``MERGE`` for each record in one round trip; each one's row count."""
        if not statements:
            return []
        rendered = [self.dialect.render(statement) for statement in statements]
        sql = rendered[0][0]

        async def work(conn: OracleConnection) -> list[int]:
            return await conn.run_many(sql, [params for _, params in rendered])

        return await self._attempts(work, read=False, transaction=True)

    async def _insert_each(self, ids: Sequence[str], statements: Sequence[Statement]) -> frozenset[str]:
        """Insert-only ``MERGE``s of records (:meth:`_run_each`); the ids it found present."""
        counts = await self._run_each(statements)
        return frozenset(record_id for record_id, count in zip(ids, counts, strict=True) if count == 0)

    async def _insert_versions(self, versions: Sequence[MemoryVersion]) -> int:
        return sum(await self._run_each([self.dialect.create_version(version) for version in versions]))

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        statements = [self.dialect.create_resource(resource) for resource in resources]
        return await self._insert_each([r.id for r in resources], statements)

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        statements = [self.dialect.create_thread(thread) for thread in threads]
        return await self._insert_each([t.id for t in threads], statements)

    # -- schema ------------------------------------------------------------------------------

    async def _setup(self) -> None:
        """Create what is missing (unless ``create=False``), then set :attr:`dialect`; close the pool on failure."""
        try:
            self.dialect = await self._attempts(self._prepare_schema, read=False, transaction=True)
        except BaseException:
            self._closed = True
            with suppress(self._oracledb.Error):  # the setup's error is the one to raise
                await self._pool.close()
            raise

    async def _prepare_schema(self, conn: OracleConnection) -> OracleDialect:
        """The dialect of the tables as they are, after creating the missing ones (unless ``create=False``)."""
        prefix = self._settings.table_prefix
        major = int(conn.version.split(".")[0])
        dialect = OracleDialect(prefix, native_json=major >= _NATIVE_JSON_VERSION)
        if self._settings.create:
            try:
                await self._create(conn, dialect.ddl()[0])
            except self._oracledb.DatabaseError as exc:
                if not dialect.native_json or oracle_error_code(exc)[0] != INVALID_DATATYPE:
                    raise
                dialect = OracleDialect(prefix, native_json=False)  # 21c+ run with COMPATIBLE < 20
            for ddl in dialect.ddl():
                await self._create(conn, ddl)
        types = dict((await conn.run(*dialect.render(dialect.metadata_types()))).rows)
        missing = [name for name in (dialect.resources, dialect.threads) if name not in types]
        if missing:  # only without create: the tables must be there (their metadata types say so)
            raise missing_tables(self._settings.masked_url, missing)
        native = types[dialect.resources] == "JSON" and types[dialect.threads] == "JSON"
        return OracleDialect(prefix, native_json=native)

    async def _create(self, conn: OracleConnection, ddl: str) -> None:
        """One ``CREATE``; "already exists" is success (Oracle has no ``IF NOT EXISTS`` before 23ai)."""
        for attempt in range(1, _DDL_ATTEMPTS + 1):
            try:
                await conn.run(ddl)
                return
            except self._oracledb.DatabaseError as exc:
                code = oracle_error_code(exc)[0]
                if code in ALREADY_EXISTS:
                    return
                if code != RESOURCE_BUSY or attempt == _DDL_ATTEMPTS:
                    raise
                await self._pause(0.1 * attempt)  # another session is creating the same table or index

    async def _drop_tables(self) -> None:
        if not self.dialect.table_prefix:
            raise ValidationError("drop_tables() only drops the tables of a table_prefix")

        async def work(conn: OracleConnection) -> None:
            for ddl in self.dialect.drop_tables():
                try:
                    await conn.run(ddl)
                except self._oracledb.DatabaseError as exc:
                    if oracle_error_code(exc)[0] != _TABLE_GONE:
                        raise

        await self._attempts(work, read=False, transaction=True)

    # -- lifecycle ---------------------------------------------------------------------------

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._pool.close()
        except Exception as exc:
            error = _error(self._settings, self._oracledb, exc, "close")
            if error is None:
                raise
            raise_unchained(error)


# -- the two APIs: only how the pool is opened -------------------------------------------------------


class OracleStorage(OracleHooks, MemoryStorage):
    """Oracle behind the sync API, on python-oracledb's blocking pool."""

    async_adapter: ClassVar[str | None] = "workmem.adapters.oracle:AsyncOracleStorage"

    def __init__(self, settings: OracleSettings) -> None:
        super().__init__(settings, _open_pool(settings, BlockingOraclePool))
        run_sync(self._setup())

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        return cls(OracleSettings.from_url(url, **options))

    def drop_tables(self) -> None:
        """Drop this instance's tables; only allowed with a ``table_prefix`` (tests that made their own)."""
        run_sync(self._drop_tables())


class AsyncOracleStorage(OracleHooks, AsyncMemoryStorage):
    """Oracle behind the async API, on python-oracledb's asyncio pool (thin mode); open with :meth:`open`."""

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        """Open the pool and create what is missing (unless ``create=False``); options as :class:`OracleStorage`'s."""
        settings = OracleSettings.from_url(url, **options)
        storage = cls(settings, _open_pool(settings, AsyncOraclePool))
        await storage._setup()
        return storage

    async def drop_tables(self) -> None:
        """See :meth:`OracleStorage.drop_tables`."""
        await self._drop_tables()
