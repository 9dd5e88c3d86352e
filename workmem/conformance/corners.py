"""Corner states the state machine reaches only by luck, as fixed examples every profile runs.

Blank working memory, stored text that is JSON but no object (``null``,
``false``, ``0``, ``""``, ``[]``) and a thread re-created under a deleted
thread's id: each once let an adapter bug through a ``ci`` run.
"""

from __future__ import annotations

import json
from typing import Any

from workmem.errors import WorkingMemoryFormatError
from workmem.records import Resource, Thread

from .expect import clock_past, json_difference
from .registry import CheckContext, check
from .strategies import STAMPS

__all__ = ["BLANK_TEXTS", "NOT_OBJECTS"]

BLANK_TEXTS = ["", " ", "  \n\t ", "\r\n"]
"""Working memory that merges as ``{}`` (missing, empty or only whitespace)."""

NOT_OBJECTS = ["null", " null ", "false", "true", "0", "3", "-0.5", '""', '"{}"', "[]", "[1]"]
"""Stored text that is JSON but no object: a merge into it raises ``WorkingMemoryFormatError``."""


def _same_json(expected: Any, actual: Any, what: str) -> None:
    difference = json_difference(expected, actual)
    assert difference is None, f"{what}: {difference}"


def _doc(text: str | None, what: str) -> Any:
    assert text is not None, f"{what}: no working memory stored"
    return json.loads(text)


@check(
    "corner_states",
    'blank memory merges as {}; a merge into null, false, 0, "" or [] raises, changes nothing; '
    "a re-created thread starts empty",
)
def corner_states(ctx: CheckContext) -> None:
    storage, other = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    storage.save_thread(Thread(tid, rid, "t", {"keep": 1}))
    addresses: list[tuple[str, dict[str, Any]]] = [
        ("resource", {"scope": "resource", "resource_id": rid}),
        ("thread", {"scope": "thread", "thread_id": tid, "resource_id": rid}),
    ]

    def record(scope: str) -> Resource | Thread | None:
        return other.get_resource(rid) if scope == "resource" else other.get_thread(tid)

    for scope, ids in addresses:
        for text in BLANK_TEXTS:
            storage.set_working_memory(text, **ids)
            what = f"merge_working_memory({{'a': 1}}) into {scope} memory {text!r} (blank counts as {{}})"
            try:
                merged = storage.merge_working_memory({"a": 1}, **ids)
            except Exception as exc:
                raise AssertionError(f"{what} raised {type(exc).__name__}: {exc}") from exc
            _same_json({"a": 1}, merged, f"{what} returned")
            _same_json({"a": 1}, _doc(other.get_working_memory(**ids), what), f"{what} stored")
        for text in NOT_OBJECTS:
            storage.set_working_memory(text, **ids)
            before = record(scope)
            assert before is not None, f"the {scope} is missing"
            clock_past(before.updated_at)
            what = f"merge_working_memory({{'a': 1}}) into {scope} memory {text!r} (JSON, but no object)"
            try:
                merged = storage.merge_working_memory({"a": 1}, **ids)
            except WorkingMemoryFormatError:
                pass
            except Exception as exc:
                wrong = f"{type(exc).__name__}: {exc}"
                raise AssertionError(f"{what} raised {wrong}, not WorkingMemoryFormatError") from exc
            else:
                raise AssertionError(f"{what} returned {merged!r} instead of raising WorkingMemoryFormatError")
            stored = other.get_working_memory(**ids)
            assert stored == text, f"{what} failed but changed the stored text to {stored!r}"
            after = record(scope)
            assert after is not None, f"{what} failed but removed the {scope}"
            assert after.updated_at == before.updated_at, (
                f"{what} failed but moved updated_at from {before.updated_at.isoformat()} to "
                f"{after.updated_at.isoformat()}: a refused merge changes nothing"
            )
            assert after == before, f"{what} failed but changed the {scope}: {before!r} became {after!r}"

    # A thread re-created under a deleted thread's id is new: nothing of the old one comes back.
    for how in ("save_thread", "create_thread"):
        t, first, second = p + how, p + how + "-a", p + how + "-b"
        storage.save_thread(Thread(t, first, "old", {"k": 1}))
        storage.set_working_memory('{"old": true}', scope="thread", thread_id=t)
        storage.merge_working_memory({"more": 1}, scope="thread", thread_id=t)
        for owner in (first, second, first):
            assert storage.delete_thread(t) is True, f"delete_thread({t!r}) of an existing thread returned False"
            gone = other.get_working_memory(scope="thread", thread_id=t)
            assert other.get_thread(t) is None and gone is None, f"thread {t!r} is still there after delete_thread"
            fresh = Thread(t, owner, "new", None, STAMPS[1], STAMPS[1])
            getattr(storage, how)(fresh)
            for reader in (storage, other):
                got = reader.get_thread(t)
                assert got == fresh, f"{how} of {t!r} after delete_thread stored {got!r}, not {fresh!r}"
                memory = reader.get_working_memory(scope="thread", thread_id=t, resource_id=owner)
                assert memory is None, (
                    f"thread {t!r} re-created by {how} after delete_thread has the deleted thread's working "
                    f"memory {memory!r}"
                )
            merged = storage.merge_working_memory({"x": 1}, scope="thread", thread_id=t, resource_id=owner)
            _same_json({"x": 1}, merged, f"merge into thread {t!r} re-created by {how} after delete_thread")
            for resource_id in (first, second):
                listed = [x.id for x in other.list_threads(resource_id).threads]
                want = [t] if resource_id == owner else []
                assert listed == want, f"{t!r} re-created for {owner!r}: list_threads({resource_id!r}) is {listed}"
