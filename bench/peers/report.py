"""The ``bench --peers`` tables, ratios and targets (PASS/MISS, never asserted).

Ratios are workmem's ops/s divided by the peer's, both medians of the same
interleaved rounds (three unless `--rounds` says). On the embedded file the targets compare systems at
the same ``synchronous`` level (see :data:`COMPARISONS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.peers.base import CONCURRENT_CLIENTS, MERGES_PER_CLIENT, OPERATIONS

__all__ = ["COMPARISONS", "evaluate_peer_targets", "format_peers", "peers_markdown"]

LABELS = {
    "get_thread": "get thread by id",
    "get_resource": "get resource",
    "create_thread": "create thread",
    "replace_working_memory": "replace working memory",
    "merge_field": "merge one field",
    "list_newest_20": "newest 20 of 2,000 threads",
    "get_thread_16": f"get thread, {CONCURRENT_CLIENTS} concurrent clients",
    "get_thread_16_threads": f"get thread, {CONCURRENT_CLIENTS} threads on the sync API",
}
TITLES = {"postgres": "PostgreSQL", "file": "embedded file"}
KEYS = CONCURRENT_CLIENTS * MERGES_PER_CLIENT

COMPARISONS: dict[str, list[tuple[str, str, bool]]] = {
    "postgres": [("workmem", "mastra", True), ("workmem", "langgraph", True)],
    "file": [
        ("workmem (normal)", "mastra (normal)", True),
        ("workmem (normal)", "langgraph (normal)", True),
        ("workmem", "langgraph", True),
        ("workmem", "mastra", False),
    ],
}
"""Per backend: ``(ours, peer, is a target)``; the others are reported, not targets.

On the file the targets are at equal durability: workmem at ``synchronous=normal``
against Mastra and LangGraph with ``PRAGMA synchronous=NORMAL`` set by their peers,
and workmem's default (FULL) against LangGraph as it ships (SQLite's default, FULL).
workmem's default against Mastra as it ships is reported beside them, not a target:
Mastra's ``synchronous=NORMAL`` reaches only the pooled connection that ran its
setup, so its writes run at NORMAL or FULL depending on what overlapped before (its
peer records the level each write block ran at).
"""


def _rate(result: dict[str, Any], system: str, op: str) -> float | None:
    value = result["systems"].get(system, {}).get("operations", {}).get(op, {}).get("ops_per_s")
    return float(value) if value else None


def _ratio(result: dict[str, Any], ours: str, peer: str, op: str) -> float | None:
    a, b = _rate(result, ours, op), _rate(result, peer, op)
    return None if a is None or b is None else a / b


def evaluate_peer_targets(backend: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of one backend: each operation >= 1.0x each peer, and every merge kept."""
    out: list[dict[str, Any]] = []
    for ours, peer, is_target in COMPARISONS.get(backend, []):
        if not is_target or peer not in result["systems"]:
            continue
        for op in OPERATIONS:
            ratio = _ratio(result, ours, peer, op)
            out.append(
                {
                    "name": f"{TITLES[backend]}: {LABELS[op]}, {ours} / {peer}",
                    "value": None if ratio is None else round(ratio, 2),
                    "target": ">= 1.0",
                    "verdict": "n/a" if ratio is None else ("PASS" if ratio >= 1.0 else "MISS"),
                }
            )
    for system, data in result["systems"].items():
        if system.startswith("workmem"):
            kept = data.get("merges_kept")
            out.append(
                {
                    "name": f"{TITLES[backend]}: keys kept of {KEYS} concurrent merges, {system}",
                    "value": kept,
                    "target": f"== {KEYS}",
                    "verdict": "n/a" if kept is None else ("PASS" if kept == KEYS else "MISS"),
                }
            )
    return out


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def _fmt_rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _fmt_ratio(value: float | None, target: bool) -> str:
    if value is None:
        return "—"
    text = f"{value:.2f}\N{MULTIPLICATION SIGN}"
    return f"**{text}**" if target and value < 1.0 else text


def _backend_table(backend: str, result: dict[str, Any]) -> list[str]:
    systems = list(result["systems"])
    comparisons = [c for c in COMPARISONS.get(backend, []) if c[0] in systems and c[1] in systems]
    headers = ["operation", *(f"{s} ops/s" for s in systems), *(f"{a} / {b}" for a, b, _ in comparisons)]
    rows: list[list[Any]] = []
    for op in OPERATIONS:
        row: list[Any] = [LABELS[op]]
        row += [_fmt_rate(_rate(result, s, op)) for s in systems]
        row += [_fmt_ratio(_ratio(result, a, b, op), t) for a, b, t in comparisons]
        rows.append(row)
    kept = [result["systems"][s].get("merges_kept") for s in systems]
    rows.append(
        [f"keys kept of {KEYS} concurrent merges", *("—" if k is None else k for k in kept), *("" for _ in comparisons)]
    )
    return _table(headers, rows)


def _latency_table(result: dict[str, Any]) -> list[str]:
    systems = list(result["systems"])
    rows = []
    for op in OPERATIONS:
        row: list[Any] = [LABELS[op]]
        for s in systems:
            stats = result["systems"][s].get("operations", {}).get(op)
            if not stats:
                row.append("—")
                continue
            row.append(
                f"{stats['p50_us']:,.0f} / {stats['p99_us']:,.0f} µs; "
                f"{stats['min_ops_per_s']:,.0f}..{stats['max_ops_per_s']:,.0f}/s"
            )
        rows.append(row)
    return _table(["p50 / p99; ops/s min..max", *systems], rows)


def peers_markdown(results: dict[str, Any]) -> str:
    """The side-by-side tables (Markdown), as docs/performance.md shows them."""
    lines: list[str] = []
    for backend, result in results["backends"].items():
        lines.append(f"**{TITLES.get(backend, backend)}**")
        lines.append("")
        if result.get("status") != "ok":
            lines.append(f"SKIPPED: {result.get('reason')}")
            lines.append("")
            continue
        lines += _backend_table(backend, result)
        lines.append("")
        for system, reason in result.get("skipped", {}).items():
            lines.append(f"- {system} SKIPPED: {reason}")
        if result.get("skipped"):
            lines.append("")
    return "\n".join(lines)


def format_peers(results: dict[str, Any]) -> str:
    """Everything a run printed: tables, latencies, notes on what is not equal, targets, errors."""
    lines = [
        f"bench --peers: {results['rounds']} interleaved rounds of {results['count']} calls per operation "
        f"and system (after {results['warmup']} warm-up calls); ops/s is the median round; ratio = workmem / peer",
        "",
    ]
    for backend, result in results["backends"].items():
        title = TITLES.get(backend, backend)
        lines.append(f"== {title}")
        if result.get("status") != "ok":
            lines += [f"SKIPPED: {result.get('reason')}", ""]
            continue
        lines += _backend_table(backend, result)
        lines.append("")
        lines += _latency_table(result)
        lines.append("")
        lines.append("What is not equal:")
        for system, data in result["systems"].items():
            for note in data.get("notes", []):
                lines.append(f"- {system}: {note}")
            levels = sorted(
                {lv for stats in data.get("operations", {}).values() for lv in stats.get("synchronous", [])}
            )
            if levels:
                lines.append(f"- {system}: its write blocks ran at PRAGMA synchronous = {', '.join(levels)} (measured)")
        for system, reason in result.get("skipped", {}).items():
            lines.append(f"- {system} SKIPPED: {reason}")
        for what, error in result.get("errors", {}).items():
            lines.append(f"- ERROR {what}: {error}")
        lines.append("")
        lines.append("Targets:")
        for target in result.get("targets", []):
            lines.append(f"- {target['verdict']:4} {target['name']}: {target['value']} ({target['target']})")
        lines.append("")
    return "\n".join(lines)
