"""Run every peer of a backend side by side: warm-up, interleaved rounds, median, p50/p99, min..max.

Per round, per operation, every peer runs one block of the same ``count``
calls, in an order that rotates with the round and the operation, so a burst
of machine noise (a checkpoint, another process) lands on each peer in turn
rather than on one. A peer that cannot run here (no Node, a package missing)
is reported with the reason and left out; one that fails part way keeps what
it measured and records the error.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from bench.backends import Unavailable as NoServer
from bench.backends import server_url
from bench.peers.base import OPERATIONS, Measurement, Peer, Unavailable
from bench.peers.report import evaluate_peer_targets
from bench.timing import percentile

__all__ = ["PEER_BACKENDS", "Lineup", "lineup", "run_peers"]

PEER_BACKENDS = ("postgres", "file")
ROUNDS = 3

Lineup = list[tuple[str, Callable[[], Peer]]]
"""``(system label, opener)`` per peer of one backend, the workmem ones first."""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def lineup(backend: str, postgres_url: str | None) -> Lineup:
    """The systems compared on ``backend``: workmem, Mastra, LangGraph (the file at both durability levels)."""
    from bench.peers.langgraph import open_langgraph
    from bench.peers.mastra import open_mastra
    from bench.peers.workmem import open_workmem

    url = postgres_url or ""
    if backend == "postgres":
        return [
            ("workmem", lambda: open_workmem("postgres")),
            ("mastra", lambda: open_mastra("postgres", postgres_url=url)),
            ("langgraph", lambda: open_langgraph("postgres", postgres_url=url)),
        ]
    return [
        ("workmem", lambda: open_workmem("file")),
        ("workmem (normal)", lambda: open_workmem("file", synchronous="normal")),
        ("mastra", lambda: open_mastra("file", postgres_url=url)),
        ("mastra (normal)", lambda: open_mastra("file", postgres_url=url, synchronous="normal")),
        ("langgraph", lambda: open_langgraph("file", postgres_url=url)),
        ("langgraph (normal)", lambda: open_langgraph("file", postgres_url=url, synchronous="normal")),
    ]


def _summary(blocks: list[Measurement]) -> dict[str, Any]:
    rates = sorted(len(m.latencies) / m.seconds for m in blocks if m.seconds > 0)
    samples = sorted(x for m in blocks for x in m.latencies)
    return {
        "ops_per_s": rates[len(rates) // 2] if rates else None,
        "ops_per_s_rounds": [round(r, 1) for r in rates],
        "min_ops_per_s": rates[0] if rates else None,
        "max_ops_per_s": rates[-1] if rates else None,
        "p50_us": percentile(samples, 0.50) * 1e6 if samples else None,
        "p99_us": percentile(samples, 0.99) * 1e6 if samples else None,
        "calls": len(samples),
        **_extras(blocks),
    }


def _extras(blocks: list[Measurement]) -> dict[str, Any]:
    """What the peer reported beside the timings (Mastra: the ``synchronous`` level its writes ran at)."""
    levels = sorted({str(m.extra["synchronous"]) for m in blocks if "synchronous" in m.extra})
    return {"synchronous": levels} if levels else {}


def _run_backend(backend: str, systems: Lineup, count: int, warmup: int, rounds: int) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "ok", "systems": {}, "skipped": {}, "errors": {}}
    peers: dict[str, Peer] = {}
    try:
        for label, opener in systems:
            try:
                peer = opener()
            except Unavailable as exc:
                result["skipped"][label] = str(exc)
                _log(f"[peers/{backend}] {label} SKIPPED: {exc}")
                continue
            began = time.monotonic()
            _log(f"[peers/{backend}] {label}: prepare ...")
            try:
                peer.prepare()
            except Exception as exc:
                result["errors"][label] = f"prepare: {type(exc).__name__}: {exc}"
                _log(f"[peers/{backend}] {label} FAILED to prepare: {type(exc).__name__}: {exc}")
                peer.close()
                continue
            peers[label] = peer
            result["systems"][label] = {"notes": list(peer.notes), "prepare_s": round(time.monotonic() - began, 1)}
        blocks: dict[str, dict[str, list[Measurement]]] = {label: {op: [] for op in OPERATIONS} for label in peers}
        failed: set[tuple[str, str]] = set()

        def block(label: str, op: str, start: int, n: int) -> Measurement | None:
            if (label, op) in failed:
                return None
            try:
                return peers[label].measure(op, start, n)
            except Exception as exc:
                failed.add((label, op))
                result["errors"][f"{label}/{op}"] = f"{type(exc).__name__}: {exc}"
                _log(f"[peers/{backend}] {label} {op} FAILED: {type(exc).__name__}: {exc}")
                return None

        labels = list(peers)
        for op in OPERATIONS:  # warm-up: caches, prepared statements, JIT, pools
            for label in labels:
                block(label, op, 0, warmup)
        for round_no in range(rounds):
            _log(f"[peers/{backend}] round {round_no + 1} of {rounds}")
            for op_no, op in enumerate(OPERATIONS):
                shift = (round_no + op_no) % len(labels) if labels else 0
                for label in labels[shift:] + labels[:shift]:
                    measured = block(label, op, 100_000 * (round_no + 1), count)
                    if measured is not None:
                        blocks[label][op].append(measured)
        for label in labels:
            ops = result["systems"][label].setdefault("operations", {})
            for op in OPERATIONS:
                if blocks[label][op]:
                    ops[op] = _summary(blocks[label][op])
            try:
                result["systems"][label]["merges_kept"] = peers[label].merges_kept()
            except Exception as exc:
                result["errors"][f"{label}/merges_kept"] = f"{type(exc).__name__}: {exc}"
    finally:
        for label, peer in peers.items():
            try:
                peer.close()
            except Exception as exc:
                result["errors"][f"{label}/close"] = f"{type(exc).__name__}: {exc}"
    return result


def run_peers(
    backends: list[str],
    *,
    quick: bool = False,
    lineups: Callable[[str, str | None], Lineup] = lineup,
    sizes: tuple[int, int] | None = None,
    rounds: int = ROUNDS,
) -> dict[str, Any]:
    """``bench --peers``: every backend of ``backends`` (``postgres``, ``file``), the JSON-ready results.

    ``lineups`` picks the systems per backend (tests give their own); ``sizes`` is ``(count, warmup)``;
    ``rounds`` how many interleaved rounds each operation runs (the median round is the result: more
    rounds, less of a noisy machine's swing in it).
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    count, warmup = sizes or ((200, 50) if quick else (2_000, 300))
    out: dict[str, Any] = {"count": count, "warmup": warmup, "rounds": rounds, "backends": {}}
    try:
        postgres_url: str | None = server_url("postgres")
    except NoServer as exc:
        postgres_url = None
        if "postgres" in backends:
            out["backends"]["postgres"] = {"status": "skipped", "reason": str(exc)}
    for backend in backends:
        if backend in out["backends"]:
            continue
        began = time.monotonic()
        out["backends"][backend] = _run_backend(backend, lineups(backend, postgres_url), count, warmup, rounds)
        out["backends"][backend]["seconds"] = round(time.monotonic() - began, 1)
        out["backends"][backend]["targets"] = evaluate_peer_targets(backend, out["backends"][backend])
    return out
