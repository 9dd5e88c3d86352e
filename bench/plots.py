"""PNG plots of the scaling and concurrency curves (matplotlib, Agg backend: no display needed).

Three files next to the JSON, sharing its stem: ``-threads.png`` (median
latency against threads per resource), ``-resources.png`` (against the
number of resources) and ``-concurrency.png`` (merges/s against writers, lost
updates marked in red); with ``--async`` a fourth, ``-async.png``: the async
API's overhead per operation, 64 tasks vs a 16-thread pool, and event-loop lag.
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

    measured = {n: r for n, r in backends.items() if r.get("async_overhead") or r.get("loop_lag")}
    if measured:
        fig = _async_figure(plt, measured)
        fig.suptitle(f"{title} -- async API (workmem.connect_async)")
        written.append(_save(fig, stem, "async"))
        plt.close(fig)
    return written


def _async_figure(plt: Any, backends: dict[str, Any]) -> Any:
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    names = list(backends)
    width = 0.8 / max(1, len(names))
    ops: list[str] = []
    for result in backends.values():
        for op in (result.get("async_overhead") or {}).get("operations", {}):
            if op not in ops:
                ops.append(op)
    for k, name in enumerate(names):
        entries = (backends[name].get("async_overhead") or {}).get("operations", {})
        x = [i + k * width for i, op in enumerate(ops) if op in entries]
        axes[0].bar(x, [entries[op]["ratio"] for op in ops if op in entries], width, color=_color(name), label=name)
    axes[0].axhline(1.0, color="black", linewidth=0.8)
    axes[0].set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(ops))], labels=ops, rotation=30, ha="right")
    axes[0].set_title("async / sync median latency, one caller", fontsize=10)
    axes[0].set_ylabel("ratio")

    labels: list[str] = []
    sync_rates: list[float] = []
    async_rates: list[float] = []
    colors: list[str] = []
    for name in names:
        section = backends[name].get("async_throughput") or {}
        for workload, entry in (section.get("workloads") or {}).items():
            labels.append(f"{name}\n{workload}")
            sync_rates.append(entry["sync_ops_per_s"])
            async_rates.append(entry["async_ops_per_s"])
            colors.append(_color(name))
    x = list(range(len(labels)))
    axes[1].bar([i - 0.2 for i in x], sync_rates, 0.4, color=colors, alpha=0.45, label="sync, 16 threads")
    axes[1].bar([i + 0.2 for i in x], async_rates, 0.4, color=colors, label="async, 64 tasks")
    axes[1].set_xticks(x, labels=labels, fontsize=7)
    axes[1].set_yscale("log")
    axes[1].set_title("64 concurrent callers: ops/s (pale: sync on 16 threads)", fontsize=10)

    lagged = [n for n in names if backends[n].get("loop_lag")]
    for k, name in enumerate(lagged):
        lag = backends[name]["loop_lag"]
        values = [lag["idle"]["p99_ms"], lag["loaded"]["p99_ms"], lag["loaded"]["max_ms"]]
        axes[2].bar([i + k * 0.25 for i in range(3)], values, 0.25, color=_color(name), label=name)
    axes[2].axhline(5.0, color="red", linestyle="--", linewidth=0.8, label="p99 target 5 ms")
    axes[2].set_xticks([0.25, 1.25, 2.25], labels=["idle p99", "64 merging tasks p99", "64 merging tasks max"])
    axes[2].set_yscale("log")
    axes[2].set_ylabel("ms past the 1 ms tick")
    axes[2].set_title("event-loop lag of a 1 ms ticker", fontsize=10)
    for ax in axes:
        ax.grid(True, axis="y", which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return fig


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
