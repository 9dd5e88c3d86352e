"""libSQL / SQLite, the embedded default: ``file:agent.db``, ``file:///abs/agent.db``, ``agent.db``, ``:memory:``.

:class:`LibSQLStorage` is the storage (the hooks of :class:`~workmem.adapters.sql.SqlHooks`
run on the engine of :mod:`.port`); :class:`AsyncLibSQLStorage` is the same storage behind the
async API, on worker threads (both engines are sync).

Remote libSQL servers and Turso: ``libsql://HOST?authToken=TOKEN``, or
``libsql+https://HOST`` / ``libsql+http://HOST:PORT`` (``libsql+wss`` and
``libsql+ws`` are the same servers over HTTPS / HTTP), the token also as the
``auth_token`` option. ``?tls=0`` / ``?tls=1`` mean what they mean to
``@libsql/client``: ``libsql://127.0.0.1:8080?tls=0`` is a local server over
plain HTTP (the port must be given). Options: ``busy_timeout`` (seconds a busy database is
waited for, default 10), ``pool_size`` (connections, default 4; always 1 for
``:memory:``, whose connections would each be a separate database), ``create``
(default ``True``; ``False`` creates and changes nothing, the tables must exist),
``synchronous`` (a local database's durability, ``"full"`` by default or ``"normal"``; see below),
``engine`` (a local database's SQLite engine, ``"apsw"`` by default or ``"libsql"``; see below).
``file:agent.db?mode=ro`` opens an existing file read-only (and creates nothing);
``file:agent.db?synchronous=normal`` and ``file:agent.db?engine=libsql`` are the options in
the URL (a plain path has no query: its ``?`` is part of the file name).

Durability: every connection to a local database runs ``PRAGMA synchronous`` at the
chosen level. ``full`` (the default) syncs the WAL to disk at every commit: a committed
write survives a power failure or OS crash. ``normal`` (what ``@mastra/libsql`` sets)
syncs only at checkpoints: the database is never corrupted, a commit survives the
application crashing, but the last commits before a power failure or OS crash may be
lost. A remote libSQL server keeps its own durability: ``synchronous`` with a remote
URL is refused (:class:`~workmem.errors.ValidationError`), not silently ignored.

Remote servers (tested against ``sqld`` 0.24.32 over HTTP; see ``docs/remote-libsql.md``):
statements bind ``?N`` placeholders (a server refuses ``:name`` bound by position), each
process sends one write at a time per server (:mod:`.remote`), and the server's HTTP 401
and 403 are :class:`~workmem.errors.BackendRefusedError` saying authentication failed or
permission denied.

Engines (``pip install 'workmem[libsql]'`` installs both; see :mod:`.port`): a local
file or ``:memory:`` opens with ``apsw`` (a current SQLite; prepared statements kept in
each connection's cache; the GIL released while SQLite runs); remote servers with the
``libsql`` wheel (SQLite 3.45), which ``engine="libsql"`` also keeps for a file, at the
wheel's costs (each statement compiled again, the GIL held while SQLite runs). A file is
opened by one engine at a time in a process: the other is refused while it is open.
Tables are Mastra's (``mastra_threads``, ``mastra_resources``) with JSONB
metadata, ISO-8601 ``…Z`` text timestamps and WAL mode; workmem adds two
indexes for listing threads. Updates and merges are ``BEGIN IMMEDIATE``
transactions, so they are atomic between threads and between processes on one
file. No engine runs a busy handler of its own (the wheel's would wait holding the
GIL): a busy database is waited for here, with the GIL released.

Never open the file with Python's ``sqlite3`` (or the engine workmem does not run
on it) in the process that uses workmem on it. Another *process* is safe: every
SQLite engine (the ``sqlite3`` shell, Python's ``sqlite3``, apsw, the ``libsql`` wheel,
Node's ``@libsql/client``) shares the file's locks with workmem's, and concurrent
writers lose nothing. Inside one process two copies of SQLite (workmem's engine and
Python's ``sqlite3``, say) do not see each other's
POSIX locks: a write through one while the other is writing is silently lost, and
merely closing a ``sqlite3`` connection to the file deletes its WAL and drops every
lock workmem holds, which can lose another process's committed write. For a look
with SQL in the same process use :meth:`LibSQLStorage.query` (read-only, enforced
by the database). On Linux, workmem warns (logger ``workmem.adapters.libsql``) when
it sees another SQLite library holding the file in its process: on opening, then at
most every 10 s from writes and ``query()`` (see :mod:`.foreign`).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext, suppress
from datetime import datetime
from typing import Any, ClassVar, Self, TypeVar
from urllib.parse import quote

from workmem.adapters.sql import Attempt, KeyRead, Result, SqlHooks, Statement
from workmem.adapters.sql.rows import resource_from_row
from workmem.aio import ThreadedAsyncStorage, opened_in_thread
from workmem.changes import ResourceChange
from workmem.errors import (
    BackendBusyError,
    BackendUnavailableError,
    QueryTimeoutError,
    StorageClosedError,
    ValidationError,
    WorkmemError,
)
from workmem.kit import (
    Capabilities,
    backoff,
    check_create,
    check_number,
    check_options,
    detach,
    driver_error,
    mask_url,
    missing_tables,
    raise_unchained,
    run_sync,
)
from workmem.records import Resource, Unset
from workmem.storage import MemoryStorage

from .dialect import SQLiteDialect
from .errors import _REFUSALS, _error_kind, _is_busy, _status
from .foreign import foreign_sqlite, own
from .pool import _Pool
from .port import claims, engine_for
from .query_worker import QueryWorker
from .readonly import refused_pragma, refused_program
from .remote import cut_write, nothing_missing, schema_query, writer_lock, writing
from .settings import (
    _OPTIONS,
    _REMOTE_DURABILITY,
    _engine_name,
    _file_query,
    _synchronous_level,
    _unopenable,
    parse_libsql_url,
)

__all__ = ["AsyncLibSQLStorage", "LibSQLStorage", "parse_libsql_url"]

T = TypeVar("T")
R = TypeVar("R")

_log = logging.getLogger("workmem.adapters.libsql")

_FOREIGN_CHECK_INTERVAL = 10.0
"""Seconds between two looks at this process's open files (each look is a listing of ``/proc/self/fd``)."""


class LibSQLStorage(SqlHooks, MemoryStorage):
    """Working memory in a libSQL/SQLite database file (or a remote libSQL server)."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        cross_process_atomic=True, persistent=True, history=True, erase=True
    )
    async_adapter: ClassVar[str | None] = "workmem.adapters.libsql.storage:AsyncLibSQLStorage"
    dialect: SQLiteDialect

    def __init__(
        self,
        database: str,
        *,
        auth_token: str | None = None,
        busy_timeout: float = 10.0,
        pool_size: int = 4,
        create: bool = True,
        read_only: bool = False,
        synchronous: str | None = None,
        engine: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(SQLiteDialect())
        check_number("busy_timeout", busy_timeout)
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise ValidationError(f"pool_size must be an int >= 1, not {pool_size!r}")
        self._database = database
        self._token = auth_token
        self._remote = "://" in database
        self._engine = engine_for(None if engine is None else _engine_name(engine), remote=self._remote)
        self._errors = self._engine.errors
        """What the engine raises for a statement or a connection that failed."""
        self._url = mask_url(url or database) if self._remote else (url or database)
        self._busy_timeout = float(busy_timeout)
        self._memory = database == ":memory:"
        self._writer = writer_lock(database) if self._remote else None
        """One write at a time to a server from this process (see :mod:`.remote`); ``None`` for a local database."""
        self._path = None if self._remote or self._memory else os.path.realpath(database)
        """The database file's real path (``None`` for ``:memory:`` and remote servers)."""
        if self._remote and synchronous is not None:
            raise ValidationError(_REMOTE_DURABILITY)
        self._synchronous = None if self._remote else _synchronous_level("full" if synchronous is None else synchronous)
        # A pragma takes no bound parameter: the level is one of _SYNCHRONOUS, never the caller's text.
        self._durability = None if self._synchronous is None else f"PRAGMA synchronous={self._synchronous.upper()}"
        if not isinstance(read_only, bool):
            raise ValidationError(f"read_only must be a bool, not {type(read_only).__name__}")
        if read_only and self._path is None:
            raise ValidationError("read_only (mode=ro) opens a local database file, not :memory: or a server")
        self._read_only = read_only
        self._create = check_create(create) and not read_only  # a read-only file can have nothing created
        self._target = database
        """What the driver opens: the path, ``:memory:``, a server URL, or a ``mode=ro`` / ``mode=rw`` URI."""
        if self._path is not None and read_only:
            self._target = self._read_only_uri()
        elif self._path is not None and not self._create:  # SQLite would create a missing file: mode=rw does not
            if not os.path.exists(self._path):
                raise missing_tables(f"{self._url} ({database} does not exist)", self.dialect.required_tables())
            self._target = f"file:{quote(self._path)}?mode=rw"
        reason = None if self._path is None else _unopenable(database, read_only)
        if reason is not None:  # before SQLite touches the path (it would create files beside a device's target)
            raise ValidationError(f"libSQL cannot open {self._url}: {reason}")
        self._last_look = 0.0  # when _look_for_foreign_sqlite last looked (time.monotonic())
        self._warned = False  # about the current episode of a foreign SQLite holding the file
        self._reader: Any = None  # query()'s read-only connection to a file, opened on first use
        self._querying: Any = None  # the pool connection a :memory: query() runs on (close() interrupts it)
        self._reader_lock = threading.Lock()
        self._reader_closed = False  # set under _reader_lock by close(): no reader opens after it
        self._query_worker: QueryWorker | None = None  # a file's query() process, started by the first call
        self._pool_size = 1 if self._memory else pool_size
        self._unclaim: Callable[[], object] = lambda: None
        """Frees the file in port.claims, once: by close(), or when the storage is collected unclosed."""
        if self._path is not None:
            claims.claim(self._path, self._engine.name, self._url)
            self._unclaim = weakref.finalize(self, claims.release, self._path)
        self._pool = _Pool(
            self._open, self._pool_size, max(self._busy_timeout, 1.0), self._released, self._engine.release
        )
        try:
            run_sync(self._setup())
        except BaseException:
            self.close()
            raise
        self._look_for_foreign_sqlite(force=True)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        check_options(options, _OPTIONS, "libSQL")
        where, read_only, params = _file_query(url)
        database, token = parse_libsql_url(where)
        options.setdefault("auth_token", token)
        for name, normal in (("synchronous", _synchronous_level), ("engine", _engine_name)):
            if name in params:
                given = options.setdefault(name, params[name])
                if normal(given) != normal(params[name]):
                    raise ValidationError(
                        f"{name} is {params[name]!r} in the URL and {given!r} as an option; give it once"
                    )
        return cls(database, url=url, read_only=read_only, **options)

    def _read_only_uri(self) -> str:
        assert self._path is not None
        return f"file:{quote(self._path)}?mode=ro"

    def __repr__(self) -> str:
        return f"LibSQLStorage({self._url!r})"

    @property
    def pool_size(self) -> int:
        """How many driver connections the pool opens at most (1 for ``:memory:``).

        :func:`workmem.connect_async` runs this many worker threads: a thread more would only wait for a connection.
        """
        return self._pool_size

    @property
    def engine(self) -> str:
        """``"apsw"`` or ``"libsql"``: the SQLite engine this storage runs on (see :mod:`.port`)."""
        return self._engine.name

    @property
    def synchronous(self) -> str | None:
        """``"full"`` or ``"normal"``: the ``PRAGMA synchronous`` of every connection (``None`` for a remote server)."""
        return self._synchronous

    # -- connections -------------------------------------------------------------------

    def _open(self, *, reader: bool = False) -> Any:
        """A driver connection for the pool, or (``reader``) query()'s read-only connection to the file."""
        try:
            with nullcontext() if self._path is None else own.opening(self._path):  # its descriptors are workmem's
                return self._connect(self._read_only_uri() if reader else self._target)
        except Exception as exc:
            reason = None if self._path is None else _unopenable(self._database, self._read_only)
            if reason is not None:
                refused = ValidationError(f"libSQL cannot open {self._url}: {reason}")
                refused.__cause__ = detach(exc, self._token)
                raise_unchained(refused)
            raise_unchained(self._driver_error(exc, "cannot open"))

    def _connect(self, target: str) -> Any:
        # No busy handler in the engine: a busy database is waited for here, see _again.
        conn = self._engine.connect(target, self._token)
        if self._durability is not None:  # a setting of the connection: no lock, no I/O
            try:
                conn.execute(self._durability)
            except BaseException:
                del conn  # closed now, not when the traceback (which holds this frame) goes
                raise
        return conn

    def _released(self) -> None:
        """A connection from :meth:`_open` was let go (and closed, unless a reference to it was kept)."""
        if self._path is not None:
            own.gone(self._path)

    def _drop_reader(self) -> None:
        """Let query()'s read-only connection go (under ``_reader_lock``); the next query() opens another."""
        reader, self._reader = self._reader, None
        if reader is not None:
            self._engine.release(reader)
            del reader
            self._released()

    def _look_for_foreign_sqlite(self, *, force: bool = False) -> None:
        """Warn (once per episode) when another SQLite library holds the file open in this process.

        Two copies of SQLite in one process do not see each other's POSIX locks; see the
        module's documentation. Looked for on opening, then at most every
        ``_FOREIGN_CHECK_INTERVAL`` seconds, from writes and :meth:`query`.
        """
        now = time.monotonic()
        if self._path is None or (not force and now - self._last_look < _FOREIGN_CHECK_INTERVAL):
            return
        self._last_look = now
        reason = foreign_sqlite(self._path, self._engine.open_on(self._path))
        if reason is None:
            self._warned = False
        elif not self._warned:
            self._warned = True
            _log.warning(
                "another SQLite library (Python's sqlite3?) has %s open in this process (%s). Two SQLite "
                "copies in one process do not share locks: writes can be lost, and closing its connection "
                "deletes the WAL and drops workmem's locks. Use LibSQLStorage.query() to read with SQL, or "
                "open the file from another process.",
                self._path,
                reason,
            )

    def _driver_error(self, exc: BaseException, doing: str = "error on") -> WorkmemError:
        """The workmem error of the driver's ``exc`` (busy, unavailable or refused), the token masked."""
        refusal = _REFUSALS.get(_status(exc) or "")
        context = f"libSQL {refusal.format(url=self._url)}" if refusal else f"libSQL {doing} {self._url}"
        return driver_error(_error_kind(exc), context, exc, self._token)

    @contextmanager
    def _connection(self, wait: float | None = None) -> Iterator[Any]:
        """A pooled connection, waited for up to ``wait`` seconds (the pool's own wait, ``busy_timeout`` but at least
        1 s, when ``None``)."""
        try:
            with self._pool.connection(wait) as conn:
                yield conn
        except WorkmemError:
            raise
        except self._errors as exc:
            raise_unchained(self._driver_error(exc))

    # -- the port and the two policies of the SQL core (SqlHooks) ----------------------------

    async def _checkout(self) -> Any:
        self._look_for_foreign_sqlite()
        return self._pool.take()

    async def _give(self, conn: Any, failure: BaseException | None = None) -> None:
        # Kept after a busy statement (it did nothing) or a refusal of workmem's; let go after anything else.
        kept = isinstance(failure, WorkmemError) and not isinstance(failure, BackendUnavailableError)
        self._pool.give(conn, failure is None or kept or self._busy(failure))

    async def _query(self, conn: Any, sql: str, params: Any = None) -> Result:
        return self._fetch(conn, sql, () if params is None else params)

    async def _rollback(self, conn: Any, cause: BaseException) -> None:
        with suppress(Exception):
            conn.execute("ROLLBACK")

    def _writing(self) -> AbstractContextManager[object]:
        """One write at a time to a server from this process (see :mod:`.remote`); nothing for a local database."""
        return writing(self._writer, self._busy_timeout, f"write to {self._url}")

    def _error(self, exc: Exception) -> WorkmemError | None:
        if isinstance(exc, WorkmemError) or not isinstance(exc, self._errors):
            return None
        return self._driver_error(exc)

    def _again(self, exc: Exception, attempt: Attempt) -> float | None:
        """A busy database (the statement did nothing) is waited for, up to ``busy_timeout`` s; nothing else runs again.

        No busy handler runs in the engine (the wheel's would wait holding the GIL): the pause here releases it.
        """
        if not self._busy(exc) or time.monotonic() - attempt.started >= self._busy_timeout:
            return None
        return backoff(attempt.number - 1)

    def _busy(self, exc: BaseException) -> bool:
        return isinstance(exc, self._errors) and not isinstance(exc, WorkmemError) and _is_busy(exc)

    def _retry_busy(self, call: Callable[..., T], *args: Any, deadline: float | None = None) -> T:
        """``call(*args)`` on query()'s own connection, again as :meth:`_again` says (a busy database),
        never past ``deadline`` (``time.monotonic()``; then :class:`QueryTimeoutError`)."""
        attempt = Attempt(1, True, time.monotonic())
        while True:
            try:
                return call(*args)
            except self._errors as exc:
                delay = self._again(exc, attempt) if isinstance(exc, Exception) else None
                if delay is None:
                    raise
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise self._stopped()
            time.sleep(delay)
            attempt = attempt._replace(number=attempt.number + 1)

    def _fetch(self, conn: Any, sql: str, params: Any) -> Result:
        return self._engine.fetch(conn, sql, params)

    def query(self, sql: str, params: Sequence[Any] = (), *, timeout: float | None = None) -> list[tuple[Any, ...]]:
        """The rows of one read-only SQL statement on this database, through workmem's own SQLite.

        What Python's ``sqlite3`` module would be opened for, without its danger (see the
        module's documentation): ``storage.query('SELECT id, json(metadata) FROM mastra_threads
        WHERE "resourceId" = ?', ["user-1"])`` (``?`` parameters, bound in order: ``None``, ``int``,
        ``float``, ``str`` or ``bytes``). The database enforces read-only: a file is read through a
        connection of its own, opened with ``mode=ro``, under ``PRAGMA query_only``; ``:memory:`` runs
        under ``PRAGMA query_only``. A statement that would write (``ATTACH``, ``DETACH`` and
        ``VACUUM INTO`` included), or any other SQL error, raises :class:`ValidationError` and
        changes nothing. Remote servers are not supported.

        Nothing outlives the call: each statement runs in a read transaction of its own, so
        ``BEGIN``, ``SAVEPOINT``, ``COMMIT``, ``RELEASE`` and ``ROLLBACK`` are refused, and so is
        a ``PRAGMA`` given a value (``PRAGMA journal_mode=DELETE``, ``PRAGMA busy_timeout=...``), which
        would stay set on the connection (see :mod:`~workmem.adapters.libsql.readonly`). A pragma
        without a value reads it (``PRAGMA journal_mode``, ``PRAGMA table_info(mastra_threads)``).
        Only the first statement of a string of several runs (the driver ignores the rest).

        ``timeout`` (seconds) stops a statement still running then and raises
        :class:`~workmem.errors.QueryTimeoutError` (a wait for a busy database, for another
        thread's ``query()`` or, on ``:memory:``, for the database's one connection counts in it); ``None``
        (the default) waits for it to end. On the
        default engine, ``apsw``, the statement runs in this process, with the GIL released (other
        threads run meanwhile), and is stopped in it: the connection stays usable. On the ``libsql``
        wheel (``engine="libsql"``), which holds the GIL and cannot stop a statement, a file's
        ``query()`` runs in a worker process of this storage's
        (:mod:`~workmem.adapters.libsql.query_worker`), which a ``timeout`` kills; a ``:memory:``
        database on the wheel takes no ``timeout``. ``close()`` stops a running ``query()``
        (an interruptible engine's, or a file's worker), which raises :class:`~workmem.errors.StorageClosedError`.
        """
        if not isinstance(sql, str):
            raise ValidationError(f"query() needs SQL text, not {type(sql).__name__}")
        if not isinstance(params, list | tuple):
            raise ValidationError(f"query() parameters are a list or tuple (bound to ?), not {type(params).__name__}")
        for value in params:
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float | str | bytes)):
                raise ValidationError(
                    f"query() parameters are None, int, float, str or bytes, not {type(value).__name__}"
                )
        if timeout is not None:
            check_number("query() timeout", timeout, positive=True)
        if self._remote:
            raise ValidationError("query() reads a local database file or :memory:, not a remote libSQL server")
        if self._pool.closed:
            raise StorageClosedError("the libSQL storage is closed")
        reason = refused_pragma(sql)  # before SQLite compiles it: compiling a pragma applies its value
        if reason is not None:
            raise ValidationError(f"query() on {self._url} refused: {reason}")
        if not self._engine.interruptible:
            if not self._memory:
                return self._worker().run(sql, params, timeout)
            if timeout is not None:
                raise ValidationError(
                    "query() takes no timeout on :memory: with engine='libsql' (the wheel cannot stop a "
                    "statement, and the database lives in this process); use the default engine, apsw"
                )
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._query_here(sql, params, deadline)

    def _worker(self) -> QueryWorker:
        with self._reader_lock:
            if self._query_worker is None:
                if self._reader_closed:
                    raise StorageClosedError("the libSQL storage is closed")
                assert self._path is not None
                self._query_worker = QueryWorker(
                    self._path,
                    busy_timeout=self._busy_timeout,
                    synchronous=self.synchronous or "full",
                    engine=self._engine.name,
                    where=self._url,
                )
            return self._query_worker

    def _query_here(self, sql: str, params: Sequence[Any], deadline: float | None = None) -> list[tuple[Any, ...]]:
        """A ``query()`` in this process, one at a time, stopped at ``deadline`` (an interruptible engine's) or
        by ``close()``: a file's on its read-only connection (what the query worker process runs too: its
        storage is read-only), ``:memory:``'s on the database's one connection."""
        wait = -1 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._reader_lock.acquire(timeout=wait):  # one query() at a time on the reader
            raise QueryTimeoutError(f"query() on {self._url} ran out of its timeout waiting for an earlier query()")
        try:
            if self._reader_closed:
                raise StorageClosedError("the libSQL storage is closed")
            if self._memory:
                return self._query_memory(sql, params, deadline)
            self._look_for_foreign_sqlite()
            if self._reader is None:  # opened on first use
                self._reader = self._open(reader=True)
            try:
                return self._query_only(self._reader, sql, params, reset=False, deadline=deadline)
            finally:
                if self._reader.in_transaction:  # its ROLLBACK failed: a fresh connection next time
                    self._drop_reader()
        finally:
            self._reader_lock.release()

    def _query_memory(self, sql: str, params: Sequence[Any], deadline: float | None) -> list[tuple[Any, ...]]:
        """``:memory:``'s ``query()`` on the database's one connection, waiting for it no longer than ``deadline``."""
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        with ExitStack() as held:
            try:
                conn = held.enter_context(self._connection(wait))
            except BackendBusyError:
                if deadline is None:
                    raise
                raise QueryTimeoutError(
                    f"query() on {self._url} ran out of its timeout waiting for the database's connection"
                ) from None
            self._querying = conn
            try:
                return self._query_only(conn, sql, params, reset=True, deadline=deadline)
            finally:
                self._querying = None

    def _stopped(self) -> WorkmemError:
        """What a ``query()`` stopped by its deadline or by ``close()`` raises."""
        if self._reader_closed:
            return StorageClosedError(f"the libSQL storage was closed during query() ({self._url})")
        return QueryTimeoutError(f"query() on {self._url} ran longer than its timeout and was stopped")

    def _refuse_lasting_effects(self, conn: Any, sql: str, params: Sequence[Any], deadline: float | None) -> None:
        """Refuse ``sql`` if it would outlive the call (a transaction) or touch other files (``ATTACH``, ...):
        ``query_only`` and ``mode=ro`` prevent neither. Judged from the compiled program (``EXPLAIN``), not the text."""
        try:
            program = self._retry_busy(self._engine.first, conn, f"EXPLAIN {sql}", params, deadline=deadline)
        except self._errors as exc:
            if _is_busy(exc) or self._engine.interrupted(exc):
                raise
            return  # nothing EXPLAIN compiles (EXPLAIN QUERY PLAN ..., a syntax error): run as is, it attaches nothing
        reason = refused_program(program)
        if reason is not None:
            raise ValidationError(reason)

    def _query_only(
        self, conn: Any, sql: str, params: Sequence[Any], *, reset: bool, deadline: float | None = None
    ) -> list[tuple[Any, ...]]:
        """``sql`` on ``conn`` under ``PRAGMA query_only``, no transaction left open (``reset``: query_only off),
        stopped at ``deadline`` (``time.monotonic()``, an interruptible engine's) or by ``close()``."""
        try:
            conn.execute("PRAGMA query_only=ON")
            try:
                with nullcontext() if deadline is None else self._engine.until(conn, deadline):  # for the call only
                    self._refuse_lasting_effects(conn, sql, params, deadline)
                    return self._retry_busy(self._engine.first, conn, sql, params, deadline=deadline)
            finally:
                if conn.in_transaction:  # refused above: a net for whatever EXPLAIN could not judge
                    conn.execute("ROLLBACK")
                if reset:
                    conn.execute("PRAGMA query_only=OFF")
        except self._errors as exc:
            if self._engine.interrupted(exc):
                raise_unchained(self._stopped())
            if _is_busy(exc):
                raise_unchained(self._driver_error(exc))
            raise_unchained(driver_error(ValidationError, f"query() on {self._url} refused", exc, self._token))

    async def _execute_sql(self, sql: str, params: Any, *, read: bool = False) -> Result:
        try:
            return await super()._execute_sql(sql, params, read=read)
        except BackendUnavailableError as exc:
            refused = cut_write(exc, self._try_write) if self._remote and not read else None
            if refused is None:
                raise
        raise_unchained(self._driver_error(refused))

    def _try_write(self) -> None:
        """Ask the server whether this token may write: a write of nothing, rolled back, on a connection of its own
        (one that got a 403 in a transaction is unusable: sqld drops its stream). Raises what the server answered."""
        with self._writing():
            self._write_nothing()

    def _write_nothing(self) -> None:
        conn = self._connect(self._target)
        try:
            conn.execute("BEGIN")
            try:
                conn.execute(f"DELETE FROM {self.dialect.threads} WHERE 0")
            finally:
                with suppress(Exception):
                    conn.execute("ROLLBACK")
        finally:
            self._engine.release(conn)
            del conn

    async def _read_key(self, read: KeyRead[R], key: str) -> R | None:
        # The hot path of get_thread / get_resource: the read built once, one pooled connection, one
        # driver call. Anything unusual (busy, an error) goes the careful way of every statement.
        params = (key,)  # SQLiteDialect binds positionally
        pool = self._pool
        try:
            conn = pool.idle.pop()  # what take() does first, without the call
        except IndexError:
            conn = pool.take()
        try:
            # At most one row: fetchone() saves the driver a step, and the cursor (finalized when
            # dropped, right here) holds no read transaction open after it.
            row = conn.execute(read.rendered, params).fetchone()
        except self._errors:
            pool.give(conn, True)  # the attempt loop takes it again and judges the error
            rows = (await self._execute_sql(read.rendered, params, read=True)).rows
            row = rows[0] if rows else None
        except BaseException:
            pool.give(conn, False)
            raise
        else:
            pool.give(conn, True)
        return None if row is None else read.record(row)

    # -- writes SQLite does in fewer steps than the generic SQL flow -----------------------

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        working_memory, metadata = change.working_memory, change.metadata
        if (
            isinstance(working_memory, Unset)
            or not (metadata is None or isinstance(metadata, Unset))
            or (change.max_chars is not None and working_memory is not None)
            or change.record is not None
        ):
            # A metadata merge (or a mere touch), a size limit to check, or a version to record: read, decide,
            # write in one transaction.
            return await super()._update_resource(resource_id, change)
        # Working memory replaced, nothing merged: one upsert, atomic by itself, returning the row (as on PostgreSQL).
        statement = self.dialect.store_working_memory(resource_id, working_memory, change.now, returning=True)
        return resource_from_row((await self._execute(statement)).rows[0])

    def _merged_resource(self, old: Resource | None, resource_id: str, text: str, now: datetime) -> Statement:
        # The record was read whole (one that cannot be read is refused); only its working memory and
        # updatedAt change, so only those are written: no whole record re-validated and re-encoded.
        return self.dialect.store_working_memory(resource_id, text, now, returning=False)

    async def _setup(self) -> None:
        if not self._create:  # change nothing: only check that the tables are there
            names = self.dialect.required_tables()
            marks = ", ".join("?" for _ in names)
            sql = f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({marks})"
            found = {row[0] for row in (await self._execute_sql(sql, tuple(names), read=True)).rows}
            missing = self.dialect.without_counts([name for name in names if name not in found])
            if missing:
                raise missing_tables(self._url, missing)
            return
        if self._remote and await self._nothing_missing():  # one round trip, no write lock (see :mod:`.remote`)
            return
        if not (self._remote or self._memory):
            await self._execute_sql("PRAGMA journal_mode=WAL", (), read=True)  # no write lock taken: a local file
        async with self._transaction() as tx:
            for sql in self.dialect.ddl():
                await tx.execute(Statement(sql, {}))
            present = (await tx.execute(Statement(self.dialect.present_triggers, {}))).rows
            for sql in self.dialect.count_upgrade(present):
                await tx.execute(Statement(sql, {}))

    async def _nothing_missing(self) -> bool:
        """Whether the database has every table, index and count trigger :meth:`_setup` would create, read at once."""
        ddl = self.dialect.ddl()
        sql, names = schema_query(ddl, self.dialect.present_triggers)
        rows = (await self._execute_sql(sql, names, read=True)).rows
        return nothing_missing(ddl, rows, self.dialect.count_upgrade)

    async def _close(self) -> None:
        # The reader first: were a read-only connection the file's last to close, the WAL would stay. A query()
        # that takes it after this refuses; one running on it (an interruptible engine's) is stopped, again
        # until it lets go (an interrupt before its statement starts does nothing).
        self._reader_closed = True
        while not self._reader_lock.acquire(timeout=0.05):
            for running in (self._reader, self._querying):
                if running is not None:
                    self._engine.interrupt(running)
        try:
            self._drop_reader()
            worker, self._query_worker = self._query_worker, None
        finally:
            self._reader_lock.release()
        if worker is not None:
            worker.close()  # before the last connection: the worker's read-only one goes with its process
        writable = self._path is not None and not self._read_only
        self._pool.close(last=self._truncate_wal if writable else None)
        self._unclaim()  # the file is free for either engine once its last storage in the process closes

    def _truncate_wal(self, conn: Any) -> None:
        """Checkpoint the whole WAL into the file and empty it, unless another connection is using it (no wait).

        SQLite does this itself when the file's last connection closes; with other connections
        open (other storages, other processes), the WAL would keep its largest size until then.
        """
        with suppress(*self._errors):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


class AsyncLibSQLStorage(ThreadedAsyncStorage):
    """A :class:`LibSQLStorage` behind the async API, on ``pool_size`` worker threads: what
    ``workmem.connect_async("file:agent.db")`` opens.

    The engines (``apsw``, the ``libsql`` wheel) are sync, so this is :class:`~workmem.aio.ThreadedAsyncStorage`
    around a :class:`LibSQLStorage`: the arguments are checked on the event loop, each
    operation's I/O runs on one of ``pool_size`` worker threads (one per driver connection: a
    thread more would only wait for a connection), and :meth:`query` is the sync adapter's
    read-only ``query()``, awaited.

    The event loop never waits for a lock or a busy database (those waits sleep with the GIL
    released). On a file's default engine, ``apsw``, SQLite runs each statement, its commit's
    ``fsync`` included, with the GIL released too. The ``libsql`` wheel (remote servers, or
    ``engine="libsql"``) holds the GIL while SQLite runs a statement: while a worker is in the
    driver, the loop's thread waits for the GIL (up to Python's switch interval, 5 ms, per wait,
    and as long as a slow disk's ``fsync``).

    A cancelled call stops waiting at once; its operation, one atomic write or a read,
    runs to its end on its thread (a write after the cancellation is whole, never partial),
    and its connection goes back to the pool.
    """

    storage: LibSQLStorage

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        return cls(await opened_in_thread(functools.partial(LibSQLStorage.from_url, url, **options)))

    def __repr__(self) -> str:
        return f"AsyncLibSQLStorage({self.storage!r})"

    @property
    def engine(self) -> str:
        """``"apsw"`` or ``"libsql"``: the SQLite engine the storage runs on (see :attr:`LibSQLStorage.engine`)."""
        return self.storage.engine

    async def query(
        self, sql: str, params: Sequence[Any] = (), *, timeout: float | None = None
    ) -> list[tuple[Any, ...]]:
        """See :meth:`LibSQLStorage.query` (read-only, enforced by the database; ``timeout`` stops it), awaited."""
        return await self._in_thread(functools.partial(self.storage.query, sql, params, timeout=timeout))
