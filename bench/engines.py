"""The embedded file engines side by side: the ``libsql`` wheel, ``apsw`` and CPython's ``sqlite3``.

One primary-key lookup per call, timed interleaved (:func:`bench.timing.interleaved`)
in three runs, each subject's figure the median of its three run medians:

* ``text_key`` -- a thread row of the ``mastra_threads`` table workmem creates
  (TEXT primary key), the floor's statement: ``SELECT id, "resourceId", title,
  json(metadata), "createdAt", "updatedAt" ... WHERE id = ?``, ``fetchall()``;
* ``int_key`` -- a row of a side table ``wmbench_int (id INTEGER PRIMARY KEY, v TEXT)``
  created in the same file.

workmem itself runs in the same interleaving on both of its engines for a file
(:mod:`workmem.adapters.libsql.port`): ``workmem`` is the default, ``apsw``;
``workmem_libsql`` is ``engine="libsql"``, the wheel. Each runs ``get_thread``
(a lookup like the others) and ``merge`` (``merge_working_memory`` of one field
into one of ten resources, a write transaction at the default ``synchronous=full``);
``ratios`` gives apsw's time over the wheel's for each, from the same run.
``loop_lag`` then runs :func:`bench.async_api.loop_lag` (a 1 ms ticker while 64
tasks merge through the async API) on each engine in turn, on a fresh file of its own.

The threads are written through workmem on the wheel (so their metadata is the
wheel's JSONB, as files written by earlier workmem versions hold it). Every
other subject reads a byte-identical copy of that file of its own (taken after a
``wal_checkpoint(TRUNCATE)`` with every connection closed), never the file
itself: two copies of SQLite in one process do not see each other's POSIX
locks (see :mod:`workmem.adapters.libsql.storage`). CPython's ``sqlite3`` may
bundle an SQLite older than 3.45, which cannot read JSONB (``json(metadata)``
fails with "malformed JSON"); it then selects the ``metadata`` blob as stored,
and ``statement`` says so. ``jsonb`` compares ``json(metadata)`` of every row as
each engine returns it with the wheel's.

``sqlite3`` and ``apsw`` are imported only when the section runs (the last one of
the libSQL backend): while either is loaded, the libSQL adapter looks for a
second SQLite library on its files, and the floor's raw ``libsql`` connection
then makes it warn.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import workmem
from bench.async_api import loop_lag
from bench.backends import Namespace
from bench.timing import Subject, interleaved
from bench.workloads import Settings
from workmem.records import Thread

__all__ = ["ENGINES", "embedded_engines"]

ENGINES = ("libsql", "apsw", "sqlite3")
_WORKMEM = {"workmem": "apsw", "workmem_libsql": "libsql"}
"""workmem's subjects: the name in the section, the engine it opens its copy of the file with."""
RUNS = 3
ROWS = 1000
_COLUMNS = 'id, "resourceId", title, {metadata}, "createdAt", "updatedAt"'
_TEXT_SQL = "SELECT " + _COLUMNS + " FROM mastra_threads WHERE id = ?"
_INT_SQL = "SELECT id, v FROM wmbench_int WHERE id = ?"
_JSON_SQL = "SELECT id, json(metadata) FROM mastra_threads ORDER BY id"


def _thread_id(i: int) -> str:
    return f"eng-t-{(i * 7919) % ROWS}"


def _int_id(i: int) -> int:
    return (i * 7919) % ROWS


def _open(engine: str, path: Path) -> tuple[Any, str, Callable[[], None]]:
    """``(connection, library version, close)`` of ``engine`` on ``path``."""
    if engine == "libsql":
        import libsql

        conn: Any = libsql.connect(str(path), isolation_level=None)
        return conn, f"libsql {version('libsql')}", conn.close
    if engine == "apsw":
        import apsw

        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        return conn, f"apsw {apsw.apswversion()}", conn.close
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    return conn, f"sqlite3 (CPython {sqlite3.sqlite_version})", conn.close


def _sqlite_version(conn: Any) -> str:
    return str(conn.execute("SELECT sqlite_version()").fetchall()[0][0])


def _text_sql(conn: Any) -> str:
    """The thread lookup this engine can run: ``json(metadata)`` where it reads JSONB, else the blob."""
    sql = _TEXT_SQL.format(metadata="json(metadata)")
    try:
        conn.execute(sql, (_thread_id(0),)).fetchall()
    except Exception:
        return _TEXT_SQL.format(metadata="metadata")
    return sql


def _json_rows(conn: Any) -> list[tuple[Any, ...]] | str:
    try:
        return [tuple(row) for row in conn.execute(_JSON_SQL).fetchall()]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _populate(path: Path) -> None:
    """Threads through workmem on the wheel (its JSONB metadata), the INTEGER-key table through the wheel."""
    import libsql

    with workmem.connect(f"file:{path}", engine="libsql") as storage:
        for i in range(ROWS):
            nested = {"x": i / 3, "big": 2**53 - 1 - i, "text": 'é ✓ "q"'}
            meta = {"topic": "bench", "n": i, "tags": ["a", "b"], "nested": nested}
            storage.save_thread(Thread(f"eng-t-{i}", f"eng-r-{i % 10}", f"thread {i}", meta))
    conn = libsql.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE wmbench_int (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    conn.execute("BEGIN")
    for i in range(ROWS):
        conn.execute("INSERT INTO wmbench_int (id, v) VALUES (?, ?)", (i, f"value {i}"))
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()


def embedded_engines(settings: Settings) -> dict[str, Any]:
    """The section's JSON: per engine its versions, statement, µs per lookup (TEXT / INTEGER key), JSONB check."""
    out: dict[str, Any] = {
        "rows": ROWS,
        "runs": RUNS,
        "note": "apsw and sqlite3 read byte-identical copies of the wheel's file; "
        "figures are the median of the run medians, in µs per call",
        "engines": {},
    }
    with tempfile.TemporaryDirectory(prefix="wmbench-engines-") as tmp:
        original = Path(tmp) / "wheel.db"
        _populate(original)
        paths = {"libsql": original}
        for engine in (*ENGINES[1:], *_WORKMEM):
            paths[engine] = Path(tmp) / f"{engine}.db"
            shutil.copyfile(original, paths[engine])
        closers: list[Callable[[], None]] = []
        subjects: dict[str, Subject] = {}
        reference: list[tuple[Any, ...]] | str = []
        try:
            for engine in ENGINES:
                try:
                    conn, library, close = _open(engine, paths[engine])
                except ImportError as exc:
                    out["engines"][engine] = {"status": "skipped", "reason": f"not installed: {exc}"}
                    continue
                closers.append(close)
                text_sql = _text_sql(conn)
                rows = _json_rows(conn)
                if engine == "libsql":
                    reference = rows
                out["engines"][engine] = {
                    "status": "ok",
                    "library": library,
                    "sqlite_version": _sqlite_version(conn),
                    "statement": text_sql,
                    "jsonb": {
                        "reads": not isinstance(rows, str),
                        "identical_to_libsql": rows == reference and not isinstance(rows, str),
                        "error": rows if isinstance(rows, str) else None,
                    },
                }

                def text(i: int, conn: Any = conn, sql: str = text_sql) -> object:
                    return conn.execute(sql, (_thread_id(i),)).fetchall()

                def integer(i: int, conn: Any = conn) -> object:
                    return conn.execute(_INT_SQL, (_int_id(i),)).fetchall()

                subjects[f"{engine}/text_key"] = text
                subjects[f"{engine}/int_key"] = integer
            for name, engine in _WORKMEM.items():
                storage = workmem.connect(f"file:{paths[name]}", engine=engine)
                closers.append(storage.close)

                def get_thread(i: int, storage: workmem.MemoryStorage = storage) -> object:
                    return storage.get_thread(_thread_id(i))

                def merge(i: int, storage: workmem.MemoryStorage = storage) -> object:
                    return storage.merge_working_memory({"n": i}, scope="resource", resource_id=f"eng-r-{i % 10}")

                subjects[f"{name}/get_thread"] = get_thread
                subjects[f"{name}/merge"] = merge
                found = storage.get_thread(_thread_id(1))
                out["engines"][name] = {
                    "status": "ok",
                    "library": f"workmem get_thread and merge (engine={engine!r}, file: URL, default pool)",
                    "statement": "LibSQLStorage.get_thread",
                    "record_ok": found is not None and found.id == _thread_id(1),
                    "engine": getattr(storage, "engine", None),
                }
            runs = [interleaved(subjects, samples=settings.samples, budget_s=settings.budget_s) for _ in range(RUNS)]
        finally:
            for close in closers:
                close()
    for name in subjects:
        engine, kind = name.split("/")
        medians = [run[name].median_us for run in runs]
        out["engines"][engine][kind] = {
            "median_us": round(statistics.median(medians), 2),
            "run_medians_us": [round(m, 2) for m in medians],
            "n_per_run": [run[name].n for run in runs],
        }
    ours, wheel = out["engines"]["workmem"], out["engines"]["workmem_libsql"]
    kinds = ("get_thread", "merge")
    out["ratios"] = {kind: round(ours[kind]["median_us"] / wheel[kind]["median_us"], 2) for kind in kinds}
    out["loop_lag"] = _loop_lags(settings)
    return out


def _loop_lags(settings: Settings) -> dict[str, Any]:
    """The event loop's lag under 64 merging tasks on each engine, one after the other, each on a file of its own."""
    lags: dict[str, Any] = {}
    for name, engine in _WORKMEM.items():
        with tempfile.TemporaryDirectory(prefix="wmbench-lag-") as tmp:
            path = str(Path(tmp) / "lag.db")
            ns = Namespace("libsql", f"file:{path}", options={"engine": engine}, detail={"path": path})
            loop = asyncio.new_event_loop()
            try:
                result = loop_lag(ns, settings, loop)
            finally:
                loop.close()
        loaded = result["loaded"]
        lags[name] = {
            "engine": engine,
            "p99_ms": loaded["p99_ms"],
            "median_ms": loaded["median_ms"],
            "max_ms": loaded["max_ms"],
            "merges": result["merges"],
            "merges_per_s": result["merges_per_s"],
            "lost_updates": result["lost_updates"],
        }
    return lags
