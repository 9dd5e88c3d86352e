"""``SqlHooks``: the storage contract on any SQL database, over a dialect and a small connection port.

A backend gives :class:`SqlHooks` a port of small I/O methods, as coroutines:
:meth:`~SqlHooks._checkout` and :meth:`~SqlHooks._give` (a pooled connection,
and back), :meth:`~SqlHooks._query` (one rendered statement on it),
:meth:`~SqlHooks._begin` / :meth:`~SqlHooks._commit` / :meth:`~SqlHooks._rollback`,
and :meth:`~SqlHooks._writing` (a lock held around writes, where the backend
needs one); and two policies: :meth:`~SqlHooks._error` (which workmem error a
driver exception means) and :meth:`~SqlHooks._again` (whether, and after how
long, work that failed runs again). A sync storage's port calls its blocking
driver and never suspends (see :func:`workmem.flows.run_sync`); an async one's
awaits its async driver. Everything else is here, once: the attempt loop
(:meth:`~SqlHooks._attempts`), one statement (:meth:`~SqlHooks._execute`), the
read-modify-write :class:`Transaction` (:meth:`~SqlHooks._transaction`), the
statements, the row mapping and the order of steps (fast path, fallback).
Arguments arrive checked (:mod:`workmem.flows`).

Reads are one statement. Insert-only ``create_thread`` and owner-checked
``save_thread`` are one statement (Oracle's ``MERGE`` returns no row, so its
adapter reads the row back in the same transaction). ``update_*`` and ``merge_working_memory`` are one statement
where the dialect can express them (:attr:`Dialect.native_shallow_merge`,
:meth:`Dialect.merge_statement`), otherwise a transaction that locks what it
reads (the row, or the whole database for SQLite) before computing the new
record with :mod:`workmem.changes`.
"""

from __future__ import annotations

import functools
import time
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import (
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from datetime import datetime
from typing import Any, ClassVar, NamedTuple, TypeVar

from workmem.errors import (
    BackendBusyError,
    OperationNotSupportedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    UnreadableRecordError,
    WorkmemError,
)
from workmem.kit import (
    HISTORY_TABLE,
    UNSET,
    ErasedResource,
    HistoryKey,
    HistoryPolicy,
    ListQuery,
    MemoryVersion,
    MergeChange,
    Recording,
    RecordPage,
    Resource,
    ResourceChange,
    ScopeTarget,
    StorageHooks,
    Thread,
    ThreadChange,
    ThreadPage,
    check_owner,
    memory_given,
    merge_document,
    read_record_page,
    thread_working_memory,
    thread_working_memory_to_merge,
    updated_resource,
    updated_thread,
    utc_now,
    with_thread_memory,
)
from workmem.masking import raise_unchained

from .dialect import Dialect, KeyRead, Statement
from .rows import load_json, resource_from_row, thread_from_row, version_from_row

__all__ = [
    "Attempt",
    "ExactCheckNeeded",
    "Result",
    "SqlHooks",
    "StoredMetadataUnreadable",
    "Transaction",
]


R = TypeVar("R")
T = TypeVar("T")

LIST_ATTEMPTS = 10
"""How often a page past the last is read again when threads are created between it and its count."""
VERSION_BATCH = 100
"""Versions inserted per statement by ``_insert_versions`` at most (8 parameters each)..."""
VERSION_BATCH_CHARS = 4 * 1024 * 1024
"""... and text of at most about this many characters (a version may hold up to 4 MiB): a statement stays small."""
ID_BATCH = 500
"""Thread ids deleted per statement by ``_delete_resource`` (Oracle takes at most 1000 in a list)."""

Recorded = Callable[[Sequence[Any]], tuple[HistoryKey, str | None]]
"""From the row a one-statement write returned: whose working memory it changed, and to what."""


class ExactCheckNeeded(WorkmemError):
    """Internal: a one-statement update stopped, nothing written, because only the exact check can decide.

    The database's cheap size measure over-estimates (PostgreSQL's jsonb text), or stored working
    memory may read differently in Python than in the database (an escape, an exponent, a repeated
    key, ...); :class:`SqlHooks` catches this and redoes the operation as a row-locked
    read-modify-write decided in Python, so every backend accepts and refuses the same input.
    """


class StoredMetadataUnreadable(WorkmemError):
    """Internal: a one-statement write stopped, nothing written, because the stored metadata is no JSON object.

    :class:`SqlHooks` raises it as :class:`UnreadableRecordError` naming the record, as a
    read-modify-write that reads the record first would.
    """


@contextmanager
def _record(kind: str, record_id: str) -> Iterator[None]:
    """Name the record of a one-statement write whose stored metadata cannot be read."""
    try:
        yield
    except StoredMetadataUnreadable as exc:
        raise UnreadableRecordError(kind, record_id, str(exc)) from None


class Result(NamedTuple):
    """What one statement returned."""

    rows: list[tuple[Any, ...]]
    rowcount: int


class Attempt(NamedTuple):
    """One run of a piece of work, as :meth:`SqlHooks._again` sees it when the run failed."""

    number: int
    """1 for the first run."""
    read: bool
    """Running it again is safe whatever happened: it writes nothing (a read, or opening a transaction)."""
    started: float
    """:func:`time.monotonic` when the first run began."""


class Transaction:
    """An open transaction: each statement rendered and run on its connection (errors as the driver raises them)."""

    __slots__ = ("_conn", "_hooks")

    def __init__(self, hooks: SqlHooks, conn: Any) -> None:
        self._hooks = hooks
        self._conn = conn

    async def execute(self, statement: Statement) -> Result:
        return await self._hooks._query(self._conn, *self._hooks.dialect.render(statement))


def _row_id(row: Sequence[Any]) -> str:
    return str(row[0])


def _thread_key(thread: Thread) -> HistoryKey:
    return HistoryKey(thread.resource_id, thread.id)


class SqlHooks(StorageHooks):
    """The hooks on SQL, over a connection port and two policies that each backend implements.

    It is mixed with :class:`~workmem.storage.MemoryStorage` (a port that never
    suspends) or :class:`~workmem.aio.AsyncMemoryStorage` (an awaited port).
    """

    autocommit: ClassVar[bool] = True
    """A statement outside a transaction commits by itself. Oracle's does not: its writes run as transactions."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    @property
    def history(self) -> HistoryPolicy | None:
        """Whether this connection records history (``connect(url, history=...)``); see :class:`StorageHooks`."""
        return self._history_policy

    @history.setter
    def history(self, policy: HistoryPolicy | None) -> None:
        if policy is not None and not self.dialect.history_present:
            raise OperationNotSupportedError(
                f"working memory history: opened with create=False on a database without the {HISTORY_TABLE} "
                "table (connect once with create=True, or a role that may create it)"
            )
        self._history_policy = policy

    _history_policy: HistoryPolicy | None = None

    # -- the port: what each backend implements over its driver --------------------------

    @abstractmethod
    async def _checkout(self) -> Any:
        """A connection for this caller alone, until :meth:`_give`; the driver's error if none can be had."""

    @abstractmethod
    async def _give(self, conn: Any, failure: BaseException | None = None) -> None:
        """Give ``conn`` back, after ``failure`` (``None``: the work succeeded); never raises, never loses it."""

    @abstractmethod
    async def _query(self, conn: Any, sql: str, params: Any = None) -> Result:
        """Run one rendered statement on ``conn``; the driver's error as raised."""

    async def _begin(self, conn: Any) -> None:
        """Open a write transaction on ``conn``: :attr:`Dialect.begin_write` (empty: the database opens one itself)."""
        if self.dialect.begin_write:
            await self._query(conn, self.dialect.begin_write)

    async def _commit(self, conn: Any) -> None:
        await self._query(conn, "COMMIT")

    @abstractmethod
    async def _rollback(self, conn: Any, cause: BaseException) -> None:
        """Roll back the transaction open on ``conn`` after ``cause``; the driver's errors ignored."""

    def _writing(self) -> AbstractContextManager[object]:
        """Held around every write: nothing here; a lock where the backend needs one writer at a time."""
        return nullcontext()

    # -- the two policies ---------------------------------------------------------------

    @abstractmethod
    def _error(self, exc: Exception) -> WorkmemError | None:
        """The workmem error the driver's ``exc`` means, secrets masked; ``None``: not the driver's (raised as is)."""

    @abstractmethod
    def _again(self, exc: Exception, attempt: Attempt) -> float | None:
        """Seconds to wait before the work that failed with the driver's ``exc`` runs again; ``None``: it does not."""

    # -- connections, the attempt loop, transactions: written once ----------------------

    async def _take(self) -> Any:
        """A connection from :meth:`_checkout`; failing to get one is never retried (the reason comes back at once)."""
        try:
            return await self._checkout()
        except Exception as exc:
            error = self._error(exc)
            if error is None:
                raise
            raise_unchained(error)

    async def _attempts(
        self, work: Callable[[Any], Awaitable[T]], *, read: bool, transaction: bool = False, hold: bool = False
    ) -> T:
        """``await work(conn)`` on a pooled connection, in a transaction if ``transaction``; the only attempt loop.

        Work that failed with a driver error runs again, on a connection taken anew, when and as
        :meth:`_again` says; otherwise its error is raised as :meth:`_error` maps it. With
        ``hold``, the connection is not given back when the work succeeds: its value holds it.
        """
        attempt = Attempt(1, read, time.monotonic())
        while True:
            conn = await self._take()
            try:
                value = await (self._committed(conn, work) if transaction else work(conn))
            except BaseException as exc:
                delay = await self._failed(conn, exc, attempt)
            else:
                if not hold:
                    await self._give(conn, None)
                return value
            await self._pause(delay)
            attempt = attempt._replace(number=attempt.number + 1)

    async def _failed(self, conn: Any, exc: BaseException, attempt: Attempt | None) -> float:
        """Give ``conn`` back after ``exc``; the seconds before ``attempt`` runs again, else raise what ``exc`` means.

        With no ``attempt`` (a transaction's own block, which cannot run again) it always raises.
        """
        await self._give(conn, exc)
        error = self._error(exc) if isinstance(exc, Exception) else None
        if error is None or not isinstance(exc, Exception):
            raise exc
        delay = None if attempt is None else self._again(exc, attempt)
        if delay is None:
            del exc  # not a local of this frame in the error's traceback
            raise_unchained(error)
        return delay

    async def _committed(self, conn: Any, work: Callable[[Any], Awaitable[T]]) -> T:
        """``await work(conn)`` in a transaction on ``conn``: begun, then committed, or rolled back if it raises."""
        await self._begin(conn)
        try:
            value = await work(conn)
        except BaseException as exc:
            await self._rollback(conn, exc)
            raise
        await self._commit(conn)
        return value

    async def _begun(self, conn: Any) -> Any:
        await self._begin(conn)
        return conn

    async def _execute(self, statement: Statement, *, read: bool = False) -> Result:
        """Run one statement in its own transaction; a ``read`` may run again (:meth:`_again`)."""
        sql, params = self.dialect.render(statement)
        return await self._execute_sql(sql, params, read=read)

    async def _execute_sql(self, sql: str, params: Any, *, read: bool = False) -> Result:
        """:meth:`_execute` for a statement rendered already."""

        def work(conn: Any) -> Awaitable[Result]:
            return self._query(conn, sql, params)

        with nullcontext() if read else self._writing():
            return await self._attempts(work, read=read, transaction=not (read or self.autocommit))

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Transaction]:
        """A write transaction on a pooled connection, committed when the block ends (rolled back if it raises).

        Opening it (a connection, ``BEGIN``) may run again as a read would: nothing of it ran yet.
        """
        with self._writing():
            conn = await self._attempts(self._begun, read=True, hold=True)
            try:
                yield Transaction(self, conn)
                await self._commit(conn)
            except BaseException as exc:
                await self._rollback(conn, exc)
                await self._failed(conn, exc, None)
                raise  # not reached: _failed raised
            await self._give(conn, None)

    async def _read_key(self, read: KeyRead[R], key: str) -> R | None:
        """The record read by primary key, or ``None``; an adapter may run ``read.rendered`` directly (hot path)."""
        rows = (await self._execute(read.statement(key), read=True)).rows
        return read.record(rows[0]) if rows else None

    # -- resources -----------------------------------------------------------------

    async def _get_resource(self, resource_id: str) -> Resource | None:
        return await self._read_key(self.dialect.resource_by_id, resource_id)

    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        if record is None:
            await self._execute(self.dialect.upsert_resource(resource))
            return resource
        async with self._transaction() as tx:  # the stored memory, locked, decides whether this is a change
            old = await self._lock_resource(tx, resource.id, resource.updated_at)
            await tx.execute(self.dialect.upsert_resource(resource))
            if (None if old is None else old.working_memory) != resource.working_memory:
                key = HistoryKey(resource.id)
                await self._record_version(tx, record, key, resource.working_memory, record.at)
        return resource

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        limited = change.max_chars is not None and isinstance(change.working_memory, str)
        if self.dialect.native_shallow_merge and not limited:
            statement = self.dialect.update_resource(resource_id, change.working_memory, change.metadata, change.now)
            try:
                with _record("resource", resource_id):
                    rows = await self._write(statement, change.record, change.now, _resource_memory)
                    return resource_from_row(rows[0])
            except ExactCheckNeeded:
                pass  # near the size limit: decided below, under a row lock
        # A max_chars limit compares with the stored memory: decided here, on the locked row.
        async with self._transaction() as tx:
            old = await self._lock_resource(tx, resource_id, change.now)
            new = updated_resource(old, resource_id, change)
            await tx.execute(self.dialect.upsert_resource(new))
            await self._record_version(tx, change.record, HistoryKey(resource_id), new.working_memory, change.now)
        return new

    def _merged_resource(self, old: Resource | None, resource_id: str, text: str, now: datetime) -> Statement:
        """The write that stores a resource merge's result ``text`` over ``old`` (locked): the whole record here."""
        return self.dialect.upsert_resource(updated_resource(old, resource_id, ResourceChange(text, UNSET, now)))

    async def _lock_resource(self, tx: Transaction, resource_id: str, now: datetime) -> Resource | None:
        if self.dialect.row_locks:  # a missing row cannot be locked: create it first
            await tx.execute(self.dialect.insert_missing_resource(resource_id, now))
        rows = (await tx.execute(self.dialect.select_resource(resource_id, lock=True))).rows
        return resource_from_row(rows[0]) if rows else None

    # -- threads -------------------------------------------------------------------

    async def _get_thread(self, thread_id: str) -> Thread | None:
        return await self._read_key(self.dialect.thread_by_id, thread_id)

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        if record is None:
            if (await self._execute(self.dialect.create_thread(thread))).rowcount == 0:
                raise ThreadExistsError(thread.id)
            return thread
        async with self._transaction() as tx:
            if (await tx.execute(self.dialect.create_thread(thread))).rowcount == 0:
                raise ThreadExistsError(thread.id)
            memory = thread_working_memory(thread.metadata)
            await self._record_version(tx, record, _thread_key(thread), memory, record.at)
        return thread

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        if record is None:
            rows = (await self._execute(self.dialect.save_thread(thread, now))).rows
            if not rows:
                raise ThreadOwnershipError(thread.id, thread.resource_id)
            return thread_from_row(rows[0])
        async with self._transaction() as tx:  # the stored memory, locked, decides whether this is a change
            stored = (await tx.execute(self.dialect.select_thread(thread.id, lock=True))).rows
            old = thread_working_memory(thread_from_row(stored[0]).metadata) if stored else None
            rows = (await tx.execute(self.dialect.save_thread(thread, now))).rows
            if not rows:
                raise ThreadOwnershipError(thread.id, thread.resource_id)
            new = thread_from_row(rows[0])
            memory = thread_working_memory(new.metadata)
            if old != memory:  # none stored counts as None
                await self._record_version(tx, record, _thread_key(new), memory, now)
        return new

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        limited = change.max_chars is not None and memory_given(change.metadata) is not None
        if self.dialect.native_shallow_merge and not limited:
            statement = self.dialect.update_thread(thread_id, change.title, change.metadata, change.now, change.owner)
            try:
                with _record("thread", thread_id):
                    rows = await self._write(statement, change.record, change.now, _thread_memory)
            except ExactCheckNeeded:
                rows = None  # near the size limit: decided below, under a row lock
            if rows == []:
                await self._not_owned(thread_id, change.owner)
                raise ThreadNotFoundError(thread_id)
            if rows:
                return thread_from_row(rows[0])
        # A max_chars limit compares with the stored memory: decided here, on the locked row.
        async with self._transaction() as tx:
            new = updated_thread(await self._lock_thread(tx, thread_id), change)
            await tx.execute(self.dialect.write_thread(new))
            memory = thread_working_memory(new.metadata)
            await self._record_version(tx, change.record, HistoryKey(new.resource_id, thread_id), memory, change.now)
        return new

    async def _not_owned(self, thread_id: str, owner: str | None) -> None:
        """After a write conditioned on ``owner`` matched no row: raise when another resource owns the thread.

        Nothing was written, so reading afterwards only picks the error. A thread this read finds under
        ``owner`` itself was created after the write, which therefore saw no thread (not another owner's).
        """
        if owner is None:
            return
        rows = (await self._execute(self.dialect.select_thread(thread_id), read=True)).rows
        if rows and rows[0][1] != owner:  # column 1: "resourceId"
            raise ThreadOwnershipError(thread_id, owner)

    async def _lock_thread(self, tx: Transaction, thread_id: str) -> Thread:
        rows = (await tx.execute(self.dialect.select_thread(thread_id, lock=True))).rows
        if not rows:
            raise ThreadNotFoundError(thread_id)
        return thread_from_row(rows[0])

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        if self.dialect.history_present:  # its history goes with it (recorded here or not), in its transaction
            return await self._delete_thread_with_history(thread_id, owner)
        if (await self._execute(self.dialect.delete_thread(thread_id, owner))).rowcount > 0:
            return True
        await self._not_owned(thread_id, owner)
        return False

    async def _delete_thread_with_history(self, thread_id: str, owner: str | None) -> bool:
        async with self._transaction() as tx:
            rows = (await tx.execute(self.dialect.select_thread(thread_id, lock=True))).rows
            stored_owner = str(rows[0][1]) if rows else None  # column 1: "resourceId"
            if stored_owner is not None and owner in (None, stored_owner):
                await tx.execute(self.dialect.delete_thread(thread_id))
                await tx.execute(self.dialect.delete_versions(HistoryKey(stored_owner, thread_id)))
        if stored_owner is None:
            return False
        if owner not in (None, stored_owner):
            raise ThreadOwnershipError(thread_id, owner)
        return True

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        for _ in range(LIST_ATTEMPTS):
            rows = (await self._execute(self.dialect.list_threads(query), read=True)).rows
            if rows:  # the count came with the rows, from the same statement
                return query.read_page(rows, thread_from_row, int(rows[0][6]))
            if query.offset == 0:
                return query.read_page(rows, thread_from_row, 0)
            # Past the last page the count comes from a second statement: it fits the empty page only if the
            # page is still past the last one (else threads came meanwhile, and the page is read again).
            count = await self._execute(self.dialect.count_threads(query.resource_id), read=True)
            total = int(count.rows[0][0])
            if total <= query.offset:
                return query.read_page(rows, thread_from_row, total)
        raise BackendBusyError(
            f"threads of {query.resource_id!r} kept being created while a page past the last was read"
        )

    async def _replace_thread(self, thread: Thread) -> bool:
        return (await self._execute(self.dialect.replace_thread(thread))).rowcount > 0

    # -- every record: keyset pages and bulk inserts ------------------------------------

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        rows = (await self._execute(self.dialect.resource_page(after, limit), read=True)).rows
        return read_record_page(rows, resource_from_row, _row_id, limit)

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        rows = (await self._execute(self.dialect.thread_page(after, limit), read=True)).rows
        return read_record_page(rows, thread_from_row, _row_id, limit)

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        if not resources:
            return frozenset()
        inserted = {row[0] for row in (await self._execute(self.dialect.insert_resources(resources))).rows}
        return frozenset(r.id for r in resources if r.id not in inserted)

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        if not threads:
            return frozenset()
        inserted = {row[0] for row in (await self._execute(self.dialect.insert_threads(threads))).rows}
        return frozenset(t.id for t in threads if t.id not in inserted)

    # -- working memory ------------------------------------------------------------

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars, record = change.patch, change.now, change.max_chars, change.record
        # A max_chars limit is decided on the merged text as workmem writes it (dump_json), which no database's
        # own JSON output matches exactly (spacing, escapes, number formats, bytes): with a limit, the merge is
        # the locked read-modify-write below, done in Python; without one, the one statement where there is one.
        statement = None if max_chars is not None else self.dialect.merge_statement(target, patch, now)
        if statement is not None:
            recorded = functools.partial(_merged_memory, target)
            try:
                with _record(target.scope, target.thread_id or target.resource_id or ""):
                    rows = await self._write(statement, record, now, recorded)
            except ExactCheckNeeded:
                rows = None  # near the size limit: decided below, under a row lock
            if rows == []:
                # No row changed: no such thread, another owner, or stored working memory that is not text
                # (see Dialect.merge_statement); decided, and raised, below under a row lock.
                rows = None
            if rows:
                merged = load_json(rows[0][0])
                if not isinstance(merged, dict):
                    reason = "the merged working memory read back is not a JSON object"
                    raise UnreadableRecordError(target.scope, target.thread_id or target.resource_id or "", reason)
                return merged
        async with self._transaction() as tx:
            if target.scope == "resource":
                assert target.resource_id is not None
                old = await self._lock_resource(tx, target.resource_id, now)
                merged, text = merge_document(None if old is None else old.working_memory, patch, max_chars)
                await tx.execute(self._merged_resource(old, target.resource_id, text, now))
                await self._record_version(tx, record, HistoryKey(target.resource_id), text, now)
                return merged
            assert target.thread_id is not None
            thread = await self._lock_thread(tx, target.thread_id)
            check_owner(thread, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(thread.metadata), patch, max_chars)
            await tx.execute(self.dialect.write_thread(with_thread_memory(thread, text, now)))
            await self._record_version(tx, record, HistoryKey(thread.resource_id, thread.id), text, now)
            return merged

    # -- history and erasure: written once, for every SQL database -------------------------

    async def _write(
        self, statement: Statement, record: Recording | None, now: datetime, recorded: Recorded
    ) -> list[tuple[Any, ...]]:
        """The rows of one write statement; with ``record``, run in a transaction that records the version too.

        The statement locks the row it changes; the version is numbered and written after it, under that lock.
        Without ``record`` it is the one statement it always was (nothing slower without history).
        """
        if record is None:
            return (await self._execute(statement)).rows
        async with self._transaction() as tx:
            rows = (await tx.execute(statement)).rows
            if rows:
                key, content = recorded(rows[0])
                await self._record_version(tx, record, key, content, now)
        return rows

    async def _record_version(
        self, tx: Transaction, record: Recording | None, key: HistoryKey, content: str | None, now: datetime
    ) -> None:
        """Write the version ``record`` makes of ``key`` (none without one), in ``tx``, which holds the row's lock."""
        if record is not None:
            for statement in self.dialect.record_version(key, content, now, record):
                await tx.execute(statement)

    async def _history(self, key: HistoryKey, limit: int, before: int | None) -> list[MemoryVersion]:
        if not self.dialect.history_present:
            return []  # no table: nothing ever recorded here
        rows = (await self._execute(self.dialect.select_versions(key, limit, before), read=True)).rows
        return [version_from_row(key, row) for row in rows]

    async def _versioned_keys(self, after: HistoryKey | None, limit: int) -> list[HistoryKey] | None:
        if not self.dialect.history_present:
            return []
        rows = (await self._execute(self.dialect.select_versioned_keys(after, limit), read=True)).rows
        return [HistoryKey(resource, None if scope == "resource" else memory) for resource, scope, memory in rows]

    async def _insert_versions(self, versions: Sequence[MemoryVersion]) -> int:
        if not self.dialect.history_present:
            raise OperationNotSupportedError(f"working memory history (create=False, no {HISTORY_TABLE} table)")
        added = 0
        for batch in _version_batches(versions):
            added += (await self._execute(self.dialect.insert_versions(batch))).rowcount
        return added

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        """One transaction: lock the resource row and its threads' rows, delete them, then their versions.

        The resource row is locked first (created empty to be locked when missing, and deleted with the
        rest), so no resource-scope write falls inside the erase. A thread created while it runs is not
        among those locked: it survives whole, with its history (see :meth:`Dialect.delete_resource_versions`).
        """
        dialect = self.dialect
        async with self._transaction() as tx:
            existed = bool((await tx.execute(dialect.select_resource(resource_id, lock=True))).rows)
            if not existed and dialect.row_locks:
                now = utc_now()
                locked = await self._lock_resource(tx, resource_id, now)
                # Not the empty row it created to lock, but one another writer committed while it waited: there.
                existed = locked is not None and locked != Resource(resource_id, None, None, now, now)
            rows = (await tx.execute(dialect.lock_threads_of(resource_id))).rows
            threads = tuple(sorted(str(row[0]) for row in rows))
            for start in range(0, len(threads), ID_BATCH):
                await tx.execute(dialect.delete_threads_of(resource_id, threads[start : start + ID_BATCH]))
            await tx.execute(dialect.delete_resource_row(resource_id))
            versions = 0
            if dialect.history_present:
                versions = (await tx.execute(dialect.delete_resource_versions(resource_id))).rowcount
        return ErasedResource(resource_id, existed, threads, versions)


def _resource_memory(row: Sequence[Any]) -> tuple[HistoryKey, str | None]:
    """A resource row's (``update_resource``'s ``RETURNING``) history key and working memory."""
    return HistoryKey(str(row[0])), row[1]


def _thread_memory(row: Sequence[Any]) -> tuple[HistoryKey, str | None]:
    """A thread row's history key (its owner's) and thread-scoped working memory."""
    thread = thread_from_row(row)
    return HistoryKey(thread.resource_id, thread.id), thread_working_memory(thread.metadata)


def _merged_memory(target: ScopeTarget, row: Sequence[Any]) -> tuple[HistoryKey, str | None]:
    """What a one-statement merge returns: the merged text (column 0), and for a thread its owner (column 1)."""
    if target.scope == "resource":
        assert target.resource_id is not None
        return HistoryKey(target.resource_id), row[0]
    assert target.thread_id is not None
    return HistoryKey(str(row[1]), target.thread_id), row[0]


def _version_batches(versions: Sequence[MemoryVersion]) -> Iterator[Sequence[MemoryVersion]]:
    """``versions`` cut into runs of at most :data:`VERSION_BATCH`, and about :data:`VERSION_BATCH_CHARS` of text."""
    start = chars = 0
    for index, version in enumerate(versions):
        size = len(version.content or "")
        if index > start and (index - start == VERSION_BATCH or chars + size > VERSION_BATCH_CHARS):
            yield versions[start:index]
            start, chars = index, 0
        chars += size
    if start < len(versions):
        yield versions[start:]
