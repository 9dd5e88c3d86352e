"""The Oracle adapter against a real server (``WORKMEM_ORACLE_URL`` or testcontainers' gvenzl/oracle-free).

Every test gets fresh tables under a random ``table_prefix`` and drops them afterwards. Without a
server these tests are skipped, loudly, by :func:`tests.servers.server_url`. The ``test_async_``
tests drive :class:`AsyncOracleStorage` (python-oracledb's asyncio pool) on the same server.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import oracledb
import pytest
from servers import server_url
from test_sql_contract import SqlContract

import workmem
from workmem.adapters.oracle import AsyncOracleStorage, OracleSettings, OracleStorage
from workmem.adapters.oracle.dialect import oracle_error_code
from workmem.errors import ThreadExistsError, ThreadNotFoundError, ThreadOwnershipError, WorkingMemoryFormatError
from workmem.merge_patch import apply_merge_patch
from workmem.records import Resource, Scope, Thread

pytestmark = pytest.mark.backend("oracle")

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def with_table_prefix(url: str, prefix: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), ("table_prefix", prefix)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _admin(url: str) -> Any:
    """A plain python-oracledb connection with the URL's credentials (fixtures only)."""
    config = OracleSettings.from_url(url)
    return oracledb.connect(
        user=config.user, password=config.password, host=config.host, port=config.port, service_name=config.service_name
    )


def _drop_user(url: str, user: str) -> None:
    """Drop the throw-away user, ending its sessions first if some are still open (e.g. a killed worker's)."""
    with _admin(url) as connection:
        cursor = connection.cursor()
        for attempt in range(5):
            try:
                cursor.execute(f"DROP USER {user} CASCADE")
                return
            except oracledb.DatabaseError as exc:
                if oracle_error_code(exc)[0] != 1940 or attempt == 4:  # ORA-01940: user is connected
                    raise
            cursor.execute("SELECT sid, serial# FROM v$session WHERE username = :u", {"u": user})
            for sid, serial in cursor.fetchall():
                with suppress(oracledb.DatabaseError):
                    cursor.execute(f"ALTER SYSTEM KILL SESSION '{int(sid)},{int(serial)}' IMMEDIATE")
            time.sleep(1)


@contextmanager
def fresh_tables_url() -> Iterator[str]:
    """A URL of the test server where Mastra's tables are fresh; everything is dropped afterwards.

    With a user that may create users (SYSTEM on the gvenzl/oracle-free container), a throw-away
    user is made whose default tablespace is USERS (the SYSTEM tablespace cannot hold the
    SecureFile LOBs a JSON column needs), so the tables have exactly Mastra's names. Otherwise
    the tables get a random ``table_prefix`` in the given user's schema.
    """
    server = server_url("oracle")
    with _admin(server) as connection:
        cursor = connection.cursor()
        cursor.execute("SELECT COUNT(*) FROM session_privs WHERE privilege = 'CREATE USER'")
        can_create_users = cursor.fetchone()[0] > 0
        user, password = f"WM_{uuid.uuid4().hex[:10].upper()}", f"Pw{uuid.uuid4().hex}"
        if can_create_users:  # names and password are ours (hex), never data
            cursor.execute(
                f'CREATE USER {user} IDENTIFIED BY "{password}" DEFAULT TABLESPACE USERS QUOTA UNLIMITED ON USERS'
            )
            cursor.execute(f"GRANT CREATE SESSION, CREATE TABLE TO {user}")
    if can_create_users:
        parts = urlsplit(server)
        url = urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port or 1521}"))
        try:
            yield url
        finally:
            _drop_user(server, user)
        return
    url = with_table_prefix(server, f"WM{uuid.uuid4().hex[:8].upper()}_")
    try:
        yield url
    finally:
        storage = OracleStorage.from_url(url)
        try:
            storage.drop_tables()
        finally:
            storage.close()


@pytest.fixture
def oracle_url() -> Iterator[str]:
    with fresh_tables_url() as url:
        yield url


@pytest.fixture
def store(oracle_url: str) -> Iterator[OracleStorage]:
    storage = workmem.connect(oracle_url)
    assert isinstance(storage, OracleStorage)
    yield storage
    storage.close()


def _parallel(count: int, work: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(count)

    def run(index: int) -> Any:
        barrier.wait()
        try:
            return work(index)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def test_tables_have_mastras_shape(store: OracleStorage) -> None:
    dialect = store.dialect
    with store._connection() as connection:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT table_name, column_name, data_type, nullable FROM user_tab_columns "
            "WHERE table_name IN (:a, :b) ORDER BY table_name, column_id",
            {"a": dialect.resources, "b": dialect.threads},
        )
        columns = {(table, column): (kind, nullable) for table, column, kind, nullable in cursor.fetchall()}
        major = int(str(connection.version).split(".")[0])
    metadata_type = "JSON" if major >= 21 else "CLOB"
    threads, resources = dialect.threads, dialect.resources
    assert columns[(threads, "ID")] == ("VARCHAR2", "N")
    assert columns[(threads, "resourceId")] == ("VARCHAR2", "N")
    assert columns[(threads, "TITLE")] == ("VARCHAR2", "Y")
    assert columns[(threads, "METADATA")][0] == metadata_type
    assert columns[(threads, "createdAt")] == ("TIMESTAMP(6) WITH TIME ZONE", "N")
    assert columns[(resources, "workingMemory")] == ("CLOB", "Y")
    assert dialect.native_json is (major >= 21)


def test_reconnecting_to_existing_tables_is_fine(oracle_url: str, store: OracleStorage) -> None:
    store.save_resource(Resource("r", "x", None, T0, T0))
    with workmem.connect(oracle_url) as again:
        assert again.get_resource("r") == Resource("r", "x", None, T0, T0)


def test_resource_round_trip(store: OracleStorage) -> None:
    big = "é" * 300_000  # 600 KB of UTF-8: far past a VARCHAR2 bind
    resource = Resource("r-1", big, {"n": 1, "f": 2.5, "nested": {"a": [1, None, "x"]}, "u": "ünï"}, T0, T0)
    assert store.save_resource(resource) == resource
    assert store.get_resource("r-1") == resource
    empty = Resource("r-2", "", {}, T0, T0)
    store.save_resource(empty)
    assert store.get_resource("r-2") == empty
    store.save_resource(Resource("r-3", None, None, T0, T0))
    assert store.get_resource("r-3") == Resource("r-3", None, None, T0, T0)
    assert store.get_resource("missing") is None


def test_update_resource_merges_metadata_and_creates(store: OracleStorage) -> None:
    created = store.update_resource("r", working_memory="wm", metadata={"a": 1})
    updated = store.update_resource("r", metadata={"b": None})
    assert updated.metadata == {"a": 1, "b": None} and updated.working_memory == "wm"
    assert updated.created_at == created.created_at and updated.updated_at >= created.updated_at
    assert store.get_resource("r") == updated


def test_thread_round_trip_and_owner_immutability(store: OracleStorage) -> None:
    thread = Thread("t-1", "r-1", "", {"workingMemory": "# hi"}, T0, T0)
    assert store.save_thread(thread) == thread
    assert store.get_thread("t-1") == thread
    assert store.get_thread("t-1", resource_id="r-2") is None
    replaced = store.save_thread(Thread("t-1", "r-1", "new title", None, T0 + timedelta(days=1), T0))
    assert replaced.created_at == T0 and replaced.title == "new title" and replaced.metadata is None
    with pytest.raises(ThreadOwnershipError):
        store.save_thread(Thread("t-1", "r-2", "stolen"))
    assert store.get_thread("t-1") == replaced
    with pytest.raises(ThreadNotFoundError):
        store.update_thread("nope", title="x")
    assert store.delete_thread("t-1") is True
    assert store.delete_thread("t-1") is False


def test_racing_creates_with_different_owners_have_one_winner(oracle_url: str) -> None:
    stores = [workmem.connect(oracle_url) for _ in range(8)]
    try:
        for round_ in range(5):
            tid = f"race-{round_}"

            def create(i: int, tid: str = tid) -> Thread:
                return stores[i].save_thread(Thread(tid, f"owner-{i}", "t"))

            results = _parallel(8, create)
            winners = [r for r in results if isinstance(r, Thread)]
            assert all(isinstance(r, Thread | ThreadOwnershipError) for r in results), results
            owner = stores[0].get_thread(tid)
            assert owner is not None
            assert {w.resource_id for w in winners} == {owner.resource_id}
    finally:
        for storage in stores:
            storage.close()


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_concurrent_merges_keep_every_field(oracle_url: str, scope: Scope) -> None:
    stores = [workmem.connect(oracle_url) for _ in range(4)]
    try:
        if scope == "thread":
            stores[0].save_thread(Thread("t", "r", "t"))
        kwargs: dict[str, Any] = {"resource_id": "r"} if scope == "resource" else {"thread_id": "t"}
        results = _parallel(
            20, lambda i: stores[i % 4].merge_working_memory({f"f{i}": {"v": i}}, scope=scope, **kwargs)
        )
        assert not [r for r in results if isinstance(r, Exception)]
        text = stores[0].get_working_memory(scope=scope, **kwargs)
        assert text is not None
        assert json.loads(text) == {f"f{i}": {"v": i} for i in range(20)}
    finally:
        for storage in stores:
            storage.close()


def test_merge_matches_the_python_reference_and_refuses_non_objects(store: OracleStorage) -> None:
    store.set_working_memory('{"a":{"b":1,"c":[1,2]},"d":"x"}', scope="resource", resource_id="r")
    patch = {"a": {"b": None, "c": [3], "e": {"f": 1.5}}, "d": None, "g": True}
    expected = apply_merge_patch({"a": {"b": 1, "c": [1, 2]}, "d": "x"}, patch)
    assert store.merge_working_memory(patch, scope="resource", resource_id="r") == expected
    store.set_working_memory("# markdown", scope="resource", resource_id="r")
    with pytest.raises(WorkingMemoryFormatError):
        store.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
    assert store.get_working_memory(scope="resource", resource_id="r") == "# markdown"
    store.save_thread(Thread("t", "owner", "t"))
    with pytest.raises(ThreadOwnershipError):
        store.merge_working_memory({"a": 1}, scope="thread", thread_id="t", resource_id="other")
    assert store.merge_working_memory({"a": 1}, scope="thread", thread_id="t", resource_id="owner") == {"a": 1}


def test_list_threads_orders_and_pages(store: OracleStorage) -> None:
    for i in range(5):
        store.save_thread(Thread(f"t{i}", "r", str(i), None, T0 + timedelta(seconds=i % 2), T0))
    store.save_thread(Thread("other", "r2", "x", None, T0, T0))
    page = store.list_threads("r", page=1, per_page=2, order_by="created_at", direction="asc")
    assert (page.total, page.has_more) == (5, True)
    assert [t.id for t in page.threads] == ["t4", "t1"]  # created T0: t0 t2 t4; T0+1s: t1 t3
    everything = store.list_threads("r", per_page=None, direction="desc")
    assert [t.id for t in everything.threads] == ["t3", "t1", "t4", "t2", "t0"]


def test_reads_rows_written_the_way_mastra_writes_them(store: OracleStorage) -> None:
    """Mastra binds JSON natively, Dates in the session zone and '' as a sentinel."""
    if not store.dialect.native_json:
        pytest.skip("Mastra needs Oracle 21c+ (native JSON); this server is older")
    with store._connection() as connection:
        cursor = connection.cursor()
        cursor.execute("ALTER SESSION SET TIME_ZONE = '+05:30'")
        cursor.setinputsizes(metadata=oracledb.DB_TYPE_JSON)
        cursor.execute(
            f'INSERT INTO {store.dialect.threads} (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
            "VALUES (:id, :rid, :title, :metadata, "
            "TIMESTAMP '2025-01-02 08:34:05.678 +05:30', TIMESTAMP '2025-01-02 08:34:05.678 +05:30')",
            {"id": "m1", "rid": "r", "title": "__MASTRA_ORACLE_EMPTY_STRING__", "metadata": {"workingMemory": "x"}},
        )
        connection.commit()
    thread = store.get_thread("m1")
    assert thread == Thread("m1", "r", "", {"workingMemory": "x"}, T0, T0)


# -- the async API: AsyncOracleStorage on python-oracledb's asyncio pool -----------------------------


async def _open_async(url: str, **options: Any) -> AsyncOracleStorage:
    storage = await workmem.connect_async(url, **options)
    assert isinstance(storage, AsyncOracleStorage)
    return storage


def test_async_round_trip_and_the_owner_rule(oracle_url: str) -> None:
    async def main() -> None:
        async with await _open_async(oracle_url) as store:
            big = "é" * 300_000  # past a VARCHAR2 bind: bound as a CLOB, read back as text
            resource = Resource("r-1", big, {"n": 1, "f": 2.5, "u": "ünï"}, T0, T0)
            assert await store.save_resource(resource) == resource
            assert await store.get_resource("r-1") == resource
            thread = Thread("t-1", "r-1", "", {"workingMemory": "# hi"}, T0, T0)
            assert await store.create_thread(thread) == thread
            with pytest.raises(ThreadExistsError):
                await store.create_thread(Thread("t-1", "r-2", "x"))
            with pytest.raises(ThreadOwnershipError):
                await store.save_thread(Thread("t-1", "r-2", "stolen"))
            assert await store.get_thread("t-1") == thread
            with pytest.raises(ThreadNotFoundError):
                await store.update_thread("nope", title="x")
            assert await store.merge_working_memory({"a": 1}, scope="resource", resource_id="r-9") == {"a": 1}
            assert await store.delete_thread("t-1") is True
            assert await store.delete_thread("t-1") is False
        with workmem.connect(oracle_url) as sync_store:  # the same tables through the sync API
            assert sync_store.get_resource("r-1") == resource
            assert sync_store.get_working_memory(scope="resource", resource_id="r-9") == '{"a":1}'

    asyncio.run(main())


def test_async_racing_creates_with_different_owners_have_one_winner(oracle_url: str) -> None:
    async def main() -> None:
        stores = [await _open_async(oracle_url, max_size=4) for _ in range(2)]
        try:
            for round_ in range(5):
                tid = f"race-{round_}"
                results = await asyncio.gather(
                    *(stores[i % 2].save_thread(Thread(tid, f"owner-{i}", "t")) for i in range(8)),
                    return_exceptions=True,
                )
                assert all(isinstance(r, Thread | ThreadOwnershipError) for r in results), results
                owner = await stores[0].get_thread(tid)
                assert owner is not None
                assert {r.resource_id for r in results if isinstance(r, Thread)} == {owner.resource_id}
        finally:
            for store in stores:
                await store.close()

    asyncio.run(main())


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_async_concurrent_merges_keep_every_field(oracle_url: str, scope: Scope) -> None:
    async def main() -> None:
        async with await _open_async(oracle_url, max_size=4) as store:
            if scope == "thread":
                await store.save_thread(Thread("t", "r", "t"))
            kwargs: dict[str, Any] = {"resource_id": "r"} if scope == "resource" else {"thread_id": "t"}
            results = await asyncio.gather(
                *(store.merge_working_memory({f"f{i}": {"v": i}}, scope=scope, **kwargs) for i in range(20)),
                return_exceptions=True,
            )
            assert not [r for r in results if isinstance(r, BaseException)], results
            text = await store.get_working_memory(scope=scope, **kwargs)
            assert text is not None and json.loads(text) == {f"f{i}": {"v": i} for i in range(20)}

    asyncio.run(main())


def test_async_cancelled_calls_write_whole_or_not_and_the_storage_keeps_working(oracle_url: str) -> None:
    async def main() -> None:
        async with await _open_async(oracle_url, max_size=2) as store:
            await store.set_working_memory("{}", scope="resource", resource_id="r")
            for i in range(10):
                task = asyncio.create_task(store.merge_working_memory({f"f{i}": i}, scope="resource", resource_id="r"))
                await asyncio.sleep(0.002 * i)
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            text = await store.get_working_memory(scope="resource", resource_id="r")
            assert text is not None
            merged = json.loads(text)
            assert set(merged) <= {f"f{i}" for i in range(10)} and all(merged[k] == int(k[1:]) for k in merged)
            assert await store.merge_working_memory({"after": 1}, scope="resource", resource_id="r") == {
                **merged,
                "after": 1,
            }

    asyncio.run(main())


class TestOracleContract(SqlContract):
    """The shared SQL contract tests (each call compared with the reference adapter) on Oracle."""

    @pytest.fixture
    def make_storage(self, oracle_url: str) -> Iterator[Callable[..., OracleStorage]]:
        opened: list[OracleStorage] = []

        def make(**options: Any) -> OracleStorage:
            storage = OracleStorage.from_url(oracle_url, **options)
            opened.append(storage)
            return storage

        yield make
        for storage in opened:
            storage.close()
