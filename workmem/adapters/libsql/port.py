"""The libSQL adapter's port, the only code touching the SQLite drivers: one :class:`Engine` per driver.

:class:`~.storage.LibSQLStorage` is written once over :class:`Engine`; its two implementations
sit side by side, ``apsw`` for local files and the ``libsql`` wheel for servers (both blocking:
the async API runs them on worker threads, see :class:`~.storage.AsyncLibSQLStorage`).
:mod:`.pool` lends their connections.

* :class:`ApswEngine` (``engine="apsw"``, the default for ``file:``, plain paths and
  ``:memory:``): a current SQLite, each connection's prepared statements kept in its
  statement cache and reused, and the GIL released while SQLite runs a statement (its
  commit's ``fsync`` included), so other threads and the event loop run meanwhile. A
  statement can be stopped (:attr:`Engine.interruptible`), so ``query()`` runs in this process.
* :class:`WheelEngine` (``engine="libsql"``, always for ``libsql://`` and ``libsql+http(s)://``
  servers; for a file only when asked for): the ``libsql`` wheel, SQLite 3.45 with libSQL's
  extensions. It keeps no prepared statement (each call compiles its SQL again), holds
  the GIL while SQLite runs and cannot stop a statement: a file's ``query()`` runs in a
  worker process (:mod:`.query_worker`).

Two copies of SQLite in one process do not see each other's POSIX locks: a file is opened
by one engine at a time in a process (:data:`claims`); opening it with the other while a
storage holds it open raises :class:`~workmem.errors.ValidationError`. Across processes every
engine shares the file's locks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, ClassVar

from workmem.adapters.sql import Result
from workmem.errors import ValidationError
from workmem.kit import import_driver

__all__ = ["ApswEngine", "Engine", "WheelEngine", "claims", "engine_for"]

_STEPS = 1_000_000
"""SQLite virtual machine steps between two looks at a deadline: 13-16 ms of a recursive count on a 2-core
machine (2026-12-07). Each look takes the GIL; beside a thread running Python it may wait for it, so a
statement looks seldom (every 100,000 steps, a long statement with a timeout ran 3.9x slower beside a busy
Python thread; every 1,000,000, 1.35x): a deadline is kept within some 15 ms."""


class Engine:
    """What the adapter asks of a SQLite engine: open, run a statement, let a connection go."""

    name: ClassVar[str]
    errors: tuple[type[BaseException], ...]
    """What the driver raises for a statement or a connection that failed (mapped to workmem errors)."""
    interruptible: ClassVar[bool] = False
    """Whether a running statement can be stopped from this process (:meth:`until`, :meth:`interrupt`),
    and runs with the GIL released: then ``query()`` runs here, else a file's runs in a worker process."""

    def connect(self, target: str, token: str | None) -> Any:  # pragma: no cover - abstract
        """A connection to ``target`` (a path, ``:memory:``, a ``file:`` URI or a server URL), autocommit."""
        raise NotImplementedError

    def fetch(self, conn: Any, sql: str, params: Any) -> Result:  # pragma: no cover - abstract
        """The rows of ``sql`` (a single statement) and how many rows it changed."""
        raise NotImplementedError

    def first(self, conn: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:  # pragma: no cover
        """The rows of the first statement of ``sql``; the statements after it never run."""
        raise NotImplementedError

    def release(self, conn: Any) -> None:  # pragma: no cover - abstract
        """Close ``conn`` (the caller passes its last reference)."""
        raise NotImplementedError

    def open_on(self, path: str) -> int | None:
        """How many connections of this engine's SQLite have ``path`` open in this process (workmem's included).

        Those share workmem's locks (one copy of SQLite). ``None``: the engine cannot tell.
        """
        return None

    def until(self, conn: Any, deadline: float) -> AbstractContextManager[None]:  # pragma: no cover - abstract
        """Within it, a statement on ``conn`` still running at ``deadline`` (``time.monotonic()``) is stopped
        and raises what :meth:`interrupted` recognizes. Only when :attr:`interruptible`."""
        raise NotImplementedError

    def interrupt(self, conn: Any) -> None:
        """Stop the statement ``conn`` runs now, if any (from any thread); nothing unless :attr:`interruptible`."""

    def interrupted(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a statement stopped by :meth:`until` or :meth:`interrupt`."""
        return False


class ApswEngine(Engine):
    """``apsw``: the default for local files and ``:memory:``."""

    name: ClassVar[str] = "apsw"
    interruptible: ClassVar[bool] = True

    def __init__(self) -> None:
        self._apsw = import_driver("apsw", "libsql")
        self.errors = (ValueError, self._apsw.Error)
        self._flags = self._apsw.SQLITE_OPEN_READWRITE | self._apsw.SQLITE_OPEN_CREATE | self._apsw.SQLITE_OPEN_URI

    def open_on(self, path: str) -> int | None:
        count = 0
        for conn in self._apsw.connections():
            try:
                count += conn.filename == path
            except self._apsw.ThreadingViolationError:  # running a statement in another thread: counted as on it
                count += 1
        return count

    def connect(self, target: str, token: str | None) -> Any:
        # No busy handler (none is set by default): a busy database is waited for by the adapter, which
        # judges its own deadline; apsw's statement cache (100 statements) keeps each prepared statement.
        return self._apsw.Connection(target, flags=self._flags)

    def fetch(self, conn: Any, sql: str, params: Any) -> Result:
        cursor = conn.execute(sql, params)
        try:
            # changes(): the rows the last finished INSERT, UPDATE or DELETE changed (triggers' not counted)
            return Result(cursor.fetchall(), conn.changes())
        except BaseException:
            with suppress(Exception):  # a statement that failed part way is finished before anything else runs
                cursor.close()
            raise

    def first(self, conn: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        # apsw runs every statement of a string; a tracer that refuses the second stops it there
        # (ExecTraceAbort, before the statement runs), as the wheel runs only the first.
        started = False

        def only_the_first(cursor: Any, statement: str, bindings: Any) -> bool:
            nonlocal started
            if started:
                return False
            started = True
            return True

        cursor = conn.cursor()
        cursor.exec_trace = only_the_first
        rows: list[tuple[Any, ...]] = []
        try:
            cursor.execute(sql, params)
            rows.extend(cursor)
        except self._apsw.ExecTraceAbort:
            pass
        finally:
            with suppress(Exception):
                cursor.close()
        return rows

    @contextmanager
    def until(self, conn: Any, deadline: float) -> Iterator[None]:
        # A progress handler, not a timer thread calling interrupt(): no thread per call, and nothing
        # that could fire on the connection's next statement. SQLite calls it every _STEPS virtual machine
        # steps (some 15 ms), taking the GIL only for a clock reading; a statement shorter than
        # that never calls it. Returning True stops the statement with InterruptError.
        conn.set_progress_handler(lambda: time.monotonic() >= deadline, _STEPS)
        try:
            yield
        finally:
            conn.set_progress_handler(None)

    def interrupt(self, conn: Any) -> None:
        with suppress(self._apsw.Error):  # closed meanwhile: nothing runs on it
            conn.interrupt()

    def interrupted(self, exc: BaseException) -> bool:
        return isinstance(exc, self._apsw.InterruptError)

    def release(self, conn: Any) -> None:
        with suppress(Exception):
            conn.close()


class WheelEngine(Engine):
    """The ``libsql`` wheel: remote servers always, a local file when ``engine="libsql"`` asks for it."""

    name: ClassVar[str] = "libsql"

    def __init__(self) -> None:
        self._driver = import_driver("libsql", "libsql")
        self.errors = (ValueError, self._driver.Error)

    def connect(self, target: str, token: str | None) -> Any:
        # timeout=0: no busy handler in the driver (it would wait holding the GIL); the adapter waits instead.
        return self._driver.connect(target, isolation_level=None, timeout=0.0, auth_token=token or "")

    def fetch(self, conn: Any, sql: str, params: Any) -> Result:
        cursor = conn.execute(sql, params)
        try:
            # fetchall() is None for a statement without result columns (cheaper than asking description)
            return Result(cursor.fetchall() or [], cursor.rowcount)
        except BaseException:
            # A statement that failed part way (busy on its last step) must be finished before anything
            # else runs: while it lives, the connection stays in its transaction and nothing commits.
            with suppress(Exception):
                cursor.close()
            raise

    def first(self, conn: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self.fetch(conn, sql, params).rows  # the wheel runs the first statement of a string only

    def release(self, conn: Any) -> None:
        """Let the connection go by dropping our last reference, not by ``conn.close()``.

        In ``libsql`` 0.1.11, ``Connection.close()`` crashed the process (SIGSEGV inside the
        driver) a few times in a hundred conformance runs under load, always closing the
        connections of storages that had just raced to create one thread; dropping the last
        reference runs the driver's own destructor and did not crash in as many runs. The
        connection is closed either way once nothing refers to it.
        """
        del conn


def engine_for(engine: str | None, *, remote: bool) -> Engine:
    """The engine named ``engine`` (checked), or by default ``apsw`` for a local database and the wheel for a server."""
    if remote:
        if engine == "apsw":
            raise ValidationError(
                "engine='apsw' opens a local database file or :memory:; a remote libSQL server is reached "
                "through the libsql wheel (leave engine out, or give engine='libsql')"
            )
        return WheelEngine()
    return WheelEngine() if engine == "libsql" else ApswEngine()


class EngineClaims:
    """Which engine holds each local database file open in this process, and how many storages hold it.

    Two SQLite copies in one process do not see each other's POSIX locks: a write through one while the
    other is writing is lost. So a file is claimed by its first storage's engine, and a storage asking
    for the other engine while the claim lasts is refused.
    """

    def __init__(self) -> None:
        self._files: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def claim(self, path: str, engine: str, where: str) -> None:
        """Hold ``path`` (a real path) for ``engine``; ValidationError if the other engine holds it."""
        with self._lock:
            held, count = self._files.get(path, (engine, 0))
            if held != engine:
                raise ValidationError(
                    f"{where} is open in this process with the {held!r} engine; it cannot be opened with "
                    f"{engine!r} too: two copies of SQLite in one process do not share the file's locks, and "
                    f"writes could be lost. Give engine={held!r}, or close the other storage first"
                )
            self._files[path] = (engine, count + 1)

    def release(self, path: str) -> None:
        """One storage fewer holds ``path``; the last one frees it for either engine."""
        with self._lock:
            engine, count = self._files[path]
            if count > 1:
                self._files[path] = (engine, count - 1)
            else:
                del self._files[path]

    def engine_of(self, path: str) -> str | None:
        """The engine holding ``path`` open in this process, if any."""
        with self._lock:
            held = self._files.get(path)
            return None if held is None else held[0]


claims = EngineClaims()
"""The process's one register of which engine holds each local database file."""
