"""FAKE, NOT CONFORMANCE: the MongoDB adapter's code paths run against mongomock, an in-process imitation.

mongomock is not MongoDB: it implements no real wire protocol, no real BSON
round trip, no server-side atomicity between threads, and accepts some updates a
server would reject (or the reverse). Passing here says the adapter's Python is
wired correctly; only ``test_mongodb_server.py`` / ``test_conformance_backends.py``
against a real server say the adapter is correct.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import mongomock
import pytest
from test_mongodb_behaviour import MongoBehaviour

from workmem import Thread, WorkingMemoryTooLargeError
from workmem.adapters.mongodb.storage import MongoStorage
from workmem.validation import dump_json


@pytest.fixture
def fake_client() -> Iterator[mongomock.MongoClient]:
    client = mongomock.MongoClient(tz_aware=True)
    yield client
    client.close()


@pytest.fixture
def storage(fake_client: mongomock.MongoClient) -> MongoStorage:
    return MongoStorage(fake_client, f"fake_{uuid.uuid4().hex}")


@pytest.fixture
def open_storage(fake_client: mongomock.MongoClient, storage: MongoStorage) -> Callable[[], MongoStorage]:
    # One shared fake client: mongomock has no server, so "more connections" are more adapter objects.
    return lambda: MongoStorage(fake_client, storage.database)


class TestFakeMongomock(MongoBehaviour):
    """The shared MongoDB checks against mongomock (FAKE: never counts as conformance)."""

    @pytest.fixture(autouse=True)
    def _label(self, request: pytest.FixtureRequest) -> None:
        if "concurrent" in request.node.name or "racing" in request.node.name:
            pytest.skip("FAKE mongomock: updates are not atomic between threads, so concurrency means nothing here")

    def test_fake_mongomock_indexes_created_idempotently(self, storage: MongoStorage) -> None:
        MongoStorage(storage._client, storage.database)  # second open: no error, same indexes
        threads = storage._client[storage.database]["mastra_threads"].index_information()
        resources = storage._client[storage.database]["mastra_resources"].index_information()
        assert threads["id_1"].get("unique") is True
        assert threads["resourceId_1_createdAt_-1"]["key"] == [("resourceId", 1), ("createdAt", -1)]
        assert threads["resourceId_1_updatedAt_-1"]["key"] == [("resourceId", 1), ("updatedAt", -1)]
        assert resources["id_1"].get("unique") is True


CONCURRENCY_MODULES = ("workmem.conformance.concurrency", "workmem.conformance.processes", "workmem.conformance.churn")


def test_fake_mongomock_contract_smoke(fake_client: mongomock.MongoClient, storage: MongoStorage) -> None:
    """FAKE: the suite's single-connection checks through mongomock, to shake out adapter bugs (not conformance)."""
    from workmem.conformance import all_checks, run

    # History on MongoDB needs multi-document transactions (and the erasure checks record history), while
    # mongomock has no sessions and answers no hello: those checks are left out here. test_mongodb_history.py
    # runs their paths on mongomock with a stand-in transaction (FAKE too).
    names = [
        c.name
        for c in all_checks()
        if c.func.__module__ not in CONCURRENCY_MODULES and getattr(c, "capability", None) not in ("history", "erase")
    ]
    report = run(lambda: MongoStorage(fake_client, storage.database, create_indexes=False), profile="quick", only=names)
    assert [(c.name, c.reason) for c in report.checks if c.status != "passed"] == []


def test_fake_mongomock_a_delete_naming_the_owner_of_a_thread_created_meanwhile_returns_false(
    storage: MongoStorage, open_storage: Callable[[], MongoStorage], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conditioned delete matched nothing; a thread created under that very owner before the adapter's
    follow-up read must not make it raise ThreadOwnershipError (it saw no thread at all)."""
    from workmem import Thread

    other = open_storage()
    threads = storage._db.threads
    real = threads.delete_one

    async def delete_then_create(filter: dict[str, object]) -> int:
        deleted = await real(filter)
        other.create_thread(Thread("t", "b", "created meanwhile"))
        return deleted

    monkeypatch.setattr(threads, "delete_one", delete_then_create)
    assert storage.delete_thread("t", resource_id="b") is False


def test_fake_mongomock_max_chars_paths(fake_client: mongomock.MongoClient, storage: MongoStorage) -> None:
    """FAKE: the adapter's max_chars paths (merge, replace, update_resource/update_thread) through the suite's
    fixed examples, against mongomock (code paths, not conformance: no race is meaningful here)."""
    from workmem.conformance import run

    report = run(lambda: MongoStorage(fake_client, storage.database, create_indexes=False), only=["max_chars_rules"])
    assert [(c.name, c.status, c.reason) for c in report.checks] == [("max_chars_rules", "passed", None)]


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_fake_mongomock_max_chars_is_decided_on_the_document_the_compare_and_set_writes_over(
    fake_client: mongomock.MongoClient, storage: MongoStorage, scope: str
) -> None:
    """FAKE: another writer merges between the adapter's read and its conditional update; the update misses,
    the retry reads again and decides the limit on what is stored then: the grown memory refuses the merge."""
    other = MongoStorage(fake_client, storage.database)
    at: dict[str, Any] = {"scope": scope, "resource_id": "u"}
    if scope == "thread":
        storage.create_thread(Thread("t", "u"))
        at["thread_id"] = "t"
    storage.merge_working_memory({"a": "x" * 20}, **at)  # 30 characters stored
    collection = storage._db.resources if scope == "resource" else storage._db.threads
    read = collection.find_one
    slipped: list[bool] = []

    async def find_one(filter: Any, projection: Any = None) -> Any:
        document = await read(filter, projection)
        if not slipped:  # once: between this read and the write, another writer grows the memory
            slipped.append(True)
            other.merge_working_memory({"b": "y" * 20}, **at)
        return document

    collection.find_one = find_one  # type: ignore[method-assign]
    with pytest.raises(WorkingMemoryTooLargeError) as info:
        storage.merge_working_memory({"c": 1}, **at, max_chars=40)  # 36 as first read: it would fit
    both = {"a": "x" * 20, "b": "y" * 20}
    assert (info.value.current, info.value.size) == (len(dump_json(both)), len(dump_json({**both, "c": 1})))
    assert slipped == [True]
    assert json.loads(other.get_working_memory(**at) or "") == both


def test_fake_mongomock_a_listing_that_reaches_the_end_counts_in_that_read(
    storage: MongoStorage, open_storage: Callable[[], MongoStorage], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page shorter than ``per_page`` (every full listing) has its ``total`` from the one ``find``; only a
    full page, or an empty one past the end, is counted again, and threads deleted between the two reads
    never make ``total`` fall below what the page showed. (FAKE: the calls' order is the adapter's own.)"""
    for i in range(3):
        storage.save_thread(Thread(f"t{i}", "r", f"n{i}"))
    other = open_storage()
    threads = storage._db.threads
    real = threads.count_documents
    meanwhile = [["t0", "t1"], ["t2"]]  # deleted between the page and its count, one list per count
    counted: list[int] = []

    async def count_after_deletes(filter: dict[str, object]) -> int:
        for thread_id in meanwhile[len(counted)]:
            other.delete_thread(thread_id)
        counted.append(await real(filter))
        return counted[-1]

    monkeypatch.setattr(threads, "count_documents", count_after_deletes)
    full = storage.list_threads("r", per_page=None)
    assert (len(full.threads), full.total, counted) == (3, 3, [])
    last = storage.list_threads("r", page=1, per_page=2)
    assert (len(last.threads), last.total, last.has_more, counted) == (1, 3, False, [])
    first = storage.list_threads("r", page=0, per_page=2)  # full: counted (1) after two deletes
    assert (len(first.threads), first.total, first.has_more, counted) == (2, 2, False, [1])
    past = storage.list_threads("r", page=9, per_page=2)  # empty past the end: counted (0) after the last delete
    assert (past.threads, past.total, counted) == ((), 0, [1, 0])
