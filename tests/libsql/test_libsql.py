"""libSQL adapter: the contract on a file and in memory, URLs, busy waits, processes, on-disk shape.

Remote libSQL (``libsql://``, ``libsql+http(s)://``, ``libsql+ws(s)://``) cannot
be reached from here: only URL parsing, token masking and the refused
connection to a closed local port are tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from raw_sqlite import raw
from test_sql_contract import T0, MakeStorage, SqlContract

import workmem
from workmem import (
    BackendBusyError,
    BackendUnavailableError,
    Resource,
    StorageClosedError,
    Thread,
    ThreadOwnershipError,
    UnreadableRecordError,
    ValidationError,
)
from workmem.adapters.libsql.storage import LibSQLStorage, _Pool, parse_libsql_url
from workmem.arguments import check_list_args

pytestmark = pytest.mark.backend("libsql")

ISO_MS_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


class TestLibSQLFileContract(SqlContract):
    @pytest.fixture
    def make_storage(self, tmp_path: Path) -> Iterator[MakeStorage]:
        opened: list[workmem.MemoryStorage] = []

        def make(**options: object) -> workmem.MemoryStorage:
            opened.append(workmem.connect(f"file:{tmp_path / 'agent.db'}", pool_size=16, **options))
            return opened[-1]

        yield make
        for storage in opened:
            storage.close()


class TestLibSQLMemoryContract(SqlContract):
    """``:memory:``: one connection, shared by the threads of one storage (another storage is another database)."""

    @pytest.fixture
    def make_storage(self) -> MakeStorage:
        shared = workmem.connect(":memory:")
        return lambda **options: shared


def test_memory_databases_are_private_to_their_storage() -> None:
    with workmem.connect(":memory:") as one, workmem.connect(":memory:") as two:
        one.update_resource("r", working_memory="x")
        assert two.get_resource("r") is None
        assert type(one).capabilities.persistent


@pytest.mark.parametrize(
    ("url", "database", "token"),
    [
        (":memory:", ":memory:", None),
        ("file::memory:", ":memory:", None),
        ("file:agent.db", "agent.db", None),
        ("agent.db", "agent.db", None),
        ("file:my%20dir/agent.db", "my dir/agent.db", None),
        ("file:///abs/path.db", "/abs/path.db", None),
        ("file://localhost/abs/path.db", "/abs/path.db", None),
        ("/abs/path.db", "/abs/path.db", None),
        ("libsql://db-org.turso.io?authToken=tok", "libsql://db-org.turso.io", "tok"),
        ("libsql+https://db.example.com/", "https://db.example.com/", None),
        ("libsql+http://127.0.0.1:8080?authToken=t", "http://127.0.0.1:8080", "t"),
        ("libsql+wss://db.example.com", "https://db.example.com", None),
        ("libsql+ws://127.0.0.1:8080", "http://127.0.0.1:8080", None),
    ],
)
def test_url_forms(url: str, database: str, token: str | None) -> None:
    assert parse_libsql_url(url) == (database, token)


@pytest.mark.parametrize(
    "url", ["file://otherhost/x.db", "file:x.db?mode=ro", "libsql://h?foo=1", "libsql://", "file:"]
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ValidationError):
        parse_libsql_url(url)


def test_bad_options_are_refused(tmp_path: Path) -> None:
    for options in ({"pool": 2}, {"pool_size": 0}, {"busy_timeout": -1}):
        with pytest.raises(ValidationError):
            workmem.connect(f"file:{tmp_path / 'x.db'}", **options)


def test_remote_token_is_masked(caplog: pytest.LogCaptureFixture) -> None:
    url = "libsql+http://127.0.0.1:1?authToken=s3cr3t-token"
    with pytest.raises(BackendUnavailableError) as info:
        workmem.connect(url)
    shown = [str(info.value), repr(info.value), caplog.text]
    shown += [str(e) for e in (info.value.__cause__, info.value.__context__) if e is not None]
    assert "127.0.0.1:1" in str(info.value)
    assert not any("s3cr3t" in text for text in shown)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "is a directory, not a database file"),
        ("missing-dir/x.db", "folder .*missing-dir does not exist"),
        ("plain.txt/x.db", "plain.txt is not a folder"),
    ],
)
def test_unopenable_path_is_named_with_the_reason(tmp_path: Path, name: str, reason: str) -> None:
    (tmp_path / "plain.txt").write_text("not a folder")
    path = tmp_path / name
    with pytest.raises(ValidationError, match=reason) as info:
        workmem.connect(f"file:{path}")
    assert str(path) in str(info.value)
    assert ": 14" not in str(info.value)  # not SQLite's bare result code


_BESIDE = ("-journal", "-wal", "-shm")
"""What SQLite creates beside a database file (as root it would create /dev/null-journal)."""


def test_a_path_that_is_not_a_regular_file_is_refused_before_sqlite_touches_it(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    links = {"null-link": "/dev/null", "fifo-link": str(fifo), "link-link": str(tmp_path / "null-link")}
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    paths = ["/dev/null", "/dev/zero", str(fifo), *(str(tmp_path / name) for name in links)]
    kinds = ["a character device"] * 2 + ["a FIFO"] + ["a character device", "a FIFO", "a character device"]
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        sock.bind(str(tmp_path / "sock"))
        paths.append(str(tmp_path / "sock"))
        kinds.append("a socket")
        beside_dev = _beside_devices()
        listed = sorted(os.listdir(tmp_path))
        for path, kind in zip(paths, kinds, strict=True):
            for url, options in (
                (f"file:{path}", {}),
                (path, {"create": False}),
                (f"file:{path}?mode=ro", {}),
                (f"file:{path}", {"pool_size": 1, "synchronous": "normal"}),
            ):
                with pytest.raises(ValidationError, match=f"{re.escape(path)} is {kind}.*not a regular file") as info:
                    workmem.connect(url, **options)
                assert not isinstance(info.value, workmem.RETRYABLE_ERRORS)

            async def opened_async(url: str) -> None:
                async with await workmem.connect_async(url):
                    pass

            with pytest.raises(ValidationError, match="not a regular file"):
                asyncio.run(opened_async(f"file:{path}"))
        assert sorted(os.listdir(tmp_path)) == listed, "SQLite created files beside them"
    assert _beside_devices() == beside_dev, "SQLite created files in /dev"


def _beside_devices() -> set[str]:
    return {path + suffix for path in ("/dev/null", "/dev/zero") for suffix in _BESIDE if os.path.exists(path + suffix)}


def test_a_link_to_a_database_file_or_to_a_new_one_is_opened(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "agent.db"
    with workmem.connect(f"file:{real}") as storage:
        storage.set_working_memory("kept", scope="resource", resource_id="u1")
    link = tmp_path / "link.db"
    link.symlink_to(real)
    with workmem.connect(f"file:{link}") as storage:
        assert storage.get_working_memory(scope="resource", resource_id="u1") == "kept"
        storage.set_working_memory("through the link", scope="resource", resource_id="u1")
    with workmem.connect(f"file:{real}?mode=ro") as storage:
        assert storage.get_working_memory(scope="resource", resource_id="u1") == "through the link"
    (tmp_path / "folder-link").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(ValidationError, match="is a directory"):
        workmem.connect(f"file:{tmp_path / 'folder-link'}")
    with workmem.connect(f"file:{tmp_path / 'folder-link' / 'new.db'}") as storage:  # a new file in a folder
        storage.set_working_memory("new", scope="resource", resource_id="u1")
    assert (tmp_path / "real" / "new.db").is_file()


def test_rows_have_the_mastra_shape(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}") as storage:
        storage.save_resource(Resource("r", "# wm", {"a": 1}, T0, T0))
        storage.save_thread(Thread("t", "r", "", {"b": [1]}, T0, T0))
        storage.update_thread("t", metadata={"c": 2})
        storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t")
    conn = raw(path)
    assert conn.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
    columns = {
        t: [r[1:4] for r in conn.execute(f"PRAGMA table_info({t})").fetchall()]
        for t in ("mastra_threads", "mastra_resources")
    }
    assert columns == {
        "mastra_threads": [
            ("id", "TEXT", 1), ("resourceId", "TEXT", 1), ("title", "TEXT", 1),
            ("metadata", "TEXT", 0), ("createdAt", "TEXT", 1), ("updatedAt", "TEXT", 1),
        ],
        "mastra_resources": [
            ("id", "TEXT", 1), ("workingMemory", "TEXT", 0), ("metadata", "TEXT", 0),
            ("createdAt", "TEXT", 1), ("updatedAt", "TEXT", 1),
        ],
    }  # fmt: skip
    for table in ("mastra_threads", "mastra_resources"):
        kind, created, updated = conn.execute(
            f'SELECT typeof(metadata), "createdAt", "updatedAt" FROM {table}'
        ).fetchone()
        assert kind == "blob" and created == "2025-01-02T03:04:05.678Z" and ISO_MS_Z.fullmatch(updated)
    (metadata,) = conn.execute("SELECT json(metadata) FROM mastra_threads").fetchone()
    assert json.loads(metadata) == {"b": [1], "c": 2, "workingMemory": '{"x":1}'}


def test_listing_is_an_index_range_scan(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}") as storage:
        storage.save_thread(Thread("t", "r"))
        dialect = storage.dialect  # type: ignore[attr-defined]
    query = check_list_args("r", 1, 10, "updated_at", "asc")
    sql, params = dialect.render(dialect.list_threads(query))
    plan = " | ".join(row[3] for row in raw(path).execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall())
    assert "workmem_threads_resourceid_updatedat_idx" in plan and "TEMP B-TREE" not in plan, plan


def _hold_write_lock(path: Path, seconds: float, locked: threading.Event) -> None:
    conn = raw(path)
    conn.execute("BEGIN IMMEDIATE")
    locked.set()
    time.sleep(seconds)
    conn.execute("COMMIT")


def test_a_busy_database_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}", busy_timeout=10) as storage:
        locked = threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(path, 0.5, locked))
        holder.start()
        locked.wait()
        started = time.monotonic()
        storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
        assert time.monotonic() - started >= 0.3
        holder.join()
    with workmem.connect(f"file:{path}", busy_timeout=0.2) as storage:
        locked.clear()
        holder = threading.Thread(target=_hold_write_lock, args=(path, 1.5, locked))
        holder.start()
        locked.wait()
        with pytest.raises(BackendBusyError, match="locked"):
            storage.update_resource("r", working_memory="late")
        holder.join()
        assert storage.get_working_memory(scope="resource", resource_id="r") == '{"a":1}'


_WORKER = """
import sys, time, workmem
path, name, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
storage = workmem.connect("file:" + path)
time.sleep(max(0.0, start - time.time()))
for j in range(12):
    storage.merge_working_memory({f"{name}-{j}": j}, scope="resource", resource_id="r")
    storage.merge_working_memory({f"{name}-{j}": j}, scope="thread", thread_id="t")
storage.close()
"""


def test_two_processes_merging_into_one_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}") as storage:
        storage.save_thread(Thread("t", "r"))
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), name, str(start)], stderr=subprocess.PIPE, text=True
        )
        for name in ("p0", "p1")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
    want = {f"p{i}-{j}" for i in range(2) for j in range(12)}
    with workmem.connect(f"file:{path}") as storage:
        for scope, ids in (("resource", {"resource_id": "r"}), ("thread", {"thread_id": "t"})):
            assert set(json.loads(storage.get_working_memory(scope=scope, **ids) or "{}")) == want  # type: ignore[arg-type]


def test_repr_and_close(tmp_path: Path) -> None:
    storage = LibSQLStorage.from_url(f"file:{tmp_path / 'x.db'}")
    assert repr(storage) == f"LibSQLStorage('file:{tmp_path / 'x.db'}')"
    storage.close()
    storage.close()
    with pytest.raises(StorageClosedError, match="closed"):
        storage.get_resource("r")


FIXTURE = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "mastra_libsql.db"


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


_MASTRA_SAVE = (  # how @mastra/libsql saves a thread (the implicit delete of a REPLACE fires no delete trigger)
    'INSERT OR REPLACE INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
    "VALUES (?, ?, '', jsonb('{}'), '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')"
)


def _counts(conn: Any) -> tuple[dict[str, int], dict[str, int]]:
    """(workmem's kept counts without zeros, the counts of the rows) of every resource."""
    kept = dict(conn.execute('SELECT "resourceId", n FROM workmem_thread_counts WHERE n <> 0').fetchall())
    real = dict(conn.execute('SELECT "resourceId", count(*) FROM mastra_threads GROUP BY 1').fetchall())
    return kept, real


def test_thread_counts_follow_writes_by_plain_sql(tmp_path: Path) -> None:
    path = tmp_path / "counts.db"
    with workmem.connect(f"file:{path}") as storage:
        conn = raw(path)
        storage.save_thread(Thread("w1", "a"))
        storage.save_thread(Thread("w1", "a", "again"))  # an upsert that updates
        with pytest.raises(ThreadOwnershipError):
            storage.save_thread(Thread("w1", "b"))  # an upsert that changes nothing
        for tid, owner in (("m1", "a"), ("m2", "a"), ("m1", "a"), ("m2", "b")):  # insert, insert, replace, move
            conn.execute(_MASTRA_SAVE, (tid, owner))
        assert _counts(conn) == ({"a": 2, "b": 1}, {"a": 2, "b": 1})
        assert storage.list_threads("a").total == 2 and storage.list_threads("b", page=3, per_page=5).total == 1
        conn.execute('UPDATE mastra_threads SET "resourceId" = ? WHERE id = ?', ("c", "w1"))
        conn.execute("DELETE FROM mastra_threads WHERE id = ?", ("m1",))
        storage.delete_thread("m2")
        assert _counts(conn) == ({"c": 1}, {"c": 1})
        conn.executemany(_MASTRA_SAVE, [(f"bulk-{i}", f"r{i % 7}") for i in range(300)])
        conn.execute("DELETE FROM mastra_threads WHERE id LIKE 'bulk-1%'")
        kept, real = _counts(conn)
        assert kept == real and sum(real.values()) == 1 + 300 - 111
        assert storage.list_threads("r3", per_page=1).total == real["r3"]
        conn.execute("DELETE FROM mastra_threads")  # Mastra's clearTable
        assert _counts(conn) == ({}, {}) and storage.list_threads("r3").total == 0
        assert conn.execute("SELECT count(*) FROM workmem_thread_replaced").fetchone() == (0,)
        storage.save_thread(Thread("x", "r"))
        conn.execute("DROP TRIGGER workmem_threads_count_delete")  # counts can no longer be trusted
        conn.execute("DELETE FROM mastra_threads")
        conn.close()
    with workmem.connect(f"file:{path}") as storage:  # a missing trigger: recreated, and everything counted again
        assert storage.list_threads("r").total == 0
        storage.save_thread(Thread("y", "r"))
        storage.delete_thread("y")
        assert storage.list_threads("r").total == 0


def _dump(path: Path) -> tuple[list[Any], dict[str, list[Any]]]:
    """Every schema object and every table's rows (JSONB as its JSON text) of a libSQL file."""
    conn = raw(path)
    try:
        schema = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        rows = {}
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
            columns = [c[1] for c in conn.execute(f'PRAGMA table_info("{table}")').fetchall()]
            shown = ", ".join(f'typeof("{c}"), CASE WHEN typeof("{c}") = \'blob\' THEN json("{c}") ELSE "{c}" END'
                              for c in columns)  # fmt: skip
            rows[table] = sorted(conn.execute(f'SELECT {shown} FROM "{table}"').fetchall(), key=repr)
        return schema, rows
    finally:
        conn.close()


@pytest.mark.backend("mastra")
def test_the_mastra_fixture_is_what_the_real_packages_write(tmp_path: Path) -> None:
    # tests/support/fixtures/mastra_libsql.db is made by @mastra/libsql and @mastra/memory themselves (the pinned
    # packages of interop/) through tests/support/fixtures/make_mastra_libsql.py: made again, it is the same.
    from fixtures.make_mastra_libsql import make
    from mastra_node import require_mastra

    require_mastra()
    again = tmp_path / "again.db"
    make(again)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.db"], "the WAL is folded into the file"
    assert _dump(again) == _dump(FIXTURE)
    schema, rows = _dump(FIXTURE)
    assert len(schema) > 20, "Mastra's init creates every domain's tables, not just the memory ones"
    assert {table for table, found in rows.items() if found} == {"mastra_threads", "mastra_resources"}
    conn = raw(FIXTURE)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_reads_and_extends_a_database_written_by_mastra(tmp_path: Path) -> None:
    path = tmp_path / "mastra.db"
    shutil.copyfile(FIXTURE, path)
    conn = raw(path)  # @mastra/libsql writes JSONB; one row of each table as JSON text, as plain SQL writes it
    conn.execute("UPDATE mastra_resources SET metadata = json(metadata) WHERE id = 'user-2'")
    conn.execute("UPDATE mastra_threads SET metadata = json(metadata) WHERE id = 'thread-b'")
    conn.close()
    with workmem.connect(f"file:{path}") as storage:
        assert storage.get_resource("user-1") == Resource(
            "user-1", "# User Information\n- **Name**: Ada", {"plan": "pro", "tags": ["a", "b"]},
            _stamp("2025-01-02T03:04:05.678Z"), _stamp("2025-01-03T00:00:00.001Z"),
        )  # fmt: skip
        legacy = storage.get_resource("user-2")  # metadata stored as JSON text, not JSONB
        assert legacy is not None and legacy.metadata == {"legacy": True}
        page = storage.list_threads("user-1")
        assert [t.id for t in page.threads] == ["thread-b", "thread-c", "thread-a"] and page.total == 3
        assert [t.id for t in storage.list_threads("user-1", order_by="updated_at").threads] == [
            "thread-c", "thread-b", "thread-a",
        ]  # fmt: skip
        assert storage.get_thread("thread-b") == Thread(
            "thread-b", "user-1", "", {"source": "import"}, _stamp("2025-01-04T00:00:00.000Z"),
            _stamp("2025-01-04T00:00:00.000Z"),
        )  # fmt: skip
        assert storage.get_thread("thread-c").metadata is None  # type: ignore[union-attr]
        assert storage.get_working_memory(scope="thread", thread_id="thread-a") == '{"mood":"curious"}'
        merged = storage.merge_working_memory({"mood": None, "x": 1}, scope="thread", thread_id="thread-a")
        assert merged == {"x": 1}
        assert storage.merge_working_memory({"prefs": {"tz": "UTC"}}, scope="resource", resource_id="user-2") == {
            "name": "Grace", "prefs": {"lang": "en", "tz": "UTC"},
        }  # fmt: skip
        storage.update_thread("thread-b", metadata={"y": 2})
    conn = raw(path)
    rows = dict(conn.execute("SELECT id, typeof(metadata) FROM mastra_threads").fetchall())
    assert rows == {"thread-a": "blob", "thread-b": "blob", "thread-c": "null"}  # rewritten as JSONB, like Mastra
    (metadata,) = conn.execute("SELECT json(metadata) FROM mastra_threads WHERE id = 'thread-a'").fetchone()
    assert json.loads(metadata) == {"n": 1.5, "workingMemory": '{"x":1}'}
    tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    pristine = shutil.copyfile(FIXTURE, tmp_path / "pristine.db")  # opening a WAL file writes beside it
    fixture_tables = dict(raw(pristine).execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    mastra_tables = {name: sql for name, sql in tables.items() if not name.startswith("workmem_")}
    # Mastra's tables untouched; workmem adds two indexes, its counts, its history
    assert mastra_tables == fixture_tables
    assert set(tables) - set(mastra_tables) == {
        "workmem_thread_counts",
        "workmem_thread_replaced",
        "workmem_memory_history",
    }
    # the counts were filled from the threads Mastra had written, when the database was first opened
    assert dict(conn.execute('SELECT "resourceId", n FROM workmem_thread_counts').fetchall()) == {"user-1": 3}


class _Opener:
    """Stands in for the driver's connect(): counts what is open at once."""

    def __init__(self, fail: int = 0) -> None:
        self.opened = 0
        self.fail = fail

    def __call__(self) -> object:
        if self.fail:
            self.fail -= 1
            raise BackendUnavailableError("cannot open")
        self.opened += 1
        return object()


def test_pool_lends_the_warmest_connection_and_opens_only_what_is_needed() -> None:
    opener = _Opener()
    pool = _Pool(opener, size=3, wait=1.0)
    a, b = pool.take(), pool.take()
    pool.give(a, True)
    pool.give(b, True)
    assert pool.take() is b and opener.opened == 2  # the last given back comes out first
    pool.give(b, False)  # let go: its place is free again
    assert pool.take() is a
    c, d = pool.take(), pool.take()
    assert opener.opened == 4 and len({id(a), id(c), id(d)}) == 3


def test_pool_waits_for_a_connection_then_gives_up() -> None:
    pool = _Pool(_Opener(), size=1, wait=0.3)
    held = pool.take()
    started = time.monotonic()
    with pytest.raises(BackendBusyError, match="pool_size"):
        pool.take()
    assert time.monotonic() - started >= 0.25
    got: list[object] = []
    taker = threading.Thread(target=lambda: got.append(pool.take()))
    taker.start()
    time.sleep(0.05)
    pool.give(held, True)
    taker.join(timeout=5)
    assert got == [held]


def test_pool_never_has_more_than_size_open_under_contention() -> None:
    opener = _Opener()
    pool = _Pool(opener, size=3, wait=10.0)
    lent: set[int] = set()
    peak = [0]
    guard = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(300):
                conn = pool.take()
                with guard:
                    assert id(conn) not in lent  # one thread at a time per connection
                    lent.add(id(conn))
                    peak[0] = max(peak[0], len(lent))
                with guard:
                    lent.discard(id(conn))
                pool.give(conn, i % 50 != 0)  # now and then one is let go and reopened
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not errors and peak[0] <= 3
    assert len(pool.idle) <= 3


def test_pool_failed_open_frees_its_place_and_close_wakes_waiters() -> None:
    pool = _Pool(_Opener(fail=1), size=1, wait=5.0)
    with pytest.raises(BackendUnavailableError, match="cannot open"):
        pool.take()
    held = pool.take()  # the failed open did not keep the only place
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            pool.take()
        except BaseException as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)
    started = time.monotonic()
    pool.close()
    waiter.join(timeout=5)
    assert time.monotonic() - started < 2 and "closed" in str(outcome[0])
    pool.give(held, True)  # given back after close: let go, not kept
    assert pool.idle == []


_FOREIGN_ROWS = (  # shapes another program may have stored: the fast read path must map them like the general one
    ("plain", "'{\"a\": 1}'", "'2025-01-02T03:04:05.678Z'", {"a": 1}),
    ("null", "NULL", "'2025-01-02T03:04:05.678Z'", None),
    ("jsonb", "jsonb('{\"a\": [true]}')", "'2025-01-02T03:04:05.678Z'", {"a": [True]}),
    ("naive", "NULL", "'2025-01-02 03:04:05.678'", None),
    ("offset", "NULL", "'2025-01-02T04:04:05.678+01:00'", None),
    ("bigint", "'{\"n\": 100000000000000000000}'", "'2025-01-02T03:04:05.678Z'", {"n": 1e20}),
)


def test_reads_map_rows_other_programs_wrote(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with workmem.connect(f"file:{path}") as storage:
        conn = raw(path)
        for name, metadata, stamp, _ in _FOREIGN_ROWS:
            conn.execute(f"INSERT INTO mastra_threads VALUES ('{name}', 'r', 't', {metadata}, {stamp}, {stamp})")
            conn.execute(f"INSERT INTO mastra_resources VALUES ('{name}', 'wm', {metadata}, {stamp}, {stamp})")
        for name, _, _, want in _FOREIGN_ROWS:
            thread, resource = storage.get_thread(name), storage.get_resource(name)
            assert thread == Thread(name, "r", "t", want, T0, T0), name
            assert resource == Resource(name, "wm", want, T0, T0), name
            assert storage.get_thread(name, resource_id="other") is None
        conn.execute("INSERT INTO mastra_threads VALUES ('bad', 'r', 't', 'not json', '', '')")
        with pytest.raises(UnreadableRecordError, match="'bad' cannot be read"):  # that record alone
            storage.get_thread("bad")
        assert storage.get_thread("missing") is None and storage.get_resource("missing") is None


def test_bulk_inserts_keep_the_thread_counts_exact_with_some_ids_present(tmp_path: Path) -> None:
    path = tmp_path / "bulk.db"
    with workmem.connect(f"file:{path}") as storage:
        conn = raw(path)
        storage.insert_threads(Thread(f"t{i:04}", f"r{i % 5}") for i in range(0, 900, 3))  # 300 present first
        conn.execute(_MASTRA_SAVE, ("t0001", "mastra"))  # and one written by Mastra
        batch = [Thread(f"t{i:04}", f"other{i % 4}") for i in range(900)]  # every present id offered to others
        present = storage.insert_threads(batch)
        assert present == {f"t{i:04}" for i in range(0, 900, 3)} | {"t0001"}
        kept, real = _counts(conn)
        assert kept == real and sum(real.values()) == 900
        assert real["mastra"] == 1 and sum(real[f"r{k}"] for k in range(5)) == 300
        assert storage.list_threads("r0").total == real["r0"] and storage.list_threads("other1").total == real["other1"]
        conn.execute(_MASTRA_SAVE, ("t0003", "mastra"))  # a REPLACE after a DO NOTHING conflict: still exact
        storage.delete_thread("t0000")
        kept, real = _counts(conn)
        assert kept == real and real["mastra"] == 2
        conn.close()


def test_keyset_pages_are_one_indexed_statement_each(tmp_path: Path) -> None:
    path = tmp_path / "pages.db"
    with workmem.connect(f"file:{path}") as storage:
        storage.insert_threads(Thread(i, "r") for i in ("b", "a", "B", "\u00e9", "e\u0301"))
        assert [t.id for t in storage.iter_threads(page_size=2)] == ["B", "a", "b", "e\u0301", "\u00e9"]
        conn = raw(path)
        sql = storage.dialect.thread_page("a", 2).sql  # type: ignore[attr-defined]
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ("a", 2)).fetchall())
        assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan
        conn.close()
