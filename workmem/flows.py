"""Each storage operation once: checked at the door, the time stamped, then the adapter's narrow hooks.

An adapter implements :class:`StorageHooks`: a few coroutines that receive
arguments already validated and typed (a :class:`~workmem.checks.ScopeTarget`,
a :class:`~workmem.checks.ListQuery`, the time of the write) and do only the
I/O. The functions below are the contract's public operations written once, on
top of those hooks; :class:`~workmem.storage.MemoryStorage` and
:class:`~workmem.aio.AsyncMemoryStorage` are thin faces over them.

The flows are coroutines. The async API awaits them. The sync API drives them
with :func:`run_sync`: a sync adapter's hooks call a blocking driver and never
suspend, so the whole operation runs to its end in a single ``send`` without an
event loop (and works from inside one). A hook that must wait (a backoff in a
compare-and-set loop) awaits :meth:`StorageHooks._pause`: :func:`time.sleep` in a
sync adapter, :func:`asyncio.sleep` in an async one.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any, ClassVar, TypeVar

from workmem.checks import (
    ListQuery,
    ScopeTarget,
    check_list_args,
    check_owner,
    check_record,
    check_resource_update,
    check_scope,
    check_thread_update,
    thread_working_memory,
)
from workmem.errors import UnreadableRecordError, ValidationError
from workmem.limits import check_max_chars
from workmem.records import (
    UNSET,
    WORKING_MEMORY_KEY,
    Direction,
    OrderBy,
    RecordPage,
    Resource,
    Scope,
    Thread,
    ThreadPage,
    Unset,
)
from workmem.timestamps import utc_now
from workmem.validation import validate_id, validate_json_object, validate_text

__all__ = [
    "BULK_BATCH",
    "MAX_PAGE_SIZE",
    "Capabilities",
    "StorageHooks",
    "check_page_size",
    "create_thread",
    "delete_thread",
    "get_resource",
    "get_thread",
    "get_working_memory",
    "insert_resources",
    "insert_threads",
    "iter_resources",
    "iter_threads",
    "iterate_sync",
    "list_threads",
    "merge_working_memory",
    "read_record_page",
    "replace_thread",
    "resource_page",
    "run_sync",
    "save_resource",
    "save_thread",
    "set_working_memory",
    "thread_page",
    "update_resource",
    "update_thread",
]

T = TypeVar("T")
R = TypeVar("R", Resource, Thread)
X = TypeVar("X")

MAX_PAGE_SIZE = 10_000
"""The largest ``page_size`` / ``limit`` of the iteration methods."""
BULK_BATCH = 500
"""How many records :func:`insert_resources` / :func:`insert_threads` hand an adapter's hook at once."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an adapter guarantees beyond the required contract (the conformance suite requires or skips by it)."""

    cross_process_atomic: bool
    """Owner checks and merges stay atomic between separate processes (not only threads of one)."""
    persistent: bool
    """Data outlives the process that wrote it."""
    unsupported: frozenset[str] = frozenset()
    """Hooks (without their ``_``: ``"create_thread"``, ``"resource_page"``) the store has no way to do; calling one
    raises :class:`~workmem.errors.OperationNotSupportedError` (a store of another program, run over the wire)."""


class SuspendedInSyncFlow(RuntimeError):
    """A sync storage's hook awaited something that suspends: it must call a blocking driver instead."""


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end now, in this thread, without an event loop.

    It must never suspend: the hooks of a sync adapter call their blocking
    driver directly. One that does suspend is closed and
    :class:`SuspendedInSyncFlow` raised (a bug in the adapter, never in data).
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise SuspendedInSyncFlow(
        f"{getattr(coroutine, '__qualname__', coroutine)!s} suspended: a sync storage's hooks must not await "
        "anything that waits (use the blocking driver; async drivers belong to an AsyncMemoryStorage)"
    )


class StorageHooks(ABC):
    """What an adapter implements: the I/O of each operation, on checked arguments.

    Every hook is a coroutine. In a sync adapter it calls the blocking driver
    and never suspends (see :func:`run_sync`); in an async adapter it awaits
    the async driver. What must be atomic is atomic in the database, as each
    hook says. Hooks may assume their arguments are valid: ids are checked
    strings, metadata and patches are validated JSON objects, ``now`` is the
    normalized time of the call. A record a hook returns goes to the caller as
    it is, and a record a hook is given is the caller's: a hook shares no dict
    with what the adapter keeps (see :func:`workmem.records.private_copy`).
    """

    capabilities: ClassVar[Capabilities]
    """What this adapter guarantees beyond the required contract."""

    @abstractmethod
    async def _get_resource(self, resource_id: str) -> Resource | None:
        """The stored resource, or ``None``."""

    @abstractmethod
    async def _save_resource(self, resource: Resource) -> Resource:
        """Create ``resource`` or replace it whole, timestamps as given; return what is stored."""

    @abstractmethod
    async def _update_resource(
        self,
        resource_id: str,
        working_memory: str | Unset | None,
        metadata: dict[str, Any] | Unset | None,
        now: datetime,
        *,
        max_chars: int | None = None,
    ) -> Resource:
        """:func:`workmem.changes.updated_resource` applied to the stored resource (or none), atomically.

        With ``max_chars`` (and a working memory given), the size limit is decided on the
        stored working memory in the same atomic step (``updated_resource(..., max_chars)``
        under the lock, or in the compare-and-set), never on an earlier read.
        """

    @abstractmethod
    async def _get_thread(self, thread_id: str) -> Thread | None:
        """The stored thread, whoever owns it, or ``None``."""

    @abstractmethod
    async def _create_thread(self, thread: Thread) -> Thread:
        """Insert ``thread``; :class:`~workmem.errors.ThreadExistsError` when the id exists. One atomic step."""

    @abstractmethod
    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        """Insert ``thread``, or :func:`workmem.changes.replaced_thread` of the stored one, atomically."""

    @abstractmethod
    async def _update_thread(
        self,
        thread_id: str,
        title: str | Unset,
        metadata: dict[str, Any] | Unset | None,
        now: datetime,
        *,
        owner: str | None,
        max_chars: int | None = None,
    ) -> Thread:
        """:func:`workmem.changes.updated_thread` applied to the stored thread, atomically.

        :class:`~workmem.errors.ThreadNotFoundError` when there is none. With an
        ``owner``, the write is conditioned on it in the same atomic step: a thread
        that another resource owns at that moment raises
        :class:`~workmem.errors.ThreadOwnershipError` and is left as it is (checking
        first and writing by id after would let a thread deleted and re-created under
        another owner in between take the write). With ``max_chars`` (and a
        ``workingMemory`` string in ``metadata``), the size limit is decided in that
        same step too (``updated_thread(..., max_chars=...)``).
        """

    @abstractmethod
    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        """Delete the thread and its working memory; whether it existed.

        With an ``owner``, only that resource's thread is deleted, in one atomic step;
        another resource's raises :class:`~workmem.errors.ThreadOwnershipError`.
        """

    @abstractmethod
    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        """The page ``query`` asks for (see :meth:`ListQuery.read_page`)."""

    @abstractmethod
    async def _merge_working_memory(
        self, target: ScopeTarget, patch: dict[str, Any], now: datetime, *, max_chars: int | None = None
    ) -> dict[str, Any]:
        """:func:`workmem.changes.merge_document` on the stored working memory of ``target``, atomically.

        In thread scope: :class:`~workmem.errors.ThreadNotFoundError` without the
        thread, :func:`~workmem.checks.check_owner` with ``target.resource_id``,
        and :func:`~workmem.checks.thread_working_memory_to_merge` for what it starts from.
        With ``max_chars``, the size limit is decided on the merged result in the same
        atomic step (``merge_document(stored, patch, max_chars)``): the merged document
        as workmem writes it, against the stored one written the same way
        (:mod:`workmem.limits`). A database that cannot count exactly that text (its
        own JSON serializer spaces, escapes or formats numbers differently) takes the
        row lock or compare-and-set path with the merge done in Python.
        """

    @abstractmethod
    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        """Resources with ``id > after`` (``None``: from the first), ascending by id, at most ``limit``.

        Ids compare by code point (the byte order of their UTF-8: ``COLLATE "C"``, ``BINARY``), on
        every backend. Keyset pagination (``WHERE id > :after ORDER BY id LIMIT :limit``), never an
        offset, so a record present throughout an iteration is returned exactly once. See
        :func:`read_record_page` for building the page from fetched rows.
        """

    @abstractmethod
    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        """Threads of every owner with ``id > after``, as :meth:`_resource_page`."""

    @abstractmethod
    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        """Insert each resource that is absent, every field as given; return the ids that were already present.

        A present resource is left unchanged. Each record's insert-if-absent is atomic in the database;
        the batch uses the backend's bulk path. The ids of ``resources`` are distinct.
        """

    @abstractmethod
    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        """Insert each thread that is absent, every field as given; return the ids that were already present.

        A present thread is left unchanged, whoever owns it: a bulk write never moves a thread. Each
        insert-if-absent is atomic in the database; the batch uses the bulk path. Ids are distinct.
        """

    @abstractmethod
    async def _replace_thread(self, thread: Thread) -> bool:
        """Replace title, metadata and both timestamps (as given) of the thread with this id AND this owner.

        One atomic step (``UPDATE … WHERE id = ? AND "resourceId" = ?``); ``False``, nothing changed,
        when there is no such thread or another resource owns it.
        """

    @abstractmethod
    async def _close(self) -> None:
        """Release connections; idempotent."""

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff): blocking here; an async adapter overrides it with ``asyncio.sleep``."""
        time.sleep(seconds)


# -- the operations ----------------------------------------------------------------------


async def get_resource(hooks: StorageHooks, resource_id: str) -> Resource | None:
    return await hooks._get_resource(validate_id(resource_id, "resource id"))


async def save_resource(hooks: StorageHooks, resource: Resource) -> Resource:
    return await hooks._save_resource(check_record(resource, Resource))


async def update_resource(
    hooks: StorageHooks,
    resource_id: str,
    working_memory: str | Unset | None,
    metadata: Mapping[str, Any] | Unset | None,
    max_chars: int | None = None,
) -> Resource:
    validate_id(resource_id, "resource id")
    checked_memory, checked_metadata = check_resource_update(working_memory, metadata)
    limit = check_max_chars(max_chars)
    return await hooks._update_resource(resource_id, checked_memory, checked_metadata, utc_now(), max_chars=limit)


async def get_thread(hooks: StorageHooks, thread_id: str, resource_id: str | None) -> Thread | None:
    validate_id(thread_id, "thread id")
    if resource_id is not None:
        validate_id(resource_id, "resource id")
    thread = await hooks._get_thread(thread_id)
    if thread is None or resource_id is None or thread.resource_id == resource_id:
        return thread
    return None


async def create_thread(hooks: StorageHooks, thread: Thread) -> Thread:
    return await hooks._create_thread(check_record(thread, Thread))


async def save_thread(hooks: StorageHooks, thread: Thread) -> Thread:
    return await hooks._save_thread(check_record(thread, Thread), utc_now())


async def update_thread(
    hooks: StorageHooks,
    thread_id: str,
    title: str | Unset,
    metadata: Mapping[str, Any] | Unset | None,
    resource_id: str | None = None,
    max_chars: int | None = None,
) -> Thread:
    validate_id(thread_id, "thread id")
    owner = None if resource_id is None else validate_id(resource_id, "resource id")
    checked_title, checked_metadata = check_thread_update(title, metadata)
    limit = check_max_chars(max_chars)
    return await hooks._update_thread(
        thread_id, checked_title, checked_metadata, utc_now(), owner=owner, max_chars=limit
    )


async def delete_thread(hooks: StorageHooks, thread_id: str, resource_id: str | None = None) -> bool:
    validate_id(thread_id, "thread id")
    owner = None if resource_id is None else validate_id(resource_id, "resource id")
    return await hooks._delete_thread(thread_id, owner=owner)


async def list_threads(
    hooks: StorageHooks,
    resource_id: str,
    page: int,
    per_page: int | None,
    order_by: OrderBy,
    direction: Direction,
) -> ThreadPage:
    return await hooks._list_threads(check_list_args(resource_id, page, per_page, order_by, direction))


async def get_working_memory(
    hooks: StorageHooks, scope: Scope, resource_id: str | None, thread_id: str | None
) -> str | None:
    target = check_scope(scope, resource_id, thread_id)
    if target.scope == "resource":
        assert target.resource_id is not None
        resource = await hooks._get_resource(target.resource_id)
        return None if resource is None else resource.working_memory
    assert target.thread_id is not None
    thread = await hooks._get_thread(target.thread_id)
    if thread is None:
        return None
    check_owner(thread, target.resource_id)
    return thread_working_memory(thread.metadata)


async def set_working_memory(
    hooks: StorageHooks,
    content: str,
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
    max_chars: int | None = None,
) -> None:
    target = check_scope(scope, resource_id, thread_id)
    validate_text(content)
    limit = check_max_chars(max_chars)
    if target.scope == "resource":
        assert target.resource_id is not None
        await hooks._update_resource(target.resource_id, content, UNSET, utc_now(), max_chars=limit)
        return
    assert target.thread_id is not None
    _, metadata = check_thread_update(UNSET, {WORKING_MEMORY_KEY: content})
    # The owner (and the size limit) are checked by the write itself: the thread may be deleted and its id
    # re-created under another resource, or its memory rewritten, between any read and the write.
    await hooks._update_thread(target.thread_id, UNSET, metadata, utc_now(), owner=target.resource_id, max_chars=limit)


async def merge_working_memory(
    hooks: StorageHooks,
    patch: Mapping[str, Any],
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
    max_chars: int | None = None,
) -> dict[str, Any]:
    target = check_scope(scope, resource_id, thread_id)
    checked = validate_json_object(patch, "patch")
    return await hooks._merge_working_memory(target, checked, utc_now(), max_chars=check_max_chars(max_chars))


# -- iteration and bulk writes -----------------------------------------------------------


def check_page_size(value: object, what: str = "page_size") -> int:
    """``value`` when it is an ``int`` from 1 to :data:`MAX_PAGE_SIZE`; :class:`ValidationError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what} must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_PAGE_SIZE:
        raise ValidationError(f"{what} must be from 1 to {MAX_PAGE_SIZE}, not {value}")
    return value


def _check_after(after: object) -> str | None:
    if after is not None and not isinstance(after, str):
        raise ValidationError(f"after must be a str (a page's next_after) or None, not {type(after).__name__}")
    return after


def read_record_page(rows: Sequence[X], read: Callable[[X], R], key: Callable[[X], str], limit: int) -> RecordPage[R]:
    """The :class:`RecordPage` of ``rows`` fetched in id order (at most ``limit``) for an adapter's page hook.

    ``read`` maps a row to its record; a row it cannot read (:class:`UnreadableRecordError`) fails
    alone, its id (``key(row)``) going to :attr:`RecordPage.unreadable`. A full page names its last id
    as :attr:`RecordPage.next_after`; a shorter one is the last (``None``).
    """
    records: list[R] = []
    unreadable: list[str] = []
    for row in rows:
        try:
            records.append(read(row))
        except UnreadableRecordError:
            unreadable.append(key(row))
    next_after = key(rows[-1]) if rows and len(rows) >= limit else None
    return RecordPage(tuple(records), tuple(unreadable), next_after)


async def resource_page(hooks: StorageHooks, after: str | None, limit: int) -> RecordPage[Resource]:
    return await hooks._resource_page(_check_after(after), check_page_size(limit, "limit"))


async def thread_page(hooks: StorageHooks, after: str | None, limit: int) -> RecordPage[Thread]:
    return await hooks._thread_page(_check_after(after), check_page_size(limit, "limit"))


async def _records(
    page: Callable[[str | None, int], Coroutine[Any, Any, RecordPage[R]]], page_size: int
) -> AsyncIterator[R]:
    after: str | None = None
    while True:
        current = await page(after, page_size)
        for record in current.records:
            yield record
        if current.next_after is None:
            return
        after = current.next_after


def iter_resources(hooks: StorageHooks, page_size: int) -> AsyncIterator[Resource]:
    """Every readable resource once, ascending by id, ``page_size`` per read (checked now, not on first use)."""
    return _records(hooks._resource_page, check_page_size(page_size))


def iter_threads(hooks: StorageHooks, page_size: int) -> AsyncIterator[Thread]:
    """Every readable thread once, ascending by id (see :func:`iter_resources`)."""
    return _records(hooks._thread_page, check_page_size(page_size))


async def _next(iterator: AsyncIterator[T]) -> T:
    return await anext(iterator)


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    """A sync storage's async iterator as a plain iterator: each step run with :func:`run_sync`."""
    try:
        while True:
            try:
                item = run_sync(_next(iterator))
            except StopAsyncIteration:
                return
            yield item
    finally:
        run_sync(iterator.aclose())  # type: ignore[attr-defined]


async def _insert(
    records: Iterable[object], kind: type[R], insert: Callable[[Sequence[R]], Coroutine[Any, Any, frozenset[str]]]
) -> frozenset[str]:
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
        raise ValidationError(f"expected an iterable of {kind.__name__} records, got {type(records).__name__}")
    present: set[str] = set()
    items = iter(records)
    while batch := list(islice(items, BULK_BATCH)):
        distinct: dict[str, R] = {}
        for record in batch:
            checked = check_record(record, kind)
            if checked.id in distinct:  # the first of the call is inserted (or present); a repeat finds it there
                present.add(checked.id)
            else:
                distinct[checked.id] = checked
        present |= await insert(list(distinct.values()))
    return frozenset(present)


async def insert_resources(hooks: StorageHooks, resources: Iterable[Resource]) -> frozenset[str]:
    """Insert the absent resources as given, in batches of :data:`BULK_BATCH`; the ids already present."""
    return await _insert(resources, Resource, hooks._insert_resources)


async def insert_threads(hooks: StorageHooks, threads: Iterable[Thread]) -> frozenset[str]:
    """Insert the absent threads as given, in batches; the ids already present (never moved to another owner)."""
    return await _insert(threads, Thread, hooks._insert_threads)


async def replace_thread(hooks: StorageHooks, thread: Thread) -> bool:
    return await hooks._replace_thread(check_record(thread, Thread))
