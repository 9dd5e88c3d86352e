"""What a remote libSQL server (``sqld``) needs: one writer per server and process, a cheap open, exact refusals.

**One writer at a time per libSQL server in this process: the ``libsql`` wheel holds the GIL over HTTP.**

A libSQL server (``sqld``) makes a statement that needs the write lock wait for it
on the server, and the ``libsql`` wheel (0.1.11) holds Python's GIL for the whole
HTTP round trip. Two threads of one process writing to one server would deadlock:
the waiting thread's request freezes the process, so the thread holding the lock
never sends its ``COMMIT``; after 5 s ``sqld`` takes the lock from that transaction
(rolled back, ``TRANSACTION_TIMEOUT``) -- seen in the owner-race conformance check.
So each process sends one write (a statement, or a whole ``BEGIN IMMEDIATE``
transaction) to a server at a time, waiting here, where the GIL is released. Writers
in other processes still wait on the server, which is safe: the holder runs on.
Reads take no lock (they never wait for the write lock).

**Opening reads, and writes only what is missing** (:func:`schema_query`, :func:`nothing_missing`): each
statement is an HTTP round trip, so an open whose tables, indexes and count triggers are all there is
one read, not a ``BEGIN IMMEDIATE`` transaction of every ``CREATE ... IF NOT EXISTS``. sqld keeps the
text of a trigger as it re-serialized it (``INSERT OR REPLACE`` written ``REPLACE``, line breaks and
indentation changed): triggers are compared in :func:`canonical_sql` form, else every open took them for
another version's and dropped, recounted and re-created them (21 round trips and the write lock).

**A write refused to a read-only token is refused, not "unavailable"** (:func:`cut_write`): sqld
answers a statement sent outside a transaction through the wheel's cursor stream with a cut stream
("unexpected EOF"), not its 403, when the token may not write. After such a cut the server is asked,
in a transaction of nothing, whether this token may write: a 403 is the refusal to raise; a server that
cannot be reached, or lets the token write, leaves the cut what it was (unavailable, retryable).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from workmem.errors import BackendBusyError

__all__ = ["canonical_sql", "cut_write", "nothing_missing", "schema_query", "writer_lock", "writing"]

_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def writer_lock(server: str) -> threading.Lock:
    """The process's one writer lock for ``server`` (its URL without the token)."""
    with _locks_lock:
        return _locks.setdefault(server, threading.Lock())


@contextlib.contextmanager
def writing(lock: threading.Lock | None, timeout: float, where: str) -> Iterator[None]:
    """Hold ``lock`` (none for a local database) for one write, waiting up to ``timeout`` s for it."""
    if lock is None:
        yield
        return
    if not lock.acquire(timeout=timeout):
        raise BackendBusyError(f"libSQL {where}: another write of this process held the server for {timeout:g} s")
    try:
        yield
    finally:
        lock.release()


_CREATED = re.compile(r"^\s*CREATE\s+(TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\S+)", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_INSERT_OR_REPLACE = re.compile(r"\bINSERT OR REPLACE INTO\b", re.IGNORECASE)


def canonical_sql(sql: str) -> str:
    """``sql`` with what sqld changes when it re-serializes a statement made equal: runs of white space
    are one space, ``INSERT OR REPLACE INTO`` is ``REPLACE INTO`` (the same statement to SQLite)."""
    return _INSERT_OR_REPLACE.sub("REPLACE INTO", _SPACE.sub(" ", sql).strip())


def _created(ddl: Iterable[str]) -> list[tuple[str, str]]:
    """The ``(type, name)`` of every table and index the ``CREATE ... IF NOT EXISTS`` statements ``ddl`` make."""
    made = []
    for sql in ddl:
        found = _CREATED.match(sql)
        if found is None:
            raise ValueError(f"not a CREATE TABLE / INDEX IF NOT EXISTS: {sql[:60]!r}")
        made.append((found.group(1).lower(), found.group(2).strip('"')))
    return made


def schema_query(ddl: Sequence[str], present_triggers: str) -> tuple[str, tuple[str, ...]]:
    """One read of what the database has of ``ddl``'s tables and indexes and of the count triggers:
    rows ``(type, name, sql)`` (``sql`` only for a trigger), for :func:`nothing_missing`."""
    names = tuple(name for _, name in _created(ddl))
    marks = ", ".join(f"?{index}" for index in range(1, len(names) + 1))
    sql = (
        f"SELECT 'trigger', name, sql FROM ({present_triggers}) UNION ALL "
        f"SELECT type, name, NULL FROM sqlite_master WHERE type IN ('table', 'index') AND name IN ({marks})"
    )
    return sql, names


def nothing_missing(
    ddl: Sequence[str], rows: Iterable[Sequence[Any]], upgrade: Callable[[list[tuple[Any, Any]]], list[str]]
) -> bool:
    """Whether the database (``rows`` of :func:`schema_query`) has every table and index of ``ddl`` and
    count triggers that ``upgrade`` (the dialect's ``count_upgrade``) leaves as they are."""
    objects = set()
    triggers = []
    for kind, name, sql in rows:
        if kind == "trigger":
            triggers.append((name, sql))
        else:
            objects.add((str(kind), str(name)))
    return set(_created(ddl)) <= objects and not upgrade(triggers)


_CUT = ("unexpected eof", "error reading a body from connection")
"""How the ``libsql`` wheel reports a response stream sqld cut (a crash mid-answer, or a write it refused)."""


def cut_write(exc: BaseException, probe: Callable[[], object]) -> BaseException | None:
    """The server's refusal behind a write cut short (``exc``), if it is one: the error of ``probe()``.

    ``probe`` asks the server whether the token may write (a write transaction of nothing, on
    a connection of its own) and raises what the server answered. Its error is returned when
    it is the server's HTTP 403; ``None`` otherwise (not a cut, reached nothing, allowed).
    """
    if not any(text in str(exc).lower() for text in _CUT):
        return None
    try:
        probe()
    except Exception as answer:
        if re.search(r"api error: `status=403\b", str(answer).lower()):
            return answer
    return None
