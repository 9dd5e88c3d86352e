"""One writer at a time per libSQL server in this process: the ``libsql`` wheel holds the GIL over HTTP.

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
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from workmem.errors import BackendBusyError

__all__ = ["writer_lock", "writing"]

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
