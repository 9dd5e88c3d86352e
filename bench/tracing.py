"""Counting what one workmem operation sends to its server: round trips and statements.

* PostgreSQL: libpq's own protocol trace (``PQtrace``) on the adapter's
  pooled connection. Every round trip ends with the server's
  ``ReadyForQuery``; every statement is a ``Query`` or an ``Execute``
  message. (``pg_stat_statements`` is not available on the server, and
  counting at the wire also catches ``BEGIN``/``COMMIT``.)
* libSQL: embedded, so no round trips; statements are counted by wrapping
  the driver's connections (every ``execute`` / ``executemany``).
* Upstash: HTTP requests of the REST client (each is one round trip; a Lua
  script is one command).
* MongoDB: commands seen by a ``pymongo`` command listener.

The counters wrap the driver only while a dedicated storage object is open;
they are never active during timed runs.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.backends import Namespace
from workmem.storage import MemoryStorage

__all__ = ["Count", "Counted", "counted_storage"]


@dataclass(frozen=True, slots=True)
class Count:
    """Per-operation averages over a block of calls."""

    round_trips: float | None
    """Network round trips (``None``: embedded, nothing crosses a network)."""
    statements: float | None
    """Statements or commands executed."""
    method: str
    """How they were counted."""


class Counted:
    """A storage object whose driver traffic can be counted over a block of calls."""

    method = ""

    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage

    def count(self, call: Callable[[int], object], start: int, n: int) -> Count:
        raise NotImplementedError


class _PostgresCounted(Counted):
    method = "libpq protocol trace (PQtrace): ReadyForQuery = round trip, Query/Execute = statement"

    def __init__(self, storage: MemoryStorage, connections: list[Any]) -> None:
        super().__init__(storage)
        self._connections = connections

    def count(self, call: Callable[[int], object], start: int, n: int) -> Count:
        from psycopg import pq

        fd, path = tempfile.mkstemp(prefix="wmbench-trace-")
        try:
            live = [c for c in self._connections if not c.closed]
            for conn in live:
                conn.pgconn.trace(fd)
                conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            try:
                for i in range(start, start + n):
                    call(i)
            finally:
                for conn in live:
                    conn.pgconn.untrace()  # flushes the trace stream
            with open(path, encoding="utf-8", errors="replace") as file:
                text = file.read()
        finally:
            os.close(fd)
            os.unlink(path)
        trips = len(re.findall(r"^B\t\d+\tReadyForQuery", text, flags=re.M))
        statements = len(re.findall(r"^F\t\d+\t(?:Query|Execute)\b", text, flags=re.M))
        return Count(trips / n, statements / n, self.method)


class _CallCounted(Counted):
    def __init__(self, storage: MemoryStorage, counter: list[int], method: str, *, network: bool) -> None:
        super().__init__(storage)
        self._counter = counter
        self.method = method
        self._network = network

    def count(self, call: Callable[[int], object], start: int, n: int) -> Count:
        before = self._counter[0]
        for i in range(start, start + n):
            call(i)
        per_op = (self._counter[0] - before) / n
        return Count(per_op if self._network else None, per_op, self.method)


@contextmanager
def _postgres(ns: Namespace) -> Iterator[Counted]:
    import psycopg

    original = psycopg.Connection.__dict__["connect"]
    connections: list[Any] = []

    def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
        conn = original.__func__(cls, *args, **kwargs)
        connections.append(conn)
        return conn

    # Patched while the storage is open: its pool connects when a call finds no idle connection.
    psycopg.Connection.connect = classmethod(connect)  # type: ignore[method-assign, assignment]
    try:
        with ns.connect(min_size=1, max_size=1) as storage:
            yield _PostgresCounted(storage, connections)
    finally:
        psycopg.Connection.connect = original  # type: ignore[method-assign]


class _CountingConnection:
    """A libSQL adapter's connection (apsw or the libsql wheel) that counts the statements run on it."""

    def __init__(self, conn: Any, counter: list[int]) -> None:
        self._conn = conn
        self._counter = counter

    def execute(self, *args: Any) -> Any:
        self._counter[0] += 1
        return self._conn.execute(*args)

    def executemany(self, *args: Any) -> Any:
        self._counter[0] += 1
        return self._conn.executemany(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextmanager
def _libsql(ns: Namespace) -> Iterator[Counted]:
    from workmem.adapters.libsql.port import ApswEngine, WheelEngine

    counter = [0]
    originals = {engine: engine.connect for engine in (ApswEngine, WheelEngine)}

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def connect(*args: Any, **kwargs: Any) -> Any:
            return _CountingConnection(original(*args, **kwargs), counter)

        return connect

    for engine, original in originals.items():
        engine.connect = counting(original)  # type: ignore[method-assign]
    try:
        with ns.connect(pool_size=1) as storage:
            yield _CallCounted(storage, counter, "statements run on the driver's connection", network=False)
    finally:
        for engine, original in originals.items():
            engine.connect = original  # type: ignore[method-assign]


@contextmanager
def _upstash(ns: Namespace) -> Iterator[Counted]:
    from upstash_redis import Redis

    counter = [0]
    original = Redis.execute

    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return original(self, *args, **kwargs)

    Redis.execute = execute  # type: ignore[method-assign]
    try:
        with ns.connect() as storage:
            yield _CallCounted(storage, counter, "HTTP requests of the REST client", network=True)
    finally:
        Redis.execute = original  # type: ignore[method-assign]


@contextmanager
def _mongodb(ns: Namespace) -> Iterator[Counted]:
    from pymongo import monitoring

    counter = [0]

    class Listener(monitoring.CommandListener):
        def started(self, event: Any) -> None:
            counter[0] += 1

        def succeeded(self, event: Any) -> None:
            pass

        def failed(self, event: Any) -> None:
            pass

    with ns.connect(event_listeners=[Listener()]) as storage:
        yield _CallCounted(storage, counter, "pymongo command listener", network=True)


_COUNTERS: dict[str, Callable[[Namespace], Any]] = {
    "postgres": _postgres,
    "libsql": _libsql,
    "upstash": _upstash,
    "mongodb": _mongodb,
}


@contextmanager
def counted_storage(ns: Namespace) -> Iterator[Counted | None]:
    """A dedicated storage object whose traffic can be counted, or ``None`` when there is no way here."""
    opener = _COUNTERS.get(ns.backend)
    if opener is None:
        yield None
        return
    with opener(ns) as counted:
        yield counted
