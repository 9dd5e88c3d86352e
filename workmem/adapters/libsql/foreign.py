"""Another SQLite library holding a database file in this process, told apart from workmem's own connections.

Two copies of SQLite in one process (workmem's engine, ``apsw`` or the ``libsql`` wheel, and
Python's ``sqlite3`` or the other engine opened by the program itself) do not see each other's
POSIX locks (see :mod:`workmem.adapters.libsql.storage`). A look lists
the descriptors this process has open on the file (Linux: ``/proc/self/fd``) and leaves out
workmem's own, known by number:

* **the database file:** the descriptors that appeared while one of workmem's connections was
  opening are its. They outlive their connections: SQLite does not close the descriptor of a
  connection that closes while another of its connections holds a lock on the file (in WAL
  mode every open connection does), since that would drop those locks. It keeps it, hands it
  to the next connection opened with the same flags, and closes it with the file's last
  connection: so the numbers are forgotten when workmem's last connection to the file is gone.
  Opening is serialized with looking: no connection of workmem's can open unseen.
* **the WAL index (``-shm``):** one descriptor per copy of SQLite, whatever its connections:
  a second one is another library.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["OwnConnections", "foreign_sqlite", "own"]

_OTHER_SQLITES = ("_sqlite3", "apsw", "libsql")
"""Modules embedding a copy of SQLite: only while one is loaded can a file be open twice, locks unshared."""


@dataclass
class _File:
    connections: int = 0
    """workmem's connections to the file that are open (or opening) now."""
    descriptors: set[int] = field(default_factory=set)
    """The numbers of the descriptors on the file that workmem's copy of SQLite opened."""


class OwnConnections:
    """workmem's connections to local database files in this process, by the file's real path."""

    def __init__(self) -> None:
        self._files: dict[str, _File] = {}
        self._lock = threading.Lock()

    @contextmanager
    def opening(self, path: str) -> Iterator[None]:
        """Around opening a connection to ``path``: the descriptors it opens are workmem's.

        A connection that fails to open is counted out at once; one that opens is counted out by :meth:`gone`.
        """
        with self._lock:
            file = self._files.setdefault(path, _File())
            file.connections += 1
            before = _descriptors(path)[0]
            opened = False
            try:
                yield
                opened = True
            finally:
                file.descriptors |= _descriptors(path)[0] - before
                if not opened:
                    self._count_out(path, file)

    def gone(self, path: str) -> None:
        """A connection to ``path`` from :meth:`opening` was let go (and closed, unless a reference was kept)."""
        with self._lock:
            self._count_out(path, self._files[path])

    def _count_out(self, path: str, file: _File) -> None:
        file.connections -= 1
        if not file.connections:
            # SQLite closed every descriptor it kept: forget their numbers, which anyone may now get.
            # One still open is a connection of workmem's that something (a traceback) still holds.
            file.descriptors &= _descriptors(path)[0]
            if not file.descriptors:
                del self._files[path]

    def look(self, path: str) -> tuple[int, int, int, int]:
        """``(descriptors on path, of them workmem's, descriptors on its -shm file, workmem's connections to it)``,
        listed while none can open."""
        with self._lock:
            main, shm = _descriptors(path)
            file = self._files.get(path)
            if file is None:
                return len(main), 0, shm, 0
            file.descriptors &= main  # a number no longer on the file was closed: anyone may get it next
            return len(main), len(file.descriptors), shm, file.connections


own = OwnConnections()
"""The process's one register: every storage on a file shares one engine's copy of SQLite (see :mod:`.port`)."""


def _descriptors(path: str) -> tuple[set[int], int]:
    """The numbers of this process's descriptors open on ``path``, and how many are on its ``-shm`` file.

    Read from ``/proc/self/fd`` (Linux); elsewhere none are seen.
    """
    main: set[int] = set()
    shm = 0
    shm_path = path + "-shm"
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return main, shm
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile (or the listing's own descriptor)
        if target == path:
            main.add(int(name))
        elif target == shm_path:
            shm += 1
    return main, shm


def foreign_sqlite(path: str, same_copy: int | None = None) -> str | None:
    """Why another SQLite library seems to have ``path`` open in this process, or ``None``.

    A second ``-shm`` descriptor is another SQLite library that has read the file; a descriptor
    on the file that none of workmem's connections opened is another library's connection,
    unless the program opened it through workmem's own engine, which shares its locks:
    ``same_copy`` is how many connections of that engine have the file open, workmem's
    included (``None``: unknown, and every such descriptor is taken for another library's).
    Looked for only while a SQLite library is loaded.
    """
    if not any(name in sys.modules for name in _OTHER_SQLITES):
        return None
    main, ours, shm, connections = own.look(path)
    if shm > 1:
        return f"{shm} SQLite libraries have its WAL index open"
    shared = 0 if same_copy is None else max(0, same_copy - connections)  # each connection holds a descriptor
    if main > ours + shared:
        also = f", {shared} by other connections of its own engine" if shared else ""
        return f"{main} descriptors are open on it, {ours} of them opened by workmem's connections{also}"
    return None
