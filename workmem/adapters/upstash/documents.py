"""Records as the JSON documents ``@mastra/upstash`` keeps (no I/O).

Resource: ``{"id", "workingMemory", "metadata", "createdAt", "updatedAt"}``
with ``metadata`` JSON-stringified (a string holding a JSON object) and
``workingMemory`` omitted when there is none. Thread: ``{"id", "resourceId",
"title", "metadata", "createdAt", "updatedAt"}`` with ``metadata`` a native
object. Timestamps are ISO-8601 UTC text with milliseconds (``...T03:04:05.678Z``).

Readers are lenient where the TypeScript adapter is: metadata may be an object
or a JSON string, timestamps ISO text or epoch milliseconds, a missing title is
empty. Fields workmem does not know (``lastMessageAt``, ...) are kept when a
document is rewritten.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from workmem.errors import WorkmemError
from workmem.records import Resource, Thread
from workmem.timestamps import from_iso, normalize, to_iso
from workmem.validation import dump_json

__all__ = [
    "decode_resource",
    "decode_thread",
    "encode_resource",
    "encode_thread",
    "epoch_ms",
    "parse_document",
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
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise WorkmemError(f"the value at {key!r} is not a JSON object document")
    return value


def _timestamp(value: Any) -> datetime:
    if isinstance(value, str) and value.strip():
        return from_iso(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _EPOCH + timedelta(milliseconds=value)
    return _EPOCH


def _metadata(value: Any, key: str) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError:
            raise WorkmemError(f"the metadata of {key!r} is not JSON") from None
    if value is None or isinstance(value, dict):
        return value
    raise WorkmemError(f"the metadata of {key!r} is not a JSON object")


def _others(raw: dict[str, Any] | None, known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in (raw or {}).items() if k not in known}


def decode_resource(text: str, key: str, resource_id: str) -> tuple[Resource, dict[str, Any]]:
    """The resource ``resource_id`` stored at ``key``, and its raw document."""
    raw = parse_document(text, key)
    memory = raw.get("workingMemory")
    if memory is not None and not isinstance(memory, str):
        memory = dump_json(memory)
    resource = Resource(
        id=resource_id,
        working_memory=memory,
        metadata=_metadata(raw.get("metadata"), key),
        created_at=_timestamp(raw.get("createdAt")),
        updated_at=_timestamp(raw.get("updatedAt")),
    )
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


def decode_thread(text: str, key: str) -> tuple[Thread, dict[str, Any]]:
    """The thread stored at ``key`` and its raw document."""
    raw = parse_document(text, key)
    thread_id, owner, title = raw.get("id"), raw.get("resourceId"), raw.get("title")
    if not isinstance(thread_id, str) or not isinstance(owner, str):
        raise WorkmemError(f"the thread document at {key!r} has no string id and resourceId")
    thread = Thread(
        id=thread_id,
        resource_id=owner,
        title=title if isinstance(title, str) else "",
        metadata=_metadata(raw.get("metadata"), key),
        created_at=_timestamp(raw.get("createdAt")),
        updated_at=_timestamp(raw.get("updatedAt")),
    )
    return thread, raw


def encode_thread(thread: Thread, raw: dict[str, Any] | None = None) -> str:
    """The document of ``thread``, keeping the unknown fields of ``raw``."""
    doc: dict[str, Any] = {
        "id": thread.id,
        "resourceId": thread.resource_id,
        "title": thread.title,
        "metadata": thread.metadata,
        "createdAt": to_iso(thread.created_at),
        "updatedAt": to_iso(thread.updated_at),
    }
    doc.update(_others(raw, _THREAD_FIELDS))
    return dump_json(doc)
