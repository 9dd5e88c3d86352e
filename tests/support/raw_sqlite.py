"""Plain SQLite connections to a database file, as another program would open it, for tests.

:func:`raw` opens the file through ``apsw``, the engine workmem runs a file on: in this
process that is the one copy of SQLite that shares the file's locks with workmem's
connections (two copies in one process do not see each other's POSIX locks). Like the
adapter's connections it autocommits and has no busy handler: a locked database raises
``apsw.BusyError`` at once. :func:`raw_wheel` opens the file through the ``libsql`` wheel,
as earlier workmem versions did; use it only while no workmem storage holds the file open
in this process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

__all__ = ["raw", "raw_wheel"]


def raw(path: Path | str) -> apsw.Connection:
    """An ``apsw`` connection to the file (autocommit, no busy handler)."""
    return apsw.Connection(str(path))


def raw_wheel(path: Path | str) -> Any:
    """A ``libsql`` wheel connection to the file (autocommit, no busy handler)."""
    import libsql

    return libsql.connect(str(path), isolation_level=None, timeout=0.0)
