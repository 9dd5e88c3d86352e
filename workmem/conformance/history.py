"""Recorded histories of concurrent calls, for the linearizability check.

A *call* is one public storage method with its arguments, as JSON (so a
worker process can be sent its calls on a line of text); running it records an
:class:`Event`: the call, when it was invoked and when it returned (the
system-wide monotonic clock, so events of threads and processes compare), the
UTC clock around it (the window any timestamp it sets to "now" must fall in)
and its outcome as JSON (a snapshot taken at once). :func:`plan` draws random
calls over a few ids.

After recording an outcome the worker scribbles over the records, metadata and
documents the call returned, and over the metadata and patches it passed in:
the contract makes them the caller's own, so nothing it does to them may show
in a later read (an adapter that hands out or keeps a caller's dicts fails).

No Hypothesis here: a worker process imports this module.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from workmem.errors import (
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    WorkingMemoryFormatError,
    WorkmemError,
)
from workmem.records import Resource, Thread, ThreadPage, trusted_resource, trusted_thread
from workmem.storage import MemoryStorage
from workmem.timestamps import utc_now

__all__ = [
    "EXPECTED_ERRORS",
    "SCRIBBLE",
    "TAG",
    "Call",
    "Event",
    "decode_resource",
    "decode_thread",
    "describe_call",
    "describe_outcome",
    "plan",
    "record_calls",
    "scribble",
]

Call = dict[str, Any]
"""``{"call": method name, "args": {...}, "tag": "w1.7"}``, JSON: thread records as ``{"id", "resource_id", ...}``
dicts. Every value the call writes holds its tag (worker 1, call 7), so a result shows which calls it comes from."""

TAG = re.compile(r"w\d+\.\d+")
"""A call's tag, in the values it wrote."""

EXPECTED_ERRORS = (ThreadExistsError, ThreadNotFoundError, ThreadOwnershipError, WorkingMemoryFormatError)
"""The refusals the model predicts; any other exception in a history fails the check as it is."""

SCRIBBLE = "~scribbled by the caller"
"""The key the workers add to every dict they got back or passed in, once the call has returned."""

CHURNERS = 2
"""Workers (the last ones of a plan) that mostly move threads from owner to owner."""

CREATED = [datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)]
"""Creation times given to new threads: few, so that ties (broken by id) are common."""


@dataclass(frozen=True, slots=True)
class Event:
    """One call as a worker saw it."""

    worker: str
    """Who made it: ``thread 2``, ``process 1``."""
    call: Call
    start: int
    """``time.monotonic_ns()`` just before the call."""
    end: int
    """``time.monotonic_ns()`` just after it returned or raised."""
    lo: datetime
    """UTC clock (milliseconds) just before the call."""
    hi: datetime
    """UTC clock just after it."""
    outcome: dict[str, Any]
    """``{"value": ...}``, ``{"resource": ...}``, ``{"thread": ...}``, ``{"page": ...}`` or ``{"error": [classes]}``."""

    def to_json(self) -> dict[str, Any]:
        """The event as JSON (a worker process sends it): its fields by name, the two clock readings ISO-8601."""
        return {**asdict(self), "lo": self.lo.isoformat(), "hi": self.hi.isoformat()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        return cls(**{**data, "lo": datetime.fromisoformat(data["lo"]), "hi": datetime.fromisoformat(data["hi"])})


# -- drawing calls ------------------------------------------------------------------------


def plan(prefix: str, seed: int, workers: int, calls: int) -> list[list[Call]]:
    """``calls`` random calls for each of ``workers`` workers, over two owners and two thread ids.

    Owners collide on every thread id (a thread is created under either, and
    often deleted, at once re-created under either and written naming the new
    owner: the last :data:`CHURNERS` workers do little else), writes name an
    owner more often than not (rightly or not), and every value written is
    unique to its call, so that a read tells which write it saw.
    """
    rng = random.Random(seed)
    owners = [prefix + "a", prefix + "b"]
    tids = [prefix + f"t{i}" for i in range(2)]
    drawn: list[list[Call]] = []
    for w in range(workers):
        mine: list[Call] = []
        while len(mine) < calls:
            mine += _draw(rng, owners, tids, w, len(mine), churn=w >= workers - CHURNERS)
        drawn.append(mine[:calls])
    return drawn


def _draw(rng: random.Random, owners: list[str], tids: list[str], w: int, i: int, *, churn: bool) -> list[Call]:
    """One call, or a thread moved to an owner (mostly, to ``churn``)."""
    tag = f"w{w}.{i}"
    rid, tid = rng.choice(owners), rng.choice(tids)
    named = rng.choice([None, *owners])  # the owner a thread call names, if any

    def memory_text() -> str:
        return f"note {tag}" if rng.random() < 0.1 else json.dumps({f"s{w}": tag})  # text no merge can parse, or JSON

    def patch() -> dict[str, Any]:
        return rng.choice([{f"k{w}": tag}, {f"k{w}": None}, {"n": {f"x{w}": tag}}, {f"k{w}": tag, "n": None}])

    def thread(owner: str) -> dict[str, Any]:
        stamp = rng.choice(CREATED).isoformat()
        metadata = rng.choice([None, {"c": tag}])
        return {"id": tid, "resource_id": owner, "title": tag, "metadata": metadata, "created_at": stamp}

    def move(owner: str) -> list[Call]:
        """Delete the thread, re-create it under ``owner``, maybe write it naming ``owner``, read it."""
        write = rng.choice(
            [
                [],
                [_c("merge_working_memory", patch=patch(), scope="thread", thread_id=tid, resource_id=owner)],
                [_c("update_thread", thread_id=tid, resource_id=owner, title=tag)],
                [_c("delete_thread", thread_id=tid, resource_id=owner)],
                [_c("set_working_memory", content=memory_text(), scope="thread", thread_id=tid, resource_id=owner)],
            ]
        )
        return [
            _c("delete_thread", thread_id=tid, resource_id=None),
            _c("create_thread", thread=thread(owner)),
            *write,
            _c("get_thread", thread_id=tid, resource_id=None),
        ]

    kinds: list[tuple[int, Callable[[], list[Call]]]] = [
        (4, lambda: [_c("get_resource", resource_id=rid)]),
        (
            3,
            lambda: [_c("update_resource", resource_id=rid, **_some(rng, working_memory=tag, metadata={f"m{w}": tag}))],
        ),
        (6, lambda: [_c("get_thread", thread_id=tid, resource_id=named)]),
        (4, lambda: [_c("create_thread", thread=thread(rng.choice(owners)))]),
        (2, lambda: [_c("save_thread", thread=thread(rng.choice(owners)))]),
        (5, lambda: [_c("update_thread", thread_id=tid, resource_id=named, **_thread_update(rng, tag))]),
        (6, lambda: [_c("delete_thread", thread_id=tid, resource_id=named)]),
        (60 if churn else 6, lambda: move(rng.choice(owners))),
        (7, lambda: [_c("list_threads", resource_id=rid, **_listing(rng))]),
        (2, lambda: [_c("get_working_memory", scope="resource", resource_id=rid)]),
        (2, lambda: [_c("set_working_memory", content=memory_text(), scope="resource", resource_id=rid)]),
        (4, lambda: [_c("merge_working_memory", patch=patch(), scope="resource", resource_id=rid)]),
        (3, lambda: [_c("get_working_memory", scope="thread", thread_id=tid, resource_id=named)]),
        (
            2,
            lambda: [_c("set_working_memory", content=memory_text(), scope="thread", thread_id=tid, resource_id=named)],
        ),
        (7, lambda: [_c("merge_working_memory", patch=patch(), scope="thread", thread_id=tid, resource_id=named)]),
    ]
    make = rng.choices([k for _, k in kinds], weights=[n for n, _ in kinds])[0]
    return [call | {"tag": tag} for call in make()]


def _c(name: str, **args: Any) -> Call:
    return {"call": name, "args": args}


def _some(rng: random.Random, **values: Any) -> dict[str, Any]:
    """Each value given, or ``None``, or left out (``UNSET``)."""
    return {k: rng.choice([v, v, None]) for k, v in values.items() if rng.random() < 0.7}


def _thread_update(rng: random.Random, tag: str) -> dict[str, Any]:
    """A title (never ``None``: no valid title) and metadata, each given or left out; metadata may be ``None``."""
    given = _some(rng, metadata={"u": tag})
    return given | ({"title": tag} if rng.random() < 0.7 else {})


def _listing(rng: random.Random) -> dict[str, Any]:
    per_page = rng.choice([None, 1, 2, 3])
    return {
        "page": 0 if per_page is None else rng.choice([0, 0, 1]),
        "per_page": per_page,
        "order_by": rng.choice(["created_at", "updated_at"]),
        "direction": rng.choice(["desc", "asc"]),
    }


# -- running calls ------------------------------------------------------------------------


def _thread_arg(spec: dict[str, Any]) -> Thread:
    stamp = datetime.fromisoformat(spec["created_at"])
    return Thread(spec["id"], spec["resource_id"], spec["title"], spec["metadata"], stamp, stamp)


def _run(storage: MemoryStorage, call: Call) -> tuple[Any, list[Any]]:
    """The call's result, and the mutable things passed in (to scribble over once it returned)."""
    name = call["call"]
    args = json.loads(json.dumps(call["args"]))  # arguments of this call's own: the plan stays as drawn
    if "thread" in args:
        record = _thread_arg(args["thread"])
        return getattr(storage, name)(record), [record.metadata]
    if name == "update_resource":
        given = {k: args[k] for k in ("working_memory", "metadata") if k in args}
        return storage.update_resource(args["resource_id"], **given), [args.get("metadata")]
    if name == "update_thread":
        given = {k: args[k] for k in ("title", "metadata") if k in args}
        return storage.update_thread(args["thread_id"], resource_id=args["resource_id"], **given), [
            args.get("metadata")
        ]
    if name == "merge_working_memory":
        patch = args.pop("patch")
        return storage.merge_working_memory(patch, **args), [patch]
    if name == "set_working_memory":
        storage.set_working_memory(args.pop("content"), **args)
        return None, []
    return getattr(storage, name)(**args), []


def record_calls(storage: MemoryStorage, calls: list[Call], worker: str, seconds: float | None = None) -> list[Event]:
    """Run ``calls`` one after another on ``storage`` (those begun within ``seconds``); each one's :class:`Event`.

    An exception the model does not predict is recorded too (``"unexpected"``):
    the check fails on it after the run, naming the call.
    """
    events = []
    until = None if seconds is None else time.monotonic() + seconds
    for call in calls:
        if until is not None and time.monotonic() > until:
            break
        passed: list[Any] = []
        lo, start = utc_now(), time.monotonic_ns()
        try:
            result, passed = _run(storage, call)
            outcome = _encode(result)
        except EXPECTED_ERRORS as exc:
            outcome = {"error": _classes(exc)}
        except Exception as exc:
            outcome = {"error": _classes(exc), "unexpected": f"{type(exc).__name__}: {exc}"}
            result = None
        end, hi = time.monotonic_ns(), utc_now()
        events.append(Event(worker, call, start, end, lo, hi, json.loads(json.dumps(outcome))))
        if "error" not in outcome:
            scribble(result)
        for given in passed:
            scribble(given)
        time.sleep(0)  # let the other workers in: calls interleave even on an in-process backend
    return events


def _classes(exc: BaseException) -> list[str]:
    return [cls.__name__ for cls in type(exc).__mro__ if issubclass(cls, WorkmemError)] or [type(exc).__name__]


def _record_json(record: Resource | Thread) -> dict[str, Any]:
    data: dict[str, Any] = {"id": record.id}
    if isinstance(record, Thread):
        data |= {"resource_id": record.resource_id, "title": record.title}
    else:
        data["working_memory"] = record.working_memory
    data |= {
        "metadata": record.metadata,
        "created_at": _stamp(record.created_at),
        "updated_at": _stamp(record.updated_at),
    }
    return data


def decode_resource(data: dict[str, Any]) -> Resource:
    """The :class:`Resource` an outcome holds as JSON (as stored: not validated again)."""
    created, updated = datetime.fromisoformat(data["created_at"]), datetime.fromisoformat(data["updated_at"])
    return trusted_resource(data["id"], data["working_memory"], data["metadata"], created, updated)


def decode_thread(data: dict[str, Any]) -> Thread:
    """The :class:`Thread` an outcome holds as JSON (as stored: not validated again)."""
    created, updated = datetime.fromisoformat(data["created_at"]), datetime.fromisoformat(data["updated_at"])
    return trusted_thread(data["id"], data["resource_id"], data["title"], data["metadata"], created, updated)


def _stamp(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else repr(value)


def _encode(result: object) -> dict[str, Any]:
    if isinstance(result, Resource):
        return {"resource": _record_json(result)}
    if isinstance(result, Thread):
        return {"thread": _record_json(result)}
    if isinstance(result, ThreadPage):
        return {
            "page": {
                "threads": [_record_json(t) for t in result.threads],
                "total": result.total,
                "page": result.page,
                "per_page": result.per_page,
                "has_more": result.has_more,
                "unreadable": list(result.unreadable),
            }
        }
    return {"value": result}


def scribble(value: object) -> None:
    """Change every dict and list in ``value`` (a result or an argument) in place, as a careless caller may."""
    if isinstance(value, Resource | Thread):
        scribble(value.metadata)
    elif isinstance(value, ThreadPage):
        for thread in value.threads:
            scribble(thread.metadata)
    elif isinstance(value, dict):
        for item in list(value.values()):
            scribble(item)
        value[SCRIBBLE] = True
    elif isinstance(value, list):
        for item in value:
            scribble(item)
        value.append(SCRIBBLE)


# -- for people -----------------------------------------------------------------------------


def describe_call(call: Call, short: Callable[[str], str] = lambda s: s) -> str:
    """``update_thread('t1', title='w0.3', resource_id='a')``, ids shortened by ``short``."""
    args = dict(call["args"])
    parts = []
    for key, value in args.items():
        if key == "resource_id" and value is None and "thread_id" in args:
            continue  # no owner named
        if isinstance(value, str) and key.endswith("_id"):
            value = short(value)
        if key == "thread":
            value = {**value, "id": short(value["id"]), "resource_id": short(value["resource_id"])}
            parts.append("Thread(" + ", ".join(f"{k}={v!r}" for k, v in value.items()) + ")")
            continue
        parts.append(f"{key}={value!r}")
    return f"{call['call']}({', '.join(parts)})"


def describe_outcome(outcome: dict[str, Any], short: Callable[[str], str] = lambda s: s) -> str:
    if "error" in outcome:
        return f"raised {outcome['error'][0]}"
    if "value" in outcome:
        return f"-> {outcome['value']!r}"
    if "page" in outcome:
        page = outcome["page"]
        listed = ", ".join(f"{short(t['id'])} ({_brief(t, short)})" for t in page["threads"])
        return f"-> [{listed}] total={page['total']} has_more={page['has_more']}"
    kind, record = next(iter(outcome.items()))
    return f"-> {kind} {short(record['id'])} ({_brief(record, short)})"


def _brief(record: dict[str, Any], short: Callable[[str], str] = lambda s: s) -> str:
    fields = []
    if "resource_id" in record:
        fields += [f"owner {short(record['resource_id'])}", f"title {record['title']!r}"]
    else:
        fields.append(f"working_memory {record['working_memory']!r}")
    fields += [f"metadata {record['metadata']!r}", f"updated_at {record['updated_at'][11:23]}"]
    return ", ".join(fields)
