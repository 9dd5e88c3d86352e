"""The linearizability checker: is a recorded history of concurrent calls explained by the model?

The check ``linearizable`` (:mod:`~workmem.conformance.linearizable`) records
random calls from several threads and processes (:mod:`~workmem.conformance.history`);
this module asks whether the history is *linearizable*: whether every call can be
given one instant between its call and its return at which it took effect,
so that the calls in that order, run on the sequential
:class:`~workmem.conformance.model.Model`, return exactly what the backend
returned. A stale read, a lost update, a ``total`` that disagrees with its
page or a write that lands on a thread another owner re-created all make a
history that no order explains.

The checker is Wing & Gong's search with Lowe's memoization of (calls
linearized, model state), as Porcupine runs it (github.com/anishathalye/porcupine),
on each independent part of the history separately (Porcupine's
P-compositionality). The parts: each resource record (its working memory and
metadata are touched by no thread call), and the threads together with the
listings of every owner that may hold one of them (a listing of ``r`` reads
every thread of ``r``, and a thread id can move from owner to owner by a delete
and a re-create). A timestamp set to "now" is a :class:`~workmem.conformance.model.Window`
until a result shows it; a page must fit some value in each window
(:meth:`~workmem.conformance.model.Model.page_explained`).

A failure is shrunk to a few calls (:func:`shrink`) and printed with their times.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from workmem.errors import WorkmemError
from workmem.records import UNSET, Resource, Thread

from .expect import assert_utc_ms, json_equal, record_mismatches, wm_matches
from .history import (
    SCRIBBLE,
    TAG,
    Event,
    decode_resource,
    decode_thread,
    describe_call,
    describe_outcome,
)
from .model import Model, MResource, MThread, Window

__all__ = ["Op", "history_failure", "is_linearizable", "operations", "partitions", "shrink", "step"]

NEVER = 2**62
"""The return time of a call whose result is left open: it may take effect at any time after its call."""
EVER = -1
"""The call time of a call placed freely (while shrinking)."""

MAX_STEPS = 2_000_000
"""A bound on the search of one part (never reached by the histories the check records)."""


@dataclass(frozen=True, slots=True)
class Op:
    """One call of the history as the checker sees it."""

    index: int
    event: Event
    start: int
    end: int
    checked: bool = True
    """``False``: only the call's effect counts, not what it returned (a call left open while shrinking)."""

    @property
    def name(self) -> str:
        return str(self.event.call["call"])

    @property
    def args(self) -> dict[str, Any]:
        return self.event.call["args"]  # type: ignore[no-any-return]

    @property
    def outcome(self) -> dict[str, Any]:
        return self.event.outcome

    @property
    def window(self) -> Window:
        return Window(self.event.lo, self.event.hi)

    @property
    def reads_only(self) -> bool:
        """A call that changes nothing in the model whatever it returns (a read)."""
        return self.name in ("get_resource", "get_thread", "list_threads", "get_working_memory")


def operations(events: Iterable[Event]) -> list[Op]:
    """The events as :class:`Op` s, after checking every returned timestamp's form (UTC, milliseconds)."""
    ops = []
    for index, event in enumerate(events):
        for what, record in _records_of(event.outcome):
            for name in ("created_at", "updated_at"):
                try:
                    stamp = datetime.fromisoformat(record[name])
                except (TypeError, ValueError):
                    raise AssertionError(
                        f"{describe_call(event.call)} returned a {what} whose {name} is {record[name]}, not a datetime"
                    ) from None
                assert_utc_ms(stamp, f"the {name} of the {what} {describe_call(event.call)} returned")
        ops.append(Op(index, event, event.start, event.end))
    return ops


def _records_of(outcome: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if "page" in outcome:
        return [("thread", t) for t in outcome["page"]["threads"]]
    return [(kind, outcome[kind]) for kind in ("resource", "thread") if kind in outcome]


# -- the model, one call at a time ------------------------------------------------------------


def _mthread(spec: dict[str, Any]) -> MThread:
    stamp = datetime.fromisoformat(spec["created_at"])
    return MThread(spec["id"], spec["resource_id"], spec["title"], spec["metadata"], stamp, stamp)


def _apply(model: Model, op: Op) -> Any:
    """Run ``op`` on ``model`` (changed in place); what the contract says the call returns."""
    a, now = op.args, op.window
    name = op.name
    if name == "get_resource":
        return model.get_resource(a["resource_id"])
    if name == "update_resource":
        return model.update_resource(
            a["resource_id"], now, working_memory=a.get("working_memory", UNSET), metadata=a.get("metadata", UNSET)
        )
    if name == "get_thread":
        return model.get_thread(a["thread_id"], a["resource_id"])
    if name == "create_thread":
        return model.create_thread(_mthread(a["thread"]))
    if name == "save_thread":
        return model.save_thread(_mthread(a["thread"]), now)
    if name == "update_thread":
        title, metadata = a.get("title", UNSET), a.get("metadata", UNSET)
        return model.update_thread(a["thread_id"], now, title, metadata, a["resource_id"])
    if name == "delete_thread":
        return model.delete_thread(a["thread_id"], a["resource_id"])
    if name == "list_threads":
        return None  # compared whole in _matches: the page depends on stamps the model may know only as windows
    ids = (a["scope"], a.get("resource_id"), a.get("thread_id"))
    if name == "get_working_memory":
        return model.get_working_memory(*ids)
    if name == "set_working_memory":
        return model.set_working_memory(a["content"], *ids, now)
    if name == "merge_working_memory":
        return model.merge_working_memory(a["patch"], *ids, now)
    raise ValueError(f"no model of {name}")


def _same(model: Model, want: MResource | MThread | None, got: Resource | Thread | None) -> bool:
    """``got`` is the model's record (its windows then set to the stamps ``got`` shows)."""
    if want is None or got is None:
        return want is None and got is None
    if record_mismatches(want, got):
        return False
    model.observed(want, got.created_at, got.updated_at)
    return True


def _matches(model: Model, op: Op, value: Any) -> bool:
    outcome = op.outcome
    if "error" in outcome:
        return False
    if "resource" in outcome or "thread" in outcome or op.name in ("get_resource", "get_thread"):
        got: Resource | Thread | None = None
        if "resource" in outcome:
            got = decode_resource(outcome["resource"])
        elif "thread" in outcome:
            got = decode_thread(outcome["thread"])
        elif outcome.get("value") is not None:
            return False
        return _same(model, value, got)
    if op.name == "list_threads":
        return _page_matches(model, op)
    got_value = outcome["value"]
    if op.name == "get_working_memory":
        return wm_matches(value, got_value)
    if op.name == "merge_working_memory":
        return json_equal(value, got_value)
    return type(got_value) is type(value) and got_value == value


def _page_matches(model: Model, op: Op) -> bool:
    a, page = op.args, op.outcome["page"]
    threads = [decode_thread(t) for t in page["threads"]]
    listed = [(t.id, getattr(t, a["order_by"])) for t in threads]
    if page["unreadable"] or (page["page"], page["per_page"]) != (a["page"], a["per_page"]):
        return False
    explained = model.page_explained(
        a["resource_id"],
        a["page"],
        a["per_page"],
        a["order_by"],
        a["direction"],
        listed,
        page["total"],
        page["has_more"],
    )
    return explained and all(_same(model, model.threads[t.id], t) for t in threads)


def step(state: Model, op: Op) -> Model | None:
    """The state after ``op`` took effect on ``state``, or ``None`` when its result contradicts the model."""
    new = state.clone()
    try:
        value = _apply(new, op)
    except WorkmemError as exc:  # a refusal changes nothing
        if not op.checked:
            return state
        return state if type(exc).__name__ in op.outcome.get("error", ()) else None
    if not op.checked:
        return new
    return new if _matches(new, op, value) else None


# -- the search ---------------------------------------------------------------------------------


class Undecided(Exception):
    """The search of one part took more than :data:`MAX_STEPS` steps."""


def is_linearizable(ops: list[Op], initial: Model | None = None) -> bool:
    """Whether some order of ``ops``, each at an instant between its call and return, agrees with the model.

    Wing & Gong's search with Lowe's memoization, on a doubly linked list of call
    and return entries (Porcupine's ``checkSingle``): take the first call whose
    step agrees, remove it and its return from the list, start again from the
    head; at a return whose call is still in the list, undo the last call
    taken and try the next one after it. A (set of calls taken, state) met
    before is not searched again.
    """
    count = len(ops)
    entries = sorted([(op.start, 0, i) for i, op in enumerate(ops)] + [(op.end, 1, i) for i, op in enumerate(ops)])
    size = 2 * count + 1
    nxt, prv, owner, match = [-1] * size, [0] * size, [0] * size, [0] * size
    is_call = [False] * size
    call_node: dict[int, int] = {}
    for node, (_, kind, i) in enumerate(entries, 1):
        owner[node], is_call[node] = i, kind == 0
        nxt[node - 1], prv[node] = node, node - 1
        if kind == 0:
            call_node[i] = node
        else:
            match[call_node[i]] = node

    def lift(node: int) -> None:
        ret = match[node]
        nxt[prv[node]], prv[nxt[node]] = nxt[node], prv[node]
        nxt[prv[ret]] = nxt[ret]
        if nxt[ret] != -1:
            prv[nxt[ret]] = prv[ret]

    def unlift(node: int) -> None:
        ret = match[node]
        nxt[prv[ret]] = ret
        if nxt[ret] != -1:
            prv[nxt[ret]] = ret
        nxt[prv[node]] = node
        prv[nxt[node]] = node

    state = initial or Model()
    taken = 0
    seen: set[tuple[int, str]] = set()
    stack: list[tuple[int, Model]] = []
    node = nxt[0]
    steps = 0
    while nxt[0] != -1:
        steps += 1
        if steps > MAX_STEPS:
            raise Undecided
        if is_call[node]:
            i = owner[node]
            new = step(state, ops[i])
            if new is not None:
                key = (taken | 1 << i, new.key())
                if key not in seen:
                    seen.add(key)
                    stack.append((node, state))
                    state, taken = new, taken | 1 << i
                    lift(node)
                    node = nxt[0]
                    continue
            node = nxt[node]
        else:
            if not stack:
                return False
            node, state = stack.pop()
            taken &= ~(1 << owner[node])
            unlift(node)
            node = nxt[node]
    return True


# -- independent parts --------------------------------------------------------------------------


def _part_key(op: Op) -> tuple[str, str]:
    a = op.args
    if op.name == "list_threads":
        return "listing", a["resource_id"]
    if "thread" in a:
        return "thread", a["thread"]["id"]
    if "thread_id" in a:
        return "thread", a["thread_id"]
    return "resource", a["resource_id"]


def partitions(ops: list[Op]) -> list[list[Op]]:
    """The independent parts of ``ops``: calls of one part touch no state another part's calls touch.

    Each resource record is a part. Threads are joined with the listings of
    every owner a call may create them under (the one that names an owner only
    to check it reads the thread, not the owner's listing).
    """
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(key: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for op in ops:
        find(_part_key(op))
        if "thread" in op.args:
            parent[find(("thread", op.args["thread"]["id"]))] = find(("listing", op.args["thread"]["resource_id"]))
    parts: dict[tuple[str, str], list[Op]] = {}
    for op in ops:
        parts.setdefault(find(_part_key(op)), []).append(op)
    return list(parts.values())


# -- shrinking ------------------------------------------------------------------------------------


def _renumbered(ops: list[Op]) -> list[Op]:
    return [replace(op, index=i) for i, op in enumerate(ops)]


def _fails(ops: list[Op]) -> bool:
    try:
        return not is_linearizable(_renumbered(ops))
    except Undecided:
        return False


def shrink(ops: list[Op], seconds: float) -> list[Op]:
    """A few calls of the non-linearizable ``ops`` that still cannot be linearized.

    1. Cut the history at the earliest return by which it already fails; a
       write still running at the cut is left open (it may take effect at any
       time after its call: also after every other, as if never), a read still
       running is dropped. Sound: a cut of a linearizable history is linearizable.
    2. Drop each read, and leave open the result of each write, that the failure
       does not need. Sound too: it only takes constraints away.
    3. Drop each write left open that the failure does not need either: the rest
       still fails; it fails as well with the write free to take effect at any
       time after its call (so its placement explains nothing); each result still
       checked is still needed (so dropping the write made no result fail on its
       own); and every value a result shows was written by a call that remains.

    Stops where it is after ``seconds``.
    """
    deadline = time.monotonic() + seconds
    ops = sorted(ops, key=lambda op: op.start)
    ends = sorted({op.end for op in ops})
    lo, hi = 0, len(ends) - 1
    while lo < hi and time.monotonic() < deadline:  # the earliest cut that fails (cuts of a failing one fail too)
        mid = (lo + hi) // 2
        if _fails(_cut(ops, ends[mid])):
            hi = mid
        else:
            lo = mid + 1
    ops = _cut(ops, ends[hi])  # fails: the whole history at first, then each cut the search found failing
    for op in sorted(ops, key=lambda op: (not op.reads_only, -op.start)):
        if time.monotonic() > deadline:
            return ops
        if op.checked:
            trial = _without(ops, op) if op.reads_only else _with(ops, op)
            if _fails(trial):
                ops = trial
    for op in sorted([op for op in ops if not op.checked], key=lambda op: -op.start):
        if time.monotonic() > deadline:
            break
        trial = _without(ops, op)
        if (
            _sourced(trial)
            and _fails(trial)
            and _fails(_with(ops, op, end=NEVER))
            and all(
                not _fails(_without(trial, one) if one.reads_only else _with(trial, one))
                for one in trial
                if one.checked
            )
        ):
            ops = trial
    return ops


def _without(ops: list[Op], op: Op) -> list[Op]:
    return [o for o in ops if o is not op]


def _sourced(ops: list[Op]) -> bool:
    """Whether every call tag in a result checked names a call of ``ops`` (values are unique to their call)."""
    tags = {op.event.call.get("tag") for op in ops}
    return all(set(TAG.findall(json.dumps(op.outcome))) <= tags for op in ops if op.checked)


def _with(ops: list[Op], op: Op, **changes: Any) -> list[Op]:
    """``ops`` with ``op`` changed and its result left open."""
    return [replace(o, **{"checked": False, **changes}) if o is op else o for o in ops]


def _cut(ops: list[Op], at: int) -> list[Op]:
    """The calls made by ``at``; the writes still running then left open (the reads dropped: they change nothing)."""
    return [
        op if op.end <= at else replace(op, end=NEVER, checked=False)
        for op in ops
        if op.start <= at and (op.end <= at or not op.reads_only)
    ]


# -- the verdict, in words ------------------------------------------------------------------------


def _shortener(prefix: str) -> Callable[[str], str]:
    return lambda text: text[len(prefix) :] if text.startswith(prefix) else text


def describe(ops: list[Op], total: int, prefix: str, origin: int) -> str:
    """The shrunk sub-history as lines: times in ms from the first call of the run, the worker, the call."""
    short = _shortener(prefix)
    width = max(len(op.event.worker) for op in ops)
    lines = [
        f"not linearizable: no order of these {len(ops)} calls (of {total} on these ids), each taking effect at one"
        " instant between its call and its return, gives the results the backend gave."
        f" Ids without their prefix {prefix!r}; times in ms from the first call:"
    ]
    for op in sorted(ops, key=lambda op: op.start):
        end = "   (running)" if op.end >= NEVER else f"{(op.end - origin) / 1e6:9.3f}"
        result = describe_outcome(op.outcome, short) if op.checked else "(its result is not needed)"
        lines.append(
            f"  {(op.start - origin) / 1e6:9.3f} .. {end}  {op.event.worker:<{width}}  "
            f"{describe_call(op.event.call, short)} {result}"
        )
    if any(SCRIBBLE in json.dumps(op.outcome) for op in ops if op.checked):
        lines.append(
            f"{SCRIBBLE!r} was written by no call: the workers add it to every record and document a call"
            " returned, and to the metadata and patches they passed in, once the call has returned. The storage"
            " keeps a reference to objects the caller owns (see the check no_aliasing)."
        )
    else:
        lines.append(
            "Look for a read that missed a write which had returned before it began (a stale cache, a replica),"
            " two writes that both read the same old value (a lost update), a listing whose total or order"
            " disagrees with its page, or a write naming an owner that landed after the thread was re-created"
            " under another."
        )
    return "\n".join(lines)


def history_failure(events: list[Event], prefix: str, shrink_seconds: float) -> str | None:
    """``None`` when the recorded history is linearizable; else the shrunk failure, in words."""
    ops = operations(events)
    if not ops:
        return None
    origin = min(op.start for op in ops)
    for part in partitions(ops):
        numbered = _renumbered(sorted(part, key=lambda op: op.start))
        try:
            if is_linearizable(numbered):
                continue
        except Undecided:
            continue  # too many overlapping calls to decide in time: this part proves nothing either way
        return describe(shrink(numbered, shrink_seconds), len(part), prefix, origin)
    return None
