"""The workmem export format, version 2: JSON Lines (see ``docs/export-format.md``).

The first line is the header ``{"format":"workmem-export","version":2}``; every
further line is one record, a JSON object whose first key ``kind`` is
``"resource"``, ``"thread"`` or (since version 2) ``"version"``: one version of a
working memory's history. A version-1 export (no ``"version"`` lines) still reads.
The text is canonical: fixed top-level key order, object keys inside metadata sorted by code point, no whitespace
(separators ``,`` and ``:``), non-ASCII characters as themselves (UTF-8),
timestamps as ISO-8601 UTC with milliseconds (``2025-01-02T03:04:05.678Z``),
a float with an integral value (within +/- (2**53 - 1)) written as the integer.
So the same records always give the same bytes, whichever backend they come
from, and :func:`record_line` doubles as the test of "identical records".

A line is at most :data:`MAX_LINE_BYTES` long: the longest canonical line of a
record within the input rules (:mod:`workmem.validation`). A reader refuses a
longer line while reading it (:func:`read_lines`), in bounded memory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, Final

from workmem.errors import ValidationError
from workmem.history import MemoryVersion
from workmem.records import Resource, Thread
from workmem.timestamps import from_iso, to_iso
from workmem.validation import MAX_ID_BYTES, MAX_SAFE_INT, MAX_TEXT_BYTES, MAX_TITLE_BYTES, validate_text

__all__ = [
    "FORMAT",
    "HEADER_LINE",
    "MAX_LINE_BYTES",
    "READABLE_VERSIONS",
    "VERSION",
    "BadLine",
    "Record",
    "field_values",
    "parse_header",
    "parse_line",
    "parse_record",
    "read_lines",
    "record_line",
    "version_line",
    "version_values",
]

FORMAT: Final = "workmem-export"
VERSION: Final = 2
"""The version this workmem writes: 2 added the ``"version"`` lines of working memory's history."""
READABLE_VERSIONS: Final = (1, 2)
HEADER_LINE: Final = json.dumps({"format": FORMAT, "version": VERSION}, separators=(",", ":")) + "\n"
"""The first line of every export this workmem writes, newline included."""

Record = Resource | Thread

RESOURCE_FIELDS: Final = ("kind", "id", "working_memory", "metadata", "created_at", "updated_at")
THREAD_FIELDS: Final = ("kind", "id", "resource_id", "title", "metadata", "created_at", "updated_at")
VERSION_FIELDS: Final = ("kind", "resource_id", "thread_id", "version", "change", "content", "changed_at", "source")

_ESCAPED_BYTE: Final = 6
"""The longest JSON text of one byte of UTF-8 text: a control character, written ``\\u0001`` (canonically too)."""
MAX_LINE_BYTES: Final = (
    _ESCAPED_BYTE * (2 * MAX_ID_BYTES + MAX_TITLE_BYTES + MAX_TEXT_BYTES)  # a thread's ids, title, working memory
    + MAX_TEXT_BYTES  # the rest of its metadata, whose limit is on its JSON text already
    + 512  # the field names, quotes and punctuation, two timestamps
)
"""The longest line (newline not counted) of the format: 29,372,928 bytes, about 28 MiB.

The canonical line of a thread whose ids, title and working memory are as
long as the input rules allow, each byte a control character written as a
six-byte escape, and whose other metadata takes its 4 MiB of JSON text; a
resource's longest line is shorter. A reader refuses a longer line unread.
"""


class BadLine(ValidationError):
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


def version_values(version: MemoryVersion) -> dict[str, Any]:
    """A history version's fields in format order and canonical form (``kind`` ``"version"`` first; its own kind
    of change is ``change``)."""
    return {
        "kind": "version",
        "resource_id": version.resource_id,
        "thread_id": version.thread_id,
        "version": version.version,
        "change": version.kind,
        "content": version.content,
        "changed_at": to_iso(version.changed_at),
        "source": _canonical(version.source),
    }


def version_line(version: MemoryVersion) -> str:
    """The canonical line of one version of a working memory's history, newline included."""
    return json.dumps(version_values(version), ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"


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


_SAFE_DIGITS: Final = len(str(MAX_SAFE_INT))


def _int(text: str) -> int:
    """An integer of the line, refused before conversion when its digits alone put it out of range."""
    digits = len(text) - text.startswith("-")
    if digits > _SAFE_DIGITS or abs(value := int(text)) > MAX_SAFE_INT:
        shown = text if len(text) <= 40 else f"{text[:20]}... ({digits:,} digits)"
        raise BadLine(f"the integer {shown} is outside +/-(2**53 - 1)")
    return value


def _loads(raw: bytes) -> Any:
    try:
        text = _check_bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadLine(f"not UTF-8 (byte {exc.start + 1})") from None
    try:
        return json.loads(
            text, object_pairs_hook=_object_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int
        )
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
    if version not in READABLE_VERSIONS:
        readable = " and ".join(map(str, READABLE_VERSIONS))
        raise BadLine(f"export format version {version}: this workmem reads versions {readable}")
    return version


def _timestamp(value: object, name: str) -> Any:
    if not isinstance(value, str):
        raise BadLine(f"{name} must be an ISO-8601 string")
    try:
        return from_iso(value, zone_required=True)
    except ValidationError as exc:  # out of range, or no time zone
        raise BadLine(f"{name}: {exc}") from None
    except ValueError:  # what fromisoformat cannot read (its message quotes the text: left out)
        raise BadLine(f"{name} is no ISO-8601 timestamp with a time zone") from None


def parse_record(raw: bytes) -> Record:
    """The record on one line, fully validated (as constructing it would); :class:`BadLine` with the reason.

    A resource or a thread: a history line is refused here (:func:`parse_line` reads every kind).
    """
    record = parse_line(raw, version=1)
    assert not isinstance(record, MemoryVersion)
    return record


_FIELDS: Final = {"resource": RESOURCE_FIELDS, "thread": THREAD_FIELDS, "version": VERSION_FIELDS}


def parse_line(raw: bytes, *, version: int = VERSION) -> Record | MemoryVersion:
    """The record or history version on one line of an export of format ``version``, fully validated.

    :class:`BadLine` with the reason; a ``"version"`` line only from format 2 on.
    """
    value = _loads(raw)
    if not isinstance(value, dict):
        raise BadLine("a record line must be a JSON object")
    kind = value.get("kind")
    kinds = ("resource", "thread") if version < 2 else ("resource", "thread", "version")
    if kind not in kinds:
        raise BadLine(f'"kind" must be {" or ".join(map(json.dumps, kinds))}')
    fields = _FIELDS[str(kind)]
    missing = [name for name in fields if name not in value]
    if missing:
        raise BadLine(f"a {kind} needs the field(s) {', '.join(missing)}")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise BadLine(f"unknown field(s) for a {kind}: {', '.join(map(repr, unknown))}")
    arguments = {name: value[name] for name in fields if name != "kind"}  # the record's own keywords
    try:
        if kind == "version":
            arguments["kind"] = arguments.pop("change")
            arguments["changed_at"] = _timestamp(value["changed_at"], "changed_at")
            if isinstance(arguments["version"], bool) or not isinstance(arguments["version"], int):
                raise BadLine("version must be an integer")
            if isinstance(arguments["content"], str):
                validate_text(arguments["content"])
            return MemoryVersion(**arguments)
        for stamp in ("created_at", "updated_at"):
            arguments[stamp] = _timestamp(value[stamp], stamp)
        return (Resource if kind == "resource" else Thread)(**arguments)
    except ValidationError as exc:
        raise BadLine(str(exc)) from None


def read_lines(
    source: BinaryIO | Iterable[bytes], limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes | BadLine]]:
    """``(number, line)`` for each line of ``source``, from 1; a :class:`BadLine` in place of a line over ``limit``.

    A stream (anything with ``readline``: a file opened ``"rb"``,
    ``sys.stdin.buffer``) is read at most ``limit + 1`` bytes at a time: a
    longer line is never held whole, but skipped to its newline in small
    pieces. Other iterables are taken as lines already read (each checked
    against ``limit`` too). A line that is not bytes raises
    :class:`~workmem.errors.ValidationError` (a file opened in text mode).
    """
    readline: Callable[[int], bytes] | None = getattr(source, "readline", None)
    if not callable(readline):
        for number, line in enumerate(source, 1):
            raw = _check_bytes(line)
            yield number, _too_long(limit) if len(raw) - raw.endswith(b"\n") > limit else raw
        return
    number = 0
    while raw := _check_bytes(readline(limit + 1)):
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # the rest of the line, piece by piece, dropped
                raw = _check_bytes(readline(1 << 16))
            yield number, _too_long(limit)
        else:
            yield number, raw


def _check_bytes(raw: object) -> bytes:
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, bytearray | memoryview):
        return bytes(raw)
    raise ValidationError(f"an export is read as bytes (a file opened 'rb'), not {type(raw).__name__}")


def _too_long(limit: int) -> BadLine:
    return BadLine(f"longer than {limit:,} bytes, the longest line a valid record can have")
