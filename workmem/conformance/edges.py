"""Deterministic examples at the edges a random search seldom reaches (issue 19).

Look-alike ids in listings, lists longer than the default page, the order after
updates, shallow metadata merges, normalization-sensitive text inside merged
JSON, the exact validation limits, and calls mixing valid and invalid
arguments. Each is a fixed scenario: cheap, and a failure names the call and
the values. (Concurrent metadata updates are in :mod:`.concurrency`.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from workmem.errors import WorkingMemoryFormatError
from workmem.records import Resource, Scope, Thread
from workmem.storage import MemoryStorage
from workmem.timestamps import utc_now
from workmem.validation import MAX_DEPTH, MAX_ID_BYTES, MAX_TEXT_BYTES, MAX_TITLE_BYTES

from .bad_input import STATE_PARTS, raises_validation, stored_state
from .expect import json_equal
from .registry import CheckContext, check

__all__ = ["DEFAULT_PER_PAGE", "LOOKALIKE_IDS", "UNICODE_TWINS", "nested"]

DEFAULT_PER_PAGE = 100
"""``list_threads``' default ``per_page``."""

LOOKALIKE_IDS = [
    "ab",
    "a",
    "abc",
    "ab ",
    "AB",
    "Ab",
    "a_",
    "_b",
    "a%",
    "%",
    "a*",
    "*",
    "a?",
    "?b",
    "a\\",
    "a.b",
    "a:b",
    "a/b",
]
"""Resource ids (after a common prefix) that a ``LIKE``, glob, prefix or case-folding match confuses."""

UNICODE_TWINS = [
    "é",  # NFC
    "e\u0301",  # the same, NFD
    "\u00c5",  # Å
    "\u212b",  # ANGSTROM SIGN: NFC makes it U+00C5
    "A\u030a",  # NFD of Å
    "\ufb01",  # the "fi" ligature: NFKC makes it "fi"
    "fi",
    "\u1100\u1161",  # Hangul jamo: NFC makes it U+AC00
    "\uac00",
    "\u0301",  # a combining mark alone
    "\u1e9b\u0323",  # long s with dot above and dot below: every normal form differs
    "s\u0323\u0307",
    "\u1e69",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467",  # a ZWJ sequence
    "\ufeff",  # BOM
    "a\u00a0b",  # no-break space
    "\uff21",  # FULLWIDTH A
]
"""Distinct strings that Unicode normalization (NFC, NFD, NFKC) would change or merge."""


def _ids(page: Any) -> list[str]:
    return [t.id for t in page.threads]


# -- listing against look-alike ids ----------------------------------------------------------


@check(
    "list_lookalike_ids",
    "ids match exactly: prefixes, % _ * ? and case variants list only their own threads, delete only themselves",
)
def list_lookalike_ids(ctx: CheckContext) -> None:
    storage, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    owned: dict[str, list[str]] = {}
    for index, name in enumerate(LOOKALIKE_IDS):
        rid = p + name
        owned[rid] = [f"{p}t{index}-{j}" for j in range(index % 3 + 1)]  # different counts: totals tell them apart
        for tid in owned[rid]:
            storage.save_thread(Thread(tid, rid, name))
    problems: list[str] = []
    paging: list[str] = []  # the resource's own threads, counted right, but a page of the wrong size
    for rid, want in owned.items():
        whole = reader.list_threads(rid, per_page=None)
        if sorted(_ids(whole)) != sorted(want) or whole.total != len(want):
            problems.append(f"list_threads({rid!r}, per_page=None): {_ids(whole)} (total {whole.total}), want {want}")
        first = reader.list_threads(rid, per_page=1)
        more = len(want) > 1
        if first.total != len(want) or first.has_more is not more or len(first.threads) != 1:
            found = (
                f"list_threads({rid!r}, per_page=1): {_ids(first)}, total {first.total}, has_more {first.has_more};"
                f" want 1 of {want}, total {len(want)}, has_more {more}"
            )
            mixed = not set(_ids(first)) <= set(want) or first.total != len(want)
            (problems if mixed else paging).append(found)
    mine = owned[p + "ab"][0]
    for other in ("AB", "a_", "a%", "%", "a*", "*", "?b", "a"):
        if reader.get_thread(mine, resource_id=p + other) is not None:
            problems.append(f"get_thread({mine!r}, resource_id={p + other!r}) returned the thread of {p + 'ab'!r}")
    # look-alike thread ids: deleting one deletes only that one
    owner = p + "owner"
    left = [f"{p}T{name}" for name in LOOKALIKE_IDS]
    for tid in left:
        storage.save_thread(Thread(tid, owner))
    for tid in list(left):
        if storage.delete_thread(tid) is not True:
            problems.append(f"delete_thread({tid!r}) did not return True")
        left.remove(tid)
        listed = reader.list_threads(owner, per_page=None)
        if sorted(_ids(listed)) != sorted(left) or listed.total != len(left):
            gone = sorted(set(left) - set(_ids(listed)))
            problems.append(f"delete_thread({tid!r}) also deleted or hid {gone} (total now {listed.total})")
            break
        if reader.get_thread(tid) is not None:
            problems.append(f"get_thread({tid!r}) still finds the thread after delete_thread")
    assert not problems, f"{len(problems)} calls confused look-alike ids:\n" + "\n".join(problems[:20])
    assert not paging, (
        f"{len(paging)} pages of one thread (per_page=1) were the wrong size or had the wrong has_more, though"
        " the ids were not confused (each page held only the resource's own threads, and the total was right):"
        " the page size or has_more is computed wrongly (see the check pagination):\n" + "\n".join(paging[:20])
    )


# -- lists longer than the default page -----------------------------------------------------


@check(
    "list_beyond_default_page",
    f"a resource with more than {DEFAULT_PER_PAGE} threads: default page, next page and per_page=None are exact",
)
def list_beyond_default_page(ctx: CheckContext) -> None:
    storage, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid = p + "r"
    count = DEFAULT_PER_PAGE + 1
    base = datetime(2024, 3, 1, tzinfo=UTC)
    threads = [
        Thread(
            f"{p}t{i:03d}",
            rid,
            f"#{i}",
            created_at=base + timedelta(milliseconds=i),
            updated_at=base + timedelta(milliseconds=(i * 37) % count),  # another order
        )
        for i in range(count)
    ]
    for thread in threads[:DEFAULT_PER_PAGE]:
        storage.save_thread(thread)
    storage.save_thread(Thread(p + "other", p + "someone-else"))

    def order(order_by: str, direction: str, upto: int) -> list[str]:
        chosen = sorted(threads[:upto], key=lambda t: (getattr(t, order_by), t.id), reverse=direction == "desc")
        return [t.id for t in chosen]

    edge = reader.list_threads(rid)
    want = order("created_at", "desc", DEFAULT_PER_PAGE)
    assert _ids(edge) == want, f"exactly {DEFAULT_PER_PAGE} threads, default page: got {len(edge.threads)} threads"
    assert (edge.total, edge.has_more, edge.page, edge.per_page) == (DEFAULT_PER_PAGE, False, 0, DEFAULT_PER_PAGE), (
        f"exactly {DEFAULT_PER_PAGE} threads, default page: total {edge.total}, has_more {edge.has_more},"
        f" page {edge.page}, per_page {edge.per_page}; want total {DEFAULT_PER_PAGE}, has_more False,"
        f" page 0, per_page {DEFAULT_PER_PAGE}"
    )
    storage.save_thread(threads[-1])

    first = reader.list_threads(rid)
    want = order("created_at", "desc", count)
    assert _ids(first) == want[:DEFAULT_PER_PAGE], (
        f"{count} threads, default page: got {len(first.threads)} threads, want the first {DEFAULT_PER_PAGE} of {count}"
    )
    assert (first.total, first.has_more, first.per_page) == (count, True, DEFAULT_PER_PAGE), (
        f"{count} threads, default page: total {first.total}, has_more {first.has_more}, per_page {first.per_page}"
    )
    second = reader.list_threads(rid, page=1)
    assert _ids(second) == want[DEFAULT_PER_PAGE:], f"{count} threads, page 1: got {_ids(second)}"
    assert (second.total, second.has_more) == (count, False), f"page 1: total {second.total}, has {second.has_more}"
    for order_by in ("created_at", "updated_at"):
        for direction in ("desc", "asc"):
            want = order(order_by, direction, count)
            where = f"{count} threads, per_page=None, order_by={order_by!r}, direction={direction!r}"
            whole = reader.list_threads(rid, per_page=None, order_by=order_by, direction=direction)
            assert _ids(whole) == want, f"{where}: got {len(whole.threads)} threads, not all {count} in order"
            assert (whole.total, whole.has_more, whole.per_page) == (count, False, None), (
                f"{where}: total {whole.total}, has_more {whole.has_more}, per_page {whole.per_page}"
            )
    for per_page, more in ((count, False), (count - 1, True)):
        got = reader.list_threads(rid, per_page=per_page)
        assert len(got.threads) == min(per_page, count) and got.has_more is more, (
            f"{count} threads, per_page={per_page}: {len(got.threads)} threads, has_more {got.has_more}"
        )


# -- the order after updates ----------------------------------------------------------------


def _until_after(stamp: datetime) -> None:
    """Wait until the clock reads later than ``stamp`` (a millisecond or two at most)."""
    deadline = time.monotonic() + 1.0
    while utc_now() <= stamp and time.monotonic() < deadline:
        time.sleep(0.001)


@check(
    "list_order_after_update",
    "order_by='updated_at' follows every kind of thread update; created_at order does not move",
)
def list_order_after_update(ctx: CheckContext) -> None:
    storage, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid = p + "r"
    names = ["t0", "t1", "t2", "t3"]
    base = datetime(2024, 4, 1, tzinfo=UTC)
    for i, name in enumerate(names):
        stamp = base + timedelta(milliseconds=i)
        storage.save_thread(Thread(p + name, rid, name, {"n": i}, created_at=stamp, updated_at=stamp))
    updates: list[tuple[str, str, Callable[[], object]]] = [
        ("update_thread(title=...)", "t0", lambda: storage.update_thread(p + "t0", title="renamed")),
        (
            "set_working_memory(scope='thread')",
            "t2",
            lambda: storage.set_working_memory("# notes", scope="thread", thread_id=p + "t2"),
        ),
        (
            "merge_working_memory(scope='thread')",
            "t1",
            lambda: storage.merge_working_memory({"a": 1}, scope="thread", thread_id=p + "t1", resource_id=rid),
        ),
        ("save_thread (same owner)", "t3", lambda: storage.save_thread(Thread(p + "t3", rid, "again", {"n": 3}))),
        ("update_thread(metadata=...)", "t0", lambda: storage.update_thread(p + "t0", metadata={"m": 1})),
        (
            "update_thread(title=..., metadata=...)",
            "t2",
            lambda: storage.update_thread(p + "t2", title="x", metadata={}),
        ),
    ]
    recent = [p + n for n in reversed(names)]  # updated_at, newest first
    created = list(recent)
    latest = base + timedelta(milliseconds=len(names))
    for what, name, call in updates:
        tid = p + name
        stored = None
        for _ in range(20):  # the backend's clock may lag ours: repeat the (idempotent) update until it moved
            _until_after(latest)
            call()
            stored = reader.get_thread(tid)
            assert stored is not None, f"{tid!r} is gone after {what}"
            if stored.updated_at > latest:
                break
        assert stored is not None and stored.updated_at > latest, (
            f"updated_at of {tid!r} stayed {stored and stored.updated_at.isoformat()} after {what},"
            f" not later than the previous update ({latest.isoformat()})"
        )
        latest = stored.updated_at
        recent.remove(tid)
        recent.insert(0, tid)
        for order_by, want_desc in (("updated_at", recent), ("created_at", created)):
            for direction, want in (("desc", want_desc), ("asc", want_desc[::-1])):
                where = f"after {what} of {tid!r}: list_threads(order_by={order_by!r}, direction={direction!r}"
                whole = reader.list_threads(rid, per_page=None, order_by=order_by, direction=direction)  # type: ignore[arg-type]
                assert _ids(whole) == want, f"{where}, per_page=None) gave {_ids(whole)}, want {want}"
                paged = [
                    tid
                    for page in (0, 1)
                    for tid in _ids(
                        reader.list_threads(rid, page=page, per_page=2, order_by=order_by, direction=direction)  # type: ignore[arg-type]
                    )
                ]
                assert paged == want, f"{where}, per_page=2) pages gave {paged}, want {want}"


# -- shallow metadata merges ----------------------------------------------------------------

_FIRST: dict[str, Any] = {"n": {"x": 1, "y": {"z": 1}}, "keep": "k", "list": [1, {"a": 1}], "gone": 1, "obj": {"a": 1}}
_PATCH: dict[str, Any] = {"n": {"x": 2}, "list": [{"b": 2}], "gone": None, "obj": {}, "new": {"q": {"r": []}}}
_SHALLOW: dict[str, Any] = {**_FIRST, **_PATCH}  # {"n": {"x": 2}, "keep": "k", "gone": None, "obj": {}, ...}
_AGAIN: dict[str, Any] = {"n": {"y": {"w": 1}}, "new": {"q": None}}
_SHALLOW_AGAIN: dict[str, Any] = {**_SHALLOW, **_AGAIN}


@check(
    "metadata_merge_shallow",
    "update_resource/update_thread merge metadata shallowly: a nested object replaces the old one, null is stored",
)
def metadata_merge_shallow(ctx: CheckContext) -> None:
    storage, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    storage.update_resource(rid, metadata=_FIRST)
    storage.save_thread(Thread(tid, rid, "t", {**_FIRST, "workingMemory": "# wm"}))
    steps: list[tuple[dict[str, Any], dict[str, Any]]] = [(_PATCH, _SHALLOW), (_AGAIN, _SHALLOW_AGAIN)]
    for step, (patch, want) in enumerate(steps):
        returned_r = storage.update_resource(rid, metadata=patch)
        returned_t = storage.update_thread(tid, metadata=patch)
        want_t = {**want, "workingMemory": "# wm"}
        resource, thread = reader.get_resource(rid), reader.get_thread(tid)
        listed = reader.list_threads(rid).threads
        got: list[tuple[str, Any, dict[str, Any]]] = [
            ("update_resource returned", returned_r.metadata, want),
            ("get_resource", resource and resource.metadata, want),
            ("update_thread returned", returned_t.metadata, want_t),
            ("get_thread", thread and thread.metadata, want_t),
            ("list_threads", listed[0].metadata if listed else None, want_t),
        ]
        for what, value, expected in got:
            assert json_equal(expected, value), (
                f"update {step + 1} with {patch!r}: {what} metadata {value!r}, want {expected!r}"
                " (metadata merges are shallow, {**old, **new}: a nested object replaces the old one whole)"
            )


# -- Unicode inside merged JSON -------------------------------------------------------------


def _exact(expected: Any, actual: Any, where: str) -> None:
    assert json_equal(expected, actual), (
        f"{where}: {actual!a} is not {expected!a} (strings and keys must come back code point for code point)"
    )


@check(
    "merged_json_unicode_exact",
    "normalization-sensitive strings and keys inside merged documents and metadata come back exactly, never merged",
)
def merged_json_unicode_exact(ctx: CheckContext) -> None:
    storage, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    storage.save_thread(Thread(tid, rid))
    twins = {s: s for s in UNICODE_TWINS}
    patch = {**twins, "nested": {s: [s, {s: s}] for s in UNICODE_TWINS}, "list": list(UNICODE_TWINS)}
    addresses: list[dict[str, Any]] = [
        {"scope": "resource", "resource_id": rid},
        {"scope": "thread", "thread_id": tid, "resource_id": rid},
    ]
    for ids in addresses:
        where = f"merge_working_memory in {ids['scope']} scope"
        storage.merge_working_memory({"é": "NFC", "\u00c5": "NFC"}, **ids)
        merged = storage.merge_working_memory({"e\u0301": "NFD", "\u212b": "sign"}, **ids)
        want: dict[str, Any] = {"é": "NFC", "\u00c5": "NFC", "e\u0301": "NFD", "\u212b": "sign"}
        _exact(want, merged, f"{where}, keys differing only in normalization")
        merged = storage.merge_working_memory(patch, **ids)
        want = {**want, **patch}
        _exact(want, merged, f"{where} returned")
        text = reader.get_working_memory(**ids)
        assert text is not None, f"{where}: nothing stored"
        _exact(want, json.loads(text), f"{where}, stored")
    meta = {"é": "NFC", **patch}
    storage.update_resource(rid, metadata={"e\u0301": "NFD"})
    storage.update_thread(tid, metadata={"e\u0301": "NFD"})
    storage.update_resource(rid, metadata=meta)
    storage.update_thread(tid, metadata=meta)
    resource, thread = reader.get_resource(rid), reader.get_thread(tid)
    _exact({"e\u0301": "NFD", **meta}, resource and resource.metadata, "resource metadata after a shallow merge")
    assert thread is not None and thread.metadata is not None
    _exact({"e\u0301": "NFD", **meta}, {k: v for k, v in thread.metadata.items() if k != "workingMemory"}, "thread")


# -- exact validation limits ----------------------------------------------------------------


def nested(levels: int, leaf: bool) -> dict[str, Any]:
    """An object whose deepest value is at nesting level ``levels`` (the object itself is level 1).

    With ``leaf`` the deepest value is a string inside ``levels - 1`` objects and arrays;
    without, it is an empty object, the ``levels``-th.
    """
    value: Any = "leaf" if leaf else {}
    for level in range(levels - 1, 0, -1):
        value = [value] if level % 5 == 0 else {"d": value}
    assert isinstance(value, dict)
    return value


def _fill(prefix: str, unit: str, limit: int) -> str:
    """``prefix`` padded with ASCII, then ``unit`` repeated: exactly ``limit`` UTF-8 bytes."""
    size, used = len(unit.encode()), len(prefix.encode())
    pad = (limit - used) % size
    return prefix + "x" * pad + unit * ((limit - used - pad) // size)


def _bad_id_calls(
    storage: MemoryStorage, reader: MemoryStorage, tid: str, bad: str
) -> list[tuple[str, Callable[[], object]]]:
    """Every method taking an id, called with the id ``bad``."""
    return [
        ("update_resource", lambda: storage.update_resource(bad, working_memory="w")),
        ("get_resource", lambda: reader.get_resource(bad)),
        ("list_threads", lambda: reader.list_threads(bad)),
        ("get_thread", lambda: reader.get_thread(bad)),
        ("get_thread(resource_id=)", lambda: reader.get_thread(tid, resource_id=bad)),
        ("update_thread", lambda: storage.update_thread(bad, title="t")),
        ("delete_thread", lambda: storage.delete_thread(bad)),
        ("set_working_memory(resource)", lambda: storage.set_working_memory("w", scope="resource", resource_id=bad)),
        (
            "merge_working_memory(resource)",
            lambda: storage.merge_working_memory({"a": 1}, scope="resource", resource_id=bad),
        ),
        ("get_working_memory(resource)", lambda: reader.get_working_memory(scope="resource", resource_id=bad)),
        ("set_working_memory(thread_id=)", lambda: storage.set_working_memory("w", scope="thread", thread_id=bad)),
    ]


@check(
    "exact_limits",
    f"exact limits: {MAX_DEPTH} levels of nesting accepted, {MAX_DEPTH + 1} rejected (input and stored JSON);"
    " ids, titles and text counted in UTF-8 bytes, not characters",
)
def exact_limits(ctx: CheckContext) -> None:
    storage, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    storage.save_thread(Thread(tid, rid, "t"))
    problems: list[str] = []
    for leaf in (True, False):
        ok, deep = nested(MAX_DEPTH, leaf), nested(MAX_DEPTH + 1, leaf)
        kind = "a string" if leaf else "an empty object"
        writes: list[tuple[str, Callable[[dict[str, Any]], object]]] = [
            ("update_resource(metadata=...)", lambda v: storage.update_resource(rid, metadata=v)),
            ("update_thread(metadata=...)", lambda v: storage.update_thread(tid, metadata=v)),
            (
                "merge_working_memory(resource scope)",
                lambda v: storage.merge_working_memory(v, scope="resource", resource_id=p + "m"),
            ),
            (
                "merge_working_memory(thread scope)",
                lambda v: storage.merge_working_memory(v, scope="thread", thread_id=tid),
            ),
        ]
        for what, write in writes:
            try:
                write(ok)
            except Exception as exc:
                problems.append(f"{what} with {kind} at level {MAX_DEPTH} raised {type(exc).__name__}: {exc}")
            outcome = raises_validation(lambda write=write, deep=deep: write(deep))  # type: ignore[misc]
            if outcome is not None:
                problems.append(f"{what} with {kind} at level {MAX_DEPTH + 1} {outcome}")
        resource, thread = reader.get_resource(rid), reader.get_thread(tid)
        if resource is None or not json_equal(ok, resource.metadata):
            problems.append(f"resource metadata nested {MAX_DEPTH} levels ({kind}) did not come back")
        if thread is None or not json_equal(ok, {k: v for k, v in (thread.metadata or {}).items() if k == "d"}):
            problems.append(f"thread metadata nested {MAX_DEPTH} levels ({kind}) did not come back")

    for unit in ("é", "中", "\U0001f40d"):
        good, bad = _fill(p, unit, MAX_ID_BYTES), _fill(p, unit, MAX_ID_BYTES) + "x"
        label = f"an id of {MAX_ID_BYTES} bytes ({len(good)} characters, {unit!r})"
        try:
            storage.update_resource(good, working_memory="w")
            storage.save_thread(Thread(good, good, "edge"))
            resource, listed = reader.get_resource(good), reader.list_threads(good)
            if resource is None or resource.working_memory != "w" or _ids(listed) != [good]:
                problems.append(f"{label} did not come back: {resource!r}, listed {_ids(listed)}")
        except Exception as exc:
            problems.append(f"{label} raised {type(exc).__name__}: {exc}")
        label = f"an id of {MAX_ID_BYTES + 1} bytes in {len(bad)} characters ({unit!r})"
        for what, call in _bad_id_calls(storage, reader, tid, bad):
            outcome = raises_validation(call)
            if outcome is not None:
                problems.append(f"{what} of {label} {outcome}")

    for unit in ("é", "\U0001f40d"):
        title = unit * (MAX_TITLE_BYTES // len(unit.encode()))
        try:
            storage.update_thread(tid, title=title)
            thread = reader.get_thread(tid)
            if thread is None or thread.title != title:
                problems.append(f"a title of {MAX_TITLE_BYTES} bytes ({unit!r}) did not come back")
        except Exception as exc:
            problems.append(f"a title of {MAX_TITLE_BYTES} bytes ({unit!r}) raised {type(exc).__name__}: {exc}")
        outcome = raises_validation(lambda title=title: storage.update_thread(tid, title=title + "x"))  # type: ignore[misc]
        if outcome is not None:
            problems.append(f"update_thread with a title of {MAX_TITLE_BYTES + 1} bytes ({unit!r}) {outcome}")
    stored_at: list[tuple[Scope, dict[str, Any]]] = [
        ("resource", {"resource_id": p + "s"}),
        ("thread", {"thread_id": tid}),
    ]
    for scope, ids in stored_at:
        for leaf in (True, False):
            kind = "a string" if leaf else "an empty object"
            ok_text, deep_text = json.dumps(nested(MAX_DEPTH, leaf)), json.dumps(nested(MAX_DEPTH + 1, leaf))
            storage.set_working_memory(ok_text, scope=scope, **ids)
            try:
                merged = storage.merge_working_memory({"a": 1}, scope=scope, **ids)
                if set(merged) != {"d", "a"}:
                    problems.append(
                        f"merging into stored JSON nested {MAX_DEPTH} levels ({scope}) gave {merged!r:.100}"
                    )
            except Exception as exc:
                problems.append(
                    f"merging into stored JSON with {kind} at level {MAX_DEPTH} ({scope} scope)"
                    f" raised {type(exc).__name__}: {exc}"
                )
            storage.set_working_memory(deep_text, scope=scope, **ids)
            try:
                got: object = storage.merge_working_memory({"a": 1}, scope=scope, **ids)
            except WorkingMemoryFormatError:
                got = None
            except Exception as exc:
                got = f"{type(exc).__name__}: {exc}"
            if got is not None:
                problems.append(
                    f"merging into stored JSON with {kind} at level {MAX_DEPTH + 1} ({scope} scope) did not raise"
                    f" WorkingMemoryFormatError: {got!r:.100}"
                )
            stored = reader.get_working_memory(scope=scope, **ids)
            if stored != deep_text:
                problems.append(f"a refused merge ({scope} scope) changed the stored text to {stored!r:.100}")
    huge = "é" * (MAX_TEXT_BYTES // 2) + "x"
    outcome = raises_validation(lambda: storage.set_working_memory(huge, scope="resource", resource_id=rid))
    if outcome is not None:
        problems.append(f"working memory of {MAX_TEXT_BYTES + 1} bytes in {len(huge)} characters {outcome}")
    assert not problems, f"{len(problems)} limits not exact:\n" + "\n".join(problems[:30])


# -- mixed valid and invalid arguments ------------------------------------------------------

_NAN = float("nan")


@check(
    "no_partial_write",
    "a call mixing valid and invalid arguments (good working memory, bad metadata...) raises and writes nothing",
)
def no_partial_write(ctx: CheckContext) -> None:
    storage, reader = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid, fresh = p + "r", p + "t", p + "fresh"
    storage.save_resource(Resource(rid, "keep", {"m": 1}))
    storage.save_thread(Thread(tid, rid, "title", {"m": 2, "workingMemory": "tw"}))
    too_deep = nested(MAX_DEPTH + 1, True)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("update_resource(working_memory=ok, metadata=NaN)", lambda: storage.update_resource(
            rid, working_memory="new", metadata={"ok": 1, "bad": _NAN})),
        ("update_resource(working_memory=ok, metadata=too deep)", lambda: storage.update_resource(
            rid, working_memory="new", metadata={"ok": 1, "deep": too_deep})),
        ("update_resource(working_memory=ok, metadata=2**53)", lambda: storage.update_resource(
            rid, working_memory="new", metadata={"bad": 2**53})),
        ("update_resource(working_memory=None, metadata=a list)", lambda: storage.update_resource(
            rid, working_memory=None, metadata=[1])),  # type: ignore[arg-type]
        ("update_resource(working_memory=NUL, metadata=ok)", lambda: storage.update_resource(
            rid, working_memory="a\x00b", metadata={"ok": 1})),
        ("update_resource(new id, working_memory=ok, metadata=NaN)", lambda: storage.update_resource(
            fresh, working_memory="new", metadata={"bad": _NAN})),
        ("update_thread(title=ok, metadata=NaN)", lambda: storage.update_thread(
            tid, title="new", metadata={"ok": 1, "bad": _NAN})),
        ("update_thread(title=ok, metadata=workingMemory and Infinity)", lambda: storage.update_thread(
            tid, title="new", metadata={"workingMemory": "x", "bad": float("inf")})),
        ("update_thread(title=NUL, metadata=ok)", lambda: storage.update_thread(
            tid, title="a\x00b", metadata={"ok": 1})),
        ("update_thread(title over the limit, metadata=ok)", lambda: storage.update_thread(
            tid, title="é" * (MAX_TITLE_BYTES // 2 + 1), metadata={"ok": 1})),
        ("merge_working_memory(good keys beside a NaN, resource)", lambda: storage.merge_working_memory(
            {"ok": 1, "z": {"bad": _NAN}}, scope="resource", resource_id=rid)),
        ("merge_working_memory(good keys beside a NaN, new resource)", lambda: storage.merge_working_memory(
            {"ok": 1, "z": [_NAN]}, scope="resource", resource_id=fresh)),
        ("merge_working_memory(good keys beside a NaN, thread)", lambda: storage.merge_working_memory(
            {"ok": 1, "z": {"bad": _NAN}}, scope="thread", thread_id=tid)),
        ("set_working_memory(ok, thread, resource_id='')", lambda: storage.set_working_memory(
            "new", scope="thread", thread_id=tid, resource_id="")),
    ]  # fmt: skip
    before = stored_state(reader, rid, tid, fresh)
    problems: list[str] = []
    for what, call in cases:
        outcome = raises_validation(call)
        if outcome is not None:
            problems.append(f"{what} {outcome}")
        after = stored_state(reader, rid, tid, fresh)
        if after != before:
            changed = [n for n, a, b in zip(STATE_PARTS, before, after, strict=True) if a != b]
            problems.append(f"{what} changed stored data ({', '.join(changed)}): {after[:3]!r:.300}")
            storage.save_resource(Resource(rid, "keep", {"m": 1}))
            storage.save_thread(Thread(tid, rid, "title", {"m": 2, "workingMemory": "tw"}))
            before = stored_state(reader, rid, tid, fresh)
    assert not problems, f"{len(problems)} calls with one bad argument did not fail cleanly:\n" + "\n".join(problems)
