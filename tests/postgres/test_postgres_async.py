"""The native async PostgreSQL adapter (``AsyncPostgresStorage``) against a REAL server.

Every test works in a fresh random schema (``fresh_schema_url``), dropped
afterwards. Outages are made with the TCP proxy of ``tests/support/tcp_proxy.py``, as
``tests/reliability/test_outages.py`` does for the sync adapter.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from servers import server_url
from test_outages import PASSWORD, postgres_url_behind_proxy
from test_postgres import _LockingDialect, fresh_schema_url

import workmem
from workmem import Resource, Thread
from workmem.adapters.postgres import AsyncPostgresStorage, PostgresStorage
from workmem.adapters.sql import Statement
from workmem.errors import (
    BackendUnavailableError,
    MissingTablesError,
    StorageClosedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
    WorkmemError,
)

pytestmark = pytest.mark.backend("postgres")


async def _open(url: str, **options: Any) -> AsyncPostgresStorage:
    storage = await workmem.connect_async(url, **options)
    assert isinstance(storage, AsyncPostgresStorage)
    return storage


def test_connect_async_opens_the_native_adapter_and_masks_the_password() -> None:
    assert PostgresStorage.async_adapter == "workmem.adapters.postgres:AsyncPostgresStorage"
    with fresh_schema_url() as url:
        parts = urlsplit(url)
        secret_url = url.replace(f"//{parts.netloc}", f"//{parts.username or 'postgres'}:{PASSWORD}@{parts.netloc}")

        async def main() -> str:
            async with await _open(secret_url, min_size=2, max_size=3, timeout=5, connect_timeout=3) as storage:
                assert storage._pool.get_stats()["pool_size"] == 2  # min_size connections opened
                return repr(storage)

        shown = asyncio.run(main())
    assert PASSWORD not in shown and "***" in shown and shown.startswith("AsyncPostgresStorage(")


@pytest.mark.parametrize(
    "options",
    [{"bogus": 1}, {"min_size": -1}, {"max_size": 0}, {"timeout": 0}, {"connect_timeout": "x"}, {"create": "no"}],
)
def test_options_are_checked_as_the_sync_adapters_are(options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        asyncio.run(workmem.connect_async("postgresql://127.0.0.1:1/db", **options))


def test_every_operation() -> None:
    async def main(url: str) -> None:
        async with await _open(url) as storage:
            assert await storage.get_resource("r") is None
            saved = await storage.save_resource(Resource("r", working_memory="# notes", metadata={"a": 1}))
            assert await storage.get_resource("r") == saved
            updated = await storage.update_resource("r", metadata={"b": 2})
            assert updated.metadata == {"a": 1, "b": 2} and updated.working_memory == "# notes"
            created = await storage.create_thread(Thread("t", "r", "first"))
            with pytest.raises(ThreadExistsError):
                await storage.create_thread(Thread("t", "r", "again"))
            assert await storage.get_thread("t") == created
            assert await storage.get_thread("t", resource_id="other") is None
            assert (await storage.update_thread("t", title="renamed")).title == "renamed"
            with pytest.raises(ThreadNotFoundError):
                await storage.update_thread("nope", title="x")
            for n in range(3):
                await storage.save_thread(Thread(f"t{n}", "r", f"n{n}"))
            page = await storage.list_threads("r", per_page=2, order_by="created_at", direction="asc")
            assert page.total == 4 and len(page.threads) == 2 and page.has_more
            past = await storage.list_threads("r", page=5, per_page=2)
            assert past.total == 4 and past.threads == ()
            await storage.set_working_memory("hello", scope="thread", thread_id="t", resource_id="r")
            assert await storage.get_working_memory(scope="thread", thread_id="t") == "hello"
            merged = await storage.merge_working_memory({"x": {"y": 1}}, scope="thread", thread_id="t2")
            assert merged == {"x": {"y": 1}}
            with pytest.raises(ThreadOwnershipError):
                await storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t2", resource_id="other")
            await storage.set_working_memory("{}", scope="resource", resource_id="r")
            assert await storage.merge_working_memory({"k": 1}, scope="resource", resource_id="r") == {"k": 1}
            assert json.loads(await storage.get_working_memory(scope="resource", resource_id="r") or "") == {"k": 1}
            assert await storage.delete_thread("t") is True
            assert await storage.delete_thread("t") is False
        with pytest.raises(StorageClosedError):
            await storage.get_thread("t")

    with fresh_schema_url() as url:
        asyncio.run(main(url))
        with workmem.connect(url) as sync:  # what the async adapter wrote is what the sync one reads
            assert sync.get_thread("t0") is not None and sync.get_resource("r") is not None


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_twenty_concurrent_merges_keep_twenty_keys(scope: str) -> None:
    async def main(url: str) -> dict[str, Any]:
        async with await _open(url, max_size=8) as storage:
            await storage.save_thread(Thread("t", "r", "shared"))
            target: dict[str, Any] = {
                "scope": scope,
                "resource_id": "r",
                "thread_id": "t" if scope == "thread" else None,
            }
            await asyncio.gather(*(storage.merge_working_memory({f"k{n}": n}, **target) for n in range(20)))
            text = await storage.get_working_memory(**target)
            return dict(json.loads(text or "{}"))

    with fresh_schema_url() as url:
        assert asyncio.run(main(url)) == {f"k{n}": n for n in range(20)}


def test_racing_save_thread_of_two_owners_one_wins_and_the_owner_never_changes() -> None:
    async def main(url: str) -> None:
        async with await _open(url, max_size=4) as storage:
            for round_ in range(10):
                tid = f"t{round_}"
                results = await asyncio.gather(
                    storage.save_thread(Thread(tid, "owner-a", "a")),
                    storage.save_thread(Thread(tid, "owner-b", "b")),
                    return_exceptions=True,
                )
                won = [r for r in results if isinstance(r, Thread)]
                lost = [r for r in results if not isinstance(r, Thread)]
                assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], ThreadOwnershipError), results
                stored = await storage.get_thread(tid)
                assert stored is not None and stored.resource_id == won[0].resource_id
                other = "owner-b" if stored.resource_id == "owner-a" else "owner-a"
                with pytest.raises(ThreadOwnershipError):
                    await storage.save_thread(Thread(tid, other, "taken over"))
                assert (await storage.get_thread(tid)) == stored

    with fresh_schema_url() as url:
        asyncio.run(main(url))


def test_create_false_on_missing_tables_raises_and_creates_nothing() -> None:
    with fresh_schema_url() as url:
        with pytest.raises(MissingTablesError):
            asyncio.run(workmem.connect_async(url, create=False))
        schema = url.rpartition("schema=")[2]
        with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() == (0,)
        workmem.connect(url).close()  # now the tables exist: create=False opens

        async def reads() -> None:
            async with await _open(url, create=False) as storage:
                assert await storage.get_thread("t") is None

        asyncio.run(reads())


# -- cancellation ---------------------------------------------------------------------------


def _sessions(application_name: str) -> dict[str, int]:
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT coalesce(state, '?'), count(*) FROM pg_stat_activity WHERE application_name = %s GROUP BY 1",
            (application_name,),
        ).fetchall()
    return {state: count for state, count in rows}


async def _settled(pool: Any, within: float = 5.0) -> dict[str, int]:
    """The pool's stats once no connect is in flight (``pool_size`` = ``pool_available``), or after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        stats: dict[str, int] = pool.get_stats()
        if stats["pool_size"] == stats["pool_available"] or time.monotonic() > deadline:
            return stats
        await asyncio.sleep(0.01)


async def _cancel_storm(call: Callable[[int], Awaitable[Any]], calls: int, longest: float = 0.004) -> tuple[int, int]:
    """Run ``call(n)`` for each n, each cancelled after a random delay up to ``longest``; (finished, cancelled)."""
    finished = cancelled = 0
    rng = random.Random(7)
    for n in range(calls):
        task = asyncio.ensure_future(call(n))
        await asyncio.sleep(rng.uniform(0, longest))
        task.cancel()
        try:
            await task
            finished += 1
        except asyncio.CancelledError:
            cancelled += 1
    return finished, cancelled


@pytest.mark.parametrize("path", ["one statement", "row-locked transaction"])
def test_cancelled_merges_write_whole_or_nothing_and_leave_the_pool_clean(path: str) -> None:
    app = f"wm_cancel_{secrets.token_hex(4)}"

    async def main(url: str) -> tuple[int, int, dict[str, Any]]:
        async with await _open(url, min_size=2, max_size=4, timeout=5) as storage:
            if path != "one statement":
                storage.dialect = _LockingDialect(storage.dialect.schema or "public")
            await storage.save_thread(Thread("t", "r", "shared"))

            async def merge(n: int) -> None:  # two keys in one merge: both there, or neither
                await storage.merge_working_memory({f"a{n}": n, f"b{n}": n}, scope="thread", thread_id="t")

            finished, cancelled = await _cancel_storm(merge, 150)
            stats = await _settled(storage._pool)  # connects left in flight by cancelled callers join when they end
            assert stats["pool_size"] == stats["pool_available"] <= 4, stats  # every connection came back, none more
            sessions = _sessions(app)
            assert not any(state.startswith("idle in transaction") for state in sessions), sessions
            assert sessions.get("active", 0) == 0, sessions
            # the pool still works, for many at once
            await asyncio.gather(*(merge(1000 + n) for n in range(8)))
            text = await storage.get_working_memory(scope="thread", thread_id="t")
            return finished, cancelled, dict(json.loads(text or "{}"))

    with fresh_schema_url(application_name=app) as url:
        finished, cancelled, memory = asyncio.run(main(url))
    assert finished > 0 and cancelled > 0, (finished, cancelled)  # the delays did cancel some mid-flight
    applied = {n for n in range(150) if f"a{n}" in memory}
    assert all((f"a{n}" in memory) == (f"b{n}" in memory) for n in range(150)), memory
    assert len(applied) >= finished  # every merge that returned is there (cancelled ones may be too)
    assert all(f"a{1000 + n}" in memory for n in range(8))


def test_cancelled_updates_with_wait_for_leave_no_transaction_open() -> None:
    app = f"wm_cancel_{secrets.token_hex(4)}"

    async def main(url: str) -> None:
        async with await _open(url, min_size=1, max_size=3, timeout=5) as storage:
            storage.dialect = _LockingDialect(storage.dialect.schema or "public")
            await storage.save_resource(Resource("r", metadata={"n": -1}))
            timeouts = 0
            for n in range(100):
                try:
                    await asyncio.wait_for(storage.update_resource("r", metadata={"n": n, "m": n}), 0.0005 * (n % 7))
                except TimeoutError:
                    timeouts += 1
            assert timeouts > 0
            await asyncio.sleep(0.2)
            sessions = _sessions(app)
            assert not any(state.startswith("idle in transaction") for state in sessions), sessions
            resource = await storage.get_resource("r")
            assert resource is not None and resource.metadata is not None
            assert resource.metadata["n"] == resource.metadata["m"]  # one update's two keys, whole
            assert (await storage.update_resource("r", metadata={"n": 500, "m": 500})).metadata == {"n": 500, "m": 500}

    with fresh_schema_url(application_name=app) as url:
        asyncio.run(main(url))


# -- outages --------------------------------------------------------------------------------


async def _fails_fast(call: Awaitable[Any], within: float) -> BackendUnavailableError:
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as caught:
        await call
    took = time.monotonic() - started
    assert took < within, f"the call took {took:.1f} s to fail"
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value.__cause__)
    return caught.value


def test_down_fails_within_connect_timeout_with_the_reason_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def main(url: str, proxy: Any) -> None:
        async with await _open(url, connect_timeout=3, max_size=4) as storage:
            await storage.save_thread(Thread("t", "owner-a", "before"))
            proxy.refuse()  # the server goes away: live connections die, new ones are refused
            for call in (
                lambda: storage.get_thread("t"),
                lambda: storage.save_thread(Thread("t2", "owner-a", "x")),
                lambda: storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r"),
                lambda: storage.list_threads("owner-a"),
            ):
                error = await _fails_fast(call(), within=3 + 2)
                assert "Connection refused" in str(error), str(error)
            proxy.resume()
            started = time.monotonic()
            assert (await storage.get_thread("t")).title == "before"  # type: ignore[union-attr]
            assert time.monotonic() - started < 1.0
            await asyncio.gather(
                *(storage.merge_working_memory({f"k{n}": n}, scope="resource", resource_id="r") for n in range(8))
            )

    with postgres_url_behind_proxy() as (url, proxy):
        asyncio.run(main(url, proxy))
    unreachable = [
        r.getMessage() for r in caplog.records if r.name.startswith("workmem.") and "unreachable" in r.getMessage()
    ]
    assert len(unreachable) == 1 and "Connection refused" in unreachable[0], unreachable  # once per outage
    assert any("reachable again" in r.getMessage() for r in caplog.records)
    assert not any(PASSWORD in r.getMessage() for r in caplog.records)


def test_hanging_server_fails_within_connect_timeout_and_recovers() -> None:
    async def main(url: str, proxy: Any) -> None:
        async with await _open(url, connect_timeout=2, max_size=4) as storage:
            await storage.save_thread(Thread("t", "owner-a", "before"))
            proxy.kill_all()
            proxy.blackhole()
            error = await _fails_fast(storage.get_thread("t"), within=2 + 2)
            assert "timeout" in str(error).lower(), str(error)
            error = await _fails_fast(storage.update_thread("t", title="x"), within=2 + 2)
            proxy.resume()
            started = time.monotonic()
            assert (await storage.get_thread("t")).title == "before"  # type: ignore[union-attr]
            assert time.monotonic() - started < 1.0
            for n in range(10):  # the pool serves again (its attempts begun during the outage do not get in the way)
                assert (await storage.update_thread("t", title=f"after {n}")).title == f"after {n}"

    with postgres_url_behind_proxy() as (url, proxy):
        asyncio.run(main(url, proxy))


def test_opening_while_down_fails_with_the_reason() -> None:
    async def main(url: str) -> None:
        await _fails_fast(workmem.connect_async(url, connect_timeout=2), within=2 + 2)

    with postgres_url_behind_proxy() as (url, proxy):
        proxy.refuse()
        asyncio.run(main(url))


def test_every_idle_connection_dropped_no_call_fails() -> None:
    async def main(url: str, proxy: Any) -> None:
        async with await _open(url, min_size=4, max_size=4) as storage:
            await storage.save_thread(Thread("t", "owner-a", "before"))
            assert proxy.wait_live(4) >= 4
            proxy.kill_all()
            await asyncio.sleep(0.05)  # the closes reach the pooled sockets
            for n in range(20):
                assert (await storage.get_thread("t")).title == "before"  # type: ignore[union-attr]
                await storage.merge_working_memory({f"n{n}": n}, scope="resource", resource_id="r")
            text = await storage.get_working_memory(scope="resource", resource_id="r")
            assert json.loads(text or "{}") == {f"n{n}": n for n in range(20)}

    with postgres_url_behind_proxy() as (url, proxy):
        asyncio.run(main(url, proxy))


def test_connections_stay_within_max_size_while_the_server_hangs_and_waiters_fail_at_once() -> None:
    """While connects hang, no more than ``max_size`` are begun; when they fail, the callers waiting fail with them."""

    async def main(url: str, proxy: Any) -> None:
        async with await _open(url, min_size=1, max_size=3, connect_timeout=2, timeout=30) as storage:
            await storage.save_thread(Thread("t", "owner-a", "before"))
            proxy.kill_all()
            proxy.blackhole()
            accepted = proxy.accepted
            started = time.monotonic()
            calls = [asyncio.ensure_future(storage.get_thread("t")) for _ in range(10)]
            await asyncio.sleep(1.0)  # every connect begun by now hangs
            assert proxy.accepted - accepted <= 3, proxy.accepted - accepted
            assert storage._pool.get_stats()["requests_waiting"] >= 7
            results = await asyncio.gather(*calls, return_exceptions=True)
            took = time.monotonic() - started
            assert all(isinstance(r, BackendUnavailableError) for r in results), results
            assert took < 2 + 2, f"the waiting calls took {took:.1f} s to fail"  # not one connect_timeout each
            assert proxy.accepted - accepted <= 3
            proxy.resume()
            assert (await storage.get_thread("t")).title == "before"  # type: ignore[union-attr]
            assert storage._pool.get_stats()["pool_size"] <= 3

    with postgres_url_behind_proxy() as (url, proxy):
        asyncio.run(main(url, proxy))


# -- the key-read hot path (workmem.adapters.postgres.keyreads) -----------------------------


def test_key_reads_give_what_the_cursor_gives() -> None:
    """get_thread / get_resource on libpq directly return the records the ordinary cursor statement maps."""

    async def main(url: str) -> None:
        async with await _open(url, max_size=2) as storage:
            await storage.save_resource(Resource("r", working_memory="# ü ✓", metadata={"n": 1.5, "x": [None]}))
            await storage.save_resource(Resource("r-none"))
            await storage.save_thread(Thread("t", "r", "Ünïcødé ✓", metadata={"deep": {"a": [1, "2"]}}))
            await storage.save_thread(Thread("t-none", "r", ""))
            await storage.save_thread(Thread("t" * 255, "r", "long id"))
            for read, key in [
                (storage.dialect.thread_by_id, "t"),
                (storage.dialect.thread_by_id, "t-none"),
                (storage.dialect.thread_by_id, "t" * 255),
                (storage.dialect.thread_by_id, "missing"),
                (storage.dialect.resource_by_id, "r"),
                (storage.dialect.resource_by_id, "r-none"),
                (storage.dialect.resource_by_id, "missing"),
            ]:
                rows = (await storage._execute(read.statement(key), read=True)).rows
                expected = read.record(rows[0]) if rows else None
                assert await storage._read_key(read, key) == expected, key
            assert (await storage.get_thread("t")) == Thread(
                "t", "r", "Ünïcødé ✓", {"deep": {"a": [1, "2"]}}, *_stamps(await storage.get_thread("t"))
            )
            read = storage.dialect.thread_by_id  # a NUL never reaches libpq (which would cut the key short)
            with pytest.raises(WorkmemError) as hot:
                await storage._read_key(read, "t\x00x")
            with pytest.raises(WorkmemError) as cursor:
                await storage._execute(read.statement("t\x00x"), read=True)
            assert type(hot.value) is type(cursor.value) and str(hot.value) == str(cursor.value)

    with fresh_schema_url() as url:
        asyncio.run(main(url))


def _stamps(thread: Thread | None) -> tuple[Any, Any]:
    assert thread is not None
    return thread.created_at, thread.updated_at


def test_key_reads_survive_every_statement_deallocated() -> None:
    """DEALLOCATE ALL under the key read: it prepares its statement again and reads. (psycopg ran one after a
    ROLLBACK once it had prepared a statement of its own; its prepared statements are off on these connections.)"""

    async def main(url: str) -> list[str]:
        async with await _open(url, min_size=1, max_size=1) as storage:
            await storage.save_thread(Thread("t", "r", "before"))
            assert (await storage.get_thread("t")) is not None  # prepared on the one connection
            conn = await storage._checkout()
            try:
                # the key read's statement (the save before it is a prepared INSERT)
                prepared = (
                    "SELECT name FROM pg_prepared_statements "
                    "WHERE name LIKE 'workmem\\_statement\\_%' AND statement LIKE 'SELECT %'"
                )
                assert len((await storage._query(conn, prepared)).rows) == 1
                await storage._query(conn, "DEALLOCATE ALL")
                gone = (await storage._query(conn, prepared)).rows
            finally:
                await storage._give(conn)
            assert (await storage.get_thread("t")).title == "before"  # type: ignore[union-attr]
            assert (await storage.get_thread("t")).title == "before"  # type: ignore[union-attr]
            return [row[0] for row in gone]

    with fresh_schema_url() as url:
        assert asyncio.run(main(url)) == []  # the read above met a connection without its statement


def test_key_read_errors_are_the_cursors() -> None:
    """A key read on a table that is gone fails as the cursor's statement does, and the pool stays usable."""

    async def main(url: str) -> None:
        async with await _open(url, max_size=2) as storage:
            await storage.save_thread(Thread("t", "r", "x"))
            schema = storage.dialect.schema
            await storage._execute(Statement(f'ALTER TABLE "{schema}".mastra_threads RENAME TO gone', {}))
            try:
                read = storage.dialect.thread_by_id
                with pytest.raises(WorkmemError) as hot:
                    await storage._read_key(read, "t")
                with pytest.raises(WorkmemError) as cursor:
                    await storage._execute(read.statement("t"), read=True)
                assert type(hot.value) is type(cursor.value)
                assert getattr(hot.value.__cause__, "sqlstate", None) == "42P01"
                assert getattr(cursor.value.__cause__, "sqlstate", None) == "42P01"
            finally:
                await storage._execute(Statement(f'ALTER TABLE "{schema}".gone RENAME TO mastra_threads', {}))
            assert (await storage.get_thread("t")).title == "x"  # type: ignore[union-attr]

    with fresh_schema_url() as url:
        asyncio.run(main(url))


def test_cancelled_key_reads_leave_the_pool_clean() -> None:
    app = f"wm_cancel_{secrets.token_hex(4)}"

    async def main(url: str) -> tuple[int, int]:
        async with await _open(url, min_size=2, max_size=4, timeout=5) as storage:
            await storage.save_thread(Thread("t", "r", "shared"))

            async def reads(n: int) -> None:  # eight at once, so some wait for a connection when cancelled
                await asyncio.gather(*(storage.get_thread("t") for _ in range(8)))

            # up to 20 ms: a cancelled read closes its connection, so the next ones connect again first
            finished, cancelled = await _cancel_storm(reads, 150, longest=0.02)
            # A connect whose caller was cancelled goes on and joins the pool when it ends (pool_size counts
            # it while it is opening): wait for those, then every connection must be back, none more.
            stats = await _settled(storage._pool)
            assert stats["pool_size"] == stats["pool_available"] <= 4, stats
            assert stats["requests_waiting"] == 0, stats
            sessions = _sessions(app)
            assert sessions.get("active", 0) == 0, sessions
            results = await asyncio.gather(*(storage.get_thread("t") for _ in range(16)))
            assert all(thread is not None and thread.title == "shared" for thread in results)
            return finished, cancelled

    with fresh_schema_url(application_name=app) as url:
        finished, cancelled = asyncio.run(main(url))
    assert finished > 0 and cancelled > 0, (finished, cancelled)


def test_a_key_read_meeting_a_lost_connection_goes_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-use check raced (simulated): the key read is retried on a new connection, as every read is."""
    import workmem.adapters.postgres.pool as pool_module

    async def main(url: str, proxy: Any) -> None:
        async with await _open(url, min_size=1, max_size=1) as storage:
            await storage.save_thread(Thread("t", "owner-a", "before"))
            monkeypatch.setattr(pool_module, "closed_by_server", lambda conn: False)
            for _ in range(3):
                proxy.kill_all()
                await asyncio.sleep(0.05)
                assert (await storage.get_thread("t")).title == "before"  # type: ignore[union-attr]
            assert storage._pool.get_stats()["pool_size"] == 1

    with postgres_url_behind_proxy() as (url, proxy):
        asyncio.run(main(url, proxy))


def test_terminated_connections_are_replaced_at_once() -> None:
    """What a server restart does to pooled connections (57P01, then EOF): the next reads and writes just work."""
    app = f"wm_terminate_{secrets.token_hex(4)}"

    async def main(url: str) -> None:
        async with await _open(url, min_size=4, max_size=4) as storage:
            await storage.save_thread(Thread("t", "r", "before"))
            await asyncio.gather(*(storage.get_thread("t") for _ in range(8)))  # prepared on every connection
            for _ in range(2):
                with psycopg.connect(server_url("postgres"), autocommit=True) as admin:
                    killed = admin.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
                        (app,),
                    ).fetchone()
                assert killed is not None and killed[0] == 4
                started = time.monotonic()
                threads = await asyncio.gather(*(storage.get_thread("t") for _ in range(8)))
                assert all(thread is not None and thread.title == "before" for thread in threads)
                assert time.monotonic() - started < 1.0
                await storage.update_thread("t", metadata={"n": 1})
                assert storage._pool.get_stats()["pool_size"] <= 4

    with fresh_schema_url(application_name=app) as url:
        asyncio.run(main(url))
