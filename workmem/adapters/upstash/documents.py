"""Records as the JSON documents ``@mastra/upstash`` keeps (no I/O).

Resource: ``{"id", "workingMemory", "metadata", "createdAt", "updatedAt"}``
with ``metadata`` JSON-stringified (a string holding a JSON object) and
``workingMemory`` omitted when there is none. Thread: ``{"id", "resourceId",
"title", "metadata", "createdAt", "updatedAt"}`` with ``metadata`` a native
object. Timestamps are ISO-8601 UTC text with milliseconds (``...T03:04:05.678Z``).

Readers are lenient where the TypeScript adapter is: metadata may be an object
or a JSON string, timestamps ISO text or epoch milliseconds, a missing title is
empty, a title may be longer than workmem's own limit. A document that still
cannot be read raises :class:`~workmem.errors.UnreadableRecordError`. Fields
workmem does not know (``lastMessageAt``, ...) are kept when a document is
rewritten.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from workmem.errors import UnreadableRecordError, WorkmemError
from workmem.records import Resource, Thread, thread_fields, trusted_resource, trusted_thread
from workmem.timestamps import from_iso, normalize, to_iso
from workmem.validation import dump_json, json_type

__all__ = [
    "decode_resource",
    "decode_thread",
    "encode_resource",
    "encode_thread",
    "epoch_ms",
    "parse_document",
    "raw_owner",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RESOURCE_FIELDS = ("id", "workingMemory", "metadata", "createdAt", "updatedAt")
_THREAD_FIELDS = ("id", "resourceId", "title", "metadata", "createdAt", "updatedAt")


def epoch_ms(value: datetime) -> int:
    """Milliseconds since 1970 (the sorted-set score of a timestamp)."""
    return (normalize(value) - _EPOCH) // timedelta(milliseconds=1)


def parse_document(text: str, key: str) -> dict[str, Any]:
    """The JSON object stored at ``key``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise ValueError(f"the value at {key!r} is not a JSON object document")
    return value


def _timestamp(value: Any) -> datetime:
    if isinstance(value, str) and value.strip():
        return from_iso(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return normalize(_EPOCH + timedelta(milliseconds=value))
    return _EPOCH


def _metadata(value: Any, key: str) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except (ValueError, RecursionError):
            raise ValueError(f"the metadata of {key!r} is not JSON") from None
    if value is None or isinstance(value, dict):
        return value
    raise ValueError(f"the metadata of {key!r} is a JSON {json_type(value)}, not an object")


_UNREADABLE = (ValueError, OverflowError, RecursionError, WorkmemError)
"""What reading a document another program wrote can raise: that record alone is unreadable."""


def _others(raw: dict[str, Any] | None, known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in (raw or {}).items() if k not in known}


def decode_resource(text: str, key: str, resource_id: str) -> tuple[Resource, dict[str, Any]]:
    """The resource ``resource_id`` stored at ``key``, and its raw document.

    Raises :class:`UnreadableRecordError` when the document cannot be read as a resource.
    """
    try:
        raw = parse_document(text, key)
        memory = raw.get("workingMemory")
        if memory is not None and not isinstance(memory, str):
            memory = dump_json(memory)
        resource = trusted_resource(
            resource_id,
            memory,
            _metadata(raw.get("metadata"), key),
            _timestamp(raw.get("createdAt")),
            _timestamp(raw.get("updatedAt")),
        )
    except _UNREADABLE as exc:
        raise UnreadableRecordError("resource", resource_id, str(exc)) from None
    return resource, raw


def encode_resource(resource: Resource, raw: dict[str, Any] | None = None) -> str:
    """The document of ``resource``, keeping the unknown fields of ``raw``."""
    doc: dict[str, Any] = {"id": resource.id}
    if resource.working_memory is not None:
        doc["workingMemory"] = resource.working_memory
    if resource.metadata is not None:
        doc["metadata"] = dump_json(resource.metadata)
    doc["createdAt"] = to_iso(resource.created_at)
    doc["updatedAt"] = to_iso(resource.updated_at)
    doc.update(_others(raw, _RESOURCE_FIELDS))
    return dump_json(doc)


def decode_thread(text: str, key: str, thread_id: str | None = None) -> tuple[Thread, dict[str, Any]]:
    """The thread stored at ``key`` (whose id is ``thread_id``, when known) and its raw document.

    Lenient where Mastra is (a title of any length, a missing title is empty);
    raises :class:`UnreadableRecordError` when the document cannot be read as a thread.
    """
    try:
        raw = parse_document(text, key)
        doc_id, owner, title = raw.get("id"), raw.get("resourceId"), raw.get("title")
        if not isinstance(doc_id, str) or not isinstance(owner, str):
            raise ValueError(f"the thread document at {key!r} has no string id and resourceId")
        thread = trusted_thread(
            doc_id,
            owner,
            title if isinstance(title, str) else "",
            _metadata(raw.get("metadata"), key),
            _timestamp(raw.get("createdAt")),
            _timestamp(raw.get("updatedAt")),
        )
    except _UNREADABLE as exc:
        raise UnreadableRecordError("thread", thread_id or key, str(exc)) from None
    return thread, raw


def raw_owner(text: str) -> tuple[str | None, dict[str, Any] | None]:
    """The ``resourceId`` of a thread document that may not be readable as a thread, and the document, as far
    as each can be read (``None`` where not: the text is no JSON object, or its owner is no string)."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(raw, dict):
        return None, None
    owner = raw.get("resourceId")
    return (owner if isinstance(owner, str) else None), raw


def encode_thread(thread: Thread, raw: dict[str, Any] | None = None) -> str:
    """The document of ``thread``, keeping the unknown fields of ``raw``."""
    doc = thread_fields(thread, to_iso)
    doc.update(_others(raw, _THREAD_FIELDS))
    return dump_json(doc)
