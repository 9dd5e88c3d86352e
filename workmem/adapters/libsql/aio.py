"""The async API on libSQL / SQLite: :class:`AsyncLibSQLStorage`, what ``workmem.connect_async("file:agent.db")`` opens.

The engines (``apsw``, the ``libsql`` wheel) are sync, so this is :class:`~workmem.aio.ThreadedAsyncStorage`
around a :class:`~workmem.adapters.libsql.storage.LibSQLStorage`: the arguments are
checked on the event loop, each operation's I/O runs on one of ``pool_size`` worker
threads (one per driver connection: a thread more would only wait for a connection),
and :meth:`AsyncLibSQLStorage.query` is the sync adapter's read-only ``query()``, awaited.

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

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Self

from workmem.aio import ThreadedAsyncStorage, opened_in_thread

from .storage import LibSQLStorage

__all__ = ["AsyncLibSQLStorage"]


class AsyncLibSQLStorage(ThreadedAsyncStorage):
    """A :class:`LibSQLStorage` behind the async API, on ``pool_size`` worker threads."""

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
