"""History versions as the Upstash adapter stores them (no I/O).

A working memory's versions are one sorted set (:meth:`.keys.KeySpace.history`):
score = version number, member ``{version}:{payload}``, the payload a JSON object
``{"content", "changedAt", "kind", "source"}`` written by Python (the scripts only
prepend the number they choose). A live write's payload also carries ``"write"``,
a random token of that write: the script that numbers the version recognizes a
request the driver re-sent after losing the response (see :mod:`.scripts`).
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime

from workmem.errors import UnreadableRecordError, WorkmemError
from workmem.history import HistoryKey, MemoryVersion, Recording
from workmem.timestamps import from_iso, to_iso
from workmem.validation import dump_json

__all__ = ["decode_version", "imported_payload", "recorded_payload"]


def _payload(content: str | None, changed_at: datetime, kind: str, source_text: str | None, token: str | None) -> str:
    # ``source_text`` is the caller's source as compact JSON, written once at the door: embedded as it is.
    text = f'{{"content":{dump_json(content)},"changedAt":"{to_iso(changed_at)}","kind":"{kind}"'
    text += f',"source":{source_text or "null"}'
    return text + ("}" if token is None else f',"write":"{token}"}}')


def recorded_payload(recording: Recording, content: str | None, changed_at: datetime) -> str:
    """The payload of the version ``recording`` makes (with a fresh write token)."""
    return _payload(content, changed_at, recording.kind, recording.source_text, secrets.token_hex(8))


def imported_payload(version: MemoryVersion) -> str:
    """The payload of an imported version (stored as given)."""
    source = None if version.source is None else dump_json(version.source)
    return _payload(version.content, version.changed_at, version.kind, source, None)


def decode_version(key: HistoryKey, member: str) -> MemoryVersion:
    """The version a history member holds (:class:`UnreadableRecordError` when it is not one workmem wrote)."""
    try:
        number, _, payload = member.partition(":")
        data = json.loads(payload)
        return MemoryVersion(
            key.resource_id,
            key.thread_id,
            int(number),
            data["content"],
            from_iso(data["changedAt"]),
            data["kind"],
            data.get("source"),
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, WorkmemError) as exc:
        raise UnreadableRecordError("history version", f"{key.memory_id}:{member[:20]}", str(exc)) from None
