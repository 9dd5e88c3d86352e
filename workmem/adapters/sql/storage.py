"""``SqlStorage``: the storage contract on any SQL database, given a dialect and two I/O primitives.

An adapter supplies :meth:`SqlStorage._execute` (one statement in its own
transaction) and :meth:`SqlStorage._transaction` (a read-modify-write
transaction opened with :attr:`Dialect.begin_write`); everything else —
validation, statements, row mapping, the order of steps — is here, once.

Reads are one statement. Insert-only ``create_thread`` and owner-checked
``save_thread`` are one statement on every dialect. ``update_*`` and ``merge_working_memory`` are one statement
where the dialect can express them (:attr:`Dialect.native_shallow_merge`,
:meth:`Dialect.merge_statement`), otherwise a transaction that locks what it
reads (the row, or the whole database for SQLite) before computing the new
record with :mod:`workmem.changes`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from workmem.changes import merge_document, updated_resource, updated_thread, with_thread_memory
from workmem.errors import (
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    UnreadableRecordError,
    ValidationError,
    WorkmemError,
)
from workmem.records import UNSET, Direction, OrderBy, Resource, Scope, Thread, ThreadPage, Unset
from workmem.storage import (
    MemoryStorage,
    check_list_args,
    check_owner,
    check_resource_update,
    check_scope,
    check_thread_update,
    thread_working_memory_to_merge,
)
from workmem.timestamps import utc_now
from workmem.validation import validate_id, validate_json_object

from .dialect import Dialect, KeyRead, Statement
from .rows import load_json, resource_from_row, thread_from_row

__all__ = [
    "ExactCheckNeeded",
    "Result",
    "Session",
    "SqlStorage",
    "StoredMetadataUnreadable",
]


R = TypeVar("R")


class ExactCheckNeeded(WorkmemError):
    """Internal: a one-statement update stopped, nothing written, because only the exact check can decide.

    The database's cheap size measure over-estimates (PostgreSQL's jsonb text), or stored working
    memory may read differently in Python than in the database (an escape, an exponent, a repeated
    key, ...); :class:`SqlStorage` catches this and redoes the operation as a row-locked
    read-modify-write decided in Python, so every backend accepts and refuses the same input.
    """


class StoredMetadataUnreadable(WorkmemError):
    """Internal: a one-statement write stopped, nothing written, because the stored metadata is no JSON object.

    :class:`SqlStorage` raises it as :class:`UnreadableRecordError` naming the record, as a
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


class Session(Protocol):
    """An open transaction."""

    def execute(self, statement: Statement) -> Result: ...


class SqlStorage(MemoryStorage):
    """The contract's flow on SQL; subclasses connect, run statements and map driver errors."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    @abstractmethod
    def _execute(self, statement: Statement, *, read: bool = False) -> Result:
        """Run one statement in its own transaction; a ``read`` may be retried on a dropped connection."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Session]:
        """A transaction begun with ``dialect.begin_write``, committed on exit, rolled back on error."""

    def _read_key(self, read: KeyRead[R], key: str) -> R | None:
        """The record read by primary key, or ``None``; an adapter may run ``read.rendered`` directly (hot path)."""
        rows = self._execute(read.statement(key), read=True).rows
        return read.record(rows[0]) if rows else None

    # -- resources -----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        validate_id(resource_id, "resource id")
        return self._read_key(self.dialect.resource_by_id, resource_id)

    def save_resource(self, resource: Resource) -> Resource:
        if not isinstance(resource, Resource):
            raise ValidationError(f"expected a Resource, got {type(resource).__name__}")
        self._execute(self.dialect.upsert_resource(resource))
        return resource

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        validate_id(resource_id, "resource id")
        working_memory, new_metadata = check_resource_update(working_memory, metadata)
        now = utc_now()
        if self.dialect.native_shallow_merge:
            statement = self.dialect.update_resource(resource_id, working_memory, new_metadata, now)
            try:
                with _record("resource", resource_id):
                    return resource_from_row(self._execute(statement).rows[0])
            except ExactCheckNeeded:
                pass  # near the size limit: decided below, under a row lock
        with self._transaction() as tx:
            old = self._lock_resource(tx, resource_id, now)
            new = updated_resource(old, resource_id, working_memory, new_metadata, now)
            tx.execute(self.dialect.upsert_resource(new))
        return new

    def _lock_resource(self, tx: Session, resource_id: str, now: datetime) -> Resource | None:
        if self.dialect.row_locks:  # a missing row cannot be locked: create it first
            tx.execute(self.dialect.insert_missing_resource(resource_id, now))
        rows = tx.execute(self.dialect.select_resource(resource_id, lock=True)).rows
        return resource_from_row(rows[0]) if rows else None

    # -- threads -------------------------------------------------------------------

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        validate_id(thread_id, "thread id")
        if resource_id is not None:
            validate_id(resource_id, "resource id")
        thread = self._read_key(self.dialect.thread_by_id, thread_id)
        if thread is None or resource_id is None or thread.resource_id == resource_id:
            return thread
        return None

    def create_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        rows = self._execute(self.dialect.create_thread(thread)).rows
        if not rows:
            raise ThreadExistsError(thread.id)
        return thread_from_row(rows[0])

    def save_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        rows = self._execute(self.dialect.save_thread(thread, utc_now())).rows
        if not rows:
            raise ThreadOwnershipError(thread.id, thread.resource_id)
        return thread_from_row(rows[0])

    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Thread:
        validate_id(thread_id, "thread id")
        title, new_metadata = check_thread_update(title, metadata)
        now = utc_now()
        if self.dialect.native_shallow_merge:
            try:
                with _record("thread", thread_id):
                    rows = self._execute(self.dialect.update_thread(thread_id, title, new_metadata, now)).rows
            except ExactCheckNeeded:
                rows = None  # near the size limit: decided below, under a row lock
            if rows == []:
                raise ThreadNotFoundError(thread_id)
            if rows:
                return thread_from_row(rows[0])
        with self._transaction() as tx:
            new = updated_thread(self._lock_thread(tx, thread_id), title, new_metadata, now)
            tx.execute(self.dialect.write_thread(new))
        return new

    def _lock_thread(self, tx: Session, thread_id: str) -> Thread:
        rows = tx.execute(self.dialect.select_thread(thread_id, lock=True)).rows
        if not rows:
            raise ThreadNotFoundError(thread_id)
        return thread_from_row(rows[0])

    def delete_thread(self, thread_id: str) -> bool:
        validate_id(thread_id, "thread id")
        return self._execute(self.dialect.delete_thread(thread_id)).rowcount > 0

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        rows = self._execute(self.dialect.list_threads(query), read=True).rows
        if rows:
            total = int(rows[0][6])
        elif query.offset == 0:
            total = 0
        else:  # past the last page: the count did not come with a row
            total = int(self._execute(self.dialect.count_threads(query.resource_id), read=True).rows[0][0])
        return query.read_page(rows, thread_from_row, total)

    # -- working memory ------------------------------------------------------------

    def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
    ) -> dict[str, Any]:
        target = check_scope(scope, resource_id, thread_id)
        valid_patch = validate_json_object(patch, "patch")
        now = utc_now()
        statement = self.dialect.merge_statement(target, valid_patch, now)
        if statement is not None:
            try:
                with _record(target.scope, target.thread_id or target.resource_id or ""):
                    rows = self._execute(statement).rows
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
        with self._transaction() as tx:
            if target.scope == "resource":
                assert target.resource_id is not None
                old = self._lock_resource(tx, target.resource_id, now)
                merged, text = merge_document(None if old is None else old.working_memory, valid_patch)
                tx.execute(self.dialect.upsert_resource(updated_resource(old, target.resource_id, text, UNSET, now)))
                return merged
            assert target.thread_id is not None
            thread = self._lock_thread(tx, target.thread_id)
            check_owner(thread, target.resource_id)
            merged, text = merge_document(thread_working_memory_to_merge(thread.metadata), valid_patch)
            tx.execute(self.dialect.write_thread(with_thread_memory(thread, text, now)))
            return merged
