"""The async API (``workmem.connect_async``) next to the sync one, on one backend namespace.

Three measurements, each returning plain JSON-ready dicts (:mod:`bench.report` judges them):

1. :func:`async_overhead` -- one caller: every operation through the async API
   (awaited on an event loop) interleaved with the same operation through the
   sync API of a storage on the same namespace; ``ratio`` = async / sync median.
2. :func:`async_throughput` -- 64 concurrent callers: 64 tasks on one async
   storage against the sync API driven by a 16-thread pool (64 jobs, 16 at a
   time, each doing its calls one after another); reads (``get_thread``) and
   writes (``merge_working_memory``, each caller into a resource of its own).
   Rounds alternate async / sync; the median round counts.
3. :func:`loop_lag` -- a 1 ms ticker (``await asyncio.sleep(0.001)``) on the
   event loop, idle and then during 64 tasks each merging into a working
   memory of its own (16 keys, rewritten: the document stays small, so the
   figure is the API's, not JSON's on a growing document); the lag is each
   tick's delay past its 1 ms (worst and p99), and every document is checked
   for lost updates.

Everything opens the async storage with ``workmem.connect_async`` and reports
what it got: a native async adapter, or :class:`~workmem.aio.ThreadedAsyncStorage`
(the sync adapter on worker threads, how many).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import workmem
from bench.backends import Namespace
from bench.timing import AsyncSubject, Subject, interleaved, percentile, summarize
from bench.workloads import OPERATIONS, Fixture, Settings, operations
from workmem.aio import AsyncMemoryStorage, ThreadedAsyncStorage
from workmem.storage import MemoryStorage

__all__ = ["TASKS", "THREADS", "async_overhead", "async_section", "async_throughput", "describe", "loop_lag"]

TASKS = 64
"""Concurrent callers of the throughput and loop-lag runs."""
THREADS = 16
"""Threads driving the sync API in the throughput run."""
TICK_S = 0.001

_POOL_OPTIONS: dict[str, dict[str, Any]] = {
    # Both APIs get the same 16 connections, opened before timing.
    "postgres": {"min_size": THREADS, "max_size": THREADS},
}


def describe(storage: AsyncMemoryStorage) -> dict[str, Any]:
    """Which async adapter ``connect_async`` returned: its class, native or on worker threads (how many)."""
    if isinstance(storage, ThreadedAsyncStorage):
        workers = getattr(storage._executor, "_max_workers", None)
        return {
            "class": type(storage).__name__,
            "native": False,
            "wraps": type(storage.storage).__name__,
            "workers": workers,
            "what": f"ThreadedAsyncStorage: {type(storage.storage).__name__} on {workers} worker threads",
        }
    return {"class": type(storage).__name__, "native": True, "what": f"native {type(storage).__name__}"}


def _open_async(ns: Namespace, loop: asyncio.AbstractEventLoop, **extra: Any) -> AsyncMemoryStorage:
    return loop.run_until_complete(workmem.connect_async(ns.url, **{**ns.options, **extra}))


def async_overhead(
    ns: Namespace, storage: MemoryStorage, fx: Fixture, settings: Settings, loop: asyncio.AbstractEventLoop
) -> dict[str, Any]:
    """Each operation, one caller: async API (awaited) vs sync API, interleaved blocks; ratio of medians."""
    astorage = _open_async(ns, loop)
    try:
        sync_ops = operations(storage, fx, "ov-s")
        async_ops = operations(astorage, fx, "ov-a")
        out: dict[str, Any] = {"adapter": describe(astorage), "operations": {}}
        for name in OPERATIONS:
            call = cast(Callable[[int], Awaitable[object]], async_ops[name])
            subjects: dict[str, Subject] = {"sync": sync_ops[name], "async": AsyncSubject(call, loop)}
            stats = interleaved(subjects, samples=settings.samples, budget_s=settings.budget_s)
            out["operations"][name] = {
                "sync": stats["sync"].to_dict(),
                "async": stats["async"].to_dict(),
                "ratio": round(stats["async"].median_us / stats["sync"].median_us, 3),
            }
        return out
    finally:
        loop.run_until_complete(astorage.close())


def async_throughput(
    ns: Namespace, fx: Fixture, settings: Settings, loop: asyncio.AbstractEventLoop, rounds: int = 3
) -> dict[str, Any]:
    """64 tasks on the async API vs the sync API on a 16-thread pool; ops/s per workload, median of ``rounds``."""
    options = _POOL_OPTIONS.get(ns.backend, {})
    per_task = 10 if settings.quick else 100
    threads = fx.thread_ids
    astorage = _open_async(ns, loop, **options)
    storage = ns.connect(**options)
    pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="wmbench")
    try:
        workloads: dict[str, tuple[Callable[[int, int], object], Callable[[int, int], Awaitable[object]]]] = {
            "get_thread": (
                lambda k, j: storage.get_thread(threads[(k * 131 + j * 7919) % len(threads)]),
                lambda k, j: astorage.get_thread(threads[(k * 131 + j * 7919) % len(threads)]),
            ),
            "merge_working_memory": (
                lambda k, j: storage.merge_working_memory({f"k{j % 16}": j}, scope="resource", resource_id=f"tp-s{k}"),
                lambda k, j: astorage.merge_working_memory({f"k{j % 16}": j}, scope="resource", resource_id=f"tp-a{k}"),
            ),
        }
        out: dict[str, Any] = {
            "adapter": describe(astorage),
            "tasks": TASKS,
            "threads": THREADS,
            "calls_per_task": per_task,
            "rounds": rounds,
            "options": options,
            "workloads": {},
        }
        for name, (sync_call, async_call) in workloads.items():
            _sync_round(pool, sync_call, 2)  # warm up: connections, prepared statements
            loop.run_until_complete(_async_round(async_call, 2))
            sync_s: list[float] = []
            async_s: list[float] = []
            for r in range(rounds):
                first_async = r % 2 == 0
                if first_async:
                    async_s.append(loop.run_until_complete(_async_round(async_call, per_task)))
                sync_s.append(_sync_round(pool, sync_call, per_task))
                if not first_async:
                    async_s.append(loop.run_until_complete(_async_round(async_call, per_task)))
            ops = TASKS * per_task
            sync_rate = ops / statistics.median(sync_s)
            async_rate = ops / statistics.median(async_s)
            out["workloads"][name] = {
                "ops_per_round": ops,
                "sync_ops_per_s": round(sync_rate, 1),
                "async_ops_per_s": round(async_rate, 1),
                "ratio": round(async_rate / sync_rate, 3),
                "sync_round_s": [round(s, 4) for s in sync_s],
                "async_round_s": [round(s, 4) for s in async_s],
            }
        return out
    finally:
        pool.shutdown(wait=True)
        storage.close()
        loop.run_until_complete(astorage.close())


def _sync_round(pool: ThreadPoolExecutor, call: Callable[[int, int], object], per_task: int) -> float:
    def job(k: int) -> None:
        for j in range(per_task):
            call(k, j)

    began = time.perf_counter()
    list(pool.map(job, range(TASKS)))
    return time.perf_counter() - began


async def _async_round(call: Callable[[int, int], Awaitable[object]], per_task: int) -> float:
    async def task(k: int) -> None:
        for j in range(per_task):
            await call(k, j)

    began = time.perf_counter()
    await asyncio.gather(*(task(k) for k in range(TASKS)))
    return time.perf_counter() - began


async def _ticker(stop: asyncio.Event, lags: list[float]) -> None:
    clock = time.perf_counter
    while not stop.is_set():
        began = clock()
        await asyncio.sleep(TICK_S)
        lags.append(clock() - began - TICK_S)


def _lag_stats(lags: list[float]) -> dict[str, Any]:
    values = sorted(lags)
    return {
        "ticks": len(values),
        "median_ms": round(statistics.median(values) * 1e3, 3),
        "p99_ms": round(percentile(values, 0.99) * 1e3, 3),
        "max_ms": round(values[-1] * 1e3, 3),
    }


def loop_lag(ns: Namespace, settings: Settings, loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    """A 1 ms ticker's delays, idle and during 64 tasks merging into working memories of their own (lost updates)."""
    per_task = 5 if settings.quick else 40
    resource_id = "lag-merge"
    expected = {f"k{j % 16}": j for j in range(per_task)}
    astorage = _open_async(ns, loop)
    try:

        async def idle(seconds: float) -> list[float]:
            stop, lags = asyncio.Event(), list[float]()
            ticker = asyncio.create_task(_ticker(stop, lags))
            await asyncio.sleep(seconds)
            stop.set()
            await ticker
            return lags

        async def loaded() -> tuple[list[float], list[list[float]], float]:
            stop, lags = asyncio.Event(), list[float]()
            latencies: list[list[float]] = [[] for _ in range(TASKS)]

            async def task(k: int) -> None:
                for j in range(per_task):
                    began = time.perf_counter()
                    await astorage.merge_working_memory(
                        {f"k{j % 16}": j}, scope="resource", resource_id=f"{resource_id}-{k}"
                    )
                    latencies[k].append(time.perf_counter() - began)

            ticker = asyncio.create_task(_ticker(stop, lags))
            await asyncio.sleep(0.05)  # the ticker is ticking before the load starts
            began = time.perf_counter()
            await asyncio.gather(*(task(k) for k in range(TASKS)))
            seconds = time.perf_counter() - began
            stop.set()
            await ticker
            return lags, latencies, seconds

        loop.run_until_complete(
            astorage.merge_working_memory({"warm": 1}, scope="resource", resource_id=f"{resource_id}-warm")
        )
        idle_lags = loop.run_until_complete(idle(0.5 if settings.quick else 2.0))
        lags, latencies, seconds = loop.run_until_complete(loaded())
        lost = 0
        for k in range(TASKS):
            text = loop.run_until_complete(
                astorage.get_working_memory(scope="resource", resource_id=f"{resource_id}-{k}")
            )
            stored = json.loads(text) if text else {}
            lost += sum(1 for key, value in expected.items() if stored.get(key) != value)
        flat = [v for values in latencies for v in values]
        return {
            "adapter": describe(astorage),
            "tasks": TASKS,
            "merges_per_task": per_task,
            "tick_ms": TICK_S * 1e3,
            "idle": _lag_stats(idle_lags),
            "loaded": _lag_stats(lags),
            "merges": len(flat),
            "merges_per_s": round(len(flat) / seconds, 1) if seconds > 0 else None,
            "merge_latency": summarize(flat).to_dict() if flat else None,
            "lost_updates": lost,
        }
    finally:
        loop.run_until_complete(astorage.close())


_THROUGHPUT_BACKENDS = ("postgres", "libsql", "memory")
_LAG_BACKENDS = ("libsql", "postgres", "memory")


def async_section(
    ns: Namespace,
    storage: MemoryStorage,
    fx: Fixture,
    settings: Settings,
    run: Callable[[str, Callable[[], Any]], Any],
) -> None:
    """The three measurements on one event loop of their own; ``run(name, work)`` records each (see ``__main__``)."""
    loop = asyncio.new_event_loop()
    try:
        run("async_overhead", lambda: async_overhead(ns, storage, fx, settings, loop))
        if ns.backend in _THROUGHPUT_BACKENDS:
            run("async_throughput", lambda: async_throughput(ns, fx, settings, loop))
        if ns.backend in _LAG_BACKENDS:
            run("loop_lag", lambda: loop_lag(ns, settings, loop))
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
