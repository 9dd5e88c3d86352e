"""The check ``linearizable``: random concurrent calls from threads, tasks and processes, checked for linearizability.

Each round draws random calls of every kind (reads, creates, updates, deletes,
``set`` and ``merge`` in both scopes, listings) for :data:`THREADS` threads
(async tasks on the async API) and, when the adapter is atomic across
processes and the suite has a URL, :data:`PROCESSES` worker processes; runs
them at once on one namespace, each worker on its own connection, recording
every call (:mod:`~workmem.conformance.history`); and asks the checker
(:mod:`~workmem.conformance.linearizability`) whether the history is
linearizable. The profile sets the rounds (``race_rounds``), the calls per
worker (``history_calls``) and how long a worker may take (``history_seconds``).
"""

from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING, Any

from .concurrency import race
from .history import Event, describe_call, plan, record_calls
from .linearizability import history_failure
from .processes import spawn
from .registry import CheckContext, check

if TYPE_CHECKING:
    from workmem.storage import MemoryStorage

__all__ = ["PROCESSES", "THREADS", "record_history"]

THREADS = 4
"""Threads (async tasks on the async API) making calls at once, each on its own connection."""
PROCESSES = 2
"""Worker processes making calls as well, when the adapter is atomic across processes and has a URL."""


def record_history(
    ctx: CheckContext, calls: list[list[Any]], processes: int, conns: list[MemoryStorage] | None = None
) -> list[Event]:
    """Run each list of calls on its own connection: the first ``processes`` in worker processes, the rest
    in threads on ``conns`` (new connections when not given)."""
    go = threading.Event()
    from_processes: list[dict[str, Any]] = []
    failed: list[BaseException] = []
    spawner = None
    if processes:
        assert ctx.target.url is not None
        seconds = ctx.profile.history_seconds
        jobs = [
            {
                "url": ctx.target.url,
                "op": "history",
                "calls": calls[k],
                "worker": f"process {k + 1}",
                "seconds": seconds,
            }
            for k in range(processes)
        ]

        def run_processes() -> None:
            try:
                from_processes.extend(spawn(jobs, api=ctx.target.api, started=go.set))
            except BaseException as exc:
                failed.append(exc)
                go.set()

        spawner = threading.Thread(target=run_processes, daemon=True)
        spawner.start()
    else:
        go.set()
    kind = "task" if ctx.target.api == "async" else "thread"
    local = calls[processes:]
    conns = conns or [ctx.open() for _ in local]

    def work(i: int, storage: Any) -> list[Event]:
        go.wait(timeout=120)
        return record_calls(storage, local[i], f"{kind} {i + 1}", ctx.profile.history_seconds)

    results = race(conns, work)
    if spawner is not None:
        spawner.join(timeout=180)
    if failed:
        raise failed[0]
    events: list[Event] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        events += result
    for reply in from_processes:
        assert reply.get("ok"), f"a worker process failed: {reply.get('error')}"
        events += [Event.from_json(e) for e in reply["events"]]
    return events


def _processes(ctx: CheckContext) -> int:
    return PROCESSES if ctx.target.url is not None and ctx.capabilities.cross_process_atomic else 0


def _checked(ctx: CheckContext, events: list[Event]) -> list[Event]:
    """The calls whose results the history must explain: every call, but listings that are no snapshot.

    Such a listing (``capabilities.snapshot_listing`` is ``False``) reads each thread at its own instant,
    so its page may be of no single moment; it still runs among the others (it must raise nothing the
    contract does not name), and ``listing_under_churn`` checks what it promises.
    """
    if ctx.capabilities.snapshot_listing:
        return events
    return [event for event in events if event.call["call"] != "list_threads"]


@check(
    "linearizable",
    f"random calls of every kind from {THREADS} threads (async tasks on the async API) and, on an adapter atomic"
    f" across processes, {PROCESSES} worker processes form a linearizable history: each call took effect at one"
    " instant between its call and its return, in an order the model agrees with (listings run, but are checked"
    " only on an adapter whose listings are snapshots: capabilities.snapshot_listing)",
)
def linearizable(ctx: CheckContext) -> None:
    profile = ctx.profile
    conns = [ctx.open() for _ in range(THREADS)]
    for round_ in range(profile.race_rounds):
        p = ctx.prefix()
        processes = _processes(ctx) if round_ == 0 else 0
        seed = round_ if profile.derandomize else random.randrange(2**32)
        calls = plan(p, seed, THREADS + processes, profile.history_calls)
        events = record_history(ctx, calls, processes, conns)
        odd = [e for e in events if "unexpected" in e.outcome]
        assert not odd, (
            f"{odd[0].worker}: {describe_call(odd[0].call)} raised {odd[0].outcome['unexpected']}"
            " (a call racing others may only be refused as the contract says)"
        )
        failure = history_failure(_checked(ctx, events), p, profile.shrink_seconds)
        assert failure is None, failure + f"\n(the calls were drawn with seed {seed})"
