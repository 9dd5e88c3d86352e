"""libSQL durability (the ``synchronous`` option) and the count triggers' in-place upgrade.

``synchronous`` is ``"full"`` (the default) or ``"normal"``, as a ``connect()`` option
or ``file:…?synchronous=normal``; every connection the adapter opens runs
``PRAGMA synchronous`` at that level: the pool's (however far it grew), ``query()``'s
read-only one, and the async API's (the same pool, on worker threads). Read back
through each connection here, and seen in the fsyncs a run of writes makes (under
``strace``, when it is installed and allowed to trace).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from raw_sqlite import raw

import workmem
from workmem import Thread, ValidationError
from workmem.adapters.libsql import AsyncLibSQLStorage, LibSQLStorage
from workmem.adapters.libsql.dialect import SQLiteDialect

pytestmark = pytest.mark.backend("libsql")

LEVEL = {"full": 2, "normal": 1}
"""What ``PRAGMA synchronous`` reads for each level."""


def pooled_levels(storage: LibSQLStorage) -> list[int]:
    """``PRAGMA synchronous`` of every idle pooled connection (each taken, read, and given back)."""
    pool = storage._pool
    taken = [pool.take() for _ in range(len(pool.idle))]
    try:
        return [conn.execute("PRAGMA synchronous").fetchone()[0] for conn in taken]
    finally:
        for conn in taken:
            pool.give(conn, True)


@contextmanager
def write_lock(path: Path) -> Iterator[None]:
    """The database's write lock held by another connection, so that writers pile up holding pool connections."""
    conn = raw(path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        del conn


def wait_until(done: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def hold_together(storage: LibSQLStorage, together: threading.Barrier) -> None:
    """Take a pooled connection and hold it until ``together``'s threads all hold one: the pool opens what it lacks.

    A writer gives its connection back between tries while the database is busy, so waiting writers
    alone do not make the pool grow.
    """
    conn = storage._pool.take()
    try:
        together.wait()
    finally:
        storage._pool.give(conn, True)


def make_file(path: Path) -> None:
    workmem.connect(f"file:{path}").close()


# -- the level of every connection -------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "level"), [(None, "full"), ("full", "full"), ("normal", "normal"), ("NORMAL", "normal"), ("Full", "full")]
)
def test_every_connection_runs_at_the_chosen_level(tmp_path: Path, given: str | None, level: str) -> None:
    options = {} if given is None else {"synchronous": given}
    with workmem.connect(f"file:{tmp_path / 'a.db'}", pool_size=3, **options) as storage:
        assert isinstance(storage, LibSQLStorage) and storage.synchronous == level
        pool = storage._pool
        held = [pool.take() for _ in range(3)]  # three at once: the pool opens three
        assert [conn.execute("PRAGMA synchronous").fetchone()[0] for conn in held] == [LEVEL[level]] * 3
        for conn in held:
            pool.give(conn, True)
        assert pooled_levels(storage) == [LEVEL[level]] * 3
        assert storage.query("PRAGMA synchronous") == [(LEVEL[level],)]  # query()'s own read-only connection


def test_connections_the_pool_opens_under_concurrent_writes_run_at_the_level(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with workmem.connect(f"file:{path}", synchronous="normal", pool_size=4, busy_timeout=30) as storage:
        assert isinstance(storage, LibSQLStorage)
        assert pooled_levels(storage) == [1]  # the one connection setup opened
        errors: list[BaseException] = []

        def merge(k: int) -> None:
            try:
                storage.merge_working_memory({f"k{k}": k}, scope="resource", resource_id="r")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        together = threading.Barrier(4, timeout=20)
        holders = [threading.Thread(target=hold_together, args=(storage, together)) for _ in range(4)]
        workers = [threading.Thread(target=merge, args=(k,)) for k in range(6)]
        with write_lock(path):  # the merges wait for the lock, taking and giving back pooled connections
            for worker in workers + holders:
                worker.start()
            wait_until(lambda: storage._pool._open == 4, "four pooled connections")
        for worker in workers + holders:
            worker.join()
        assert not errors
        assert pooled_levels(storage) == [1, 1, 1, 1]
        assert storage.get_working_memory(scope="resource", resource_id="r") is not None
        assert len(storage.merge_working_memory({}, scope="resource", resource_id="r")) == 6


def test_the_async_api_runs_every_worker_connection_at_the_level(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    make_file(path)

    async def main() -> None:
        async with await workmem.connect_async(f"file:{path}", synchronous="NORMAL", pool_size=4) as storage:
            assert isinstance(storage, AsyncLibSQLStorage)
            inner = storage.storage
            assert inner.synchronous == "normal"
            lock = raw(path)
            lock.execute("BEGIN IMMEDIATE")
            merges = [
                asyncio.create_task(storage.merge_working_memory({f"k{k}": k}, scope="resource", resource_id="r"))
                for k in range(12)
            ]
            together = threading.Barrier(4, timeout=20)
            await asyncio.gather(*(asyncio.to_thread(hold_together, inner, together) for _ in range(4)))
            assert inner._pool._open == 4
            lock.execute("ROLLBACK")
            await asyncio.gather(*merges)
            assert pooled_levels(inner) == [1, 1, 1, 1]
            assert await storage.query("PRAGMA synchronous") == [(1,)]
            assert len(await storage.merge_working_memory({}, scope="resource", resource_id="r")) == 12

    asyncio.run(main())


def test_memory_databases_take_the_option_too() -> None:
    with workmem.connect(":memory:", synchronous="normal") as storage:
        assert isinstance(storage, LibSQLStorage) and storage.synchronous == "normal"
        assert pooled_levels(storage) == [1] and storage.query("PRAGMA synchronous") == [(1,)]


# -- the URL -----------------------------------------------------------------------------------


def test_the_level_in_a_file_url(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with workmem.connect(f"file:{path}?synchronous=normal") as storage:
        assert isinstance(storage, LibSQLStorage) and storage.synchronous == "normal"
        assert pooled_levels(storage) == [1]
        assert repr(storage) == f"LibSQLStorage('file:{path}?synchronous=normal')"
    with workmem.connect(f"file://{path}?synchronous=NORMAL", synchronous="normal") as storage:  # the same, twice
        assert isinstance(storage, LibSQLStorage) and storage.synchronous == "normal"
    for query in ("mode=ro&synchronous=normal", "synchronous=normal&mode=ro"):  # read-only, at the level
        with workmem.connect(f"file:{path}?{query}") as storage:
            assert isinstance(storage, LibSQLStorage) and storage.synchronous == "normal"
            assert pooled_levels(storage) == [1] and storage.query("PRAGMA synchronous") == [(1,)]


def test_a_plain_path_has_no_query(tmp_path: Path) -> None:
    """A plain path is taken as written: ``?synchronous=normal`` is part of the file's name, not the option."""
    name = tmp_path / "a.db?synchronous=normal"
    with workmem.connect(str(name)) as storage:
        assert isinstance(storage, LibSQLStorage) and storage.synchronous == "full"
    assert name.exists() and not (tmp_path / "a.db").exists()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("synchronous=off", "synchronous must be 'full' or 'normal'"),
        ("synchronous=", "synchronous must be 'full' or 'normal'"),
        ("synchronous=normal&synchronous=normal", "each once"),
        ("synchronous=normal&cache=shared", "mode=ro"),
        ("mode=rw&synchronous=normal", "mode=ro"),
    ],
)
def test_bad_file_url_queries_are_refused(tmp_path: Path, query: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        workmem.connect(f"file:{tmp_path / 'a.db'}?{query}")
    assert not (tmp_path / "a.db").exists()


def test_a_url_and_an_option_that_disagree_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="in the URL and 'full' as an option"):
        workmem.connect(f"file:{tmp_path / 'a.db'}?synchronous=normal", synchronous="full")


@pytest.mark.parametrize("value", ["off", "OFF", "extra", "", "normal ", "2", 1, True, b"normal", 2.0])
def test_bad_levels_are_refused_naming_the_allowed_ones(tmp_path: Path, value: object) -> None:
    with pytest.raises(ValidationError, match=r"synchronous must be 'full' or 'normal' \(in any case\), not ") as info:
        workmem.connect(f"file:{tmp_path / 'a.db'}", synchronous=value)
    if not isinstance(value, str):  # a value of another type is named by its type
        assert f"a {type(value).__name__}" in str(info.value)
    assert not (tmp_path / "a.db").exists()


@pytest.mark.parametrize(
    "url", ["libsql://db.example.com?authToken=s3cr3t-token", "libsql+http://127.0.0.1:1", "libsql+wss://db.example"]
)
def test_remote_servers_refuse_the_option(url: str) -> None:
    """A server keeps its own durability: the option is refused before anything is sent, never ignored."""
    with pytest.raises(ValidationError, match="remote libSQL server keeps its own") as info:
        workmem.connect(url, synchronous="normal")
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(ValidationError, match="remote libSQL server keeps its own"):
        workmem.connect(url + ("&" if "?" in url else "?") + "synchronous=normal")


# -- what reaches the disk ---------------------------------------------------------------------

_WRITES = """
import sys
import workmem
url, level, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with workmem.connect(url, synchronous=level, pool_size=1) as storage:
    for i in range(count):
        storage.merge_working_memory({f"k{i}": i}, scope="resource", resource_id="r")
"""
_SYNC_CALL = re.compile(r"\b(?:fsync|fdatasync)\(")


def _strace_usable() -> bool:
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, check=False)
    return probe.returncode == 0


def _syncs(tmp_path: Path, level: str, count: int) -> int:
    """How many fsync/fdatasync calls a process makes opening a new file, merging ``count`` times, closing."""
    folder = tmp_path / f"{level}-{count}"
    folder.mkdir()
    trace = folder / "trace.txt"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-c", _WRITES, f"file:{folder / 'a.db'}", level, str(count)]
    strace = ["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync", "-o", str(trace)]
    subprocess.run([*strace, *command], check=True, env=env, timeout=120)
    lines = trace.read_text().splitlines()
    return sum(1 for line in lines if _SYNC_CALL.search(line) and "resumed>" not in line)


@pytest.mark.skipif(not _strace_usable(), reason="strace is not installed, or may not trace here")
def test_full_syncs_every_commit_and_normal_only_at_checkpoints(tmp_path: Path) -> None:
    """40 more commits: at least 40 more syncs at ``full``; none (a checkpoint at most) at ``normal``."""
    full = _syncs(tmp_path, "full", 50) - _syncs(tmp_path, "full", 10)
    normal = _syncs(tmp_path, "normal", 50) - _syncs(tmp_path, "normal", 10)
    assert full >= 40, full
    assert normal <= 2, normal


# -- the count triggers: an old file upgraded in place -------------------------------------------

_MASTRA_TABLES = (
    'CREATE TABLE mastra_threads ("id" TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL, '
    '"title" TEXT NOT NULL, "metadata" TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
    'CREATE TABLE mastra_resources ("id" TEXT NOT NULL PRIMARY KEY, "workingMemory" TEXT, '
    '"metadata" TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
)
_OLD_NAMES = ", ".join(
    f"'workmem_threads_count_{kind}'" for kind in ("before_insert", "insert", "delete", "update", "touch")
)
_OLD_MISSING = f"(SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ({_OLD_NAMES})) < 5"
_OLD_COUNT_DDL = (  # exactly what workmem ran on every start before the trigger set became four
    'CREATE TABLE IF NOT EXISTS workmem_thread_counts ("resourceId" TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL) '
    "WITHOUT ROWID",
    'CREATE TABLE IF NOT EXISTS workmem_thread_replaced (id TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL) '
    "WITHOUT ROWID",
    f"DELETE FROM workmem_thread_counts WHERE {_OLD_MISSING}",
    f"DELETE FROM workmem_thread_replaced WHERE {_OLD_MISSING}",
    f'INSERT INTO workmem_thread_counts ("resourceId", n) SELECT "resourceId", count(*) FROM mastra_threads '
    f'WHERE {_OLD_MISSING} GROUP BY "resourceId"',
    "CREATE TRIGGER IF NOT EXISTS workmem_threads_count_before_insert BEFORE INSERT ON mastra_threads\n"
    "WHEN EXISTS (SELECT 1 FROM mastra_threads WHERE id = NEW.id) BEGIN\n"
    '  INSERT OR REPLACE INTO workmem_thread_replaced (id, "resourceId") SELECT id, "resourceId" FROM mastra_threads '
    "WHERE id = NEW.id;\nEND",
    "CREATE TRIGGER IF NOT EXISTS workmem_threads_count_insert AFTER INSERT ON mastra_threads BEGIN\n"
    '  UPDATE workmem_thread_counts SET n = n - 1 WHERE "resourceId" = (SELECT "resourceId" FROM '
    "workmem_thread_replaced WHERE id = NEW.id);\n"
    "  DELETE FROM workmem_thread_replaced WHERE id = NEW.id;\n"
    '  INSERT INTO workmem_thread_counts ("resourceId", n) VALUES (NEW."resourceId", 1) ON CONFLICT ("resourceId") '
    "DO UPDATE SET n = n + 1;\nEND",
    "CREATE TRIGGER IF NOT EXISTS workmem_threads_count_delete AFTER DELETE ON mastra_threads BEGIN\n"
    '  UPDATE workmem_thread_counts SET n = n - 1 WHERE "resourceId" = OLD."resourceId";\n'
    "  DELETE FROM workmem_thread_replaced WHERE id = OLD.id;\nEND",
    'CREATE TRIGGER IF NOT EXISTS workmem_threads_count_update AFTER UPDATE OF "resourceId" ON mastra_threads\n'
    'WHEN OLD."resourceId" IS NOT NEW."resourceId" BEGIN\n'
    '  UPDATE workmem_thread_counts SET n = n - 1 WHERE "resourceId" = OLD."resourceId";\n'
    '  INSERT INTO workmem_thread_counts ("resourceId", n) VALUES (NEW."resourceId", 1) ON CONFLICT ("resourceId") '
    "DO UPDATE SET n = n + 1;\nEND",
    "CREATE TRIGGER IF NOT EXISTS workmem_threads_count_touch AFTER UPDATE ON mastra_threads\n"
    "WHEN EXISTS (SELECT 1 FROM workmem_thread_replaced WHERE id = NEW.id) BEGIN\n"
    "  DELETE FROM workmem_thread_replaced WHERE id = NEW.id;\nEND",
)
_MASTRA_SAVE = (  # how @mastra/libsql saves a thread (the implicit delete of a REPLACE fires no delete trigger)
    'INSERT OR REPLACE INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
    "VALUES (?, ?, '', jsonb('{}'), '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')"
)


def _run_old_start(conn: Any) -> None:
    """What an earlier workmem ran when it opened the file: its count tables, recount and five triggers."""
    conn.execute("BEGIN IMMEDIATE")
    for sql in _OLD_COUNT_DDL:
        conn.execute(sql)
    conn.execute("COMMIT")


def _triggers(conn: Any) -> dict[str, str]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    return dict(rows)


def _counts(conn: Any) -> tuple[dict[str, int], dict[str, int]]:
    """(workmem's kept counts without zeros, the counts of the rows) of every resource."""
    kept = dict(conn.execute('SELECT "resourceId", n FROM workmem_thread_counts WHERE n <> 0').fetchall())
    real = dict(conn.execute('SELECT "resourceId", count(*) FROM mastra_threads GROUP BY 1').fetchall())
    return kept, real


def _every_kind_of_write(conn: Any, storage: workmem.MemoryStorage, tag: str) -> None:
    """Inserts, REPLACEs (same owner, another owner), upserts, moves and deletes, by Mastra's SQL and by workmem."""
    storage.save_thread(Thread(f"{tag}-w", "a"))
    storage.save_thread(Thread(f"{tag}-w", "a", "again"))  # an upsert that updates
    storage.create_thread(Thread(f"{tag}-c", "b"))
    with pytest.raises(workmem.ThreadExistsError):
        storage.create_thread(Thread(f"{tag}-c", "a"))  # a conflict: nothing inserted, a note left
    for tid, owner in ((f"{tag}-m1", "a"), (f"{tag}-m2", "a"), (f"{tag}-m1", "a"), (f"{tag}-m2", "b")):
        conn.execute(_MASTRA_SAVE, (tid, owner))
    conn.execute(_MASTRA_SAVE, (f"{tag}-c", "c"))  # a REPLACE after a DO NOTHING conflict
    conn.execute('UPDATE mastra_threads SET "resourceId" = ? WHERE id = ?', ("d", f"{tag}-w"))
    conn.execute("UPDATE mastra_threads SET title = ? WHERE id = ?", ("t", f"{tag}-m1"))
    storage.update_thread(f"{tag}-m2", title="x")
    storage.delete_thread(f"{tag}-m1")


def test_a_file_with_the_earlier_triggers_is_upgraded_in_place_with_exact_counts(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = raw(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    for sql in _MASTRA_TABLES:
        conn.execute(sql)
    _run_old_start(conn)
    assert len(_triggers(conn)) == 5
    conn.executemany(_MASTRA_SAVE, [(f"old-{i}", f"r{i % 3}") for i in range(30)])  # counted by the old triggers
    conn.execute(_MASTRA_SAVE, ("old-1", "r0"))  # a REPLACE moving a thread: a note taken back
    conn.execute("UPDATE workmem_thread_counts SET n = 99 WHERE \"resourceId\" = 'r2'")  # wrong: must be recounted
    conn.execute("INSERT INTO workmem_thread_replaced VALUES ('old-5', 'r9')")  # a stale note: must go
    with workmem.connect(f"file:{path}") as storage:
        assert _triggers(conn) == _expected_triggers() and len(_triggers(conn)) == 4
        kept, real = _counts(conn)
        assert kept == real == {"r0": 11, "r1": 9, "r2": 10}
        assert conn.execute("SELECT count(*) FROM workmem_thread_replaced").fetchone() == (0,)
        assert storage.list_threads("r2", per_page=1).total == 10
        _every_kind_of_write(conn, storage, "new")
        kept, real = _counts(conn)
        assert kept == real and real["d"] == 1 and real["c"] == 1
        version = conn.execute("PRAGMA schema_version").fetchone()
    with workmem.connect(f"file:{path}") as storage:  # this version's set: left as it is, nothing recounted
        assert conn.execute("PRAGMA schema_version").fetchone() == version
        assert storage.list_threads("d").total == 1
    conn.close()


def _expected_triggers() -> dict[str, str]:
    """This version's count triggers by name, as :meth:`SQLiteDialect.count_upgrade` creates them."""
    statements = SQLiteDialect().count_upgrade([])
    creates = [sql for sql in statements if sql.startswith("CREATE TRIGGER ")]
    return {sql.split()[2]: sql for sql in creates}


def test_an_earlier_version_opening_the_file_again_keeps_the_counts_exact(tmp_path: Path) -> None:
    """Mixed versions: an earlier workmem re-adds its fifth trigger beside this version's four (counts stay exact);
    this version opening the file next drops it again."""
    path = tmp_path / "mixed.db"
    with workmem.connect(f"file:{path}") as storage:
        conn = raw(path)
        _every_kind_of_write(conn, storage, "one")
        _run_old_start(conn)  # the earlier version starts: one of its five names is missing, so it recounts
        assert set(_triggers(conn)) == {*_expected_triggers(), "workmem_threads_count_touch"}
        _every_kind_of_write(conn, storage, "two")
        conn.executemany(_MASTRA_SAVE, [(f"bulk-{i}", f"r{i % 4}") for i in range(40)])
        conn.execute("DELETE FROM mastra_threads WHERE id LIKE 'bulk-1%'")
        kept, real = _counts(conn)
        assert kept == real and sum(real.values()) == 2 * 3 + 40 - 11
    with workmem.connect(f"file:{path}"):
        assert _triggers(conn) == _expected_triggers()
        kept, real = _counts(conn)
        assert kept == real
    conn.close()


def test_a_changed_or_missing_trigger_is_recreated_and_everything_counted_again(tmp_path: Path) -> None:
    path = tmp_path / "changed.db"
    with workmem.connect(f"file:{path}") as storage:
        conn = raw(path)
        storage.insert_threads(Thread(f"t{i}", f"r{i % 2}") for i in range(10))
        conn.execute("DROP TRIGGER workmem_threads_count_update")
        conn.execute(  # someone's edit of a trigger: kept under its name, no longer ours
            "CREATE TRIGGER workmem_threads_count_update AFTER UPDATE ON mastra_threads BEGIN SELECT 1; END"
        )
        conn.execute("UPDATE mastra_threads SET \"resourceId\" = 'r9' WHERE id = 't0'")  # not counted
    with workmem.connect(f"file:{path}") as storage:
        assert _triggers(conn) == _expected_triggers()
        assert _counts(conn)[0] == _counts(conn)[1] == {"r0": 4, "r1": 5, "r9": 1}
        conn.execute("DROP TRIGGER workmem_threads_count_delete")
        conn.execute("DELETE FROM mastra_threads WHERE id = 't1'")  # not counted
    with workmem.connect(f"file:{path}") as storage:
        assert _triggers(conn) == _expected_triggers()
        assert storage.list_threads("r1").total == 4
    conn.close()
