"""The workmem export format, version 1: JSON Lines (see ``docs/export-format.md``).

The first line is the header ``{"format":"workmem-export","version":1}``; every
further line is one record, a JSON object whose first key ``kind`` is
``"resource"`` or ``"thread"``. The text is canonical: fixed top-level key
order, object keys inside metadata sorted by code point, no whitespace
(separators ``,`` and ``:``), non-ASCII characters as themselves (UTF-8),
timestamps as ISO-8601 UTC with milliseconds (``2025-01-02T03:04:05.678Z``),
a float with an integral value (within +/- (2**53 - 1)) written as the integer.
So the same records always give the same bytes, whichever backend they come
from, and :func:`record_line` doubles as the test of "identical records".
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from workmem.errors import ValidationError
from workmem.records import Resource, Thread
from workmem.timestamps import from_iso, to_iso
from workmem.validation import MAX_SAFE_INT

__all__ = [
    "FORMAT",
    "HEADER_LINE",
    "VERSION",
    "BadLine",
    "Record",
    "field_values",
    "parse_header",
    "parse_record",
    "record_line",
]

FORMAT: Final = "workmem-export"
VERSION: Final = 1
HEADER_LINE: Final = json.dumps({"format": FORMAT, "version": VERSION}, separators=(",", ":")) + "\n"
"""The first line of every version-1 export, newline included."""

Record = Resource | Thread

RESOURCE_FIELDS: Final = ("kind", "id", "working_memory", "metadata", "created_at", "updated_at")
THREAD_FIELDS: Final = ("kind", "id", "resource_id", "title", "metadata", "created_at", "updated_at")


class BadLine(ValueError):
    """A line of an export that is no valid header or record; ``str()`` says why (never with the line's text)."""


def _canonical(value: Any) -> Any:
    """``value`` with every object's keys sorted and integral floats as ints (what any backend reads back alike)."""
    if isinstance(value, dict):
        return {key: _canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INT:
        return int(value)
    return value


def field_values(record: Record) -> dict[str, Any]:
    """The record's fields in format order and canonical form (``kind`` first)."""
    if isinstance(record, Resource):
        return {
            "kind": "resource",
            "id": record.id,
            "working_memory": record.working_memory,
            "metadata": _canonical(record.metadata),
            "created_at": to_iso(record.created_at),
            "updated_at": to_iso(record.updated_at),
        }
    return {
        "kind": "thread",
        "id": record.id,
        "resource_id": record.resource_id,
        "title": record.title,
        "metadata": _canonical(record.metadata),
        "created_at": to_iso(record.created_at),
        "updated_at": to_iso(record.updated_at),
    }


def record_line(record: Record) -> str:
    """The canonical line of ``record``, newline included."""
    return json.dumps(field_values(record), ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise BadLine(f"the key {key!r} appears twice in one object")
        result[key] = value
    return result


def _constant(name: str) -> Any:
    raise BadLine(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadLine(f"the number {text[:40]} is out of range")
    return value


def _loads(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadLine(f"not UTF-8 (byte {exc.start + 1})") from None
    try:
        return json.loads(text, object_pairs_hook=_object_pairs, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise BadLine(f"not JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise BadLine("nested too deeply") from None


def parse_header(raw: bytes) -> int:
    """The version of the export whose first line is ``raw``; :class:`BadLine` if it is no header this reads."""
    value = _loads(raw)
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise BadLine(f'the first line is not a workmem export header ({{"format":"{FORMAT}","version":{VERSION}}})')
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise BadLine("the header's version is not an integer")
    if version != VERSION:
        raise BadLine(f"export format version {version}: this workmem reads version {VERSION}")
    return version


def _timestamp(value: object, name: str) -> Any:
    if not isinstance(value, str):
        raise BadLine(f"{name} must be an ISO-8601 string")
    try:
        return from_iso(value)
    except (ValueError, ValidationError) as exc:
        raise BadLine(f"{name} is no ISO-8601 timestamp with a time zone: {exc}") from None


def parse_record(raw: bytes) -> Record:
    """The record on one line, fully validated (as constructing it would); :class:`BadLine` with the reason."""
    value = _loads(raw)
    if not isinstance(value, dict):
        raise BadLine("a record line must be a JSON object")
    kind = value.get("kind")
    if kind not in ("resource", "thread"):
        raise BadLine('"kind" must be "resource" or "thread"')
    fields = RESOURCE_FIELDS if kind == "resource" else THREAD_FIELDS
    missing = [name for name in fields if name not in value]
    if missing:
        raise BadLine(f"a {kind} needs the field(s) {', '.join(missing)}")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise BadLine(f"unknown field(s) for a {kind}: {', '.join(map(repr, unknown))}")
    created_at = _timestamp(value["created_at"], "created_at")
    updated_at = _timestamp(value["updated_at"], "updated_at")
    try:
        if kind == "resource":
            return Resource(
                id=value["id"],
                working_memory=value["working_memory"],
                metadata=value["metadata"],
                created_at=created_at,
                updated_at=updated_at,
            )
        return Thread(
            id=value["id"],
            resource_id=value["resource_id"],
            title=value["title"],
            metadata=value["metadata"],
            created_at=created_at,
            updated_at=updated_at,
        )
    except ValidationError as exc:
        raise BadLine(str(exc)) from None
