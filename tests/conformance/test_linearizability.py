"""The linearizability checker on histories made by hand: what it accepts, what it refuses, what it prints.

The histories are recorded on the honest in-memory adapter (so every outcome
is a real one), then given the times or the results a broken adapter would
give: a read that returns the value before a write that had returned, two
merges that each miss the other, a page whose total disagrees with it.
The check itself against mutants is in ``test_mutants.py``.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workmem.adapters.reference import ReferenceStorage
from workmem.conformance import run
from workmem.conformance.history import SCRIBBLE, Call, Event, plan, record_calls
from workmem.conformance.linearizability import history_failure, is_linearizable, operations, partitions, shrink
from workmem.conformance.linearizable import THREADS, record_history
from workmem.conformance.model import Model, MThread, Window
from workmem.conformance.processes import spawn
from workmem.conformance.profiles import PROFILES
from workmem.conformance.registry import CheckContext
from workmem.conformance.target import Target

MS = 1_000_000


def _c(name: str, tag: str = "", **args: Any) -> Call:
    return {"call": name, "args": args, "tag": tag}


def _recorded(*calls: Call) -> list[Event]:
    """The calls run one after another on a fresh honest adapter, 1 ms apart on the clock of the history."""
    events = record_calls(ReferenceStorage(), list(calls), "thread 1")
    return [dataclasses.replace(e, start=i * MS, end=i * MS + MS // 2) for i, e in enumerate(events)]


def _timed(event: Event, start: float, end: float) -> Event:
    return dataclasses.replace(event, start=int(start * MS), end=int(end * MS))


def test_a_sequential_history_of_the_honest_adapter_is_linearizable() -> None:
    calls = [c for w in plan("p-", seed=7, workers=1, calls=200) for c in w]
    events = record_calls(ReferenceStorage(), calls, "thread 1")
    assert history_failure(events, "p-", 1) is None
    ops = operations(events)
    assert all(is_linearizable(part) for part in (_number(p) for p in partitions(ops)))


def _number(ops: list[Any]) -> list[Any]:
    return [dataclasses.replace(op, index=i) for i, op in enumerate(ops)]


def test_a_stale_read_is_refused_and_shown_with_the_writes_it_missed() -> None:
    first, second, read = _recorded(
        _c("update_resource", "w0.0", resource_id="r", working_memory="w0.0"),
        _c("update_resource", "w0.1", resource_id="r", working_memory="w0.1"),
        _c("get_resource", resource_id="r"),
    )
    stale = {"resource": first.outcome["resource"]}
    events = [first, dataclasses.replace(second, worker="thread 2"), dataclasses.replace(read, outcome=stale)]
    assert history_failure([first, second, read], "", 1) is None
    failure = history_failure(events, "", 1)
    assert failure is not None
    assert "no order of these 3 calls" in failure, failure
    assert "working_memory 'w0.0'" in failure and "thread 2" in failure
    # The same read made while the second write was still running is fine: it took effect first.
    overlapping = [first, _timed(second, 1.0, 3.0), dataclasses.replace(_timed(read, 2.0, 2.5), outcome=stale)]
    assert history_failure(overlapping, "", 1) is None


def test_a_lost_update_is_refused_when_the_merges_overlap() -> None:
    one, two = _recorded(
        _c("merge_working_memory", "w0.0", patch={"k0": "w0.0"}, scope="resource", resource_id="r"),
        _c("merge_working_memory", "w1.0", patch={"k1": "w1.0"}, scope="resource", resource_id="r"),
    )
    assert two.outcome == {"value": {"k0": "w0.0", "k1": "w1.0"}}
    both = [_timed(one, 0, 2), dataclasses.replace(_timed(two, 1, 3), worker="thread 2")]
    assert history_failure(both, "", 1) is None
    lost = [both[0], dataclasses.replace(both[1], outcome={"value": {"k1": "w1.0"}})]
    failure = history_failure(lost, "", 1)
    assert failure is not None and "no order of these 2 calls" in failure, failure


def test_a_page_with_a_total_of_another_moment_is_refused() -> None:
    created, listed = _recorded(
        _c("create_thread", "w0.0", thread=_thread("t1", "r", "w0.0")),
        _c("list_threads", resource_id="r", page=1, per_page=1, order_by="created_at", direction="asc"),
    )
    assert listed.outcome["page"]["total"] == 1 and listed.outcome["page"]["threads"] == []
    assert history_failure([created, listed], "", 1) is None
    page = {**listed.outcome["page"], "total": 2, "has_more": True}  # what the SQL adapters returned
    failure = history_failure([created, dataclasses.replace(listed, outcome={"page": page})], "", 1)
    assert failure is not None and "no order of these 1 calls" in failure and "total=2" in failure, failure


def _thread(tid: str, owner: str, tag: str, at: datetime | None = None) -> dict[str, Any]:
    stamp = (at or datetime(2024, 1, 1, tzinfo=UTC)).isoformat()
    return {"id": tid, "resource_id": owner, "title": tag, "metadata": None, "created_at": stamp}


def test_a_page_fits_any_stamp_in_the_window_of_the_write_that_set_it() -> None:
    model = Model()
    old = datetime(2024, 1, 1, tzinfo=UTC)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    window = Window(now, now + timedelta(milliseconds=10))
    model.create_thread(MThread("t1", "r", "", None, old, old))
    model.create_thread(MThread("t2", "r", "", None, old, old))
    model.update_thread("t2", window, title="moved")
    stamp = now + timedelta(milliseconds=5)
    args = ("r", 0, 1, "updated_at", "desc")
    assert model.page_explained(*args, [("t2", stamp)], 2, True)  # t2 in its window: newest
    assert not model.page_explained(*args, [("t1", old)], 2, True)  # t2 is newer whatever its stamp
    assert not model.page_explained(*args, [("t2", now + timedelta(seconds=1))], 2, True)  # outside its window
    assert not model.page_explained(*args, [("t2", stamp)], 2, False)  # has_more
    assert model.page_explained("r", 1, 1, "updated_at", "desc", [("t1", old)], 2, False)
    assert model.page_explained("r", 2, 1, "updated_at", "desc", [], 2, False)
    assert not model.page_explained("r", 0, None, "updated_at", "asc", [("t2", stamp), ("t1", old)], 2, False)


def test_parts_are_each_resource_and_the_threads_with_their_owners_listings() -> None:
    events = _recorded(
        _c("update_resource", "w0.0", resource_id="a", working_memory="x"),
        _c("update_resource", "w0.1", resource_id="b", working_memory="y"),
        _c("create_thread", "w0.2", thread=_thread("t1", "a", "w0.2")),
        _c("create_thread", "w0.3", thread=_thread("t2", "c", "w0.3")),
        _c("list_threads", resource_id="a", page=0, per_page=None, order_by="created_at", direction="asc"),
        _c("merge_working_memory", "w0.5", patch={"k": 1}, scope="thread", thread_id="t1", resource_id="z"),
        _c("list_threads", resource_id="c", page=0, per_page=None, order_by="created_at", direction="asc"),
        _c("create_thread", "w0.7", thread=_thread("t2", "a", "w0.7")),  # t2 may move to a: joins a's part
    )
    parts = sorted(sorted(op.index for op in part) for part in partitions(operations(events)))
    assert parts == [[0], [1], [2, 3, 4, 5, 6, 7]]


def test_shrinking_keeps_a_failure_and_drops_what_it_does_not_need() -> None:
    calls = [c for w in plan("p-", seed=3, workers=1, calls=60) for c in w]
    events = record_calls(ReferenceStorage(), calls, "thread 1")
    events = [dataclasses.replace(e, start=i * MS, end=i * MS + MS // 2) for i, e in enumerate(events)]
    reads = [i for i, e in enumerate(events) if e.call["call"] == "get_thread" and e.outcome.get("thread")]
    broken = reads[-1]
    thread = {**events[broken].outcome["thread"], "title": "no call wrote this"}
    events[broken] = dataclasses.replace(events[broken], outcome={"thread": thread})
    ops = operations(events)
    (part,) = [p for p in partitions(ops) if any(op.index == broken for op in p)]
    shown = shrink(_number(sorted(part, key=lambda op: op.start)), 10)
    assert len(shown) < len(part) and not is_linearizable(_number(shown))
    assert [op.event for op in shown if op.checked] == [events[broken]]


def test_the_workers_scribble_on_what_they_got_back_and_passed_in() -> None:
    storage = ReferenceStorage()
    events = record_calls(
        storage,
        [
            _c("update_resource", "w0.0", resource_id="r", metadata={"m": [1]}),
            _c("get_resource", resource_id="r"),
        ],
        "thread 1",
    )
    assert SCRIBBLE not in str([e.outcome for e in events])  # the outcomes were recorded before
    stored = storage.get_resource("r")
    assert stored is not None and stored.metadata == {"m": [1]}  # the honest adapter shares nothing


def test_the_plan_is_the_same_for_a_seed_and_moves_threads_between_owners() -> None:
    assert plan("p-", 1, 3, 50) == plan("p-", 1, 3, 50) != plan("p-", 2, 3, 50)
    churn = plan("p-", 1, 3, 60)[-1]
    assert sum(c["call"] == "create_thread" for c in churn) > 10
    assert all(len(w) == 60 for w in plan("p-", 1, 3, 60))


def test_calls_run_in_worker_processes_when_the_adapter_is_atomic_across_them(tmp_path: Any) -> None:
    ctx = CheckContext(Target(f"file:{tmp_path}/x.db"), PROFILES["quick"])
    try:
        calls = plan(ctx.prefix(), 1, THREADS + 2, 10)
        events = record_history(ctx, calls, 2)
    finally:
        ctx.target.close_all()
    workers = {e.worker for e in events}
    assert workers == {"process 1", "process 2", *(f"thread {i}" for i in range(1, THREADS + 1))}
    assert history_failure(events, "", 1) is None


def test_spawn_says_when_the_workers_were_told_to_go(tmp_path: Any) -> None:
    told: list[int] = []
    job = {"url": f"file:{tmp_path}/x.db", "op": "history", "calls": plan("p-", 1, 1, 3)[0], "worker": "process 1"}
    (result,) = spawn([job], started=lambda: told.append(len(told)))
    assert told == [0] and result["ok"] and len(result["events"]) == 3


@pytest.mark.parametrize("api", ["sync", "async"])
def test_the_check_passes_on_the_honest_adapter(api: str) -> None:
    name = uuid.uuid4().hex
    report = run(f"memory://{name}", profile="standard", only=["linearizable"], api=api)  # type: ignore[arg-type]
    assert [c.status for c in report.checks] == ["passed"], report.checks
