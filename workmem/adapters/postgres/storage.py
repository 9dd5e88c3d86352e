"""PostgreSQL: ``postgresql://USER:PASSWORD@HOST:5432/DB?schema=public`` (also ``postgres://``, ``postgresql+psycopg://``).

``schema`` (default ``public``) names the schema holding Mastra's tables; it is
created when missing; system schemas (``information_schema``, ``pg_*``) are
refused. Other query parameters go to libpq (``sslmode``, ...).
Options: ``min_size`` (connections opened by ``connect()``, default 1),
``max_size`` (connections open at most, default 20 for the sync API, 10 for the async one), ``timeout`` (seconds to
wait when all ``max_size`` are in use, default 30), ``connect_timeout``
(seconds for opening one connection, default 10, or the URL's own
``connect_timeout``; libpq counts at least 2), ``schema``, ``create``
(default ``True``; ``False`` creates nothing, for a SELECT-only role: the
tables must exist).

Driver: psycopg 3 (``pip install 'workmem[postgres]'``). :class:`PostgresStorage`
(sync) uses workmem's own pool (:mod:`workmem.adapters.postgres.pool`): a
connection is opened in the calling thread when none is idle, so while the
server is down a call fails within ``connect_timeout`` with the driver's reason
(``Connection refused``, ``timeout expired``), and the first call after it is
back connects at once. :class:`AsyncPostgresStorage` (``connect_async``) awaits
psycopg's async connections from the same kind of pool for asyncio, kept to
the same promises (see the class).
Every operation is one statement on an autocommit connection, so it is atomic
and one round trip. A connection the server closed (restart,
``pg_terminate_backend``) is noticed before use, without a round trip, and
replaced; a read (or the ``BEGIN`` of a read-modify-write) that still meets
a dropped connection is tried once more on a new one, a write never is: it
may have run before the connection dropped. Errors are classified by SQLSTATE
(:mod:`workmem.adapters.postgres.sqlstate`): worth retrying or refused.

Both classes are :class:`PostgresHooks`: URL and options, the two policies of
the SQL core's :class:`~workmem.adapters.sql.SqlHooks` (which runs the attempt
loop and the transactions): errors by SQLSTATE and a read tried once more on a
lost connection; table setup, filling the pool. They differ only in their port
(:mod:`.port`: psycopg's blocking or asyncio connections). Both read by key on
the hot path of :mod:`.keyreads` (a prepared statement on libpq), which waits
for the socket by blocking or on the event loop.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from workmem.adapters.sql import Attempt, Result, SqlHooks
from workmem.adapters.sql.dialect import KeyRead
from workmem.adapters.sql.hooks import ExactCheckNeeded, StoredMetadataUnreadable
from workmem.aio import AsyncMemoryStorage
from workmem.errors import (
    BackendUnavailableError,
    StorageClosedError,
    ValidationError,
    WorkingMemoryFormatError,
    WorkmemError,
)
from workmem.kit import (
    CREATE_FALSE_ADVICE,
    Capabilities,
    detach,
    driver_error,
    import_driver,
    mask_secrets,
    missing_tables,
    raise_unchained,
    run_sync,
)
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage

from . import bulk
from .connections import connection_class, fast_path, fast_path_failed
from .dialect import (
    EXACT_CHECK_ERROR,
    FORMAT_ERROR,
    NEAR_LIMIT_ERROR,
    TOO_LARGE_ERROR,
    UNREADABLE_METADATA_ERROR,
    PostgresDialect,
)
from .pool import log
from .port import AwaitedPort, BlockingPort, PostgresPort
from .settings import PostgresSettings
from .sqlstate import error_kind

if TYPE_CHECKING:
    from .keyreads import PreparedRead, PreparedStatement

__all__ = ["AsyncPostgresStorage", "PostgresHooks", "PostgresStorage"]

T = TypeVar("T")
R = TypeVar("R")

_RETRYABLE_STATES = ("57P01", "57P02", "57P03")  # admin/crash shutdown, cannot connect now (class 08 too)
_INSUFFICIENT_PRIVILEGE = "42501"
MAX_PREPARED = 256
"""Distinct statements a storage prepares on libpq at most; any further one runs on psycopg's cursor."""

_MISSING_TABLES = (
    "SELECT name FROM unnest(CAST(%s AS text[])) WITH ORDINALITY AS t(name, n) "
    "WHERE to_regclass(format('%%I.%%I', CAST(%s AS text), name)) IS NULL ORDER BY n"
)


class PostgresHooks(SqlHooks):
    """Everything the sync and the async PostgreSQL storage decide alike, over :class:`~.port.PostgresPort`.

    The sync class's port calls the blocking driver (it never suspends, see
    :func:`workmem.kit.run_sync`), the async one's psycopg's async API.
    """

    capabilities: ClassVar[Capabilities] = Capabilities(
        cross_process_atomic=True, persistent=True, history=True, erase=True
    )
    dialect: PostgresDialect
    _port_type: ClassVar[type[BlockingPort] | type[AwaitedPort]]
    _connection_type: ClassVar[str]
    """psycopg's connection class for the port: ``Connection`` or ``AsyncConnection``."""

    def __init__(self, settings: PostgresSettings | str, **options: Any) -> None:
        """Connect as ``settings`` say: a :class:`PostgresSettings`, or its arguments (a conninfo, options)."""
        if isinstance(settings, str):
            settings = PostgresSettings(settings, **options)
        elif options:
            raise ValidationError("options come with a conninfo, not with PostgresSettings")
        super().__init__(PostgresDialect(settings.schema))
        self._settings = settings
        self._psycopg = import_driver("psycopg", "postgres")
        # the prepared key reads on libpq (.keyreads), or None: this psycopg is not the one they were written for
        self._keyreads = fast_path(self._psycopg)
        self._prepared_reads: dict[str, PreparedRead] = {}  # by KeyRead.sql: the dialect may be replaced
        self._prepared_statements: dict[str, PreparedStatement] = {}  # by rendered SQL (see _query)
        # Their numbers, which name them on each connection: from a counter, so two threads preparing two statements
        # at once never share one (len() of the dict could give both the same, and a connection the wrong statement).
        self._read_numbers, self._statement_numbers = itertools.count(), itertools.count()
        self._secrets = settings.secrets
        self._url = settings.where
        connections = self._connections(getattr(self._psycopg, self._connection_type))
        where, describe, is_outage = self._url, self._describe, self._is_outage
        self._port: PostgresPort = self._port_type(
            self._psycopg, settings, connections, where=where, describe=describe, is_outage=is_outage
        )
        self._pool = self._port.pool

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._url!r}, schema={self.dialect.schema!r})"

    # -- the port, over .port -----------------------------------------------------------

    async def _checkout(self) -> Any:
        return await self._port.take()

    async def _give(self, conn: Any, failure: BaseException | None = None) -> None:
        self._port.give(conn)  # kept only when open and idle (no transaction left open); never suspends

    async def _query(self, conn: Any, sql: str, params: Any = None) -> Result:
        """One statement: prepared on libpq (:meth:`.keyreads.KeyReads.run`) when it has named parameters and the
        fast path is on, else on psycopg's cursor; the same rows, row count and errors either way."""
        keyreads = self._keyreads
        if keyreads is None or type(params) is not dict:
            return await self._port.query(conn, sql, params)
        prepared = self._prepared_statements.get(sql)
        if prepared is None:
            if len(self._prepared_statements) >= MAX_PREPARED:  # the dialect's statements are far fewer
                return await self._port.query(conn, sql, params)
            prepared = keyreads.prepared_statement(sql, next(self._statement_numbers))
            self._prepared_statements[sql] = prepared
        try:
            rows, rowcount = await conn.workmem_reads.run(prepared, params)
        except keyreads.NotSent as error:  # nothing was sent: an unexpected psycopg, the cursor runs it
            self._keyreads = None
            fast_path_failed(error.args[0])
            return await self._port.query(conn, sql, params)
        return Result(rows, rowcount)

    async def _close(self) -> None:
        await self._port.close()

    async def _rollback(self, conn: Any, cause: BaseException) -> None:
        """Roll back, unless the connection is gone (the server then rolled back itself); driver errors are ignored.

        A cancelled block is rolled back too: nothing of it is written.
        """
        if conn.closed or conn.broken:
            return
        try:
            await self._query(conn, "ROLLBACK")
        except self._psycopg.Error:
            log.debug("error ignored rolling back on %s", self._url, exc_info=True)

    # -- the two policies ------------------------------------------------------------

    def _error(self, exc: Exception) -> WorkmemError | None:
        if not isinstance(exc, self._psycopg.Error):
            return None
        state = getattr(exc, "sqlstate", None)
        if state in (NEAR_LIMIT_ERROR, EXACT_CHECK_ERROR):
            return ExactCheckNeeded(str(exc.diag.message_primary))
        if state == UNREADABLE_METADATA_ERROR:  # SqlHooks names the record: UnreadableRecordError
            return StoredMetadataUnreadable(str(exc.diag.message_primary))
        if state in (FORMAT_ERROR, TOO_LARGE_ERROR):  # raised by workmem_merge_document: nothing changed
            kind = WorkingMemoryFormatError if state == FORMAT_ERROR else ValidationError
            error = kind(str(exc.diag.message_primary))
            error.__cause__ = detach(exc, *self._secrets)
            return error
        if self._pool is not None and self._pool.closed:
            return StorageClosedError(f"this {type(self).__name__} is closed ({self._url})")
        connection_error = isinstance(exc, self._psycopg.OperationalError | self._psycopg.InterfaceError)
        return driver_error(
            error_kind(state, str(exc), connection_error=connection_error),
            f"PostgreSQL error on {self._url}",
            exc,
            *self._secrets,
        )

    def _again(self, exc: Exception, attempt: Attempt) -> float | None:
        """Once more at once, for a read (or a ``BEGIN``) that met a lost connection; a write never runs again.

        A write may have run before the connection dropped.
        """
        return 0.0 if attempt.read and attempt.number == 1 and self._lost(exc) else None

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the connection was lost (not a query error)."""
        state = getattr(exc, "sqlstate", None)
        lost = state is None or state.startswith("08") or state in _RETRYABLE_STATES
        return lost and isinstance(exc, self._psycopg.OperationalError)

    def _describe(self, exc: BaseException) -> str:
        return mask_secrets(str(exc), *self._secrets)

    def _is_outage(self, exc: BaseException) -> bool:
        return isinstance(exc, Exception) and isinstance(self._error(exc), BackendUnavailableError)

    # -- table setup -------------------------------------------------------------------

    async def _fill(self) -> None:
        """Set up the tables on the pool's first connection, then open ``min_size`` in all; closed if that fails."""
        conns = [await self._take()]
        try:
            await self._setup(conns[0])
            conns += [await self._take() for _ in range(self._settings.min_size - 1)]
        except BaseException:
            await self._close()
            raise
        finally:
            for conn in conns:
                await self._give(conn, None)  # closed if the pool was

    async def _setup(self, conn: Any) -> None:
        """Create what is missing; with ``create=False`` only check (one read) that the tables are there."""
        names = self.dialect.required_tables()
        schema = self.dialect.schema or "public"
        try:
            if not self._settings.create:
                missing = [row[0] for row in (await self._query(conn, _MISSING_TABLES, (names, schema))).rows]
                missing = self.dialect.without_counts(missing)
                if missing:
                    raise missing_tables(f"{self._url} (schema {schema})", missing)
                return
            await self._committed(conn, self._create_tables)
        except self._psycopg.Error as exc:
            error = self._error(exc)
            assert error is not None
            if self._settings.create and getattr(exc, "sqlstate", None) == _INSUFFICIENT_PRIVILEGE:  # say what to do
                error.args = (f"{error}; {CREATE_FALSE_ADVICE}",)
            raise_unchained(error)

    async def _create_tables(self, conn: Any) -> None:
        for sql in self.dialect.ddl():
            await self._query(conn, sql)

    # -- bulk writes: a batch as one JSON document, one statement (see bulk) ----------

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        return await bulk.insert_resources(self._execute, self.dialect, resources)

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        return await bulk.insert_threads(self._execute, self.dialect, threads)

    # -- the hot path ------------------------------------------------------------------

    def _connections(self, base: type[Any]) -> type[Any]:
        """The class of this storage's connections: ``base`` keeping a cursor, and the fast path's reads when on."""
        return connection_class(base, None if self._keyreads is None else self._keyreads.reads_for(base))

    async def _read_key(self, read: KeyRead[R], key: str) -> R | None:
        keyreads = self._keyreads
        if keyreads is None:
            return await super()._read_key(read, key)  # through the cursor, as every other statement
        prepared = self._prepared_reads.get(read.sql)
        if prepared is None:
            prepared = self._prepared_reads[read.sql] = keyreads.prepared_read(read.sql, next(self._read_numbers))
        try:
            rows = await self._attempts(functools.partial(_fetch_key, prepared=prepared, key=key), read=True)
        except (AttributeError, TypeError) as error:  # never a database's answer: psycopg's libpq layer changed
            self._keyreads = None
            fast_path_failed(error)
            return await super()._read_key(read, key)
        return read.record(rows[0]) if rows else None


class PostgresStorage(PostgresHooks, MemoryStorage):
    """Working memory in PostgreSQL, in the tables the TypeScript Mastra adapter uses."""

    async_adapter: ClassVar[str | None] = "workmem.adapters.postgres:AsyncPostgresStorage"
    _port_type = BlockingPort
    _connection_type = "Connection"

    def __init__(self, settings: PostgresSettings | str, **options: Any) -> None:
        """Open the pool and set up the tables; ``settings`` as :class:`PostgresHooks` takes them."""
        super().__init__(settings, **options)
        run_sync(self._fill())

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        return cls(PostgresSettings.from_url(url, **options))


class AsyncPostgresStorage(PostgresHooks, AsyncMemoryStorage):
    """:class:`PostgresStorage` for the async API, on psycopg's async connections (``connect_async``).

    Its pool (:class:`~workmem.adapters.postgres.pool.AsyncConnectionPool`)
    keeps the sync adapter's promises on outages: a connection is opened by the
    task that needs one, counted against ``max_size`` like every other, so
    while the server cannot be reached each call fails within
    ``connect_timeout`` with the driver's reason (and the calls waiting for a
    connection fail at once with it), and the first call after the server is
    back connects at once. ``get_thread`` and ``get_resource`` run as prepared
    statements on libpq directly (:mod:`workmem.adapters.postgres.keyreads`),
    every other statement on a cursor kept per connection.

    Cancelling a call is safe. A statement cancelled in flight ran whole or
    not at all (autocommit): on a cursor, psycopg asks the server to cancel it
    and waits for the answer; a key read leaves its connection busy, which is
    then closed (the server drops the read). A read-modify-write transaction is
    rolled back. A connection left busy or in a transaction is closed, never
    pooled; the pool loses no connection and no place under ``max_size``, and a
    connect whose caller was cancelled still joins the pool.
    """

    _port_type = AwaitedPort
    _connection_type = "AsyncConnection"

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        storage = cls(PostgresSettings.from_url(url, **options))
        await storage._fill()
        return storage


async def _fetch_key(conn: Any, *, prepared: PreparedRead, key: str) -> list[tuple[Any, ...]]:
    return await conn.workmem_reads.fetch(prepared, key)  # type: ignore[no-any-return]
