"""``python -m bench.upstash_listing [--threads N ...] [--doc-bytes B ...] [--other-keys K] [--samples S]``.

What each ``listing`` mode of the Upstash adapter costs (through the REST bridge in
front of the local redis-server): ``list_threads`` of one resource with 20 threads,
a page of 20, while the database holds ``N`` other threads (documents of about ``B``
bytes each, as ``@mastra/upstash`` would write them) and ``K`` keys that are no
thread (a Mastra deployment's messages, say). ``listing=index`` reads the page from
workmem's sorted sets; ``listing=scan`` reads every thread document of the
database (``SCAN`` plus one owner-filtering script per batch). Both are timed in
alternating blocks (:func:`bench.timing.interleaved`); the table gives medians and
the scan's cost per thread document in the database. Keys live under a random
``wmbench_`` prefix behind a bridge of its own (``bench.backends.open_namespace``),
deleted afterwards. ``SCAN`` walks the whole keyspace, so the server's other keys
(``DBSIZE``, printed) count too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.backends import Namespace, open_namespace
from bench.timing import Stats, interleaved
from workmem import MemoryStorage, Thread

__all__ = ["main", "measure"]

_T0 = datetime(2025, 1, 1, tzinfo=UTC)
_LISTED = 20
"""Threads of the resource that is listed (one page)."""


def _client(ns: Namespace) -> Any:
    from upstash_redis import Redis

    return Redis(url=ns.detail["rest_url"], token=ns.detail["token"], allow_telemetry=False)


def _fill(storage: MemoryStorage, ns: Namespace, threads: int, doc_bytes: int, other: int) -> None:
    """``threads`` threads of other resources (``doc_bytes`` each, about), ``other`` keys that are no thread,
    and the listed resource's :data:`_LISTED` threads."""
    padding = {"notes": "x" * max(0, doc_bytes - 200)}
    others = (
        Thread(f"t{i:07d}", f"other{i % 500}", f"thread {i}", padding, _T0 + timedelta(seconds=i), _T0)
        for i in range(threads)
    )
    storage.insert_threads(others)
    storage.insert_threads(
        Thread(f"listed{i:03d}", "listed", f"listed {i}", padding, _T0 + timedelta(seconds=i), _T0)
        for i in range(_LISTED)
    )
    prefix = ns.detail["prefix"]
    client = _client(ns)
    try:
        for start in range(0, other, 1000):
            pipeline = client.pipeline()
            for i in range(start, min(other, start + 1000)):
                pipeline.set(f"{prefix}mastra_messages:threadId:t{i % max(threads, 1):07d}:id:m{i}", "{}")
            pipeline.exec()
    finally:
        client.close()


def measure(threads: int, doc_bytes: int, other: int, samples: int) -> dict[str, Any]:
    """One row: both modes listing the same resource over the same database."""
    with open_namespace("upstash") as ns, ns.connect() as indexed, ns.connect(listing="scan") as scanned:
        _fill(indexed, ns, threads, doc_bytes, other)
        assert indexed.list_threads("listed", per_page=_LISTED) == scanned.list_threads("listed", per_page=_LISTED)
        client = _client(ns)
        try:
            dbsize = int(client.dbsize())
        finally:
            client.close()
        stats: dict[str, Stats] = interleaved(
            {
                "index": lambda _: indexed.list_threads("listed", per_page=_LISTED),
                "scan": lambda _: scanned.list_threads("listed", per_page=_LISTED),
            },
            samples=samples,
            block=5,
            warmup=3,
            min_samples=min(samples, 10),
        )
    index_ms, scan_ms = stats["index"].median_us / 1000, stats["scan"].median_us / 1000
    return {
        "threads": threads + _LISTED,
        "doc_bytes": doc_bytes,
        "other_keys": other,
        "dbsize": dbsize,
        "index_ms": round(index_ms, 2),
        "scan_ms": round(scan_ms, 2),
        "scan_us_per_thread": round((scan_ms - index_ms) * 1000 / (threads + _LISTED), 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.upstash_listing", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--doc-bytes", type=int, nargs="+", default=[200, 4_000])
    parser.add_argument("--other-keys", type=int, default=0, help="keys that are no thread (messages), per row")
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args(argv)
    print("| threads in the database | bytes per document | other keys | DBSIZE ", end="")
    print("| index (ms) | scan (ms) | scan, µs per thread |")
    print("|---|---|---|---|---|---|---|")
    for doc_bytes in args.doc_bytes:
        for threads in args.threads:
            row = measure(threads, doc_bytes, args.other_keys, args.samples)
            print(
                f"| {row['threads']} | {row['doc_bytes']} | {row['other_keys']} | {row['dbsize']} "
                f"| {row['index_ms']} | {row['scan_ms']} | {row['scan_us_per_thread']} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
