"""psycopg connections as the adapters keep them, and whether statements take the fast path.

Each connection serves one caller at a time and keeps one cursor to reuse (a new
one per statement costs ~15 µs) and, when the fast path is on, its
:class:`~workmem.adapters.postgres.keyreads.KeyReads`. The fast path runs on
psycopg's libpq layer, which psycopg does not promise to keep: :func:`fast_path`
turns it on only for a psycopg that has what it calls; otherwise ``get_thread``,
``get_resource`` and the writes go through the cursor like every other statement (the same
rows, slower by psycopg's cursor machinery), and one warning says why.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from .pool import log

__all__ = ["connection_class", "fast_path", "fast_path_failed"]


def fast_path(psycopg: ModuleType) -> ModuleType | None:
    """:mod:`.keyreads` when the installed ``psycopg`` can run it, else ``None`` (logged once per storage)."""
    try:
        from . import keyreads
    except (ImportError, AttributeError) as error:  # a libpq layer without the names it imports
        reason: str | None = f"{type(error).__name__}: {error}"
    else:
        reason = keyreads.unsupported(psycopg)
        if reason is None:
            return keyreads
    log.warning("reads by key and statements with parameters take psycopg's cursor path: %s", reason)
    return None


def fast_path_failed(error: Exception) -> None:
    """Log that the fast path met a psycopg it was not written for; the storage turns it off."""
    log.warning(
        "statements take psycopg's cursor path from now on: a prepared statement on libpq failed with %s: %s",
        type(error).__name__,
        error,
    )


def connection_class(base: type[Any], reads: Callable[[Any], Any] | None) -> type[Any]:
    """``base`` (psycopg's ``Connection`` or ``AsyncConnection``) whose connections keep a cursor
    (``workmem_cursor``) and, given ``reads``, what the fast path keeps (``workmem_reads``, psycopg's own
    prepared statements turned off: see :mod:`.keyreads`); one class per storage."""

    class Connection(base):  # type: ignore[misc]
        """psycopg's connection, with what workmem keeps per connection (a connection serves one caller)."""

        workmem_fast_path = reads is not None
        """Connected with psycopg's own prepared statements off (after a ROLLBACK it would DEALLOCATE ALL, ours too)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.workmem_cursor = self.cursor()
            if reads is not None:
                self.workmem_reads = reads(self)

    return Connection
