"""``python -m bench.wal_frames [--threads N] [--creates C]``: what one thread creation writes to a SQLite file.

The embedded file's ``create_thread`` is measured against Mastra's on equal terms by
``bench --peers``; this says where the difference lies, below both programs. The
same ``INSERT`` of a new thread (the statement ``create_thread`` runs, ``ON CONFLICT
(id) DO NOTHING``) runs on a raw ``apsw`` connection, WAL, ``synchronous=NORMAL``,
into two files that already hold ``N`` threads of 200 resources:

* ``mastra table``: ``mastra_threads`` as ``@mastra/libsql`` creates it (its key, no
  other index, no trigger);
* ``workmem schema``: the same table as workmem creates it (two listing indexes,
  ``(resourceId, createdAt, id)`` and ``(resourceId, updatedAt, id)``, and the
  triggers keeping the per-resource thread count).

For each: the WAL frames (pages) one creation appends, counted with automatic
checkpoints off, and the time per creation with SQLite's default automatic
checkpoint (every 1,000 frames; at NORMAL the checkpoint is where the ``fsync``
calls are): mean, median and p99 over ``C`` creations, alternating files in blocks.
A checkpoint comes every ``1000 / frames`` creations, so its cost per creation
grows with the frames each one writes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import workmem

__all__ = ["main", "measure"]

_MASTRA_TABLE = (
    'CREATE TABLE mastra_threads ("id" TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL, '
    '"title" TEXT NOT NULL, "metadata" TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)'
)
_INSERT = (
    'INSERT INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
_RESOURCES = 200
_BLOCK = 500
_STAMP = "2025-01-01T00:00:00.000Z"


def _open(path: Path, schema: str, threads: int) -> Any:
    import apsw

    if schema == "workmem schema":
        workmem.connect(f"file:{path}").close()  # workmem's tables, indexes and triggers
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if schema == "mastra table":
        conn.execute(_MASTRA_TABLE)
    with conn:
        for i in range(threads):
            conn.execute(_INSERT, (f"t{i}", f"r{i % _RESOURCES}", "thread", '{"topic":"bench"}', _STAMP, _STAMP))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


def _create(conn: Any, i: int) -> None:
    conn.execute(_INSERT, (f"new-{i}", f"r{i % _RESOURCES}", "new", "{}", _STAMP, _STAMP))


def _frames_per_create(conn: Any, creates: int) -> float:
    import apsw

    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    for i in range(creates):
        _create(conn, 10_000_000 + i)
    frames, _ = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint=1000")  # SQLite's default again
    return float(frames) / creates


def measure(threads: int, creates: int) -> dict[str, dict[str, float]]:
    """Frames per creation and microseconds per creation (mean, p50, p99) for both schemas."""
    schemas = ("mastra table", "workmem schema")
    with tempfile.TemporaryDirectory(prefix="wmbench_wal_") as folder:
        conns = {schema: _open(Path(folder) / f"{n}.db", schema, threads) for n, schema in enumerate(schemas)}
        try:
            frames = {schema: _frames_per_create(conn, 2_000) for schema, conn in conns.items()}
            times: dict[str, list[float]] = {schema: [] for schema in schemas}
            clock = time.perf_counter_ns
            for start in range(0, creates, _BLOCK):  # alternating blocks: machine noise lands on both
                for schema in schemas:
                    conn, out = conns[schema], times[schema]
                    for i in range(start, min(start + _BLOCK, creates)):
                        before = clock()
                        _create(conn, i)
                        out.append((clock() - before) / 1_000)
        finally:
            for conn in conns.values():
                conn.close()
    result: dict[str, dict[str, float]] = {}
    for schema in schemas:
        samples = sorted(times[schema])
        result[schema] = {
            "frames_per_create": round(frames[schema], 2),
            "mean_us": round(sum(samples) / len(samples), 1),
            "p50_us": round(samples[len(samples) // 2], 1),
            "p99_us": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 1),
        }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wal_frames", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=4_000, help="threads in each file beforehand (4,000)")
    parser.add_argument("--creates", type=int, default=6_000, help="creations timed on each file (6,000)")
    args = parser.parse_args(argv)
    if args.threads < 0 or args.creates < _BLOCK:
        parser.error(f"--threads must be >= 0 and --creates >= {_BLOCK}")
    result = measure(args.threads, args.creates)
    print(f"{'schema':16s} {'frames/create':>13s} {'mean us':>8s} {'p50 us':>7s} {'p99 us':>8s}")
    for schema, row in result.items():
        print(
            f"{schema:16s} {row['frames_per_create']:13.2f} {row['mean_us']:8.1f} {row['p50_us']:7.1f} "
            f"{row['p99_us']:8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
