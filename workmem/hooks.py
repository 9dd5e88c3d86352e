"""The adapter contract: :class:`StorageHooks`, what an adapter implements, and what its hooks receive.

An adapter implements :class:`StorageHooks`: a few coroutines that receive
arguments already validated and typed (a :class:`ScopeTarget`, a
:class:`ListQuery`, the time of the write) and do only the I/O. The public
operations are written once over these hooks (:mod:`workmem.operations`);
:class:`~workmem.storage.MemoryStorage` and :class:`~workmem.aio.AsyncMemoryStorage`
are thin faces over them.

Every hook is a coroutine. The async API awaits it. The sync API drives the
operations with :func:`workmem._drive.run_sync`: a sync adapter's hooks call a
blocking driver and never suspend, so the whole operation runs to its end in a
single ``send`` without an event loop (and works from inside one). A hook that
must wait (a backoff in a compare-and-set loop) awaits :meth:`StorageHooks._pause`:
:func:`time.sleep` in a sync adapter, :func:`asyncio.sleep` in an async one.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from workmem.errors import OperationNotSupportedError, UnreadableRecordError
from workmem.history import ErasedResource, HistoryKey, HistoryPolicy, MemoryVersion, Recording
from workmem.records import Direction, OrderBy, RecordPage, Resource, Scope, Thread, ThreadPage
from workmem.validation import dump_json

if TYPE_CHECKING:  # workmem.changes imports this module (through workmem.arguments)
    from workmem.changes import MergeChange, ResourceChange, ThreadChange

__all__ = [
    "HOOK_NAMES",
    "OPTIONAL_HOOK_NAMES",
    "Capabilities",
    "CheckedPatch",
    "ForwardingHooks",
    "ListQuery",
    "ScopeTarget",
    "StorageHooks",
    "patch_text",
    "read_record_page",
]

T = TypeVar("T")
R = TypeVar("R", Resource, Thread)
X = TypeVar("X")


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
    history: bool = False
    """Working memory's history: the write hooks record a version when told to (a :class:`~workmem.history.Recording`),
    and :meth:`StorageHooks._history` / :meth:`StorageHooks._insert_versions` are implemented."""
    erase: bool = False
    """:meth:`StorageHooks._delete_resource` is implemented: a user and everything of theirs removed."""
    snapshot_listing: bool = True
    """``list_threads`` reads one instant: its page, ``total`` and ``has_more`` are of one state of the resource's
    threads. ``False`` where a listing gathers the threads in several steps (Upstash's ``listing="scan"``, as
    ``@mastra/upstash`` lists; MongoDB's full pages, counted by a second read): a thread that exists throughout
    the call is listed, but one created or deleted while it runs may be counted either way, so two such changes
    can give a page no single moment had. The ``linearizable`` check then leaves listings out of the history it
    checks; ``listing_under_churn`` holds every adapter to what such a listing still promises."""


@dataclass(frozen=True, slots=True)
class ListQuery:
    """Validated arguments of :meth:`MemoryStorage.list_threads`."""

    resource_id: str
    page: int
    per_page: int | None
    order_by: OrderBy
    direction: Direction

    @property
    def offset(self) -> int:
        return 0 if self.per_page is None else self.page * self.per_page

    def page_of(self, threads: list[Thread], total: int, unreadable: Sequence[str] = ()) -> ThreadPage:
        """Wrap one fetched page; ``unreadable`` are the ids of fetched threads that could not be read."""
        has_more = self.per_page is not None and self.offset + len(threads) + len(unreadable) < total
        return ThreadPage(tuple(threads), total, self.page, self.per_page, has_more, tuple(unreadable))

    def read_page(self, rows: Iterable[T], read: Callable[[T], Thread | None], total: int) -> ThreadPage:
        """The page of the fetched ``rows``: ``read`` maps each to its thread (``None`` leaves it out).

        A row ``read`` cannot read (:class:`~workmem.errors.UnreadableRecordError`)
        fails alone: its id goes to :attr:`ThreadPage.unreadable`.
        """
        threads: list[Thread] = []
        unreadable: list[str] = []
        for row in rows:
            try:
                thread = read(row)
            except UnreadableRecordError as exc:
                unreadable.append(exc.record_id)
                continue
            if thread is not None:
                threads.append(thread)
        return self.page_of(threads, total, unreadable)


@dataclass(frozen=True, slots=True)
class ScopeTarget:
    """Validated address of one working memory."""

    scope: Scope
    resource_id: str | None
    thread_id: str | None


class StorageHooks(ABC):
    """What an adapter implements: the I/O of each operation, on checked arguments.

    Every hook is a coroutine. In a sync adapter it calls the blocking driver
    and never suspends (see :func:`workmem._drive.run_sync`); in an async adapter it awaits
    the async driver. What must be atomic is atomic in the database, as each
    hook says. Hooks may assume their arguments are valid: ids are checked
    strings, metadata and patches are validated JSON objects, ``now`` is the
    normalized time of the call. A record a hook returns goes to the caller as
    it is, and a record a hook is given is the caller's: a hook shares no dict
    with what the adapter keeps (see :func:`workmem.records.private_copy`).
    """

    capabilities: ClassVar[Capabilities]
    """What this adapter guarantees beyond the required contract."""
    history: HistoryPolicy | None = None
    """Whether this connection records working memory's history, and how much (``connect(url, history=...)``).

    An adapter whose history depends on the server it reached may make this a property whose setter raises
    :class:`~workmem.errors.OperationNotSupportedError` (MongoDB without multi-document transactions):
    ``connect`` then closes the storage and raises that error."""

    @abstractmethod
    async def _get_resource(self, resource_id: str) -> Resource | None:
        """The stored resource, or ``None``."""

    @abstractmethod
    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        """Create ``resource`` or replace it whole, timestamps as given; return what is stored.

        With ``record`` (history on), a working memory that differs from the stored one (none stored
        counts as ``None``) is recorded as a version in the same atomic step; an unchanged one is not.
        """

    @abstractmethod
    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        """:func:`workmem.changes.updated_resource` applied to the stored resource (or none), atomically.

        With ``change.max_chars`` (and a working memory given), the size limit is decided on the
        stored working memory in the same atomic step (``updated_resource(old, resource_id, change)``
        under the lock, or in the compare-and-set), never on an earlier read.
        """

    @abstractmethod
    async def _get_thread(self, thread_id: str) -> Thread | None:
        """The stored thread, whoever owns it, or ``None``."""

    @abstractmethod
    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        """Insert ``thread``; :class:`~workmem.errors.ThreadExistsError` when the id exists. One atomic step.

        With ``record`` (history on, and a ``workingMemory`` string in the metadata), that working
        memory is recorded as the thread's version 1 in the same atomic step.
        """

    @abstractmethod
    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        """Insert ``thread``, or :func:`workmem.changes.replaced_thread` of the stored one, atomically.

        With ``record`` (history on), a working memory (:func:`~workmem.arguments.thread_working_memory`)
        that differs from the stored thread's (none stored counts as ``None``) is recorded as a version in
        the same atomic step; an unchanged one is not.
        """

    @abstractmethod
    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        """:func:`workmem.changes.updated_thread` applied to the stored thread, atomically.

        :class:`~workmem.errors.ThreadNotFoundError` when there is none. With a
        ``change.owner``, the write is conditioned on it in the same atomic step: a thread
        that another resource owns at that moment raises
        :class:`~workmem.errors.ThreadOwnershipError` and is left as it is (checking
        first and writing by id after would let a thread deleted and re-created under
        another owner in between take the write). With ``change.max_chars`` (and a
        ``workingMemory`` string in ``change.metadata``), the size limit is decided in that
        same step too (``updated_thread(old, change)``).
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
    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        """:func:`workmem.changes.merge_document` on the stored working memory of ``target``, atomically.

        ``change`` is a :class:`~workmem.changes.MergeChange`: the checked ``patch``, the time ``now``,
        ``max_chars`` and ``record``. With ``record`` (history on: only an adapter declaring
        ``capabilities.history`` is given one), the merged text is recorded as a version in the same
        atomic step (:class:`~workmem.history.Recording`).

        In thread scope: :class:`~workmem.errors.ThreadNotFoundError` without the
        thread, :func:`~workmem.kit.check_owner` with ``target.resource_id``,
        and :func:`~workmem.kit.thread_working_memory_to_merge` for what it starts from.
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

    # -- history and erasure: optional (``capabilities.history`` / ``capabilities.erase``) ---------------------------
    # A write hook given a Recording (``change.record``, the ``record`` argument of the merge) writes the version in
    # the same atomic step as the change. ``_delete_thread`` of an adapter with history removes the thread's versions
    # in its atomic step too.

    async def _history(self, key: HistoryKey, limit: int, before: int | None) -> list[MemoryVersion]:
        """``key``'s versions numbered below ``before`` (``None``: all), newest first, at most ``limit``."""
        raise OperationNotSupportedError("working memory history")

    async def _versioned_keys(self, after: HistoryKey | None, limit: int) -> list[HistoryKey] | None:
        """At most ``limit`` keys of the working memories that have versions, in this store's order, after ``after``.

        ``None`` (the default): the store cannot list them, and a copy or an export asks every record's
        history instead (:func:`workmem.transfer.versions.history_keys`). The order is the store's own,
        any total order on the keys that ``after`` continues.
        """
        return None

    async def _insert_versions(self, versions: Sequence[MemoryVersion]) -> int:
        """Store ``versions`` as given (an import), each one absent (same key and number) only; how many were new.

        Versions of one key come oldest first; a version kept beside a newer one stays ordered by its number.
        """
        raise OperationNotSupportedError("working memory history")

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        """Remove the resource, every thread it owns, and every version of both scopes; what was removed.

        Idempotent. Atomic where the database allows (one transaction, one script); otherwise re-runnable to
        completion, and a thread of this resource created while it runs is removed too or outlives it whole.
        """
        raise OperationNotSupportedError("delete_resource")

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff): blocking here; an async adapter overrides it with ``asyncio.sleep``."""
        time.sleep(seconds)


class CheckedPatch(dict[str, Any]):
    """A merge patch as :meth:`StorageHooks._merge_working_memory` receives it: checked, with its JSON text.

    A plain ``dict`` (a JSON object within the input rules, the caller's own copy) that
    carries :attr:`text`, its compact JSON as workmem writes it: serialized once at the
    door, so a hook that sends the patch to its database as JSON sends that text
    (:func:`patch_text`) instead of writing it again.
    """

    __slots__ = ("text",)

    def __init__(self, patch: dict[str, Any], text: str) -> None:
        super().__init__(patch)
        self.text = text
        """The patch as compact JSON (:func:`workmem.validation.dump_json`)."""


def patch_text(patch: dict[str, Any]) -> str:
    """The compact JSON text of a merge hook's ``patch``: the door's own (:class:`CheckedPatch`), else written now."""
    return patch.text if isinstance(patch, CheckedPatch) else dump_json(patch)


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


HOOK_NAMES: tuple[str, ...] = tuple(sorted(StorageHooks.__abstractmethods__))
"""Every hook an adapter implements (the abstract methods of :class:`StorageHooks`), by name."""
OPTIONAL_HOOK_NAMES: tuple[str, ...] = ("_delete_resource", "_history", "_insert_versions", "_versioned_keys")
"""The hooks of the optional capabilities (``history``, ``erase``), by name."""


def _forwarder(name: str) -> Callable[..., Any]:
    async def hook(self: ForwardingHooks, *args: Any, **kwargs: Any) -> Any:
        return await self._forward(name, args, kwargs)

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = f"``{name}`` of the storage behind this one (see :meth:`ForwardingHooks._forward`)."
    return hook


class ForwardingHooks(StorageHooks):
    """Hooks that each hand their call to :meth:`_forward`: a storage in front of another one.

    For a storage that adds only how a call reaches another storage's hooks (a
    worker thread, an event loop on another thread), so that the sixteen hook
    signatures are not written out again to forward them.
    """

    @abstractmethod
    async def _forward(self, hook: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The result of the hook named ``hook`` of the storage behind this one, called with ``args``/``kwargs``."""

    _get_resource = _forwarder("_get_resource")
    _save_resource = _forwarder("_save_resource")
    _update_resource = _forwarder("_update_resource")
    _get_thread = _forwarder("_get_thread")
    _create_thread = _forwarder("_create_thread")
    _save_thread = _forwarder("_save_thread")
    _update_thread = _forwarder("_update_thread")
    _delete_thread = _forwarder("_delete_thread")
    _list_threads = _forwarder("_list_threads")
    _merge_working_memory = _forwarder("_merge_working_memory")
    _resource_page = _forwarder("_resource_page")
    _thread_page = _forwarder("_thread_page")
    _insert_resources = _forwarder("_insert_resources")
    _insert_threads = _forwarder("_insert_threads")
    _replace_thread = _forwarder("_replace_thread")
    _history = _forwarder("_history")
    _insert_versions = _forwarder("_insert_versions")
    _versioned_keys = _forwarder("_versioned_keys")
    _delete_resource = _forwarder("_delete_resource")
    _close = _forwarder("_close")
