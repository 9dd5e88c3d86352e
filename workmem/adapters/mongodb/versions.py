"""Working memory's history as MongoDB documents (no I/O).

One collection, ``workmem_memory_history`` (:data:`~workmem.history.HISTORY_TABLE`),
beside Mastra's ``mastra_threads`` and ``mastra_resources`` and never in them. A
version is one document::

    {resource_id, scope: "resource"|"thread", memory_id, version, content, changed_at, kind, source}

``memory_id`` is the resource's id (resource scope) or the thread's; ``resource_id``
is the resource, or the thread's owner when the version was written. ``changed_at``
is a BSON date (milliseconds, UTC); ``source`` the caller's source as compact JSON
text (``None`` without one), so it round-trips exactly whatever its keys hold. A
unique index on ``(resource_id, scope, memory_id, version)`` refuses a second
version with the same number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from workmem.errors import UnreadableRecordError, WorkmemError
from workmem.history import HISTORY_TABLE, HistoryKey, MemoryVersion
from workmem.timestamps import normalize
from workmem.validation import dump_json

from .documents import Document, IndexSpec

__all__ = [
    "HISTORY",
    "HISTORY_INDEXES",
    "history_filter",
    "imported_document",
    "version_document",
    "version_from_document",
]

HISTORY: Final = HISTORY_TABLE
HISTORY_INDEXES: Final[tuple[IndexSpec, ...]] = (
    ([("resource_id", 1), ("scope", 1), ("memory_id", 1), ("version", -1)], {"unique": True}),
)
"""One index serves every query: a memory's versions newest first, a resource's versions (its prefix)."""


def history_filter(key: HistoryKey) -> Document:
    """Every version of ``key``'s working memory."""
    return {"resource_id": key.resource_id, "scope": key.scope, "memory_id": key.memory_id}


def version_document(
    key: HistoryKey, number: int, content: str | None, changed_at: datetime, kind: str, source_text: str | None
) -> Document:
    """The document of version ``number`` of ``key``'s working memory."""
    fields = {"version": number, "content": content, "changed_at": normalize(changed_at), "kind": kind}
    return {**history_filter(key), **fields, "source": source_text}


def imported_document(version: MemoryVersion) -> Document:
    """The document of an imported version (stored as given)."""
    source = None if version.source is None else dump_json(version.source)
    return version_document(version.key, version.version, version.content, version.changed_at, version.kind, source)


def version_from_document(document: Mapping[str, Any]) -> MemoryVersion:
    """The version a history document holds (:class:`UnreadableRecordError` when it is not one workmem wrote)."""
    try:
        changed_at = document["changed_at"]
        if not isinstance(changed_at, datetime):
            raise TypeError("changed_at is not a date")
        source = document.get("source")
        return MemoryVersion(
            document["resource_id"],
            document["memory_id"] if document.get("scope") == "thread" else None,
            document["version"],
            document.get("content"),
            changed_at if changed_at.tzinfo else changed_at.replace(tzinfo=UTC),
            document["kind"],
            None if source is None else json.loads(source),
        )
    except (KeyError, TypeError, ValueError, RecursionError, WorkmemError) as exc:
        raise UnreadableRecordError("history version", str(document.get("memory_id")), str(exc)) from None
