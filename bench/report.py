"""Targets, the printed tables and the JSON file.

JSON layout (``bench/results/<timestamp>-<host>.json``)::

    {"meta": {"started_at", "host", "command", "quick", "python", "cpu_count", "load_average",
              "workmem_version", "duration_s"},
     "backends": {NAME: {"status": "ok" | "skipped" | "error", "reason", "url" (masked),
                         "floor", "loader", "seconds": {section: s}, "errors": {section: message},
                         "latency": {OP: {"adapter": STATS, "floor_name", "floor": STATS, "ratio",
                                          "adapter_sql": STATS, "sql_ratio"}},
                         "round_trips": {"method", OP: {"round_trips", "statements"}},
                         "engines" (libsql only): {"rows", "runs", "note", "engines": {ENGINE: {"status",
                                     "library", "sqlite_version", "statement",
                                     "jsonb": {"reads", "identical_to_libsql", "error"},
                                     "text_key" / "int_key" / "get_thread":
                                         {"median_us", "run_medians_us", "n_per_run"}}}},
                         "thread_scaling": {"base", "target_threads",
                                            "points": [{"threads", "load_s", "list_threads": STATS,
                                                        "list_threads_small": STATS, "get_thread": STATS,
                                                        "floor_list_page": STATS}]},
                         "resource_scaling": {"points": [{"resources", "load_s", "get_resource": STATS,
                                              "get_thread": STATS, "list_threads": STATS}]},
                         "concurrency": {"scope", "levels": [{"writers", "ops", "seconds", "ops_per_s",
                                         "keys_written", "keys_present", "lost_updates", "merge_latency",
                                         "errors", "error_count"}]},
                         "targets": [{"name", "value", "limit", "status": "PASS" | "MISS" | "n/a", "detail"}]}}}

``STATS`` is ``{"n", "median_us", "p99_us", "mean_us", "min_us"}``. Targets
are reported, never asserted: a MISS is information for the adapter's author.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.workloads import OPERATIONS

__all__ = ["evaluate_targets", "format_report", "write_json"]

READ_RATIO_LIMIT = 1.3
LIST_GROWTH_LIMIT = 2.0
_READ_TARGET_BACKENDS = ("postgres", "libsql")
_LIST_TARGET_BACKENDS = ("postgres", "libsql", "upstash")


def _target(name: str, value: float | None, limit: float, detail: str = "", *, exact: bool = False) -> dict[str, Any]:
    met = value is not None and (value == limit if exact else value <= limit)
    status = "n/a" if value is None else "PASS" if met else "MISS"
    return {"name": name, "value": value, "limit": limit, "status": status, "detail": detail}


def evaluate_targets(backend: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets that apply to ``backend``, judged from its section results."""
    out: list[dict[str, Any]] = []
    latency = result.get("latency") or {}
    if backend in _READ_TARGET_BACKENDS:
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
    if backend == "postgres":
        trips = (result.get("round_trips") or {}).get("merge_working_memory", {})
        merge = latency.get("merge_working_memory", {})
        detail = (
            f"{trips.get('statements')} statement(s)/merge by {result.get('round_trips', {}).get('method', '?')}; "
            f"merge median = {merge.get('ratio')}x a one-statement UPDATE"
        )
        out.append(_target("merge_working_memory is one round trip", trips.get("round_trips"), 1.0, detail, exact=True))
    if backend in _LIST_TARGET_BACKENDS:
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
    levels = (result.get("concurrency") or {}).get("levels") or []
    measured = [level for level in levels if "lost_updates" in level]
    lost = sum(level["lost_updates"] for level in measured) if measured else None
    detail = ", ".join(f"{level['writers']}w: {level.get('lost_updates', 'error')}" for level in levels)
    out.append(_target("lost updates under concurrent merges == 0", lost, 0, detail))
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
        if result.get("engines"):
            parts += ["", "Embedded engines, primary-key lookup (median of 3 run medians)", _engines_table(result)]
            parts.append(f"({result['engines']['note']}; workmem's row is get_thread)")
        if result.get("thread_scaling"):
            parts += ["", "Scaling with threads per resource (page of 20)", _thread_scaling_table(result)]
        if result.get("resource_scaling"):
            parts += ["", "Scaling with the number of resources (2 threads each)", _resource_scaling_table(result)]
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
