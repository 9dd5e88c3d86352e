"""MongoDB history and delete_resource without a server.

* ``fake_``: FAKE, NOT CONFORMANCE. ``MongoStorage`` on mongomock, whose client has
  no sessions: :class:`FakeTransactions` stands in for the port's transaction
  (it runs the body on the plain collections, with no isolation at all). This
  shows which documents the adapter writes, in which step, and what it refuses;
  only a real replica set shows the transaction is atomic.
* ``unit_``: pure functions, and the installed pymongo's signatures.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any

import mongomock
import pytest

import workmem
from workmem import Thread, ThreadNotFoundError, ThreadOwnershipError
from workmem.adapters.mongodb import port as port_module
from workmem.adapters.mongodb.port import BlockingDatabase, DatabasePort
from workmem.adapters.mongodb.storage import MongoStorage
from workmem.adapters.mongodb.versions import HISTORY, version_document, version_from_document
from workmem.errors import OperationNotSupportedError, WorkmemError
from workmem.history import ErasedResource, HistoryKey, HistoryPolicy, MemoryVersion
from workmem.kit import run_sync

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


class FakeTransactions(BlockingDatabase):
    """FAKE: a port whose ``transaction`` runs the body on the plain collections (mongomock has no sessions)."""

    def __init__(self, client: Any, database: str, *, transactions: bool = True) -> None:
        super().__init__(client, database)
        self.transactions = transactions
        self.bodies = 0
        self.refusal: Exception | None = None

    async def transaction(self, body: Callable[[DatabasePort], Coroutine[Any, Any, Any]]) -> Any:
        if self.refusal is not None:
            raise self.refusal
        self.bodies += 1
        return await body(self)

    async def supports_transactions(self) -> bool:
        return self.transactions


@pytest.fixture
def fake_client() -> Iterator[mongomock.MongoClient]:
    client = mongomock.MongoClient(tz_aware=True)
    yield client
    client.close()


def _storage(client: mongomock.MongoClient, *, transactions: bool = True, keep: int | None = None) -> MongoStorage:
    storage = MongoStorage(client, f"fake_{uuid.uuid4().hex}")
    storage._db = FakeTransactions(client, storage.database, transactions=transactions)
    storage.history = HistoryPolicy(keep)
    return storage


def _port(storage: MongoStorage) -> FakeTransactions:
    assert isinstance(storage._db, FakeTransactions)
    return storage._db


def _versions(storage: MongoStorage, resource_id: str, thread_id: str | None = None) -> list[MemoryVersion]:
    scope = "resource" if thread_id is None else "thread"
    return list(storage.working_memory_history(scope=scope, resource_id=resource_id, thread_id=thread_id).versions)


def test_fake_every_change_records_a_version_in_the_writes_transaction(fake_client: mongomock.MongoClient) -> None:
    storage = _storage(fake_client)
    storage.set_working_memory('{"a":1}', scope="resource", resource_id="r", source={"agent": "x"})
    storage.merge_working_memory({"b": 2}, scope="resource", resource_id="r")
    storage.update_resource("r", metadata={"m": 1})  # no working memory: no version, no transaction
    assert _port(storage).bodies == 2
    storage.create_thread(Thread("t", "r", "title", None, T0, T0))
    storage.merge_working_memory({"c": 3}, scope="thread", resource_id="r", thread_id="t")
    storage.update_thread("t", metadata={"workingMemory": "plain"})
    assert [(v.version, v.kind, v.content, v.source) for v in _versions(storage, "r")] == [
        (2, "merge", '{"a":1,"b":2}', None),
        (1, "set", '{"a":1}', {"agent": "x"}),
    ]
    assert [(v.version, v.content, v.thread_id) for v in _versions(storage, "r", "t")] == [
        (2, "plain", "t"),
        (1, '{"c":3}', "t"),
    ]
    stored = fake_client[storage.database][HISTORY].find_one({"memory_id": "r", "version": 1})
    assert stored is not None and stored["source"] == '{"agent":"x"}' and stored["scope"] == "resource"
    assert _port(storage).bodies == 4


def test_fake_refused_writes_record_nothing(fake_client: mongomock.MongoClient) -> None:
    storage = _storage(fake_client)
    storage.create_thread(Thread("t", "owner", "title", None, T0, T0))
    with pytest.raises(ThreadOwnershipError):
        storage.merge_working_memory({"b": 1}, scope="thread", resource_id="intruder", thread_id="t")
    with pytest.raises(ThreadNotFoundError):
        storage.merge_working_memory({"b": 1}, scope="thread", resource_id="owner", thread_id="missing")
    with pytest.raises(WorkmemError):
        storage.merge_working_memory({"big": "x" * 100}, scope="resource", resource_id="owner", max_chars=10)
    assert fake_client[storage.database][HISTORY].count_documents({}) == 0


def test_fake_retention_and_restore(fake_client: mongomock.MongoClient) -> None:
    storage = _storage(fake_client, keep=3)
    for n in range(1, 8):
        storage.set_working_memory(f"v{n}", scope="resource", resource_id="r")
    assert [v.version for v in _versions(storage, "r")] == [7, 6, 5]
    assert fake_client[storage.database][HISTORY].count_documents({}) == 3
    assert storage.restore_working_memory(5, scope="resource", resource_id="r") == "v5"
    newest = _versions(storage, "r")[0]
    assert (newest.version, newest.kind, newest.content, newest.source) == (8, "restore", "v5", {"restoredFrom": 5})


def test_fake_delete_thread_takes_its_history(fake_client: mongomock.MongoClient) -> None:
    storage = _storage(fake_client)
    storage.create_thread(Thread("t", "r", "title", None, T0, T0))
    storage.merge_working_memory({"a": 1}, scope="thread", resource_id="r", thread_id="t")
    storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
    assert storage.delete_thread("t")
    assert fake_client[storage.database][HISTORY].count_documents({"scope": "thread"}) == 0
    assert len(_versions(storage, "r")) == 1  # the resource's own history stays


@pytest.mark.parametrize("transactions", [True, False], ids=["transaction", "three-deletes"])
def test_fake_delete_resource_erases_the_user_only(fake_client: mongomock.MongoClient, transactions: bool) -> None:
    storage = _storage(fake_client)
    for user in ("alice", "bob"):
        storage.merge_working_memory({"name": user}, scope="resource", resource_id=user)
        for n in range(2):
            storage.create_thread(Thread(f"{user}-{n}", user, "title", None, T0, T0))
            storage.merge_working_memory({"n": n}, scope="thread", resource_id=user, thread_id=f"{user}-{n}")
    _port(storage).transactions = transactions  # recorded with transactions; erased with or without them
    storage._transactions = None  # delete_resource asks (hello)
    bodies = _port(storage).bodies
    assert storage.delete_resource("alice") == ErasedResource("alice", True, ("alice-0", "alice-1"), 3)
    assert _port(storage).bodies == bodies + (1 if transactions else 0)
    assert storage.delete_resource("alice") == ErasedResource("alice", False, (), 0)
    assert storage.get_resource("alice") is None and storage.list_threads("alice").total == 0
    assert storage.list_threads("bob").total == 2 and len(_versions(storage, "bob")) == 1
    assert fake_client[storage.database][HISTORY].count_documents({"resource_id": "alice"}) == 0


def test_fake_insert_versions_skips_present_ones(fake_client: mongomock.MongoClient) -> None:
    storage = _storage(fake_client)
    versions = [
        MemoryVersion("r", None, 2, "two", T0, "import", {"k": [1]}),
        MemoryVersion("r", "t", 1, None, T0, "set"),
    ]
    assert run_sync(storage._insert_versions(versions)) == 2
    assert run_sync(storage._insert_versions(versions)) == 0
    assert run_sync(storage._history(HistoryKey("r"), 10, None)) == versions[:1]
    assert run_sync(storage._history(HistoryKey("r", "t"), 10, None)) == versions[1:]
    storage.set_working_memory("next", scope="resource", resource_id="r")
    assert _versions(storage, "r")[0].version == 3  # numbered above the newest, imported or not


def test_fake_history_needs_transactions(fake_client: mongomock.MongoClient, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = MongoStorage(fake_client, f"fake_{uuid.uuid4().hex}")
    storage._db = FakeTransactions(fake_client, storage.database, transactions=False)
    with pytest.raises(OperationNotSupportedError, match="transactions"):
        storage.history = HistoryPolicy()  # the sync storage asks the server (hello) when history is turned on
    assert storage.history is None
    storage.history = None  # turning it off needs nothing

    # connect(url, history=True) on a standalone: refused, the storage closed.
    closed: list[bool] = []
    opened = MongoStorage(fake_client, f"fake_{uuid.uuid4().hex}")
    opened._db = FakeTransactions(fake_client, opened.database, transactions=False)
    monkeypatch.setattr(MongoStorage, "from_url", classmethod(lambda cls, url, **options: opened))
    monkeypatch.setattr(opened, "close", lambda: closed.append(True))
    with pytest.raises(OperationNotSupportedError, match="standalone"):
        workmem.connect("mongodb://127.0.0.1:1/db", history=True)
    assert closed == [True]

    # A server that refuses the transaction itself (the async storage cannot ask first): nothing written.
    errors = pytest.importorskip("pymongo.errors")
    storage = _storage(fake_client)
    _port(storage).refusal = errors.OperationFailure("Transaction numbers are only allowed on a replica set", 20)
    with pytest.raises(OperationNotSupportedError, match="nothing was written"):
        storage.set_working_memory("x", scope="resource", resource_id="r")
    assert storage.get_resource("r") is None and storage._transactions is False


def test_unit_hello_replies_that_have_transactions() -> None:
    assert port_module._has_transactions({"setName": "rs0", "logicalSessionTimeoutMinutes": 30})
    assert port_module._has_transactions({"msg": "isdbgrid", "logicalSessionTimeoutMinutes": 30})
    assert not port_module._has_transactions({"isWritablePrimary": True, "logicalSessionTimeoutMinutes": 30})
    assert not port_module._has_transactions({"setName": "rs0"})  # no sessions


def test_unit_version_documents_round_trip() -> None:
    key = HistoryKey("r", "t")
    document = version_document(key, 4, "text", T0, "merge", '{"a":{"b.c":1}}')
    assert document == {
        "resource_id": "r",
        "scope": "thread",
        "memory_id": "t",
        "version": 4,
        "content": "text",
        "changed_at": T0,
        "kind": "merge",
        "source": '{"a":{"b.c":1}}',
    }
    assert version_from_document(document) == MemoryVersion("r", "t", 4, "text", T0, "merge", {"a": {"b.c": 1}})
    with pytest.raises(WorkmemError):
        version_from_document({**document, "changed_at": "not a date"})


def test_unit_the_transaction_calls_bind_to_the_installed_pymongo() -> None:
    """``with_transaction`` and ``start_session`` take what the ports pass, sync and async; ``session=`` is accepted
    by every collection method the ports call."""
    from pymongo import AsyncMongoClient, MongoClient
    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.client_session import ClientSession
    from pymongo.collection import Collection

    options = port_module._transaction_options()
    for session in (ClientSession, AsyncClientSession):
        inspect.signature(session.with_transaction).bind(object(), lambda s: None, **options)
    assert inspect.iscoroutinefunction(AsyncClientSession.with_transaction)
    for client in (MongoClient, AsyncMongoClient):
        inspect.signature(client.start_session).bind(object())
    for collection in (Collection, AsyncCollection):
        for name in ("find_one", "find_one_and_update", "insert_one", "insert_many", "update_one", "delete_one",
                     "delete_many", "find_one_and_delete", "find", "count_documents"):  # fmt: skip
            parameters = inspect.signature(getattr(collection, name)).parameters.values()
            assert any(p.name == "session" or p.kind is p.VAR_KEYWORD for p in parameters), name


class _Session:
    """FAKE ``ClientSession``/``AsyncClientSession``: ``with_transaction`` calls the callback once."""

    def __init__(self) -> None:
        self.options: dict[str, Any] = {}

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aenter__(self) -> _Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def with_transaction(self, callback: Callable[[Any], Any], **options: Any) -> Any:
        self.options = options
        return callback(self)


class _AsyncSession(_Session):
    async def with_transaction(self, callback: Callable[[Any], Any], **options: Any) -> Any:  # type: ignore[override]
        self.options = options
        return await callback(self)


def test_unit_the_ports_run_the_body_in_one_session(fake_client: mongomock.MongoClient) -> None:
    """Both ports hand the body a port whose every collection carries the transaction's session, with snapshot
    reads and majority writes (FAKE sessions: wiring, not MongoDB)."""
    from workmem.adapters.mongodb.port import AwaitedDatabase

    for database_class, session in ((BlockingDatabase, _Session()), (AwaitedDatabase, _AsyncSession())):
        fake_client.start_session = lambda session=session: session  # type: ignore[method-assign]
        database = database_class(fake_client, "db")

        async def body(bound: DatabasePort, session: _Session = session) -> str:
            collections = (bound.threads, bound.resources, bound.history)
            assert all(getattr(c, "session", None) is session for c in collections)
            return "committed"

        assert database.threads.session is None
        if database_class is BlockingDatabase:
            assert run_sync(database.transaction(body)) == "committed"
        else:
            import asyncio

            assert asyncio.run(database.transaction(body)) == "committed"
        assert str(session.options["read_concern"].level) == "snapshot"
        assert session.options["write_concern"].document == {"w": "majority"}


def test_unit_opening_asks_the_server_so_connect_refuses_history_on_a_standalone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``from_url``/``open`` ask (``hello``) as they open: ``connect(url, history=True)`` and ``connect_async``
    refuse a standalone server at once, and close what they opened (no server here: the probe answers "standalone")."""
    import asyncio
    import socket

    from workmem.adapters.mongodb.storage import MongoHooks

    asked: list[str] = []

    async def standalone(self: MongoHooks) -> None:
        asked.append(type(self).__name__)
        self._transactions = False

    async def nothing(self: MongoHooks) -> None:
        pass

    monkeypatch.setattr(MongoHooks, "_probe", standalone)
    monkeypatch.setattr(MongoHooks, "_create_indexes", nothing)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"mongodb://127.0.0.1:{sock.getsockname()[1]}/db"
    with pytest.raises(OperationNotSupportedError, match="standalone"):
        workmem.connect(url, history=True)
    with pytest.raises(OperationNotSupportedError, match="standalone"):
        asyncio.run(workmem.connect_async(url, history=5))
    assert asked == ["MongoStorage", "AsyncMongoStorage"]
    with workmem.connect(url) as storage:  # without history: opens as before
        assert storage.history is None
