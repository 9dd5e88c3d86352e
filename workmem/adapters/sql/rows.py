"""Rows to records, the same for every SQL dialect (no I/O).

Rows come from :meth:`Dialect.resource_columns` / :meth:`Dialect.thread_columns`:
metadata as JSON text (or bytes, or an already decoded object), timestamps as
``datetime`` or ISO-8601 text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from workmem.errors import WorkmemError
from workmem.records import Resource, Thread
from workmem.timestamps import from_iso, normalize
from workmem.validation import MAX_SAFE_INT

__all__ = ["decode_time", "load_json", "load_object", "resource_from_row", "thread_from_row"]


def _number(text: str) -> int | float:
    # Databases that keep JSON numbers as decimals (PostgreSQL's jsonb) print 1e300 as 1 and 300 zeros;
    # valid integers stay within 2**53, so anything larger was a float.
    value = int(text)
    return value if abs(value) <= MAX_SAFE_INT else float(text)


def load_json(text: str | bytes) -> Any:
    """Parse stored JSON text."""
    return json.loads(text, parse_int=_number)


def load_object(value: Any) -> dict[str, Any] | None:
    """Stored metadata as a dict (``None`` stays ``None``)."""
    if value is None or isinstance(value, dict):
        return value
    parsed = load_json(value)
    if not isinstance(parsed, dict):
        raise WorkmemError(f"stored metadata is a JSON {type(parsed).__name__}, not an object")
    return parsed


def decode_time(value: Any) -> datetime:
    """A stored timestamp: ``datetime`` (naive means UTC) or ISO-8601 text."""
    if isinstance(value, datetime):
        return normalize(value if value.tzinfo is not None else value.replace(tzinfo=UTC))
    return from_iso(str(value))


def resource_from_row(row: Sequence[Any]) -> Resource:
    rid, working_memory, metadata, created_at, updated_at = row[:5]
    return Resource(rid, working_memory, load_object(metadata), decode_time(created_at), decode_time(updated_at))


def thread_from_row(row: Sequence[Any]) -> Thread:
    tid, resource_id, title, metadata, created_at, updated_at = row[:6]
    return Thread(tid, resource_id, title, load_object(metadata), decode_time(created_at), decode_time(updated_at))
