"""PostgreSQL: ``postgresql://USER:PASSWORD@HOST:5432/DB?schema=public`` (also ``postgres://``, ``postgresql+psycopg://``).

``schema`` (default ``public``) names the schema holding Mastra's tables; it is
created when missing; system schemas (``information_schema``, ``pg_*``) are
refused. Other query parameters go to libpq (``sslmode``, ...).
Options: ``min_size`` (pooled connections kept open, default 1), ``max_size``
(default 10), ``timeout`` (seconds to wait for a pooled connection, default
30), ``connect_timeout`` (seconds, default 10), ``schema``, ``create`` (default
``True``; ``False`` creates nothing, for a SELECT-only role: the tables must exist).

Driver: psycopg 3 with ``psycopg_pool`` (``pip install 'workmem[postgres]'``).
Every operation is one statement on an autocommit connection, so it is atomic
and one round trip. A connection the server closed (restart,
``pg_terminate_backend``) is noticed before use, without a round trip, and
replaced; a read that still meets a dropped connection is retried once, a
write never is.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Self
from urllib.parse import unquote

from workmem.drivers import import_driver
from workmem.errors import (
    BackendUnavailableError,
    StorageClosedError,
    ValidationError,
    WorkingMemoryFormatError,
    WorkmemError,
)
from workmem.storage import Capabilities, check_create, missing_tables
from workmem.urls import encode_userinfo, mask_url, split_userinfo, url_secrets

from .sql import Result, SqlStorage, Statement
from .sql.postgres import (
    EXACT_CHECK_ERROR,
    FORMAT_ERROR,
    NEAR_LIMIT_ERROR,
    TOO_LARGE_ERROR,
    UNREADABLE_METADATA_ERROR,
    PostgresDialect,
)
from .sql.sqlstate import error_kind
from .sql.storage import ExactCheckNeeded, StoredMetadataUnreadable, check_options, driver_error

__all__ = ["PostgresStorage", "parse_postgres_url"]

_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
_OPTIONS = frozenset({"min_size", "max_size", "timeout", "connect_timeout", "schema", "create"})
_RETRYABLE_STATES = ("57P01", "57P02", "57P03")  # admin/crash shutdown, cannot connect now (class 08 too)


def parse_postgres_url(url: str) -> tuple[str, str]:
    """``(conninfo, schema)``: the URL libpq understands (no ``schema``, plain scheme) and the schema name.

    The user info is found as :func:`workmem.urls.split_userinfo` says and
    handed on percent-encoded, so a raw ``#``, ``?``, ``/`` or ``@`` in the
    password reaches libpq as written. Other query parameters go on as written.
    """
    info = split_userinfo(url)
    scheme = info.head.removesuffix("://").lower()
    if scheme not in _SCHEMES or info.head == url:
        raise ValidationError(f"not a PostgreSQL URL: {mask_url(url)}")
    where, _, query = info.rest.partition("?")
    kept, schema = [], "public"
    for piece in query.split("&") if query else []:
        key, _, value = piece.partition("=")
        if unquote(key) == "schema":
            schema = unquote(value)
        elif piece:
            kept.append(piece)
    return f"postgresql://{encode_userinfo(info)}{where}{'?' if kept else ''}{'&'.join(kept)}", schema


def _check_sizes(min_size: Any, max_size: Any, timeout: Any, connect_timeout: Any) -> None:
    """Refuse pool and timeout options of the wrong type or range (:class:`ValidationError`)."""
    if not (type(min_size) is int and min_size >= 0):
        raise ValidationError(f"min_size must be an int >= 0, not {min_size!r}")
    if not (type(max_size) is int and max_size >= max(min_size, 1)):
        raise ValidationError(f"max_size must be an int >= 1 and >= min_size ({min_size}), not {max_size!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValidationError(f"timeout must be a number of seconds > 0, not {timeout!r}")
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float) or not connect_timeout >= 0:
        raise ValidationError(
            f"connect_timeout must be a number of seconds >= 0 (0: no limit), not {connect_timeout!r}"
        )


def _closed_by_server(conn: Any) -> bool:
    """An idle connection with something to read was closed by the server (it sends FATAL, then EOF)."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _configure(conn: Any) -> None:
    """Session setup of a new pooled connection: timestamps come back in UTC (psycopg then uses ``datetime.UTC``).

    Every statement names its time zone explicitly, so this changes no value,
    only how psycopg hands timestamps over: the row mapper takes them as they are.
    """
    conn.execute("SET TIME ZONE 'UTC'")


class _Session:
    def __init__(self, dialect: PostgresDialect, conn: Any) -> None:
        self._dialect = dialect
        self._conn = conn

    def execute(self, statement: Statement) -> Result:
        return _run(self._conn, self._dialect, statement)


def _run(conn: Any, dialect: PostgresDialect, statement: Statement) -> Result:
    sql, params = dialect.render(statement)
    cursor = conn.execute(sql, params)
    return Result(cursor.fetchall() if cursor.description else [], cursor.rowcount)


class PostgresStorage(SqlStorage):
    """Working memory in PostgreSQL, in the tables the TypeScript Mastra adapter uses."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=True, persistent=True)
    dialect: PostgresDialect

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
        connect_timeout: int = 10,
        create: bool = True,
        url: str | None = None,
    ) -> None:
        _check_sizes(min_size, max_size, timeout, connect_timeout)
        super().__init__(PostgresDialect(schema))
        self._psycopg = import_driver("psycopg", "postgres")
        pool_module = import_driver("psycopg_pool", "postgres")
        self._secrets = url_secrets(conninfo) + url_secrets(url or conninfo)
        self._url = mask_url(url if url is not None else conninfo)
        self._max_size = max_size
        kwargs = {"autocommit": True, "connect_timeout": connect_timeout}
        self._setup(conninfo, kwargs, check_create(create))
        self._pool = pool_module.ConnectionPool(
            conninfo,
            kwargs=kwargs,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=True,
            name="workmem",
            configure=_configure,
        )

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        check_options(options, _OPTIONS, "PostgreSQL")
        conninfo, schema = parse_postgres_url(url)
        options.setdefault("schema", schema)
        return cls(conninfo, url=url, **options)

    def __repr__(self) -> str:
        return f"PostgresStorage({self._url!r}, schema={self.dialect.schema!r})"

    # -- errors ----------------------------------------------------------------------

    def _error(self, exc: BaseException) -> WorkmemError:
        state = getattr(exc, "sqlstate", None)
        if state in (NEAR_LIMIT_ERROR, EXACT_CHECK_ERROR):
            return ExactCheckNeeded(str(exc.diag.message_primary))  # type: ignore[attr-defined]
        if state == UNREADABLE_METADATA_ERROR:  # SqlStorage names the record: UnreadableRecordError
            return StoredMetadataUnreadable(str(exc.diag.message_primary))  # type: ignore[attr-defined]
        if state in (FORMAT_ERROR, TOO_LARGE_ERROR):  # raised by workmem_merge_document: nothing changed
            kind = WorkingMemoryFormatError if state == FORMAT_ERROR else ValidationError
            error = kind(str(exc.diag.message_primary))  # type: ignore[attr-defined]
            error.__cause__ = exc
            return error
        pool = getattr(self, "_pool", None)  # none yet while the tables are set up
        if pool is not None and pool.closed:
            return StorageClosedError(f"this PostgresStorage is closed ({self._url})")
        connection_error = isinstance(exc, self._psycopg.OperationalError | self._psycopg.InterfaceError)
        return driver_error(
            error_kind(state, str(exc), connection_error=connection_error),
            f"PostgreSQL error on {self._url}",
            exc,
            *self._secrets,
        )

    def _retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the connection was lost (not a pool timeout, not a query error)."""
        state = getattr(exc, "sqlstate", None)
        lost = state is None or state.startswith("08") or state in _RETRYABLE_STATES
        return lost and isinstance(exc, self._psycopg.OperationalError) and "pool" not in type(exc).__module__

    # -- connections -----------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        for _ in range(self._max_size + 1):
            with self._pool.connection() as conn:
                if _closed_by_server(conn):
                    conn.close()  # the pool replaces a closed connection
                    continue
                yield conn
                return
        raise BackendUnavailableError(f"no live connection to {self._url}")

    def _execute(self, statement: Statement, *, read: bool = False) -> Result:
        for attempt in (1, 2):
            try:
                with self._connection() as conn:
                    return _run(conn, self.dialect, statement)
            except self._psycopg.Error as exc:
                if read and attempt == 1 and self._retryable(exc):
                    continue  # a read is safe to repeat on a fresh connection
                error = self._error(exc)
                raise error from error.__cause__
        raise AssertionError("unreachable")

    @contextmanager
    def _transaction(self) -> Iterator[_Session]:
        try:
            with self._connection() as conn, conn.transaction():
                yield _Session(self.dialect, conn)
        except self._psycopg.Error as exc:
            error = self._error(exc)
            raise error from error.__cause__

    def _setup(self, conninfo: str, kwargs: dict[str, Any], create: bool) -> None:
        """Create what is missing; with ``create=False`` only check (one read) that the tables are there."""
        names = self.dialect.required_tables()
        try:
            with self._psycopg.connect(conninfo, **kwargs) as conn:
                if not create:
                    missing = [
                        row[0]
                        for row in conn.execute(
                            "SELECT name FROM unnest(CAST(%s AS text[])) WITH ORDINALITY AS t(name, n) "
                            "WHERE to_regclass(format('%%I.%%I', CAST(%s AS text), name)) IS NULL ORDER BY n",
                            (names, self.dialect.schema or "public"),
                        ).fetchall()
                    ]
                    if missing:
                        raise missing_tables(f"{self._url} (schema {self.dialect.schema or 'public'})", missing)
                    return
                with conn.transaction():
                    for sql in self.dialect.ddl():
                        conn.execute(sql)
        except self._psycopg.Error as exc:
            error = self._error(exc)
            raise error from error.__cause__

    def close(self) -> None:
        self._pool.close()
