"""``python -m bench [--backend NAME ...] [--quick] [--async] [--copy] [--only SECTION ...] [--out DIR]``: benchmark.

``python -m bench --peers [--backend postgres|libsql] [--quick]`` instead runs
workmem side by side with the real Mastra adapters (Node 22, ``interop/``) and
LangGraph's stores, the same nine measurements interleaved (:mod:`bench.peers`).

For every backend reachable here (others are skipped with the reason): the
latency of six operations next to the raw driver floor measured in the same
run, round trips per operation, for libSQL the embedded engines side by side
(the ``libsql`` wheel, ``apsw``, CPython's ``sqlite3``: primary-key lookups), scaling with threads per resource and with
resources, the cost of working-memory history (a merge with history off, on, and
on keeping 50: :mod:`bench.history`), and concurrent merges (ops/s, lost updates). Where the floor can
read whole records by hand (libSQL), the reads are also set against that, layer
by layer (``read_layers``). ``--async`` adds the async API (:mod:`bench.async_api`):
its overhead per operation over the sync API, 64 tasks against a 16-thread
pool, and the event loop's lag under 64 merging tasks. ``--copy`` adds the
``copy`` section (:mod:`bench.copy`, not per backend): ``workmem.copy`` from an
embedded libSQL file to PostgreSQL against psycopg ``COPY``, the reverse
direction, and the copying process's peak RSS. ``--only big_merge`` runs the
``big_merge`` section (:mod:`bench.big_merge`, not per backend): one merge of a
60,000-key patch (about 1.8 MB, three shapes) on PostgreSQL against libSQL.
``--only SECTION``
(repeatable) runs just those sections. Prints tables, writes
``<timestamp>-<host>.json`` and PNG plots into ``bench/results/`` (or
``--out``). Targets are reported as PASS/MISS, never asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import workmem
from bench.async_api import async_section
from bench.backends import ALL_BACKENDS, Unavailable, open_namespace
from bench.big_merge import big_merge_section
from bench.copy import FULL_SIZES, QUICK_SIZES, copy_section
from bench.engines import embedded_engines
from bench.floors import open_floor
from bench.history import history_cost
from bench.loaders import loader_for
from bench.peers.plot import draw_peers
from bench.peers.report import format_peers
from bench.peers.runner import PEER_BACKENDS, ROUNDS, run_peers
from bench.plots import draw_plots
from bench.report import (
    evaluate_big_merge_targets,
    evaluate_copy_targets,
    evaluate_targets,
    format_report,
    write_json,
)
from bench.workloads import (
    Settings,
    concurrency,
    latency,
    prepare,
    read_layers,
    resource_scaling,
    round_trips,
    thread_scaling,
)

__all__ = ["main", "run"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SECTIONS = (
    "latency", "read_layers", "round_trips", "history", "concurrency", "thread_scaling", "resource_scaling", "engines",
    "async", "copy", "big_merge",
)  # fmt: skip
"""What ``--only`` picks from; ``async`` (the three async measurements), ``copy`` and ``big_merge`` run only when
asked for."""
DEFAULT_SECTIONS = frozenset(SECTIONS) - {"async", "copy", "big_merge"}
RUN_SECTIONS = frozenset({"copy", "big_merge"})
"""Sections of the whole run, not of one backend (``results["copy"]``)."""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _section(result: dict[str, Any], backend: str, name: str, work: Callable[[], Any]) -> Any:
    """Run one section; its failure is recorded (and printed) without stopping the others."""
    began = time.monotonic()
    _log(f"[{backend}] {name} ...")
    try:
        value = work()
    except Exception as exc:
        value = None
        result["errors"][name] = f"{type(exc).__name__}: {exc}"
        _log(f"[{backend}] {name} FAILED: {type(exc).__name__}: {exc}")
    else:
        if value is not None:
            result[name] = value
    result["seconds"][name] = round(time.monotonic() - began, 1)
    _log(f"[{backend}] {name} done in {result['seconds'][name]} s")
    return value


def run_backend(backend: str, settings: Settings, sections: frozenset[str] = DEFAULT_SECTIONS) -> dict[str, Any]:
    """The ``sections`` on one backend, in a fresh namespace that is removed afterwards."""
    result: dict[str, Any] = {"status": "ok", "reason": None, "errors": {}, "seconds": {}}
    result["sections"] = [name for name in SECTIONS if name in sections]

    def section(name: str, work: Callable[[], Any]) -> Any:
        return _section(result, backend, name, work)

    began = time.monotonic()
    try:
        with open_namespace(backend) as ns:
            result["url"] = ns.masked_url
            with ns.connect() as storage:
                floor = open_floor(ns)
                result["floor"] = None if floor is None else floor.description
                loader, note = loader_for(ns, storage)
                result["loader"] = loader.name + (f" ({note})" if note else "")
                if note:
                    _log(f"[{backend}] {note}")
                try:
                    fixture = _section(result, backend, "prepare", lambda: prepare(loader))
                    result.pop("prepare", None)
                    if fixture is not None:
                        if "latency" in sections:
                            section("latency", lambda: latency(storage, floor, fixture, settings))
                        if "read_layers" in sections:
                            section("read_layers", lambda: read_layers(storage, floor, fixture, settings))
                        if "round_trips" in sections:
                            section("round_trips", lambda: round_trips(ns, fixture) or None)
                        if "async" in sections:
                            async_section(ns, storage, fixture, settings, section)
                    if "history" in sections:
                        section("history", lambda: history_cost(ns, settings))
                    if "concurrency" in sections:
                        section("concurrency", lambda: concurrency(ns, storage, settings))
                    if "thread_scaling" in sections:
                        section("thread_scaling", lambda: thread_scaling(storage, loader, ns, settings, floor))
                    if "resource_scaling" in sections:
                        section("resource_scaling", lambda: resource_scaling(storage, loader, ns, settings))
                    if backend == "libsql" and "engines" in sections:
                        # last: it loads sqlite3 and apsw, which the adapter then watches for
                        section("engines", lambda: embedded_engines(settings))
                finally:
                    loader.close()
                    if floor is not None:
                        floor.close()
    except Unavailable as exc:
        result.update(status="skipped", reason=str(exc))
        _log(f"[{backend}] skipped: {exc}")
    except Exception as exc:
        result.update(status="error", reason=f"{type(exc).__name__}: {exc}")
        _log(f"[{backend}] ERROR: {type(exc).__name__}: {exc}")
    result["seconds"]["total"] = round(time.monotonic() - began, 1)
    if result["status"] == "ok":
        result["targets"] = evaluate_targets(backend, result)
    return result


def run(
    backends: list[str], settings: Settings, command: str, sections: frozenset[str] = DEFAULT_SECTIONS
) -> dict[str, Any]:
    """Benchmark ``backends``; the JSON-ready results."""
    started = datetime.now(UTC)
    began = time.monotonic()
    results: dict[str, Any] = {
        "meta": {
            "started_at": started.isoformat(timespec="seconds"),
            "host": socket.gethostname(),
            "command": command,
            "quick": settings.quick,
            "sections": [name for name in SECTIONS if name in sections],
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
            "workmem_version": getattr(workmem, "__version__", None),
        },
        "backends": {},
    }
    if sections - RUN_SECTIONS:
        for backend in backends:
            results["backends"][backend] = run_backend(backend, settings, sections - RUN_SECTIONS)
    if "copy" in sections:
        sizes = QUICK_SIZES if settings.quick else FULL_SIZES
        results["copy"] = _run_section("copy", lambda: copy_section(sizes), evaluate_copy_targets)
    if "big_merge" in sections:
        rounds = 1 if settings.quick else 3
        results["big_merge"] = _run_section(
            "big_merge", lambda: big_merge_section(rounds=rounds), evaluate_big_merge_targets
        )
    results["meta"]["duration_s"] = round(time.monotonic() - began, 1)
    results["meta"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


def _run_section(
    name: str, work: Callable[[], dict[str, Any]], evaluate: Callable[[dict[str, Any]], list[dict[str, Any]]]
) -> dict[str, Any]:
    """A section of the whole run (not per backend): its result with ``seconds``, and ``targets`` when it ran."""
    _log(f"[{name}] ...")
    began = time.monotonic()
    try:
        section = work()
    except Exception as exc:
        section = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
        _log(f"[{name}] FAILED: {type(exc).__name__}: {exc}")
    section["seconds"] = round(time.monotonic() - began, 1)
    if section["status"] == "ok":
        section["targets"] = evaluate(section)
    return section


def peers_main(backends: list[str] | None, quick: bool, out: Path, command: str, rounds: int = ROUNDS) -> int:
    """``--peers``: PostgreSQL (``--backend postgres``) and the embedded file (``--backend libsql``)."""
    chosen = [("file" if b == "libsql" else b) for b in backends or ["postgres", "libsql"]]
    unknown = [b for b in chosen if b not in PEER_BACKENDS]
    if unknown:
        _log(f"--peers compares on postgres and libsql only, not {', '.join(unknown)}")
        return 2
    began = time.monotonic()
    results = run_peers(chosen, quick=quick, rounds=rounds)
    results["meta"] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "command": command,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "duration_s": round(time.monotonic() - began, 1),
    }
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = out / f"{stamp}-{results['meta']['host']}-peers.json"
    write_json(results, path)
    plot = draw_peers(results, path.with_suffix(""))
    print(format_peers(results))
    print(f"JSON:  {path}")
    if plot is not None:
        print(f"plot:  {plot}")
    print(f"took {results['meta']['duration_s']} s; command: {command}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend",
        action="append",
        choices=ALL_BACKENDS,
        help="benchmark only this backend (repeatable; default: every backend reachable here)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples (about a minute)")
    parser.add_argument(
        "--async",
        dest="run_async",
        action="store_true",
        help="add the async API: overhead per operation, 64 tasks vs a 16-thread pool, event-loop lag",
    )
    parser.add_argument(
        "--copy",
        dest="run_copy",
        action="store_true",
        help="add the copy section: workmem.copy libSQL -> PostgreSQL vs psycopg COPY, the reverse, peak RSS",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        help="run only this section (repeatable; 'async' is the three async measurements, 'copy' the copy section, "
        "'big_merge' one 60,000-key merge on PostgreSQL against libSQL)",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="instead: workmem side by side with Mastra (Node) and LangGraph on PostgreSQL and the embedded file",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        help=f"with --peers: interleaved rounds per operation, the median reported (default {ROUNDS})",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"directory for JSON and PNGs ({RESULTS_DIR})")
    args = parser.parse_args(argv)
    command = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.peers:
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        return peers_main(args.backend, args.quick, args.out, command.strip(), args.rounds)
    backends = list(dict.fromkeys(args.backend or ALL_BACKENDS))
    sections = (frozenset(args.only) if args.only else DEFAULT_SECTIONS) | ({"async"} if args.run_async else set())
    sections |= {"copy"} if args.run_copy else set()
    results = run(backends, Settings.default(args.quick), command.strip(), sections)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"{stamp}-{results['meta']['host']}.json"
    write_json(results, path)
    plots = draw_plots(results, path.with_suffix("")) if results["backends"] else []
    print(format_report(results))
    print()
    print(f"JSON:  {path}")
    for plot in plots:
        print(f"plot:  {plot}")
    print(f"took {results['meta']['duration_s']} s; command: {results['meta']['command']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
