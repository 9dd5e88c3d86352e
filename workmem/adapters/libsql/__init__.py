"""libSQL / SQLite files and servers (``file:``, ``libsql://``, ``libsql+http(s)://``, ``libsql+ws(s)://``).

The package is named after the backend as users meet it (the ``libsql`` URL scheme, the
``workmem[libsql]`` extra, :class:`LibSQLStorage`, the ``libsql`` compatibility column);
the SQL it speaks is SQLite's.

* :mod:`.storage` — :class:`LibSQLStorage`: the hooks under the generic SQL flow, statements run; and
  :class:`AsyncLibSQLStorage`, the async API on worker threads (both engines are sync);
* :mod:`.settings` — the URL and options parsed (:func:`parse_libsql_url`), a local path checked;
* :mod:`.errors` — the driver's errors classified (busy, unavailable, refused);
* :mod:`.pool` — the connections, each lent to one thread at a time;
* :mod:`.port` — the only code touching the drivers: ``apsw`` for a file, the ``libsql`` wheel for a server;
* :mod:`.dialect` — what SQLite's SQL does differently (:class:`~.dialect.SQLiteDialect`);
* :mod:`.readonly` — what :meth:`LibSQLStorage.query` refuses, so that nothing outlives the call;
* :mod:`.foreign` — another SQLite library holding a file in this process, told apart from workmem's connections;
* :mod:`.remote` — one write at a time per libSQL server in a process (the wheel holds the GIL over HTTP).

Warnings go to the ``workmem.adapters.libsql`` logger.
"""

from __future__ import annotations

from .storage import AsyncLibSQLStorage, LibSQLStorage, parse_libsql_url

__all__ = ["AsyncLibSQLStorage", "LibSQLStorage", "parse_libsql_url"]
