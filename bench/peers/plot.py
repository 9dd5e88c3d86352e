"""``<stamp>-<host>-peers.png``: ops/s per operation for every system, one panel per backend (log scale)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.peers.base import OPERATIONS
from bench.peers.report import LABELS, TITLES

__all__ = ["draw_peers"]

_COLORS = {
    "workmem": "#0f8b7d",
    "workmem (normal)": "#7fd1c7",
    "mastra": "#6b4bd8",
    "langgraph": "#e5484d",
    "langgraph (normal)": "#f3a5a7",
}


def draw_peers(results: dict[str, Any], stem: Path) -> Path | None:
    """Draw the side-by-side bars; ``None`` when no backend ran."""
    backends = {n: r for n, r in results["backends"].items() if r.get("status") == "ok" and r["systems"]}
    if not backends:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(backends), figsize=(7 * len(backends), 6), squeeze=False)
    for ax, (backend, result) in zip(axes[0], backends.items(), strict=True):
        systems = list(result["systems"])
        height = 0.8 / len(systems)
        for k, system in enumerate(systems):
            ops = result["systems"][system].get("operations", {})
            rates = [ops.get(op, {}).get("ops_per_s") or 0 for op in OPERATIONS]
            positions = [i + k * height for i in range(len(OPERATIONS))]
            ax.barh(positions, rates, height=height, label=system, color=_COLORS.get(system, "#777777"))
        ax.set_yticks([i + 0.4 - height / 2 for i in range(len(OPERATIONS))])
        ax.set_yticklabels([LABELS[op] for op in OPERATIONS], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel(f"ops/s (median of {results['rounds']} interleaved rounds; more is better)")
        ax.set_title(TITLES.get(backend, backend))
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"workmem bench --peers, {results['count']} calls per block")
    path = stem.with_name(f"{stem.name}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
