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
the cursor gives.

The one-statement writes (``create_thread``, ``update_resource``,
``merge_working_memory``, ...) and every other statement with named parameters
take the same path (:meth:`KeyReads.run`, a :class:`PreparedStatement`): the
parameters are dumped by the connection's own ``Transformer`` (the bytes,
types and formats psycopg's cursor would send: a ``str`` with a NUL fails with
psycopg's ``DataError``, as on the cursor), the statement is prepared once per
connection and parameter types (as psycopg prepares it), and the result comes
back as rows and a row count. The same SQL, one statement, the same errors:
atomicity, the SQLSTATE mapping and the retry policy of the storage do not
change. psycopg's own prepared statements are turned off on these connections
(``prepare_threshold = None``): psycopg runs ``DEALLOCATE ALL`` after a
``ROLLBACK`` once it has prepared one of its own, which would drop ours in the
middle of a transaction. A statement without parameters (``BEGIN``,
``COMMIT``, DDL) goes through psycopg's cursor.

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
import re
import select
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, Protocol

import psycopg
from psycopg import pq
from psycopg.abc import Buffer
from psycopg.adapt import PyFormat, Transformer
from psycopg.errors import error_from_result
from psycopg.pq.abc import PGconn, PGresult

from workmem.adapters.sql.dialect import PLACEHOLDER, placeholder_names

from .pool import log

__all__ = [
    "BlockingWaits",
    "KeyReads",
    "LoopWaits",
    "NotSent",
    "PreparedRead",
    "PreparedStatement",
    "Waits",
    "prepared_read",
    "prepared_statement",
    "reads_for",
    "unsupported",
]

_TUPLES_OK: Final = pq.ExecStatus.TUPLES_OK
_COMMAND_OK: Final = pq.ExecStatus.COMMAND_OK
_FATAL_ERROR: Final = pq.ExecStatus.FATAL_ERROR
_SQLSTATE: Final = pq.DiagnosticField.SQLSTATE
_INVALID_STATEMENT_NAME: Final = b"26000"
_IDLE: Final = pq.TransactionStatus.IDLE
_ACTIVE: Final = pq.TransactionStatus.ACTIVE
_CANCEL_SECONDS: Final = 5.0
"""How long an interrupted statement's cancel, then its answer, is waited for (psycopg's own bound)."""
_AUTO: Final = PyFormat.AUTO
_PYFORMAT: Final = re.compile(r"%%|%\((\w+)\)s")
"""What psycopg reads in a rendered statement: a literal ``%`` (doubled), or a ``%(name)s`` placeholder."""

_USED: Final = {
    "psycopg.pq.PGconn": (
        "send_query_prepared",
        "send_prepare",
        "flush",
        "consume_input",
        "is_busy",
        "get_result",
        "transaction_status",
    ),
    "psycopg.pq.PGresult": ("status", "error_field", "ntuples", "command_tuples"),
    "psycopg.adapt.Transformer": ("set_pgresult", "load_rows", "dump_sequence", "types", "formats"),
    "psycopg.Connection": ("cancel_safe",),
    "psycopg.AsyncConnection": ("cancel_safe",),
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
        "psycopg.Connection": psycopg.Connection,
        "psycopg.AsyncConnection": psycopg.AsyncConnection,
    }
    missing = [
        f"{owner}.{name}" for owner, names in _USED.items() for name in names if not hasattr(owners[owner], name)
    ]
    return f"psycopg {version} has no {', '.join(missing)}" if missing else None


class PreparedRead(NamedTuple):
    """A key read as libpq prepares it: its number (one per read of the storage), and its text (``$1``: the key)."""

    number: int
    sql: bytes


def prepared_read(sql: str, number: int) -> PreparedRead:
    """The :class:`PreparedRead` of a :class:`~workmem.adapters.sql.dialect.KeyRead`'s ``sql`` (one ``:id``)."""
    if placeholder_names(sql) != ("id",):
        raise ValueError(f"a key read has the one placeholder :id, not {placeholder_names(sql)}")
    return PreparedRead(number, PLACEHOLDER.sub("$1", sql).encode())


class PreparedStatement(NamedTuple):
    """A rendered statement (psycopg's ``%(name)s`` placeholders) as libpq prepares it: ``$1``, ``$2``, ... in the
    order of :attr:`names` (a name used twice is one parameter), under names of its own per connection."""

    number: int
    sql: bytes
    names: tuple[str, ...]
    formats: tuple[PyFormat, ...]


def prepared_statement(sql: str, number: int) -> PreparedStatement:
    """The :class:`PreparedStatement` of ``sql`` as the dialect renders it (``%(name)s``, a literal ``%`` doubled)."""
    names: dict[str, int] = {}

    def number_of(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        return f"${names.setdefault(name, len(names) + 1)}"

    text = _PYFORMAT.sub(number_of, sql)
    return PreparedStatement(number, text.encode(), tuple(names), (_AUTO,) * len(names))


class NotSent(Exception):
    """Internal: the libpq path failed before sending anything (an unexpected psycopg): the cursor may run it."""


class Waits(Protocol):
    """How a key read waits for its connection's socket."""

    async def readable(self, fd: int) -> None:
        """Until ``fd`` can be read."""

    async def writable(self, fd: int) -> None:
        """Until ``fd`` can be written (or read: libpq then reads, so a server blocked on sending cannot block us)."""

    async def cancel(self, conn: Any) -> None:
        """Ask the server to cancel the statement in flight on ``conn`` and wait for its answer, as psycopg's cursor
        does when interrupted (within :data:`_CANCEL_SECONDS` each); raises when that fails."""


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

    async def cancel(self, conn: Any) -> None:
        await conn.cancel_safe(timeout=_CANCEL_SECONDS)
        await asyncio.wait_for(_results(conn.pgconn, self), _CANCEL_SECONDS)


class BlockingWaits:
    """Blocking in ``select`` without suspending (the sync adapter, driven by ``run_sync``)."""

    async def readable(self, fd: int) -> None:
        select.select([fd], [], [])

    async def writable(self, fd: int) -> None:
        select.select([fd], [fd], [])

    async def cancel(self, conn: Any) -> None:
        conn.cancel_safe(timeout=_CANCEL_SECONDS)
        await _results(conn.pgconn, _BlockingWithin(_CANCEL_SECONDS))


class _BlockingWithin:
    """:class:`BlockingWaits` that gives up (``TimeoutError``) once ``seconds`` have passed."""

    def __init__(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds

    async def readable(self, fd: int) -> None:
        if not select.select([fd], [], [], max(0.0, self._deadline - time.monotonic()))[0]:
            raise TimeoutError("no answer to the cancel request")

    async def writable(self, fd: int) -> None:
        ready = select.select([fd], [fd], [], max(0.0, self._deadline - time.monotonic()))
        if not (ready[0] or ready[1]):
            raise TimeoutError("no answer to the cancel request")

    async def cancel(self, conn: Any) -> None:
        raise NotImplementedError


_Key = int | tuple[int, tuple[int, ...]]
"""What a prepared statement is known by on a connection: a key read's number, or a statement's number and the
types of its parameters."""


class KeyReads:
    """What one connection keeps for its prepared statements: their names on it, and its row loader."""

    __slots__ = ("_conn", "_encoding", "_named", "_names", "_pgconn", "_rows", "_waits")

    def __init__(self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], waits: Waits) -> None:
        self._waits = waits
        self._conn = conn
        self._pgconn = conn.pgconn
        self._encoding = conn.info.encoding
        self._rows = Transformer(conn)  # the connection's loaders (timestamps in its time zone, ...)
        self._names: dict[_Key, bytes] = {}
        """The name each statement is prepared under on this connection: a key read's by its number, another
        statement's by its number and parameter types (psycopg prepares one per set of types, as here)."""
        self._named = 0

    async def fetch(self, read: PreparedRead, key: str) -> list[tuple[Any, ...]]:
        """The rows of ``read`` for ``key``: the connection is this caller's alone, idle, outside a pipeline."""
        if "\x00" in key:  # libpq passes text parameters as C strings: a NUL would cut the key short
            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        results = await self._send(read.number, read.sql, None, [key.encode(self._encoding)], None, cancels=False)
        result = self._result(results, _TUPLES_OK)
        self._rows.set_pgresult(result)
        return self._rows.load_rows(0, result.ntuples, tuple)

    async def run(self, statement: PreparedStatement, params: Mapping[str, Any]) -> tuple[list[tuple[Any, ...]], int]:
        """The rows and the row count of ``statement`` run with ``params``, as psycopg's cursor gives them.

        The connection is this caller's alone, outside a pipeline; idle, or in a transaction this caller
        opened. :class:`NotSent` when the libpq layer failed before anything was sent.
        """
        dumper = self._rows
        try:
            values = [params[name] for name in statement.names]
            args = dumper.dump_sequence(values, statement.formats)  # psycopg's errors raise as the cursor's
            types, formats = dumper.types, dumper.formats
        except (AttributeError, KeyError, TypeError) as error:
            raise NotSent(error) from error
        types = types or ()  # set once dump_sequence ran
        results = await self._send((statement.number, types), statement.sql, types, args, formats, cancels=True)
        result = self._result(results, None)
        if result.status == _TUPLES_OK:
            dumper.set_pgresult(result)
            return dumper.load_rows(0, result.ntuples, tuple), result.ntuples
        count = result.command_tuples
        return [], -1 if count is None else count

    async def _send(
        self,
        key: _Key,
        sql: bytes,
        types: Sequence[int] | None,
        args: Sequence[Buffer | None],
        formats: Sequence[int] | None,
        *,
        cancels: bool,
    ) -> list[PGresult]:
        """The results of the statement ``key`` run with ``args``, prepared first on this connection if it is not.

        A statement the server no longer has (psycopg's ``DEALLOCATE ALL``, which it runs after a
        ``ROLLBACK`` or a ``DROP``: see its ``_preparing`` module) is prepared again and run once more
        when the connection was idle: the failed run changed nothing and opened no transaction (inside
        one, it failed the transaction, whose owner sees the error). ``cancels``: an interrupted wait asks
        the server to cancel the statement (:meth:`_answer`); a key read leaves it to the pool, which
        closes a connection given back busy.
        """
        pgconn = self._pgconn
        idle = pgconn.transaction_status == _IDLE
        name = self._names.get(key)
        if name is None:
            name = await self._prepare(key, sql, types)
        pgconn.send_query_prepared(name, args, formats)
        results = await (self._answer() if cancels else _results(pgconn, self._waits))
        if idle and _statement_gone(results):
            name = await self._prepare(key, sql, types)
            pgconn.send_query_prepared(name, args, formats)
            results = await (self._answer() if cancels else _results(pgconn, self._waits))
        return results

    async def _answer(self) -> list[PGresult]:
        """The results of the statement sent; interrupted (cancelled), the server is asked to cancel it first.

        As psycopg's cursor: the connection is then idle again (or closed, if the server did not answer),
        and the statement ran whole or not at all.
        """
        try:
            return await _results(self._pgconn, self._waits)
        except BaseException:
            if self._pgconn.transaction_status == _ACTIVE:
                try:
                    await self._waits.cancel(self._conn)
                except BaseException as again:  # no answer, or interrupted again: in an unknown state, closed
                    # worded as psycopg's own warning in this case, which driverlog makes a debug record too
                    reason = (
                        "query not terminated after cancellation"
                        if isinstance(again, TimeoutError)
                        else f"query cancellation interrupted ({type(again).__name__})"
                    )
                    log.debug("psycopg, on a cancelled workmem statement: %s: closing connection", reason)
                    self._pgconn.finish()
            raise

    async def _prepare(self, key: _Key, sql: bytes, types: Sequence[int] | None) -> bytes:
        """Prepare ``sql`` under a name never used before on this connection, remembered as ``key``'s."""
        self._names.pop(key, None)
        name = f"workmem_statement_{self._named}".encode()
        self._named += 1
        self._pgconn.send_prepare(name, sql, types)
        self._result(await _results(self._pgconn, self._waits), _COMMAND_OK)
        self._names[key] = name
        return name

    def _result(self, results: list[PGresult], expected: pq.ExecStatus | None) -> PGresult:
        """The one result of a statement, of status ``expected`` (``None``: rows or a command's count)."""
        for result in results:
            if result.status == _FATAL_ERROR:
                raise error_from_result(result, encoding=self._encoding)
        statuses = (_TUPLES_OK, _COMMAND_OK) if expected is None else (expected,)
        if len(results) != 1 or results[0].status not in statuses:
            got = [pq.ExecStatus(result.status).name for result in results]
            wanted = " or ".join(status.name for status in statuses)
            raise psycopg.InternalError(f"a prepared statement expected one {wanted} result, got {got}")
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
