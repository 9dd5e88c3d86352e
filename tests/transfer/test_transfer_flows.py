"""The copy flow written once: ``workmem.copy_async``, overlapped writes, failures, and a source left as it was.

``workmem.copy`` (sync storages, worker threads) and ``workmem.copy_async``
(async storages, tasks) run the same coroutines of :mod:`workmem.transfer.engine`;
these tests hold the async face to the sync one's outcomes, check that a write
failing part way is raised and that nothing is still writing once the call has
returned, and that a copy (or verify, or export) changes nothing in a source
that only Mastra's tables are in: no workmem table, index, trigger or function
appears there, and the libSQL file stays byte for byte what it was.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from backends import fresh_url
from servers import server_url
from test_transfer import T0, T1, expected_export, export_bytes, fill, marks, sample

import workmem
from workmem import BackendUnavailableError, Resource, Thread
from workmem.adapters.postgres import parse_postgres_url
from workmem.adapters.reference import AsyncReferenceStorage, ReferenceStorage
from workmem.transfer import engine, export_records, verify

# -- copy_async: the same flow as copy ------------------------------------------------------------

ASYNC_PAIRS = [
    pytest.param(src, dst, id=f"{src}-to-{dst}", marks=marks(*{src, dst}))
    for src, dst in [
        ("memory", "libsql"),
        ("libsql", "postgres"),
        ("postgres", "upstash"),
        ("upstash", "memory"),
        ("postgres", "libsql"),
    ]
]


@pytest.mark.parametrize(("src_backend", "dst_backend"), ASYNC_PAIRS)
def test_copy_async_copies_every_field_and_reruns_as_copy_does(src_backend: str, dst_backend: str) -> None:
    resources, threads = sample()
    with fresh_url(src_backend) as src_url, fresh_url(dst_backend) as dst_url:
        with workmem.connect(src_url) as src:
            fill(src, resources, threads)
        report = asyncio.run(workmem.copy_async(src_url, dst_url, verify=True, page_size=7))
        assert report.ok, report.issues
        assert report.counts["resource", "inserted"] == report.counts["resource", "verified"] == len(resources)
        assert report.counts["thread", "inserted"] == report.counts["thread", "verified"] == len(threads)
        assert export_bytes(dst_url) == expected_export(resources, threads)
        again = asyncio.run(workmem.copy_async(src_url, dst_url, page_size=3))  # re-run: all identical, skipped
        rerun_sync = workmem.copy(src_url, dst_url, page_size=3)
        assert again.counts == rerun_sync.counts and again.counts["thread", "skipped"] == len(threads)


def test_copy_async_applies_the_conflict_and_overwrite_rules_of_copy() -> None:
    async def run() -> None:
        src, dst = AsyncReferenceStorage(), AsyncReferenceStorage()
        await src.insert_resources([Resource("r-a", "new", None, T0, T1), Resource("r-b", "same", None, T0, T0)])
        await src.insert_threads([Thread("t-mine", "r-a", "new title", None, T0, T1), Thread("t-taken", "r-a")])
        await dst.insert_resources([Resource("r-a", "old", None, T0, T0), Resource("r-b", "same", None, T0, T0)])
        await dst.insert_threads([Thread("t-mine", "r-a", "old", None, T0, T0), Thread("t-taken", "r-other")])
        report = await workmem.copy_async(src, dst)  # open storages: used, left open
        assert (
            not report.ok and report.counts["resource", "conflict"] == 1 and report.counts["resource", "skipped"] == 1
        )
        assert report.counts["thread", "conflict"] == 2
        assert (await dst.get_resource("r-a")) == Resource("r-a", "old", None, T0, T0)  # left alone
        forced = await workmem.copy_async(src, dst, overwrite=True)
        assert forced.counts["resource", "replaced"] == 1 and forced.counts["thread", "replaced"] == 1
        assert [i.id for i in forced.issues] == ["t-taken"]  # an owner never moves, --overwrite or not
        taken = await dst.get_thread("t-taken")
        assert taken is not None and taken.resource_id == "r-other"
        assert (await dst.get_thread("t-mine")) == Thread("t-mine", "r-a", "new title", None, T0, T1)
        await src.close()
        await dst.close()

    asyncio.run(run())


def test_each_api_refuses_the_other_apis_storage() -> None:
    with ReferenceStorage() as sync_storage, pytest.raises(TypeError, match="copy_async"):
        workmem.copy(AsyncReferenceStorage(), sync_storage)  # type: ignore[arg-type]

    async def run() -> None:
        with pytest.raises(TypeError, match=r"workmem\.copy\b"):
            await workmem.copy_async(ReferenceStorage(), AsyncReferenceStorage())  # type: ignore[arg-type]

    asyncio.run(run())


# -- overlapped writes: several pages in flight, a failure raised, nothing left running --------------


class _Failing:
    """Counts the thread batches written; the ``fail_at``-th raises; each write takes a little while."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.calls = 0
        self.running = 0
        self.most_running = 0
        self.lock = threading.Lock()

    def enter(self) -> int:
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            return self.calls

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


class FailingSync(ReferenceStorage):
    def __init__(self, probe: _Failing) -> None:
        super().__init__()
        self.probe = probe

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        call = self.probe.enter()
        try:
            time.sleep(0.02)
            if call == self.probe.fail_at:
                raise BackendUnavailableError("the destination went away")
            return await super()._insert_threads(threads)
        finally:
            self.probe.leave()


class FailingAsync(AsyncReferenceStorage):
    def __init__(self, probe: _Failing) -> None:
        super().__init__()
        self.probe = probe

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        call = self.probe.enter()
        try:
            await asyncio.sleep(0.02)
            if call == self.probe.fail_at:
                raise BackendUnavailableError("the destination went away")
            return await super()._insert_threads(threads)
        finally:
            self.probe.leave()


def _threads(n: int) -> list[Thread]:
    return [Thread(f"t{i:05d}", f"r{i % 7}", f"thread {i}", {"i": i}, T0, T1) for i in range(n)]


def test_copy_writes_pages_at_once_and_a_failure_stops_it_with_nothing_left_running() -> None:
    fine = _Failing(fail_at=0)
    with ReferenceStorage() as src, FailingSync(fine) as dst:
        src.insert_threads(_threads(400))
        report = workmem.copy(src, dst, page_size=10)
        assert report.ok and report.counts["thread", "inserted"] == 400
        assert fine.most_running == engine.WRITES_IN_FLIGHT > 1  # pages really are written at once
        assert [t.id for t in dst.iter_threads()] == [t.id for t in _threads(400)]
    probe = _Failing(fail_at=6)
    with ReferenceStorage() as src, FailingSync(probe) as dst:
        src.insert_threads(_threads(400))
        with pytest.raises(BackendUnavailableError, match="went away"):
            workmem.copy(src, dst, page_size=10)
        assert probe.running == 0, "a write still runs after copy returned"
        calls = probe.calls
        time.sleep(0.1)
        assert probe.calls == calls < 40, "pages were still written after copy raised"


def test_copy_async_writes_pages_at_once_and_a_failure_cancels_the_rest() -> None:
    async def run(probe: _Failing) -> tuple[AsyncReferenceStorage, FailingAsync]:
        src, dst = AsyncReferenceStorage(), FailingAsync(probe)
        await src.insert_threads(_threads(400))
        try:
            await workmem.copy_async(src, dst, page_size=10)
        finally:
            assert probe.running == 0, "a write still runs after copy_async returned"
        return src, dst

    fine = _Failing(fail_at=0)
    asyncio.run(run(fine))
    assert fine.most_running == engine.WRITES_IN_FLIGHT > 1
    probe = _Failing(fail_at=6)
    with pytest.raises(BackendUnavailableError, match="went away"):
        asyncio.run(run(probe))
    assert probe.calls < 40


# -- a source without workmem's own tables is left exactly as it was ------------------------------


MASTRA_LIBSQL = (
    'CREATE TABLE mastra_threads (id TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL, title TEXT NOT NULL, '
    'metadata TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
    'CREATE TABLE mastra_resources (id TEXT NOT NULL PRIMARY KEY, "workingMemory" TEXT, metadata TEXT, '
    '"createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
)
MASTRA_POSTGRES = (
    'CREATE TABLE mastra_threads (id text NOT NULL PRIMARY KEY, "resourceId" text NOT NULL, title text NOT NULL, '
    'metadata jsonb, "createdAt" timestamp NOT NULL, "updatedAt" timestamp NOT NULL, '
    '"createdAtZ" timestamptz DEFAULT now(), "updatedAtZ" timestamptz DEFAULT now())',
    'CREATE TABLE mastra_resources (id text NOT NULL PRIMARY KEY, "workingMemory" text, metadata jsonb, '
    '"createdAt" timestamp NOT NULL, "updatedAt" timestamp NOT NULL, '
    '"createdAtZ" timestamptz DEFAULT now(), "updatedAtZ" timestamptz DEFAULT now())',
)
MASTRA_TIMES = (datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC), datetime(2024, 2, 3, 4, 5, 6, 789000, tzinfo=UTC))
_THREAD_ROWS = [("t-1", "r-ada", "First", '{"workingMemory": "# Ada", "n": 1}'), ("t-2", "r-ada", "", None)]
_THREAD_ROWS += [("t-3", "r-bo", "Bo's", '{"k": [1, 2.5]}')]


def workmem_objects(url: str) -> list[str]:
    """The names of every workmem table, index, trigger and function in the namespace of ``url``."""
    if url.startswith("file:"):
        from raw_sqlite import raw

        conn = raw(url.removeprefix("file:"))
        try:
            rows = conn.execute("SELECT type || ' ' || name FROM sqlite_master WHERE name LIKE 'workmem%'").fetchall()
        finally:
            conn.close()
        return sorted(row[0] for row in rows)
    conninfo, schema = parse_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT 'relation ' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %(s)s AND c.relname LIKE 'workmem%%' "
            "UNION ALL SELECT 'function ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %(s)s AND p.proname LIKE 'workmem%%' "
            "UNION ALL SELECT 'trigger ' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(s)s AND t.tgname LIKE 'workmem%%'",
            {"s": schema},
        ).fetchall()
    return sorted(row[0] for row in rows)


@contextmanager
def mastra_only(backend: str, tmp_path: Path) -> Iterator[str]:
    """A namespace holding Mastra's two tables (as its adapters create them) and a few rows, nothing of workmem's."""
    if backend == "libsql":
        from raw_sqlite import raw

        url = f"file:{tmp_path / 'mastra.db'}"
        conn = raw(tmp_path / "mastra.db")
        for ddl in MASTRA_LIBSQL:
            conn.execute(ddl)
        conn.execute(
            'INSERT INTO mastra_resources (id, "workingMemory", metadata, "createdAt", "updatedAt") '
            "VALUES ('r-ada', '# User', '{\"plan\": \"pro\"}', '2024-01-02T03:04:05.678Z', '2024-02-03T04:05:06.789Z')"
        )
        for row in _THREAD_ROWS:
            conn.execute(
                'INSERT INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
                "VALUES (?, ?, ?, ?, '2024-01-02T03:04:05.678Z', '2024-02-03T04:05:06.789Z')",
                row,
            )
        conn.close()
        yield url
        return
    with fresh_url("postgres") as url:
        schema = parse_postgres_url(url)[1]
        with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(f'SET search_path TO "{schema}"')
            for ddl in MASTRA_POSTGRES:
                conn.execute(ddl)
            conn.execute(
                'INSERT INTO mastra_resources (id, "workingMemory", metadata, "createdAt", "updatedAt", '
                '"createdAtZ", "updatedAtZ") VALUES (\'r-ada\', \'# User\', \'{"plan": "pro"}\', '
                "'2024-01-02 03:04:05.678', '2024-02-03 04:05:06.789', "
                "'2024-01-02 03:04:05.678+00', '2024-02-03 04:05:06.789+00')"
            )
            for row in _THREAD_ROWS:
                conn.execute(
                    'INSERT INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt", '
                    '"createdAtZ", "updatedAtZ") VALUES (%s, %s, %s, %s, \'2024-01-02 03:04:05.678\', '
                    "'2024-02-03 04:05:06.789', '2024-01-02 03:04:05.678+00', '2024-02-03 04:05:06.789+00')",
                    row,
                )
        yield url


def _digest(url: str) -> str | None:
    return hashlib.sha256(Path(url.removeprefix("file:")).read_bytes()).hexdigest() if url.startswith("file:") else None


@pytest.mark.parametrize("backend", [pytest.param(b, marks=marks(b)) for b in ("libsql", "postgres")])
def test_a_copy_leaves_a_mastra_only_source_as_it_was(backend: str, tmp_path: Path) -> None:
    with mastra_only(backend, tmp_path) as src_url, fresh_url("memory") as dst_url:
        before = _digest(src_url)
        assert workmem_objects(src_url) == []
        report = workmem.copy(src_url, dst_url, verify=True)
        assert report.ok, report.issues
        assert report.counts["thread", "inserted"] == report.counts["thread", "verified"] == 3
        assert verify(src_url, dst_url).ok
        assert export_records(src_url, io.BytesIO()).counts["thread", "exported"] == 3
        again = asyncio.run(workmem.copy_async(src_url, dst_url))
        assert again.counts["thread", "skipped"] == 3
        assert workmem_objects(src_url) == [], "the copy created workmem's tables or triggers in its source"
        assert _digest(src_url) == before, "the copy changed the source file"
        with workmem.connect(dst_url) as dst:
            assert dst.get_thread("t-1") == Thread(
                "t-1", "r-ada", "First", {"workingMemory": "# Ada", "n": 1}, *MASTRA_TIMES
            )


@pytest.mark.parametrize("backend", [pytest.param(b, marks=marks(b)) for b in ("libsql", "postgres")])
def test_create_false_reads_a_mastra_only_database_counting_its_threads(backend: str, tmp_path: Path) -> None:
    """Without workmem's kept counts, a storage opened with ``create=False`` counts a resource's threads itself."""
    with mastra_only(backend, tmp_path) as url:
        with workmem.connect(url, create=False) as storage:
            assert storage.list_threads("r-ada").total == 2
            assert storage.list_threads("r-ada", per_page=1, page=5).total == 2  # past the last page
            assert storage.list_threads("r-bo").total == 1 and storage.list_threads("r-none").total == 0
            assert storage.get_working_memory(scope="thread", thread_id="t-1") == "# Ada"
        assert workmem_objects(url) == []
        with workmem.connect(url) as storage:  # a normal connect creates the counts, filled from the rows
            assert storage.list_threads("r-ada").total == 2
        assert any("workmem_thread_counts" in name for name in workmem_objects(url))
