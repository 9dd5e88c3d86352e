"""The cost of working-memory history: one merge with history off, on, and on with retention, interleaved.

Three storage objects on the same namespace, opened with ``connect(url)``,
``connect(url, history=True)`` and ``connect(url, history=KEEP)``, each merge one
field into a working memory of its own, with the ``source`` an agent framework
passes (the same on all three: the source is checked either way), in
alternating blocks (:func:`~bench.timing.interleaved`), so machine noise lands on
all alike. ``ratio`` is the median merge with history over the median without.
A backend whose adapter has no history reports ``"not supported"``.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from bench.backends import Namespace
from bench.timing import interleaved
from bench.workloads import Settings
from workmem.errors import OperationNotSupportedError

__all__ = ["KEEP", "SOURCE", "history_cost", "history_table"]

KEEP = 50
"""The retention measured beside "keep every version"."""
SOURCE = {
    "tool": "updateWorkingMemory",
    "threadId": "bench-thread",
    "framework": "langgraph",
    "toolCallId": "call-0123456789abcdef",
}
"""What a framework integration records with each change (the agent layer's ``source``)."""


def history_cost(ns: Namespace, settings: Settings) -> dict[str, Any]:
    """Median merge with history off / on (keep all) / on (keep :data:`KEEP`); the ratios to off."""
    with ExitStack() as stack:
        try:
            on = stack.enter_context(ns.connect(history=True))
        except OperationNotSupportedError as exc:
            return {"status": "not supported", "reason": str(exc)}
        off = stack.enter_context(ns.connect())
        kept = stack.enter_context(ns.connect(history=KEEP))

        def merge(storage: Any, resource_id: str) -> Any:
            def call(i: int) -> object:
                patch = {"n": i, "note": f"merge {i}"}
                return storage.merge_working_memory(patch, scope="resource", resource_id=resource_id, source=SOURCE)

            return call

        stats = interleaved(
            {"off": merge(off, "hist-off"), "on": merge(on, "hist-on"), f"keep_{KEEP}": merge(kept, "hist-keep")},
            samples=settings.samples,
            budget_s=settings.budget_s,
        )
        kept_versions = len(kept.working_memory_history(scope="resource", resource_id="hist-keep", limit=1000).versions)
    off_us = stats["off"].median_us
    return {
        "status": "ok",
        "keep": KEEP,
        "off": stats["off"].to_dict(),
        "on": stats["on"].to_dict(),
        "kept": stats[f"keep_{KEEP}"].to_dict(),
        "ratio": round(stats["on"].median_us / off_us, 3),
        "kept_ratio": round(stats[f"keep_{KEEP}"].median_us / off_us, 3),
        "kept_versions": kept_versions,
    }


def history_table(section: dict[str, Any]) -> list[str]:
    """The section as report lines."""
    if section.get("status") != "ok":
        return [f"History: {section.get('status')} ({section.get('reason')})"]
    rows = [
        ("history off", section["off"]),
        ("history on, every version kept", section["on"]),
        (f"history on, newest {section['keep']} kept", section["kept"]),
    ]
    lines = ["merge one field                  median us   p99 us   vs off"]
    for name, stats in rows:
        ratio = stats["median_us"] / section["off"]["median_us"]
        lines.append(f"{name:<32} {stats['median_us']:>9,.0f} {stats['p99_us']:>8,.0f}   {ratio:.2f}x")
    lines.append(f"({section['kept_versions']} versions left under retention {section['keep']})")
    return lines
