"""Targets, the printed tables and the JSON file.

JSON layout (``bench/results/<timestamp>-<host>.json``)::

    {"meta": {"started_at", "host", "command", "quick", "python", "cpu_count", "load_average",
              "workmem_version", "duration_s"},
     "backends": {NAME: {"status": "ok" | "skipped" | "error", "reason", "url" (masked),
                         "floor", "loader", "seconds": {section: s}, "errors": {section: message},
                         "latency": {OP: {"adapter": STATS, "floor_name", "floor": STATS, "ratio",
                                          "adapter_sql": STATS, "sql_ratio",
                                          (get_thread / get_resource, libsql) "record_floor_name",
                                          "record_floor": STATS, "adapter_vs_record": STATS, "record_ratio"}},
                         "read_layers" (libsql): {"get_thread" | "get_resource": {"raw" | "record" | "hook" | "flow"
                                                   | "public": STATS + "vs_record"},
                                                  "coroutine_layer": {"nesting", "run_sync_coroutines_ns",
                                                                      "plain_calls_ns", "cost_ns", "note"}},
                         "async_overhead" (--async): {"adapter": ADAPTER, "operations": {OP: {"sync": STATS,
                                                      "async": STATS, "ratio"}}},
                         "async_throughput" (--async): {"adapter": ADAPTER, "tasks", "threads", "calls_per_task",
                                     "rounds", "options", "workloads": {"get_thread" | "merge_working_memory":
                                     {"ops_per_round", "sync_ops_per_s", "async_ops_per_s", "ratio",
                                      "sync_round_s", "async_round_s"}}},
                         "loop_lag" (--async): {"adapter": ADAPTER, "tasks", "merges_per_task", "tick_ms",
                                     "idle" | "loaded": {"ticks", "median_ms", "p99_ms", "max_ms"}, "merges",
                                     "merges_per_s", "merge_latency": STATS, "lost_updates"},
                         "round_trips": {"method", OP: {"round_trips", "statements"}},
                         "engines" (libsql only): {"rows", "runs", "note", "engines": {ENGINE: {"status",
                                     "library", "sqlite_version", "statement",
                                     "jsonb": {"reads", "identical_to_libsql", "error"},
                                     "text_key" / "int_key" / "get_thread" / "merge":
                                         {"median_us", "run_medians_us", "n_per_run"}}},
                                     "ratios": {"get_thread" | "merge": apsw's time / the wheel's},
                                     "loop_lag": {"workmem" | "workmem_libsql": {"engine", "p99_ms",
                                         "median_ms", "max_ms", "merges", "merges_per_s", "lost_updates"}}},
                         "thread_scaling": {"base", "target_threads",
                                            "points": [{"threads", "load_s", "list_threads": STATS,
                                                        "list_threads_small": STATS, "get_thread": STATS,
                                                        "floor_list_page": STATS}]},
                         "resource_scaling": {"points": [{"resources", "load_s", "get_resource": STATS,
                                              "get_thread": STATS, "list_threads": STATS}]},
                         "history": {"status": "ok" | "not supported", "reason", "keep", "off" | "on" | "kept":
                                     STATS, "ratio", "kept_ratio", "kept_versions"},
                         "concurrency": {"scope", "levels": [{"writers", "ops", "seconds", "ops_per_s",
                                         "keys_written", "keys_present", "lost_updates", "merge_latency",
                                         "errors", "error_count"}]},
                         "targets": [{"name", "value", "limit", "status": "PASS" | "MISS" | "n/a", "detail"}]}},
     "copy" (--copy / --only copy): {"status": "ok" | "skipped" | "error", "reason", "page_size", "sizes",
              "target_threads", "seconds",
              "points": [{"threads", "resources", "build_s", "pg_copy_s", "copy_s", "ratio", "copy_rss_mb",
                          "copy_complete", "copy_counts", "reverse_s", "reverse_rss_mb", "reverse_complete",
                          "reverse_counts", "baseline_rss_mb",
                          "ru_maxrss_mb": {"copy", "reverse"}}],
              "targets": [TARGET]},
     "big_merge" (--only big_merge): {"status", "reason", "rounds", "seconds",
              "points": [{"shape", "case", "keys", "bytes", "postgres_s", "libsql_s", "ratio",
                          "all_s": {"postgres" | "libsql": [s]}}],
              "targets": [TARGET]}}

``STATS`` is ``{"n", "median_us", "p99_us", "mean_us", "min_us"}``; ``ADAPTER`` is what
``workmem.connect_async`` returned: ``{"class", "native", "what"}`` (+ ``"wraps", "workers"``
for :class:`~workmem.aio.ThreadedAsyncStorage`). Targets
are reported, never asserted: a MISS is information for the adapter's author.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.history import history_table
from bench.workloads import OPERATIONS

__all__ = ["evaluate_big_merge_targets", "evaluate_copy_targets", "evaluate_targets", "format_report", "write_json"]

READ_RATIO_LIMIT = 1.3
RECORD_RATIO_LIMIT = 1.2
ASYNC_THROUGHPUT_LIMIT = 1.0
LOOP_LAG_P99_LIMIT_MS = 5.0
_THROUGHPUT_TARGET_BACKENDS = ("postgres",)
_LAG_TARGET_BACKENDS = ("libsql",)
LIST_GROWTH_LIMIT = 2.0
COPY_RATIO_LIMIT = 2.0
"""``workmem.copy`` libSQL -> PostgreSQL at most this many times psycopg ``COPY`` of the same rows."""
COPY_REVERSE_LIMIT = 2.0
"""``workmem.copy`` PostgreSQL -> libSQL at most this many times libSQL -> PostgreSQL of the same rows."""
COPY_RSS_GROWTH_LIMIT = 1.25
"""Flat memory: the copying process's peak RSS at the largest size / at the smallest."""
BIG_MERGE_RATIO_LIMIT = 3.0
"""A 60,000-key merge on PostgreSQL at most this many times the same merge on libSQL (best of the rounds)."""
_READ_TARGET_BACKENDS = ("postgres", "libsql", "sqld")
_LIST_TARGET_BACKENDS = ("postgres", "libsql", "sqld", "upstash")


_RULES = {
    "<=": lambda value, limit: value <= limit,
    "<": lambda value, limit: value < limit,
    ">=": lambda value, limit: value >= limit,
    "==": lambda value, limit: value == limit,
}


def _target(
    name: str, value: float | None, limit: float, detail: str = "", *, exact: bool = False, rule: str = "<="
) -> dict[str, Any]:
    met = value is not None and _RULES["==" if exact else rule](value, limit)
    status = "n/a" if value is None else "PASS" if met else "MISS"
    return {"name": name, "value": value, "limit": limit, "status": status, "detail": detail}


def evaluate_targets(backend: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets that apply to ``backend``, judged from its section results.

    Only the targets of sections that were asked for (``result["sections"]``, all when absent):
    a section asked for that failed or measured nothing is ``n/a``.
    """
    out: list[dict[str, Any]] = []
    asked = set(result.get("sections") or ("latency", "round_trips", "thread_scaling", "concurrency"))
    latency = result.get("latency") or {}
    if backend in _READ_TARGET_BACKENDS and "latency" in asked:
        for op in ("get_thread", "get_resource"):
            entry = latency.get(op, {})
            out.append(
                _target(
                    f"{op} <= {READ_RATIO_LIMIT}x raw floor (median)",
                    entry.get("ratio"),
                    READ_RATIO_LIMIT,
                    f"vs {entry.get('floor_name', '?')}; the adapter's own SQL run raw: {entry.get('sql_ratio', '?')}x",
                )
            )
        for op in ("get_thread", "get_resource"):
            entry = latency.get(op, {})
            if "record_ratio" in entry:
                out.append(
                    _target(
                        f"{op} <= {RECORD_RATIO_LIMIT}x hand-written record read (median)",
                        entry["record_ratio"],
                        RECORD_RATIO_LIMIT,
                        f"vs {entry['record_floor_name']} (driver call, json.loads, 2 timestamps, frozen record); "
                        f"{entry['adapter_vs_record']['median_us']:.1f} vs {entry['record_floor']['median_us']:.1f} us",
                    )
                )
    out += _async_targets(backend, result)
    if backend == "postgres" and "round_trips" in asked:
        trips = (result.get("round_trips") or {}).get("merge_working_memory", {})
        merge = latency.get("merge_working_memory", {})
        detail = (
            f"{trips.get('statements')} statement(s)/merge by {result.get('round_trips', {}).get('method', '?')}; "
            f"merge median = {merge.get('ratio')}x a one-statement UPDATE"
        )
        out.append(_target("merge_working_memory is one round trip", trips.get("round_trips"), 1.0, detail, exact=True))
    if backend in _LIST_TARGET_BACKENDS and "thread_scaling" in asked:
        scaling = result.get("thread_scaling") or {}
        points = scaling.get("points") or []
        if points:
            last = points[-1]
            ratio = last["list_threads"]["median_us"] / last["list_threads_small"]["median_us"]
            name = f"list_threads page: {last['threads']:,} vs {scaling['base']:,} threads <= {LIST_GROWTH_LIMIT}x"
            detail = (
                f"{last['list_threads']['median_us']:.0f} us vs {last['list_threads_small']['median_us']:.0f} us, "
                "same table, interleaved"
            )
            if "floor_list_page" in last and "floor_list_page" in points[0]:
                raw = last["floor_list_page"]["median_us"] / points[0]["floor_list_page"]["median_us"]
                detail += f"; the raw page query (no total) grew {raw:.2f}x"
            target = _target(name, round(ratio, 3), LIST_GROWTH_LIMIT, detail)
            wanted = scaling.get("target_threads", last["threads"])
            if last["threads"] < wanted:  # --quick: the target is about the largest size
                target.update(status="n/a", detail=f"not judged: measured up to {last['threads']:,}, the target is "
                              f"at {wanted:,} (run without --quick); {detail}")  # fmt: skip
            out.append(target)
        else:
            out.append(_target(f"list_threads page growth <= {LIST_GROWTH_LIMIT}x", None, LIST_GROWTH_LIMIT))
    if "concurrency" not in asked:
        return out
    levels = (result.get("concurrency") or {}).get("levels") or []
    measured = [level for level in levels if "lost_updates" in level]
    lost = sum(level["lost_updates"] for level in measured) if measured else None
    detail = ", ".join(f"{level['writers']}w: {level.get('lost_updates', 'error')}" for level in levels)
    out.append(_target("lost updates under concurrent merges == 0", lost, 0, detail))
    return out


def evaluate_copy_targets(section: dict[str, Any]) -> list[dict[str, Any]]:
    """The copy targets: time vs psycopg ``COPY`` at the largest size, flat peak RSS, every record copied."""
    points = section.get("points") or []
    if not points:
        return [_target(f"copy libSQL -> PostgreSQL <= {COPY_RATIO_LIMIT}x psycopg COPY", None, COPY_RATIO_LIMIT)]
    first, last = points[0], points[-1]
    wanted = section.get("target_threads", last["threads"])
    detail = (
        f"{last['threads']:,} threads: workmem.copy {last['copy_s']} s vs COPY {last['pg_copy_s']} s; "
        f"reverse (PostgreSQL -> libSQL) {last['reverse_s']} s"
    )
    ratio = _target(f"copy libSQL -> PostgreSQL <= {COPY_RATIO_LIMIT}x psycopg COPY", last["ratio"],
                    COPY_RATIO_LIMIT, detail)  # fmt: skip
    if last["threads"] < wanted:
        ratio.update(status="n/a", detail=f"not judged: measured up to {last['threads']:,}, the target is at "
                     f"{wanted:,} (run without --quick); {detail}")  # fmt: skip
    reverse_name = f"copy PostgreSQL -> libSQL <= {COPY_REVERSE_LIMIT}x libSQL -> PostgreSQL"
    reverse = _target(reverse_name, round(last["reverse_s"] / last["copy_s"], 2), COPY_REVERSE_LIMIT,
                      f"{last['threads']:,} threads: {last['reverse_s']} s vs {last['copy_s']} s")  # fmt: skip
    if last["threads"] < wanted:
        reverse.update(status="n/a", detail=f"not judged below {wanted:,} threads; {reverse['detail']}")
    out = [ratio, reverse]
    for direction in ("copy", "reverse"):
        low, high = first[f"{direction}_rss_mb"], last[f"{direction}_rss_mb"]
        growth = None if low is None or high is None else round(high / low, 3)
        name = "libSQL -> PostgreSQL" if direction == "copy" else "PostgreSQL -> libSQL"
        out.append(
            _target(
                f"{name} peak RSS flat: {last['threads']:,} / {first['threads']:,} threads <= {COPY_RSS_GROWTH_LIMIT}x",
                growth,
                COPY_RSS_GROWTH_LIMIT,
                f"{low} MB -> {high} MB (a child that only opens both: {last['baseline_rss_mb']} MB)",
            )
        )
    complete = sum(1 for p in points for d in ("copy", "reverse") if p[f"{d}_complete"])
    out.append(_target("every record copied, both ways, every size", complete, 2 * len(points), exact=True))
    return out


def evaluate_big_merge_targets(section: dict[str, Any]) -> list[dict[str, Any]]:
    """One target per shape and case: PostgreSQL's merge within :data:`BIG_MERGE_RATIO_LIMIT` times libSQL's."""
    return [
        _target(
            f"{p['shape']} {p['keys']:,}-key merge {p['case']}: PostgreSQL <= {BIG_MERGE_RATIO_LIMIT}x libSQL",
            p["ratio"],
            BIG_MERGE_RATIO_LIMIT,
            f"{p['postgres_s']} s vs {p['libsql_s']} s ({p['bytes'] / 1e6:.2f} MB)",
        )
        for p in section.get("points") or []
    ]


def _async_targets(backend: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    throughput = result.get("async_throughput")
    if backend in _THROUGHPUT_TARGET_BACKENDS and throughput:
        for name, entry in throughput["workloads"].items():
            out.append(
                _target(
                    f"{name}: {throughput['tasks']} async tasks >= sync API on {throughput['threads']} threads (ops/s)",
                    entry["ratio"],
                    ASYNC_THROUGHPUT_LIMIT,
                    f"{entry['async_ops_per_s']:,.0f} vs {entry['sync_ops_per_s']:,.0f} ops/s; async: "
                    f"{throughput['adapter']['what']}",
                    rule=">=",
                )
            )
    lag = result.get("loop_lag")
    if backend in _LAG_TARGET_BACKENDS and lag:
        loaded = lag["loaded"]
        out.append(
            _target(
                f"event-loop lag p99 < {LOOP_LAG_P99_LIMIT_MS:g} ms, 1 ms ticker, {lag['tasks']} merging tasks",
                loaded["p99_ms"],
                LOOP_LAG_P99_LIMIT_MS,
                f"worst {loaded['max_ms']} ms over {loaded['ticks']} ticks (idle p99 {lag['idle']['p99_ms']} ms); "
                f"{lag['adapter']['what']}",
                rule="<",
            )
        )
    return out


# -- tables ----------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _us(stats: dict[str, Any] | None, key: str = "median_us") -> str:
    return "" if not stats else f"{stats[key]:,.0f}"


def _latency_table(result: dict[str, Any]) -> str:
    latency = result.get("latency") or {}
    trips = result.get("round_trips") or {}
    rows = []
    for op in OPERATIONS:
        entry = latency.get(op)
        if not entry:
            continue
        count = trips.get(op, {})
        rt = count.get("round_trips")
        st = count.get("statements")
        rows.append(
            [
                op,
                _us(entry["adapter"]),
                _us(entry["adapter"], "p99_us"),
                entry.get("floor_name", "-"),
                _us(entry.get("floor")),
                _us(entry.get("floor"), "p99_us"),
                "-" if "ratio" not in entry else f"{entry['ratio']:.2f}x",
                "" if "sql_ratio" not in entry else f"{entry['sql_ratio']:.2f}x",
                "-" if rt is None else f"{rt:g}",
                "-" if st is None else f"{st:g}",
            ]
        )
    headers = ["operation", "median us", "p99 us", "raw floor", "floor med", "floor p99", "ratio"]
    headers += ["its SQL raw", "trips", "stmts"]
    return _table(headers, rows)


def _record_table(result: dict[str, Any]) -> str:
    rows = []
    for op in ("get_thread", "get_resource"):
        entry = (result.get("latency") or {}).get(op) or {}
        if "record_ratio" not in entry:
            continue
        rows.append(
            [
                op,
                _us_exact(entry["adapter_vs_record"]),
                _us_exact(entry["record_floor"]),
                f"{entry['record_ratio']:.2f}x",
                _us_exact(entry["floor"]),
                f"{entry['ratio']:.2f}x",
            ]
        )
    headers = ["read", "adapter med us", "record read med", "vs record", "raw tuple med", "vs raw tuple"]
    return _table(headers, rows)


def _us_exact(stats: dict[str, Any] | None, key: str = "median_us") -> str:
    return "" if not stats else f"{stats[key]:,.1f}"


_LAYERS = ("raw", "record", "hook", "flow", "public")


def _layers_table(result: dict[str, Any]) -> str:
    layers = result["read_layers"]
    rows = []
    for op in ("get_thread", "get_resource"):
        entry = layers.get(op) or {}
        for name in _LAYERS:
            if name in entry:
                rows.append(
                    [op, name, _us_exact(entry[name]), _us_exact(entry[name], "p99_us"), entry[name]["vs_record"]]
                )
    return _table(["read", "layer", "median us", "p99 us", "vs record"], rows)


def _async_overhead_table(result: dict[str, Any]) -> str:
    rows = []
    for op, entry in result["async_overhead"]["operations"].items():
        rows.append([op, _us_exact(entry["sync"]), _us_exact(entry["async"]), f"{entry['ratio']:.2f}x"])
    return _table(["operation", "sync med us", "async med us", "async / sync"], rows)


def _async_throughput_table(result: dict[str, Any]) -> str:
    section = result["async_throughput"]
    rows = [
        [name, entry["ops_per_round"], f"{entry['sync_ops_per_s']:,.0f}", f"{entry['async_ops_per_s']:,.0f}",
         f"{entry['ratio']:.2f}x"]
        for name, entry in section["workloads"].items()
    ]  # fmt: skip
    headers = ["workload", "calls/round", f"sync ops/s ({section['threads']} threads)"]
    headers += [f"async ops/s ({section['tasks']} tasks)", "async / sync"]
    return _table(headers, rows)


def _loop_lag_table(result: dict[str, Any]) -> str:
    lag = result["loop_lag"]
    rows = [
        [when, lag[when]["ticks"], lag[when]["median_ms"], lag[when]["p99_ms"], lag[when]["max_ms"]]
        for when in ("idle", "loaded")
    ]
    return _table(["event loop", "ticks", "lag median ms", "lag p99 ms", "lag max ms"], rows)


def _engines_table(result: dict[str, Any]) -> str:
    rows = []
    for name, entry in result["engines"]["engines"].items():
        if entry.get("status") != "ok":
            rows.append([name, entry.get("reason", ""), "", "", "", ""])
            continue
        text = entry.get("text_key") or entry.get("get_thread") or {}
        integer = entry.get("int_key") or {}
        jsonb = entry.get("jsonb")
        rows.append(
            [
                name,
                entry["library"],
                entry.get("sqlite_version", ""),
                text.get("median_us", ""),
                integer.get("median_us", "-"),
                "-" if jsonb is None else "identical" if jsonb["identical_to_libsql"] else jsonb["error"] or "differs",
            ]
        )
    return _table(["engine", "library", "SQLite", "TEXT key us", "INTEGER key us", "json(metadata) vs wheel"], rows)


def _thread_scaling_table(result: dict[str, Any]) -> str:
    points = (result.get("thread_scaling") or {}).get("points") or []
    rows = [
        [
            f"{p['threads']:,}",
            _us(p["list_threads"]),
            _us(p["list_threads"], "p99_us"),
            _us(p["list_threads_small"]),
            f"{p['list_threads']['median_us'] / p['list_threads_small']['median_us']:.2f}x",
            _us(p.get("floor_list_page")),
            _us(p["get_thread"]),
            f"{p['load_s']}",
        ]
        for p in points
    ]
    base = (result.get("thread_scaling") or {}).get("base", "?")
    headers = [
        "threads/resource", "list med us", "list p99", f"list({base}) med", "growth", "raw page med", "get_thread med",
        "load s",
    ]  # fmt: skip
    return _table(headers, rows)


def _resource_scaling_table(result: dict[str, Any]) -> str:
    points = (result.get("resource_scaling") or {}).get("points") or []
    rows = [
        [f"{p['resources']:,}", _us(p["get_resource"]), _us(p["get_thread"]), _us(p["list_threads"]), p["load_s"]]
        for p in points
    ]
    return _table(["resources", "get_resource med us", "get_thread med", "list_threads med", "load s"], rows)


def _concurrency_table(result: dict[str, Any]) -> str:
    rows = []
    for level in (result.get("concurrency") or {}).get("levels") or []:
        if "error" in level:
            rows.append([level["writers"], "", "", "", "", "", level["error"]])
            continue
        lost = level["lost_updates"]
        rows.append(
            [
                level["writers"],
                level["ops"],
                level["ops_per_s"],
                _us(level["merge_latency"]),
                _us(level["merge_latency"], "p99_us"),
                f"{level['keys_present']}/{level['keys_written']}",
                ("LOST " + str(lost) + " !!! " if lost else "0")
                + (f" {level['error_count']} errors" if level["error_count"] else ""),
            ]
        )
    return _table(["writers", "merges", "ops/s", "merge med us", "merge p99", "keys kept", "lost updates"], rows)


def _copy_table(section: dict[str, Any]) -> str:
    rows = [
        [
            f"{p['threads']:,}",
            f"{p['resources']:,}",
            f"{p['pg_copy_s']:.3f}",
            f"{p['copy_s']:.3f}",
            f"{p['ratio']:.2f}x",
            f"{p['reverse_s']:.3f}",
            p["copy_rss_mb"],
            p["reverse_rss_mb"],
            p["baseline_rss_mb"],
            "yes" if p["copy_complete"] and p["reverse_complete"] else "NO !!!",
        ]
        for p in section.get("points") or []
    ]
    headers = ["threads", "resources", "psycopg COPY s", "libSQL->PG s", "vs COPY", "PG->libSQL s"]
    headers += ["->PG peak RSS MB", "->libSQL peak RSS MB", "open-only RSS MB", "complete"]
    return _table(headers, rows)


def _copy_report(section: dict[str, Any]) -> list[str]:
    if section.get("status") != "ok":
        return [f"== copy : {str(section.get('status')).upper()} -- {section.get('reason')}"]
    parts = ["== copy (workmem.copy, embedded libSQL file <-> PostgreSQL) ".ljust(100, "=")]
    parts.append(_copy_table(section))
    parts.append(
        f"(page size {section['page_size']}; psycopg COPY: the same rows from memory into a fresh schema whose tables "
        "exist; workmem.copy: the whole call in a subprocess, opening both sides and creating the tables included; "
        "peak RSS: the copying subprocess's VmHWM since exec)"
    )
    rows = [[t["status"], t["name"], "" if t["value"] is None else t["value"], t["detail"]]
            for t in section.get("targets", [])]  # fmt: skip
    if rows:
        parts += ["", "Copy targets (reported, never asserted)", _table(["status", "target", "value", "detail"], rows)]
    return parts


def _big_merge_report(section: dict[str, Any]) -> list[str]:
    if section.get("status") != "ok":
        return [f"== big_merge : {str(section.get('status')).upper()} -- {section.get('reason')}"]
    parts = ["== big_merge (one merge_working_memory of a ~60,000-key patch) ".ljust(100, "=")]
    rows = [
        [p["shape"], p["case"], f"{p['keys']:,}", f"{p['bytes'] / 1e6:.2f}", f"{p['postgres_s']:.3f}",
         f"{p['libsql_s']:.3f}", "-" if p["ratio"] is None else f"{p['ratio']:.2f}x"]
        for p in section.get("points") or []
    ]  # fmt: skip
    parts.append(_table(["shape", "case", "keys", "MB", "PostgreSQL s", "libSQL s", "PG / libSQL"], rows))
    parts.append(f"(best of {section['rounds']} alternating rounds; each merge on a fresh resource, result checked)")
    targets = [[t["status"], t["name"], "" if t["value"] is None else t["value"], t["detail"]]
               for t in section.get("targets", [])]  # fmt: skip
    if targets:
        parts += ["", "Big-merge targets (reported, never asserted)"]
        parts.append(_table(["status", "target", "value", "detail"], targets))
    return parts


def format_report(results: dict[str, Any]) -> str:
    """Every section of every backend as text tables, then the targets."""
    parts: list[str] = []
    for name, result in results["backends"].items():
        title = f"== {name} "
        if result["status"] != "ok":
            parts.append(f"{title}: {result['status'].upper()} -- {result.get('reason')}")
            continue
        parts.append(f"{title}({result['url']}) ".ljust(100, "="))
        if result.get("floor"):
            parts.append(f"raw floor: {result['floor']}")
        parts.append(f"bulk loader: {result.get('loader')}")
        for section, message in (result.get("errors") or {}).items():
            parts.append(f"!!! {section} FAILED: {message}")
        if result.get("latency"):
            parts += ["", "Per-operation latency", _latency_table(result)]
            parts.append("('its SQL raw': the adapter's own statement on the raw floor connection / the floor)")
            if (result.get("round_trips") or {}).get("method"):
                parts.append(f"(trips/stmts counted by {result['round_trips']['method']})")
        if any("record_ratio" in entry for entry in (result.get("latency") or {}).values()):
            parts += [
                "",
                "Reads vs a hand-written read of the same record (own interleaved pair)",
                _record_table(result),
            ]
        if result.get("read_layers"):
            parts += ["", "Where a read's time goes (layers interleaved together; vs the record read)"]
            parts.append(_layers_table(result))
            co = result["read_layers"]["coroutine_layer"]
            parts.append(
                f"(raw: execute().fetchall(); record: by hand; hook: run_sync(storage._get_*); flow: "
                f"run_sync(flows.get_*); public: storage.get_*. Coroutine layer alone: {co['nesting']} nested "
                f"coroutines under run_sync {co['run_sync_coroutines_ns']} ns vs plain calls "
                f"{co['plain_calls_ns']} ns = {co['cost_ns']} ns per read)"
            )
        if result.get("async_overhead"):
            parts += ["", "Async API vs sync API, one caller", _async_overhead_table(result)]
            parts.append(f"(async: {result['async_overhead']['adapter']['what']})")
        if result.get("async_throughput"):
            parts += [
                "",
                "Concurrent callers: async tasks vs sync API on a thread pool",
                _async_throughput_table(result),
            ]
            section = result["async_throughput"]
            parts.append(f"(async: {section['adapter']['what']}; median of {section['rounds']} alternating rounds)")
        if result.get("loop_lag"):
            lag = result["loop_lag"]
            parts += [
                "",
                f"Event-loop lag, {lag['tick_ms']:g} ms ticker, {lag['tasks']} tasks merging",
                _loop_lag_table(result),
            ]
            parts.append(
                f"({lag['merges']} merges at {lag['merges_per_s']}/s, lost updates {lag['lost_updates']}; "
                f"async: {lag['adapter']['what']})"
            )
        if result.get("engines"):
            parts += ["", "Embedded engines, primary-key lookup (median of 3 run medians)", _engines_table(result)]
            parts.append(f"({result['engines']['note']}; workmem's rows are get_thread)")
            ratios = result["engines"].get("ratios") or {}
            if ratios:
                shown = ", ".join(f"{kind} {ratio}x" for kind, ratio in ratios.items())
                parts.append(f"workmem on apsw / on the libsql wheel, time per call: {shown}")
            for lag in (result["engines"].get("loop_lag") or {}).values():
                parts.append(
                    f"event-loop lag, 64 tasks merging, engine {lag['engine']}: p99 {lag['p99_ms']} ms, "
                    f"median {lag['median_ms']} ms, max {lag['max_ms']} ms ({lag['merges']} merges, "
                    f"{lag['lost_updates']} lost)"
                )
        if result.get("thread_scaling"):
            parts += ["", "Scaling with threads per resource (page of 20)", _thread_scaling_table(result)]
        if result.get("resource_scaling"):
            parts += ["", "Scaling with the number of resources (2 threads each)", _resource_scaling_table(result)]
        if result.get("history"):
            parts += [
                "",
                "The cost of history (interleaved, same backend, same run)",
                *history_table(result["history"]),
            ]
        if result.get("concurrency"):
            parts += ["", "Concurrent merges into one working memory", _concurrency_table(result)]
        parts.append("")
    rows = [
        [name, t["status"], t["name"], "" if t["value"] is None else t["value"], t["detail"]]
        for name, result in results["backends"].items()
        for t in result.get("targets", [])
    ]
    if rows:
        parts += [
            "Targets (reported, never asserted)",
            _table(["backend", "status", "target", "value", "detail"], rows),
        ]
    ratios = _ratio_summary(results)
    if ratios:
        parts += ["", "Adapter / raw floor (median latency)", ratios]
    if results.get("copy"):
        parts += ["", *_copy_report(results["copy"])]
    if results.get("big_merge"):
        parts += ["", *_big_merge_report(results["big_merge"])]
    return "\n".join(parts)


def _ratio_summary(results: dict[str, Any]) -> str:
    names = [
        n
        for n, r in results["backends"].items()
        if r.get("latency") and any("ratio" in e for e in r["latency"].values())
    ]
    if not names:
        return ""
    rows = []
    for op in OPERATIONS:
        row: list[Any] = [op]
        for name in names:
            entry = results["backends"][name]["latency"].get(op, {})
            row.append(f"{entry['ratio']:.2f}x" if "ratio" in entry else "-")
        rows.append(row)
    return _table(["operation", *names], rows)


def write_json(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
