"""The ``copy`` section: ``workmem.copy`` from an embedded libSQL file to PostgreSQL and back, against psycopg ``COPY``.

For each size (threads; a tenth as many resources, ten threads each) an
embedded libSQL file is built with the raw bulk loader
(:class:`~bench.loaders.LibSQLLoader`), then, in the same run:

* ``pg_copy_s``: the same rows (already in memory) loaded straight into a fresh
  PostgreSQL schema with psycopg ``COPY`` (:class:`~bench.loaders.PostgresLoader`;
  its tables are created beforehand and not timed);
* ``copy_s``: ``workmem.copy(libsql_url, postgres_url)`` into another fresh
  schema (opening both sides and creating the tables included). It streams
  pages of ``page_size`` records and writes up to ``writes_in_flight``
  (:data:`workmem.transfer.engine.WRITES_IN_FLIGHT`) at once, each batch one
  statement (:mod:`workmem.adapters.postgres.bulk`), while psycopg ``COPY``
  loads every row in one statement (one count trigger run, nothing skipped or
  compared): the ratio is the price of streaming and re-runnable copies;
* ``reverse_s``: ``workmem.copy(postgres_url, libsql_url)`` from that schema
  into a fresh libSQL file.

Each copy runs in its own subprocess (``python -m bench.copy``, URLs passed on
stdin), which times the ``workmem.copy`` call and reports its own peak RSS:
``VmHWM`` of ``/proc/self/status`` (the high-water mark of the process image
since ``exec``). Not ``ru_maxrss`` (``getrusage(RUSAGE_CHILDREN)`` or
``wait4``): Linux folds the RSS of the pre-``exec`` image, i.e. the parent's
(here holding every row), into the child's ``ru_maxrss``, so it would report the
benchmark's size, not the copy's; it is kept as ``ru_maxrss_mb`` for reference.
``baseline_rss_mb`` is a child that imports the same modules and opens both
storages but copies nothing. Memory is flat when the largest size's peak is no more than
:data:`bench.report.COPY_RSS_GROWTH_LIMIT` times the smallest's. Every schema and
file is removed afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import workmem
from bench.backends import Namespace, Unavailable, open_namespace
from bench.loaders import LibSQLLoader, PostgresLoader
from workmem.records import Resource, Thread
from workmem.transfer.engine import DEFAULT_PAGE_SIZE, WRITES_IN_FLIGHT

__all__ = ["FULL_SIZES", "QUICK_SIZES", "copy_section", "records"]

FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
THREADS_PER_RESOURCE = 10
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_MEMORY = json.dumps({"name": "Ada", "plan": "pro", "prefs": {"tone": "brief", "lang": "en"}})


def records(threads: int) -> tuple[list[Resource], list[Thread]]:
    """``threads // 10`` resources (at least one) and ``threads`` threads spread evenly over them."""
    count = max(1, threads // THREADS_PER_RESOURCE)
    resources = [Resource(f"cp-r{i:07d}", _MEMORY, {"plan": "pro", "n": i}, _EPOCH, _EPOCH) for i in range(count)]
    out = []
    for i in range(threads):
        stamp = _EPOCH + timedelta(milliseconds=i)
        owner = resources[i % count].id
        out.append(Thread(f"cp-t{i:07d}", owner, f"thread {i}", {"topic": "bench", "n": i}, stamp, stamp))
    return resources, out


# -- the child process ----------------------------------------------------------------------


def _peak_rss_kb() -> int | None:
    """This process's peak RSS since ``exec`` (``VmHWM``, KiB), or None without ``/proc``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _child() -> int:
    """``python -m bench.copy``: read ``{"mode", "src", "dst"}`` on stdin, print ``{"seconds", "counts", "ok"}``."""
    job = json.loads(sys.stdin.read())
    began = time.perf_counter()
    if job["mode"] == "open":
        with workmem.connect(job["src"], create=False), workmem.connect(job["dst"], create=False):
            pass
        out: dict[str, Any] = {"ok": True, "counts": {}}
    else:
        report = workmem.copy(job["src"], job["dst"], page_size=job["page_size"])
        counts: dict[str, int] = {}
        for (kind, outcome), n in report.counts.items():
            counts[f"{kind} {outcome}"] = counts.get(f"{kind} {outcome}", 0) + n
        out = {"ok": report.ok, "counts": counts, "summary": report.summary()}
    out["seconds"] = time.perf_counter() - began
    out["peak_rss_kb"] = _peak_rss_kb()
    print(json.dumps(out))
    return 0


def _run_child(mode: str, src: str, dst: str, page_size: int) -> dict[str, Any]:
    """Run one child; its JSON answer plus ``rss_mb`` (its peak RSS since exec) and ``ru_maxrss_mb`` (``wait4``)."""
    job = json.dumps({"mode": mode, "src": src, "dst": dst, "page_size": page_size})
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        stdin.write(job.encode())
        stdin.seek(0)
        proc = subprocess.Popen([sys.executable, "-m", "bench.copy"], stdin=stdin, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        text, errors = stdout.read().decode(), stderr.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} child exited {proc.returncode}: {errors.strip()[-2000:]}")
    answer: dict[str, Any] = json.loads(text.strip().splitlines()[-1])
    peak = answer.pop("peak_rss_kb")
    answer["ru_maxrss_mb"] = round(usage.ru_maxrss / 1024, 1)
    answer["rss_mb"] = None if peak is None else round(peak / 1024, 1)
    return answer


# -- the section ----------------------------------------------------------------------------


def _pg_copy(ns: Namespace, resources: Sequence[Resource], threads: Sequence[Thread]) -> float:
    """Seconds to load the rows with psycopg ``COPY`` into ``ns`` (tables created first, untimed)."""
    with ns.connect() as storage:
        loader = PostgresLoader(ns, storage)
        try:
            began = time.perf_counter()
            loader.resources(resources)
            loader.threads(threads)
            return time.perf_counter() - began
        finally:
            loader.close()


def _point(threads: int, page_size: int) -> dict[str, Any]:
    resources, rows = records(threads)
    with ExitStack() as stack:
        source = stack.enter_context(open_namespace("libsql"))
        began = time.perf_counter()
        with source.connect() as storage:
            loader = LibSQLLoader(source, storage)
            try:
                loader.resources(resources)
                loader.threads(rows)
            finally:
                loader.close()
        build_s = time.perf_counter() - began
        direct = stack.enter_context(open_namespace("postgres"))
        pg_copy_s = _pg_copy(direct, resources, rows)
        del rows
        target = stack.enter_context(open_namespace("postgres"))
        forward = _run_child("copy", source.url, target.url, page_size)
        back = stack.enter_context(open_namespace("libsql"))
        reverse = _run_child("copy", target.url, back.url, page_size)
        baseline = _run_child("open", source.url, direct.url, page_size)
    want = {"resource inserted": len(resources), "thread inserted": threads}
    return {
        "threads": threads,
        "resources": len(resources),
        "build_s": round(build_s, 3),
        "pg_copy_s": round(pg_copy_s, 3),
        "copy_s": round(forward["seconds"], 3),
        "ratio": round(forward["seconds"] / pg_copy_s, 2),
        "copy_rss_mb": forward["rss_mb"],
        "copy_complete": forward["ok"] and forward["counts"] == want,
        "copy_counts": forward["counts"],
        "reverse_s": round(reverse["seconds"], 3),
        "reverse_rss_mb": reverse["rss_mb"],
        "ru_maxrss_mb": {"copy": forward["ru_maxrss_mb"], "reverse": reverse["ru_maxrss_mb"]},
        "reverse_complete": reverse["ok"] and reverse["counts"] == want,
        "reverse_counts": reverse["counts"],
        "baseline_rss_mb": baseline["rss_mb"],
    }


def copy_section(sizes: Sequence[int], page_size: int = DEFAULT_PAGE_SIZE) -> dict[str, Any]:
    """The ``copy`` results (see :mod:`bench.report` for the layout); skipped when libSQL or PostgreSQL is missing."""
    result: dict[str, Any] = {"status": "ok", "reason": None, "page_size": page_size, "sizes": list(sizes)}
    result["writes_in_flight"] = WRITES_IN_FLIGHT
    result["target_threads"] = FULL_SIZES[-1]
    try:
        with open_namespace("libsql"), open_namespace("postgres"):
            pass
    except Unavailable as exc:
        result.update(status="skipped", reason=str(exc))
        return result
    result["points"] = []
    for threads in sizes:
        print(f"[copy] {threads:,} threads ...", file=sys.stderr, flush=True)
        result["points"].append(_point(threads, page_size))
    return result


if __name__ == "__main__":
    sys.exit(_child())
