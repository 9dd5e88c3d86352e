"""MongoDB adapter checks shared by the real-server tests and the mongomock fake.

Nothing here is collected on its own: ``test_mongodb_server.py`` runs these
checks against a real MongoDB (``TestMongoServer``), ``test_mongodb_fake.py``
against mongomock (``TestFakeMongomock``, which is not conformance). Subclasses
provide the fixtures ``storage`` (a fresh database) and ``open_storage`` (a
factory for more connections to the same database).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workmem.adapters.mongodb.documents import RESOURCES, THREADS
from workmem.adapters.mongodb.storage import MongoStorage
from workmem.errors import (
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
    WorkingMemoryFormatError,
)
from workmem.merge_patch import apply_merge_patch
from workmem.records import Resource, Thread
from workmem.timestamps import utc_now

__all__ = ["MongoBehaviour"]

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

ODD_METADATA: dict[str, Any] = {
    "a.b": 1,
    "$set": {"$inc": 2, "x.y": [1, {"$ref": "not-a-dbref"}]},
    "$ref": "looks",
    "$id": "like a DBRef",
    "nested": {"$ref": "coll", "$id": 7},
    "max": 2**53 - 1,
    "min": -(2**53 - 1),
    "float": 0.1,
    "whole_float": 1.0,
    "huge": 1.7976931348623157e308,
    "text": "$notAFieldPath ünïcødé 😀",
    "flags": [True, False, None],
    "empty": {},
    "": "an empty key",
}


def raw(storage: MongoStorage, collection: str, record_id: str) -> dict[str, Any] | None:
    """The stored document, read around the adapter."""
    document = storage._client[storage.database][collection].find_one({"id": record_id}, {"_id": 0})
    return document


class MongoBehaviour:
    """The checks; subclasses supply ``storage`` and ``open_storage`` fixtures."""

    concurrent_writers = 16

    # -- document shapes (interop with @mastra/mongodb) -----------------------------------

    def test_thread_document_shape(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "r", "title", {"k": [1, 2]}, T0, T0 + timedelta(seconds=1)))
        document = raw(storage, THREADS, "t")
        assert document is not None
        assert document["resourceId"] == "r"
        assert document["title"] == "title"
        assert document["metadata"] == {"k": [1, 2]}  # a native sub-document
        assert isinstance(document["createdAt"], datetime)
        assert document["createdAt"] == T0
        assert document["updatedAt"] == T0 + timedelta(seconds=1)

    def test_resource_document_shape(self, storage: MongoStorage) -> None:
        storage.save_resource(Resource("r", "# notes", {"plan": "pro"}, T0, T0))
        document = raw(storage, RESOURCES, "r")
        assert document is not None
        assert document["workingMemory"] == "# notes"
        assert document["metadata"] == '{"plan":"pro"}'  # a JSON string, as Mastra writes it
        assert document["createdAt"] == T0

    def test_reads_documents_written_by_mastra(self, storage: MongoStorage) -> None:
        db = storage._client[storage.database]
        db[RESOURCES].insert_one(
            {"id": "r1", "workingMemory": "", "metadata": '{"a":1}', "createdAt": T0, "updatedAt": T0}
        )
        db[RESOURCES].insert_one(
            {"id": "r2", "workingMemory": "x", "metadata": {"b": 2}, "createdAt": T0, "updatedAt": T0}
        )
        db[THREADS].insert_one(
            {"id": "t1", "resourceId": "r1", "title": "", "metadata": {"c": 3}, "createdAt": T0, "updatedAt": T0}
        )
        assert storage.get_resource("r1") == Resource("r1", "", {"a": 1}, T0, T0)
        assert storage.get_resource("r2") == Resource("r2", "x", {"b": 2}, T0, T0)
        assert storage.get_thread("t1") == Thread("t1", "r1", "", {"c": 3}, T0, T0)
        # and the compare-and-swap writes work on documents without workmem's revision field
        assert storage.update_resource("r2", metadata={"d": 4}).metadata == {"b": 2, "d": 4}
        assert storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t1") == {"x": 1}
        assert storage.update_thread("t1", metadata={"e": 5}).metadata == {"c": 3, "workingMemory": '{"x":1}', "e": 5}

    # -- values -----------------------------------------------------------------------

    def test_metadata_keys_with_dots_and_dollars_round_trip(self, storage: MongoStorage) -> None:
        thread = Thread("t", "r", "", ODD_METADATA, T0, T0)
        assert storage.save_thread(thread) == thread
        assert storage.get_thread("t") == thread
        replaced = storage.save_thread(Thread("t", "r", "again", {"c.d": {"$e": 1}}, T0, T0))
        assert replaced.metadata == {"c.d": {"$e": 1}}
        updated = storage.update_thread("t", metadata={"$x": 1, "f.g": 2})
        assert updated.metadata == {"c.d": {"$e": 1}, "$x": 1, "f.g": 2}
        assert storage.get_thread("t") == updated
        storage.save_resource(Resource("r", None, ODD_METADATA, T0, T0))
        resource = storage.get_resource("r")
        assert resource is not None and resource.metadata == ODD_METADATA
        assert storage.update_resource("r", metadata={"$y.z": 3}).metadata == {**ODD_METADATA, "$y.z": 3}

    def test_numbers_keep_their_type(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "r", "", ODD_METADATA, T0, T0))
        thread = storage.get_thread("t")
        assert thread is not None and thread.metadata is not None
        for key in ("max", "min", "float", "whole_float", "huge"):
            assert thread.metadata[key] == ODD_METADATA[key]
            assert type(thread.metadata[key]) is type(ODD_METADATA[key]), key

    def test_timestamps_are_utc_aware_milliseconds(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "r", "", None, T0, T0))
        thread = storage.get_thread("t")
        assert thread is not None
        assert thread.created_at == T0 and thread.created_at.utcoffset() == timedelta(0)

    # -- threads ----------------------------------------------------------------------

    def test_save_thread_replaces_same_owner(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "r", "one", {"a": 1}, T0, T0))
        before = utc_now()
        saved = storage.save_thread(Thread("t", "r", "two", {"b": 2}, T0 + timedelta(days=9), T0))
        assert (saved.title, saved.metadata, saved.created_at) == ("two", {"b": 2}, T0)
        assert saved.updated_at >= before
        assert storage.get_thread("t") == saved

    def test_create_thread_is_insert_only(self, storage: MongoStorage) -> None:
        created = storage.create_thread(Thread("c1", "r1", "first", {"k": 1}))
        for owner in ("r1", "r2"):
            with pytest.raises(ThreadExistsError):
                storage.create_thread(Thread("c1", owner, "second"))
        assert storage.get_thread("c1") == created
        assert storage._threads.count_documents({"id": "c1"}) == 1

    def test_save_thread_other_owner_changes_nothing(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "owner", "mine", {"a": 1}, T0, T0))
        before = raw(storage, THREADS, "t")
        with pytest.raises(ThreadOwnershipError):
            storage.save_thread(Thread("t", "intruder", "theirs", {"b": 2}, T0, T0))
        assert raw(storage, THREADS, "t") == before
        assert storage.get_thread("t", resource_id="intruder") is None
        assert storage.get_thread("t", resource_id="owner") is not None

    def test_update_thread(self, storage: MongoStorage) -> None:
        with pytest.raises(ThreadNotFoundError):
            storage.update_thread("missing", title="x")
        with pytest.raises(ThreadNotFoundError):
            storage.update_thread("missing", metadata={"a": 1})
        storage.save_thread(Thread("t", "r", "old", {"a": 1, "b": 2}, T0, T0))
        updated = storage.update_thread("t", metadata={"b": 3, "c": 4})
        assert (updated.title, updated.metadata, updated.created_at) == ("old", {"a": 1, "b": 3, "c": 4}, T0)
        assert updated.updated_at > T0
        retitled = storage.update_thread("t", title="new", metadata=None)
        assert (retitled.title, retitled.metadata) == ("new", {"a": 1, "b": 3, "c": 4})
        assert storage.get_thread("t") == retitled
        with pytest.raises(ValidationError):
            storage.update_thread("t", metadata={"bad": float("nan")})

    def test_delete_thread(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "r"))
        assert storage.delete_thread("t") is True
        assert storage.delete_thread("t") is False
        assert storage.get_thread("t") is None

    @pytest.mark.parametrize("order_by", ["created_at", "updated_at"])
    @pytest.mark.parametrize("direction", ["asc", "desc"])
    def test_list_threads_order_and_pages(self, storage: MongoStorage, order_by: str, direction: str) -> None:
        threads = [
            Thread(f"t{i}", "r", "", None, T0 + timedelta(seconds=i % 3), T0 + timedelta(seconds=-(i % 4)))
            for i in range(10)
        ]
        for thread in threads:
            storage.save_thread(thread)
        storage.save_thread(Thread("other", "r2", "", None, T0, T0))
        expected = sorted(threads, key=lambda t: (getattr(t, order_by), t.id), reverse=direction == "desc")
        pages = [
            storage.list_threads("r", page=p, per_page=4, order_by=order_by, direction=direction) for p in range(3)
        ]  # type: ignore[arg-type]
        assert [t for page in pages for t in page.threads] == expected
        assert [(p.total, p.has_more, len(p.threads)) for p in pages] == [(10, True, 4), (10, True, 4), (10, False, 2)]
        everything = storage.list_threads("r", per_page=None, order_by=order_by, direction=direction)  # type: ignore[arg-type]
        assert list(everything.threads) == expected and not everything.has_more
        assert storage.list_threads("nobody").total == 0

    # -- resources --------------------------------------------------------------------

    def test_update_resource(self, storage: MongoStorage) -> None:
        created = storage.update_resource("r", working_memory="# wm")
        assert (created.working_memory, created.metadata) == ("# wm", None)
        merged = storage.update_resource("r", metadata={"a": 1})
        assert (merged.working_memory, merged.metadata, merged.created_at) == ("# wm", {"a": 1}, created.created_at)
        merged = storage.update_resource("r", metadata={"b": 2}, working_memory=None)
        assert (merged.working_memory, merged.metadata) == (None, {"a": 1, "b": 2})
        assert storage.get_resource("r") == merged
        fresh = storage.update_resource("new", metadata={"c": 3})
        assert (fresh.working_memory, fresh.metadata) == (None, {"c": 3})
        assert storage.get_resource("new") == fresh

    def test_save_resource_replaces_whole(self, storage: MongoStorage) -> None:
        storage.save_resource(Resource("r", "one", {"a": 1}, T0, T0))
        second = Resource("r", None, None, T0 + timedelta(days=1), T0 + timedelta(days=2))
        assert storage.save_resource(second) == second
        assert storage.get_resource("r") == second

    # -- working memory ---------------------------------------------------------------

    def test_merge_resource_scope(self, storage: MongoStorage) -> None:
        document: Any = {}
        for patch in (
            {"a": {"b": 1, "c": [1, 2]}, "d": 0.5},
            {"a": {"b": None, "e": "x"}},
            {"a": {"c": [3]}, "d": None},
        ):
            document = apply_merge_patch(document, patch)
            assert storage.merge_working_memory(patch, scope="resource", resource_id="r") == document
        assert storage.get_working_memory(scope="resource", resource_id="r") == '{"a":{"c":[3],"e":"x"}}'

    def test_merge_thread_scope_keeps_other_metadata(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "r", "", {"a.b": 1, "$c": 2}, T0, T0))
        assert storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t", resource_id="r") == {"x": 1}
        assert storage.merge_working_memory({"y": 2}, scope="thread", thread_id="t") == {"x": 1, "y": 2}
        thread = storage.get_thread("t")
        assert thread is not None and thread.metadata == {"a.b": 1, "$c": 2, "workingMemory": '{"x":1,"y":2}'}
        assert thread.updated_at > T0

    def test_merge_thread_scope_errors_change_nothing(self, storage: MongoStorage) -> None:
        with pytest.raises(ThreadNotFoundError):
            storage.merge_working_memory({"x": 1}, scope="thread", thread_id="missing")
        storage.save_thread(Thread("t", "r", "", {"workingMemory": "[1, 2]"}, T0, T0))
        before = raw(storage, THREADS, "t")
        with pytest.raises(ThreadOwnershipError):
            storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t", resource_id="someone-else")
        with pytest.raises(WorkingMemoryFormatError):
            storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t")
        assert raw(storage, THREADS, "t") == before

    def test_merge_non_json_resource_changes_nothing(self, storage: MongoStorage) -> None:
        storage.save_resource(Resource("r", "# markdown, not JSON", None, T0, T0))
        before = raw(storage, RESOURCES, "r")
        with pytest.raises(WorkingMemoryFormatError):
            storage.merge_working_memory({"x": 1}, scope="resource", resource_id="r")
        assert raw(storage, RESOURCES, "r") == before
        storage.save_resource(Resource("blank", "  \n", None, T0, T0))
        assert storage.merge_working_memory({"x": 1}, scope="resource", resource_id="blank") == {"x": 1}

    # -- iteration and bulk writes -------------------------------------------------------

    def test_iteration_in_codepoint_order_over_pages(self, storage: MongoStorage) -> None:
        db = storage._client[storage.database]
        ids = ["a", "B", "b", "é", "z", "ä", "😀", "a:b", "10", "9", "ab", "aa", "-", "_", "Z", "t 1", "\U0010ffff"]
        for n, record_id in enumerate(ids[:8]):
            storage.save_thread(Thread(record_id, f"r{n % 2}", f"t{n}", {"n": n}, T0, T0))
            storage.save_resource(Resource(record_id, None, {"n": n}, T0, T0))
        for record_id in ids[8:]:  # as @mastra/mongodb writes them: no workmem revision
            db[THREADS].insert_one(
                {"id": record_id, "resourceId": "m", "title": "", "metadata": {}, "createdAt": T0, "updatedAt": T0}
            )
            db[RESOURCES].insert_one({"id": record_id, "metadata": '{"a":1}', "createdAt": T0, "updatedAt": T0})
        db[THREADS].insert_one({"id": "~no-owner", "title": "", "createdAt": T0, "updatedAt": T0})  # unreadable
        db[THREADS].insert_one({"id": 7, "resourceId": "m"})  # not a string id: never iterated
        want = sorted(ids, key=lambda text: [ord(c) for c in text])
        for page_size in (1, 3, 17, 18, 500):
            assert [t.id for t in storage.iter_threads(page_size=page_size)] == want, page_size
            assert [r.id for r in storage.iter_resources(page_size=page_size)] == want, page_size
        seen: list[str] = []
        unreadable: list[str] = []
        after: str | None = None
        pages = 0
        while True:
            page = storage.threads_after(after, limit=4)
            seen += [t.id for t in page.records]
            unreadable += page.unreadable
            pages += 1
            if page.next_after is None:
                break
            after = page.next_after
        assert seen == want and unreadable == ["~no-owner"] and pages == 5  # 18 string ids: 4 full pages, then 2
        resources = {r.id: r for r in storage.iter_resources(page_size=5)}
        assert resources["10"] == Resource("10", None, {"a": 1}, T0, T0)

    def test_bulk_insert_reports_present_ids_and_never_moves_a_thread(self, storage: MongoStorage) -> None:
        kept = storage.save_thread(Thread("mine", "alice", "original", {"v": 1}, T0, T0))
        storage.save_resource(Resource("alice", "# A", {"a": 1}, T0, T0))
        before = raw(storage, THREADS, "mine")
        created, updated = T0 - timedelta(days=3), T0 + timedelta(hours=5, milliseconds=123)
        threads = [Thread(f"new-{n:04d}", f"bob-{n % 3}", f"n{n}", {"n": n}, created, updated) for n in range(30)]
        threads.insert(7, Thread("mine", "bob-0", "stolen?", None, created, updated))
        assert storage.insert_threads(threads) == frozenset({"mine"})
        assert storage.get_thread("mine") == kept and raw(storage, THREADS, "mine") == before
        assert storage.get_thread("new-0007") == Thread("new-0007", "bob-1", "n7", {"n": 7}, created, updated)
        assert storage.list_threads("bob-2", per_page=None).total == 10
        assert storage.insert_threads(threads[:3]) == frozenset(t.id for t in threads[:3])
        assert storage.insert_threads([]) == frozenset()
        resources = [Resource(f"res-{n}", f"# {n}", {"n": n}, created, updated) for n in range(3)]
        resources.append(Resource("alice", None, None, created, updated))
        assert storage.insert_resources(resources) == frozenset({"alice"})
        assert storage.get_resource("alice") == Resource("alice", "# A", {"a": 1}, T0, T0)
        assert storage.get_resource("res-1") == resources[1]
        document = raw(storage, RESOURCES, "res-1")
        assert document is not None and document["metadata"] == '{"n":1}'  # Mastra's JSON string
        # the documents bulk writes make are the ones single writes make, and single writes work on them
        assert storage.update_thread("new-0001", metadata={"x": 1}).metadata == {"n": 1, "x": 1}

    def test_replace_thread_only_for_its_owner(self, storage: MongoStorage) -> None:
        storage.save_thread(Thread("t", "owner", "old", {"a": 1}, T0, T0))
        new = Thread("t", "owner", "new", {"b": [1], "c.d": {"$e": 1}}, T0 - timedelta(days=1), T0 + timedelta(days=2))
        assert storage.restore_thread(new) is True
        assert storage.get_thread("t") == new
        before = raw(storage, THREADS, "t")
        assert storage.restore_thread(Thread("t", "thief", "x", None, T0, T0)) is False
        assert raw(storage, THREADS, "t") == before
        assert storage.restore_thread(Thread("missing", "owner", "x", None, T0, T0)) is False
        assert storage.get_thread("missing") is None
        assert storage.update_thread("t", metadata={"z": 0}).metadata == {"b": [1], "c.d": {"$e": 1}, "z": 0}

    # -- concurrency ------------------------------------------------------------------

    def _run_concurrently(self, workers: list[Callable[[], object]]) -> list[BaseException]:
        barrier = threading.Barrier(len(workers))
        failures: list[BaseException] = []

        def run(work: Callable[[], object]) -> None:
            barrier.wait()
            try:
                work()
            except BaseException as exc:
                failures.append(exc)

        pool = [threading.Thread(target=run, args=(work,)) for work in workers]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout=120)
        return failures

    @pytest.mark.parametrize("scope", ["resource", "thread"])
    def test_concurrent_merges_lose_nothing(
        self, storage: MongoStorage, open_storage: Callable[[], MongoStorage], scope: str
    ) -> None:
        storage.save_thread(Thread("t", "r", "", {"keep": True}, T0, T0))
        connections = [open_storage() for _ in range(self.concurrent_writers)]

        def writer(index: int) -> Callable[[], object]:
            connection = connections[index]
            return lambda: connection.merge_working_memory(
                {f"k{index}": index, "shared": {f"s{index}": [index]}},
                scope=scope,  # type: ignore[arg-type]
                resource_id="r",
                thread_id="t" if scope == "thread" else None,
            )

        failures = self._run_concurrently([writer(i) for i in range(self.concurrent_writers)])
        assert failures == []
        final = storage.merge_working_memory({}, scope=scope, resource_id="r", thread_id="t")  # type: ignore[arg-type]
        n = self.concurrent_writers
        assert final == {**{f"k{i}": i for i in range(n)}, "shared": {f"s{i}": [i] for i in range(n)}}
        if scope == "thread":
            thread = storage.get_thread("t")
            assert thread is not None and thread.metadata is not None and thread.metadata["keep"] is True

    def test_concurrent_metadata_updates_lose_nothing(
        self, storage: MongoStorage, open_storage: Callable[[], MongoStorage]
    ) -> None:
        storage.save_thread(Thread("t", "r", "", None, T0, T0))
        connections = [open_storage() for _ in range(self.concurrent_writers)]
        workers: list[Callable[[], object]] = []
        for i, connection in enumerate(connections):
            workers.append(lambda c=connection, i=i: c.update_thread("t", metadata={f"t{i}": i}))
            workers.append(lambda c=connection, i=i: c.update_resource("r", metadata={f"r{i}": i}))
        assert self._run_concurrently(workers) == []
        thread = storage.get_thread("t")
        resource = storage.get_resource("r")
        assert thread is not None and resource is not None
        assert thread.metadata == {f"t{i}": i for i in range(self.concurrent_writers)}
        assert resource.metadata == {f"r{i}": i for i in range(self.concurrent_writers)}

    def test_racing_owners_exactly_one_wins(
        self, storage: MongoStorage, open_storage: Callable[[], MongoStorage]
    ) -> None:
        connections = [open_storage() for _ in range(self.concurrent_writers)]
        outcomes: dict[int, str] = {}

        def claim(index: int) -> Callable[[], object]:
            def work() -> None:
                try:
                    connections[index].save_thread(Thread("contested", f"owner{index}", f"title{index}", None, T0, T0))
                    outcomes[index] = "won"
                except ThreadOwnershipError:
                    outcomes[index] = "refused"

            return work

        assert self._run_concurrently([claim(i) for i in range(self.concurrent_writers)]) == []
        winners = [i for i, outcome in outcomes.items() if outcome == "won"]
        assert len(outcomes) == self.concurrent_writers and len(winners) == 1
        thread = storage.get_thread("contested")
        assert thread is not None and (thread.resource_id, thread.title) == (f"owner{winners[0]}", f"title{winners[0]}")
