"""The wire protocol's values: records, pages and errors as JSON, both ways (no I/O).

Records travel in the camelCase of the export format and of Mastra's tables
(``resourceId``, ``workingMemory``, ``createdAt``); timestamps as ISO-8601 UTC
text with milliseconds (``2025-01-02T03:04:05.678Z``). What a store sends back
is checked here: a value of the wrong shape is the store breaking the protocol
(:class:`~workmem.errors.HarnessError`), never a record workmem makes up.
See ``docs/wire-protocol.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from workmem import errors, incidents
from workmem.errors import HarnessError, UnreadableRecordError, WorkmemError
from workmem.records import RecordPage, Resource, Thread, Unset, thread_fields
from workmem.timestamps import from_iso, to_iso

__all__ = [
    "ERROR_CLASSES",
    "decode_error",
    "decode_page",
    "decode_resource",
    "decode_thread",
    "encode_resource",
    "encode_thread",
    "harness",
    "malformed",
    "optional",
    "stamp",
]

ERROR_CLASSES: Mapping[str, type[WorkmemError]] = {
    name: cls
    for name in errors.__all__
    if isinstance(cls := getattr(errors, name), type) and issubclass(cls, WorkmemError) and cls is not HarnessError
}
"""The error classes a store may name: every workmem error but the harness's own."""


def harness(message: str, kind: str) -> HarnessError:
    """A :class:`HarnessError`, noted for the conformance suite (:mod:`workmem.incidents`) as it is made."""
    error = HarnessError(message, kind=kind)
    incidents.note("harness_error", str(error))
    return error


def malformed(what: str) -> HarnessError:
    return harness(what, "malformed")


def stamp(value: datetime) -> str:
    return to_iso(value)


def optional(args: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``args`` with ``key`` set to ``value``, unless ``value`` is ``UNSET`` (then the key is absent: "unchanged")."""
    if not isinstance(value, Unset):
        args[key] = value
    return args


def encode_resource(resource: Resource) -> dict[str, Any]:
    return {
        "id": resource.id,
        "workingMemory": resource.working_memory,
        "metadata": resource.metadata,
        "createdAt": stamp(resource.created_at),
        "updatedAt": stamp(resource.updated_at),
    }


def encode_thread(thread: Thread) -> dict[str, Any]:
    return thread_fields(thread, stamp)


def _time(value: Mapping[str, Any], key: str) -> datetime:
    text = value.get(key)
    if not isinstance(text, str):
        raise ValueError(f"{key!r} that is no string")
    return from_iso(text, zone_required=True)


def _metadata(value: Mapping[str, Any]) -> dict[str, Any] | None:
    metadata = value.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError(f"'metadata' that is a {type(metadata).__name__}, neither an object nor null")
    return metadata


def _record(value: Any, what: str) -> str:
    """The id of a record a store sent; a :class:`HarnessError` when it is no object with a string ``id``."""
    record_id = value.get("id") if isinstance(value, dict) else None
    if not isinstance(record_id, str):
        raise malformed(f"{what} is not a JSON object with a string 'id': {str(value)[:300]}")
    return record_id


def _wrong(kind: str, record_id: str, problem: Exception) -> UnreadableRecordError:
    return UnreadableRecordError(kind, record_id, f"the store sent {problem}")


def decode_resource(value: Any, what: str = "a resource") -> Resource:
    """The resource a store sent.

    A value that is no object with a string ``id`` breaks the protocol (:class:`HarnessError`); a record
    with a field of the wrong type or value (a title that is an object, a float sent as an integer beyond
    2**53) is the store's wrong answer: :class:`~workmem.errors.UnreadableRecordError`, which a check reports
    as the store's failure.
    """
    record_id = _record(value, what)
    try:
        memory = value.get("workingMemory")
        if memory is not None and not isinstance(memory, str):
            raise ValueError(f"'workingMemory' that is a {type(memory).__name__}, not a string")
        return Resource(record_id, memory, _metadata(value), _time(value, "createdAt"), _time(value, "updatedAt"))
    except (ValueError, WorkmemError) as exc:  # ValidationError is both
        raise _wrong("resource", record_id, exc) from None


def decode_thread(value: Any, what: str = "a thread") -> Thread:
    """The thread a store sent (see :func:`decode_resource`)."""
    record_id = _record(value, what)
    try:
        owner, title = value.get("resourceId"), value.get("title")
        if not isinstance(owner, str) or not isinstance(title, str):
            raise ValueError(f"a 'resourceId' or 'title' that is no string ({str(owner)[:60]!r}, {str(title)[:60]!r})")
        return Thread(record_id, owner, title, _metadata(value), _time(value, "createdAt"), _time(value, "updatedAt"))
    except (ValueError, WorkmemError) as exc:
        raise _wrong("thread", record_id, exc) from None


def ids(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise malformed(f"{what} is not a list of ids")
    return tuple(value)


def decode_page(value: Any, thread: bool) -> RecordPage[Any]:
    """``{records, unreadable, nextAfter}`` of ``resource_page`` / ``thread_page``."""
    if not isinstance(value, dict) or not isinstance(value.get("records"), list):
        raise malformed(f"a page is not {{records: [...], ...}}: {str(value)[:300]}")
    decode = decode_thread if thread else decode_resource
    after = value.get("nextAfter")
    if after is not None and not isinstance(after, str):
        raise malformed("a page's 'nextAfter' is neither a string nor null")
    return RecordPage(
        tuple(decode(r, "a record of a page") for r in value["records"]),
        ids(value.get("unreadable", []), "a page's 'unreadable'"),
        after,
    )


def decode_error(value: Any) -> WorkmemError:
    """The workmem error an ``{"error": {"class", "message", "data"?}}`` response names.

    An unknown class (or an error object of the wrong shape) is the store
    breaking the protocol: a :class:`HarnessError` of kind ``unknown_error_class``
    (or ``malformed``). ``data`` sets the error's attributes (``thread_id``,
    ``size``/``limit``/``current`` of a ``WorkingMemoryTooLargeError``, ...).
    """
    if not isinstance(value, dict) or not isinstance(value.get("class"), str):
        raise malformed(f"an error is not {{class, message}}: {str(value)[:300]}")
    name, message, data = value["class"], value.get("message", ""), value.get("data") or {}
    if not isinstance(message, str) or not isinstance(data, dict):
        raise malformed(f"an error's 'message' is not a string or its 'data' not an object: {str(value)[:300]}")
    cls = ERROR_CLASSES.get(name)
    if cls is None:
        return harness(
            f"the store raised an error class workmem does not have: {name!r} ({message[:300]})",
            "unknown_error_class",
        )
    error = cls.__new__(cls)
    error.args = (message,)
    error.__dict__.update({str(k): v for k, v in data.items()})
    return error
