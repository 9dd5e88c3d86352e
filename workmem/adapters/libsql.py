"""libSQL / SQLite, the embedded default: ``file:agent.db``, ``file:///abs/agent.db``, ``agent.db``, ``:memory:``.

Remote libSQL servers and Turso: ``libsql://HOST?authToken=TOKEN``, or
``libsql+https://HOST`` / ``libsql+http://HOST:PORT`` (``libsql+wss`` and
``libsql+ws`` are the same servers over HTTPS / HTTP), the token also as the
``auth_token`` option. Options: ``busy_timeout`` (seconds a busy database is
waited for, default 10), ``pool_size`` (connections, default 4; always 1 for
``:memory:``, whose connections would each be a separate database).

Driver: ``libsql`` (``pip install 'workmem[libsql]'``), embedding SQLite 3.45.
Tables are Mastra's (``mastra_threads``, ``mastra_resources``) with JSONB
metadata, ISO-8601 ``…Z`` text timestamps and WAL mode; workmem adds two
indexes for listing threads. Updates and merges are ``BEGIN IMMEDIATE``
transactions, so they are atomic between threads and between processes on one
file. The driver holds the GIL while SQLite waits on a lock, so its own busy
handler is off and a busy database is waited for here, with the GIL released.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Self, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from workmem.drivers import import_driver
from workmem.errors import BackendUnavailableError, ValidationError, WorkmemError
from workmem.storage import Capabilities
from workmem.urls import mask_url, scheme_of

from .sql import Result, SqlStorage, Statement
from .sql.sqlite import SQLiteDialect
from .sql.storage import check_options, driver_error

__all__ = ["LibSQLStorage", "parse_libsql_url"]

T = TypeVar("T")

_REMOTE_SCHEMES = {
    "libsql": "libsql",
    "libsql+https": "https",
    "libsql+http": "http",
    "libsql+wss": "https",
    "libsql+ws": "http",
}
_BUSY_MESSAGES = ("database is locked", "database is busy", "sqlite_busy", "database table is locked")
_OPTIONS = frozenset({"auth_token", "busy_timeout", "pool_size"})


def parse_libsql_url(url: str) -> tuple[str, str | None]:
    """``(database, auth_token)`` for the driver: a path, ``:memory:``, or a remote URL without its token."""
    if url in (":memory:", "file::memory:"):
        return ":memory:", None
    scheme = scheme_of(url)
    if scheme == "file":
        path, _, query = (url[5:] if url.lower().startswith("file:") else url).partition("?")
        if query:
            raise ValidationError("file URLs take no query parameters; pass options to connect()")
        if path.startswith("//"):
            host, _, rest = path[2:].partition("/")
            if host not in ("", "localhost"):
                raise ValidationError(f"a file URL names a local path, not host {host!r}")
            path = "/" + rest
        if not path:
            raise ValidationError("the libSQL URL names no database file")
        return unquote(path), None
    if scheme not in _REMOTE_SCHEMES:
        raise ValidationError(f"not a libSQL URL scheme: {scheme!r}")
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    token = params.pop("authToken", None)
    if params:
        raise ValidationError(f"unknown libSQL URL parameters: {', '.join(sorted(params))}")
    if not parts.hostname:
        raise ValidationError("a remote libSQL URL needs a host")
    return urlunsplit((_REMOTE_SCHEMES[scheme], parts.netloc, parts.path, "", "")), token


def _is_busy(exc: BaseException) -> bool:
    message = str(exc).lower()
    return any(text in message for text in _BUSY_MESSAGES)


class _Pool:
    """Up to ``size`` connections, each lent to one thread at a time (a libSQL connection is one session)."""

    def __init__(self, opener: Callable[[], Any], size: int, wait: float) -> None:
        self._opener = opener
        self._idle: list[Any] = []
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._wait = wait
        self.closed = False

    @contextmanager
    def connection(self) -> Iterator[Any]:
        if self.closed:
            raise BackendUnavailableError("the libSQL storage is closed")
        if not self._slots.acquire(timeout=self._wait):
            raise BackendUnavailableError("no free libSQL connection (pool_size reached)")
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            conn = conn if conn is not None else self._opener()
            healthy = False
            try:
                yield conn
                healthy = True
            except WorkmemError as exc:
                healthy = not isinstance(exc, BackendUnavailableError)
                raise
            finally:
                self._give_back(conn, healthy)
        finally:
            self._slots.release()

    def _give_back(self, conn: Any, healthy: bool) -> None:
        with self._lock:
            if healthy and not self.closed:
                self._idle.append(conn)
                return
        with suppress(Exception):
            conn.close()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            with suppress(Exception):
                conn.close()


class _Session:
    def __init__(self, storage: LibSQLStorage, conn: Any) -> None:
        self._storage = storage
        self._conn = conn

    def execute(self, statement: Statement) -> Result:
        return self._storage._run(self._conn, statement)


class LibSQLStorage(SqlStorage):
    """Working memory in a libSQL/SQLite database file (or a remote libSQL server)."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=True, persistent=True)

    def __init__(
        self,
        database: str,
        *,
        auth_token: str | None = None,
        busy_timeout: float = 10.0,
        pool_size: int = 4,
        url: str | None = None,
    ) -> None:
        super().__init__(SQLiteDialect())
        self._driver = import_driver("libsql", "libsql")
        if not isinstance(busy_timeout, int | float) or busy_timeout < 0:
            raise ValidationError(f"busy_timeout must be a number of seconds >= 0, not {busy_timeout!r}")
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise ValidationError(f"pool_size must be an int >= 1, not {pool_size!r}")
        self._database = database
        self._token = auth_token
        self._remote = "://" in database
        self._url = mask_url(url or database) if self._remote else (url or database)
        self._busy_timeout = float(busy_timeout)
        self._memory = database == ":memory:"
        self._pool = _Pool(self._open, 1 if self._memory else pool_size, max(self._busy_timeout, 1.0))
        self._setup()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        check_options(options, _OPTIONS, "libSQL")
        database, token = parse_libsql_url(url)
        options.setdefault("auth_token", token)
        return cls(database, url=url, **options)

    def __repr__(self) -> str:
        return f"LibSQLStorage({self._url!r})"

    # -- connections -------------------------------------------------------------------

    def _open(self) -> Any:
        try:
            # timeout=0: no busy handler in the driver (it would wait holding the GIL); see _retry_busy.
            return self._driver.connect(self._database, isolation_level=None, timeout=0.0, auth_token=self._token or "")
        except Exception as exc:
            error = self._error(exc, "cannot open")
            raise error from error.__cause__

    def _error(self, exc: BaseException, doing: str = "error on") -> WorkmemError:
        return driver_error(BackendUnavailableError, f"libSQL {doing} {self._url}", exc, self._token)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except WorkmemError:
            raise
        except (ValueError, self._driver.Error) as exc:
            error = self._error(exc)
            raise error from error.__cause__

    def _retry_busy(self, call: Callable[[], T]) -> T:
        """Run ``call`` until the database is not busy (a busy statement did nothing), for ``busy_timeout`` seconds."""
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.001
        while True:
            try:
                return call()
            except (ValueError, self._driver.Error) as exc:
                if isinstance(exc, WorkmemError) or not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(random.uniform(0, delay))
            delay = min(delay * 2, 0.05)

    def _run(self, conn: Any, statement: Statement) -> Result:
        sql, params = self.dialect.render(statement)
        cursor = conn.execute(sql, params)
        rows = cursor.fetchall() if cursor.description else []
        return Result(list(rows), cursor.rowcount)

    def _execute(self, statement: Statement, *, read: bool = False) -> Result:
        with self._connection() as conn:
            return self._retry_busy(lambda: self._run(conn, statement))

    @contextmanager
    def _transaction(self) -> Iterator[_Session]:
        with self._connection() as conn:
            self._retry_busy(lambda: conn.execute(self.dialect.begin_write))
            try:
                yield _Session(self, conn)
                conn.execute("COMMIT")
            except BaseException:
                with suppress(Exception):
                    conn.execute("ROLLBACK")
                raise

    def _setup(self) -> None:
        if not (self._remote or self._memory):
            with self._connection() as conn:
                self._retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchall())
        with self._transaction() as tx:
            for sql in self.dialect.ddl():
                tx.execute(Statement(sql, {}))

    def close(self) -> None:
        self._pool.close()
