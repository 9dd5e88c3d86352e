"""The storage contract, sync: :class:`MemoryStorage`.

The semantics here are normative; ``workmem.conformance`` checks them against
any adapter. The public methods are concrete: each checks its arguments at the
door and runs the operation written once (:mod:`workmem.operations`) on the adapter's
narrow hooks (:class:`~workmem.hooks.StorageHooks`). Methods that must be atomic
say so: an adapter makes them atomic in its database (one statement, a row
lock, a script, a conditional update), never with a lock held only in Python.
:class:`workmem.aio.AsyncMemoryStorage` is the same contract as coroutines.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self

from workmem import arguments, hooks, operations
from workmem._drive import iterate_sync, run_sync
from workmem.history import ErasedResource, HistoryPage
from workmem.records import UNSET, Direction, OrderBy, RecordPage, Resource, Scope, Thread, ThreadPage, Unset

__all__ = ["MemoryStorage"]

_HOOKS_NAMES = ("Capabilities", "ListQuery", "ScopeTarget", "StorageHooks")


def __getattr__(name: str) -> Any:
    """A name this module re-exported before, with a :class:`DeprecationWarning` (an adapter imports it from kit)."""
    home = "workmem.hooks" if name in _HOOKS_NAMES else "workmem.arguments" if name in arguments.__all__ else None
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from workmem import kit  # here: kit imports this module

    where = f"workmem.kit (or {home})" if name in kit.__all__ else home
    warnings.warn(f"workmem.storage.{name} moved: import it from {where}", DeprecationWarning, stacklevel=2)
    return getattr(hooks if home == "workmem.hooks" else arguments, name)


def renamed(old: str, new: str) -> Callable[..., Any]:
    """A method ``old`` that warns (:class:`DeprecationWarning`) and calls the method ``new`` of the same object."""

    def alias(self: Any, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"{old}() is renamed {new}()", DeprecationWarning, stacklevel=2)
        return getattr(self, new)(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated: the former name of :meth:`{new}`."
    return alias


class MemoryStorage(hooks.StorageHooks):
    """Durable resources, threads and working memory on one backend (the sync API).

    Instances are thread-safe and usable as context managers (``close()`` on exit).
    Every method validates its input before it writes anything and raises
    :class:`~workmem.errors.ValidationError` on bad input. Reads change nothing
    (``updated_at`` included), and neither does a refused call (a
    ``ValidationError``, ``WorkingMemoryFormatError``, ``ThreadOwnershipError``
    or ``ThreadExistsError``).

    Records returned are the caller's own: a :class:`~workmem.records.Resource`
    or :class:`~workmem.records.Thread` a method returns (in a page too), and the
    document :meth:`merge_working_memory` returns, are private copies that the
    caller may change freely (their metadata is a plain ``dict``, nested values
    included); nothing done to them reaches storage or what any other call
    returns. Nor does anything done, after the call, to a record, metadata
    mapping or patch passed in: the storage keeps no reference to it. (An adapter
    that keeps Python objects copies them on the way in and out with
    :func:`workmem.records.private_copy`.)

    JSON numbers keep their kind: an ``int`` written (in metadata or a merged
    document) reads back as an ``int`` on every backend, never as ``1.0``; a
    ``float`` reads back as an equal number, and one with an integral value
    (``2.0``) may read back as the ``int`` ``2`` (JavaScript readers, Mastra
    among them, cannot tell the two apart).

    An adapter maps its driver's failures onto :mod:`workmem.errors`, the driver's
    exception as ``__cause__``: :class:`~workmem.errors.BackendUnavailableError`
    (not reached, connection lost, shutting down) and
    :class:`~workmem.errors.BackendBusyError` (contention; nothing changed) are
    worth retrying (:data:`~workmem.errors.RETRYABLE_ERRORS`);
    :class:`~workmem.errors.BackendRefusedError` is a database that was reached
    and refused; :class:`~workmem.errors.StorageClosedError` is a call after
    :meth:`close`. It raises no bare ``WorkmemError``, ``ValueError`` or ``TypeError``.

    An adapter subclasses this and implements :meth:`from_url` and the hooks of
    :class:`~workmem.hooks.StorageHooks` with its blocking driver; it names its
    native async twin in :attr:`async_adapter`, or ``workmem.connect_async``
    runs it on worker threads.
    """

    async_adapter: ClassVar[str | None] = None
    """``"module:Class"`` of this adapter's :class:`~workmem.aio.AsyncMemoryStorage` twin, or ``None``.

    ``None``: :func:`workmem.connect_async` runs this sync adapter on worker
    threads (:class:`~workmem.aio.ThreadedAsyncStorage`).
    """

    @classmethod
    @abstractmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """Open the backend named by ``url``, creating missing tables and indexes (used by ``connect``)."""

    # -- resources -----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        """The resource, or ``None`` when there is none."""
        return run_sync(operations.get_resource(self, resource_id))

    def save_resource(self, resource: Resource) -> Resource:
        """Create the resource or replace it whole (timestamps as given); return what is stored."""
        return run_sync(operations.save_resource(self, resource))

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        max_chars: int | None = None,
    ) -> Resource:
        """Change a resource, creating it when missing; atomic.

        ``working_memory`` replaces the stored text when given and is kept when
        omitted. ``working_memory=None`` clears it: the resource stays, with no
        working memory (``Resource.working_memory`` and ``get_working_memory``
        read ``None``, and a merge starts from ``{}``); on a missing resource it
        creates one without working memory. ``metadata`` is merged shallowly
        (``{**old, **new}``); ``None`` leaves it as it is. ``updated_at`` moves to
        now; ``created_at`` never changes. ``max_chars`` limits a ``working_memory``
        text given, as in :meth:`set_working_memory`.
        """
        return run_sync(operations.update_resource(self, resource_id, working_memory, metadata, max_chars))

    # -- threads -------------------------------------------------------------------

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        """The thread, or ``None``; with ``resource_id``, a thread of another owner is ``None`` too."""
        return run_sync(operations.get_thread(self, thread_id, resource_id))

    def create_thread(self, thread: Thread) -> Thread:
        """Insert a new thread, timestamps as given; never replace one. Atomic.

        Raises :class:`~workmem.errors.ThreadExistsError` and changes nothing
        when the id exists, whoever owns it: of several racing creates of one
        id exactly one succeeds. The check and the insert are one operation in
        the database (a conflict-ignoring insert, a unique index, a script),
        never a read followed by a write.
        """
        return run_sync(operations.create_thread(self, thread))

    def save_thread(self, thread: Thread) -> Thread:
        """Create the thread, or replace title and metadata of the same owner's thread; atomic.

        On create the timestamps are stored as given; on update ``created_at`` is
        kept and ``updated_at`` moves to now. If the id exists with another
        ``resource_id``, raise :class:`~workmem.errors.ThreadOwnershipError` and
        change nothing: of two racing creates with different owners exactly one wins.
        """
        return run_sync(operations.save_thread(self, thread))

    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        resource_id: str | None = None,
        max_chars: int | None = None,
    ) -> Thread:
        """Replace the title and merge metadata shallowly; atomic.

        Raises :class:`~workmem.errors.ThreadNotFoundError` when there is no such thread.
        With ``resource_id``, only that resource's thread is changed: another
        resource's raises :class:`~workmem.errors.ThreadOwnershipError`, checked in
        the same atomic step as the write. ``max_chars`` limits a
        ``metadata["workingMemory"]`` string given (the thread's working memory), as
        in :meth:`set_working_memory`; a refused update changes nothing.
        """
        return run_sync(operations.update_thread(self, thread_id, title, metadata, resource_id, max_chars))

    def delete_thread(self, thread_id: str, *, resource_id: str | None = None) -> bool:
        """Delete the thread; ``True`` if it existed. Idempotent.

        Its working memory goes with it: a thread created later under the same
        id (by any owner) starts without working memory. With ``resource_id``,
        only that resource's thread is deleted: another resource's raises
        :class:`~workmem.errors.ThreadOwnershipError` and stays.
        """
        return run_sync(operations.delete_thread(self, thread_id, resource_id))

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        """One page of the resource's threads, ordered by ``order_by`` then ``id`` (same direction)."""
        return run_sync(operations.list_threads(self, resource_id, page, per_page, order_by, direction))

    # -- working memory ------------------------------------------------------------

    def get_working_memory(
        self, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> str | None:
        """The working memory text of one scope, or ``None`` when none is stored.

        A missing resource or thread reads as ``None``, and so does a thread whose
        ``metadata["workingMemory"]`` is not a string (another program may store an
        object, a number or a boolean there). In thread scope a given
        ``resource_id`` must be the thread's owner.
        """
        return run_sync(operations.get_working_memory(self, scope, resource_id, thread_id))

    def set_working_memory(
        self,
        content: str,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        """Replace the working memory text of one scope.

        Resource scope creates the resource when missing; thread scope needs an
        existing thread (:class:`~workmem.errors.ThreadNotFoundError`).

        ``max_chars`` (an ``int`` >= 1; ``None``, the default, is no limit): a
        ``content`` longer than ``max_chars`` characters (``len()``) that is also
        longer than the text stored now (blank counts as 0) raises
        :class:`~workmem.errors.WorkingMemoryTooLargeError` and changes nothing. The
        comparison is made on the stored text in the same atomic step as the write,
        so concurrent writers cannot make it stale.

        ``source`` (a JSON object): who made the change, recorded with the version when
        history is on (``connect(url, history=True)``; see :meth:`working_memory_history`).
        """
        run_sync(operations.set_working_memory(self, content, scope, resource_id, thread_id, max_chars, source))

    def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Apply an RFC 7396 merge patch to the stored JSON object; return the merged document. Atomic.

        Missing or blank (empty or only whitespace) working memory counts as
        ``{}``. Stored text that is not a JSON object (``null``, ``[]``, ``0``
        and ``""`` included) raises :class:`~workmem.errors.WorkingMemoryFormatError`
        and changes nothing, ``updated_at`` included. In thread scope an absent or
        JSON ``null`` ``metadata["workingMemory"]`` counts as ``{}``; any other
        non-string value raises :class:`~workmem.errors.WorkingMemoryFormatError`
        and changes nothing (:meth:`set_working_memory` replaces it). Scopes and
        ownership as in :meth:`set_working_memory`.

        ``max_chars`` (an ``int`` >= 1; ``None``, the default, is no limit): when the
        merged document, as stored (compact JSON), is longer than ``max_chars``
        characters and longer than the stored document written the same way (nothing
        or blank: 0), :class:`~workmem.errors.WorkingMemoryTooLargeError` is raised
        and nothing changes. Decided on the merged result inside the merge's atomic
        step: any number of concurrent merges leave at most ``max_chars`` characters
        (from memory within the limit). ``source``: as in :meth:`set_working_memory`.
        """
        return run_sync(operations.merge_working_memory(self, patch, scope, resource_id, thread_id, max_chars, source))

    # -- history and erasure ---------------------------------------------------------

    def working_memory_history(
        self,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        limit: int = 20,
        before: int | None = None,
    ) -> HistoryPage:
        """The versions of one working memory, newest first: at most ``limit``, numbered below ``before``.

        Recorded while history is on (``connect(url, history=True)`` or ``history=N`` to keep
        the newest N), one version per change in the change's atomic step: set, merge,
        restore or import, the text after it, its time and ``source``. Pass the page's
        ``next_before`` as ``before`` for older versions. A missing thread has no history;
        in thread scope a given ``resource_id`` must be the thread's owner.
        :class:`~workmem.errors.OperationNotSupportedError` on an adapter without history.
        """
        return run_sync(operations.working_memory_history(self, scope, resource_id, thread_id, limit, before))

    def restore_working_memory(
        self,
        version: int,
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
        max_chars: int | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Write version ``version``'s text as the working memory again, recorded as a new version; return it.

        History is never rewritten: the restore is the newest version (kind ``"restore"``, its
        ``source`` carrying ``restoredFrom``). :class:`~workmem.errors.VersionNotFoundError` when
        the history does not hold that version; needs history on. Scope, ownership and
        ``max_chars`` as in :meth:`set_working_memory`.
        """
        return run_sync(
            operations.restore_working_memory(self, version, scope, resource_id, thread_id, max_chars, source)
        )

    def delete_resource(self, resource_id: str) -> ErasedResource:
        """Erase a user: the resource, every thread it owns, their working memory and all history. Idempotent.

        Returns what it removed. Never touches another resource's records. Atomic where the
        backend allows (see the backend's page); elsewhere re-runnable to completion.
        """
        return run_sync(operations.delete_resource(self, resource_id))

    # -- every record: iteration and bulk writes ------------------------------------

    def iter_resources(self, *, page_size: int = 500) -> Iterator[Resource]:
        """Every resource, ascending by id (code point order, the same on every backend), read in pages.

        Keyset pagination (:meth:`resources_after`): a resource present for the whole
        iteration is returned exactly once, whatever is inserted or deleted meanwhile;
        one inserted or deleted during it may or may not appear; none appears twice.
        A record another program stored in a form workmem cannot read is left out
        (:meth:`resources_after` names it). ``page_size``: 1 to 10,000.
        """
        return iterate_sync(operations.iter_resources(self, page_size))

    def iter_threads(self, *, page_size: int = 500) -> Iterator[Thread]:
        """Every thread of every resource, ascending by id, as :meth:`iter_resources`."""
        return iterate_sync(operations.iter_threads(self, page_size))

    def resources_after(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Resource]:
        """At most ``limit`` resources with ids after ``after`` (``None``: the first), ascending by id.

        Pass the page's :attr:`~workmem.records.RecordPage.next_after` as ``after`` for the next
        page; it is ``None`` after the last. Unreadable records' ids are in ``unreadable``.
        """
        return run_sync(operations.resources_after(self, after, limit))

    def threads_after(self, after: str | None = None, *, limit: int = 500) -> RecordPage[Thread]:
        """At most ``limit`` threads with ids after ``after``, ascending by id, as :meth:`resources_after`."""
        return run_sync(operations.threads_after(self, after, limit))

    def insert_resources(self, resources: Iterable[Resource]) -> frozenset[str]:
        """Insert every resource whose id is absent, all fields and both timestamps as given.

        Returns the ids that were already present; those records are left unchanged.
        Each insert-if-absent is atomic; records go to the backend in batches (its
        bulk path), each batch checked before it is written.
        """
        return run_sync(operations.insert_resources(self, resources))

    def insert_threads(self, threads: Iterable[Thread]) -> frozenset[str]:
        """Insert every thread whose id is absent, as given; return the ids already present.

        A present thread is left unchanged whoever owns it: a bulk write never moves
        a thread to another resource. Atomic per record, batched as :meth:`insert_resources`.
        """
        return run_sync(operations.insert_threads(self, threads))

    def restore_thread(self, thread: Thread) -> bool:
        """Restore the same owner's thread as given: title, metadata and both timestamps; atomic.

        ``False``, and nothing changed, when there is no thread with this id or
        another resource owns it (unlike :meth:`save_thread`, it never creates,
        and keeps ``updated_at`` as given rather than moving it to now).
        """
        return run_sync(operations.restore_thread(self, thread))

    resource_page = renamed("resource_page", "resources_after")
    thread_page = renamed("thread_page", "threads_after")
    replace_thread = renamed("replace_thread", "restore_thread")

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Release connections. Idempotent. Later calls raise :class:`~workmem.errors.StorageClosedError`.

        Every adapter, the in-memory one included: a caller's retry loop stops on
        that class (the conformance check ``closed_refuses`` holds adapters to it).
        """
        run_sync(self._close())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
