"""libSQL ``query()`` has a time bound and never stops this process's other threads.

On ``apsw`` (the default engine) ``query()`` runs in this process, the GIL released, and a
``timeout`` stops the statement there; the ``libsql`` wheel holds the GIL and cannot stop a
statement, so on it a file's ``query()`` runs in a worker process of the storage's. These tests
run statements that never end on their own (an endless recursive CTE) on both engines and check,
through the public API, sync and async: ``timeout`` stops them with ``QueryTimeoutError`` in
about that time; other threads keep running meanwhile; the storage and its next ``query()`` work
afterwards; close() stops a running ``query()`` and leaves no worker process behind.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import apsw
import pytest

import workmem
from workmem import QueryTimeoutError, StorageClosedError, Thread, ValidationError
from workmem.adapters.libsql import LibSQLStorage

pytestmark = pytest.mark.backend("libsql")

ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"


COUNT_TO = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT max(i) FROM n"


@pytest.fixture(params=["apsw", "libsql"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LibSQLStorage]:
    with workmem.connect(f"file:{tmp_path / 'agent.db'}", engine=request.param) as opened:
        assert isinstance(opened, LibSQLStorage)
        opened.update_resource("u1", working_memory="kept")
        yield opened


@pytest.fixture(params=["file", "memory"])
def on_apsw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LibSQLStorage]:
    """A file or ``:memory:`` on the default engine, whose query() runs in this process."""
    with workmem.connect(f"file:{tmp_path / 'agent.db'}" if request.param == "file" else ":memory:") as opened:
        assert isinstance(opened, LibSQLStorage) and opened.engine == "apsw"
        opened.update_resource("u1", working_memory="kept")
        yield opened


PLACES = [("file", "apsw"), ("file", "libsql"), ("memory", "apsw")]
"""Where ``query()`` runs: a file on either engine, ``:memory:`` on apsw (the wheel's takes no timeout)."""


def _opened(tmp_path: Path, where: str, engine: str) -> LibSQLStorage:
    storage = workmem.connect(f"file:{tmp_path / 'agent.db'}" if where == "file" else ":memory:", engine=engine)
    assert isinstance(storage, LibSQLStorage) and storage.engine == engine
    return storage


def _endless_query(storage: LibSQLStorage, timeout: float | None) -> tuple[threading.Thread, list[BaseException]]:
    """A thread running an endless ``query()`` (started), and the list that gets what the call raised."""
    outcome: list[BaseException] = []

    def endless() -> None:
        try:
            storage.query(ENDLESS, timeout=timeout)
        except BaseException as exc:
            outcome.append(exc)

    running = threading.Thread(target=endless)
    running.start()
    return running, outcome


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


@pytest.mark.parametrize(("where", "engine"), PLACES)
def test_a_query_waiting_for_another_counts_the_wait_in_its_timeout(tmp_path: Path, where: str, engine: str) -> None:
    """On ``:memory:`` too, where it waited for the database's one connection up to ``busy_timeout`` (10 s)."""
    with _opened(tmp_path, where, engine) as storage:
        first, outcome = _endless_query(storage, 2.0)
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(QueryTimeoutError):
            storage.query("SELECT 1", timeout=0.3)
        assert time.monotonic() - started < 1.5
        first.join()
        assert [type(exc) for exc in outcome] == [QueryTimeoutError]
        assert storage.query("SELECT 1") == [(1,)]


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "1", True])
def test_a_timeout_is_a_positive_number_of_seconds(storage: LibSQLStorage, timeout: object) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        storage.query("SELECT 1", timeout=timeout)  # type: ignore[arg-type]


def test_memory_on_the_wheel_takes_no_timeout() -> None:
    """The wheel cannot stop a statement, and a ``:memory:`` database cannot move to a worker process."""
    with LibSQLStorage(":memory:", engine="libsql") as storage:
        assert storage.query("SELECT 1") == [(1,)]
        with pytest.raises(ValidationError, match=r"no timeout on :memory: with engine='libsql'"):
            storage.query("SELECT 1", timeout=1.0)


def test_query_runs_here_on_apsw_and_in_a_worker_process_on_the_wheel(tmp_path: Path) -> None:
    for engine, in_worker in (("apsw", False), ("libsql", True)):
        with workmem.connect(f"file:{tmp_path / engine}.db", engine=engine) as storage:
            assert isinstance(storage, LibSQLStorage)
            assert storage.query("SELECT 1", timeout=5) == [(1,)]
            assert (storage._query_worker is not None) is in_worker, engine


def test_apsw_stops_a_statement_in_this_process_and_its_connection_works_on(on_apsw: LibSQLStorage) -> None:
    for _ in range(2):  # the same connection again: nothing of the stopped statement stays on it
        started = time.monotonic()
        with pytest.raises(QueryTimeoutError, match="ran longer than its timeout"):
            on_apsw.query(COUNT_TO, [10**9], timeout=0.2)
        took = time.monotonic() - started
        assert 0.2 <= took < 1.0, took
        assert on_apsw.query('SELECT "workingMemory" FROM mastra_resources WHERE id = ?', ["u1"]) == [("kept",)]
    assert on_apsw._query_worker is None
    on_apsw.update_resource("u1", working_memory="after")  # a :memory: database's one connection works on too
    assert on_apsw.get_resource("u1").working_memory == "after"  # type: ignore[union-attr]


def test_the_deadline_goes_with_its_call(on_apsw: LibSQLStorage) -> None:
    """A later call without a timeout runs past the deadline of an earlier one: nothing of it stayed installed."""
    assert on_apsw.query("SELECT 1", timeout=0.2) == [(1,)]
    assert on_apsw.query(COUNT_TO, [1000], timeout=0.2) == [(1000,)]
    time.sleep(0.3)
    started = time.monotonic()
    assert on_apsw.query(COUNT_TO, [3_000_000]) == [(3_000_000,)]  # some 60 million SQLite steps
    assert on_apsw.query(COUNT_TO, [3_000_000], timeout=60) == [(3_000_000,)]
    assert time.monotonic() - started > 0.05  # long enough that a leftover handler would have been asked


def test_other_threads_reads_run_while_a_query_runs_here(tmp_path: Path) -> None:
    """apsw releases the GIL while SQLite runs (the deadline check takes it back only for a clock reading):
    another thread's reads finish in milliseconds, not after the query()."""
    with workmem.connect(f"file:{tmp_path / 'agent.db'}") as storage:
        assert isinstance(storage, LibSQLStorage)
        storage.save_thread(Thread("t1", "u1", "title"))
        storage.query("SELECT 1")  # the reader is open: what follows measures the statement alone
        running, outcome = _endless_query(storage, 3.0)
        time.sleep(0.2)  # the statement is running
        started = time.monotonic()
        for _ in range(20):
            assert storage.get_thread("t1") is not None
        took = time.monotonic() - started
        still_running = running.is_alive()
        in_this_process = storage._query_worker is None
        running.join()
    assert still_running and in_this_process
    assert took < 0.5, f"20 get_thread calls took {took:.2f} s while a query() ran in this process"
    assert len(outcome) == 1 and type(outcome[0]) is QueryTimeoutError, outcome


def test_parameters_the_driver_cannot_bind_are_refused_here(storage: LibSQLStorage) -> None:
    for bad in ([object()], [True], [[1, 2]], [{"a": 1}]):
        with pytest.raises(ValidationError, match="query\\(\\) parameters are None, int, float, str or bytes"):
            storage.query("SELECT ?", bad)
    assert storage.query("SELECT ?, ?, ?, ?, ?", [None, 1, 1.5, "s", b"\x00b"]) == [(None, 1, 1.5, "s", b"\x00b")]


def test_the_read_only_rules_hold_on_either_engine(storage: LibSQLStorage) -> None:
    for sql in ("DELETE FROM mastra_resources", "BEGIN", "PRAGMA journal_mode=DELETE", "ATTACH 'x.db' AS x"):
        with pytest.raises(ValidationError):
            storage.query(sql)
    assert storage.query("SELECT count(*) FROM mastra_resources WHERE id = ?", ["u1"]) == [(1,)]


@pytest.mark.parametrize(("where", "engine"), PLACES)
def test_close_stops_a_running_query_and_the_worker(tmp_path: Path, where: str, engine: str) -> None:
    storage = _opened(tmp_path, where, engine)
    storage.query("SELECT 1")
    worker = storage._query_worker
    assert (worker is not None) is (engine == "libsql")
    pid = None if worker is None or worker._process is None else worker._process.pid
    running, outcome = _endless_query(storage, None)  # outcome: what the running call gets when close() stops it
    time.sleep(0.3)
    started = time.monotonic()
    storage.close()
    closing = time.monotonic() - started
    running.join(timeout=10)
    assert not running.is_alive()
    assert closing < 2, closing
    assert outcome and type(outcome[0]) is StorageClosedError, outcome
    assert storage._reader is None
    if pid is not None:
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


def test_a_busy_database_is_waited_for_only_until_the_timeout(
    on_apsw: LibSQLStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """query() waits for a busy database (up to ``busy_timeout``, 10 s) in this process: its timeout bounds that too."""

    def busy(*args: object) -> NoReturn:
        raise apsw.BusyError("database is locked")

    monkeypatch.setattr(on_apsw._engine, "first", busy)
    started = time.monotonic()
    with pytest.raises(QueryTimeoutError):
        on_apsw.query("SELECT 1", timeout=0.3)
    assert time.monotonic() - started < 1.0
    monkeypatch.undo()
    assert on_apsw.query("SELECT 1", timeout=0.3) == [(1,)]


def test_a_memory_query_waits_for_the_connection_only_until_its_timeout() -> None:
    """``:memory:`` has one connection, which a long write of another thread may hold: the wait is bounded too
    (a file's ``query()`` has a connection of its own)."""
    with workmem.connect(":memory:") as storage:
        assert isinstance(storage, LibSQLStorage) and storage.engine == "apsw"
        held = storage._pool.take()  # as a long write would hold it
        try:
            started = time.monotonic()
            with pytest.raises(QueryTimeoutError, match="waiting for the database's connection"):
                storage.query("SELECT 1", timeout=0.3)
            assert time.monotonic() - started < 1.5
        finally:
            storage._pool.give(held, True)
        assert storage.query("SELECT 1", timeout=0.3) == [(1,)]
