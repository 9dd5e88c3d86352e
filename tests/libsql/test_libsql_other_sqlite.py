"""libSQL files and other SQLite libraries: across processes they share locks; in one process they must not meet.

* Across processes every SQLite engine shares the file's locks with the ``libsql`` wheel: the
  ``sqlite3`` shell, and Node's ``@libsql/client`` (the client ``@mastra/libsql`` runs on, from
  ``interop/``), doing read-modify-write transactions concurrently with workmem lose nothing.
* In one process, Python's ``sqlite3`` holding the same file is warned about (logger
  ``workmem.adapters.libsql``), and :meth:`LibSQLStorage.query` gives read-only SQL on workmem's
  own SQLite instead, the read-only rule enforced by the database.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import workmem
from workmem import ValidationError
from workmem.adapters.libsql import storage as adapter
from workmem.adapters.libsql.storage import LibSQLStorage

pytestmark = pytest.mark.backend("libsql")

LOGGER = "workmem.adapters.libsql"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "agent.db"


@pytest.fixture
def storage(path: Path) -> Iterator[LibSQLStorage]:
    opened = workmem.connect(f"file:{path}")
    assert isinstance(opened, LibSQLStorage)
    yield opened
    opened.close()


@pytest.fixture(params=["file", "memory"])
def any_storage(request: pytest.FixtureRequest, path: Path) -> Iterator[LibSQLStorage]:
    opened = workmem.connect(f"file:{path}" if request.param == "file" else ":memory:")
    assert isinstance(opened, LibSQLStorage)
    yield opened
    opened.close()


# -- query(): read-only SQL on workmem's own connection ---------------------------------------


def test_query_returns_rows_with_bound_parameters(any_storage: LibSQLStorage) -> None:
    any_storage.update_resource("u1", working_memory="# wm", metadata={"plan": "pro"})
    any_storage.update_resource("u2", working_memory="other")
    rows = any_storage.query(
        'SELECT id, "workingMemory", json(metadata) FROM mastra_resources WHERE id = ? ORDER BY id', ["u1"]
    )
    assert rows == [("u1", "# wm", '{"plan":"pro"}')]
    assert any_storage.query("SELECT count(*) FROM mastra_resources WHERE id LIKE ?", ("u%",)) == [(2,)]
    with pytest.raises(ValidationError, match="list or tuple"):
        any_storage.query("SELECT ?", {"p": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM mastra_resources",
        "UPDATE mastra_resources SET \"workingMemory\" = 'gone'",
        "INSERT INTO mastra_resources (id, \"createdAt\", \"updatedAt\") VALUES ('x', 'a', 'b')",
        "DROP TABLE mastra_threads",
        "CREATE TABLE mine (x)",
        "CREATE TEMP TABLE mine (x)",
        "PRAGMA user_version = 7",
        "VACUUM",
    ],
)
def test_query_refuses_writes_in_the_database(any_storage: LibSQLStorage, sql: str) -> None:
    any_storage.update_resource("u1", working_memory="kept")
    before = any_storage.query("SELECT * FROM sqlite_master ORDER BY name")
    with pytest.raises(ValidationError, match=r"query\(\).*(readonly|PRAGMA user_version with a value)"):
        any_storage.query(sql)
    assert any_storage.query("SELECT * FROM sqlite_master ORDER BY name") == before
    assert any_storage.query("PRAGMA user_version") == [(0,)]
    assert any_storage.get_working_memory(scope="resource", resource_id="u1") == "kept"
    # and workmem's own connections still write
    any_storage.set_working_memory("changed", scope="resource", resource_id="u1")
    assert any_storage.get_working_memory(scope="resource", resource_id="u1") == "changed"


def test_query_creates_no_file_and_attaches_nothing(any_storage: LibSQLStorage, tmp_path: Path) -> None:
    """ATTACH would create (and keep attached) another database file; VACUUM INTO writes a copy: both refused."""
    other, copy = tmp_path / "other.db", tmp_path / "copy.db"
    for sql, params in (
        (f"ATTACH DATABASE '{other}' AS other", ()),
        ("ATTACH DATABASE ? AS other", (str(other),)),
        (f"VACUUM INTO '{copy}'", ()),
        ("VACUUM INTO ?", (str(copy),)),
        ("DETACH DATABASE temp", ()),
    ):
        with pytest.raises(ValidationError, match=r"query\(\)"):
            any_storage.query(sql, params)
    assert not other.exists() and not copy.exists()
    assert [row[0] for row in any_storage.query("SELECT name FROM pragma_database_list")] == ["main"]
    assert any_storage.query("EXPLAIN QUERY PLAN SELECT id FROM mastra_threads WHERE id = ?", ["t"])  # still reads


def test_query_cannot_leave_workmem_in_a_transaction_or_read_only(any_storage: LibSQLStorage) -> None:
    for sql in ("BEGIN", "PRAGMA query_only = OFF", "PRAGMA query_only = ON"):
        with pytest.raises(ValidationError):  # refused (see test_libsql_query.py)
            any_storage.query(sql)
        any_storage.set_working_memory(sql, scope="resource", resource_id="u1")
        assert any_storage.get_working_memory(scope="resource", resource_id="u1") == sql


def test_query_keeps_the_file_in_wal_mode(path: Path) -> None:
    with workmem.connect(f"file:{path}", busy_timeout=0.2) as storage:
        assert isinstance(storage, LibSQLStorage)
        storage.get_resource("u1")  # a pooled connection holds the file open
        with pytest.raises(ValidationError, match="PRAGMA journal_mode"):  # never retryable: it cannot succeed
            storage.query("PRAGMA journal_mode = DELETE")
        assert storage.query("PRAGMA journal_mode") == [("wal",)]


def test_query_bad_sql_and_closed_storage(storage: LibSQLStorage) -> None:
    with pytest.raises(ValidationError, match="syntax error"):
        storage.query("SELEC 1")
    with pytest.raises(ValidationError, match="SQL text"):
        storage.query(b"SELECT 1")  # type: ignore[arg-type]
    storage.close()
    with pytest.raises(workmem.StorageClosedError, match="closed"):
        storage.query("SELECT 1")


# -- the warning about Python's sqlite3 on the same file in this process ------------------------


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def test_sqlite3_already_holding_the_file_is_warned_about_on_connect(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workmem.connect(f"file:{path}").close()
    other = sqlite3.connect(path)
    try:
        other.execute("SELECT count(*) FROM mastra_threads").fetchall()
        with caplog.at_level(logging.WARNING, LOGGER), workmem.connect(f"file:{path}"):
            pass
    finally:
        other.close()
    [message] = _warnings(caplog)
    assert str(path) in message and "sqlite3" in message and "query()" in message


def test_sqlite3_opened_later_is_warned_about_once_then_again_after_it_closed(
    storage: LibSQLStorage, path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter, "_FOREIGN_CHECK_INTERVAL", 0.0)
    caplog.set_level(logging.WARNING, LOGGER)
    storage.set_working_memory("a", scope="resource", resource_id="u1")
    assert _warnings(caplog) == []
    for episode in (1, 2):
        other = sqlite3.connect(path)  # opened only: not even read yet
        for text in ("b", "c", "d"):
            storage.set_working_memory(text, scope="resource", resource_id="u1")
        assert len(_warnings(caplog)) == episode, "one warning per episode"
        other.close()
        storage.set_working_memory("e", scope="resource", resource_id="u1")  # clean again: episode over


def test_workmem_connections_alone_are_not_warned_about(
    path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter, "_FOREIGN_CHECK_INTERVAL", 0.0)
    caplog.set_level(logging.WARNING, LOGGER)
    with workmem.connect(f"file:{path}", pool_size=4) as one, workmem.connect(f"file:{path}") as two:
        for i in range(20):
            one.set_working_memory(str(i), scope="resource", resource_id="u1")
            assert two.query('SELECT "workingMemory" FROM mastra_resources WHERE id = ?', ["u1"]) == [(str(i),)]
            two.merge_working_memory({"i": i}, scope="resource", resource_id="u2")
    assert _warnings(caplog) == []


def test_a_connection_of_workmems_own_engine_is_not_another_library_but_one_of_the_other_engine_is(
    path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program's own apsw connection shares workmem's copy of SQLite and its locks: no warning (the benchmark's
    raw floor connection was taken for another library). Beside a storage on the wheel, apsw is another copy."""
    import apsw

    monkeypatch.setattr(adapter, "_FOREIGN_CHECK_INTERVAL", 0.0)
    caplog.set_level(logging.WARNING, LOGGER)
    workmem.connect(f"file:{path}").close()
    mine = apsw.Connection(str(path))
    try:
        mine.execute("SELECT count(*) FROM mastra_threads").fetchall()
        with workmem.connect(f"file:{path}") as storage:
            for text in ("a", "b"):
                storage.set_working_memory(text, scope="resource", resource_id="u1")
        assert _warnings(caplog) == []
    finally:
        mine.close()
    mine = apsw.Connection(str(path))  # opened only, before a storage on the wheel: another copy of SQLite there
    try:
        with workmem.connect(f"file:{path}", engine="libsql"):
            pass
    finally:
        mine.close()
    [message] = _warnings(caplog)
    assert str(path) in message


STORAGES = 16


def _use(storage: LibSQLStorage, i: int) -> None:
    for j in range(8):
        storage.merge_working_memory({f"s{i}": j}, scope="resource", resource_id="u1")
        storage.query('SELECT json_extract("workingMemory", ?) FROM mastra_resources WHERE id = ?', [f"$.s{i}", "u1"])
        storage.get_working_memory(scope="resource", resource_id="u1")


def test_many_workmem_storages_used_concurrently_are_never_warned_about(
    path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storages opened at once, pools grown under concurrency, query()'s readers, storages closed while
    others keep the file open (SQLite keeps the closed connections' descriptors), then opened again."""
    assert "_sqlite3" in sys.modules  # imported by this file: the detection is on
    monkeypatch.setattr(adapter, "_FOREIGN_CHECK_INTERVAL", 0.0)
    caplog.set_level(logging.WARNING, LOGGER)
    start = threading.Barrier(STORAGES)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            for _ in range(2):
                storage = workmem.connect(f"file:{path}")
                assert isinstance(storage, LibSQLStorage)
                with storage:
                    _use(storage, i)
                    pool = [threading.Thread(target=_use, args=(storage, i)) for _ in range(3)]  # grows the pool
                    for thread in pool:
                        thread.start()
                    for thread in pool:
                        thread.join()
        except BaseException as error:
            errors.append(error)

    with workmem.connect(f"file:{path}") as keeper:
        assert isinstance(keeper, LibSQLStorage)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(STORAGES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert _warnings(caplog) == []
        _use(keeper, 99)
        assert _warnings(caplog) == []
        other = sqlite3.connect(path)  # and a real second SQLite library is still seen
        try:
            _use(keeper, 99)
        finally:
            other.close()
        assert len(_warnings(caplog)) == 1


def test_many_async_workmem_storages_are_never_warned_about(
    path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "_sqlite3" in sys.modules
    monkeypatch.setattr(adapter, "_FOREIGN_CHECK_INTERVAL", 0.0)
    caplog.set_level(logging.WARNING, LOGGER)

    async def use(storage: workmem.AsyncMemoryStorage, i: int) -> None:
        for j in range(4):
            await asyncio.gather(
                storage.merge_working_memory({f"s{i}-{j}": j}, scope="resource", resource_id="u1"),
                storage.query("SELECT count(*) FROM mastra_resources WHERE id = ?", ["u1"]),  # type: ignore[attr-defined]
                storage.get_working_memory(scope="resource", resource_id="u1"),
                storage.get_resource("u1"),
            )

    async def one(i: int) -> None:
        for _ in range(2):  # closed while the others keep the file open, then opened again
            async with await workmem.connect_async(f"file:{path}") as storage:
                await use(storage, i)

    async def main() -> None:
        async with await workmem.connect_async(f"file:{path}") as keeper:
            await asyncio.gather(*(one(i) for i in range(STORAGES)))
            assert _warnings(caplog) == []
            other = sqlite3.connect(path)
            try:
                await use(keeper, 99)
            finally:
                other.close()
            assert len(_warnings(caplog)) == 1

    asyncio.run(main())


# -- across processes: the sqlite3 shell and workmem share the file's locks -----------------------

_SHELL_INCREMENT = """BEGIN IMMEDIATE;
DELETE FROM temp.seen;
INSERT INTO temp.seen SELECT "workingMemory" FROM mastra_resources WHERE id = 'r';
UPDATE mastra_resources SET "workingMemory" = json_set((SELECT t FROM temp.seen), '$.shell',
  coalesce(json_extract((SELECT t FROM temp.seen), '$.shell'), 0) + 1) WHERE id = 'r';
COMMIT;
"""


def test_sqlite3_shell_and_workmem_read_modify_write_one_record_concurrently(
    storage: LibSQLStorage, path: Path
) -> None:
    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("the sqlite3 shell is not installed (apt-get install sqlite3; .ci/run installs it)")
    rounds = 300
    storage.set_working_memory("{}", scope="resource", resource_id="r")
    # Each shell transaction reads the record, then writes it back changed: a read-modify-write in
    # several statements, safe only if workmem's writes wait for its lock (and it for theirs).
    script = ".bail on\n.timeout 30000\nCREATE TEMP TABLE seen (t TEXT);\n" + _SHELL_INCREMENT * rounds
    proc = subprocess.Popen([shell, str(path)], stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write(script)
    proc.stdin.close()
    for i in range(rounds):  # workmem's merge: read, merge in Python, write, in one BEGIN IMMEDIATE
        storage.merge_working_memory({f"wm-{i}": i}, scope="resource", resource_id="r")
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    stored = json.loads(storage.get_working_memory(scope="resource", resource_id="r") or "{}")
    assert stored.pop("shell") == rounds
    assert stored == {f"wm-{i}": i for i in range(rounds)}


@pytest.mark.backend("mastra")
def test_libsql_client_and_workmem_read_modify_write_one_record_concurrently(
    storage: LibSQLStorage, path: Path
) -> None:
    from mastra_node import require_mastra, run_mastra, step

    require_mastra()
    rounds = 300
    storage.set_working_memory("{}", scope="resource", resource_id="r")
    # Node's @libsql/client: `rounds` write transactions (BEGIN IMMEDIATE), each reading the record's JSON,
    # adding key node-<i> and incrementing node-count in JavaScript, then writing it back (interop/driver.mjs),
    # 2 ms apart, so that its run lasts long enough for workmem's writes to fall between its own.
    node: dict[str, Any] = {}

    def run_node() -> None:
        try:
            [outcome] = run_mastra(
                {"kind": "none"},
                [
                    step(
                        "libsql.appendKeys", url=f"file:{path}", resourceId="r", prefix="node-", count=rounds, pauseMs=2
                    )
                ],
            )
            node["value"] = outcome.value
        except BaseException as error:  # reported by the assertion below
            node["error"] = error

    thread = threading.Thread(target=run_node)
    thread.start()
    deadline = time.monotonic() + 120
    while "node-count" not in (storage.get_working_memory(scope="resource", resource_id="r") or ""):
        assert thread.is_alive() and time.monotonic() < deadline, node  # Node starts slowly: wait for its first write
        time.sleep(0.001)
    merges = 0
    while merges < rounds or (thread.is_alive() and time.monotonic() < deadline):
        # workmem's merge (read, merge in Python, write, in one BEGIN IMMEDIATE) for as long as Node writes
        storage.merge_working_memory({f"wm-{merges}": merges}, scope="resource", resource_id="r")
        merges += 1
        time.sleep(0.002)  # as Node does: a writer that never pauses could starve the other's busy handler
    thread.join(timeout=180)
    assert "error" not in node, node.get("error")
    assert node["value"]["count"] == rounds
    stored = json.loads(storage.get_working_memory(scope="resource", resource_id="r") or "{}")
    order = [key.split("-")[0] for key in stored if key != "node-count"]
    assert stored.pop("node-count") == rounds
    assert {k: v for k, v in stored.items() if k.startswith("node-")} == {f"node-{i}": i for i in range(rounds)}
    assert {k: v for k, v in stored.items() if k.startswith("wm-")} == {f"wm-{i}": i for i in range(merges)}
    # the keys are in write order: the two writers really took turns on the record
    switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert switches >= 2, f"no interleaving ({merges} workmem merges, {node['value']['retries']} Node retries)"
