"""``query()`` on a database file on the ``libsql`` wheel, run by a worker process so that it can be stopped.

The ``libsql`` wheel (``engine="libsql"``) holds the GIL while SQLite runs a statement and
offers no way to interrupt one: a long ``query()`` in this process would freeze every other
thread, and an endless one the whole process. So on the wheel a file's ``query()`` runs in a
child process of its own (started on the first call, kept for the next ones): this process
waits on a pipe, with the GIL released, and a ``timeout`` kills the child, which the next
call replaces. Across processes SQLite's locks are shared correctly, and the child opens
the file read-only, so the read-only rules are enforced by the database there as here.

On ``apsw``, the default engine, a statement runs with the GIL released and can be stopped
(:attr:`~workmem.adapters.libsql.port.Engine.interruptible`): ``query()`` runs in this process
and no worker is started.

Frames on the pipes are a 4-byte big-endian length and a pickle: requests
``(sql, params)``, replies ``("ok", rows)`` or ``("error", (WorkmemError, its DriverError cause or None))``. Only this
module's own child is ever read from, so the pickles are trusted.

A ``:memory:`` database lives in this process: on the wheel its ``query()`` runs here, without a
time limit (``timeout`` is refused for it).
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

import workmem
from workmem.errors import BackendUnavailableError, DriverError, QueryTimeoutError, StorageClosedError, WorkmemError

__all__ = ["QueryWorker"]

_HEADER: Final = struct.Struct(">I")


def _frame(value: object) -> bytes:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes | None:
    """``size`` bytes from ``fd``; ``None`` at the deadline; ``EOFError`` if the other side went away."""
    chunks: list[bytes] = []
    while size:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select([fd], [], [], wait)  # waits with the GIL released
        if not readable:
            return None
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class QueryWorker:
    """The child process that runs one storage's ``query()`` calls, one at a time."""

    def __init__(self, path: str, *, busy_timeout: float, synchronous: str, engine: str, where: str) -> None:
        self._path = path
        self._engine = engine  # the storage's engine: the child reads the file through the same one
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous  # the storage's level: the child's connections run at it too
        self._where = where  # the storage's URL as shown, for messages
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()
        self._closed = False

    def run(self, sql: str, params: Sequence[Any], timeout: float | None) -> list[tuple[Any, ...]]:
        """The rows of ``sql``, or the error the child raised; :class:`QueryTimeoutError` after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):  # another query() holds the child
            raise QueryTimeoutError(f"query() on {self._where} waited {timeout} s for an earlier query() to end")
        try:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(_frame((sql, tuple(params))))
                process.stdin.flush()
                reply = self._reply(process.stdout, deadline)
            except BaseException:  # a timeout, a dead child, KeyboardInterrupt: the child may be mid-statement
                self._stop()
                raise
            status, value = reply
            if status == "ok":
                rows: list[tuple[Any, ...]] = value
                return rows
            error, cause = value
            error.__cause__ = cause  # a pickle drops it: the child sends the detached DriverError beside the error
            raise error
        finally:
            self._lock.release()

    def _reply(self, stdout: IO[bytes], deadline: float | None) -> tuple[str, Any]:
        fd = stdout.fileno()
        try:
            header = _read_exact(fd, _HEADER.size, deadline)
            body = None if header is None else _read_exact(fd, _HEADER.unpack(header)[0], deadline)
        except (EOFError, OSError, ValueError):  # ValueError: close() closed the pipe under us
            if self._closed:
                raise StorageClosedError(f"the libSQL storage was closed during query() ({self._where})") from None
            raise BackendUnavailableError(f"query() on {self._where}: its worker process ended unexpectedly") from None
        if body is None:
            raise QueryTimeoutError(f"query() on {self._where} ran longer than its timeout and was stopped")
        reply: tuple[str, Any] = pickle.loads(body)
        return reply

    def _started(self) -> subprocess.Popen[bytes]:
        if self._closed:
            raise StorageClosedError(f"the libSQL storage is closed ({self._where})")
        if self._owner_pid != os.getpid():  # a forked copy of the storage: the child belongs to the parent
            self._process, self._owner_pid = None, os.getpid()
        if self._process is None or self._process.poll() is not None:
            self._process = self._spawn()
        return self._process

    def _spawn(self) -> subprocess.Popen[bytes]:
        if not sys.executable:
            raise BackendUnavailableError("query() runs in a Python worker process, but sys.executable is empty")
        package_root = str(Path(workmem.__file__).resolve().parent.parent)  # this workmem, wherever it came from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        arguments = [self._path, repr(self._busy_timeout), self._synchronous, self._engine]
        command = [sys.executable, "-m", __name__, *arguments]
        try:
            return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError as exc:
            raise BackendUnavailableError(f"query() on {self._where}: cannot start its worker process: {exc}") from None

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        """Stop the child (a running statement with it); later :meth:`run` calls raise StorageClosedError.

        It does not wait for a running :meth:`run` (which may have no timeout): killing the child ends
        that call at once, with :class:`StorageClosedError`.
        """
        self._closed = True
        process = self._process
        if process is not None:
            process.kill()
        with self._lock:  # the running call, if any, has ended: its pipe saw the child go
            self._stop()


def _serve(path: str, busy_timeout: float, synchronous: str, engine: str) -> None:
    """The child: answer requests from stdin until it closes."""
    from workmem.adapters.libsql.storage import LibSQLStorage

    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames may reach the parent's pipe
    storage: LibSQLStorage | None = None
    opening_error: WorkmemError | None = None
    try:
        storage = LibSQLStorage(
            path, create=False, read_only=True, busy_timeout=busy_timeout, synchronous=synchronous, engine=engine
        )
    except WorkmemError as exc:
        opening_error = exc
    while header := requests.read(_HEADER.size):
        sql, params = pickle.loads(requests.read(_HEADER.unpack(header)[0]))
        try:
            if storage is None:
                assert opening_error is not None
                raise opening_error
            reply: tuple[str, Any] = ("ok", storage._query_here(sql, params))
        except WorkmemError as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, DriverError) else None
            reply = ("error", (exc, cause))
        except Exception as exc:  # anything else is a defect; the parent gets a workmem error, not a crash
            reply = ("error", (BackendUnavailableError(f"query() worker: {type(exc).__name__}: {exc}"), None))
        replies.write(_frame(reply))
        replies.flush()


if __name__ == "__main__":
    _serve(sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4])
