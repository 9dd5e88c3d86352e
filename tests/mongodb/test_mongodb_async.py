"""The async MongoDB adapter (``AsyncMongoStorage`` on ``pymongo.AsyncMongoClient``).

Three kinds of tests, labelled in their names:

* ``fake_``: FAKE, NOT CONFORMANCE. ``AsyncMongoStorage`` runs on a small async
  wrapper over mongomock (:class:`FakeAsyncClient`, below, tests only), which
  yields to the event loop before every operation so that tasks interleave
  between a compare-and-swap's read and its write. mongomock is not MongoDB:
  this shows the async core's flows and its port are wired correctly, not that
  the adapter is correct on a server.
* ``unit_``: real pymongo ``AsyncMongoClient`` with no server (a closed port, a
  name that does not resolve), and introspection of the installed pymongo.
* ``server_``: against a REAL MongoDB (``WORKMEM_MONGODB_URL``, as
  ``test_mongodb_server.py``); skipped loudly without one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
import pytest
from backends import fresh_mongodb_url
from bson.codec_options import CodecOptions

import workmem
from workmem.adapters.mongodb.documents import RESOURCES, THREADS
from workmem.adapters.mongodb.storage import AsyncMongoStorage, MongoStorage
from workmem.errors import (
    BackendUnavailableError,
    MissingTablesError,
    StorageClosedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
    WorkingMemoryFormatError,
)
from workmem.merge_patch import apply_merge_patch
from workmem.records import Resource, Thread
from workmem.registry import _async_twin, resolve

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
PASSWORD = "s3cr3t-Async-Pa55"
WRITERS = 16

Opener = Callable[[], Awaitable[AsyncMongoStorage]]


# -- FAKE: an async face over mongomock (tests only) -------------------------------------------


class FakeAsyncCursor:
    """FAKE ``AsyncCursor``: ``sort``/``skip``/``limit`` chain, ``await to_list()``."""

    def __init__(self, cursor: Any, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> None:
        self._cursor = cursor
        self._calls = calls

    def _chain(self, name: str, *args: Any) -> FakeAsyncCursor:
        self._calls.append((f"AsyncCursor.{name}", args, {}))
        self._cursor = getattr(self._cursor, name)(*args)
        return self

    def sort(self, key_or_list: Any, direction: Any = None) -> FakeAsyncCursor:
        return self._chain("sort", key_or_list) if direction is None else self._chain("sort", key_or_list, direction)

    def skip(self, skip: int) -> FakeAsyncCursor:
        return self._chain("skip", skip)

    def limit(self, limit: int) -> FakeAsyncCursor:
        return self._chain("limit", limit)

    async def to_list(self, length: int | None = None) -> list[dict[str, Any]]:
        self._calls.append(("AsyncCursor.to_list", (), {} if length is None else {"length": length}))
        await asyncio.sleep(0)
        return list(self._cursor)


class FakeAsyncCollection:
    """FAKE ``AsyncCollection``: each coroutine yields to the loop once, then runs the mongomock call."""

    _COROUTINES = (
        "find_one",
        "find_one_and_update",
        "insert_one",
        "insert_many",
        "update_one",
        "delete_one",
        "delete_many",
        "find_one_and_delete",
        "count_documents",
        "create_index",
    )

    def __init__(self, collection: mongomock.Collection, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]):
        self._collection = collection
        self._calls = calls
        self.name = collection.name

    def __getattr__(self, name: str) -> Any:
        if name not in self._COROUTINES:
            raise AttributeError(name)
        method = getattr(self._collection, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self._calls.append((f"AsyncCollection.{name}", args, kwargs))
            await asyncio.sleep(0)  # let other tasks run, as a round trip would
            return method(*args, **kwargs)

        return call

    def find(self, *args: Any, **kwargs: Any) -> FakeAsyncCursor:
        self._calls.append(("AsyncCollection.find", args, kwargs))
        return FakeAsyncCursor(self._collection.find(*args, **kwargs), self._calls)


class FakeAsyncDatabase:
    def __init__(self, database: mongomock.Database, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]):
        self._database = database
        self._calls = calls

    def __getitem__(self, name: str) -> FakeAsyncCollection:
        return FakeAsyncCollection(self._database[name], self._calls)

    async def list_collection_names(self) -> list[str]:
        self._calls.append(("AsyncDatabase.list_collection_names", (), {}))
        await asyncio.sleep(0)
        return list(self._database.list_collection_names())


class FakeAsyncClient:
    """FAKE ``AsyncMongoClient`` over a mongomock client; records every driver call the adapter makes."""

    def __init__(self, client: mongomock.MongoClient) -> None:
        self.mongomock = client
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.closed = False

    def get_database(self, name: str, codec_options: Any = None) -> FakeAsyncDatabase:
        self.calls.append(("AsyncMongoClient.get_database", (name,), {"codec_options": codec_options}))
        return FakeAsyncDatabase(self.mongomock.get_database(name, codec_options=codec_options), self.calls)

    def __getitem__(self, name: str) -> FakeAsyncDatabase:
        return FakeAsyncDatabase(self.mongomock[name], self.calls)

    async def close(self) -> None:
        self.calls.append(("AsyncMongoClient.close", (), {}))
        self.closed = True


# -- the checks, shared by the FAKE and the real server -----------------------------------------


async def raw(storage: AsyncMongoStorage, collection: str, record_id: str) -> dict[str, Any] | None:
    """The stored document, read around the adapter."""
    document: dict[str, Any] | None = await storage._client[storage.database][collection].find_one(
        {"id": record_id}, {"_id": 0}
    )
    return document


async def check_threads(storage: AsyncMongoStorage) -> None:
    created = await storage.create_thread(Thread("c", "r", "first", {"k": 1}, T0, T0))
    for owner in ("r", "other"):
        with pytest.raises(ThreadExistsError):
            await storage.create_thread(Thread("c", owner, "second"))
    assert await storage.get_thread("c") == created
    assert await storage.get_thread("c", resource_id="other") is None

    saved = await storage.save_thread(Thread("t", "r", "one", {"a.b": 1, "$c": {"$d": 2}}, T0, T0))
    assert saved == Thread("t", "r", "one", {"a.b": 1, "$c": {"$d": 2}}, T0, T0)
    document = await raw(storage, THREADS, "t")
    assert document is not None and document["metadata"] == {"a.b": 1, "$c": {"$d": 2}} and document["createdAt"] == T0
    before = await raw(storage, THREADS, "t")
    with pytest.raises(ThreadOwnershipError):
        await storage.save_thread(Thread("t", "intruder", "theirs", None, T0, T0))
    assert await raw(storage, THREADS, "t") == before
    replaced = await storage.save_thread(Thread("t", "r", "two", {"b": 2}, T0 + timedelta(days=9), T0))
    assert (replaced.title, replaced.metadata, replaced.created_at) == ("two", {"b": 2}, T0)
    assert replaced.updated_at > T0 and await storage.get_thread("t") == replaced

    with pytest.raises(ThreadNotFoundError):
        await storage.update_thread("missing", title="x")
    with pytest.raises(ThreadNotFoundError):
        await storage.update_thread("missing", metadata={"a": 1})
    merged = await storage.update_thread("t", metadata={"c": 3})
    assert (merged.title, merged.metadata, merged.created_at) == ("two", {"b": 2, "c": 3}, T0)
    assert await storage.get_thread("t") == merged
    retitled = await storage.update_thread("t", title="three")
    assert (retitled.title, retitled.metadata) == ("three", {"b": 2, "c": 3})
    assert await storage.get_thread("t") == retitled

    assert await storage.delete_thread("t") is True
    assert await storage.delete_thread("t") is False
    assert await storage.get_thread("t") is None


async def check_listing(storage: AsyncMongoStorage) -> None:
    threads = [
        Thread(f"t{i}", "r", "", None, T0 + timedelta(seconds=i % 3), T0 + timedelta(seconds=-(i % 4)))
        for i in range(10)
    ]
    for thread in threads:
        await storage.save_thread(thread)
    await storage.save_thread(Thread("other", "r2", "", None, T0, T0))
    for order_by in ("created_at", "updated_at"):
        for direction in ("asc", "desc"):
            expected = sorted(threads, key=lambda t: (getattr(t, order_by), t.id), reverse=direction == "desc")
            pages = [
                await storage.list_threads("r", page=p, per_page=4, order_by=order_by, direction=direction)  # type: ignore[arg-type]
                for p in range(3)
            ]
            assert [t for page in pages for t in page.threads] == expected
            assert [(p.total, p.has_more, len(p.threads)) for p in pages] == [
                (10, True, 4),
                (10, True, 4),
                (10, False, 2),
            ]
            everything = await storage.list_threads("r", per_page=None, order_by=order_by, direction=direction)  # type: ignore[arg-type]
            assert list(everything.threads) == expected and not everything.has_more
    assert (await storage.list_threads("nobody")).total == 0


async def check_resources_and_working_memory(storage: AsyncMongoStorage) -> None:
    created = await storage.update_resource("r", working_memory="# wm")
    assert (created.working_memory, created.metadata) == ("# wm", None)
    merged = await storage.update_resource("r", metadata={"a": 1})
    assert (merged.working_memory, merged.metadata, merged.created_at) == ("# wm", {"a": 1}, created.created_at)
    merged = await storage.update_resource("r", metadata={"b.c": 2}, working_memory=None)
    assert (merged.working_memory, merged.metadata) == (None, {"a": 1, "b.c": 2})
    assert await storage.get_resource("r") == merged
    document = await raw(storage, RESOURCES, "r")
    assert document is not None and document["metadata"] == '{"a":1,"b.c":2}'  # Mastra's JSON string
    fresh = await storage.update_resource("new", metadata={"c": 3})
    assert (fresh.working_memory, fresh.metadata) == (None, {"c": 3}) and await storage.get_resource("new") == fresh
    whole = Resource("r", None, None, T0, T0 + timedelta(days=1))
    assert await storage.save_resource(whole) == whole and await storage.get_resource("r") == whole

    doc: Any = {}
    for patch in ({"a": {"b": 1, "c": [1, 2]}, "d": 0.5}, {"a": {"b": None, "e": "x"}}, {"a": {"c": [3]}, "d": None}):
        doc = apply_merge_patch(doc, patch)
        assert await storage.merge_working_memory(patch, scope="resource", resource_id="m") == doc
    assert await storage.get_working_memory(scope="resource", resource_id="m") == '{"a":{"c":[3],"e":"x"}}'
    await storage.set_working_memory("# markdown", scope="resource", resource_id="m")
    before = await raw(storage, RESOURCES, "m")
    with pytest.raises(WorkingMemoryFormatError):
        await storage.merge_working_memory({"x": 1}, scope="resource", resource_id="m")
    assert await raw(storage, RESOURCES, "m") == before

    await storage.save_thread(Thread("t", "r", "", {"keep.me": 1}, T0, T0))
    assert await storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t", resource_id="r") == {"x": 1}
    assert await storage.merge_working_memory({"y": 2}, scope="thread", thread_id="t") == {"x": 1, "y": 2}
    thread = await storage.get_thread("t")
    assert thread is not None and thread.metadata == {"keep.me": 1, "workingMemory": '{"x":1,"y":2}'}
    with pytest.raises(ThreadNotFoundError):
        await storage.merge_working_memory({"x": 1}, scope="thread", thread_id="missing")
    await storage.set_working_memory("[1]", scope="thread", thread_id="t", resource_id="r")
    before = await raw(storage, THREADS, "t")
    with pytest.raises(ThreadOwnershipError):
        await storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t", resource_id="someone-else")
    with pytest.raises(WorkingMemoryFormatError):
        await storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t")
    assert await raw(storage, THREADS, "t") == before
    assert await storage.get_working_memory(scope="thread", thread_id="t") == "[1]"
    with pytest.raises(ValidationError):  # checked at the door, before any I/O
        await storage.update_thread("t", metadata={"bad": float("nan")})


async def check_iteration_and_bulk_writes(storage: AsyncMongoStorage) -> None:
    ids = ["b", "a", "é", "B", "😀", "a:b", "10", "9"]
    present = await storage.insert_threads(Thread(i, f"r{n % 2}", "", {"n": n}, T0, T0) for n, i in enumerate(ids))
    assert present == frozenset()
    moved = await storage.insert_threads(
        [Thread("a", "thief", "", None, T0, T0), Thread("new", "r0", "", None, T0, T0)]
    )
    assert moved == frozenset({"a"})
    stolen = await storage.get_thread("a")
    assert stolen is not None and stolen.resource_id == "r1"
    want = sorted([*ids, "new"], key=lambda text: [ord(c) for c in text])
    for page_size in (1, 2, 9, 100):
        assert [t.id async for t in storage.iter_threads(page_size=page_size)] == want
    first = await storage.threads_after(None, limit=4)
    assert [t.id for t in first.records] == want[:4] and first.next_after == want[3]
    rest = await storage.threads_after(first.next_after, limit=10)
    assert [t.id for t in rest.records] == want[4:] and rest.next_after is None
    assert await storage.insert_resources([Resource("x", "# x", None, T0, T0)]) == frozenset()
    assert await storage.insert_resources([Resource("x", None, None, T0, T0)]) == frozenset({"x"})
    assert [r async for r in storage.iter_resources(page_size=1)] == [Resource("x", "# x", None, T0, T0)]
    later = Thread("a", "r1", "replaced", {"k": 1}, T0 - timedelta(days=1), T0 + timedelta(days=1))
    assert await storage.restore_thread(later) is True and await storage.get_thread("a") == later
    assert await storage.restore_thread(Thread("a", "thief", "", None, T0, T0)) is False
    assert await storage.get_thread("a") == later


async def check_concurrent_writers(open_storage: Opener) -> None:
    """Merges, metadata updates and owner races from separate connections, all at once: nothing lost, one owner."""
    first = await open_storage()
    await first.save_thread(Thread("t", "r", "", {"keep": True}, T0, T0))
    others = [await open_storage() for _ in range(WRITERS)]
    merges = [
        storage.merge_working_memory(
            {f"k{i}": i, "shared": {f"s{i}": [i]}}, scope=scope, resource_id="r", thread_id="t"
        )
        for i, storage in enumerate(others)
        for scope in ("resource", "thread")
    ]
    updates = [
        call
        for i, storage in enumerate(others)
        for call in (
            storage.update_thread("t", metadata={f"t{i}": i}),
            storage.update_resource("r", metadata={f"r{i}": i}),
        )
    ]
    await asyncio.gather(*merges, *updates)
    expected = {**{f"k{i}": i for i in range(WRITERS)}, "shared": {f"s{i}": [i] for i in range(WRITERS)}}
    assert await first.merge_working_memory({}, scope="resource", resource_id="r") == expected
    assert await first.merge_working_memory({}, scope="thread", resource_id="r", thread_id="t") == expected
    thread, resource = await first.get_thread("t"), await first.get_resource("r")
    assert thread is not None and resource is not None and thread.metadata is not None
    assert thread.metadata == {"keep": True, "workingMemory": thread.metadata["workingMemory"]} | {
        f"t{i}": i for i in range(WRITERS)
    }
    assert resource.metadata == {f"r{i}": i for i in range(WRITERS)}

    async def claim(i: int) -> bool:
        try:
            await others[i].save_thread(Thread("contested", f"owner{i}", f"title{i}", None, T0, T0))
            return True
        except ThreadOwnershipError:
            return False

    won = await asyncio.gather(*(claim(i) for i in range(WRITERS)))
    assert won.count(True) == 1
    contested = await first.get_thread("contested")
    winner = won.index(True)
    assert contested is not None and (contested.resource_id, contested.title) == (f"owner{winner}", f"title{winner}")
    for storage in (first, *others):
        await storage.close()


# -- FAKE tests ------------------------------------------------------------------------------------


@pytest.fixture
def fake_mongomock() -> Iterator[mongomock.MongoClient]:
    client = mongomock.MongoClient(tz_aware=True)
    yield client
    client.close()


def fake_opener(client: mongomock.MongoClient, database: str, fakes: list[FakeAsyncClient] | None = None) -> Opener:
    async def open_one() -> AsyncMongoStorage:
        fake = FakeAsyncClient(client)
        if fakes is not None:
            fakes.append(fake)
        storage = AsyncMongoStorage(fake, database)  # type: ignore[arg-type]
        await storage.create_indexes()
        return storage

    return open_one


@pytest.mark.parametrize(
    "check", [check_threads, check_listing, check_resources_and_working_memory, check_iteration_and_bulk_writes]
)
def test_fake_mongomock_async_flows(
    fake_mongomock: mongomock.MongoClient, check: Callable[[AsyncMongoStorage], Awaitable[None]]
) -> None:
    """FAKE (mongomock behind an async wrapper; not conformance): every async flow through the async core."""

    async def main() -> None:
        async with await fake_opener(fake_mongomock, f"fake_{uuid.uuid4().hex}")() as storage:
            await check(storage)

    asyncio.run(main())


def test_fake_mongomock_async_compare_and_swap_retries_interleaved_tasks(
    fake_mongomock: mongomock.MongoClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FAKE: tasks interleave between a CAS read and its write, so writes lose races and retry via ``_pause``."""
    pauses: list[float] = []
    original = AsyncMongoStorage._pause

    async def counting_pause(self: AsyncMongoStorage, seconds: float) -> None:
        pauses.append(seconds)
        await original(self, seconds)

    monkeypatch.setattr(AsyncMongoStorage, "_pause", counting_pause)
    asyncio.run(check_concurrent_writers(fake_opener(fake_mongomock, f"fake_{uuid.uuid4().hex}")))
    assert pauses and all(0 <= p <= 0.05 for p in pauses)  # races were lost and retried, with bounded backoff


def test_fake_mongomock_sync_and_async_share_documents(fake_mongomock: mongomock.MongoClient) -> None:
    """FAKE: what the sync adapter writes the async one reads, and back (the same collections and documents)."""
    database = f"fake_{uuid.uuid4().hex}"
    sync = MongoStorage(fake_mongomock, database)
    sync.save_thread(Thread("t", "r", "sync", {"a": 1}, T0, T0))
    sync.update_resource("r", working_memory="# from sync", metadata={"m": 1})

    async def main() -> None:
        async with await fake_opener(fake_mongomock, database)() as storage:
            assert await storage.get_thread("t") == sync.get_thread("t")
            assert await storage.get_resource("r") == sync.get_resource("r")
            await storage.update_thread("t", title="async", metadata={"b": 2})
            await storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t")

    asyncio.run(main())
    thread = sync.get_thread("t")
    assert thread is not None and (thread.title, thread.metadata) == (
        "async",
        {"a": 1, "b": 2, "workingMemory": '{"x":1}'},
    )


def test_fake_mongomock_async_indexes_and_create_false(fake_mongomock: mongomock.MongoClient) -> None:
    """FAKE: ``create_indexes`` makes Mastra's indexes, idempotently; ``create=False``'s check names what is missing."""
    database = f"fake_{uuid.uuid4().hex}"

    async def main() -> None:
        bare = AsyncMongoStorage(FakeAsyncClient(fake_mongomock), database)  # type: ignore[arg-type]
        with pytest.raises(MissingTablesError, match="mastra_threads, mastra_resources"):
            await bare._check_collections()
        await bare.create_indexes()
        await bare.create_indexes()
        await bare._check_collections()

    asyncio.run(main())
    threads = fake_mongomock[database][THREADS].index_information()
    assert threads["id_1"].get("unique") is True
    assert threads["resourceId_1_createdAt_-1"]["key"] == [("resourceId", 1), ("createdAt", -1)]
    assert threads["resourceId_1_updatedAt_-1"]["key"] == [("resourceId", 1), ("updatedAt", -1)]
    assert fake_mongomock[database][RESOURCES].index_information()["id_1"].get("unique") is True


def test_fake_mongomock_async_close_closes_only_an_owned_client(fake_mongomock: mongomock.MongoClient) -> None:
    """FAKE: ``close()`` closes the client it owns, once; a borrowed client stays open."""

    async def main() -> None:
        borrowed, owned = FakeAsyncClient(fake_mongomock), FakeAsyncClient(fake_mongomock)
        await AsyncMongoStorage(borrowed, "db").close()  # type: ignore[arg-type]
        storage = AsyncMongoStorage(owned, "db", owns_client=True)  # type: ignore[arg-type]
        await storage.close()
        await storage.close()
        assert not borrowed.closed and owned.closed
        assert [name for name, _, _ in owned.calls].count("AsyncMongoClient.close") == 1

    asyncio.run(main())


# -- unit: the installed pymongo's async API, and real AsyncMongoClient without a server --------------


def test_unit_every_async_driver_call_exists_in_the_installed_pymongo(fake_mongomock: mongomock.MongoClient) -> None:
    """Each call the async port made (recorded by the FAKE) binds to the real pymongo async method of that name.

    The coroutine calls are coroutine functions there, the cursor chain is not; so the port awaits what
    pymongo's ``AsyncMongoClient`` awaits, with arguments its signatures accept.
    """
    import pymongo
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.cursor import AsyncCursor
    from pymongo.asynchronous.database import AsyncDatabase

    real = {
        "AsyncMongoClient": pymongo.AsyncMongoClient,
        "AsyncDatabase": AsyncDatabase,
        "AsyncCollection": AsyncCollection,
        "AsyncCursor": AsyncCursor,
    }
    fakes: list[FakeAsyncClient] = []

    async def main() -> None:
        for check in (
            check_threads,
            check_listing,
            check_resources_and_working_memory,
            check_iteration_and_bulk_writes,
        ):
            storage = await fake_opener(fake_mongomock, f"fake_{uuid.uuid4().hex}", fakes)()
            await check(storage)
            await storage._check_collections()
        await AsyncMongoStorage(fakes[0], "x", owns_client=True).close()  # type: ignore[arg-type]

    asyncio.run(main())
    seen: set[str] = set()
    for name, args, kwargs in (call for fake in fakes for call in fake.calls):
        owner, _, method_name = name.partition(".")
        method = getattr(real[owner], method_name)
        inspect.signature(method).bind(object(), *args, **kwargs)  # raises TypeError when pymongo would
        awaited = method_name not in {"find", "sort", "skip", "limit", "get_database"}
        assert inspect.iscoroutinefunction(method) is awaited, name
        seen.add(name)
    assert {
        "AsyncCollection.find_one",
        "AsyncCollection.find_one_and_update",
        "AsyncCollection.insert_one",
        "AsyncCollection.insert_many",
        "AsyncCollection.update_one",
        "AsyncCollection.find_one_and_delete",
        "AsyncCollection.count_documents",
        "AsyncCollection.create_index",
        "AsyncCollection.find",
        "AsyncCursor.sort",
        "AsyncCursor.skip",
        "AsyncCursor.limit",
        "AsyncCursor.to_list",
        "AsyncDatabase.list_collection_names",
        "AsyncMongoClient.get_database",
        "AsyncMongoClient.close",
    } <= seen
    assert inspect.iscoroutinefunction(pymongo.AsyncMongoClient.aconnect)


def test_unit_sync_adapter_names_its_async_twin() -> None:
    assert _async_twin(resolve("mongodb://h/db"), "mongodb://h/db") is AsyncMongoStorage
    assert _async_twin(resolve("mongodb+srv://h/db"), "mongodb+srv://h/db") is AsyncMongoStorage


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assert_masked(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    for text in (str(exc), repr(exc), caplog.text, str(exc.__cause__), repr(exc.__cause__)):
        assert PASSWORD not in text


@pytest.mark.parametrize("create", [True, False])
def test_unit_async_unreachable_server_fails_fast_masked(caplog: pytest.LogCaptureFixture, create: bool) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"mongodb://admin:{PASSWORD}@127.0.0.1:{closed_port()}/agents"

    async def main() -> BaseException:
        with pytest.raises(BackendUnavailableError) as info:
            await workmem.connect_async(url, create=create, serverSelectionTimeoutMS=300)
        return info.value

    started = time.monotonic()
    exc = asyncio.run(main())
    assert time.monotonic() - started < 5
    assert "admin:***@127.0.0.1" in str(exc) and "ServerSelectionTimeoutError" in str(exc)
    assert "Server selection failed" in caplog.text  # pymongo logged, so the masking check means something
    _assert_masked(exc, caplog)


def test_unit_async_srv_url_that_does_not_resolve_is_unavailable_and_masked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def main() -> BaseException:
        with pytest.raises(BackendUnavailableError) as info:
            await workmem.connect_async(f"mongodb+srv://admin:{PASSWORD}@cluster0.nonexistent.invalid/agents")
        return info.value

    _assert_masked(asyncio.run(main()), caplog)


def test_unit_async_open_url_options_repr_and_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ``AsyncMongoClient`` (no server: index creation and the transaction probe are skipped): database,
    options, masking, close."""

    async def no_indexes(self: AsyncMongoStorage) -> None:
        pass

    monkeypatch.setattr(AsyncMongoStorage, "_create_indexes", no_indexes)
    monkeypatch.setattr(AsyncMongoStorage, "_probe", no_indexes)
    port = closed_port()

    async def main() -> None:
        import pymongo

        for url, expected in {
            f"mongodb://127.0.0.1:{port}/agents": "agents",
            f"mongodb://127.0.0.1:{port}": "mastra",
            f"mongodb://127.0.0.1:{port}/?authSource=admin": "mastra",
        }.items():
            async with await workmem.connect_async(url) as storage:
                assert isinstance(storage, AsyncMongoStorage) and storage.database == expected
                assert isinstance(storage._client, pymongo.AsyncMongoClient)
                assert storage._client.options.server_selection_timeout == 5.0
                assert storage._client.codec_options.tz_aware is True
        storage = await workmem.connect_async(f"mongodb://u:{PASSWORD}@127.0.0.1:{port}/a", database="b")
        assert storage.database == "b" and PASSWORD not in repr(storage) and "u:***@" in repr(storage)
        await storage.close()
        await storage.close()  # idempotent
        with pytest.raises(StorageClosedError) as info:
            await storage.get_resource("r")
        assert PASSWORD not in str(info.value)
        with pytest.raises(ValidationError):
            await workmem.connect_async(f"mongodb://127.0.0.1:{port}/a", database="")
        with pytest.raises(ValidationError):
            await workmem.connect_async(f"mongodb://u:{PASSWORD}@127.0.0.1:notaport/a")

    asyncio.run(main())


def test_unit_async_codec_options_are_forced() -> None:
    """Whatever the client's defaults, the adapter's collections decode dates as aware UTC and documents as dicts."""
    import pymongo

    async def main() -> None:
        client: pymongo.AsyncMongoClient[dict[str, Any]] = pymongo.AsyncMongoClient(
            f"mongodb://127.0.0.1:{closed_port()}", connect=False
        )
        storage = AsyncMongoStorage(client, "db")
        options: CodecOptions[Any] = storage._threads.codec_options
        assert options.tz_aware is True and options.document_class is dict
        await client.close()

    asyncio.run(main())


# -- real server -----------------------------------------------------------------------------------


@pytest.fixture
def database_url() -> Iterator[str]:
    """A URL naming a fresh database on the real server (skips loudly without one); dropped afterwards."""
    with fresh_mongodb_url() as url:
        yield url


def server_opener(url: str) -> Opener:
    async def open_one() -> AsyncMongoStorage:
        storage = await workmem.connect_async(url)
        assert isinstance(storage, AsyncMongoStorage)
        return storage

    return open_one


@pytest.mark.backend("mongodb")
@pytest.mark.parametrize(
    "check", [check_threads, check_listing, check_resources_and_working_memory, check_iteration_and_bulk_writes]
)
def test_server_async_flows(database_url: str, check: Callable[[AsyncMongoStorage], Awaitable[None]]) -> None:
    async def main() -> None:
        async with await server_opener(database_url)() as storage:
            await check(storage)

    asyncio.run(main())


@pytest.mark.backend("mongodb")
def test_server_async_concurrent_writers(database_url: str) -> None:
    asyncio.run(check_concurrent_writers(server_opener(database_url)))


@pytest.mark.backend("mongodb")
def test_server_async_create_false_and_indexes(database_url: str) -> None:
    async def main() -> None:
        with pytest.raises(MissingTablesError):
            await workmem.connect_async(database_url, create=False)
        async with await server_opener(database_url)() as storage:
            indexes = await storage._threads.index_information()
            assert indexes["id_1"].get("unique") is True
            keys = {tuple(info["key"]) for info in indexes.values()}
            assert (("resourceId", 1), ("createdAt", -1)) in keys and (("resourceId", 1), ("updatedAt", -1)) in keys
            await storage.create_indexes()  # idempotent
        async with await workmem.connect_async(database_url, create=False) as storage:
            assert await storage.get_resource("none") is None

    asyncio.run(main())


@pytest.mark.backend("mongodb")
def test_server_sync_and_async_share_documents(database_url: str) -> None:
    with workmem.connect(database_url) as sync:
        sync.save_thread(Thread("t", "r", "sync", {"a": 1}, T0, T0))

        async def main() -> None:
            async with await server_opener(database_url)() as storage:
                assert await storage.get_thread("t") == sync.get_thread("t")
                await storage.update_thread("t", metadata={"b": 2})

        asyncio.run(main())
        thread = sync.get_thread("t")
        assert thread is not None and thread.metadata == {"a": 1, "b": 2}
