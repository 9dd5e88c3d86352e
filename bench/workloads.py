"""The three benchmark sections, run against one backend namespace.

1. :func:`latency` -- six operations, each interleaved with its raw driver floor;
   :func:`round_trips` counts what each operation sends.
2. :func:`thread_scaling` / :func:`resource_scaling` -- how ``list_threads``,
   ``get_thread`` and ``get_resource`` grow with threads per resource and
   with the number of resources.
3. :func:`concurrency` -- 1..64 writers, each with its own storage object,
   merging distinct keys into one working memory; ops/s and lost updates.
4. :func:`read_layers` -- where a read's time goes, layer by layer, from the
   raw driver call to the public sync method (and what the coroutine layer
   of ``run_sync`` costs by itself). The async API is :mod:`bench.async_api`.

Every function returns plain JSON-ready dicts; :mod:`bench.report` judges them.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.backends import Namespace
from bench.floors import Floor
from bench.loaders import Loader
from bench.timing import Subject, interleaved, summarize, time_calls
from bench.tracing import counted_storage
from workmem import operations as storage_operations
from workmem._drive import run_sync
from workmem.aio import AsyncMemoryStorage
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage

__all__ = [
    "OPERATIONS",
    "Fixture",
    "Settings",
    "concurrency",
    "latency",
    "operations",
    "prepare",
    "read_layers",
    "resource_scaling",
    "round_trips",
    "thread_scaling",
]

OPERATIONS = ("get_thread", "get_resource", "save_thread", "update_resource", "merge_working_memory", "list_threads")
_FLOOR_OF = {
    "get_thread": "read_thread",
    "get_resource": "read_resource",
    "save_thread": "write_thread",
    "update_resource": "write_thread",
    "merge_working_memory": "write_thread",
    "list_threads": "list_page",
}
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_MEMORY = json.dumps({"name": "Ada", "plan": "pro", "prefs": {"tone": "brief", "lang": "en"}})


@dataclass(frozen=True, slots=True)
class Settings:
    """How much to measure."""

    quick: bool
    samples: int
    """Timed calls per subject (before the time budget cuts it short)."""
    budget_s: float
    """Seconds per interleaved measurement, after ``min_samples``."""
    scale_steps: int
    """Sizes of the scaling runs: base, base*10, ... (this many)."""
    writers: tuple[int, ...]
    ops_per_level: int
    """Merges per concurrency level (split among the writers)."""

    @classmethod
    def default(cls, quick: bool) -> Settings:
        if quick:
            return cls(True, samples=150, budget_s=0.6, scale_steps=2, writers=(1, 4, 16, 64), ops_per_level=64)
        return cls(False, samples=2000, budget_s=5.0, scale_steps=4, writers=(1, 4, 16, 64), ops_per_level=512)


def _threads(prefix: str, owner: str, count: int, start: int = 0) -> list[Thread]:
    """``count`` threads of ``owner`` with distinct, increasing creation times."""
    out = []
    for i in range(start, start + count):
        stamp = _EPOCH + timedelta(milliseconds=i)
        out.append(Thread(f"{prefix}-{i}", owner, f"thread {i}", {"topic": "bench", "n": i}, stamp, stamp))
    return out


def _resources(prefix: str, count: int) -> list[Resource]:
    return [Resource(f"{prefix}-{i}", _MEMORY, {"plan": "pro", "n": i}, _EPOCH, _EPOCH) for i in range(count)]


@dataclass(frozen=True, slots=True)
class Fixture:
    """The records the latency section reads."""

    thread_ids: list[str]
    resource_ids: list[str]
    list_owner: str
    """A resource with 100 threads (the page of 20 comes from it)."""


def prepare(loader: Loader) -> Fixture:
    """Load 200 resources, 100 threads of ``lat-list`` and 900 more across those resources."""
    resources = _resources("lat-r", 200)
    loader.resources(resources)
    threads = _threads("lat-t", "lat-list", 100)
    for i in range(9):
        threads += _threads(f"lat-t{i}", resources[i].id, 100)
    loader.threads(threads)
    return Fixture([t.id for t in threads], [r.id for r in resources], "lat-list")


def operations(storage: MemoryStorage | AsyncMemoryStorage, fx: Fixture, tag: str) -> dict[str, Subject]:
    """The six operations as subjects; ``tag`` keeps the ids each call creates apart.

    On an :class:`AsyncMemoryStorage` each subject returns the call's coroutine (wrap it in an
    :class:`~bench.timing.AsyncSubject`); the arguments are the same as on the sync API.
    """
    threads, resources = fx.thread_ids, fx.resource_ids
    new = f"new-{tag}"
    return {
        "get_thread": lambda i: storage.get_thread(threads[(i * 7919) % len(threads)]),
        "get_resource": lambda i: storage.get_resource(resources[(i * 7919) % len(resources)]),
        "save_thread": lambda i: storage.save_thread(
            Thread(f"{new}-{i}", f"{new}-owner-{i % 50}", "new thread", {"topic": "bench"})
        ),
        "update_resource": lambda i: storage.update_resource(
            resources[i % len(resources)], working_memory=_MEMORY, metadata={"seen": i}
        ),
        "merge_working_memory": lambda i: storage.merge_working_memory(
            {f"k{i % 32}": i, "last": {"i": i}}, scope="resource", resource_id=f"{new}-merge-{i % 8}"
        ),
        "list_threads": lambda i: storage.list_threads(fx.list_owner, per_page=20),
    }


def _floors(floor: Floor, fx: Fixture) -> dict[str, Subject]:
    threads, resources = fx.thread_ids, fx.resource_ids
    # Every write stores a value never stored before: SQLite skips an UPDATE that changes nothing.
    writes = itertools.count()
    return {
        "read_thread": lambda i: floor.read_thread(threads[(i * 104729) % len(threads)]),
        "read_resource": lambda i: floor.read_resource(resources[(i * 104729) % len(resources)]),
        "write_thread": lambda i: floor.write_thread(threads[(i * 104729) % len(threads)], f"title {next(writes)}"),
        "list_page": lambda i: floor.list_page(fx.list_owner),
    }


def _adapter_sql(storage: MemoryStorage, floor: Floor, fx: Fixture) -> dict[str, Subject]:
    """The adapter's own statements run on the raw floor connection (SQL adapters only).

    Splits a ratio into what the adapter's SQL costs in the database and what
    its Python side (validation, row mapping, pooling) adds. Writes are
    included where the adapter does them in one statement.
    """
    dialect = getattr(storage, "dialect", None)
    if dialect is None or not floor.supports_statements:
        return {}
    from workmem.arguments import check_list_args

    threads, resources = fx.thread_ids, fx.resource_ids
    page = check_list_args(fx.list_owner, 0, 20, "created_at", "desc")
    listing = dialect.render(dialect.list_threads(page))
    # Rendered before timing: this is the database's share, so no Python of workmem's may run in it.
    thread_reads = [dialect.render(dialect.thread_by_id.statement(t)) for t in threads]
    resource_reads = [dialect.render(dialect.resource_by_id.statement(r)) for r in resources]
    subjects: dict[str, Subject] = {
        "get_thread": lambda i: floor.statement(*thread_reads[(i * 104729) % len(thread_reads)]),
        "get_resource": lambda i: floor.statement(*resource_reads[(i * 104729) % len(resource_reads)]),
        "list_threads": lambda i: floor.statement(*listing),
    }
    if getattr(dialect, "native_shallow_merge", False):  # writes that are one statement (PostgreSQL)
        from workmem.hooks import ScopeTarget
        from workmem.timestamps import utc_now

        subjects["save_thread"] = lambda i: floor.statement(
            *dialect.render(
                dialect.save_thread(
                    Thread(f"sql-{i}", f"sql-owner-{i % 50}", "new thread", {"topic": "bench"}), utc_now()
                )
            )
        )
        subjects["update_resource"] = lambda i: floor.statement(
            *dialect.render(dialect.update_resource(resources[i % len(resources)], _MEMORY, {"seen": i}, utc_now()))
        )
        subjects["merge_working_memory"] = lambda i: floor.statement(
            *dialect.render(
                dialect.merge_statement(
                    ScopeTarget("resource", f"sql-merge-{i % 8}", None), {f"k{i % 32}": i, "last": {"i": i}}, utc_now()
                )
            )
        )
    return subjects


_RECORD_FLOOR_OF = {"get_thread": "thread_record", "get_resource": "resource_record"}


def latency(storage: MemoryStorage, floor: Floor | None, fx: Fixture, settings: Settings) -> dict[str, Any]:
    """Median and p99 of each operation, interleaved with its raw floor.

    Where the floor can read whole records by hand (libSQL), the two reads are
    also timed against that ``record_floor`` -- the driver call, the metadata
    JSON decoded, both timestamps parsed, the frozen record built -- in a pair
    of their own (``record_ratio``): the raw tuple is not what the adapter returns.

    For SQL adapters the operations also get ``adapter_sql``: the adapter's own
    statement on the raw connection, so a ratio can be split into SQL and Python.
    It is timed against the floor in a pair of its own, not beside the adapter:
    it runs on the floor's connection, and a third subject on that connection
    would keep the floor's caches warmer than the adapter's (on libSQL that
    alone moved the ratio by about 0.1).
    """
    ops = operations(storage, fx, "lat")
    floors = {} if floor is None else _floors(floor, fx)
    sql = {} if floor is None else _adapter_sql(storage, floor, fx)
    records = _record_floors(floor, fx)
    out: dict[str, Any] = {}
    for name in OPERATIONS:
        subjects = {"adapter": ops[name]}
        floor_name = _FLOOR_OF[name]
        if floor_name in floors:
            subjects["floor"] = floors[floor_name]
        stats = interleaved(subjects, samples=settings.samples, budget_s=settings.budget_s)
        entry: dict[str, Any] = {"adapter": stats["adapter"].to_dict()}
        if "floor" in stats:
            entry["floor_name"] = floor_name
            entry["floor"] = stats["floor"].to_dict()
            entry["ratio"] = round(stats["adapter"].median_us / stats["floor"].median_us, 3)
        if name in sql and floor_name in floors:
            pair = interleaved(
                {"adapter_sql": sql[name], "floor": floors[floor_name]},
                samples=settings.samples,
                budget_s=settings.budget_s,
            )
            entry["adapter_sql"] = pair["adapter_sql"].to_dict()
            entry["sql_ratio"] = round(pair["adapter_sql"].median_us / pair["floor"].median_us, 3)
        if name in records:
            pair = interleaved(
                {"adapter": ops[name], "record_floor": records[name]},
                samples=settings.samples,
                budget_s=settings.budget_s,
            )
            entry["record_floor_name"] = _RECORD_FLOOR_OF[name]
            entry["record_floor"] = pair["record_floor"].to_dict()
            entry["adapter_vs_record"] = pair["adapter"].to_dict()
            entry["record_ratio"] = round(pair["adapter"].median_us / pair["record_floor"].median_us, 3)
        out[name] = entry
    return out


def _record_floors(floor: Floor | None, fx: Fixture) -> dict[str, Subject]:
    """The hand-written record reads, by the operation they stand for (none where the floor has none)."""
    if floor is None or not floor.records:
        return {}
    threads, resources = fx.thread_ids, fx.resource_ids
    return {
        "get_thread": lambda i: floor.thread_record(threads[(i * 104729) % len(threads)]),
        "get_resource": lambda i: floor.resource_record(resources[(i * 104729) % len(resources)]),
    }


def read_layers(storage: MemoryStorage, floor: Floor | None, fx: Fixture, settings: Settings) -> dict[str, Any] | None:
    """A read's time layer by layer, every layer interleaved with the others (floors with records only).

    Per read: ``raw`` (driver call, tuples), ``record`` (the hand-written record
    read), ``hook`` (``run_sync(storage._get_thread(id))``: the adapter's I/O and
    row mapping, no checks), ``flow`` (``run_sync(storage_operations.get_thread(...))``: the id
    checked, the owner rule) and ``public`` (``storage.get_thread(id)``). Each
    difference is one layer's price. ``coroutine_layer`` times the mechanism
    alone: three nested coroutines driven by ``run_sync`` against three nested
    plain calls (ns per call, the best of five loops of 20 000).
    """
    if floor is None or not floor.records:
        return None
    threads, resources = fx.thread_ids, fx.resource_ids

    def thread_id(i: int) -> str:
        return threads[(i * 7919) % len(threads)]

    def resource_id(i: int) -> str:
        return resources[(i * 7919) % len(resources)]

    layers: dict[str, dict[str, Subject]] = {
        "get_thread": {
            "raw": lambda i: floor.read_thread(thread_id(i)),
            "record": lambda i: floor.thread_record(thread_id(i)),
            "hook": lambda i: run_sync(storage._get_thread(thread_id(i))),
            "flow": lambda i: run_sync(storage_operations.get_thread(storage, thread_id(i), None)),
            "public": lambda i: storage.get_thread(thread_id(i)),
        },
        "get_resource": {
            "raw": lambda i: floor.read_resource(resource_id(i)),
            "record": lambda i: floor.resource_record(resource_id(i)),
            "hook": lambda i: run_sync(storage._get_resource(resource_id(i))),
            "flow": lambda i: run_sync(storage_operations.get_resource(storage, resource_id(i))),
            "public": lambda i: storage.get_resource(resource_id(i)),
        },
    }
    out: dict[str, Any] = {}
    for op, subjects in layers.items():
        stats = interleaved(subjects, samples=settings.samples, budget_s=settings.budget_s)
        record = stats["record"].median_us
        out[op] = {
            name: {**value.to_dict(), "vs_record": round(value.median_us / record, 3)} for name, value in stats.items()
        }
    out["coroutine_layer"] = _coroutine_layer()
    return out


async def _inner(x: int) -> int:
    return x


async def _middle(x: int) -> int:
    return await _inner(x)


async def _outer(x: int) -> int:
    return await _middle(x)


def _plain_inner(x: int) -> int:
    return x


def _plain_middle(x: int) -> int:
    return _plain_inner(x)


def _plain_outer(x: int) -> int:
    return _plain_middle(x)


def _coroutine_layer(loops: int = 20_000, runs: int = 5) -> dict[str, Any]:
    """ns per call of three nested coroutines through ``run_sync`` vs three nested plain calls (best of ``runs``)."""

    def best(call: Callable[[int], int]) -> float:
        times = []
        for _ in range(runs):
            began = time.perf_counter_ns()
            for i in range(loops):
                call(i)
            times.append((time.perf_counter_ns() - began) / loops)
        return min(times)

    coroutines = best(lambda i: run_sync(_outer(i)))
    plain = best(_plain_outer)
    return {
        "nesting": 3,
        "run_sync_coroutines_ns": round(coroutines, 1),
        "plain_calls_ns": round(plain, 1),
        "cost_ns": round(coroutines - plain, 1),
        "note": "get_thread / get_resource nest three coroutines (flow, hook, _read_key) under run_sync",
    }


def round_trips(ns: Namespace, fx: Fixture, calls: int = 40) -> dict[str, Any]:
    """Round trips and statements per operation, counted on a dedicated storage object (not timed)."""
    with counted_storage(ns) as counted:
        if counted is None:
            return {}
        ops = operations(counted.storage, fx, "rt")
        out: dict[str, Any] = {"method": counted.method}
        for name in OPERATIONS:
            time_calls(ops[name], 0, 10)  # warm up: connect, prepare statements, load scripts
            count = counted.count(ops[name], 10, calls)
            out[name] = {"round_trips": count.round_trips, "statements": count.statements}
        return out


def _sizes(base: int, steps: int, limit: int) -> list[int]:
    return [base * 10**k for k in range(steps) if base * 10**k <= limit]


_SMALL, _BIG = "scale-small", "scale-big"


def _thread_scaling_subjects(storage: MemoryStorage, floor: Floor | None, picks: list[str]) -> dict[str, Subject]:
    subjects: dict[str, Subject] = {
        "list_threads": lambda i: storage.list_threads(_BIG, per_page=20),
        "list_threads_small": lambda i: storage.list_threads(_SMALL, per_page=20),
        "get_thread": lambda i: storage.get_thread(picks[i % len(picks)]),
    }
    if floor is not None:
        subjects["floor_list_page"] = lambda i: floor.list_page(_BIG)
    return subjects


def _resource_scaling_subjects(storage: MemoryStorage, picks: list[int]) -> dict[str, Subject]:
    def pick(i: int) -> int:
        return picks[i % len(picks)]

    return {
        "get_resource": lambda i: storage.get_resource(f"rs-{pick(i)}"),
        "get_thread": lambda i: storage.get_thread(f"rst{pick(i)}-{2 * pick(i)}"),
        "list_threads": lambda i: storage.list_threads(f"rs-{pick(i)}", per_page=20),
    }


def thread_scaling(
    storage: MemoryStorage, loader: Loader, ns: Namespace, settings: Settings, floor: Floor | None = None
) -> dict[str, Any]:
    """One resource grows base -> base*10 -> ...; each size is measured next to a resource of ``base`` threads.

    With a floor, the raw page query (20 rows, no total) on the large resource
    is timed too, showing what the database's page alone costs at that size.
    """
    sizes = _sizes(ns.scale_base, settings.scale_steps, ns.max_threads)
    small, big = _SMALL, _BIG
    loader.threads(_threads("ss", small, ns.scale_base))
    points: list[dict[str, Any]] = []
    loaded = 0
    for size in sizes:
        began = time.monotonic()
        for start in range(loaded, size, 20_000):
            loader.threads(_threads("sb", big, min(20_000, size - start), start))
        loaded = size
        load_s = time.monotonic() - began
        _after_load(loader)
        rng = random.Random(size)
        subjects = _thread_scaling_subjects(storage, floor, [f"sb-{rng.randrange(size)}" for _ in range(4096)])
        stats = interleaved(subjects, samples=min(settings.samples, 400), budget_s=settings.budget_s)
        page = storage.list_threads(big, per_page=20)
        if page.total != size or len(page.threads) != 20:
            raise AssertionError(f"list_threads saw total={page.total}, {len(page.threads)} threads; expected {size}")
        points.append({"threads": size, "load_s": round(load_s, 2), **{k: v.to_dict() for k, v in stats.items()}})
    return {"base": ns.scale_base, "target_threads": ns.max_threads, "points": points}


def resource_scaling(storage: MemoryStorage, loader: Loader, ns: Namespace, settings: Settings) -> dict[str, Any]:
    """10 -> 100 -> ... resources of 2 threads each; random reads among all of them."""
    counts = _sizes(10, settings.scale_steps, ns.max_resources)
    points: list[dict[str, Any]] = []
    loaded = 0
    for count in counts:
        began = time.monotonic()
        batch = _resources("rs", count)[loaded:]
        loader.resources(batch)
        threads: list[Thread] = []
        for r in batch:
            n = int(r.id.rsplit("-", 1)[1])
            threads += _threads(f"rst{n}", r.id, 2, 2 * n)
        loader.threads(threads)
        loaded = count
        load_s = time.monotonic() - began
        _after_load(loader)
        rng = random.Random(count)
        subjects = _resource_scaling_subjects(storage, [rng.randrange(count) for _ in range(4096)])
        stats = interleaved(subjects, samples=min(settings.samples, 400), budget_s=settings.budget_s)
        points.append({"resources": count, "load_s": round(load_s, 2), **{k: v.to_dict() for k, v in stats.items()}})
    return {"points": points}


def _after_load(loader: Loader) -> None:
    analyze = getattr(loader, "analyze", None)
    if callable(analyze):
        analyze()


def concurrency(ns: Namespace, check: MemoryStorage, settings: Settings) -> dict[str, Any]:
    """Writers merging distinct keys into one resource's working memory; ops/s and lost updates per level."""
    levels: list[dict[str, Any]] = []
    for writers in settings.writers:
        levels.append(_concurrency_level(ns, check, writers, max(2, settings.ops_per_level // writers)))
    return {"scope": "resource", "levels": levels}


def _concurrency_level(ns: Namespace, check: MemoryStorage, writers: int, per_writer: int) -> dict[str, Any]:
    resource_id = f"conc-{writers}"
    storages: list[MemoryStorage] = []
    errors: list[str] = []
    try:
        for _ in range(writers):
            storages.append(ns.connect(**ns.writer_options))
    except Exception as exc:
        for storage in storages:
            storage.close()
        return {"writers": writers, "error": f"could not open {writers} storage objects: {exc}"}
    barrier = threading.Barrier(writers + 1)
    latencies: list[list[float]] = [[] for _ in range(writers)]

    def work(w: int) -> None:
        storage = storages[w]
        barrier.wait()
        merge: Callable[[int], object] = lambda j: storage.merge_working_memory(  # noqa: E731
            {f"w{w}-{j}": j}, scope="resource", resource_id=resource_id
        )
        try:
            latencies[w] = time_calls(merge, 0, per_writer)
        except Exception as exc:
            errors.append(f"writer {w}: {type(exc).__name__}: {exc}")

    pool = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(writers)]
    for thread in pool:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    seconds = time.perf_counter() - began
    for storage in storages:
        storage.close()
    text = check.get_working_memory(scope="resource", resource_id=resource_id)
    stored = json.loads(text) if text else {}
    expected = {f"w{w}-{j}": j for w in range(writers) for j in range(len(latencies[w]))}
    present = sum(1 for key, value in expected.items() if stored.get(key) == value)
    done = sum(len(values) for values in latencies)
    flat = [v for values in latencies for v in values]
    return {
        "writers": writers,
        "ops": done,
        "seconds": round(seconds, 4),
        "ops_per_s": round(done / seconds, 1) if seconds > 0 else None,
        "keys_written": len(expected),
        "keys_present": present,
        "lost_updates": len(expected) - present,
        "merge_latency": summarize(flat).to_dict() if flat else None,
        "errors": errors[:5],
        "error_count": len(errors),
    }
