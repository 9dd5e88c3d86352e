"""The storage contract every adapter implements.

The semantics here are normative; ``workmem.conformance`` checks them against
any adapter. Methods that must be atomic say so: an adapter makes them atomic
in its database (one statement, a row lock, a script, a conditional update),
never with a lock held only in Python.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from workmem.errors import (
    MissingTablesError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    UnreadableRecordError,
    ValidationError,
    WorkingMemoryFormatError,
)
from workmem.records import (
    UNSET,
    WORKING_MEMORY_KEY,
    Direction,
    OrderBy,
    Resource,
    Scope,
    Thread,
    ThreadPage,
    Unset,
    validate_thread_metadata,
)
from workmem.validation import (
    json_type,
    validate_id,
    validate_json_object,
    validate_text,
    validate_title,
)

__all__ = [
    "Capabilities",
    "ListQuery",
    "MemoryStorage",
    "ScopeTarget",
    "check_create",
    "check_list_args",
    "check_owner",
    "check_resource_update",
    "check_scope",
    "check_thread_update",
    "missing_tables",
    "thread_working_memory",
    "thread_working_memory_to_merge",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an adapter guarantees beyond the required contract."""

    cross_process_atomic: bool
    """Owner checks and merges stay atomic between separate processes (not only threads of one)."""
    persistent: bool
    """Data outlives the process that wrote it."""


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


def check_create(create: object) -> bool:
    """Validate the ``create`` option of ``connect()``: whether missing tables and indexes are created."""
    if not isinstance(create, bool):
        raise ValidationError(f"create must be a bool, not {type(create).__name__}")
    return create


def missing_tables(where: str, names: list[str]) -> MissingTablesError:
    """The error of ``connect(url, create=False)`` finding ``names`` missing in ``where`` (a masked URL)."""
    return MissingTablesError(
        f"{where} has no {', '.join(names)}, which workmem needs; connect(url, create=False) creates nothing: "
        "connect once without create=False, as a user that may create tables, to create them"
    )


def check_scope(scope: object, resource_id: object, thread_id: object) -> ScopeTarget:
    """Validate the ``scope``/``resource_id``/``thread_id`` triple of a working-memory call."""
    if scope == "resource":
        if resource_id is None:
            raise ValidationError("scope 'resource' needs a resource_id")
        return ScopeTarget("resource", validate_id(resource_id, "resource id"), None)
    if scope == "thread":
        if thread_id is None:
            raise ValidationError("scope 'thread' needs a thread_id")
        owner = None if resource_id is None else validate_id(resource_id, "resource id")
        return ScopeTarget("thread", owner, validate_id(thread_id, "thread id"))
    raise ValidationError(f"scope must be 'resource' or 'thread', not {scope!r}")


def check_list_args(
    resource_id: object, page: object, per_page: object, order_by: object, direction: object
) -> ListQuery:
    """Validate the arguments of :meth:`MemoryStorage.list_threads`."""
    validate_id(resource_id, "resource id")
    if not isinstance(page, int) or isinstance(page, bool) or page < 0:
        raise ValidationError(f"page must be an int >= 0, not {page!r}")
    if per_page is None:
        if page != 0:
            raise ValidationError("per_page=None returns every thread, so page must be 0")
    elif not isinstance(per_page, int) or isinstance(per_page, bool) or per_page < 1:
        raise ValidationError(f"per_page must be an int >= 1 or None, not {per_page!r}")
    if order_by not in ("created_at", "updated_at"):
        raise ValidationError(f"order_by must be 'created_at' or 'updated_at', not {order_by!r}")
    if direction not in ("asc", "desc"):
        raise ValidationError(f"direction must be 'asc' or 'desc', not {direction!r}")
    return ListQuery(resource_id, page, per_page, order_by, direction)  # type: ignore[arg-type]


def check_resource_update(
    working_memory: str | Unset | None, metadata: Mapping[str, Any] | Unset | None
) -> tuple[str | Unset | None, dict[str, Any] | Unset | None]:
    """Validate :meth:`MemoryStorage.update_resource` arguments; ``UNSET`` passes through."""
    if working_memory is not UNSET and working_memory is not None:
        validate_text(working_memory)
    if metadata is not UNSET and metadata is not None:
        metadata = validate_json_object(metadata)
    return working_memory, metadata


def check_thread_update(
    title: str | Unset, metadata: Mapping[str, Any] | Unset | None
) -> tuple[str | Unset, dict[str, Any] | Unset | None]:
    """Validate :meth:`MemoryStorage.update_thread` arguments; ``UNSET`` passes through."""
    if title is not UNSET:
        validate_title(title)
    if metadata is not UNSET and metadata is not None:
        metadata = validate_thread_metadata(metadata)
    return title, metadata


class MemoryStorage(ABC):
    """Durable resources, threads and working memory on one backend.

    Instances are thread-safe and usable as context managers (``close()`` on exit).
    Every method validates its input before it writes anything and raises
    :class:`~workmem.errors.ValidationError` on bad input. Reads change nothing
    (``updated_at`` included), and neither does a refused call (a
    ``ValidationError``, ``WorkingMemoryFormatError``, ``ThreadOwnershipError``
    or ``ThreadExistsError``).

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
    """

    capabilities: ClassVar[Capabilities]
    """What this adapter guarantees beyond the required contract."""

    @classmethod
    @abstractmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """Open the backend named by ``url``, creating missing tables and indexes (used by ``connect``)."""

    # -- resources -----------------------------------------------------------------

    @abstractmethod
    def get_resource(self, resource_id: str) -> Resource | None:
        """The resource, or ``None`` when there is none."""

    @abstractmethod
    def save_resource(self, resource: Resource) -> Resource:
        """Create the resource or replace it whole (timestamps as given); return what is stored."""

    @abstractmethod
    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        """Change a resource, creating it when missing; atomic.

        ``working_memory`` replaces the stored text when given and is kept when
        omitted. ``working_memory=None`` clears it: the resource stays, with no
        working memory (``Resource.working_memory`` and ``get_working_memory``
        read ``None``, and a merge starts from ``{}``); on a missing resource it
        creates one without working memory. ``metadata`` is merged shallowly
        (``{**old, **new}``); ``None`` leaves it as it is. ``updated_at`` moves to
        now; ``created_at`` never changes.
        """

    # -- threads -------------------------------------------------------------------

    @abstractmethod
    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        """The thread, or ``None``; with ``resource_id``, a thread of another owner is ``None`` too."""

    @abstractmethod
    def create_thread(self, thread: Thread) -> Thread:
        """Insert a new thread, timestamps as given; never replace one. Atomic.

        Raises :class:`~workmem.errors.ThreadExistsError` and changes nothing
        when the id exists, whoever owns it: of several racing creates of one
        id exactly one succeeds. The check and the insert are one operation in
        the database (a conflict-ignoring insert, a unique index, a script),
        never a read followed by a write.
        """

    @abstractmethod
    def save_thread(self, thread: Thread) -> Thread:
        """Create the thread, or replace title and metadata of the same owner's thread; atomic.

        On create the timestamps are stored as given; on update ``created_at`` is
        kept and ``updated_at`` moves to now. If the id exists with another
        ``resource_id``, raise :class:`~workmem.errors.ThreadOwnershipError` and
        change nothing: of two racing creates with different owners exactly one wins.
        """

    @abstractmethod
    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Thread:
        """Replace the title and merge metadata shallowly; atomic.

        Raises :class:`~workmem.errors.ThreadNotFoundError` when there is no such thread.
        """

    @abstractmethod
    def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread; ``True`` if it existed. Idempotent.

        Its working memory goes with it: a thread created later under the same
        id (by any owner) starts without working memory.
        """

    @abstractmethod
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
        target = check_scope(scope, resource_id, thread_id)
        if target.scope == "resource":
            assert target.resource_id is not None
            resource = self.get_resource(target.resource_id)
            return None if resource is None else resource.working_memory
        assert target.thread_id is not None
        thread = self.get_thread(target.thread_id)
        if thread is None:
            return None
        check_owner(thread, target.resource_id)
        return thread_working_memory(thread.metadata)

    def set_working_memory(
        self, content: str, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> None:
        """Replace the working memory text of one scope.

        Resource scope creates the resource when missing; thread scope needs an
        existing thread (:class:`~workmem.errors.ThreadNotFoundError`).
        """
        target = check_scope(scope, resource_id, thread_id)
        validate_text(content)
        if target.scope == "resource":
            assert target.resource_id is not None
            self.update_resource(target.resource_id, working_memory=content)
            return
        assert target.thread_id is not None
        if target.resource_id is not None:
            # The owner never changes, so checking it before the write leaves no race.
            thread = self.get_thread(target.thread_id)
            if thread is None:
                raise ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
        self.update_thread(target.thread_id, metadata={WORKING_MEMORY_KEY: content})

    @abstractmethod
    def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
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
        """

    # -- lifecycle -----------------------------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent. Later calls raise :class:`~workmem.errors.StorageClosedError`.

        (An adapter with nothing to release, like the in-memory one, may keep working.)
        """

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def thread_working_memory(metadata: Mapping[str, Any] | None) -> str | None:
    """The thread-scoped working memory held in thread metadata, as a read sees it.

    A non-string value (another program may have stored an object, number or boolean there) reads as none;
    a merge uses :func:`thread_working_memory_to_merge`, which refuses it instead of replacing it.
    """
    value = (metadata or {}).get(WORKING_MEMORY_KEY)
    return value if isinstance(value, str) else None


def thread_working_memory_to_merge(metadata: Mapping[str, Any] | None) -> str | None:
    """The thread-scoped working memory a merge starts from; ``None`` when the key is absent or JSON ``null``.

    Any other non-string value raises :class:`~workmem.errors.WorkingMemoryFormatError` (it is the stored
    value, not the caller's input, that is wrong), so the merge changes nothing instead of replacing it.
    """
    value = (metadata or {}).get(WORKING_MEMORY_KEY)
    if value is None or isinstance(value, str):
        return value
    raise WorkingMemoryFormatError(
        f"stored thread working memory is a JSON {json_type(value)}, not a string; merge needs a string "
        "holding a JSON object"
    )


def check_owner(thread: Thread, resource_id: str | None) -> None:
    """Raise :class:`ThreadOwnershipError` when ``resource_id`` is given and does not own ``thread``."""
    if resource_id is not None and thread.resource_id != resource_id:
        raise ThreadOwnershipError(thread.id, resource_id)
