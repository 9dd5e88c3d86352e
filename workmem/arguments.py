"""The contract's argument checks: what every public storage method validates at its door.

:class:`~workmem.storage.MemoryStorage` and :class:`~workmem.aio.AsyncMemoryStorage`
run these (:mod:`workmem.operations`) before calling an adapter's hooks, so an adapter
receives arguments already checked and typed (:class:`~workmem.hooks.ScopeTarget`,
:class:`~workmem.hooks.ListQuery`) and never validates them itself. (``workmem.checks``
is this module's former name and still imports; the conformance suite's check registry
is :mod:`workmem.conformance.registry`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeVar

from workmem.errors import (
    MissingTablesError,
    ThreadOwnershipError,
    ValidationError,
    WorkingMemoryFormatError,
)
from workmem.hooks import ListQuery, ScopeTarget
from workmem.records import (
    UNSET,
    WORKING_MEMORY_KEY,
    Resource,
    Thread,
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
    "CREATE_FALSE_ADVICE",
    "MISSING_TABLES_ADVICE",
    "check_create",
    "check_list_args",
    "check_owner",
    "check_record",
    "check_resource_update",
    "check_scope",
    "check_thread_update",
    "missing_tables",
    "thread_working_memory",
    "thread_working_memory_to_merge",
]

R = TypeVar("R", Resource, Thread)


def check_record(record: object, kind: type[R]) -> R:
    """``record`` when it is a ``kind`` (:class:`Resource` or :class:`Thread`); :class:`ValidationError` otherwise.

    The record validated itself when it was built; this only refuses another type.
    """
    if not isinstance(record, kind):
        raise ValidationError(f"expected a {kind.__name__}, got {type(record).__name__}")
    return record


def check_create(create: object) -> bool:
    """Validate the ``create`` option of ``connect()``: whether missing tables and indexes are created."""
    if not isinstance(create, bool):
        raise ValidationError(f"create must be a bool, not {type(create).__name__}")
    return create


MISSING_TABLES_ADVICE: Final = (
    "connect(url, create=False) creates nothing: connect once without create=False, as a user that may create "
    "tables, to create them"
)
"""What :func:`missing_tables` advises (the ``workmem`` command says it with its ``--no-create`` instead)."""
CREATE_FALSE_ADVICE: Final = "a role that may not create tables connects with create=False"
"""What an adapter adds to the error of creating its tables without the privilege (the command: ``--no-create``)."""


def missing_tables(where: str, names: list[str]) -> MissingTablesError:
    """The error of ``connect(url, create=False)`` finding ``names`` missing in ``where`` (a masked URL)."""
    error = MissingTablesError(f"{where} has no {', '.join(names)}, which workmem needs; {MISSING_TABLES_ADVICE}")
    error.tables = tuple(names)
    return error


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


def check_owner(thread: Thread, resource_id: str | None) -> Thread:
    """``thread``, when ``resource_id`` is ``None`` or owns it; :class:`ThreadOwnershipError` otherwise.

    The one owner rule. Adapters call it on the stored thread inside the atomic step
    that writes it (a row lock, a compare-and-swap, a script), so the write that
    follows is conditioned on the owner it checked.
    """
    if resource_id is not None and thread.resource_id != resource_id:
        raise ThreadOwnershipError(thread.id, resource_id)
    return thread
