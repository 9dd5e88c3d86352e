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

Both classes are :class:`OracleHooks`: the statements, the retry loop, the
transactions, the schema setup and the error mapping are written there once,
as coroutines over one I/O primitive, :meth:`OracleHooks._session` (a pooled
session whose ``run`` executes one statement); only that primitive, the
session setup and closing the pool differ between the two.

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
import dataclasses
import functools
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    suppress,
)
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Any, ClassVar, Final, Protocol, Self, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from workmem.adapters.sql import Result, SqlStorage, Statement
from workmem.adapters.sql.rows import thread_from_row
from workmem.aio import AsyncMemoryStorage
from workmem.errors import StorageClosedError, ThreadExistsError, ThreadOwnershipError, ValidationError, WorkmemError
from workmem.flows import run_sync
from workmem.kit import check_options, driver_error, import_driver, mask_url, raise_unchained, split_userinfo
from workmem.records import Resource, Thread
from workmem.storage import Capabilities, MemoryStorage, check_create, missing_tables

from .dialect import (
    ALREADY_EXISTS,
    CLOB_PARAMS,
    INVALID_DATATYPE,
    RESOURCE_BUSY,
    SESSION_SETUP,
    OracleDialect,
    decode_row,
    error_kind,
    is_unique_violation,
    oracle_error_code,
    runs_again,
)

__all__ = [
    "AsyncOracleStorage",
    "OracleConfig",
    "OracleHooks",
    "OracleSession",
    "OracleStorage",
    "mapped_errors",
    "parse_oracle_url",
    "pool_options",
    "prepare_cursor",
]

T = TypeVar("T")

_SCHEMES: Final = frozenset({"oracle", "oracle+oracledb"})
_QUERY_KEYS: Final = frozenset({"service_name", "table_prefix"})
_OPTIONS: Final = frozenset({"min_size", "max_size", "timeout", "connect_timeout", "table_prefix"})
_DDL_ATTEMPTS: Final = 5
_NATIVE_JSON_VERSION: Final = 21
"""Oracle's JSON data type exists from 21c; older servers get ``CLOB CHECK (metadata IS JSON)``."""
_TABLE_GONE: Final = 942
"""ORA-00942: table or view does not exist."""


# -- configuration (no I/O) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OracleConfig:
    """Where to connect and how, read from the URL and options without I/O."""

    user: str
    password: str = dataclasses.field(repr=False)
    host: str = "localhost"
    port: int = 1521
    service_name: str = ""
    table_prefix: str = ""
    min_size: int = 0
    max_size: int = 8
    timeout: float = 10.0
    connect_timeout: float = 5.0
    masked_url: str = ""


def _number(name: str, value: object, minimum: float, kind: type[int] | type[float]) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError(f"Oracle option {name} must be a number, not {value!r}")
    try:
        number = kind(value)
    except ValueError:
        raise ValidationError(f"Oracle option {name} must be a number, not {value!r}") from None
    if number < minimum:
        raise ValidationError(f"Oracle option {name} must be at least {minimum}, not {value!r}")
    return number


def parse_oracle_url(url: str, **options: Any) -> OracleConfig:
    """Read an ``oracle://`` URL and the adapter's options (no I/O; messages never show the password)."""
    masked = mask_url(url)
    info = split_userinfo(url)  # a raw '#', '?', '/' or '@' in the password is the password's
    try:
        parts = urlsplit(info.head + info.rest)
        port = parts.port or 1521
    except ValueError:
        raise ValidationError(f"not a valid Oracle URL: {masked}") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise ValidationError(f"not an Oracle URL scheme: {parts.scheme!r} (use oracle:// or oracle+oracledb://)")
    if not parts.hostname:
        raise ValidationError(f"the Oracle URL needs a host: {masked}")
    if not info.user or info.password is None:
        raise ValidationError(f"the Oracle URL needs user:password@: {masked}")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    check_options(query, _QUERY_KEYS, "Oracle", "URL parameters")
    check_options(options, _OPTIONS, "Oracle")
    in_path = unquote(parts.path.strip("/"))
    service = query.get("service_name") or in_path
    if not service:
        raise ValidationError(f"the Oracle URL needs a service name (/SERVICE or ?service_name=): {masked}")
    if query.get("service_name") and in_path and in_path != query["service_name"]:
        raise ValidationError(f"the Oracle URL names two different services: {masked}")
    config = OracleConfig(
        user=unquote(info.user),
        password=unquote(info.password),
        host=parts.hostname,
        port=port,
        service_name=service,
        table_prefix=OracleDialect(str(options.get("table_prefix") or query.get("table_prefix", ""))).table_prefix,
        min_size=_number("min_size", options.get("min_size", 0), 0, int),
        max_size=_number("max_size", options.get("max_size", 8), 1, int),
        timeout=_number("timeout", options.get("timeout", 10.0), 0, float),
        connect_timeout=_number("connect_timeout", options.get("connect_timeout", 5.0), 0, float),
        masked_url=masked,
    )
    if config.min_size > config.max_size:
        raise ValidationError("Oracle option min_size must not exceed max_size")
    return config


def _split_create(url: str, options: dict[str, Any]) -> tuple[OracleConfig, bool]:
    """The config and the ``create`` flag of ``from_url`` / ``open``."""
    create = check_create(options.pop("create", True))
    return parse_oracle_url(url, **options), create


def pool_options(config: OracleConfig, oracledb: ModuleType) -> dict[str, Any]:
    """The keyword arguments of ``oracledb.create_pool`` and ``oracledb.create_pool_async`` alike.

    A full pool waits ``timeout`` for a session (then DPY-4005), one TCP connect
    waits ``connect_timeout``, and the driver never retries a connect by itself.
    """
    return {
        "user": config.user,
        "password": config.password,
        "host": config.host,
        "port": config.port,
        "service_name": config.service_name,
        "min": config.min_size,
        "max": config.max_size,
        "increment": 1,
        "getmode": oracledb.POOL_GETMODE_TIMEDWAIT,
        "wait_timeout": int(config.timeout * 1000),
        "tcp_connect_timeout": config.connect_timeout,
        "retry_count": 0,
    }


@contextmanager
def mapped_errors(config: OracleConfig, oracledb: ModuleType, action: str) -> Iterator[None]:
    """python-oracledb errors as workmem errors (:func:`~.dialect.error_kind`), the password masked."""
    try:
        yield
    except oracledb.Error as exc:
        context = f"Oracle {action} failed on {config.masked_url}"
        code, full_code = oracle_error_code(exc)
        error = driver_error(error_kind(code, full_code), context, exc, config.password, code=full_code or None)
        raise_unchained(error)


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


class OracleSession(Protocol):
    """One pooled Oracle session, its transaction open (Oracle begins one with the first change)."""

    @property
    def version(self) -> str:
        """The server's version, ``"23.5.0.24.7"``."""

    async def run(self, sql: str, params: dict[str, Any] | None = None) -> Result:
        """Execute ``sql`` with ``params`` bound (CLOB handling by :func:`prepare_cursor`); rows fetched."""

    async def run_many(self, sql: str, rows: list[dict[str, Any]]) -> list[int]:
        """Execute ``sql`` once per bind set of ``rows`` in one round trip (array DML); each row's count."""

    async def commit(self) -> None: ...


class _BlockingSession:
    """An :class:`OracleSession` over a blocking python-oracledb ``Connection``: nothing here suspends."""

    __slots__ = ("_connection", "_oracledb")

    def __init__(self, oracledb: ModuleType, connection: Any) -> None:
        self._oracledb = oracledb
        self._connection = connection

    @property
    def version(self) -> str:
        return str(self._connection.version)

    async def run(self, sql: str, params: dict[str, Any] | None = None) -> Result:
        with self._connection.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, params or {})
            cursor.execute(sql, params)
            return _result(cursor, cursor.fetchall()) if cursor.description else Result([], cursor.rowcount)

    async def run_many(self, sql: str, rows: list[dict[str, Any]]) -> list[int]:
        with self._connection.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, rows[0])
            cursor.executemany(sql, rows, batcherrors=True, arraydmlrowcounts=True)
            return array_counts(self._oracledb, cursor)

    async def commit(self) -> None:
        self._connection.commit()


class _AsyncSession:
    """An :class:`OracleSession` over a python-oracledb ``AsyncConnection``."""

    __slots__ = ("_connection", "_oracledb")

    def __init__(self, oracledb: ModuleType, connection: Any) -> None:
        self._oracledb = oracledb
        self._connection = connection

    @property
    def version(self) -> str:
        return str(self._connection.version)

    async def run(self, sql: str, params: dict[str, Any] | None = None) -> Result:
        with self._connection.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, params or {})
            await cursor.execute(sql, params)
            return _result(cursor, await cursor.fetchall()) if cursor.description else Result([], cursor.rowcount)

    async def run_many(self, sql: str, rows: list[dict[str, Any]]) -> list[int]:
        with self._connection.cursor() as cursor:
            prepare_cursor(self._oracledb, cursor, rows[0])
            await cursor.executemany(sql, rows, batcherrors=True, arraydmlrowcounts=True)
            return array_counts(self._oracledb, cursor)

    async def commit(self) -> None:
        await self._connection.commit()


class _Transaction:
    """The SQL core's :class:`~workmem.adapters.sql.Session`: statements rendered, then run on one session."""

    __slots__ = ("_dialect", "_session")

    def __init__(self, dialect: OracleDialect, session: OracleSession) -> None:
        self._dialect = dialect
        self._session = session

    async def execute(self, statement: Statement) -> Result:
        sql, params = self._dialect.render(statement)
        return await self._session.run(sql, params)


# -- the adapter, once ---------------------------------------------------------------------------


class OracleHooks(SqlStorage):
    """Working memory in Oracle, in the tables the TypeScript Mastra adapter (``@mastra/oracledb``) uses.

    Everything but the pool's I/O, for :class:`OracleStorage` and :class:`AsyncOracleStorage`.
    """

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=True, persistent=True)
    dialect: OracleDialect

    def __init__(self, config: OracleConfig, oracledb: ModuleType, pool: Any) -> None:
        """Keep an opened pool; :meth:`_setup` then reads (or creates) the tables and sets :attr:`dialect`."""
        super().__init__(OracleDialect(config.table_prefix))
        self._config = config
        self._oracledb = oracledb
        self._pool = pool
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._config.masked_url!r})"

    # -- the I/O primitives each API implements ---------------------------------------------

    @abstractmethod
    def _session(self) -> AbstractAsyncContextManager[OracleSession]:
        """A pooled session; whatever it did is rolled back unless it committed. Refused once closed."""

    @abstractmethod
    async def _close_pool(self) -> None:
        """Close the pool, sessions in use included (the driver's errors unmapped)."""

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosedError(f"this {type(self).__name__} is closed ({self._config.masked_url})")

    # -- errors ----------------------------------------------------------------------------

    def _errors(self, action: str) -> AbstractContextManager[None]:
        return mapped_errors(self._config, self._oracledb, action)

    # -- statements and transactions ---------------------------------------------------------

    async def _attempts(self, action: str, work: Callable[[OracleSession], Awaitable[T]], *, read: bool = False) -> T:
        """``await work(session)`` in one transaction, committed unless ``read``; again if :func:`runs_again`."""
        with self._errors(action):
            attempt = 1
            while True:
                try:
                    async with self._session() as session:
                        value = await work(session)
                        if not read:
                            await session.commit()
                        return value
                except self._oracledb.Error as exc:
                    if not runs_again(exc, attempt, read=read):
                        raise
                attempt += 1

    def _statement(self, statement: Statement) -> Callable[[OracleSession], Awaitable[Result]]:
        return lambda session: _Transaction(self.dialect, session).execute(statement)

    async def _execute(self, statement: Statement, *, read: bool = False) -> Result:
        return await self._attempts("statement", self._statement(statement), read=read)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[_Transaction]:
        with self._errors("transaction"):
            async with self._session() as session:
                yield _Transaction(self.dialect, session)
                await session.commit()

    # -- what Oracle does differently: a MERGE returns no rows ------------------------------

    async def _merge_then_read(
        self, action: str, merge: Statement, thread_id: str, refused: Callable[[], WorkmemError]
    ) -> Thread:
        """Run ``merge``; row count 0 raises ``refused()``; else the stored row, read in the same transaction."""
        run_merge, read_back = self._statement(merge), self._statement(self.dialect.select_thread(thread_id))

        async def work(session: OracleSession) -> Thread:
            if (await run_merge(session)).rowcount == 0:
                raise refused()
            return thread_from_row((await read_back(session)).rows[0])

        return await self._attempts(action, work)

    async def _create_thread(self, thread: Thread) -> Thread:
        statement = self.dialect.create_thread(thread)  # inserts, or changes nothing when the id exists
        return await self._merge_then_read("create_thread", statement, thread.id, lambda: ThreadExistsError(thread.id))

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        statement = self.dialect.save_thread(thread, now)  # its update branch runs for the same owner only
        refused = functools.partial(ThreadOwnershipError, thread.id, thread.resource_id)
        return await self._merge_then_read("save_thread", statement, thread.id, refused)

    # -- bulk inserts: one insert-only MERGE, array DML (executemany) over the batch -----------

    async def _insert_each(self, action: str, ids: Sequence[str], statements: Sequence[Statement]) -> frozenset[str]:
        """Run the same insert-only ``MERGE`` for each record in one round trip; the ids it found present."""
        if not statements:
            return frozenset()
        rendered = [self.dialect.render(statement) for statement in statements]
        sql = rendered[0][0]

        async def work(session: OracleSession) -> frozenset[str]:
            counts = await session.run_many(sql, [params for _, params in rendered])
            return frozenset(record_id for record_id, count in zip(ids, counts, strict=True) if count == 0)

        return await self._attempts(action, work)

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        statements = [self.dialect.create_resource(resource) for resource in resources]
        return await self._insert_each("insert_resources", [r.id for r in resources], statements)

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        statements = [self.dialect.create_thread(thread) for thread in threads]
        return await self._insert_each("insert_threads", [t.id for t in threads], statements)

    # -- schema ------------------------------------------------------------------------------

    async def _setup(self, create: bool) -> None:
        """Create what is missing (unless not ``create``), then set :attr:`dialect`; close the pool on failure."""
        try:
            self.dialect = await self._attempts("schema setup", lambda session: self._prepare_schema(session, create))
        except BaseException:
            self._closed = True
            with suppress(self._oracledb.Error):
                await self._close_pool()
            raise

    async def _prepare_schema(self, session: OracleSession, create: bool) -> OracleDialect:
        """The dialect of the tables as they are, after creating the missing ones (if ``create``)."""
        prefix = self._config.table_prefix
        major = int(session.version.split(".")[0])
        dialect = OracleDialect(prefix, native_json=major >= _NATIVE_JSON_VERSION)
        if create:
            try:
                await self._create(session, dialect.ddl()[0])
            except self._oracledb.DatabaseError as exc:
                if not dialect.native_json or oracle_error_code(exc)[0] != INVALID_DATATYPE:
                    raise
                dialect = OracleDialect(prefix, native_json=False)  # 21c+ run with COMPATIBLE < 20
            for ddl in dialect.ddl():
                await self._create(session, ddl)
        types = dict((await session.run(*dialect.render(dialect.metadata_types()))).rows)
        missing = [name for name in (dialect.resources, dialect.threads) if name not in types]
        if missing:  # only without create: the tables must be there (their metadata types say so)
            raise missing_tables(self._config.masked_url, missing)
        native = types[dialect.resources] == "JSON" and types[dialect.threads] == "JSON"
        return OracleDialect(prefix, native_json=native)

    async def _create(self, session: OracleSession, ddl: str) -> None:
        """One ``CREATE``; "already exists" is success (Oracle has no ``IF NOT EXISTS`` before 23ai)."""
        for attempt in range(1, _DDL_ATTEMPTS + 1):
            try:
                await session.run(ddl)
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

        async def work(session: OracleSession) -> None:
            for ddl in self.dialect.drop_tables():
                try:
                    await session.run(ddl)
                except self._oracledb.DatabaseError as exc:
                    if oracle_error_code(exc)[0] != _TABLE_GONE:
                        raise

        await self._attempts("drop tables", work)

    # -- lifecycle ---------------------------------------------------------------------------

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._errors("close"):
            await self._close_pool()


# -- the two APIs: only how the pool is opened and awaited -------------------------------------------


class OracleStorage(OracleHooks, MemoryStorage):
    """Oracle behind the sync API, on python-oracledb's blocking pool."""

    async_adapter: ClassVar[str | None] = "workmem.adapters.oracle:AsyncOracleStorage"

    def __init__(self, config: OracleConfig, *, create: bool = True) -> None:
        oracledb = import_driver("oracledb", "oracle")
        with mapped_errors(config, oracledb, "connect"):
            pool = oracledb.create_pool(**pool_options(config, oracledb), session_callback=self._setup_session)
        super().__init__(config, oracledb, pool)
        run_sync(self._setup(check_create(create)))

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        config, create = _split_create(url, options)
        return cls(config, create=create)

    @staticmethod
    def _setup_session(connection: Any, requested_tag: str | None) -> None:
        with connection.cursor() as cursor:
            cursor.execute(SESSION_SETUP)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled python-oracledb ``Connection``; whatever it did is rolled back unless the caller committed."""
        self._check_open()
        connection = self._pool.acquire()
        try:
            yield connection
        except BaseException:
            with suppress(self._oracledb.Error):  # keep the first error; the pool drops a dead session
                connection.rollback()
            raise
        finally:
            with suppress(self._oracledb.Error):
                self._pool.release(connection)

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[OracleSession]:
        with self._connection() as connection:
            yield _BlockingSession(self._oracledb, connection)

    async def _close_pool(self) -> None:
        self._pool.close(force=True)

    def drop_tables(self) -> None:
        """Drop this instance's tables; only allowed with a ``table_prefix`` (tests that made their own)."""
        run_sync(self._drop_tables())


class AsyncOracleStorage(OracleHooks, AsyncMemoryStorage):
    """Oracle behind the async API, on python-oracledb's asyncio pool (thin mode); open with :meth:`open`."""

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        """Open the pool and create what is missing (unless ``create=False``); options as :class:`OracleStorage`'s."""
        config, create = _split_create(url, options)
        oracledb = import_driver("oracledb", "oracle")
        with mapped_errors(config, oracledb, "connect"):
            pool = oracledb.create_pool_async(**pool_options(config, oracledb), session_callback=cls._setup_session)
        storage = cls(config, oracledb, pool)
        await storage._setup(create)
        return storage

    @staticmethod
    async def _setup_session(connection: Any, requested_tag: str | None) -> None:
        with connection.cursor() as cursor:
            await cursor.execute(SESSION_SETUP)

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[OracleSession]:
        self._check_open()
        connection = await self._pool.acquire()
        dropped = False
        try:
            yield _AsyncSession(self._oracledb, connection)
        except asyncio.CancelledError:
            # Cancelled mid-call: the session may be waiting on a reply; the pool replaces it.
            dropped = True
            with suppress(self._oracledb.Error):
                await self._pool.drop(connection)
            raise
        except BaseException:
            with suppress(self._oracledb.Error):  # keep the first error; the pool drops a dead session
                await connection.rollback()
            raise
        finally:
            if not dropped:
                with suppress(self._oracledb.Error):
                    await self._pool.release(connection)

    async def _close_pool(self) -> None:
        await self._pool.close(force=True)

    async def drop_tables(self) -> None:
        """See :meth:`OracleStorage.drop_tables`."""
        await self._drop_tables()
