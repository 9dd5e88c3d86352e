"""MongoDB documents as the TypeScript Mastra adapter keeps them, mapped to and from workmem records.

No I/O here: collection names, index specs, document builders, CAS filters and
row mapping, shared by :class:`~workmem.adapters.mongodb.storage.MongoStorage` and
:class:`~workmem.adapters.mongodb.storage.AsyncMongoStorage`. What an update
writes is derived from the contract's rules in :mod:`workmem.changes`
(:func:`resource_upsert`, :func:`resource_rewrite`, :func:`thread_touch`,
:func:`thread_rewrite`, :func:`thread_replacement`), never restated here.

Document shapes (``@mastra/mongodb``):

* ``mastra_threads``: ``{id, resourceId, title, metadata, createdAt, updatedAt}``;
  ``metadata`` is a native sub-document, dates are BSON dates.
* ``mastra_resources``: ``{id, workingMemory, metadata, createdAt, updatedAt}``;
  ``metadata`` is stored as a JSON *string* (older Mastra writes it that way;
  newer Mastra and workmem read both the string and the sub-document form).

workmem adds one field, ``workmemRev`` (an int bumped by every workmem write),
which its optimistic compare-and-swap loops check together with ``updatedAt``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from workmem.errors import UnreadableRecordError
from workmem.kit import ResourceChange, ThreadChange, replaced_thread, shallow, updated_resource, updated_thread
from workmem.records import (
    UNSET,
    Direction,
    OrderBy,
    Resource,
    Thread,
    Unset,
    thread_fields,
    trusted_resource,
    trusted_thread,
)
from workmem.timestamps import from_iso, normalize, to_iso
from workmem.validation import MAX_SAFE_INT, dump_json

__all__ = [
    "DEFAULT_DATABASE",
    "RESOURCES",
    "RESOURCE_INDEXES",
    "REV",
    "THREADS",
    "THREAD_INDEXES",
    "Document",
    "IndexSpec",
    "cas_filter",
    "next_rev",
    "raw_metadata",
    "resource_document",
    "resource_from_document",
    "resource_insert",
    "resource_insert_fields",
    "resource_metadata_value",
    "resource_rewrite",
    "resource_set",
    "resource_upsert",
    "resource_working_memory",
    "sort_spec",
    "stored_memory",
    "thread_from_document",
    "thread_insert",
    "thread_insert_fields",
    "thread_replacement",
    "thread_restoration",
    "thread_rewrite",
    "thread_touch",
    "thread_upsert_fields",
    "to_plain",
]

DEFAULT_DATABASE: Final = "mastra"
"""The database used when the URL names none."""
THREADS: Final = "mastra_threads"
RESOURCES: Final = "mastra_resources"
REV: Final = "workmemRev"
"""Revision counter bumped by every workmem write; the token of the compare-and-swap loops."""

Document = dict[str, Any]
"""A MongoDB document (or filter, or update) as pymongo takes and returns it."""
IndexSpec = tuple[list[tuple[str, int]], dict[str, Any]]
"""``(keys, options)`` for ``Collection.create_index``."""

# The same key patterns (hence the same default names) as @mastra/mongodb, so
# creating them on a database Mastra already uses is a no-op.
THREAD_INDEXES: Final[tuple[IndexSpec, ...]] = (
    ([("id", 1)], {"unique": True}),
    ([("resourceId", 1), ("createdAt", -1)], {}),
    ([("resourceId", 1), ("updatedAt", -1)], {}),
)
RESOURCE_INDEXES: Final[tuple[IndexSpec, ...]] = (([("id", 1)], {"unique": True}),)

_ORDER_FIELDS: Final[Mapping[str, str]] = {"created_at": "createdAt", "updated_at": "updatedAt"}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def sort_spec(order_by: OrderBy, direction: Direction) -> list[tuple[str, int]]:
    """``order_by`` then ``id``, both in ``direction``."""
    sign = 1 if direction == "asc" else -1
    return [(_ORDER_FIELDS[order_by], sign), ("id", sign)]


# -- BSON values -> JSON values ------------------------------------------------------


def _as_mapping(value: Any) -> dict[str, Any] | None:
    """A decoded sub-document as a dict; pymongo decodes ``{$ref, $id}`` sub-documents as ``DBRef``."""
    if isinstance(value, Mapping):
        return dict(value)
    as_doc = getattr(value, "as_doc", None)  # bson.dbref.DBRef, without importing bson here
    if callable(as_doc):
        return dict(as_doc())
    return None


def to_plain(value: Any) -> Any:
    """A decoded BSON value as a plain JSON value (what Mastra's ``JSON.stringify`` would make of it)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        # bson.Int64 -> int; beyond 2**53 a JavaScript reader sees a double, and so do we.
        return int(value) if abs(value) <= MAX_SAFE_INT else float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return to_iso(value if value.tzinfo else value.replace(tzinfo=UTC))
    if isinstance(value, (list, tuple)):
        return [to_plain(item) for item in value]
    mapping = _as_mapping(value)
    if mapping is not None:
        return {str(key): to_plain(item) for key, item in mapping.items()}
    return str(value)  # ObjectId, Decimal128, Binary, ...


def raw_metadata(value: Any) -> dict[str, Any] | None:
    """Thread ``metadata`` as decoded, values untouched so writing it back keeps their BSON types.

    A sub-document is the normal form; a JSON string (which Mastra's reader also
    accepts) is parsed; anything else counts as no metadata.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return _as_mapping(value)


def _timestamp(value: Any, fallback: datetime | None = None) -> datetime:
    try:
        if isinstance(value, datetime):
            return normalize(value if value.tzinfo else value.replace(tzinfo=UTC))
        if isinstance(value, str):
            return from_iso(value)
    except ValueError:  # not a date, or not one in years 1 to 9999 UTC
        pass
    return fallback or _EPOCH


def _timestamps(document: Mapping[str, Any]) -> tuple[datetime, datetime]:
    created = _timestamp(document.get("createdAt"))
    return created, _timestamp(document.get("updatedAt"), created)


def resource_metadata_value(value: Any) -> dict[str, Any] | None:
    """Resource ``metadata`` as stored: a JSON string (Mastra's format) or a sub-document."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    plain = to_plain(value)
    return plain if isinstance(plain, dict) else None


def resource_working_memory(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return dump_json(to_plain(value))  # a sub-document someone stored: read it as its JSON text


# -- documents -> records -------------------------------------------------------------


def thread_from_document(document: Mapping[str, Any]) -> Thread:
    """The thread of a stored document, lenient where Mastra is (a title of any length, odd metadata is none).

    Raises :class:`UnreadableRecordError` when it has no string ``id`` and ``resourceId``.
    """
    thread_id, owner, title = document.get("id"), document.get("resourceId"), document.get("title")
    if not isinstance(thread_id, str) or not isinstance(owner, str):
        reason = "the thread document has no string id and resourceId"
        raise UnreadableRecordError("thread", str(thread_id), reason)
    created, updated = _timestamps(document)
    metadata = to_plain(raw_metadata(document.get("metadata")))
    return trusted_thread(
        thread_id,
        owner,
        title if isinstance(title, str) else "",
        metadata if isinstance(metadata, dict) else None,
        created,
        updated,
    )


def resource_from_document(document: Mapping[str, Any]) -> Resource:
    """The resource of a stored document (lenient as :func:`thread_from_document`)."""
    resource_id = document.get("id")
    if not isinstance(resource_id, str):
        raise UnreadableRecordError("resource", str(resource_id), "the resource document has no string id")
    created, updated = _timestamps(document)
    return trusted_resource(
        resource_id,
        resource_working_memory(document.get("workingMemory")),
        resource_metadata_value(document.get("metadata")),
        created,
        updated,
    )


# -- records -> documents -------------------------------------------------------------


def thread_insert(thread: Thread) -> Document:
    """The whole new document of ``thread`` (revision 1), as ``insert_one`` / ``insert_many`` take it."""
    return {**thread_fields(thread), REV: 1}


def thread_upsert_fields(thread: Thread) -> Document:
    """What an upsert of a new ``thread`` sets on insert: every field but ``id`` (the filter's), owner included."""
    document = thread_insert(thread)
    del document["id"]
    return document


def thread_insert_fields(thread: Thread) -> dict[str, Any]:
    """The fields a new thread document gets besides ``id`` and ``resourceId`` (which the upsert filter sets)."""
    document = thread_upsert_fields(thread)
    del document["resourceId"]
    return document


def resource_insert_fields(resource: Resource) -> Document:
    """What an upsert of a new ``resource`` sets on insert: every field but ``id`` (revision 1)."""
    return {**resource_document(resource), REV: 1}


def resource_set(resource: Resource, old: Mapping[str, Any]) -> Document:
    """What a compare-and-swap replacing the stored ``old`` with ``resource`` sets: every field, the next revision."""
    return {**resource_document(resource), REV: next_rev(old)}


def stored_memory(document: Mapping[str, Any] | None) -> str | None:
    """The working memory a stored resource document holds, as workmem reads it (none stored: ``None``)."""
    return None if document is None else resource_working_memory(document.get("workingMemory"))


def resource_insert(resource: Resource) -> Document:
    """The whole new document of ``resource`` (revision 1)."""
    return {"id": resource.id, **resource_insert_fields(resource)}


def thread_restoration(thread: Thread) -> Document:
    """What ``replace_thread(thread)`` sets on the same owner's stored thread: title, metadata, both timestamps.

    Metadata is written whole (no key becomes a path); fields workmem does not know are kept.
    """
    document = thread_insert_fields(thread)
    del document[REV]
    return document


def resource_document(resource: Resource) -> dict[str, Any]:
    """Every stored field of ``resource`` except ``id``; ``metadata`` as JSON text, like Mastra."""
    return {
        "workingMemory": resource.working_memory,
        "metadata": None if resource.metadata is None else dump_json(resource.metadata),
        "createdAt": resource.created_at,
        "updatedAt": resource.updated_at,
    }


# -- optimistic concurrency -----------------------------------------------------------


def cas_filter(document: Mapping[str, Any]) -> dict[str, Any]:
    """Match ``document`` only while it is unchanged since it was read.

    ``workmemRev`` changes on every workmem write; ``updatedAt`` also catches
    writes by Mastra's own adapter, which does not know the revision. A missing
    field is matched by ``None`` (which matches missing or null).
    """
    return {"id": document["id"], REV: document.get(REV), "updatedAt": document.get("updatedAt")}


def next_rev(document: Mapping[str, Any]) -> int:
    """The revision a compare-and-swap write of ``document`` stores."""
    rev = document.get(REV)
    return (int(rev) if isinstance(rev, int) and not isinstance(rev, bool) else 0) + 1


# -- the contract's changes as documents ------------------------------------------------
#
# Each builder applies the rule of workmem.changes to a record and picks, from the
# document of the new record, the fields the change touches: a field an update keeps
# is never rewritten, so it stays as stored (whatever its BSON type or form).


def _metadata_given(metadata: dict[str, Any] | Unset | None) -> bool:
    return not isinstance(metadata, Unset) and metadata is not None


def _resource_fields(working_memory: str | Unset | None, metadata: dict[str, Any] | Unset | None) -> list[str]:
    """The stored fields ``update_resource(working_memory, metadata)`` changes."""
    fields = ["updatedAt"]
    if not isinstance(working_memory, Unset):
        fields.append("workingMemory")
    if _metadata_given(metadata):
        fields.append("metadata")
    return fields


def resource_upsert(resource_id: str, working_memory: str | Unset | None, now: datetime) -> Document:
    """``update_resource`` without metadata, as one upsert that needs no read.

    :func:`~workmem.changes.updated_resource` of no stored resource is the
    document a missing id gets; its ``updatedAt`` and a given ``workingMemory``
    are also what the rule sets on a stored one (which keeps its metadata).
    """
    fresh = resource_document(updated_resource(None, resource_id, ResourceChange(working_memory, UNSET, now)))
    changed = _resource_fields(working_memory, UNSET)
    return {
        "$set": {key: fresh[key] for key in changed},
        "$setOnInsert": {key: value for key, value in fresh.items() if key not in changed},
        "$inc": {REV: 1},
    }


def resource_rewrite(
    old: Mapping[str, Any] | None, resource_id: str, change: ResourceChange
) -> tuple[Resource, Document]:
    """:func:`~workmem.changes.updated_resource` on the stored document ``old`` (``None``: none is stored).

    Returns the new resource and the fields to write: without ``old`` the whole
    document (revision 1) to insert; else the fields the update changes and the
    next revision, to ``$set`` where :func:`cas_filter` of ``old`` still matches.
    ``change.max_chars`` is checked on ``old`` (raises before anything is written).
    """
    new = updated_resource(None if old is None else resource_from_document(old), resource_id, change)
    document = resource_document(new)
    if old is None:
        return new, {**document, REV: 1}
    return new, {
        **{key: document[key] for key in _resource_fields(change.working_memory, change.metadata)},
        REV: next_rev(old),
    }


def _thread_set(new: Thread, title: str | Unset) -> Document:
    fields: Document = {"updatedAt": new.updated_at}
    if not isinstance(title, Unset):
        fields["title"] = new.title
    return fields


_STAND_IN: Final = trusted_thread("-", "-", "", None, _EPOCH, _EPOCH)
"""Any thread: what :func:`thread_touch` sets does not depend on the stored one."""


def thread_touch(title: str | Unset, now: datetime) -> Document:
    """``update_thread`` without metadata, as one blind ``$set``: a given title and ``updatedAt``.

    Those fields of :func:`~workmem.changes.updated_thread` do not depend on the
    stored thread (its metadata is kept), so no read and no retry is needed.
    """
    return _thread_set(updated_thread(_STAND_IN, ThreadChange(title, UNSET, now)), title)


def thread_rewrite(old: Mapping[str, Any], change: ThreadChange) -> tuple[Thread, Document]:
    """:func:`~workmem.changes.updated_thread` on the stored document ``old``: the new thread, the fields to write.

    The fields go to ``$set`` where :func:`cas_filter` of ``old`` still matches.
    Merged metadata is written whole (so no key becomes a path), merged with
    :func:`~workmem.changes.shallow` over the stored values as decoded, so a
    value another program stored keeps its BSON type (a date stays a date).
    Raises what the rule raises (merged metadata too large; a working memory over ``change.max_chars``)
    before anything is written, as does ``change.owner`` when another resource owns ``old``.
    """
    new = updated_thread(thread_from_document(old), change)
    fields = {**_thread_set(new, change.title), REV: next_rev(old)}
    if _metadata_given(change.metadata):
        fields["metadata"] = shallow(raw_metadata(old.get("metadata")), change.metadata)
    return new, fields


def thread_replacement(thread: Thread, now: datetime) -> Document:
    """What ``save_thread(thread)`` sets on the same owner's stored thread, which keeps its ``createdAt``.

    :func:`~workmem.changes.replaced_thread` takes title and metadata from the
    call and moves ``updated_at`` to now; nothing it sets depends on the stored
    thread, whose owner the update's filter has already matched.
    """
    new = replaced_thread(thread, thread, now)
    return {"title": new.title, "metadata": new.metadata, "updatedAt": new.updated_at}
