"""Working memory's history and ``delete_resource`` on the SQL adapters: a libSQL file, a libSQL server, PostgreSQL.

Each test runs on a fresh namespace of each (``sqld`` and PostgreSQL skip loudly without a server).
What is checked is what the history contract promises in the database itself: a version is written
in the write's own transaction (a write refused, or a version the database refuses to store, leaves
nothing), 64 concurrent merges number their versions 1..64 with the newest equal to the final text
(threads on the sync API, tasks on the async one), retention keeps the newest N, a restore is a new
version, ``delete_thread`` takes the thread's history with it, ``delete_resource`` removes a user's
rows and versions of both scopes, once, and nothing of anyone else. Oracle's statements are checked
as text in ``tests/oracle/test_oracle_history.py`` (no server here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from backends import fresh_url
from sqld import fresh_sqld_url

import workmem
from workmem import MemoryStorage, Thread
from workmem.errors import (
    OperationNotSupportedError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    VersionNotFoundError,
    WorkingMemoryFormatError,
    WorkingMemoryTooLargeError,
    WorkmemError,
)
from workmem.history import HISTORY_TABLE, ErasedResource
from workmem.kit import run_sync

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
BACKENDS = ("libsql", "sqld", "postgres")
Sql = Callable[[str], list[tuple[Any, ...]]]
"""Runs one statement on the test's database as another program would, and returns its rows."""


@pytest.fixture(
    params=[
        pytest.param("libsql", id="libsql"),
        pytest.param("sqld", id="sqld", marks=pytest.mark.backend("libsql")),
        pytest.param("postgres", id="postgres", marks=pytest.mark.backend("postgres")),
    ]
)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqld":
        with fresh_sqld_url() as fresh:
            yield fresh
    else:
        with fresh_url(request.param) as fresh:
            yield fresh


@contextlib.contextmanager
def raw_sql(url: str) -> Iterator[Sql | None]:
    """Plain SQL on the database of ``url`` (a libSQL file through apsw, PostgreSQL through psycopg); sqld: ``None``."""
    if url.startswith("file:"):
        from raw_sqlite import raw

        conn = raw(Path(url.removeprefix("file:")))
        try:
            yield lambda sql: list(conn.execute(sql))
        finally:
            conn.close()
    elif url.startswith("postgres"):
        import psycopg

        from workmem.adapters.postgres import parse_postgres_url

        conninfo, schema = parse_postgres_url(url)
        with psycopg.connect(conninfo, autocommit=True) as pg:
            pg.execute(f'SET search_path TO "{schema}"')

            def run(sql: str) -> list[tuple[Any, ...]]:
                cursor = pg.execute(sql)
                return cursor.fetchall() if cursor.description else []

            yield run
    else:
        yield None


def _thread(thread_id: str, owner: str) -> Thread:
    return Thread(thread_id, owner, "t", None, T0, T0)


def _versions(storage: MemoryStorage, **where: Any) -> list[tuple[int, str | None, str]]:
    page = storage.working_memory_history(limit=1000, **where)
    return [(v.version, v.content, v.kind) for v in page.versions]


# -- atomic with the write ----------------------------------------------------------------


def test_a_refused_write_records_nothing(url: str) -> None:
    with workmem.connect(url, history=True) as storage:
        storage.set_working_memory('{"a":1}', scope="resource", resource_id="u1", source={"agent": "a"})
        with pytest.raises(WorkingMemoryTooLargeError):
            storage.set_working_memory("x" * 50, scope="resource", resource_id="u1", max_chars=10)
        with pytest.raises(WorkingMemoryTooLargeError):
            storage.merge_working_memory({"b": "y" * 50}, scope="resource", resource_id="u1", max_chars=10)
        storage.create_thread(_thread("t1", "u1"))
        storage.set_working_memory("not json", scope="thread", resource_id="u1", thread_id="t1")
        with pytest.raises(WorkingMemoryFormatError):
            storage.merge_working_memory({"b": 2}, scope="thread", resource_id="u1", thread_id="t1")
        with pytest.raises(ThreadOwnershipError):
            storage.set_working_memory("theirs", scope="thread", resource_id="u2", thread_id="t1")
        with pytest.raises(ThreadOwnershipError):
            storage.merge_working_memory({"c": 3}, scope="thread", resource_id="u2", thread_id="t1")
        with pytest.raises(ThreadNotFoundError):
            storage.merge_working_memory({"c": 3}, scope="thread", resource_id="u1", thread_id="missing")
        resource = storage.working_memory_history(scope="resource", resource_id="u1")
        assert [(v.version, v.content, v.kind, v.source) for v in resource.versions] == [
            (1, '{"a":1}', "set", {"agent": "a"})
        ]
        assert _versions(storage, scope="thread", thread_id="t1") == [(1, "not json", "set")]
        assert storage.working_memory_history(scope="thread", thread_id="missing").versions == ()


@pytest.mark.parametrize("backend", ["libsql", pytest.param("postgres", marks=pytest.mark.backend("postgres"))])
def test_a_version_the_database_refuses_undoes_the_write(backend: str) -> None:
    """The version is in the write's transaction: when storing it fails, the write is rolled back too."""
    refuse = {
        "libsql": [
            f"CREATE TRIGGER refuse BEFORE INSERT ON {HISTORY_TABLE} WHEN NEW.version > 1 "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        ],
        "postgres": [
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN IF NEW.version > 1 THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$",
            f"CREATE TRIGGER refuse BEFORE INSERT ON {HISTORY_TABLE} FOR EACH ROW EXECUTE FUNCTION refuse()",
        ],
    }[backend]
    if backend == "postgres":
        pytest.importorskip("psycopg")
    with fresh_url(backend) as url, workmem.connect(url, history=True) as storage, raw_sql(url) as sql:
        assert sql is not None
        storage.merge_working_memory({"a": 1}, scope="resource", resource_id="u1")
        storage.create_thread(_thread("t1", "u1"))
        storage.merge_working_memory({"a": 1}, scope="thread", resource_id="u1", thread_id="t1")
        for statement in refuse:
            sql(statement)
        writes: list[Callable[[], object]] = [
            lambda: storage.merge_working_memory({"b": 2}, scope="resource", resource_id="u1"),
            lambda: storage.set_working_memory("{}", scope="resource", resource_id="u1"),
            lambda: storage.update_resource("u1", working_memory="{}", metadata={"m": 1}),
            lambda: storage.merge_working_memory({"b": 2}, scope="thread", resource_id="u1", thread_id="t1"),
            lambda: storage.set_working_memory("{}", scope="thread", thread_id="t1"),
            lambda: storage.update_thread("t1", title="new", metadata={"workingMemory": "{}"}),
        ]
        for write in writes:
            with pytest.raises(WorkmemError, match="refused by the test"):
                write()
        resource = storage.get_resource("u1")
        assert resource is not None and resource.working_memory == '{"a":1}' and resource.metadata is None
        thread = storage.get_thread("t1")
        assert thread is not None and thread.title == "t" and thread.metadata == {"workingMemory": '{"a":1}'}
        assert _versions(storage, scope="resource", resource_id="u1") == [(1, '{"a":1}', "merge")]
        assert _versions(storage, scope="thread", thread_id="t1") == [(1, '{"a":1}', "merge")]


# -- complete under concurrency --------------------------------------------------------------


def _check_complete(storage: MemoryStorage, final: str | None, **where: Any) -> None:
    versions = storage.working_memory_history(limit=1000, **where).versions
    assert [v.version for v in versions] == list(range(64, 0, -1))
    assert versions[0].content == final
    assert {v.kind for v in versions} == {"merge"}


def test_64_concurrent_merges_make_versions_1_to_64(url: str) -> None:
    with workmem.connect(url, history=True) as storage:
        storage.create_thread(_thread("t1", "u1"))
        barrier = threading.Barrier(8)

        def merge(index: int) -> None:
            if index < 8:
                barrier.wait()
            storage.merge_working_memory({f"k{index}": index}, scope="resource", resource_id="u1")
            storage.merge_working_memory({f"k{index}": index}, scope="thread", resource_id="u1", thread_id="t1")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(merge, range(64)))
        resource = storage.get_resource("u1")
        thread = storage.get_thread("t1")
        assert resource is not None and thread is not None
        _check_complete(storage, resource.working_memory, scope="resource", resource_id="u1")
        _check_complete(storage, thread.metadata and thread.metadata["workingMemory"], scope="thread", thread_id="t1")
        assert len(json.loads(resource.working_memory or "{}")) == 64


def test_64_concurrent_async_merges_make_versions_1_to_64(url: str) -> None:
    async def run() -> None:
        async with await workmem.connect_async(url, history=True) as storage:
            await storage.create_thread(_thread("t1", "u1"))
            await asyncio.gather(
                *(storage.merge_working_memory({f"k{i}": i}, scope="resource", resource_id="u1") for i in range(64)),
                *(
                    storage.merge_working_memory({f"k{i}": i}, scope="thread", resource_id="u1", thread_id="t1")
                    for i in range(64)
                ),
            )
            for where in ({"scope": "resource", "resource_id": "u1"}, {"scope": "thread", "thread_id": "t1"}):
                page = await storage.working_memory_history(limit=100, **where)  # type: ignore[arg-type]
                assert [v.version for v in page.versions] == list(range(64, 0, -1))
            resource = await storage.get_resource("u1")
            thread = await storage.get_thread("t1")
            assert resource is not None and thread is not None and thread.metadata is not None
            newest = await storage.working_memory_history(scope="resource", resource_id="u1", limit=1)
            assert newest.versions[0].content == resource.working_memory
            newest = await storage.working_memory_history(scope="thread", thread_id="t1", limit=1)
            assert newest.versions[0].content == thread.metadata["workingMemory"]
            assert newest.next_before == 64

    asyncio.run(run())


# -- retention, paging, restore ------------------------------------------------------------------


def test_retention_keeps_the_newest_and_restore_writes_a_new_version(url: str) -> None:
    with workmem.connect(url, history=3) as storage, raw_sql(url) as sql:
        for index in range(1, 6):
            storage.set_working_memory(f"v{index}", scope="resource", resource_id="u1")
        assert _versions(storage, scope="resource", resource_id="u1") == [
            (5, "v5", "set"),
            (4, "v4", "set"),
            (3, "v3", "set"),
        ]
        page = storage.working_memory_history(scope="resource", resource_id="u1", limit=2)
        assert [v.version for v in page.versions] == [5, 4] and page.next_before == 4
        older = storage.working_memory_history(scope="resource", resource_id="u1", limit=2, before=4)
        assert [v.version for v in older.versions] == [3]
        with pytest.raises(VersionNotFoundError):
            storage.restore_working_memory(2, scope="resource", resource_id="u1")
        assert storage.restore_working_memory(3, scope="resource", resource_id="u1", source={"by": "ops"}) == "v3"
        newest = storage.working_memory_history(scope="resource", resource_id="u1", limit=1).versions[0]
        assert (newest.version, newest.content, newest.kind, newest.source) == (
            6,
            "v3",
            "restore",
            {"by": "ops", "restoredFrom": 3},
        )
        resource = storage.get_resource("u1")
        assert resource is not None and resource.working_memory == "v3"
        storage.set_working_memory("", scope="resource", resource_id="u1")  # '' is a version (Oracle's NULL aside)
        storage.update_resource("u1", working_memory=None)  # cleared: a version whose content is None
        assert _versions(storage, scope="resource", resource_id="u1") == [
            (8, None, "set"),
            (7, "", "set"),
            (6, "v3", "restore"),
        ]
        if sql is not None:  # the rows themselves: no more than kept
            assert sql(f"SELECT count(*) FROM {HISTORY_TABLE}") == [(3,)]


def test_history_is_per_working_memory_and_changed_at_is_the_write_time(url: str) -> None:
    with workmem.connect(url, history=2) as storage:
        storage.create_thread(_thread("t1", "u1"))
        storage.create_thread(_thread("t2", "u1"))
        before = datetime.now(UTC).replace(microsecond=0)
        for name in ("a", "b", "c"):
            storage.set_working_memory(name, scope="thread", thread_id="t1")
        storage.update_thread("t2", metadata={"workingMemory": "only", "other": 1})
        storage.update_thread("t2", title="no memory given: no version")
        storage.update_resource("u1", metadata={"m": 1})  # no working memory given: no version
        assert _versions(storage, scope="thread", thread_id="t1") == [(3, "c", "set"), (2, "b", "set")]
        assert _versions(storage, scope="thread", thread_id="t2") == [(1, "only", "set")]
        assert _versions(storage, scope="resource", resource_id="u1") == []
        version = storage.working_memory_history(scope="thread", thread_id="t2").versions[0]
        assert version.resource_id == "u1" and version.thread_id == "t2"
        assert before <= version.changed_at <= datetime.now(UTC)
        with pytest.raises(ThreadOwnershipError):
            storage.working_memory_history(scope="thread", resource_id="u2", thread_id="t1")


# -- delete_thread and delete_resource --------------------------------------------------------------


def test_delete_thread_removes_its_history(url: str) -> None:
    with workmem.connect(url, history=True) as storage:
        for thread_id in ("t1", "t2"):
            storage.create_thread(_thread(thread_id, "u1"))
            storage.set_working_memory("one", scope="thread", thread_id=thread_id)
            storage.set_working_memory("two", scope="thread", thread_id=thread_id)
        with pytest.raises(ThreadOwnershipError):
            storage.delete_thread("t1", resource_id="u2")
        assert len(_versions(storage, scope="thread", thread_id="t1")) == 2
        assert storage.delete_thread("t1", resource_id="u1") is True
        assert storage.delete_thread("t1") is False
        storage.create_thread(_thread("t1", "u1"))  # the same id again: a history of its own, from 1
        assert _versions(storage, scope="thread", thread_id="t1") == []
        storage.set_working_memory("new", scope="thread", thread_id="t1")
        assert _versions(storage, scope="thread", thread_id="t1") == [(1, "new", "set")]
        assert _versions(storage, scope="thread", thread_id="t2") == [(2, "two", "set"), (1, "one", "set")]


def test_delete_resource_erases_one_user_once(url: str) -> None:
    with workmem.connect(url, history=True) as storage, raw_sql(url) as sql:
        for owner in ("u1", "u2"):
            storage.set_working_memory(json.dumps({"who": owner}), scope="resource", resource_id=owner)
            storage.merge_working_memory({"x": 1}, scope="resource", resource_id=owner)
            for thread_id in (f"{owner}-b", f"{owner}-a"):
                storage.create_thread(_thread(thread_id, owner))
                storage.set_working_memory(f"{thread_id} memory", scope="thread", thread_id=thread_id)
        erased = storage.delete_resource("u1")
        assert erased == ErasedResource("u1", True, ("u1-a", "u1-b"), 4)
        assert storage.get_resource("u1") is None
        assert storage.get_thread("u1-a") is None and storage.get_thread("u1-b") is None
        assert storage.list_threads(resource_id="u1").total == 0
        assert _versions(storage, scope="resource", resource_id="u1") == []
        assert storage.delete_resource("u1") == ErasedResource("u1", False, (), 0)  # idempotent
        assert storage.delete_resource("never") == ErasedResource("never", False, (), 0)
        other = storage.get_resource("u2")
        assert other is not None and json.loads(other.working_memory or "") == {"who": "u2", "x": 1}
        assert [t.id for t in storage.list_threads(resource_id="u2").threads] != []
        assert storage.list_threads(resource_id="u2").total == 2
        assert len(_versions(storage, scope="resource", resource_id="u2")) == 2
        assert _versions(storage, scope="thread", thread_id="u2-a") == [(1, "u2-a memory", "set")]
        # A thread of the same id created afterwards has no history left from the erased one.
        storage.create_thread(_thread("u1-a", "u1"))
        assert _versions(storage, scope="thread", thread_id="u1-a") == []
        if sql is not None:
            assert sql(f"SELECT count(*) FROM {HISTORY_TABLE} WHERE resource_id = 'u1'") == [(0,)]
            assert sql(f"SELECT count(*) FROM {HISTORY_TABLE}") == [(4,)]


def test_delete_resource_removes_versions_left_by_threads_deleted_without_history(url: str) -> None:
    """A thread deleted on a connection without history takes its versions too; one deleted by another program
    (Mastra deletes the row alone) leaves them, and they go with their user."""
    with workmem.connect(url, history=True) as storage:
        for thread_id in ("t1", "t2"):
            storage.create_thread(_thread(thread_id, "u1"))
            storage.set_working_memory("kept?", scope="thread", thread_id=thread_id)
    with workmem.connect(url) as plain:
        assert plain.delete_thread("t1") is True
    with raw_sql(url) as sql:
        if sql is None:  # sqld: no second client here to delete a row behind workmem's back
            return
        sql("DELETE FROM mastra_threads WHERE id = 't2'")
    with workmem.connect(url, history=True) as storage:
        assert storage.delete_resource("u1") == ErasedResource("u1", False, (), 1)  # t2's version; t1 had none left


def test_delete_resource_racing_writes_leaves_nothing_half(url: str) -> None:
    """Writers keep creating threads and merging into the user while it is erased: whatever survives is whole."""
    with workmem.connect(url, history=True) as storage, raw_sql(url) as sql:
        for index in range(4):
            storage.create_thread(_thread(f"t{index}", "u1"))
            storage.merge_working_memory({"n": index}, scope="thread", thread_id=f"t{index}")
        stop = threading.Event()

        def write(worker: int) -> None:
            number = 0
            while not stop.is_set():
                number += 1
                thread_id = f"w{worker}-{number}"
                with contextlib.suppress(ThreadNotFoundError):
                    storage.create_thread(_thread(thread_id, "u1"))
                    storage.merge_working_memory({"n": number}, scope="thread", thread_id=thread_id)
                    storage.merge_working_memory({"n": number}, scope="thread", thread_id=f"t{worker}")
                storage.merge_working_memory({"n": number}, scope="resource", resource_id="u1")

        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(write, worker) for worker in range(3)]
            erased = storage.delete_resource("u1")
            stop.set()
            for future in futures:
                future.result()
        assert set(erased.threads) >= {"t0", "t1", "t2", "t3"}  # there when the erase began: gone
        survivors = storage.list_threads(resource_id="u1").threads
        assert not {t.id for t in survivors} & set(erased.threads)
        for thread in survivors:  # a survivor was created after the erase began: whole, history and all
            versions = storage.working_memory_history(scope="thread", thread_id=thread.id, limit=1000).versions
            memory = (thread.metadata or {}).get("workingMemory")
            assert [v.version for v in versions] == list(range(len(versions), 0, -1))
            assert (versions[0].content if versions else None) == memory
        resource = storage.get_resource("u1")
        versions = storage.working_memory_history(scope="resource", resource_id="u1", limit=1000).versions
        assert [v.version for v in versions] == list(range(len(versions), 0, -1))
        assert (versions[0].content if versions else None) == (resource.working_memory if resource else None)
        if sql is not None:  # no version left of a thread that is gone
            orphans = sql(
                f"SELECT count(*) FROM {HISTORY_TABLE} h WHERE scope = 'thread' "
                "AND NOT EXISTS (SELECT 1 FROM mastra_threads t WHERE t.id = h.memory_id)"
            )
            assert orphans == [(0,)]


def test_async_api_erases_and_reads_history(url: str) -> None:
    async def run() -> None:
        async with await workmem.connect_async(url, history=True) as storage:
            await storage.create_thread(_thread("t1", "u1"))
            await storage.set_working_memory("a", scope="thread", thread_id="t1")
            await storage.merge_working_memory({"b": 1}, scope="resource", resource_id="u1")
            assert await storage.delete_thread("t1") is True
            await storage.create_thread(_thread("t1", "u1"))
            page = await storage.working_memory_history(scope="thread", thread_id="t1")
            assert page.versions == ()  # went with the thread on the async API too
            await storage.set_working_memory("c", scope="thread", thread_id="t1")
            assert await storage.delete_resource("u1") == ErasedResource("u1", True, ("t1",), 2)

    asyncio.run(run())


def test_history_is_refused_nowhere_and_left_off_by_default(url: str) -> None:
    with workmem.connect(url) as storage:
        assert storage.capabilities.history and storage.capabilities.erase
        storage.set_working_memory("untracked", scope="resource", resource_id="u1")
        assert _versions(storage, scope="resource", resource_id="u1") == []
        assert storage.delete_resource("u1") == ErasedResource("u1", True, (), 0)


def test_copy_carries_history_as_given_and_again_adds_none(url: str) -> None:
    """``_insert_versions``: versions stored as given (number, time, kind, source), present ones skipped."""
    from workmem.transfer import copy

    with fresh_url("memory") as source_url, workmem.connect(source_url, history=True) as source:
        source.set_working_memory("", scope="resource", resource_id="u1", source={"agent": "a", "n": [1]})
        source.merge_working_memory({"a": 1}, scope="resource", resource_id="u1")
        source.create_thread(_thread("t1", "u1"))
        for index in range(150):  # more than one statement's batch
            source.set_working_memory(f"v{index}", scope="thread", thread_id="t1")
        with workmem.connect(url, history=True) as target:
            assert copy(source, target).ok
            for where in ({"scope": "resource", "resource_id": "u1"}, {"scope": "thread", "thread_id": "t1"}):
                wanted = source.working_memory_history(limit=1000, **where).versions  # type: ignore[arg-type]
                got = target.working_memory_history(limit=1000, **where).versions  # type: ignore[arg-type]
                assert got == wanted and len(got) in (2, 150)
            again = source.working_memory_history(scope="thread", thread_id="t1").versions
            assert run_sync(target._insert_versions(again)) == 0
            target.set_working_memory("next", scope="thread", thread_id="t1")  # numbering follows the imported
            newest = target.working_memory_history(scope="thread", thread_id="t1", limit=1).versions[0]
            assert (newest.version, newest.content, newest.kind) == (151, "next", "set")


def test_imported_versions_go_in_statements_of_bounded_count_and_size() -> None:
    from workmem.adapters.sql.hooks import VERSION_BATCH, VERSION_BATCH_CHARS, _version_batches
    from workmem.history import MemoryVersion

    def versions(count: int, size: int) -> list[MemoryVersion]:
        return [MemoryVersion("u1", None, n, "x" * size, T0, "import") for n in range(1, count + 1)]

    assert [len(b) for b in _version_batches(versions(250, 1))] == [VERSION_BATCH, VERSION_BATCH, 50]
    big = VERSION_BATCH_CHARS // 3
    assert [len(b) for b in _version_batches(versions(7, big))] == [3, 3, 1]
    assert [len(b) for b in _version_batches(versions(2, VERSION_BATCH_CHARS + 1))] == [1, 1]  # one alone always goes
    assert list(_version_batches([])) == []


@pytest.mark.backend("postgres")
def test_delete_resource_reports_a_resource_created_while_it_waited() -> None:
    """The erase locks a missing resource by creating it empty; a resource another writer created meanwhile
    (committed while the erase waited on it) is erased and reported as there, not taken for that placeholder."""
    psycopg = pytest.importorskip("psycopg")
    from workmem.adapters.postgres import parse_postgres_url

    with fresh_url("postgres") as url, workmem.connect(url, history=True) as storage:
        conninfo, schema = parse_postgres_url(url)
        with psycopg.connect(conninfo) as other:  # a transaction of its own, left open
            other.execute(
                f'INSERT INTO "{schema}".mastra_resources (id, "workingMemory", "createdAt", "updatedAt") '
                "VALUES ('u1', 'theirs', now(), now())"
            )
            with ThreadPoolExecutor(1) as pool:
                erasing = pool.submit(storage.delete_resource, "u1")
                deadline = time.monotonic() + 10
                while not _waiting_for_a_lock(conninfo, schema) and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert not erasing.done()
                other.commit()
                erased = erasing.result(timeout=10)
        assert erased == ErasedResource("u1", True, (), 0)
        assert storage.get_resource("u1") is None


def _waiting_for_a_lock(conninfo: str, schema: str) -> bool:
    """Whether a statement on ``schema`` waits for a lock (the erase, on the other transaction's row)."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, %s) > 0"
        row = conn.execute(sql, (schema,)).fetchone()
        return bool(row and row[0])


# -- a database without the history table ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["libsql", pytest.param("postgres", marks=pytest.mark.backend("postgres"))])
def test_a_database_without_the_history_table_opens_read_as_it_is_and_refuses_to_record(backend: str) -> None:
    """What only the TypeScript adapters wrote has no history table: create=False reads it (a copy's source) with no
    history, erases without it, and refuses history= at connect, before anything is written. (Before, reading its
    history failed with 'no such table', so copying from it failed.)"""
    with fresh_url(backend) as url:
        with workmem.connect(url) as storage:
            storage.set_working_memory("# kept", scope="resource", resource_id="u1")
            storage.create_thread(_thread("t1", "u1"))
        with raw_sql(url) as sql:
            assert sql is not None
            sql(f"DROP TABLE {HISTORY_TABLE}")
        with pytest.raises(OperationNotSupportedError, match=HISTORY_TABLE):
            workmem.connect(url, create=False, history=True)
        with workmem.connect(url, create=False) as storage:
            assert storage.working_memory_history(scope="resource", resource_id="u1").versions == ()
            assert storage.working_memory_history(scope="thread", thread_id="t1").versions == ()
            copied = workmem.connect("memory://", history=True)
            report = workmem.copy(storage, copied)
            assert report.ok and copied.get_working_memory(scope="resource", resource_id="u1") == "# kept"
            assert storage.delete_resource("u1") == ErasedResource("u1", True, ("t1",), 0)
