"""PostgreSQL: ``postgresql://USER:PASSWORD@HOST:5432/DB?schema=public`` (also ``postgres://``, ``postgresql+psycopg://``).

``schema`` (default ``public``) names the schema holding Mastra's tables; it is
created when missing; system schemas (``information_schema``, ``pg_*``) are
refused. Other query parameters go to libpq (``sslmode``, ...).
Options: ``min_size`` (connections opened by ``connect()``, default 1),
``max_size`` (connections open at most, default 10), ``timeout`` (seconds to
wait when all ``max_size`` are in use, default 30), ``connect_timeout``
(seconds for opening one connection, default 10, or the URL's own
``connect_timeout``; libpq counts at least 2), ``schema``, ``create``
(default ``True``; ``False`` creates nothing, for a SELECT-only role: the
tables must exist).

Driver: psycopg 3 (``pip install 'workmem[postgres]'``), with workmem's own
pool (:mod:`workmem.adapters.postgres.pool`): a connection is opened in the
calling thread when none is idle, so while the server is down a call fails
within ``connect_timeout`` with the driver's reason (``Connection refused``,
``timeout expired``), and the first call after it is back connects at once.
Every operation is one statement on an autocommit connection, so it is atomic
and one round trip. A connection the server closed (restart,
``pg_terminate_backend``) is noticed before use, without a round trip, and
replaced; a read (or the ``BEGIN`` of a read-modify-write) that still meets
a dropped connection is tried once more on a new one, a write never is: it
may have run before the connection dropped. Errors are classified by SQLSTATE
(:mod:`workmem.adapters.postgres.sqlstate`): worth retrying or refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Self
from urllib.parse import unquote

from workmem.adapters.sql import Result, SqlStorage, Statement
from workmem.adapters.sql.storage import ExactCheckNeeded, StoredMetadataUnreadable
from workmem.errors import (
    BackendUnavailableError,
    StorageClosedError,
    ValidationError,
    WorkingMemoryFormatError,
    WorkmemError,
)
from workmem.kit import (
    check_number,
    check_options,
    driver_error,
    encode_userinfo,
    import_driver,
    mask_secrets,
    mask_url,
    split_userinfo,
    url_secrets,
)
from workmem.storage import Capabilities, check_create, missing_tables

from .dialect import (
    EXACT_CHECK_ERROR,
    FORMAT_ERROR,
    NEAR_LIMIT_ERROR,
    TOO_LARGE_ERROR,
    UNREADABLE_METADATA_ERROR,
    PostgresDialect,
)
from .pool import ConnectionPool, log
from .sqlstate import error_kind

__all__ = ["PostgresStorage", "parse_postgres_url"]

_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
_OPTIONS = frozenset({"min_size", "max_size", "timeout", "connect_timeout", "schema", "create"})
_RETRYABLE_STATES = ("57P01", "57P02", "57P03")  # admin/crash shutdown, cannot connect now (class 08 too)


def parse_postgres_url(url: str) -> tuple[str, str]:
    """``(conninfo, schema)``: the URL libpq understands (no ``schema``, plain scheme) and the schema name.

    The user info is found as :func:`workmem.kit.split_userinfo` says and
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
    check_number("timeout", timeout, positive=True)
    if connect_timeout is not None:
        check_number("connect_timeout", connect_timeout, note=" (0: no limit)")


def _has_parameter(psycopg: Any, conninfo: str, name: str) -> bool:
    """Whether ``conninfo`` sets ``name`` (an unreadable conninfo: no; connecting will say what is wrong)."""
    try:
        return name in psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return False


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
        connect_timeout: int | None = None,
        create: bool = True,
        url: str | None = None,
    ) -> None:
        _check_sizes(min_size, max_size, timeout, connect_timeout)
        super().__init__(PostgresDialect(schema))
        self._psycopg = import_driver("psycopg", "postgres")
        self._secrets = url_secrets(conninfo) + url_secrets(url or conninfo)
        self._url = mask_url(url if url is not None else conninfo)
        self._conninfo = conninfo
        self._connect_options: dict[str, Any] = {"autocommit": True}
        if connect_timeout is not None or not _has_parameter(self._psycopg, conninfo, "connect_timeout"):
            self._connect_options["connect_timeout"] = 10 if connect_timeout is None else connect_timeout
        self._pool = ConnectionPool(
            self._open_connection,
            max_size=max_size,
            timeout=timeout,
            where=self._url,
            describe=lambda exc: mask_secrets(str(exc), *self._secrets),
            is_outage=lambda exc: isinstance(self._error(exc), BackendUnavailableError),
        )
        create = check_create(create)
        conns = [self._take()]  # the first connection runs the setup, then joins the pool
        try:
            self._setup(conns[0], create)
            conns += [self._take() for _ in range(min_size - 1)]
        except BaseException:
            self._pool.close()
            raise
        finally:
            for conn in conns:
                self._pool.give(conn)  # closed if the pool was

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
        """Whether ``exc`` means the connection was lost (not a query error)."""
        state = getattr(exc, "sqlstate", None)
        lost = state is None or state.startswith("08") or state in _RETRYABLE_STATES
        return lost and isinstance(exc, self._psycopg.OperationalError)

    # -- connections -----------------------------------------------------------------

    def _open_connection(self) -> Any:
        """One new connection, set up; the driver's error when the server cannot be reached."""
        conn = self._psycopg.Connection.connect(self._conninfo, **self._connect_options)
        try:
            _configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _take(self) -> Any:
        """A live pooled connection; a connection that cannot be opened raises the mapped driver error."""
        try:
            return self._pool.take()
        except self._psycopg.Error as exc:
            error = self._error(exc)
            raise error from error.__cause__

    def _execute(self, statement: Statement, *, read: bool = False) -> Result:
        for attempt in (1, 2):
            conn = self._take()  # failing to connect is not retried: the reason comes back at once
            try:
                return _run(conn, self.dialect, statement)
            except self._psycopg.Error as exc:
                if read and attempt == 1 and self._retryable(exc):
                    continue  # a read is safe to repeat on a fresh connection
                error = self._error(exc)
                raise error from error.__cause__
            finally:
                self._pool.give(conn)  # kept only when still open and idle
        raise AssertionError("unreachable")

    def _begin(self) -> Any:
        """A pooled connection inside a new transaction; ``BEGIN`` meeting a lost connection is tried once more."""
        for attempt in (1, 2):
            conn = self._take()
            try:
                conn.execute("BEGIN")
                return conn
            except self._psycopg.Error as exc:
                self._pool.give(conn)
                if attempt == 1 and self._retryable(exc):
                    continue  # nothing of the transaction ran yet: safe on a fresh connection
                error = self._error(exc)
                raise error from error.__cause__
        raise AssertionError("unreachable")

    @contextmanager
    def _transaction(self) -> Iterator[_Session]:
        conn = self._begin()
        try:
            with self._committed(conn):
                yield _Session(self.dialect, conn)
        except self._psycopg.Error as exc:
            error = self._error(exc)
            raise error from error.__cause__
        finally:
            self._pool.give(conn)  # a connection left in a transaction (a failed rollback) is closed

    @contextmanager
    def _committed(self, conn: Any) -> Iterator[None]:
        """``COMMIT`` the transaction open on ``conn`` when the block ends, or roll it back if the block raises."""
        try:
            yield
        except BaseException:
            self._rollback(conn)
            raise
        conn.execute("COMMIT")

    def _rollback(self, conn: Any) -> None:
        """Roll back, unless the connection is gone (the server then rolled back itself); never raises."""
        if conn.closed or conn.broken:
            return
        try:
            conn.execute("ROLLBACK")
        except self._psycopg.Error:
            log.debug("error ignored rolling back on %s", self._url, exc_info=True)

    def _setup(self, conn: Any, create: bool) -> None:
        """Create what is missing; with ``create=False`` only check (one read) that the tables are there."""
        names = self.dialect.required_tables()
        try:
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
            conn.execute("BEGIN")
            with self._committed(conn):
                for sql in self.dialect.ddl():
                    conn.execute(sql)
        except self._psycopg.Error as exc:
            error = self._error(exc)
            if create and getattr(exc, "sqlstate", None) == "42501":  # insufficient privilege: say what to do
                error.args = (f"{error}; a role that may not create tables connects with create=False",)
            raise error from error.__cause__

    def close(self) -> None:
        self._pool.close()
