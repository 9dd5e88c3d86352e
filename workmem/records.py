"""The records workmem stores: resources, threads and pages of threads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Final, Generic, Literal, TypeVar

from workmem.timestamps import normalize, utc_now
from workmem.validation import (
    validate_id,
    validate_json_object,
    validate_text,
    validate_title,
)

__all__ = [
    "UNSET",
    "WORKING_MEMORY_KEY",
    "Direction",
    "OrderBy",
    "RecordPage",
    "Resource",
    "Scope",
    "Thread",
    "ThreadPage",
    "Unset",
    "private_copy",
    "trusted_resource",
    "trusted_thread",
    "validate_thread_metadata",
]

WORKING_MEMORY_KEY: Final = "workingMemory"
"""The key of ``thread.metadata`` that holds thread-scoped working memory."""

Scope = Literal["resource", "thread"]
OrderBy = Literal["created_at", "updated_at"]
Direction = Literal["asc", "desc"]


def validate_thread_metadata(value: object, what: str = "metadata") -> dict[str, Any]:
    """:func:`validate_json_object` for a thread's metadata, whose ``workingMemory`` string is working memory.

    That string is checked as working memory (:func:`validate_text`: at most
    :data:`MAX_TEXT_BYTES` of UTF-8, the error naming working memory), and the
    other keys as metadata (at most :data:`MAX_TEXT_BYTES` as JSON), exactly as a
    resource keeps the two apart. Any other ``workingMemory`` value is metadata.
    """
    if not isinstance(value, Mapping) or not isinstance(value.get(WORKING_MEMORY_KEY), str):
        return validate_json_object(value, what)
    memory = validate_text(value[WORKING_MEMORY_KEY], "working memory")
    rest = validate_json_object({key: item for key, item in value.items() if key != WORKING_MEMORY_KEY}, what)
    return {key: memory if key == WORKING_MEMORY_KEY else rest[key] for key in value}


class Unset(Enum):
    """Type of :data:`UNSET`, the marker for "argument not given" where ``None`` is a real value."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET


def _metadata(value: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else validate_json_object(value)


@dataclass(frozen=True, slots=True)
class Resource:
    """One user or entity: resource-scoped working memory plus metadata.

    Construction validates every field and normalizes the timestamps to UTC
    milliseconds, so an invalid record never reaches a backend.
    """

    id: str
    """Primary key; 1 to 512 UTF-8 bytes, no NUL."""
    working_memory: str | None = None
    """Resource-scoped working memory: Markdown, or JSON object text in schema mode."""
    metadata: dict[str, Any] | None = None
    """A JSON object, or ``None``."""
    created_at: datetime = field(default_factory=utc_now)
    """Creation time (UTC, milliseconds); never changes once stored."""
    updated_at: datetime = field(default_factory=utc_now)
    """Last change (UTC, milliseconds)."""

    def __post_init__(self) -> None:
        validate_id(self.id, "resource id")
        if self.working_memory is not None:
            validate_text(self.working_memory)
        object.__setattr__(self, "metadata", _metadata(self.metadata))
        object.__setattr__(self, "created_at", normalize(self.created_at))
        object.__setattr__(self, "updated_at", normalize(self.updated_at))


@dataclass(frozen=True, slots=True)
class Thread:
    """One conversation, owned by exactly one resource for its whole life."""

    id: str
    """Primary key, unique across all resources; 1 to 512 UTF-8 bytes, no NUL."""
    resource_id: str
    """The owning resource; immutable once the thread is stored."""
    title: str = ""
    """Free text, at most 1024 UTF-8 bytes; may be empty."""
    metadata: dict[str, Any] | None = None
    """A JSON object or ``None``; thread-scoped working memory lives under ``"workingMemory"``."""
    created_at: datetime = field(default_factory=utc_now)
    """Creation time (UTC, milliseconds); never changes once stored."""
    updated_at: datetime = field(default_factory=utc_now)
    """Last change (UTC, milliseconds)."""

    def __post_init__(self) -> None:
        validate_id(self.id, "thread id")
        validate_id(self.resource_id, "resource id")
        validate_title(self.title)
        if self.metadata is not None:  # its workingMemory string is working memory, not metadata
            object.__setattr__(self, "metadata", validate_thread_metadata(self.metadata))
        object.__setattr__(self, "created_at", normalize(self.created_at))
        object.__setattr__(self, "updated_at", normalize(self.updated_at))


# The slot setters of the frozen records (what object.__setattr__ reaches, without the lookup).
_new = object.__new__
_r_id, _r_working_memory, _r_metadata, _r_created_at, _r_updated_at = (
    Resource.__dict__[name].__set__ for name in ("id", "working_memory", "metadata", "created_at", "updated_at")
)
_t_id, _t_resource_id, _t_title, _t_metadata, _t_created_at, _t_updated_at = (
    Thread.__dict__[name].__set__ for name in ("id", "resource_id", "title", "metadata", "created_at", "updated_at")
)


def trusted_resource(
    id: str,
    working_memory: str | None,
    metadata: dict[str, Any] | None,
    created_at: datetime,
    updated_at: datetime,
) -> Resource:
    """A :class:`Resource` built WITHOUT validation, for adapters mapping what their database already holds.

    Only for values read back from storage: workmem validated them on the way
    in, and a record another program wrote is taken as stored. The caller
    guarantees the types (``metadata`` a dict or ``None``) and that both
    timestamps are already timezone-aware UTC with whole milliseconds. Never
    use it for input from a caller; construct :class:`Resource` instead.
    """
    record = _new(Resource)
    _r_id(record, id)
    _r_working_memory(record, working_memory)
    _r_metadata(record, metadata)
    _r_created_at(record, created_at)
    _r_updated_at(record, updated_at)
    return record


def trusted_thread(
    id: str,
    resource_id: str,
    title: str,
    metadata: dict[str, Any] | None,
    created_at: datetime,
    updated_at: datetime,
) -> Thread:
    """A :class:`Thread` built WITHOUT validation, for adapters mapping stored rows (see :func:`trusted_resource`)."""
    record = _new(Thread)
    _t_id(record, id)
    _t_resource_id(record, resource_id)
    _t_title(record, title)
    _t_metadata(record, metadata)
    _t_created_at(record, created_at)
    _t_updated_at(record, updated_at)
    return record


def _native(value: datetime) -> datetime:
    return value


def thread_fields(thread: Thread, time: Callable[[datetime], Any] = _native) -> dict[str, Any]:
    """``thread`` under Mastra's camelCase field names (``id``, ``resourceId``, ``title``, ``metadata``,
    ``createdAt``, ``updatedAt``), its timestamps as ``time`` writes them (by default the datetimes).

    The one document form of a thread: MongoDB stores it with native dates; Upstash and the wire
    protocol with ISO-8601 text (:func:`~workmem.timestamps.to_iso`). ``metadata`` is the thread's own.
    """
    return {
        "id": thread.id,
        "resourceId": thread.resource_id,
        "title": thread.title,
        "metadata": thread.metadata,
        "createdAt": time(thread.created_at),
        "updatedAt": time(thread.updated_at),
    }


def _own_json(value: Any) -> Any:
    """A deep copy of a JSON value: every dict and list rebuilt, the immutable leaves shared."""
    if isinstance(value, dict):
        return {key: _own_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_own_json(item) for item in value]
    return value


RecordT = TypeVar("RecordT", Resource, Thread)


def private_copy(record: RecordT) -> RecordT:
    """``record`` with metadata of its own (a deep copy): nothing done to one reaches the other.

    The contract's rule for returned records: what a storage returns is the
    caller's private copy, and what a caller passed in is not kept by reference.
    A storage that keeps records as Python objects (the in-memory reference, a
    cache of parsed rows) copies on the way in and on the way out with this; one
    that parses every row it reads, and serializes every record it writes, already does.
    """
    if record.metadata is None:
        return record  # nothing mutable in it: the record is frozen and its other fields are immutable
    if isinstance(record, Resource):
        return trusted_resource(
            record.id, record.working_memory, _own_json(record.metadata), record.created_at, record.updated_at
        )
    return trusted_thread(
        record.id, record.resource_id, record.title, _own_json(record.metadata), record.created_at, record.updated_at
    )


@dataclass(frozen=True, slots=True)
class ThreadPage:
    """One page of a resource's threads."""

    threads: tuple[Thread, ...]
    """The threads on this page, in the requested order."""
    total: int
    """How many threads the resource has in all."""
    page: int
    """Page number, from 0."""
    per_page: int | None
    """Page size; ``None`` when every thread was asked for."""
    has_more: bool
    """Whether a later page holds more threads."""
    unreadable: tuple[str, ...] = ()
    """Ids of threads on this page that could not be read (written by another program; see
    :class:`~workmem.errors.UnreadableRecordError`): left out of ``threads``, counted in ``total``."""


@dataclass(frozen=True, slots=True)
class RecordPage(Generic[RecordT]):
    """One page of every resource or every thread, in ascending id order (keyset pagination).

    Ids compare by code point (the byte order of their UTF-8), the same on every backend.
    """

    records: tuple[RecordT, ...]
    """The readable records of this page, ascending by id."""
    unreadable: tuple[str, ...] = ()
    """Ids on this page another program stored in a form workmem cannot read (left out of ``records``)."""
    next_after: str | None = None
    """The last id of this page, readable or not, to pass as ``after`` for the next; ``None``: no more pages."""
