"""The adapters' hot path: a read of one record by primary key, as a named prepared statement on libpq.

psycopg's cursor spends some 50 µs of Python on every statement (converting the
query and its parameters, its prepared-statement bookkeeping, a cursor, a
transformer and a result description each time): measured on a 2-core machine,
more than the whole ``getThreadById`` call of the TypeScript Mastra adapter
(``@mastra/pg`` on node-postgres). ``get_thread`` and ``get_resource`` are one
fixed ``SELECT … WHERE id = $1`` each (a :class:`~workmem.adapters.sql.dialect.KeyRead`),
so :meth:`KeyReads.fetch` runs them on psycopg's libpq wrapper (``psycopg.pq``)
instead: the statement is prepared once per connection under a name of its own,
then each read sends the key, waits for the socket on the event loop, and loads
the rows with psycopg's own loaders (``psycopg.adapt.Transformer``) and raises
psycopg's own errors (``psycopg.errors.error_from_result``, a dropped
connection's ``OperationalError``): the values, types and errors are the ones
the cursor gives. Every other statement goes through psycopg's cursor.

The read is written once, as a coroutine over a :class:`Waits` port: the async
adapter's (:class:`LoopWaits`) waits for the socket on the event loop; the sync
adapter's (:class:`BlockingWaits`) blocks in ``select`` (the GIL released) and
never suspends, so :func:`~workmem.flows.run_sync` drives the same coroutine.

A read cancelled (or interrupted) while it waits leaves its statement in flight:
the connection is then not idle, so the pool closes it when it is given back.

psycopg does not promise to keep its libpq layer as it is: :func:`unsupported`
names what this module uses that an installed psycopg lacks, and the storage
then reads by key through the cursor like every other statement
(:func:`workmem.adapters.postgres.connections.fast_path`).

This module imports psycopg: the storage imports it only once psycopg is known
to be installed (:func:`workmem.kit.import_driver`).
"""

from __future__ import annotations

import asyncio
import functools
import select
from collections.abc import Callable
from typing import Any, Final, NamedTuple, Protocol

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer
from psycopg.errors import error_from_result
from psycopg.pq.abc import PGconn, PGresult

from workmem.adapters.sql.dialect import PLACEHOLDER, placeholder_names

__all__ = [
    "BlockingWaits",
    "KeyReads",
    "LoopWaits",
    "PreparedRead",
    "Waits",
    "prepared_read",
    "reads_for",
    "unsupported",
]

_TUPLES_OK: Final = pq.ExecStatus.TUPLES_OK
_COMMAND_OK: Final = pq.ExecStatus.COMMAND_OK
_FATAL_ERROR: Final = pq.ExecStatus.FATAL_ERROR
_SQLSTATE: Final = pq.DiagnosticField.SQLSTATE
_INVALID_STATEMENT_NAME: Final = b"26000"

_USED: Final = {
    "psycopg.pq.PGconn": ("send_query_prepared", "send_prepare", "flush", "consume_input", "is_busy", "get_result"),
    "psycopg.pq.PGresult": ("status", "error_field", "ntuples"),
    "psycopg.adapt.Transformer": ("set_pgresult", "load_rows"),
}
"""What the fast path calls on psycopg's libpq layer, beyond the names this module imports."""


def unsupported(psycopg_module: Any) -> str | None:
    """Why the installed psycopg cannot run the fast path (``None``: it can).

    The path was written for psycopg 3 (``psycopg.pq``, ``psycopg.adapt.Transformer``,
    ``psycopg.errors.error_from_result``); another major version, or one of those
    without a method the path calls, is refused here rather than met half way through a read.
    """
    version = str(getattr(psycopg_module, "__version__", "unknown"))
    if version.split(".", 1)[0] != "3":
        return f"the prepared key reads were written for psycopg 3, not psycopg {version}"
    owners: dict[str, Any] = {
        "psycopg.pq.PGconn": pq.PGconn,
        "psycopg.pq.PGresult": pq.PGresult,
        "psycopg.adapt.Transformer": Transformer,
    }
    missing = [
        f"{owner}.{name}" for owner, names in _USED.items() for name in names if not hasattr(owners[owner], name)
    ]
    return f"psycopg {version} has no {', '.join(missing)}" if missing else None


class PreparedRead(NamedTuple):
    """A key read as libpq prepares it: the statement's name on each connection, and its text (``$1``: the key)."""

    name: bytes
    sql: bytes


def prepared_read(sql: str, number: int) -> PreparedRead:
    """The :class:`PreparedRead` of a :class:`~workmem.adapters.sql.dialect.KeyRead`'s ``sql`` (one ``:id``)."""
    if placeholder_names(sql) != ("id",):
        raise ValueError(f"a key read has the one placeholder :id, not {placeholder_names(sql)}")
    return PreparedRead(f"workmem_key_read_{number}".encode(), PLACEHOLDER.sub("$1", sql).encode())


class Waits(Protocol):
    """How a key read waits for its connection's socket."""

    async def readable(self, fd: int) -> None:
        """Until ``fd`` can be read."""

    async def writable(self, fd: int) -> None:
        """Until ``fd`` can be written (or read: libpq then reads, so a server blocked on sending cannot block us)."""


class LoopWaits:
    """Waiting on the running event loop (the async adapter)."""

    async def readable(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(fd, _wake, ready)
        try:
            await ready
        finally:
            loop.remove_reader(fd)

    async def writable(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(fd, _wake, ready)
        loop.add_writer(fd, _wake, ready)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
            loop.remove_writer(fd)


class BlockingWaits:
    """Blocking in ``select`` without suspending (the sync adapter, driven by ``run_sync``)."""

    async def readable(self, fd: int) -> None:
        select.select([fd], [], [])

    async def writable(self, fd: int) -> None:
        select.select([fd], [fd], [])


class KeyReads:
    """What one connection keeps for key reads: the statements prepared on it, and its row loader."""

    __slots__ = ("_encoding", "_pgconn", "_prepared", "_rows", "_waits")

    def __init__(self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], waits: Waits) -> None:
        self._waits = waits
        self._pgconn = conn.pgconn
        self._encoding = conn.info.encoding
        self._rows = Transformer(conn)  # the connection's loaders (timestamps in its time zone, ...)
        self._prepared: set[bytes] = set()

    async def fetch(self, read: PreparedRead, key: str) -> list[tuple[Any, ...]]:
        """The rows of ``read`` for ``key``: the connection is this caller's alone, idle, outside a pipeline."""
        if "\x00" in key:  # libpq passes text parameters as C strings: a NUL would cut the key short
            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        pgconn = self._pgconn
        params = [key.encode(self._encoding)]
        if read.name not in self._prepared:
            await self._prepare(read)
        pgconn.send_query_prepared(read.name, params, None)
        results = await _results(pgconn, self._waits)
        if _statement_gone(results):
            # psycopg ran DEALLOCATE ALL on this connection (it does after a ROLLBACK or a DROP, see its
            # _preparing module): prepare again, and read once more (the failed read changed nothing).
            await self._prepare(read)
            pgconn.send_query_prepared(read.name, params, None)
            results = await _results(pgconn, self._waits)
        result = self._result(results, _TUPLES_OK)
        self._rows.set_pgresult(result)
        return self._rows.load_rows(0, result.ntuples, tuple)

    async def _prepare(self, read: PreparedRead) -> None:
        self._prepared.discard(read.name)
        self._pgconn.send_prepare(read.name, read.sql, None)
        self._result(await _results(self._pgconn, self._waits), _COMMAND_OK)
        self._prepared.add(read.name)

    def _result(self, results: list[PGresult], expected: pq.ExecStatus) -> PGresult:
        for result in results:
            if result.status == _FATAL_ERROR:
                raise error_from_result(result, encoding=self._encoding)
        if len(results) != 1 or results[0].status != expected:
            statuses = [pq.ExecStatus(result.status).name for result in results]
            raise psycopg.InternalError(f"a key read expected one {expected.name} result, got {statuses}")
        return results[0]


def _statement_gone(results: list[PGresult]) -> bool:
    """Whether the server answered that the prepared statement does not exist (SQLSTATE 26000)."""
    return (
        len(results) == 1
        and results[0].status == _FATAL_ERROR
        and results[0].error_field(_SQLSTATE) == _INVALID_STATEMENT_NAME
    )


async def _results(pgconn: PGconn, waits: Waits) -> list[PGresult]:
    """Send what is queued on ``pgconn`` and collect its results, waiting for the socket by ``waits``.

    The steps of psycopg's ``execute`` generator (``psycopg.generators``): flush
    (reading meanwhile, so a server blocked on sending cannot block us), then
    results until libpq has no more; a read that fails after an error result
    came (the server closed the connection behind its error) returns that result.
    """
    fd = pgconn.socket
    while pgconn.flush():  # 1: more to send (a large statement); for a key read, never
        await waits.writable(fd)
        pgconn.consume_input()
    results: list[PGresult] = []
    while True:
        try:
            if pgconn.is_busy():
                pgconn.consume_input()  # the answer is often there already: no turn of the event loop
                while pgconn.is_busy():
                    await waits.readable(fd)
                    pgconn.consume_input()
        except psycopg.OperationalError:
            if any(result.status == _FATAL_ERROR for result in results):
                return results
            raise
        result = pgconn.get_result()
        if result is None:
            return results
        results.append(result)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


@functools.cache
def reads_for(base: type[Any]) -> Callable[[Any], KeyReads]:
    """The :class:`KeyReads` of a new connection of ``base`` (psycopg's ``Connection`` or ``AsyncConnection``),
    waiting the way ``base`` does."""
    waits: Waits = LoopWaits() if issubclass(base, psycopg.AsyncConnection) else BlockingWaits()
    return functools.partial(KeyReads, waits=waits)
