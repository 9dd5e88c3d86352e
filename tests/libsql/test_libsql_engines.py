"""The SQLite engine under a file: ``apsw`` by default, the ``libsql`` wheel on request, one per file per process.

``file:``, plain paths and ``:memory:`` open with ``apsw``; ``engine="libsql"`` (or
``file:…?engine=libsql``) keeps the wheel; remote servers always run on the wheel. A file
that one engine holds open in this process is refused to the other (two copies of SQLite
in one process do not share locks). Files written through the wheel (every file earlier
workmem versions wrote) are read and written on ``apsw``, and the other way round.
``apsw`` releases the GIL while SQLite runs a statement.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
from raw_sqlite import raw, raw_wheel

import workmem
from workmem import Resource, Thread, ValidationError
from workmem.adapters.libsql import AsyncLibSQLStorage, LibSQLStorage
from workmem.flows import run_sync

pytestmark = pytest.mark.backend("libsql")

WHEEL_SQLITE = "3.45"
"""The SQLite the ``libsql`` wheel bundles (0.1.11: 3.45.1)."""


def _engine(storage: Any) -> str:
    engine: str = storage.engine
    return engine


def test_a_file_and_memory_open_on_apsw_by_default(tmp_path: Path) -> None:
    for url in (f"file:{tmp_path / 'a.db'}", str(tmp_path / "b.db"), f"file://{tmp_path / 'c.db'}", ":memory:"):
        with workmem.connect(url) as storage:
            assert _engine(storage) == "apsw", url
            assert storage.query("SELECT sqlite_version()") == [(apsw.sqlite_lib_version(),)]


@pytest.mark.parametrize("how", ["option", "url", "upper case"])
def test_the_wheel_is_kept_for_a_file_on_request(tmp_path: Path, how: str) -> None:
    path = tmp_path / "agent.db"
    if how == "option":
        storage = workmem.connect(f"file:{path}", engine="libsql")
    elif how == "url":
        storage = workmem.connect(f"file:{path}?engine=libsql&synchronous=normal")
    else:
        storage = workmem.connect(f"file:{path}", engine="LIBSQL")
    with storage:
        assert _engine(storage) == "libsql"
        storage.save_thread(Thread("t", "r", "on the wheel"))
        # query() runs in a worker process, on the storage's engine too
        [(version,)] = storage.query("SELECT sqlite_version()")
        assert version.startswith(WHEEL_SQLITE + "."), version


def test_the_async_api_runs_on_the_same_engine(tmp_path: Path) -> None:
    async def main() -> None:
        async with await workmem.connect_async(f"file:{tmp_path / 'a.db'}") as storage:
            assert isinstance(storage, AsyncLibSQLStorage)
            assert storage.engine == "apsw"
        async with await workmem.connect_async(f"file:{tmp_path / 'b.db'}?engine=libsql") as storage:
            assert isinstance(storage, AsyncLibSQLStorage)
            assert storage.engine == "libsql"

    asyncio.run(main())


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("file:{path}", {"engine": "sqlite3"}, "engine must be 'apsw' or 'libsql'"),
        ("file:{path}", {"engine": 1}, "engine must be 'apsw' or 'libsql' .* not a int"),
        ("file:{path}?engine=wheel", {}, "engine must be 'apsw' or 'libsql'"),
        ("file:{path}?engine=libsql", {"engine": "apsw"}, "engine is 'libsql' in the URL and 'apsw' as an option"),
        ("file:{path}?engine=apsw&engine=apsw", {}, "each once"),
        ("libsql://127.0.0.1:1?tls=0", {"engine": "apsw"}, "a remote libSQL server is reached through the libsql"),
        ("libsql://127.0.0.1:1?tls=0&engine=apsw", {}, "unknown libSQL URL parameters: engine"),
    ],
)
def test_engine_options_are_checked(tmp_path: Path, url: str, options: dict[str, Any], message: str) -> None:
    path = tmp_path / "agent.db"
    with pytest.raises(ValidationError, match=message):
        workmem.connect(url.format(path=path), **options)
    assert not path.exists()  # refused before anything was opened


def test_a_remote_server_runs_on_the_wheel() -> None:
    from workmem.adapters.libsql.port import WheelEngine, engine_for

    assert isinstance(engine_for(None, remote=True), WheelEngine)
    assert isinstance(engine_for("libsql", remote=True), WheelEngine)


def test_one_engine_per_file_per_process(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    first = workmem.connect(f"file:{path}")
    second = workmem.connect(str(path))  # the same engine: shared, as before
    with pytest.raises(ValidationError, match=r"open in this process with the 'apsw' engine.*engine='apsw'"):
        workmem.connect(f"file:{path}", engine="libsql")
    first.close()
    with pytest.raises(ValidationError, match="'apsw' engine"):  # still held by the second storage
        workmem.connect(f"file:{path}?engine=libsql")
    link = tmp_path / "link.db"
    link.symlink_to(path)  # the same file by another name
    with pytest.raises(ValidationError, match="'apsw' engine"):
        workmem.connect(f"file:{link}", engine="libsql")
    second.close()
    with workmem.connect(f"file:{path}", engine="libsql") as wheel:  # free once the last storage closed
        assert wheel.get_thread("missing") is None
        with pytest.raises(ValidationError, match=r"with the 'libsql' engine.*engine='libsql'"):
            workmem.connect(f"file:{path}")
    with workmem.connect(f"file:{path}") as storage:
        assert _engine(storage) == "apsw"


def test_a_storage_that_fails_to_open_holds_no_claim(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}", engine="libsql") as storage:
        storage.save_thread(Thread("t", "r"))
    path.write_bytes(b"not a database" * 100)
    with pytest.raises(workmem.WorkmemError):
        workmem.connect(f"file:{path}")
    path.unlink()
    with workmem.connect(f"file:{path}", engine="libsql") as storage:  # not refused: the failed open let go
        assert _engine(storage) == "libsql"


def test_a_file_written_through_the_wheel_is_read_and_written_on_apsw(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    metadata = {"n": 2**53 - 1, "x": 1 / 3, "text": 'é ✓ "q"', "nested": {"list": [1, None, True]}}
    with workmem.connect(f"file:{path}", engine="libsql") as wheel:  # as earlier workmem versions wrote it
        thread = wheel.save_thread(Thread("t1", "r1", "title", metadata))
        resource = wheel.save_resource(Resource("r1", '{"a":1}', metadata))
    wheel_json = raw_wheel(path).execute("SELECT json(metadata) FROM mastra_threads").fetchall()
    with workmem.connect(f"file:{path}") as storage:
        assert _engine(storage) == "apsw"
        assert storage.get_thread("t1") == thread
        assert storage.get_resource("r1") == resource
        assert storage.list_threads("r1").threads == (thread,)
        storage.merge_working_memory({"b": 2}, scope="resource", resource_id="r1")
        storage.update_thread("t1", metadata={"added": "on apsw"})
        storage.save_thread(Thread("t2", "r1", "apsw's", {"k": [1.5]}))
        assert len(storage.list_threads("r1").threads) == 2
        assert storage.query("SELECT json(metadata) FROM mastra_threads WHERE id = 't1'") != wheel_json
    # the JSONB apsw wrote, read back by the wheel: the same records
    conn = raw(path)
    apsw_json = conn.execute("SELECT id, json(metadata) FROM mastra_threads ORDER BY id").fetchall()
    conn.close()
    wheel_conn = raw_wheel(path)
    assert wheel_conn.execute("SELECT id, json(metadata) FROM mastra_threads ORDER BY id").fetchall() == apsw_json
    del wheel_conn
    with workmem.connect(f"file:{path}", engine="libsql") as wheel:
        assert wheel.get_working_memory(scope="resource", resource_id="r1") == '{"a":1,"b":2}'
        t1 = wheel.get_thread("t1")
        assert t1 is not None and t1.metadata == {**metadata, "added": "on apsw"}
        t2 = wheel.get_thread("t2")
        assert t2 is not None and t2.metadata == {"k": [1.5]}


def test_apsw_reads_the_wheels_jsonb_byte_identically(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}", engine="libsql") as wheel:
        for i in range(20):
            wheel.save_thread(Thread(f"t{i}", "r", "", {"i": i, "f": i / 7, "s": "✓" * i, "l": list(range(i))}))
    sql = "SELECT id, metadata, json(metadata) FROM mastra_threads ORDER BY id"
    by_wheel = [tuple(row) for row in raw_wheel(path).execute(sql).fetchall()]
    conn = raw(path)
    assert conn.execute(sql).fetchall() == by_wheel
    conn.close()


@pytest.mark.parametrize("engine", ["apsw", "libsql"])
def test_the_synchronous_level_is_set_on_every_connection_of_either_engine(tmp_path: Path, engine: str) -> None:
    with workmem.connect(f"file:{tmp_path / 'a.db'}?synchronous=normal", engine=engine, pool_size=3) as storage:
        assert isinstance(storage, LibSQLStorage)
        pool = storage._pool
        taken = [pool.take() for _ in range(3)]  # the pool grows to its size: each connection newly opened
        try:
            assert [conn.execute("PRAGMA synchronous").fetchone()[0] for conn in taken] == [1, 1, 1]
        finally:
            for conn in taken:
                pool.give(conn, True)
        assert storage.query("PRAGMA synchronous") == [(1,)]  # the query() worker's connection too


def test_query_runs_only_the_first_statement_on_apsw(tmp_path: Path) -> None:
    with workmem.connect(f"file:{tmp_path / 'a.db'}") as storage:
        storage.set_working_memory("kept", scope="resource", resource_id="r")
        assert storage.query("SELECT 1; ATTACH 'other.db' AS o; DELETE FROM mastra_resources") == [(1,)]
        assert storage.query("SELECT 1 WHERE 0; DELETE FROM mastra_resources") == []
        assert storage.query("SELECT ?; SELECT ?", [7, 8]) == [(7,)]
        with pytest.raises(ValidationError, match="refused"):
            storage.query("DELETE FROM mastra_resources; SELECT 1")
        assert storage.get_working_memory(scope="resource", resource_id="r") == "kept"
    assert not (tmp_path / "other.db").exists()


_SLOW = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT count(*) FROM n"


@pytest.mark.parametrize("engine", ["apsw", "libsql"])
def test_other_threads_run_while_sqlite_runs_a_statement(tmp_path: Path, engine: str) -> None:
    """apsw releases the GIL while SQLite runs a statement; the wheel holds it (kept as the contrast)."""
    with workmem.connect(f"file:{tmp_path / 'a.db'}", engine=engine) as storage:
        assert isinstance(storage, LibSQLStorage)
        count = 200_000
        while True:  # a statement that takes at least 0.4 s on this machine, whatever its load
            started = time.monotonic()
            run_sync(storage._execute_sql(_SLOW, (count,), read=True))
            took = time.monotonic() - started
            if took >= 0.4:
                break
            count *= 2
        done = threading.Event()
        ticks: list[float] = []

        def tick() -> None:
            while not done.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.002)

        ticker = threading.Thread(target=tick)
        ticker.start()
        time.sleep(0.05)
        try:
            run_sync(storage._execute_sql(_SLOW, (count,), read=True))
        finally:
            done.set()
            ticker.join()
        longest = max(b - a for a, b in itertools.pairwise(ticks))
        if engine == "apsw":
            assert longest < took / 2, (longest, took)
        else:
            assert longest >= took / 2, (longest, took)


def test_a_missing_engine_names_the_extra_that_installs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An install of ``workmem[libsql]`` from before the switch has no apsw: a file says how to get it."""
    import sys

    from workmem.errors import MissingDriverError

    monkeypatch.setitem(sys.modules, "apsw", None)  # import now raises ImportError
    with pytest.raises(MissingDriverError, match=r"'apsw' driver is not installed: pip install 'workmem\[libsql\]'"):
        workmem.connect(f"file:{tmp_path / 'agent.db'}")
    with workmem.connect(f"file:{tmp_path / 'agent.db'}", engine="libsql") as storage:  # the wheel still opens it
        assert _engine(storage) == "libsql"


def test_a_storage_collected_unclosed_frees_its_file(tmp_path: Path) -> None:
    import gc

    path = tmp_path / "agent.db"
    storage = workmem.connect(f"file:{path}")
    storage.save_thread(Thread("t", "r"))
    del storage
    gc.collect()  # its connections are closed with it: the file is no longer held by apsw in this process
    with workmem.connect(f"file:{path}", engine="libsql") as wheel:
        assert wheel.get_thread("t") is not None
