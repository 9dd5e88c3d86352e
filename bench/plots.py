"""PNG plots of the scaling and concurrency curves (matplotlib, Agg backend: no display needed).

Three files next to the JSON, sharing its stem: ``-threads.png`` (median
latency against threads per resource), ``-resources.png`` (against the
number of resources) and ``-concurrency.png`` (merges/s against writers, lost
updates marked in red).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["draw_plots"]

_COLORS = {
    "postgres": "#336791",
    "libsql": "#0f8b7d",
    "upstash": "#e5484d",
    "mongodb": "#13aa52",
    "oracle": "#c74634",
    "memory": "#7f7f7f",
}


def _color(name: str) -> str:
    return _COLORS.get(name, "#000000")


def draw_plots(results: dict[str, Any], stem: Path) -> list[Path]:
    """Draw the plots for ``results``; return the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = {n: r for n, r in results["backends"].items() if r.get("status") == "ok"}
    title = f"workmem bench {'--quick ' if results['meta'].get('quick') else ''}on {results['meta']['host']}"
    written: list[Path] = []

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for name, result in backends.items():
        points = (result.get("thread_scaling") or {}).get("points") or []
        if not points:
            continue
        x = [p["threads"] for p in points]
        color = _color(name)
        axes[0].plot(x, [p["list_threads"]["median_us"] for p in points], "o-", color=color, label=f"{name} median")
        axes[0].plot(x, [p["list_threads"]["p99_us"] for p in points], ":", color=color, alpha=0.7, label=f"{name} p99")
        if all("floor_list_page" in p for p in points):
            raw = [p["floor_list_page"]["median_us"] for p in points]
            axes[0].plot(x, raw, "x--", color=color, alpha=0.6, label=f"{name} raw page query (no total)")
        axes[1].plot(x, [p["get_thread"]["median_us"] for p in points], "o-", color=color, label=f"{name} median")
        axes[1].plot(x, [p["get_thread"]["p99_us"] for p in points], ":", color=color, alpha=0.7, label=f"{name} p99")
    for ax, what in zip(axes, ("list_threads (page of 20, with total)", "get_thread (random id)"), strict=True):
        _decorate(ax, f"{what} vs threads per resource", "threads of the resource", "latency (us)")
    fig.suptitle(title)
    written.append(_save(fig, stem, "threads"))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, result in backends.items():
        points = (result.get("resource_scaling") or {}).get("points") or []
        if not points:
            continue
        x = [p["resources"] for p in points]
        color = _color(name)
        for op, style in (("get_resource", "o-"), ("get_thread", "s--"), ("list_threads", "^:")):
            ax.plot(x, [p[op]["median_us"] for p in points], style, color=color, label=f"{name} {op}")
    _decorate(ax, "median latency vs number of resources (2 threads each)", "resources", "latency (us)")
    fig.suptitle(title)
    written.append(_save(fig, stem, "resources"))
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for name, result in backends.items():
        levels = [lv for lv in (result.get("concurrency") or {}).get("levels") or [] if "ops_per_s" in lv]
        if not levels:
            continue
        x = [lv["writers"] for lv in levels]
        color = _color(name)
        axes[0].plot(x, [lv["ops_per_s"] for lv in levels], "o-", color=color, label=name)
        axes[1].plot(x, [lv["merge_latency"]["median_us"] for lv in levels], "o-", color=color, label=f"{name} median")
        axes[1].plot(
            x, [lv["merge_latency"]["p99_us"] for lv in levels], ":", color=color, alpha=0.7, label=f"{name} p99"
        )
        for lv in levels:
            if lv["lost_updates"]:
                axes[0].annotate(f"LOST {lv['lost_updates']}", (lv["writers"], lv["ops_per_s"]), color="red")
                axes[0].plot([lv["writers"]], [lv["ops_per_s"]], "x", color="red", markersize=12)
    _decorate(axes[0], "merge_working_memory throughput (one working memory)", "concurrent writers", "merges/s")
    _decorate(axes[1], "merge latency under contention", "concurrent writers", "latency (us)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 4, 16, 64], labels=["1", "4", "16", "64"])
    axes[0].set_yscale("log")
    fig.suptitle(f"{title} -- lost updates: {_lost_summary(backends)}")
    written.append(_save(fig, stem, "concurrency"))
    plt.close(fig)
    return written


def _lost_summary(backends: dict[str, Any]) -> str:
    parts = []
    for name, result in backends.items():
        levels = [lv for lv in (result.get("concurrency") or {}).get("levels") or [] if "lost_updates" in lv]
        if levels:
            parts.append(f"{name} {sum(lv['lost_updates'] for lv in levels)}")
    return ", ".join(parts) or "none measured"


def _decorate(ax: Any, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _save(fig: Any, stem: Path, suffix: str) -> Path:
    path = stem.with_name(f"{stem.name}-{suffix}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
