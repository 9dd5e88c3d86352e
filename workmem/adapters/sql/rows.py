"""Rows to records, the same for every SQL dialect (no I/O).

Rows come from :meth:`Dialect.resource_columns` / :meth:`Dialect.thread_columns`:
metadata as JSON text (or bytes, or an already decoded object), timestamps as
``datetime`` or ISO-8601 text.

Rows are what the database already holds, so records are built with
:func:`~workmem.records.trusted_thread` / :func:`~workmem.records.trusted_resource`
(no re-validation); this module guarantees what those need: ``str`` ids and
title (anything else goes through the validating constructor, which refuses
it), metadata a ``dict`` or ``None``, timestamps UTC with whole milliseconds.
Each value is parsed once: the ``…Z`` text libSQL keeps takes one
``fromisoformat``, a ``datetime`` already in UTC milliseconds is used as is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from workmem.errors import UnreadableRecordError, WorkmemError
from workmem.history import HistoryKey, MemoryVersion
from workmem.records import Resource, Thread, trusted_resource, trusted_thread
from workmem.timestamps import from_iso, normalize
from workmem.validation import MAX_SAFE_INT, json_type

__all__ = ["decode_time", "load_json", "load_object", "resource_from_row", "thread_from_row", "version_from_row"]


def _number(text: str) -> int | float:
    # Databases that keep JSON numbers as decimals (PostgreSQL's jsonb) print 1e300 as 1 and 300 zeros;
    # valid integers stay within 2**53, so anything larger was a float. Fewer than 16 characters is
    # always within (the check is skipped: this runs for every integer read).
    if len(text) < 16:
        return int(text)
    value = int(text)
    return value if abs(value) <= MAX_SAFE_INT else float(text)


_decoder = json.JSONDecoder(parse_int=_number)  # built once (json.loads builds one per call)
_scan: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once  # type: ignore[attr-defined]
# (the C scanner: one value from an index, without decode()'s whitespace handling)


def load_json(text: str | bytes) -> Any:
    """Parse stored JSON text."""
    if not isinstance(text, str):
        text = text.decode("utf-8")
    try:
        value, end = _scan(text, 0)
    except StopIteration:  # leading whitespace, or no value at all: decode() handles or explains it
        end = -1
    return value if end == len(text) else _decoder.decode(text)


def load_object(value: Any) -> dict[str, Any] | None:
    """Stored metadata as a dict (``None`` stays ``None``)."""
    if value is None or type(value) is dict:
        return value
    parsed = value if isinstance(value, dict) else load_json(value)
    if type(parsed) is str:  # @mastra/pg's saveResource keeps the object's JSON text as a jsonb string
        parsed = _json_text_object(parsed)
    if not isinstance(parsed, dict):
        raise ValueError(f"stored metadata is a JSON {json_type(parsed)}, not an object")
    return parsed


_fromisoformat = datetime.fromisoformat


def decode_time(value: Any) -> datetime:
    """A stored timestamp: ``datetime`` (naive means UTC) or ISO-8601 text, as UTC milliseconds."""
    if type(value) is str and len(value) == 24 and value[19] == "." and value[23] == "Z":
        # 2025-01-02T03:04:05.678Z, as workmem and Mastra write it: already UTC milliseconds.
        try:
            return _fromisoformat(value)
        except ValueError:
            pass  # not a date after all: from_iso explains
    elif isinstance(value, datetime):
        if value.tzinfo is UTC:
            return value if value.microsecond % 1000 == 0 else normalize(value)
        return normalize(value if value.tzinfo is not None else value.replace(tzinfo=UTC))
    return from_iso(str(value))


def _stored_resource(row: Sequence[Any]) -> Resource:
    rid, working_memory, metadata, created_at, updated_at = row[:5]
    try:
        if type(rid) is not str or (working_memory is not None and type(working_memory) is not str):
            return Resource(
                rid, working_memory, load_object(metadata), decode_time(created_at), decode_time(updated_at)
            )
        return trusted_resource(
            rid, working_memory, load_object(metadata), decode_time(created_at), decode_time(updated_at)
        )
    except (ValueError, OverflowError, RecursionError, WorkmemError) as exc:  # another program wrote it: it alone
        raise UnreadableRecordError("resource", str(rid), str(exc)) from None


def _stored_thread(row: Sequence[Any]) -> Thread:
    tid, resource_id, title, metadata, created_at, updated_at = row[:6]
    try:
        if type(tid) is not str or type(resource_id) is not str or type(title) is not str:
            return Thread(
                tid, resource_id, title, load_object(metadata), decode_time(created_at), decode_time(updated_at)
            )
        return trusted_thread(
            tid, resource_id, title, load_object(metadata), decode_time(created_at), decode_time(updated_at)
        )
    except (ValueError, OverflowError, RecursionError, WorkmemError) as exc:  # another program wrote it: it alone
        raise UnreadableRecordError("thread", str(tid), str(exc)) from None


# resource_from_row and thread_from_row are every read's hot path, so the row shape workmem and
# Mastra write -- str columns, metadata as JSON object text (or already decoded, or NULL), and
# 2025-01-02T03:04:05.678Z stamps -- is mapped with as few calls as can be (right after a driver
# call, each costs more than the work it does); any other row, and any doubt (a value that does
# not parse), goes to _stored_resource / _stored_thread, which explain or convert. _written_tail
# checks the columns both rows end with (metadata and the two stamps).


def _json_text_object(text: str) -> Any:
    """``text`` decoded if it is exactly one JSON object, else ``text`` itself (for :func:`load_object`)."""
    try:
        value, end = _scan(text, 0)
    except (StopIteration, ValueError, RecursionError):  # not JSON (another program's row): load_object explains
        return text
    return value if end == len(text) and type(value) is dict else text


def _written_tail(
    metadata: Any, created_at: Any, updated_at: Any
) -> tuple[dict[str, Any] | None, datetime, datetime] | None:
    """The columns both rows end with, if they are as workmem and Mastra write them, else ``None``.

    That is: both stamps ``2025-01-02T03:04:05.678Z`` text and metadata a JSON object (its
    text, or already decoded) or NULL; they come back as ``trusted_*`` takes them.
    """
    if not (
        type(created_at) is str
        and type(updated_at) is str
        and len(created_at) == len(updated_at) == 24
        and created_at[19] == updated_at[19] == "."
        and created_at[23] == updated_at[23] == "Z"
    ):
        return None
    if type(metadata) is str:
        metadata = _json_text_object(metadata)
    if metadata is not None and type(metadata) is not dict:
        return None
    try:
        return metadata, _fromisoformat(created_at), _fromisoformat(updated_at)
    except ValueError:
        return None  # not a date after all: the slow path explains


def resource_from_row(row: Sequence[Any]) -> Resource:
    rid, working_memory, metadata, created_at, updated_at = row[:5]
    tail = _written_tail(metadata, created_at, updated_at)
    if tail is not None and type(rid) is str and (type(working_memory) is str or working_memory is None):
        return trusted_resource(rid, working_memory, *tail)
    return _stored_resource(row)


def thread_from_row(row: Sequence[Any]) -> Thread:
    tid, resource_id, title, metadata, created_at, updated_at = row[:6]
    tail = _written_tail(metadata, created_at, updated_at)
    if tail is not None and type(tid) is str and type(resource_id) is str and type(title) is str:
        return trusted_thread(tid, resource_id, title, *tail)
    return _stored_thread(row)


def version_from_row(key: HistoryKey, row: Sequence[Any]) -> MemoryVersion:
    """A version of ``key``'s working memory from a row of :meth:`Dialect.version_columns`."""
    number, content, changed_at, kind, source = row[:5]
    try:
        parsed = None if source is None else load_json(source)
        return MemoryVersion(
            key.resource_id, key.thread_id, int(number), content, decode_time(changed_at), kind, parsed
        )
    except (ValueError, TypeError, OverflowError, RecursionError, WorkmemError) as exc:  # another program wrote it
        raise UnreadableRecordError("version", f"{key.memory_id} v{number}", str(exc)) from None
