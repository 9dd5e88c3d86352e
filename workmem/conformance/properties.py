"""Properties beyond the state machine: merge algebra, isolation, ownership, fidelity, timestamps, pages.

Each check runs Hypothesis examples (or one fixed scenario) against the
backend itself, every example under a fresh id prefix.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import assume, given, note
from hypothesis import strategies as st

from workmem.errors import ThreadNotFoundError, ThreadOwnershipError, WorkmemError
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage
from workmem.timestamps import utc_now

from .expect import assert_utc_ms, clock_past, json_difference, json_equal
from .model import model_merge_patch
from .registry import CheckContext, check
from .strategies import STAMPS, json_objects, json_values, patches, small_json, valid_text

__all__ = ["NASTY_TEXTS"]

NASTY_TEXTS = [
    "",
    " ",
    "trailing space ",
    "line\r\nbreaks\n\u2028\u2029",
    "tab\there",
    "quote ' \" ` \\ backslash",
    "'; DROP TABLE mastra_threads; --",
    "%s %d {0} $1 ? :name",
    "{{}} [[]] %%",
    '{"looks": "like json"}',
    "null",
    "é vs e\u0301",
    "👩\u200d👩\u200d👧 ✓ Ω 中文 العربية עברית",
    "\u0301combining first",
    "\ufeffBOM",
    "\uffff\U0010ffff noncharacters",
    "\x01\x1f\x7f controls",
    "🐍" * 50,
]
"""Text that breaks naive adapters: quoting, placeholders, normalization, astral planes, controls."""


def _prop(
    ctx: CheckContext, *strategies: Any, **kw_strategies: Any
) -> Callable[[Callable[..., None]], Callable[[], None]]:
    """``@given`` with the profile's settings."""

    def decorate(func: Callable[..., None]) -> Callable[[], None]:
        prop = given(*strategies, **kw_strategies)(func)  # type: ignore[no-untyped-call]
        test: Callable[[], None] = ctx.profile.settings()(prop)
        return test

    return decorate


def _parsed(text: str | None) -> Any:
    assert text is not None, "working memory is missing"
    return json.loads(text)


# -- RFC 7396 on the backend -----------------------------------------------------------


@check("merge_patch_algebra", "RFC 7396 on the backend: {} is identity, null deletes, arrays replace, idempotent")
def merge_patch_algebra(ctx: CheckContext) -> None:
    storage = ctx.storage

    @_prop(
        ctx,
        doc=st.dictionaries(st.sampled_from(["a", "b", "c"]), small_json(), max_size=3),
        patch=patches(),
        scope=st.sampled_from(["resource", "thread"]),
    )
    def prop(doc: dict[str, Any], patch: dict[str, Any], scope: str) -> None:
        p = ctx.prefix()
        args: dict[str, Any] = {"scope": scope, "resource_id": p + "r"}
        if scope == "thread":
            storage.save_thread(Thread(p + "t", p + "r"))
            args["thread_id"] = p + "t"
        storage.set_working_memory(json.dumps(doc), **args)

        def merge(patch: dict[str, Any]) -> Any:
            merged = storage.merge_working_memory(patch, **args)
            stored = _parsed(storage.get_working_memory(**args))
            note(f"merge({patch!r}) -> {merged!r}, stored {stored!r}")
            assert json_equal(merged, stored), f"merge returned {merged!r} but stored {stored!r}"
            return merged

        assert json_equal(doc, merge({})), "the empty patch changed the document"
        once = merge(patch)
        expected = model_merge_patch(doc, patch)
        assert json_equal(expected, once), f"{doc!r} merged with {patch!r}: expected {expected!r}, got {once!r}"
        assert json_equal(once, merge(patch)), "merging the same patch twice changed the document again"
        # arrays replace whole, nulls delete (at any depth), objects merge deeply
        merge({"list": [1, 2, {"x": 1}], "n": {"x": 1, "y": {"z": 2}}})
        after = merge({"list": [3], "n": {"x": None, "y": {"w": 4}}})
        assert json_equal([3], after.get("list")), f"an array was merged, not replaced: {after.get('list')!r}"
        assert json_equal({"y": {"z": 2, "w": 4}}, after.get("n")), f"objects are not merged deeply: {after.get('n')!r}"
        gone = merge({"list": None, "n": None})
        assert "list" not in gone and "n" not in gone, f"null did not delete: {gone!r}"

    prop()


# -- scope isolation ------------------------------------------------------------------


@check("scope_isolation", "thread and resource scopes never see each other's memory, even on equal ids")
def scope_isolation(ctx: CheckContext) -> None:
    storage, other = ctx.storage, ctx.open()

    @_prop(ctx, a=patches(), b=patches(), text=valid_text(max_size=10))
    def prop(a: dict[str, Any], b: dict[str, Any], text: str) -> None:
        p = ctx.prefix()
        x, owner, child = p + "x", p + "owner", p + "child"
        storage.save_thread(Thread(x, owner, metadata={"keep": 1}))  # thread "x" of another resource
        storage.save_thread(Thread(child, x, metadata={"keep": 2}))  # thread of resource "x"
        storage.update_resource(x, metadata={"keep": 3})
        storage.set_working_memory('{"side":"resource"}', scope="resource", resource_id=x)
        storage.set_working_memory('{"side":"thread"}', scope="thread", thread_id=x)
        storage.merge_working_memory(a, scope="resource", resource_id=x)
        storage.merge_working_memory(b, scope="thread", thread_id=x, resource_id=owner)
        storage.set_working_memory(text, scope="thread", thread_id=child, resource_id=x)

        want_r = model_merge_patch({"side": "resource"}, a)
        want_t = model_merge_patch({"side": "thread"}, b)
        for reader in (storage, other):
            got_r = _parsed(reader.get_working_memory(scope="resource", resource_id=x))
            got_t = _parsed(reader.get_working_memory(scope="thread", thread_id=x))
            assert json_equal(want_r, got_r), f"resource scope of {x!r}: expected {want_r!r}, got {got_r!r}"
            assert json_equal(want_t, got_t), f"thread scope of {x!r}: expected {want_t!r}, got {got_t!r}"
            assert reader.get_working_memory(scope="thread", thread_id=child) == text
            assert reader.get_working_memory(scope="resource", resource_id=owner) is None, (
                "a thread write made its owner's memory"
            )
            assert reader.get_resource(owner) is None, "a thread-scope write created the owning resource"
            resource = reader.get_resource(x)
            assert resource is not None and resource.metadata == {"keep": 3}, f"resource metadata changed: {resource!r}"
            child_thread = reader.get_thread(child)
            assert child_thread is not None and child_thread.metadata == {"keep": 2, "workingMemory": text}
            thread = reader.get_thread(x)
            assert thread is not None and thread.metadata is not None and thread.metadata.get("keep") == 1

    prop()


# -- owner immutability ---------------------------------------------------------------


def _same_thread(got: Thread | None, want: Thread, what: str) -> None:
    """``got`` (read back) is ``want``; else which fields differ, a timestamp's precision named as such."""
    if got == want:
        return
    if got is None:
        raise AssertionError(f"{what}: the thread is gone (expected {want!r})")
    names = ["id", "resource_id", "title", "metadata", "created_at", "updated_at"]
    differ = [n for n in names if getattr(got, n) != getattr(want, n)]
    show: Callable[[object], str] = lambda v: v.isoformat() if isinstance(v, datetime) else repr(v)  # noqa: E731
    shown = "; ".join(f"{n} {show(getattr(want, n))} reads back as {show(getattr(got, n))}" for n in differ)
    if set(differ) <= {"created_at", "updated_at"}:
        raise AssertionError(
            f"{what}: the thread reads back with other timestamps than were stored ({shown}). Timestamps come back"
            " exactly as stored, UTC with whole milliseconds: look at how they are written and parsed (the check"
            " timestamps says more)"
        )
    raise AssertionError(f"{what}: the thread reads back changed: {shown}")


def _raises_ownership(call: Callable[[], object], what: str) -> None:
    try:
        call()
    except ThreadOwnershipError:
        return
    raise AssertionError(f"{what} did not raise ThreadOwnershipError")


@check("owner_immutable", "a thread's owner never changes; other resources get ThreadOwnershipError, nothing changes")
def owner_immutable(ctx: CheckContext) -> None:
    storage, other = ctx.storage, ctx.open()
    p = ctx.prefix()
    tid, a, b = p + "t", p + "a", p + "b"
    original = storage.save_thread(Thread(tid, a, "first", {"k": 1, "workingMemory": "mine"}, STAMPS[0], STAMPS[0]))
    attempts: list[tuple[str, Callable[[], object]]] = [
        ("save_thread with another owner", lambda: storage.save_thread(Thread(tid, b, "stolen", {"k": 2}))),
        ("save_thread with another owner (2nd connection)", lambda: other.save_thread(Thread(tid, b, "stolen"))),
        (
            "set_working_memory as another owner",
            lambda: storage.set_working_memory("x", scope="thread", thread_id=tid, resource_id=b),
        ),
        ("update_thread as another owner", lambda: storage.update_thread(tid, title="stolen", resource_id=b)),
        ("update_thread(metadata=) as another owner", lambda: other.update_thread(tid, metadata={}, resource_id=b)),
        ("delete_thread as another owner", lambda: storage.delete_thread(tid, resource_id=b)),
        (
            "merge_working_memory as another owner",
            lambda: storage.merge_working_memory({"x": 1}, scope="thread", thread_id=tid, resource_id=b),
        ),
        (
            "get_working_memory as another owner",
            lambda: storage.get_working_memory(scope="thread", thread_id=tid, resource_id=b),
        ),
    ]
    for what, call in attempts:
        _raises_ownership(call, what)
        for reader in (storage, other):
            _same_thread(reader.get_thread(tid), original, f"after {what} (refused)")
    assert storage.get_thread(tid, resource_id=b) is None, "get_thread(resource_id=other) returned the thread"
    _same_thread(storage.get_thread(tid, resource_id=a), original, "get_thread(resource_id=owner)")
    assert [t.id for t in storage.list_threads(b).threads] == [], "the thread is listed under another resource"
    listed = [t.id for t in storage.list_threads(a).threads]
    assert listed == [tid], f"list_threads of the owner lists {listed}, expected [{tid!r}]"
    storage.update_thread(tid, title="renamed", metadata={"resourceId": b})
    renamed = storage.save_thread(Thread(tid, a, "again"))
    assert renamed.resource_id == a and renamed.title == "again", f"save_thread by the owner returned {renamed!r}"
    _same_thread(other.get_thread(tid), renamed, "after save_thread by the owner, a second connection")
    _owner_checked_by_the_write(storage, other, tid, a, b)


def _owner_checked_by_the_write(storage: MemoryStorage, other: MemoryStorage, tid: str, a: str, b: str) -> None:
    """Writes naming an owner are conditioned on it by the backend, not by a read before them.

    The thread is deleted and its id re-created under ``b``: a write naming ``a``
    (``a``'s agent, which saw its own thread a moment ago) must not land on ``b``'s.
    """
    mine = storage.update_thread(tid, title="mine", resource_id=a)
    assert mine.title == "mine", f"update_thread(title='mine', resource_id=owner) returned {mine!r}"
    assert storage.delete_thread(tid, resource_id=a) is True, "delete_thread(resource_id=owner) did not delete"
    assert storage.delete_thread(tid, resource_id=a) is False, "delete_thread of a deleted thread returned True"
    try:
        storage.update_thread(tid, title="x", resource_id=a)
    except ThreadNotFoundError:
        pass
    else:
        raise AssertionError("update_thread(resource_id=...) of a deleted thread did not raise ThreadNotFoundError")
    theirs = other.create_thread(Thread(tid, b, "theirs", {"workingMemory": "b's"}, STAMPS[1], STAMPS[1]))
    attempts: list[tuple[str, Callable[[], object]]] = [
        ("update_thread", lambda: storage.update_thread(tid, title="mine", resource_id=a)),
        ("update_thread(metadata=...)", lambda: storage.update_thread(tid, metadata={"k": 3}, resource_id=a)),
        ("delete_thread", lambda: storage.delete_thread(tid, resource_id=a)),
        (
            "set_working_memory",
            lambda: storage.set_working_memory("mine", scope="thread", thread_id=tid, resource_id=a),
        ),
        (
            "merge_working_memory",
            lambda: storage.merge_working_memory({"k": 1}, scope="thread", thread_id=tid, resource_id=a),
        ),
    ]
    for what, call in attempts:
        _raises_ownership(call, f"{what} naming the former owner of an id re-created under another resource")
        _same_thread(other.get_thread(tid), theirs, f"after {what} naming the former owner (refused)")
    assert other.delete_thread(tid, resource_id=b) is True


# -- round trips ----------------------------------------------------------------------


def _round_trip(writer: MemoryStorage, reader: MemoryStorage, p: str, key: str, text: str, title: str) -> None:
    rid, tid = p + "r" + key, p + "t" + key
    writer.update_resource(rid, working_memory=text, metadata={key: text, "n": {key: [text]}})
    writer.save_thread(Thread(tid, rid, title, {key: text}))
    writer.set_working_memory(text, scope="thread", thread_id=tid, resource_id=rid)
    resource, thread = reader.get_resource(rid), reader.get_thread(tid)
    assert resource is not None and thread is not None, "a record written is missing"
    assert resource.working_memory == text, f"working memory {text!r} came back as {resource.working_memory!r}"
    assert resource.metadata == {key: text, "n": {key: [text]}}, f"metadata came back as {resource.metadata!r}"
    assert thread.title == title, f"title {title!r} came back as {thread.title!r}"
    expected = {key: text, "workingMemory": text}
    assert thread.metadata == expected, f"thread metadata came back as {thread.metadata!r}"
    assert reader.get_working_memory(scope="thread", thread_id=tid) == text
    assert reader.get_working_memory(scope="resource", resource_id=rid) == text
    assert [t.id for t in reader.list_threads(rid).threads] == [tid], f"id {tid!r} did not come back from list_threads"


@check("round_trip_text", "any Unicode text (ids, titles, keys, working memory) comes back byte for byte")
def round_trip_text(ctx: CheckContext) -> None:
    writer, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    for index, text in enumerate(NASTY_TEXTS):
        _round_trip(writer, reader, p, f"{index}{text}"[:40], text, text)
    # ids differing only by normalization, case or trailing space are different ids
    twins = ["é", "e\u0301", "A", "a", "x", "x "]
    for name in twins:
        writer.update_resource(p + "twin" + name, working_memory=name)
    for name in twins:
        got = reader.get_working_memory(scope="resource", resource_id=p + "twin" + name)
        assert got == name, f"resource id {p + 'twin' + name!r} reads {got!r}: ids were normalized or folded"

    @_prop(ctx, key=valid_text(min_size=1, max_size=12), text=valid_text(max_size=300), title=valid_text(max_size=60))
    def prop(key: str, text: str, title: str) -> None:
        assume(len(title.encode()) <= 1024)
        _round_trip(writer, reader, ctx.prefix(), key, text, title)

    prop()


def _same_json(expected: Any, actual: Any, what: str) -> None:
    difference = json_difference(expected, actual)
    assert difference is None, f"{what}: {difference}"


NUMBERS: dict[str, Any] = {
    "one": 1,
    "zero": 0,
    "minus": -7,
    "max": 2**53 - 1,
    "half": 0.5,
    "two": 2.0,
    "list": [1, 2.5, {"n": -3, "m": [0]}],
}
"""Integers (which must read back as integers) beside floats (an integral one may read back as an integer)."""


def _number_kinds(ctx: CheckContext) -> None:
    """Every way a JSON value is written and read keeps an integer an integer."""
    writer, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid, made, saved = p + "r", p + "t", p + "made", p + "saved"
    patch = {"n": NUMBERS}
    writer.update_resource(rid, metadata=NUMBERS)
    writer.save_resource(Resource(saved, metadata=NUMBERS, created_at=STAMPS[0], updated_at=STAMPS[0]))
    writer.save_thread(Thread(tid, rid, metadata=NUMBERS))
    writer.create_thread(Thread(made, rid, metadata={"first": 1}, created_at=STAMPS[0], updated_at=STAMPS[0]))
    writer.update_thread(made, metadata=NUMBERS)
    returned = {
        "resource scope": writer.merge_working_memory(patch, scope="resource", resource_id=rid),
        "thread scope": writer.merge_working_memory(patch, scope="thread", thread_id=tid),
    }
    for scope, doc in returned.items():
        _same_json(patch, doc, f"the document merge_working_memory returned ({scope})")
    for who, storage in (("the writing connection", writer), ("another connection", reader)):
        resource, other, thread, updated = (
            storage.get_resource(rid),
            storage.get_resource(saved),
            storage.get_thread(tid),
            storage.get_thread(made),
        )
        assert resource and other and thread and updated, "a record written is missing"
        _same_json(NUMBERS, resource.metadata, f"update_resource metadata read by {who}")
        _same_json(NUMBERS, other.metadata, f"save_resource metadata read by {who}")
        meta = dict(thread.metadata or {})
        stored = meta.pop("workingMemory", None)
        _same_json(NUMBERS, meta, f"save_thread metadata read by {who}")
        _same_json({"first": 1, **NUMBERS}, updated.metadata, f"update_thread metadata read by {who}")
        listed = {t.id: t.metadata for t in storage.list_threads(rid).threads}
        _same_json({"first": 1, **NUMBERS}, listed.get(made), f"update_thread metadata listed by {who}")
        assert isinstance(stored, str), f"thread working memory read by {who} is {stored!r}"
        _same_json(patch, json.loads(stored), f"merged thread working memory in the thread's metadata ({who})")
        for scope, ids in (("resource", {"resource_id": rid}), ("thread", {"thread_id": tid})):
            text = storage.get_working_memory(scope=scope, **ids)  # type: ignore[arg-type]
            _same_json(patch, _parsed(text), f"merged working memory ({scope} scope) read by {who}")


@check("round_trip_json", "arbitrary nested JSON metadata and merged documents come back equal")
def round_trip_json(ctx: CheckContext) -> None:
    writer, reader = ctx.storage, ctx.open()
    deep: Any = "bottom"
    for _ in range(31):
        deep = {"d": deep}
    extremes = {
        "max": 2**53 - 1,
        "min": -(2**53 - 1),
        "float": 1.5e300,
        "tiny": 5e-324,
        "neg0": -0.0,
        "t": True,
        "f": False,
        "null": None,
        "empty": {},
        "list": [],
        "deep": deep["d"],
    }

    def trip(meta: dict[str, Any], doc: Any) -> None:
        p = ctx.prefix()
        writer.update_resource(p + "r", metadata=meta)
        writer.save_thread(Thread(p + "t", p + "r", metadata=meta))
        merged = writer.merge_working_memory({"doc": doc}, scope="resource", resource_id=p + "r")
        resource, thread = reader.get_resource(p + "r"), reader.get_thread(p + "t")
        assert resource is not None and thread is not None, "a record written is missing"
        _same_json(meta, resource.metadata, "update_resource metadata read by get_resource")
        _same_json(meta, thread.metadata, "save_thread metadata read by get_thread")
        listed = reader.list_threads(p + "r").threads
        assert len(listed) == 1, f"list_threads gave {listed!r}"
        _same_json(meta, listed[0].metadata, "save_thread metadata read by list_threads")
        stored = _parsed(reader.get_working_memory(scope="resource", resource_id=p + "r"))
        want = model_merge_patch({}, {"doc": doc})
        _same_json(want, merged, "the document merge_working_memory returned")
        _same_json(want, stored, "the merged working memory read by get_working_memory")

    _number_kinds(ctx)
    trip(extremes, {k: v for k, v in extremes.items() if k != "deep"})  # a patch nests one level deeper

    @_prop(ctx, meta=json_objects(max_leaves=30), doc=json_values(max_leaves=30))
    def prop(meta: dict[str, Any], doc: Any) -> None:
        trip(meta, doc)

    prop()


@check("large_values", "a 1 MiB working memory (both scopes, text and merged JSON) and large metadata round-trip")
def large_values(ctx: CheckContext) -> None:
    writer, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    text = ("# Notes ✓\n" + "x" * 1000 + "\n") * 1040  # a little over 1 MiB
    writer.save_thread(Thread(tid, rid))
    writer.set_working_memory(text, scope="resource", resource_id=rid)
    writer.set_working_memory(text, scope="thread", thread_id=tid)
    assert reader.get_working_memory(scope="resource", resource_id=rid) == text, "1 MiB resource memory changed"
    assert reader.get_working_memory(scope="thread", thread_id=tid) == text, "1 MiB thread memory changed"
    doc = {"items": [{"i": i, "text": "é" * 40} for i in range(12_000)]}  # ~1 MiB of JSON
    writer.set_working_memory("", scope="thread", thread_id=tid)
    addresses: list[dict[str, Any]] = [
        {"scope": "resource", "resource_id": p + "j"},
        {"scope": "thread", "thread_id": tid},
    ]
    for ids in addresses:
        writer.merge_working_memory(doc, **ids)
        merged = writer.merge_working_memory({"more": True}, **ids)
        assert len(merged["items"]) == 12_000 and merged["more"] is True
        stored = _parsed(reader.get_working_memory(**ids))
        assert json_equal({**doc, "more": True}, stored), f"the large merged document changed in {ids['scope']} scope"
    meta = {f"k{i}": {"list": list(range(50)), "s": "ü" * 100} for i in range(1000)}
    writer.update_resource(rid, metadata=meta)
    resource = reader.get_resource(rid)
    assert resource is not None and json_equal(meta, resource.metadata), "large metadata changed"


# -- timestamps -----------------------------------------------------------------------


def _between(lo: datetime, value: datetime, hi: datetime, what: str) -> None:
    assert_utc_ms(value, what)
    assert lo <= value <= hi, f"{what} {value.isoformat()} is not 'now' ({lo.isoformat()} .. {hi.isoformat()})"


@check("timestamps", "UTC, millisecond precision; created_at fixed; updated_at moves to now on every update")
def timestamps(ctx: CheckContext) -> None:
    storage, other = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    given_at = datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=2)))
    normalized = datetime(2024, 2, 29, 21, 59, 59, 999000, tzinfo=UTC)
    saved = storage.save_thread(Thread(tid, rid, created_at=given_at, updated_at=given_at))
    stored_r = storage.save_resource(Resource(rid, created_at=given_at, updated_at=given_at))
    for record in (saved, stored_r, other.get_thread(tid), other.get_resource(rid)):
        assert record is not None
        for name in ("created_at", "updated_at"):
            value = getattr(record, name)
            assert_utc_ms(value, name)
            assert value == normalized, f"{name} given as {given_at.isoformat()} came back as {value.isoformat()}"

    updates: list[tuple[str, str, Callable[[], object]]] = [
        ("thread", "update_thread", lambda: storage.update_thread(tid, title="x")),
        (
            "thread",
            "save_thread (same owner)",
            lambda: storage.save_thread(Thread(tid, rid, "y", created_at=STAMPS[2])),
        ),
        ("thread", "set_working_memory", lambda: storage.set_working_memory('{"m":1}', scope="thread", thread_id=tid)),
        (
            "thread",
            "merge_working_memory",
            lambda: storage.merge_working_memory({}, scope="thread", thread_id=tid, resource_id=rid),
        ),
        ("resource", "update_resource", lambda: storage.update_resource(rid, metadata={"a": 1})),
        (
            "resource",
            "set_working_memory",
            lambda: storage.set_working_memory('{"m":1}', scope="resource", resource_id=rid),
        ),
        (
            "resource",
            "merge_working_memory",
            lambda: storage.merge_working_memory({}, scope="resource", resource_id=rid),
        ),
    ]
    previous = {"thread": normalized, "resource": normalized}
    for kind, what, call in updates:
        time.sleep(0.003)
        lo = utc_now()
        call()
        hi = utc_now()
        record = other.get_thread(tid) if kind == "thread" else other.get_resource(rid)
        assert record is not None
        assert record.created_at == normalized, f"{what} changed created_at to {record.created_at.isoformat()}"
        _between(lo, record.updated_at, hi, f"updated_at after {what}")
        assert record.updated_at > previous[kind], f"updated_at did not move forward on {what}"
        previous[kind] = record.updated_at

    # records created by an update are stamped now, both stamps equal
    lo = utc_now()
    created = storage.update_resource(p + "new", working_memory="w")
    merged_new = p + "merged"
    storage.merge_working_memory({"a": 1}, scope="resource", resource_id=merged_new)
    hi = utc_now()
    fresh = other.get_resource(merged_new)
    for record in (created, other.get_resource(p + "new"), fresh):
        assert record is not None
        _between(lo, record.created_at, hi, "created_at of a resource created by an update")
        _between(lo, record.updated_at, hi, "updated_at of a resource created by an update")
    # save_resource replaces the record whole: the timestamps are the ones given
    again = storage.save_resource(Resource(rid, created_at=STAMPS[1], updated_at=STAMPS[2]))
    reread = other.get_resource(rid)
    assert reread == again and (reread.created_at, reread.updated_at) == (STAMPS[1], STAMPS[2]), (
        f"save_resource did not store the given timestamps: {reread!r}"
    )
    _reads_and_refusals_keep_updated_at(ctx)


def _reads_and_refusals_keep_updated_at(ctx: CheckContext) -> None:
    """Reads and refused writes leave updated_at alone, checked once the clock is past the last write's ms."""
    storage, other = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid, stranger = p + "r", p + "t", p + "stranger"
    # stored memory that is JSON but no object, so that merges into it are refused
    written = {
        "resource": storage.update_resource(rid, working_memory="[1]", metadata={"m": 1}).updated_at,
        "thread": storage.save_thread(Thread(tid, rid, "t", {"workingMemory": "null"})).updated_at,
    }
    clock_past(max(written.values()))  # from here on, "now" differs from both stamps

    def stamp(kind: str) -> datetime:
        record = other.get_resource(rid) if kind == "resource" else other.get_thread(tid)
        assert record is not None, f"the {kind} is missing"
        return record.updated_at

    def unmoved(what: str) -> None:
        for kind, want in written.items():
            got = stamp(kind)
            assert got == want, (
                f"{what} moved the {kind}'s updated_at from {want.isoformat()} to {got.isoformat()}: "
                "a read or a refused write must change nothing"
            )

    unmoved("get_resource / get_thread")  # the reads this check looks with come first
    unmoved("get_resource / get_thread (read twice)")
    thr: dict[str, Any] = {"scope": "thread", "thread_id": tid}
    foreign = {**thr, "resource_id": stranger}
    res: dict[str, Any] = {"scope": "resource", "resource_id": rid}
    reads: list[tuple[str, Callable[[], object]]] = [
        ("get_thread(resource_id=owner)", lambda: storage.get_thread(tid, resource_id=rid)),
        ("get_thread(resource_id=another)", lambda: storage.get_thread(tid, resource_id=stranger)),
        ("get_working_memory(scope='resource')", lambda: storage.get_working_memory(**res)),
        ("get_working_memory(scope='thread')", lambda: storage.get_working_memory(**thr)),
        ("get_working_memory(scope='thread', owner)", lambda: storage.get_working_memory(**thr, resource_id=rid)),
        ("list_threads", lambda: storage.list_threads(rid)),
        ("list_threads(order_by='updated_at')", lambda: storage.list_threads(rid, order_by="updated_at")),
    ]
    for what, call in reads:
        call()
        unmoved(what)
    refused: list[tuple[str, Callable[[], object]]] = [
        ("merge_working_memory into resource memory '[1]'", lambda: storage.merge_working_memory({"a": 1}, **res)),
        ("merge_working_memory into thread memory 'null'", lambda: storage.merge_working_memory({"a": 1}, **thr)),
        ("merge_working_memory with a NaN", lambda: storage.merge_working_memory({"a": float("nan")}, **res)),
        ("merge_working_memory as another owner", lambda: storage.merge_working_memory({}, **foreign)),
        ("set_working_memory as another owner", lambda: storage.set_working_memory("x", **foreign)),
        ("get_working_memory as another owner", lambda: storage.get_working_memory(**foreign)),
        ("set_working_memory with a NUL", lambda: storage.set_working_memory("a\x00", **res)),
        ("set_working_memory with a NUL (thread)", lambda: storage.set_working_memory("a\x00", **thr)),
        ("update_resource with a NaN", lambda: storage.update_resource(rid, metadata={"x": float("nan")})),
        ("update_thread with a NUL title", lambda: storage.update_thread(tid, title="a\x00")),
        ("save_thread with another owner", lambda: storage.save_thread(Thread(tid, stranger, "stolen"))),
        ("create_thread of an existing id", lambda: storage.create_thread(Thread(tid, rid, "again"))),
    ]
    for what, call in refused:
        try:
            call()
        except WorkmemError:
            pass
        else:
            raise AssertionError(f"{what} succeeded; it must raise")
        unmoved(f"{what} (refused)")


# -- pagination -----------------------------------------------------------------------

_ID_POOL = ["a", "B", "b", "_x", "-y", "10", "9", "é", "z", "Z", "a a", "ab"]


@check("pagination", "pages partition the threads: exact total and has_more, both orders, ties broken by id")
def pagination(ctx: CheckContext) -> None:
    storage = ctx.storage

    @_prop(
        ctx,
        names=st.lists(st.sampled_from(_ID_POOL), unique=True, max_size=len(_ID_POOL)),
        stamps=st.data(),
        per_page=st.integers(1, 5),
    )
    def prop(names: list[str], stamps: st.DataObject, per_page: int) -> None:
        p = ctx.prefix()
        rid = p + "r"
        created = {}
        for name in names:
            c, u = stamps.draw(st.sampled_from(STAMPS[:2])), stamps.draw(st.sampled_from(STAMPS[:2]))
            created[p + name] = storage.save_thread(Thread(p + name, rid, name, created_at=c, updated_at=u))
        storage.save_thread(Thread(p + "other", p + "someone-else"))
        everything = list(created.values())
        for order_by in ("created_at", "updated_at"):
            for direction in ("desc", "asc"):
                where = f"order_by={order_by!r}, direction={direction!r}, per_page={per_page}"
                expected = sorted(everything, key=lambda t: (getattr(t, order_by), t.id), reverse=direction == "desc")
                want = [t.id for t in expected]
                whole = storage.list_threads(rid, per_page=None, order_by=order_by, direction=direction)
                assert [t.id for t in whole.threads] == want, (
                    f"{where}, per_page=None: got {[t.id for t in whole.threads]}, want {want}"
                )
                assert (whole.total, whole.has_more) == (len(want), False), f"per_page=None page: {whole!r}"
                seen: list[str] = []
                for page in range(len(want) // per_page + 2):
                    got = storage.list_threads(
                        rid, page=page, per_page=per_page, order_by=order_by, direction=direction
                    )
                    ids = [t.id for t in got.threads]
                    chunk = want[page * per_page : (page + 1) * per_page]
                    assert ids == chunk, f"{where}, page {page}: got {ids}, want {chunk} of {want}"
                    assert got.total == len(want), f"{where}, page {page}: total {got.total}, want {len(want)}"
                    more = (page + 1) * per_page < len(want)
                    assert got.has_more is more, f"{where}, page {page}: has_more {got.has_more}, want {more}"
                    assert (got.page, got.per_page) == (page, per_page), f"page/per_page echoed as {got!r}"
                    seen += ids
                assert seen == want, f"{where}: pages joined give {seen}, want {want}"

    prop()
