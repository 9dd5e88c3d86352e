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
connection pool. Oracle 19c or later: ``metadata`` is native ``JSON`` from 21c
on, ``CLOB CHECK (metadata IS JSON)`` before (:mod:`workmem.adapters.oracle.dialect`).

Atomicity: ``save_thread`` is one ``MERGE`` whose update branch runs only for
the same owner (row count 0 = another owner); of two racing creates of one id
the loser gets ORA-00001 and runs the ``MERGE`` again, which then decides.
``create_thread`` is the same ``MERGE`` without the update branch (row count 0 =
the id exists). Updates and working-memory merges lock the row (``SELECT … FOR UPDATE``), compute
the new record in Python and write it back in the same transaction; a missing
resource is first created by a ``MERGE`` that takes a lost insert race as done.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar, Final, Self, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from workmem.adapters.sql import Result, SqlStorage, Statement
from workmem.adapters.sql.rows import thread_from_row
from workmem.errors import (
    StorageClosedError,
    ThreadExistsError,
    ThreadOwnershipError,
    ValidationError,
)
from workmem.kit import check_options, driver_error, import_driver, mask_url, split_userinfo
from workmem.records import Thread
from workmem.storage import Capabilities, check_create, missing_tables
from workmem.timestamps import utc_now

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
)

__all__ = ["OracleConfig", "OracleStorage", "parse_oracle_url"]

T = TypeVar("T")

_SCHEMES: Final = frozenset({"oracle", "oracle+oracledb"})
_QUERY_KEYS: Final = frozenset({"service_name", "table_prefix"})
_OPTIONS: Final = frozenset({"min_size", "max_size", "timeout", "connect_timeout", "table_prefix"})
_ATTEMPTS: Final = 3
"""A statement that lost an insert race (ORA-00001) runs again: the winner's row is committed by then."""
_DDL_ATTEMPTS: Final = 5
_NATIVE_JSON_VERSION: Final = 21
"""Oracle's JSON data type exists from 21c; older servers get ``CLOB CHECK (metadata IS JSON)``."""


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


class _Session:
    """The core's view of one open transaction."""

    def __init__(self, storage: OracleStorage, connection: Any) -> None:
        self._storage = storage
        self._connection = connection

    def execute(self, statement: Statement) -> Result:
        return self._storage._run(self._connection, statement)


class OracleStorage(SqlStorage):
    """Working memory in Oracle, in the tables the TypeScript Mastra adapter (``@mastra/oracledb``) uses."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=True, persistent=True)
    dialect: OracleDialect

    def __init__(self, config: OracleConfig, *, create: bool = True) -> None:
        self._config = config
        self._oracledb: ModuleType = import_driver("oracledb", "oracle")
        self._closed = False
        with self._errors("connect"):
            self._pool = self._oracledb.create_pool(
                user=config.user,
                password=config.password,
                host=config.host,
                port=config.port,
                service_name=config.service_name,
                min=config.min_size,
                max=config.max_size,
                increment=1,
                getmode=self._oracledb.POOL_GETMODE_TIMEDWAIT,
                wait_timeout=int(config.timeout * 1000),
                tcp_connect_timeout=config.connect_timeout,
                retry_count=0,
                session_callback=self._setup_session,
            )
        try:
            dialect = self._prepare_schema(config.table_prefix, check_create(create))
        except BaseException:
            with suppress(self._oracledb.Error):
                self._pool.close(force=True)
            raise
        super().__init__(dialect)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        create = options.pop("create", True)
        return cls(parse_oracle_url(url, **options), create=create)

    def __repr__(self) -> str:
        return f"OracleStorage({self._config.masked_url!r})"

    # -- errors ----------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """python-oracledb errors as workmem errors, the password masked (the driver never shows it)."""
        try:
            yield
        except self._oracledb.Error as exc:
            error = driver_error(
                error_kind(*oracle_error_code(exc)),
                f"Oracle {action} failed on {self._config.masked_url}",
                exc,
                self._config.password,
            )
            raise error from error.__cause__

    # -- connections and statements --------------------------------------------------

    def _setup_session(self, connection: Any, requested_tag: str | None) -> None:
        connection.cursor().execute(SESSION_SETUP)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled session; whatever it did is rolled back unless the caller committed."""
        if self._closed:
            raise StorageClosedError(f"this OracleStorage is closed ({self._config.masked_url})")
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

    def _lobs_as_text(self, cursor: Any, metadata: Any) -> Any:
        """Output type handler: CLOB columns arrive as ``str`` (python-oracledb >= 2 two-argument form)."""
        if metadata.type_code is self._oracledb.DB_TYPE_CLOB:
            return cursor.var(self._oracledb.DB_TYPE_LONG, arraysize=cursor.arraysize)
        return None

    def _run(self, connection: Any, statement: Statement) -> Result:
        sql, params = self.dialect.render(statement)
        cursor = connection.cursor()
        cursor.outputtypehandler = self._lobs_as_text
        clobs = {name: self._oracledb.DB_TYPE_CLOB for name in params if name in CLOB_PARAMS}
        if clobs:
            cursor.setinputsizes(**clobs)
        cursor.execute(sql, params)
        if not cursor.description:
            return Result([], cursor.rowcount)
        names = [column[0] for column in cursor.description]
        return Result([decode_row(names, row) for row in cursor.fetchall()], cursor.rowcount)

    def _attempts(self, action: str, work: Callable[[Any], T], *, read: bool = False) -> T:
        """``work(connection)`` in one transaction, committed; run again after a lost insert race.

        A read also runs again once after its pooled session turned out dead.
        """
        with self._errors(action):
            for attempt in range(1, _ATTEMPTS + 1):
                try:
                    with self._connection() as connection:
                        value = work(connection)
                        if not read:
                            connection.commit()
                        return value
                except self._oracledb.Error as exc:
                    if attempt == _ATTEMPTS:
                        raise
                    if is_unique_violation(*oracle_error_code(exc)) and not read:
                        continue
                    if read and attempt == 1 and getattr(exc.args[0] if exc.args else None, "is_session_dead", False):
                        continue
                    raise
        raise AssertionError("unreachable")

    def _execute(self, statement: Statement, *, read: bool = False) -> Result:
        return self._attempts("statement", lambda connection: self._run(connection, statement), read=read)

    @contextmanager
    def _transaction(self) -> Iterator[_Session]:
        with self._errors("transaction"), self._connection() as connection:
            yield _Session(self, connection)
            connection.commit()

    # -- schema ------------------------------------------------------------------------

    def _prepare_schema(self, table_prefix: str, create: bool) -> OracleDialect:
        """Create what is missing (unless not ``create``), then read which type ``metadata`` really has."""

        def work(connection: Any) -> OracleDialect:
            major = int(str(connection.version).split(".")[0])
            dialect = OracleDialect(table_prefix, native_json=major >= _NATIVE_JSON_VERSION)
            if not create:  # change nothing: the tables must be there (their metadata types say so)
                types = dict(connection.cursor().execute(*dialect.render(dialect.metadata_types())).fetchall())
                missing = [name for name in (dialect.resources, dialect.threads) if name not in types]
                if missing:
                    raise missing_tables(self._config.masked_url, missing)
                native = types[dialect.resources] == "JSON" and types[dialect.threads] == "JSON"
                return OracleDialect(table_prefix, native_json=native)
            try:
                self._create(connection, dialect.ddl()[0])
            except self._oracledb.DatabaseError as exc:
                if not dialect.native_json or oracle_error_code(exc)[0] != INVALID_DATATYPE:
                    raise
                dialect = OracleDialect(table_prefix, native_json=False)  # 21c+ run with COMPATIBLE < 20
            for ddl in dialect.ddl():
                self._create(connection, ddl)
            types = dict(connection.cursor().execute(*dialect.render(dialect.metadata_types())).fetchall())
            native = types.get(dialect.resources) == "JSON" and types.get(dialect.threads) == "JSON"
            return OracleDialect(table_prefix, native_json=native)

        return self._attempts("schema setup", work)

    def _create(self, connection: Any, ddl: str) -> None:
        """One ``CREATE``; "already exists" is success (Oracle has no ``IF NOT EXISTS`` before 23ai)."""
        for attempt in range(1, _DDL_ATTEMPTS + 1):
            try:
                connection.cursor().execute(ddl)
                return
            except self._oracledb.DatabaseError as exc:
                code = oracle_error_code(exc)[0]
                if code in ALREADY_EXISTS:
                    return
                if code != RESOURCE_BUSY or attempt == _DDL_ATTEMPTS:
                    raise
                time.sleep(0.1 * attempt)  # another session is creating the same table or index

    def drop_tables(self) -> None:
        """Drop this instance's tables; only allowed with a ``table_prefix`` (tests that made their own)."""
        if not self.dialect.table_prefix:
            raise ValidationError("drop_tables() only drops the tables of a table_prefix")

        def work(connection: Any) -> None:
            for ddl in self.dialect.drop_tables():
                try:
                    connection.cursor().execute(ddl)
                except self._oracledb.DatabaseError as exc:
                    if oracle_error_code(exc)[0] != 942:  # ORA-00942: already gone
                        raise

        self._attempts("drop tables", work)

    # -- what Oracle does differently ---------------------------------------------------

    def create_thread(self, thread: Thread) -> Thread:
        """As the contract says; a ``MERGE`` returns no rows, so the stored row is read in the same transaction."""
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")

        def work(connection: Any) -> Thread:
            if self._run(connection, self.dialect.create_thread(thread)).rowcount == 0:
                raise ThreadExistsError(thread.id)
            return thread_from_row(self._run(connection, self.dialect.select_thread(thread.id)).rows[0])

        return self._attempts("create_thread", work)

    def save_thread(self, thread: Thread) -> Thread:
        """As the contract says; a ``MERGE`` returns no rows, so the stored row is read in the same transaction."""
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")

        def work(connection: Any) -> Thread:
            if self._run(connection, self.dialect.save_thread(thread, utc_now())).rowcount == 0:
                raise ThreadOwnershipError(thread.id, thread.resource_id)
            return thread_from_row(self._run(connection, self.dialect.select_thread(thread.id)).rows[0])

        return self._attempts("save_thread", work)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._errors("close"):
            self._pool.close(force=True)
