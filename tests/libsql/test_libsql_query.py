"""libSQL ``query()`` leaves nothing behind: no transaction, no snapshot, no setting, no huge WAL.

``query()`` runs each statement on a connection workmem keeps (a file's read-only connection of
its own, ``:memory:``'s one connection). Whatever a sequence of statements tries — ``BEGIN`` of
every kind, ``SAVEPOINT``, a ``PRAGMA`` that sets something, a statement that fails part way, a
string of several statements — once each call has returned, a write through the storage is seen
by the next ``query()``, SQLite can checkpoint the whole WAL, and ``close()`` leaves no WAL behind.
Sync, and async (``connect_async``: the statements land on several worker threads).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from raw_sqlite import raw

import workmem
from workmem import ValidationError
from workmem.adapters.libsql import AsyncLibSQLStorage, LibSQLStorage

pytestmark = pytest.mark.backend("libsql")

READ = """SELECT "workingMemory" FROM mastra_resources WHERE id = 'u1'"""
_ROWS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
MANY_ROWS = _ROWS + "SELECT i, id FROM n, mastra_resources"
FAILS_PART_WAY = _ROWS + "SELECT i, CASE WHEN i = 4000 THEN json('{') ELSE i END FROM n, mastra_resources"

SEQUENCES = {
    "begin": ["BEGIN", READ],
    "begin deferred transaction": ["begin deferred transaction", READ],
    "begin immediate": ["BEGIN IMMEDIATE", READ],
    "begin exclusive": ["BEGIN EXCLUSIVE", READ],
    "begin behind comments": ["/* a */ -- b\n  bEgIn /* c */ ;", READ],
    "savepoint": ["SAVEPOINT a", READ],
    "nested savepoints": ["SAVEPOINT a", READ, "SAVEPOINT b", READ, "RELEASE b"],
    "ends without a transaction": ["COMMIT", "END", "ROLLBACK", "ROLLBACK TO a", "RELEASE a"],
    "begin after a statement": ["SELECT 1; BEGIN", READ],
    "begin before a statement": ["BEGIN; SELECT 1", READ],
    "explain begin": ["EXPLAIN BEGIN", "EXPLAIN SAVEPOINT a", READ],
    "a statement failing part way": [FAILS_PART_WAY, READ, FAILS_PART_WAY],
    "many rows": [MANY_ROWS, READ],
    "journal_mode": ["PRAGMA journal_mode=DELETE", "PRAGMA main.journal_mode = 'memory'", READ],
    "locking_mode": ["PRAGMA locking_mode=EXCLUSIVE", READ],
    "query_only off": ["PRAGMA query_only = OFF", READ],
    "read_uncommitted": ["PRAGMA read_uncommitted = 1", "BEGIN", READ],
    "busy_timeout": ["PRAGMA busy_timeout(60000)", READ],
}


def _run(storage: LibSQLStorage, sequence: list[str]) -> None:
    for sql in sequence:
        with contextlib.suppress(ValidationError):  # refused or not: either way nothing may stay behind
            storage.query(sql)


def _checkpoint(path: Path) -> tuple[int, int, int]:
    """``PRAGMA wal_checkpoint`` from a connection of its own: ``(busy, WAL frames, frames checkpointed)``."""
    conn = raw(path)
    try:
        [row] = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        return row
    finally:
        del conn


def _assert_nothing_pinned(storage: LibSQLStorage, path: Path | None, label: str) -> None:
    for i in range(3):
        storage.set_working_memory(f"{label} {i}", scope="resource", resource_id="u1")
        assert storage.query(READ) == [(f"{label} {i}",)], "query() reads an old snapshot"
        assert storage.get_working_memory(scope="resource", resource_id="u1") == f"{label} {i}"
    if path is not None:
        busy, frames, done = _checkpoint(path)
        assert (busy, done) == (0, frames), "a reader holds the WAL: it cannot be checkpointed whole"


@pytest.fixture(params=["file", "memory"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[LibSQLStorage, Path | None]]:
    path = tmp_path / "agent.db" if request.param == "file" else None
    storage = workmem.connect(f"file:{path}" if path else ":memory:")
    assert isinstance(storage, LibSQLStorage)
    yield storage, path
    storage.close()


@pytest.mark.parametrize("name", SEQUENCES)
def test_no_statement_sequence_leaves_a_transaction_open(target: tuple[LibSQLStorage, Path | None], name: str) -> None:
    storage, path = target
    storage.set_working_memory("before", scope="resource", resource_id="u1")
    assert storage.query(READ) == [("before",)]  # the read connection is open and has read
    _run(storage, SEQUENCES[name])
    _assert_nothing_pinned(storage, path, name)


def test_all_sequences_one_after_another_on_one_storage(target: tuple[LibSQLStorage, Path | None]) -> None:
    storage, path = target
    for name, sequence in SEQUENCES.items():
        _run(storage, sequence)
        _assert_nothing_pinned(storage, path, name)


@pytest.mark.parametrize(
    "sql",
    [
        "BEGIN",
        "BEGIN DEFERRED",
        "SAVEPOINT a",
        "/* x */ begin",
        "COMMIT",
        "ROLLBACK",
        "RELEASE a",
        "END TRANSACTION",
    ],
)
def test_transaction_control_is_refused(target: tuple[LibSQLStorage, Path | None], sql: str) -> None:
    storage, _ = target
    with pytest.raises(ValidationError, match=r"query\(\).*transaction"):
        storage.query(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA journal_mode=DELETE",
        "PRAGMA journal_mode = WAL",
        "pragma MAIN.journal_mode('delete')",
        "PRAGMA busy_timeout = 60000",
        "PRAGMA busy_timeout(60000)",
        "PRAGMA query_only=OFF",
        'PRAGMA "cache_size" = -100000',
        "PRAGMA locking_mode=EXCLUSIVE",
        "EXPLAIN PRAGMA busy_timeout=1",
        "-- a comment\n/* another */ PRAGMA /* here */ read_uncommitted /* and */ = 1",
    ],
)
def test_a_pragma_that_sets_something_is_refused_not_busy(target: tuple[LibSQLStorage, Path | None], sql: str) -> None:
    """A setting would stay on the connection query() keeps (or, for the heap limits, on every SQLite
    connection of the process); SQLite applies some while it merely compiles the statement."""
    storage, path = target
    storage.get_resource("u1")  # a pooled connection holds the file open: journal_mode was busy here
    with pytest.raises(ValidationError, match=r"query\(\).*PRAGMA"):
        storage.query(sql)
    assert storage.query("PRAGMA busy_timeout") == [(0,)]  # the driver's busy handler stays off
    assert storage.query("PRAGMA cache_size") == [(-2000,)]
    if path is not None:
        assert storage.query("PRAGMA journal_mode") == [("wal",)]


THREAD_COLUMNS = ["id", "resourceId", "title", "metadata", "createdAt", "updatedAt"]
READING = {
    "PRAGMA user_version": [(0,)],
    "PRAGMA main.user_version": [(0,)],
    "PRAGMA quick_check": [("ok",)],
    "PRAGMA integrity_check(5)": [("ok",)],
    "PRAGMA foreign_key_check(mastra_threads)": [],
}
COLUMN_NAMES = [
    "PRAGMA table_info(mastra_threads)",
    "PRAGMA main.table_xinfo = mastra_threads",
    "SELECT * FROM pragma_table_info('mastra_threads')",
]


@pytest.mark.parametrize("sql", [*READING, *COLUMN_NAMES, "PRAGMA index_list('mastra_threads')"])
def test_pragmas_that_read_still_work(target: tuple[LibSQLStorage, Path | None], sql: str) -> None:
    storage, path = target
    rows = storage.query(sql)
    if sql in READING:
        assert rows == READING[sql]
    elif sql in COLUMN_NAMES:
        assert [row[1] for row in rows] == THREAD_COLUMNS
    else:
        assert len(rows) == 3  # its two indexes and the primary key's
    assert storage.query("PRAGMA journal_mode") == [("wal" if path else "memory",)]


def test_only_the_first_of_several_statements_runs(target: tuple[LibSQLStorage, Path | None]) -> None:
    """What the ``libsql`` driver does with a string of several statements: it runs the first, ignores the rest."""
    storage, _ = target
    storage.set_working_memory("kept", scope="resource", resource_id="u1")
    assert storage.query("SELECT 1; DELETE FROM mastra_resources") == [(1,)]
    assert storage.query("SELECT 2; BEGIN; PRAGMA query_only = OFF; DELETE FROM mastra_resources") == [(2,)]
    assert storage.get_working_memory(scope="resource", resource_id="u1") == "kept"
    assert storage.query("SELECT * FROM pragma_index_list('mastra_threads')")


def test_the_heap_limits_of_the_process_stay_untouched(tmp_path: Path) -> None:
    """``PRAGMA hard_heap_limit`` binds every connection of the libsql wheel in the process and can only be
    lowered: through query() it would make every later workmem call fail. Run in a process of its own."""
    script = f"""
import contextlib, workmem
storage = workmem.connect({f"file:{tmp_path / 'agent.db'}"!r})
for sql in ("PRAGMA hard_heap_limit=100000", "PRAGMA soft_heap_limit=1000"):
    with contextlib.suppress(workmem.ValidationError):
        storage.query(sql)
storage.set_working_memory("x" * 300_000, scope="resource", resource_id="u1")
assert storage.query("SELECT length(\\"workingMemory\\") FROM mastra_resources") == [(300_000,)]
assert storage.query("PRAGMA hard_heap_limit") == [(0,)], storage.query("PRAGMA hard_heap_limit")
assert storage.query("PRAGMA soft_heap_limit") == [(0,)], storage.query("PRAGMA soft_heap_limit")
second = workmem.connect({f"file:{tmp_path / 'other.db'}"!r})
second.set_working_memory("y" * 300_000, scope="resource", resource_id="u1")
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_async_queries_on_every_worker_see_each_write(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"

    async def main() -> None:
        async with await workmem.connect_async(f"file:{path}", pool_size=4) as storage:
            assert isinstance(storage, AsyncLibSQLStorage)
            await storage.set_working_memory("before", scope="resource", resource_id="u1")
            for name, sequence in SEQUENCES.items():
                for sql in sequence:  # several at once: they land on different worker threads
                    await asyncio.gather(
                        *(_refused_or_not(storage.query(sql)) for _ in range(4)), _refused_or_not(storage.query(READ))
                    )
                for i in range(3):
                    await storage.set_working_memory(f"{name} {i}", scope="resource", resource_id="u1")
                    seen = await asyncio.gather(*(storage.query(READ) for _ in range(8)))
                    assert seen == [[(f"{name} {i}",)]] * 8, f"after {name}: an old snapshot"
                busy, frames, done = _checkpoint(path)
                assert (busy, done) == (0, frames), f"after {name}: the WAL cannot be checkpointed whole"

    asyncio.run(main())


async def _refused_or_not(call: object) -> None:
    with contextlib.suppress(ValidationError):
        await call  # type: ignore[misc]


# -- the WAL: checkpointed while query() is used, gone after close() ------------------------------


def _wal_size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _write_a_lot(storage: LibSQLStorage, writes: int = 300) -> None:
    """About 9 pages a write: 300 writes are 2,700 WAL frames (11 MB) if nothing is ever checkpointed."""
    for i in range(writes):
        # new text throughout: SQLite writes only the overflow pages whose bytes change
        storage.set_working_memory(os.urandom(16_000).hex(), scope="resource", resource_id="big")
        if i % 50 == 0:
            storage.query('SELECT length("workingMemory") FROM mastra_resources')


def test_the_wal_stays_small_whatever_query_ran(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}", synchronous="normal") as storage:
        assert isinstance(storage, LibSQLStorage)
        storage.set_working_memory("before", scope="resource", resource_id="u1")
        _run(storage, ["BEGIN", READ, "SAVEPOINT a", READ])
        _write_a_lot(storage)
        # SQLite checkpoints at 1,000 frames (4 MB) and then reuses the WAL from its start
        assert _wal_size(path) < 6_000_000, f"the WAL grew to {_wal_size(path):,} bytes: never checkpointed"


def test_close_leaves_no_wal_behind(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    storage = workmem.connect(f"file:{path}", synchronous="normal")
    assert isinstance(storage, LibSQLStorage)
    _write_a_lot(storage, 200)  # query() has opened its read-only connection too
    assert _wal_size(path) > 1_000_000
    storage.close()
    assert _wal_size(path) == 0, "the last connection closed was query()'s read-only one: it cannot checkpoint"


def test_close_truncates_the_wal_while_another_storage_keeps_the_file_open(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    url = f"file:{path}"
    with workmem.connect(url, synchronous="normal") as other:
        storage = workmem.connect(url, synchronous="normal")
        assert isinstance(storage, LibSQLStorage)
        _write_a_lot(storage, 200)
        assert other.query('SELECT length("workingMemory") FROM mastra_resources WHERE id = ?', ["big"]) == [(32_000,)]
        assert _wal_size(path) > 1_000_000
        storage.close()
        assert _wal_size(path) == 0, "close() left the WAL at its largest size"
        other.set_working_memory("after", scope="resource", resource_id="u1")
        assert other.query(READ) == [("after",)]
    assert not os.path.exists(f"{path}-wal") or _wal_size(path) == 0
