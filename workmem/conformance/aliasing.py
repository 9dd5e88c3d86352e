"""No aliasing: what a call returns, and what it was given, belongs to the caller.

The contract (:class:`~workmem.storage.MemoryStorage`): a record a call returns
is the caller's private copy, and so is the document a merge returns; the
storage keeps no reference to a record, metadata or patch it was given. The
check edits every one of them after its call (adding keys, appending to
lists, nested ones too), makes an unrelated write through the same
connection (a cache of parsed records writes what it holds back with it), and
reads everything back through that connection and a second one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from workmem.records import WORKING_MEMORY_KEY, Resource, Thread
from workmem.storage import MemoryStorage

from .expect import json_difference
from .history import scribble
from .registry import CheckContext, check
from .strategies import STAMPS

__all__ = ["no_aliasing"]


_Part = Literal["resource_metadata", "resource_memory", "thread_metadata", "thread_memory"]


@dataclass
class _Stored:
    """What the check expects the backend to hold."""

    resource_metadata: dict[str, Any] = field(default_factory=dict)
    resource_memory: dict[str, Any] = field(default_factory=dict)
    thread_metadata: dict[str, Any] = field(default_factory=dict)
    thread_memory: dict[str, Any] = field(default_factory=dict)
    writes: int = 0

    def given(self, part: _Part, tag: str, *, merged: bool = False) -> dict[str, Any]:
        """A fresh ``_nested(tag)`` for the caller to give; ``part`` then holds it (merged in, or in its place)."""
        setattr(self, part, (getattr(self, part) | _nested(tag)) if merged else _nested(tag))
        return _nested(tag)


def _nested(tag: str) -> dict[str, Any]:
    """A value with a nested object and a list: a shallow copy would still share them."""
    return {tag: {"list": [1, {"deep": tag}], "object": {"x": 1}}}


@check(
    "no_aliasing",
    "records and documents a call returns are the caller's own, and so is what it was given: editing them after"
    " the call changes nothing stored (read back through the same connection and another)",
)
def no_aliasing(ctx: CheckContext) -> None:
    one, two = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid, other_rid, other_tid = p + "r", p + "t", p + "r2", p + "t2"
    want = _Stored()

    def after(what: str, *edited: object) -> None:
        """Edit ``edited`` as a caller may, write something unrelated through ``one``, read both back twice."""
        for value in edited:
            scribble(value)
        want.writes += 1
        one.update_resource(rid, metadata={"unrelated": want.writes})
        want.resource_metadata["unrelated"] = want.writes
        one.update_thread(tid, title=f"unrelated write {want.writes}")
        for where, conn in (("the same connection", one), ("a second connection", two)):
            _same_as_stored(conn, where, what, rid, tid, want)

    created = Thread(tid, rid, "t", want.given("thread_metadata", "created"), STAMPS[0], STAMPS[0])
    returned: object = one.create_thread(created)
    after("the Thread passed to create_thread and the one it returned", created.metadata, returned)

    record = Resource(rid, None, want.given("resource_metadata", "resource"))
    returned = one.save_resource(record)
    after("the Resource passed to save_resource (and its metadata) and the one it returned", record.metadata, returned)

    update = want.given("resource_metadata", "update", merged=True)
    returned = one.update_resource(rid, metadata=update)
    after("the metadata passed to update_resource and the Resource it returned", update, returned)
    after("the Resource get_resource returned", one.get_resource(rid))

    replacement = Thread(tid, rid, "saved", want.given("thread_metadata", "saved"))
    returned = one.save_thread(replacement)
    after("the Thread passed to save_thread and the one it returned", replacement.metadata, returned)

    update = want.given("thread_metadata", "thread update", merged=True)
    returned = one.update_thread(tid, metadata=update)
    after("the metadata passed to update_thread and the Thread it returned", update, returned)
    after("the Thread get_thread returned", one.get_thread(tid, resource_id=rid))
    after("the ThreadPage list_threads returned", one.list_threads(rid))

    patch = want.given("resource_memory", "resource merge", merged=True)
    returned = one.merge_working_memory(patch, scope="resource", resource_id=rid)
    after("the patch passed to a resource-scope merge_working_memory and the document it returned", patch, returned)
    patch = want.given("thread_memory", "thread merge", merged=True)
    returned = one.merge_working_memory(patch, scope="thread", thread_id=tid, resource_id=rid)
    after("the patch passed to a thread-scope merge_working_memory and the document it returned", patch, returned)

    # The pages from just before this prefix: ids compare by code point, so they start with these records
    # (iter_threads and iter_resources read the same pages).
    after(
        "the records threads_after and resources_after returned",
        one.threads_after(p, limit=1),
        one.resources_after(p, limit=1),
    )

    inserted_resource = Resource(other_rid, None, _nested("inserted"))
    inserted_thread = Thread(other_tid, other_rid, "inserted", _nested("inserted"))
    one.insert_resources([inserted_resource])
    one.insert_threads([inserted_thread])
    scribble(inserted_resource.metadata)
    scribble(inserted_thread.metadata)
    replaced = Thread(tid, rid, "replaced", _nested("replaced") | {WORKING_MEMORY_KEY: json.dumps(want.thread_memory)})
    want.thread_metadata = _nested("replaced")
    one.restore_thread(replaced)
    after("the records passed to insert_resources, insert_threads and restore_thread", replaced.metadata)
    for conn in (one, two):
        for got, expected, what in (
            (conn.get_resource(other_rid), _nested("inserted"), "insert_resources"),
            (conn.get_thread(other_tid), _nested("inserted"), "insert_threads"),
        ):
            assert got is not None, f"the record passed to {what} is gone"
            _no_difference(got.metadata, expected, f"after the caller edited the record it passed to {what}")


def _same_as_stored(conn: MemoryStorage, where: str, what: str, rid: str, tid: str, want: _Stored) -> None:
    resource, thread = conn.get_resource(rid), conn.get_thread(tid)
    assert resource is not None and thread is not None, f"after the caller edited {what}, {where} misses a record"
    context = f"after the caller edited {what} (then wrote something unrelated), {where} reads"
    _no_difference(resource.metadata, want.resource_metadata, f"{context} the resource's metadata as")
    _no_difference(_document(resource.working_memory), want.resource_memory, f"{context} resource working memory as")
    metadata = dict(thread.metadata or {})
    memory = metadata.pop(WORKING_MEMORY_KEY, None)
    _no_difference(metadata, want.thread_metadata, f"{context} the thread's metadata as")
    _no_difference(_document(memory), want.thread_memory, f"{context} thread working memory as")


def _document(text: object) -> Any:
    return json.loads(text) if isinstance(text, str) and text.strip() else {}


def _no_difference(got: Any, expected: Any, context: str) -> None:
    difference = json_difference(expected, got or {})
    assert difference is None, (
        f"{context} {got!r}, expected {expected!r} ({difference}): the storage kept a reference to an object the"
        " caller owns. A record or document a call returns is the caller's private copy, and the storage keeps"
        " no reference to what it was given (copy on the way in and out, as workmem.records.private_copy does)"
    )
