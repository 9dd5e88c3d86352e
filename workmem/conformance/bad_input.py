"""Validation: bad input raises ``ValidationError`` and writes nothing, in every method."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from workmem.errors import ValidationError
from workmem.records import Thread
from workmem.storage import MemoryStorage
from workmem.timestamps import utc_now

from .expect import clock_past
from .registry import CheckContext, check
from .strategies import json_objects

__all__ = ["BAD_JSON", "BAD_TEXT", "STATE_PARTS", "raises_validation", "stored_state"]

_DEEP: Any = "leaf"
for _ in range(40):
    _DEEP = {"d": _DEEP}

BAD_TEXT = {
    "NUL": "a\x00b",
    "lone high surrogate": "a\ud800b",
    "lone low surrogate": "\udfff",
}
BAD_JSON = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
    "2**53": 2**53,
    "-(2**53)": -(2**53),
    "huge int": 10**30,
    "NUL in a string": "x\x00",
    "lone surrogate in a string": "\ud83d",
    "a set": {1, 2},
    "bytes": b"raw",
    "an object": object(),
    "nesting deeper than 32": _DEEP,
}
BAD_IDS = {"empty": "", "NUL": "r\x00", "lone surrogate": "r\udc00", "513 bytes": "r" * 513, "not a str": 7}


Call = tuple[str, str, tuple[Any, ...], dict[str, Any]]
"""``(label, method name, args, kwargs)`` of one bad call."""
Place = tuple[str, dict[str, Any]]
"""``(label, keyword arguments)`` of where a working-memory call writes."""


def _cases(rid: str, tid: str, fresh: str) -> list[Call]:
    res = {"scope": "resource", "resource_id": rid}
    new = {"scope": "resource", "resource_id": fresh}
    thr = {"scope": "thread", "thread_id": tid}
    owned = {**thr, "resource_id": rid}
    places = [("resource", res), ("new resource", new), ("thread", thr)]

    def writes(label: str, value: object, fields: tuple[str, str], memory: str, *more: Place) -> list[Call]:
        """``value`` written by each write that takes it: the resource's and the thread's field ``fields``
        (a resource that exists and a new one), and the working-memory call ``memory`` at each place."""
        resource_field, thread_field = fields
        return [
            (f"update_resource({resource_field}={label})", "update_resource", (rid,), {resource_field: value}),
            (
                f"update_resource({resource_field}={label}), new id",
                "update_resource",
                (fresh,),
                {resource_field: value},
            ),
            (f"update_thread({thread_field}={label})", "update_thread", (tid,), {thread_field: value}),
            *((f"{memory}({label}, {where})", memory, (value,), ids) for where, ids in [*places, *more]),
        ]

    cases: list[Call] = []
    for name, text in BAD_TEXT.items():
        cases += writes(name, text, ("working_memory", "title"), "set_working_memory", ("thread+owner", owned))
    huge = "x" * (4 * 1024 * 1024 + 1)
    cases += [
        ("working memory over 4 MiB", "set_working_memory", (huge,), res),
        ("working memory over 4 MiB, thread", "set_working_memory", (huge,), thr),
    ]
    cases.append(("title over 1024 bytes", "update_thread", (tid,), {"title": "é" * 513}))
    for name, value in BAD_JSON.items():
        for where, meta in (("top", {"k": value}), ("nested", {"k": [1, {"n": value}]})):
            cases += writes(f"{name} ({where})", meta, ("metadata", "metadata"), "merge_working_memory")
    odd_objects: list[tuple[str, object]] = [
        ("a non-string key", {1: 1}),
        ("a NUL in a key", {"k\x00": 1}),
        ("a tuple key", {("a",): 1}),
        ("a list", [1]),
        ("a str", '{"a":1}'),
        ("an int", 3),
    ]
    for name, obj in odd_objects:
        cases += [
            (f"update_resource(metadata={name})", "update_resource", (rid,), {"metadata": obj}),
            (f"update_thread(metadata={name})", "update_thread", (tid,), {"metadata": obj}),
            (f"merge_working_memory(patch={name})", "merge_working_memory", (obj,), res),
        ]
    for name, bad in BAD_IDS.items():
        cases += [
            (f"get_resource({name} id)", "get_resource", (bad,), {}),
            (f"update_resource({name} id)", "update_resource", (bad,), {"working_memory": "w"}),
            (f"get_thread({name} id)", "get_thread", (bad,), {}),
            (f"get_thread(resource_id={name} id)", "get_thread", (tid,), {"resource_id": bad}),
            (f"update_thread({name} id)", "update_thread", (bad,), {"title": "t"}),
            (f"delete_thread({name} id)", "delete_thread", (bad,), {}),
            (f"list_threads({name} id)", "list_threads", (bad,), {}),
            (
                f"set_working_memory(resource_id={name} id)",
                "set_working_memory",
                ("w",),
                {"scope": "resource", "resource_id": bad},
            ),
            (
                f"set_working_memory(thread_id={name} id)",
                "set_working_memory",
                ("w",),
                {"scope": "thread", "thread_id": bad},
            ),
            (
                f"merge_working_memory(thread, resource_id={name} id)",
                "merge_working_memory",
                ({"a": 1},),
                {**thr, "resource_id": bad},
            ),
            (
                f"get_working_memory(resource_id={name} id)",
                "get_working_memory",
                (),
                {"scope": "resource", "resource_id": bad},
            ),
        ]
    scopes: list[tuple[str, dict[str, Any]]] = [
        ("scope='session'", {"scope": "session", "resource_id": rid, "thread_id": tid}),
        ("scope=None", {"scope": None, "resource_id": rid, "thread_id": tid}),
        ("scope='Resource'", {"scope": "Resource", "resource_id": rid}),
        ("resource scope without resource_id", {"scope": "resource", "thread_id": tid}),
        ("thread scope without thread_id", {"scope": "thread", "resource_id": rid}),
    ]
    for name, kw in scopes:
        cases += [
            (f"get_working_memory({name})", "get_working_memory", (), kw),
            (f"set_working_memory({name})", "set_working_memory", ("w",), kw),
            (f"merge_working_memory({name})", "merge_working_memory", ({"a": 1},), kw),
        ]
    pages: list[tuple[str, dict[str, Any]]] = [
        ("page=-1", {"page": -1}),
        ("page='1'", {"page": "1"}),
        ("page=True", {"page": True}),
        ("page=1.0", {"page": 1.0}),
        ("per_page=0", {"per_page": 0}),
        ("per_page=-5", {"per_page": -5}),
        ("per_page=2.5", {"per_page": 2.5}),
        ("per_page=False", {"per_page": False}),
        ("page=1 with per_page=None", {"page": 1, "per_page": None}),
        ("order_by='title'", {"order_by": "title"}),
        ("order_by='createdAt'", {"order_by": "createdAt"}),
        ("direction='up'", {"direction": "up"}),
        ("direction='DESC'", {"direction": "DESC"}),
    ]
    cases += [(f"list_threads({name})", "list_threads", (rid,), kw) for name, kw in pages]
    cases += [
        ("save_resource(a dict)", "save_resource", ({"id": rid},), {}),
        ("save_thread(a dict)", "save_thread", ({"id": tid, "resource_id": rid},), {}),
    ]
    return cases


STATE_PARTS = ("resource", "thread", "new resource", "listing")
"""What :func:`stored_state` reads, in its order."""


def stored_state(storage: MemoryStorage, rid: str, tid: str, fresh: str) -> tuple[object, ...]:
    """The resource, the thread, the resource ``fresh`` (never created) and the listing: what a refused write keeps."""
    return (storage.get_resource(rid), storage.get_thread(tid), storage.get_resource(fresh), storage.list_threads(rid))


def raises_validation(call: Callable[[], object]) -> str | None:
    """``None`` when ``call`` raised ValidationError, else what it did."""
    try:
        result = call()
    except ValidationError:
        return None
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"
    return f"was accepted (returned {result!r:.120})"


@check(
    "validation",
    "bad input (NUL, surrogates, NaN, big ints, deep nesting, bad args...) raises ValidationError, writes nothing",
)
def validation(ctx: CheckContext) -> None:
    storage = ctx.storage
    p = ctx.prefix()
    rid, tid, fresh = p + "r", p + "t", p + "never"
    storage.update_resource(rid, working_memory='{"a":1}', metadata={"m": 1})
    storage.save_thread(Thread(tid, rid, "title", {"m": 2, "workingMemory": '{"b":2}'}))
    before = stored_state(storage, rid, tid, fresh)
    clock_past(utc_now())  # a refused write that stamps updated_at now always shows
    problems: list[str] = []
    for what, method, args, kwargs in _cases(rid, tid, fresh):
        outcome = raises_validation(partial(getattr(storage, method), *args, **kwargs))
        if outcome is not None:
            problems.append(f"{what} {outcome}")
        if stored_state(storage, rid, tid, fresh) != before:
            problems.append(f"{what} changed stored data")
            storage.update_resource(rid, working_memory='{"a":1}', metadata={"m": 1})
            before = stored_state(storage, rid, tid, fresh)
    assert not problems, f"{len(problems)} bad inputs not rejected cleanly:\n" + "\n".join(problems[:40])

    @ctx.profile.settings()
    @given(meta=json_objects(max_leaves=10), bad=st.sampled_from(sorted(BAD_JSON)), data=st.data())
    def prop(meta: dict[str, Any], bad: str, data: st.DataObject) -> None:
        """A bad value anywhere in a valid object is found."""
        path = data.draw(st.lists(st.sampled_from(["k", "é"]), min_size=1, max_size=4))
        doc: Any = meta
        for key in path[:-1]:
            child = doc.get(key)
            doc[key] = child if isinstance(child, dict) else {}
            doc = doc[key]
        doc[path[-1]] = BAD_JSON[bad]
        note(f"bad value {bad} at {path}")
        for what, call in (
            ("update_resource", lambda: storage.update_resource(rid, metadata=meta)),
            ("merge_working_memory", lambda: storage.merge_working_memory(meta, scope="thread", thread_id=tid)),
        ):
            try:
                call()
            except ValidationError:
                continue
            raise AssertionError(f"{what} accepted {bad} at {path}")
        assert stored_state(storage, rid, tid, fresh) == before, "a rejected write changed stored data"

    prop()
