"""Working memory's history and delete_resource on the Upstash adapter (a real redis-server behind the REST bridge)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from upstash_fixtures import Bridge, bridge, losing_script_responses, raw_client, upstash_prefix, upstash_url

import workmem
from workmem import Thread, ThreadNotFoundError, ThreadOwnershipError
from workmem.adapters.upstash import AsyncUpstashStorage, UpstashStorage
from workmem.errors import WorkingMemoryFormatError, WorkmemError
from workmem.history import ErasedResource, HistoryKey, MemoryVersion
from workmem.kit import run_sync

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge", "upstash_prefix", "upstash_url"]

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


@pytest.fixture
def store(upstash_url: str) -> Iterator[UpstashStorage]:
    opened = workmem.connect(upstash_url, history=True)
    assert isinstance(opened, UpstashStorage)
    yield opened
    opened.close()


def _keys(bridge: Bridge, prefix: str) -> set[str]:
    client: Any = raw_client(bridge)
    found: set[str] = set()
    cursor = 0
    try:
        while True:
            cursor, keys = client.scan(cursor, match=f"{prefix}*", count=1000)
            found.update(k for k in keys if k.startswith(prefix))
            if cursor == 0:
                return found
    finally:
        client.close()


def _raw(bridge: Bridge, *command: Any) -> Any:
    client: Any = raw_client(bridge)
    try:
        return client.execute(list(command))
    finally:
        client.close()


def _versions(store: UpstashStorage, resource_id: str, thread_id: str | None = None) -> list[MemoryVersion]:
    scope = "resource" if thread_id is None else "thread"
    page = store.working_memory_history(scope=scope, resource_id=resource_id, thread_id=thread_id, limit=1000)
    return list(page.versions)


def test_every_change_records_one_version_in_its_script(store: UpstashStorage) -> None:
    source = {"agent": "a", "toolCallId": "c1"}
    store.set_working_memory('{"first":1}', scope="resource", resource_id="r", source=source)
    store.merge_working_memory({"k": 1}, scope="resource", resource_id="r", source={"agent": "b"})
    store.update_resource("r", metadata={"m": 1})  # no working memory: nothing recorded
    store.update_resource("r", working_memory='{"k":2}')
    versions = _versions(store, "r")
    assert [(v.version, v.kind, v.content) for v in versions] == [
        (3, "set", '{"k":2}'),
        (2, "merge", '{"first":1,"k":1}'),
        (1, "set", '{"first":1}'),
    ]
    assert versions[2].source == {"agent": "a", "toolCallId": "c1"} and versions[1].source == {"agent": "b"}
    assert versions[0].source is None and versions[0].changed_at.tzinfo is not None
    assert all(v.resource_id == "r" and v.thread_id is None for v in versions)

    store.create_thread(Thread("t", "r", "title", None, T0, T0))
    store.merge_working_memory({"a": 1}, scope="thread", resource_id="r", thread_id="t")
    store.set_working_memory("text", scope="thread", resource_id="r", thread_id="t", source={"threadId": "t"})
    store.update_thread("t", title="renamed")  # no working memory: nothing recorded
    store.update_thread("t", metadata={"workingMemory": "via update_thread"})
    thread_versions = _versions(store, "r", "t")
    assert [(v.version, v.kind, v.content, v.thread_id) for v in thread_versions] == [
        (3, "set", "via update_thread", "t"),
        (2, "set", "text", "t"),
        (1, "merge", '{"a":1}', "t"),
    ]
    assert _versions(store, "r")[0].version == 3  # the resource's own history is apart


def test_a_refused_write_records_nothing(store: UpstashStorage, bridge: Bridge, upstash_prefix: str) -> None:
    store.create_thread(Thread("t", "owner", "title", None, T0, T0))
    store.merge_working_memory({"a": 1}, scope="thread", resource_id="owner", thread_id="t")
    with pytest.raises(ThreadOwnershipError):
        store.merge_working_memory({"b": 1}, scope="thread", resource_id="intruder", thread_id="t")
    with pytest.raises(ThreadOwnershipError):
        store.set_working_memory("x", scope="thread", resource_id="intruder", thread_id="t")
    with pytest.raises(ThreadNotFoundError):
        store.merge_working_memory({"b": 1}, scope="thread", resource_id="owner", thread_id="missing")
    with pytest.raises(WorkmemError):  # over the size limit
        store.merge_working_memory({"big": "x" * 100}, scope="thread", resource_id="owner", thread_id="t", max_chars=20)
    store.set_working_memory("not json", scope="resource", resource_id="owner")
    with pytest.raises(WorkingMemoryFormatError):
        store.merge_working_memory({"b": 1}, scope="resource", resource_id="owner")
    assert [v.version for v in _versions(store, "owner", "t")] == [1]
    assert [v.content for v in _versions(store, "owner")] == ["not json"]
    history = f"{upstash_prefix}workmem:history:" + json.dumps(["owner", "missing"], separators=(",", ":"))
    assert history not in _keys(bridge, upstash_prefix)


def test_64_concurrent_merges_from_threads_make_versions_1_to_64(store: UpstashStorage, upstash_url: str) -> None:
    stores = [workmem.connect(upstash_url, history=True) for _ in range(8)]
    store.create_thread(Thread("t", "r", "title", None, T0, T0))
    errors: list[BaseException] = []

    def merge(worker: int) -> None:
        try:
            for n in range(8):
                key = f"w{worker}n{n}"
                stores[worker].merge_working_memory({key: n}, scope="resource", resource_id="r")
                stores[worker].merge_working_memory({key: n}, scope="thread", resource_id="r", thread_id="t")
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=merge, args=(w,)) for w in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for opened in stores:
        opened.close()
    assert not errors
    for thread_id in (None, "t"):
        versions = _versions(store, "r", thread_id)[::-1]
        assert [v.version for v in versions] == list(range(1, 65))
        documents = [json.loads(v.content or "") for v in versions]
        assert [len(d) for d in documents] == list(range(1, 65))  # each merge added one key: no merge lost
        assert all(documents[i].items() <= documents[i + 1].items() for i in range(63))
        scope = "resource" if thread_id is None else "thread"
        final = store.get_working_memory(scope=scope, resource_id="r", thread_id=thread_id)
        assert versions[-1].content == final


def test_64_concurrent_merges_from_async_tasks_make_versions_1_to_64(upstash_url: str) -> None:
    async def main() -> None:
        store = await workmem.connect_async(upstash_url, history=True)
        assert isinstance(store, AsyncUpstashStorage)
        try:
            await asyncio.gather(
                *(store.merge_working_memory({f"k{n}": n}, scope="resource", resource_id="r") for n in range(64))
            )
            page = await store.working_memory_history(scope="resource", resource_id="r", limit=100)
            versions = page.versions[::-1]
            assert [v.version for v in versions] == list(range(1, 65))
            assert [len(json.loads(v.content or "")) for v in versions] == list(range(1, 65))
            assert versions[-1].content == await store.get_working_memory(scope="resource", resource_id="r")
            assert page.next_before is None
            older = await store.working_memory_history(scope="resource", resource_id="r", limit=10, before=30)
            assert [v.version for v in older.versions] == list(range(29, 19, -1)) and older.next_before == 20
        finally:
            await store.close()

    asyncio.run(main())


def test_retention_keeps_the_newest_n_in_the_writing_script(
    upstash_url: str, bridge: Bridge, upstash_prefix: str
) -> None:
    with workmem.connect(upstash_url, history=5) as store:
        for n in range(12):
            store.set_working_memory(f"v{n + 1}", scope="resource", resource_id="r")
        versions = store.working_memory_history(scope="resource", resource_id="r", limit=100).versions
        assert [v.version for v in versions] == [12, 11, 10, 9, 8]
        assert [v.content for v in versions] == ["v12", "v11", "v10", "v9", "v8"]
    key = f"{upstash_prefix}workmem:history:" + json.dumps(["r", None], separators=(",", ":"))
    assert _raw(bridge, "ZCARD", key) == 5  # stored, not only returned


def test_restore_writes_the_old_text_as_a_new_version(store: UpstashStorage) -> None:
    for text in ("one", "two", "three"):
        store.set_working_memory(text, scope="resource", resource_id="r")
    assert store.restore_working_memory(1, scope="resource", resource_id="r", source={"agent": "ops"}) == "one"
    assert store.get_working_memory(scope="resource", resource_id="r") == "one"
    newest = _versions(store, "r")[0]
    assert (newest.version, newest.kind, newest.content) == (4, "restore", "one")
    assert newest.source == {"agent": "ops", "restoredFrom": 1}
    with pytest.raises(WorkmemError):
        store.restore_working_memory(99, scope="resource", resource_id="r")


def test_delete_thread_removes_its_history(store: UpstashStorage, bridge: Bridge, upstash_prefix: str) -> None:
    store.create_thread(Thread("t", "r", "title", None, T0, T0))
    store.merge_working_memory({"a": 1}, scope="thread", resource_id="r", thread_id="t")
    store.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
    history = f"{upstash_prefix}workmem:history:" + json.dumps(["r", "t"], separators=(",", ":"))
    index = f"{upstash_prefix}workmem:history_keys:r"
    assert history in _keys(bridge, upstash_prefix)
    assert store.delete_thread("t")
    assert history not in _keys(bridge, upstash_prefix)
    assert history not in _raw(bridge, "SMEMBERS", index)  # the resource's own history key stays named
    store.create_thread(Thread("t", "r", "again", None, T0, T0))
    assert _versions(store, "r", "t") == []  # a thread re-created under the id starts a new history
    store.merge_working_memory({"b": 1}, scope="thread", resource_id="r", thread_id="t")
    assert [v.version for v in _versions(store, "r", "t")] == [1]


def _user(store: UpstashStorage, resource_id: str) -> None:
    store.merge_working_memory({"name": resource_id}, scope="resource", resource_id=resource_id)
    store.merge_working_memory({"city": "Oslo"}, scope="resource", resource_id=resource_id)
    for n in range(3):
        thread_id = f"{resource_id}-t{n}"
        store.create_thread(Thread(thread_id, resource_id, "title", None, T0, T0))
        store.merge_working_memory({"n": n}, scope="thread", resource_id=resource_id, thread_id=thread_id)


def test_delete_resource_erases_the_user_and_only_the_user(
    store: UpstashStorage, bridge: Bridge, upstash_prefix: str
) -> None:
    _user(store, "alice")
    _user(store, "bob")
    before = _keys(bridge, upstash_prefix)
    erased = store.delete_resource("alice")
    assert erased == ErasedResource("alice", True, ("alice-t0", "alice-t1", "alice-t2"), 5)
    after = _keys(bridge, upstash_prefix)
    assert not [key for key in after if "alice" in key]
    assert {key for key in before if "alice" not in key} == after  # bob's keys all there
    assert not [m for m in _raw(bridge, "ZRANGE", f"{upstash_prefix}workmem:ids:threads", 0, -1) if "alice" in m]
    assert _raw(bridge, "ZRANGE", f"{upstash_prefix}workmem:ids:resources", 0, -1) == ["bob"]
    assert store.get_resource("alice") is None and store.list_threads("alice").total == 0
    assert store.delete_resource("alice") == ErasedResource("alice", False, (), 0)  # idempotent
    assert [v.version for v in _versions(store, "bob")] == [2, 1]
    assert store.list_threads("bob").total == 3 and len(_versions(store, "bob", "bob-t0")) == 1


def test_delete_resource_finds_threads_no_index_holds_and_skips_moved_ones(
    store: UpstashStorage, bridge: Bridge, upstash_prefix: str
) -> None:
    _user(store, "alice")
    # A thread another program (the TypeScript adapter) wrote for alice: no index entry, no id set entry.
    foreign = {"id": "ts", "resourceId": "alice", "title": "", "metadata": {}, "createdAt": "2025-01-01T00:00:00.000Z"}
    _raw(bridge, "SET", f"{upstash_prefix}mastra_threads:id:ts", json.dumps(foreign))
    # alice-t1 moved to carol by such a program: alice's index still names it, carol owns it now.
    moved = json.loads(_raw(bridge, "GET", f"{upstash_prefix}mastra_threads:id:alice-t1"))
    _raw(bridge, "SET", f"{upstash_prefix}mastra_threads:id:alice-t1", json.dumps({**moved, "resourceId": "carol"}))
    # alice-t2 deleted by such a program: its index entry and history are left behind.
    _raw(bridge, "DEL", f"{upstash_prefix}mastra_threads:id:alice-t2")
    erased = store.delete_resource("alice")
    assert erased.threads == ("alice-t0", "ts") and erased.resource
    assert erased.versions == 2 + 1 + 1 + 1  # resource, t0, t2's left behind, and t1's (recorded under alice)
    left = [key for key in _keys(bridge, upstash_prefix) if "alice" in key]
    assert left == [f"{upstash_prefix}mastra_threads:id:alice-t1"]  # carol's thread, whole
    assert store.get_thread("alice-t1") is not None
    assert store.delete_resource("alice") == ErasedResource("alice", False, (), 0)


def test_delete_resource_racing_thread_creation_leaves_no_half_thread(
    store: UpstashStorage, upstash_url: str, bridge: Bridge, upstash_prefix: str
) -> None:
    _user(store, "alice")
    writer = workmem.connect(upstash_url, history=True)
    created: list[str] = []
    done = threading.Event()

    def create() -> None:
        for n in range(40):
            thread_id = f"alice-new{n}"
            writer.create_thread(Thread(thread_id, "alice", "title", None, T0, T0))
            created.append(thread_id)
            with contextlib.suppress(ThreadNotFoundError):  # erased in between
                writer.merge_working_memory({"n": n}, scope="thread", resource_id="alice", thread_id=thread_id)
        done.set()

    creator = threading.Thread(target=create)
    creator.start()
    erased = [store.delete_resource("alice") for _ in range(3)]
    creator.join()
    writer.close()
    assert done.is_set() and erased[0].resource
    keys = _keys(bridge, upstash_prefix)
    indexed = set(_raw(bridge, "ZRANGE", f"{upstash_prefix}workmem:thread_index:created_at:alice", 0, -1))
    for thread_id in created:
        document = f"{upstash_prefix}mastra_threads:id:{thread_id}"
        history = f"{upstash_prefix}workmem:history:" + json.dumps(["alice", thread_id], separators=(",", ":"))
        if document in keys:  # survived whole: indexed, and its history (if any) named for erasure
            assert thread_id in indexed
            if history in keys:
                assert history in _raw(bridge, "SMEMBERS", f"{upstash_prefix}workmem:history_keys:alice")
        else:  # erased whole
            assert thread_id not in indexed and history not in keys
    store.delete_resource("alice")
    assert not [key for key in _keys(bridge, upstash_prefix) if "alice" in key]


def test_delete_resource_async(upstash_url: str, bridge: Bridge, upstash_prefix: str) -> None:
    async def main() -> ErasedResource:
        store = await workmem.connect_async(upstash_url, history=True)
        try:
            await store.merge_working_memory({"a": 1}, scope="resource", resource_id="u")
            await store.create_thread(Thread("u-t", "u", "title", None, T0, T0))
            await store.merge_working_memory({"a": 1}, scope="thread", resource_id="u", thread_id="u-t")
            erased = await store.delete_resource("u")
            assert await store.delete_resource("u") == ErasedResource("u", False, (), 0)
            return erased
        finally:
            await store.close()

    assert asyncio.run(main()) == ErasedResource("u", True, ("u-t",), 2)
    assert _keys(bridge, upstash_prefix) <= {f"{upstash_prefix}workmem:ids:threads"}  # nothing of u (the set: empty)


def test_imported_versions_are_stored_as_given_and_erased_with_the_user(store: UpstashStorage) -> None:
    versions = [
        MemoryVersion("r", None, 3, "three", T0, "import", {"from": "backup"}),
        MemoryVersion("r", None, 5, None, T0, "merge"),
        MemoryVersion("r", "t", 1, "thread", T0, "set"),
    ]
    assert run_sync(store._insert_versions(versions)) == 3
    assert run_sync(store._insert_versions(versions)) == 0  # present ones skipped
    assert run_sync(store._history(HistoryKey("r"), 10, None)) == versions[1::-1]
    assert run_sync(store._history(HistoryKey("r", "t"), 10, None)) == versions[2:]
    store.set_working_memory("next", scope="resource", resource_id="r")
    assert _versions(store, "r")[0].version == 6  # numbered above the newest, imported or not
    assert store.delete_resource("r").versions == 4


def test_a_write_replayed_after_a_lost_response_records_one_version(upstash_url: str) -> None:
    store = workmem.connect(upstash_url + "&retry_interval=0.01", history=True)
    assert isinstance(store, UpstashStorage)
    try:
        with losing_script_responses(store) as lost:
            store.merge_working_memory({"n": 1}, scope="resource", resource_id="r")  # applied, response lost, re-sent
            assert lost
            versions = _versions(store, "r")
            assert [(v.version, v.content) for v in versions] == [(1, '{"n":1}')]
            lost.clear()
            store.merge_working_memory({"n": 1}, scope="resource", resource_id="r")  # the same text, a new change
            assert lost
            assert [v.version for v in _versions(store, "r")] == [2, 1]
    finally:
        store.close()


@pytest.mark.backend("mastra")
def test_the_published_mastra_upstash_works_beside_history_and_sees_the_erasure() -> None:
    """@mastra/upstash (interop/driver.mjs) on the keyspace workmem records history in: it reads what workmem
    wrote, its own tool writes (recorded by nobody: it knows nothing of history), workmem's next version follows
    workmem's newest, and after delete_resource Mastra finds nothing of the user."""
    from mastra_node import require_mastra, run_mastra, step
    from test_mastra_interop import RESOURCE_SCHEMA, Ids, tool
    from upstash_fixtures import mastra_keyspace

    require_mastra()
    ids = Ids()
    user, chat = ids("user"), ids("chat")
    with mastra_keyspace(ids.suffix) as (url, store):
        with workmem.connect(url + "&listing=scan", history=True) as storage:
            storage.merge_working_memory({"name": "Ada"}, scope="resource", resource_id=user)
            storage.create_thread(Thread(chat, user, "chat", None, T0, T0))
            storage.set_working_memory("# notes", scope="thread", resource_id=user, thread_id=chat)
        seen = run_mastra(
            store,
            [
                step("getResourceById", resourceId=user),
                step("getThreadById", threadId=chat),
                step("listThreads", filter={"resourceId": user}),
                tool(RESOURCE_SCHEMA, chat, user, {"city": "Oslo"}),
            ],
        )
        assert json.loads(seen[0].value["workingMemory"]) == {"name": "Ada"}
        assert seen[1].value["metadata"]["workingMemory"] == "# notes"
        assert [t["id"] for t in seen[2].value["threads"]] == [chat]
        with workmem.connect(url + "&listing=scan", history=True) as storage:
            storage.merge_working_memory({"langs": ["no"]}, scope="resource", resource_id=user)
            versions = storage.working_memory_history(scope="resource", resource_id=user).versions
            assert [v.version for v in versions] == [2, 1]
            assert json.loads(versions[0].content or "") == {"name": "Ada", "city": "Oslo", "langs": ["no"]}
            assert storage.delete_resource(user) == ErasedResource(user, True, (chat,), 3)
        after = run_mastra(
            store,
            [
                step("getResourceById", resourceId=user),
                step("getThreadById", threadId=chat),
                step("listThreads", filter={"resourceId": user}),
            ],
        )
        assert after[0].value is None and after[1].value is None and after[2].value["total"] == 0


def test_copy_and_export_carry_history_into_and_out_of_upstash(upstash_url: str) -> None:
    """A copy from a store with history writes every version into Upstash as given (a second copy skips them), and
    Upstash's export, whole or of one user, is byte for byte the source's."""
    import io

    from test_transfer_history import USER, exported, filled, named

    from workmem.transfer import copy, export_records

    with filled(named()) as source, workmem.connect(upstash_url) as target:
        report = copy(source, target)
        assert report.ok and report.counts["version", "inserted"] == 12, report.summary()
        ours, theirs = io.BytesIO(), io.BytesIO()
        export_records(source, ours)
        export_records(target, theirs)
        assert theirs.getvalue() == ours.getvalue()
        assert exported(target, USER) == exported(source, USER)
        assert copy(source, target).counts["version", "skipped"] == 12
