"""libSQL ``query()`` on a file has a time bound and never stops this process's other threads.

The ``libsql`` wheel holds the GIL while SQLite runs a statement and cannot interrupt one, so
a file's ``query()`` runs in a worker process of the storage's. These tests run statements
that never end on their own (an endless recursive CTE) and check, through the public API,
sync and async: ``timeout`` stops them with ``QueryTimeoutError`` in about that time; other
threads keep running meanwhile; the storage and its next ``query()`` work afterwards; close()
leaves no worker process behind.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import workmem
from workmem import QueryTimeoutError, StorageClosedError, ValidationError
from workmem.adapters.libsql import LibSQLStorage

pytestmark = pytest.mark.backend("libsql")

ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[LibSQLStorage]:
    with workmem.connect(f"file:{tmp_path / 'agent.db'}") as opened:
        assert isinstance(opened, LibSQLStorage)
        opened.update_resource("u1", working_memory="kept")
        yield opened


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes only once reaped; /proc says which
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_an_endless_statement_stops_at_its_timeout_and_the_storage_works_on(storage: LibSQLStorage) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTimeoutError, match="ran longer than its timeout"):
        storage.query(ENDLESS, timeout=0.5)
    took = time.monotonic() - started
    assert 0.5 <= took < 5, took
    assert not isinstance(QueryTimeoutError("x"), workmem.RETRYABLE_ERRORS)
    assert storage.query('SELECT "workingMemory" FROM mastra_resources WHERE id = ?', ["u1"]) == [("kept",)]
    storage.update_resource("u1", working_memory="after")
    assert storage.query('SELECT "workingMemory" FROM mastra_resources WHERE id = ?', ["u1"], timeout=10) == [
        ("after",)
    ]


def test_other_threads_keep_running_while_a_query_runs(storage: LibSQLStorage) -> None:
    """The wheel would hold the GIL for the whole statement: this thread's counter would stand still."""
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.005)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        storage.query("SELECT 1")  # the worker is started: what follows measures the statement alone
        before = ticks
        with pytest.raises(QueryTimeoutError):
            storage.query(ENDLESS, timeout=1.0)
        during = ticks - before
    finally:
        stop.set()
        counter.join()
    assert during >= 40, f"another thread ran only {during} times in the second a query() ran"


def test_a_query_waiting_for_another_counts_the_wait_in_its_timeout(storage: LibSQLStorage) -> None:
    def endless() -> None:
        with pytest.raises(QueryTimeoutError):
            storage.query(ENDLESS, timeout=2.0)

    first = threading.Thread(target=endless)
    first.start()
    time.sleep(0.3)
    started = time.monotonic()
    with pytest.raises(QueryTimeoutError):
        storage.query("SELECT 1", timeout=0.3)
    assert time.monotonic() - started < 1.5
    first.join()
    assert storage.query("SELECT 1") == [(1,)]


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "1", True])
def test_a_timeout_is_a_positive_number_of_seconds(storage: LibSQLStorage, timeout: object) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        storage.query("SELECT 1", timeout=timeout)  # type: ignore[arg-type]


def test_memory_databases_take_no_timeout() -> None:
    with workmem.connect(":memory:") as storage:
        assert isinstance(storage, LibSQLStorage)
        assert storage.query("SELECT 1") == [(1,)]
        with pytest.raises(ValidationError, match=r"no timeout on :memory:"):
            storage.query("SELECT 1", timeout=1.0)


def test_parameters_the_driver_cannot_bind_are_refused_here(storage: LibSQLStorage) -> None:
    for bad in ([object()], [True], [[1, 2]], [{"a": 1}]):
        with pytest.raises(ValidationError, match="query\\(\\) parameters are None, int, float, str or bytes"):
            storage.query("SELECT ?", bad)
    assert storage.query("SELECT ?, ?, ?, ?, ?", [None, 1, 1.5, "s", b"\x00b"]) == [(None, 1, 1.5, "s", b"\x00b")]


def test_the_read_only_rules_hold_in_the_worker(storage: LibSQLStorage) -> None:
    for sql in ("DELETE FROM mastra_resources", "BEGIN", "PRAGMA journal_mode=DELETE", "ATTACH 'x.db' AS x"):
        with pytest.raises(ValidationError):
            storage.query(sql)
    assert storage.query("SELECT count(*) FROM mastra_resources WHERE id = ?", ["u1"]) == [(1,)]


def test_close_stops_the_worker_and_a_running_query(tmp_path: Path) -> None:
    storage = workmem.connect(f"file:{tmp_path / 'agent.db'}")
    assert isinstance(storage, LibSQLStorage)
    storage.query("SELECT 1")
    worker = storage._query_worker
    assert worker is not None and worker._process is not None
    pid = worker._process.pid
    outcome: list[BaseException] = []

    def endless() -> None:
        try:
            storage.query(ENDLESS)
        except BaseException as exc:  # what the running call gets when close() stops it
            outcome.append(exc)

    running = threading.Thread(target=endless)
    running.start()
    time.sleep(0.3)
    storage.close()
    running.join(timeout=10)
    assert not running.is_alive()
    assert outcome and type(outcome[0]) is StorageClosedError, outcome
    assert not _alive(pid)
    with pytest.raises(StorageClosedError):
        storage.query("SELECT 1")


def test_async_query_takes_the_timeout_and_leaves_the_loop_free(tmp_path: Path) -> None:
    async def main() -> tuple[int, list[tuple[object, ...]]]:
        storage = await workmem.connect_async(f"file:{tmp_path / 'agent.db'}")
        try:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.005)

            ticker = asyncio.create_task(tick())
            with pytest.raises(QueryTimeoutError):
                await storage.query(ENDLESS, timeout=1.0)  # type: ignore[attr-defined]
            ticker.cancel()
            rows = await storage.query("SELECT 1", timeout=5)  # type: ignore[attr-defined]
            return ticks, rows
        finally:
            await storage.close()

    ticks, rows = asyncio.run(main())
    assert rows == [(1,)]
    assert ticks >= 40, ticks
