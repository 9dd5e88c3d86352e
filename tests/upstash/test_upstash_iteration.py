"""Upstash iteration, bulk inserts and replace_thread, sync and async, through the REST bridge in front of Redis.

Records "written by the TypeScript adapter" here are hand-made documents in ``@mastra/upstash``'s layout
(``mastra_resources:{id}`` / ``mastra_threads:id:{id}``, no workmem id set or thread index), written with a
raw client: the shape ``tests/interop/test_mastra_interop.py`` checks the real package writes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from upstash_fixtures import Bridge, bridge, raw_client, upstash_prefix, upstash_url

import workmem
from workmem import Resource, Thread
from workmem.adapters.upstash import AsyncUpstashStorage, UpstashStorage
from workmem.records import RecordPage

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge", "upstash_prefix", "upstash_url"]

Api = Literal["sync", "async"]
T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
IDS = ["a", "B", "b", "é", "z", "ä", "😀", "a:b", "a*", "10", "9", "ab", "aa", "-", "_", "Z", "t 1", "\U0010ffff"]
"""Ids whose code-point order differs from any locale's (and from insertion order)."""


def codepoint_sorted(ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda text: [ord(c) for c in text])


class Store:
    """The storage under test through either API: every call awaited (a sync call runs directly)."""

    def __init__(self, api: Api, store: UpstashStorage | AsyncUpstashStorage) -> None:
        self.api = api
        self.raw = store

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.raw, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            return await result if self.api == "async" else result

        return call

    async def all(self, kind: Literal["resources", "threads"], page_size: int) -> list[Any]:
        iterator = getattr(self.raw, f"iter_{kind}")(page_size=page_size)
        if self.api == "async":
            return [record async for record in iterator]
        return list(iterator)


def run(api: Api, url: str, scenario: Callable[[Store], Awaitable[None]]) -> None:
    async def main() -> None:
        if api == "async":
            opened = await workmem.connect_async(url)
            assert type(opened) is AsyncUpstashStorage
            try:
                await scenario(Store(api, opened))
            finally:
                await opened.close()
        else:
            sync = workmem.connect(url)
            assert type(sync) is UpstashStorage
            try:
                await scenario(Store(api, sync))
            finally:
                sync.close()

    asyncio.run(main())


@pytest.fixture
def raw(bridge: Bridge) -> Iterator[Any]:
    client: Any = raw_client(bridge)
    yield client
    client.close()


def mastra_thread(thread_id: str, owner: str, **extra: Any) -> str:
    """A thread document as ``@mastra/upstash`` writes it (metadata native, extra fields)."""
    return json.dumps({
        "id": thread_id, "resourceId": owner, "title": f"TS {thread_id}", "metadata": {"from": "ts"},
        "createdAt": "2025-01-02T03:04:05.678Z", "updatedAt": "2025-01-03T00:00:00.000Z",
        "lastMessageAt": "2025-01-03T00:00:00.000Z", **extra,
    })  # fmt: skip


def mastra_resource(resource_id: str) -> str:
    """A resource document as ``@mastra/upstash`` writes it (metadata as JSON text)."""
    return json.dumps({
        "id": resource_id, "workingMemory": "# TS", "metadata": '{"plan":"pro"}',
        "createdAt": "2025-01-02T03:04:05.678Z", "updatedAt": "2025-01-02T03:04:05.678Z",
    })  # fmt: skip


APIS = [pytest.param("sync", id="sync"), pytest.param("async", id="async")]


@pytest.mark.parametrize("api", APIS)
def test_iteration_covers_workmem_and_mastra_records_in_codepoint_order(
    api: Api, upstash_url: str, upstash_prefix: str, raw: Any
) -> None:
    p = upstash_prefix
    by_workmem = IDS[: len(IDS) // 2]
    by_mastra = IDS[len(IDS) // 2 :]
    for thread_id in by_mastra:  # no id set, no thread index: only a SCAN finds these
        raw.set(p + f"mastra_threads:id:{thread_id}", mastra_thread(thread_id, "owner-ts"))
        raw.set(p + f"mastra_resources:{thread_id}", mastra_resource(thread_id))
    raw.set(p + "mastra_threads:id:~bad", "not json")  # unreadable: named, never fatal
    raw.hset(p + "mastra_threads:id:~hash", values={"a": "1"})  # not even a string
    raw.set(p + "mastra_messages:x", "{}")  # another table's key: not a record
    assert raw.keys(p + "workmem:*") == []

    async def scenario(store: Store) -> None:
        for n, record_id in enumerate(by_workmem):
            await store.save_thread(Thread(record_id, f"owner-{n % 3}", f"t{n}", {"n": n}, T0, T0))
            await store.save_resource(Resource(record_id, None, {"n": n}, T0, T0))
        want = codepoint_sorted(IDS)
        for page_size in (1, 4, 5, len(IDS) + 2, 500):
            threads = await store.all("threads", page_size)
            assert [t.id for t in threads] == want, page_size
            resources = await store.all("resources", page_size)
            assert [r.id for r in resources] == want, page_size
        ts = {t.id: t for t in await store.all("threads", 3)}[by_mastra[0]]
        assert ts == Thread(
            by_mastra[0], "owner-ts", f"TS {by_mastra[0]}", {"from": "ts"}, T0, datetime(2025, 1, 3, tzinfo=UTC)
        )

        # Page by page: keyset on the last id, unreadable ids named on their page, the end is None.
        seen: list[str] = []
        unreadable: list[str] = []
        after: str | None = None
        pages = 0
        while True:
            page: RecordPage[Thread] = await store.threads_after(after, limit=4)
            assert all(isinstance(t, Thread) for t in page.records)
            seen += [t.id for t in page.records]
            unreadable += page.unreadable
            pages += 1
            if page.next_after is None:
                break
            assert page.next_after == max(
                [*(t.id for t in page.records), *page.unreadable], key=lambda s: [ord(c) for c in s]
            )
            after = page.next_after
        assert pages == (len(IDS) + 2) // 4 + 1
        assert seen == want and unreadable == ["~bad", "~hash"]

        # A thread the TypeScript adapter deletes: its id leaves the id set on the next page read.
        raw.delete(p + f"mastra_threads:id:{by_mastra[0]}")
        assert by_mastra[0] not in [t.id for t in await store.all("threads", 2)]
        assert raw.zscore(p + "workmem:ids:threads", by_mastra[0]) is None
        # workmem's own delete takes the id out in the same script as the document.
        await store.delete_thread(by_workmem[0])
        assert raw.zscore(p + "workmem:ids:threads", by_workmem[0]) is None
        remaining = [i for i in want if i not in (by_mastra[0], by_workmem[0])]
        assert [t.id for t in await store.all("threads", 7)] == remaining

    run(api, upstash_url, scenario)


@pytest.mark.parametrize("api", APIS)
def test_records_written_between_pages_by_mastra_are_found_by_the_next_iteration(
    api: Api, upstash_url: str, upstash_prefix: str, raw: Any
) -> None:
    async def scenario(store: Store) -> None:
        await store.save_thread(Thread("m", "r", "", None, T0, T0))
        first = await store.threads_after(None, limit=1)
        assert [t.id for t in first.records] == ["m"] and first.next_after == "m"
        # Written by another program mid-iteration, after the first page: may or may not appear now ...
        raw.set(upstash_prefix + "mastra_threads:id:z", mastra_thread("z", "r"))
        raw.set(upstash_prefix + "mastra_threads:id:a", mastra_thread("a", "r"))
        rest = await store.threads_after(first.next_after, limit=10)
        assert "a" not in [t.id for t in rest.records]  # before the keyset position: never twice, never now
        # ... and is in every iteration that starts after it was written.
        assert [t.id for t in await store.all("threads", 1)] == ["a", "m", "z"]

    run(api, upstash_url, scenario)


@pytest.mark.parametrize("api", APIS)
def test_iteration_while_others_insert_and_delete_returns_every_lasting_record_once(api: Api, upstash_url: str) -> None:
    async def scenario(store: Store) -> None:
        lasting = [f"keep-{n:03d}" for n in range(60)]
        await store.insert_threads(Thread(i, f"r{n % 4}", "", None, T0, T0) for n, i in enumerate(lasting))
        churn = [f"churn-{n:03d}" for n in range(60)]
        with workmem.connect(upstash_url) as other:
            seen: list[str] = []
            after: str | None = None
            step = 0
            while True:
                page = await store.threads_after(after, limit=7)
                seen += [t.id for t in page.records]
                # Between pages another connection inserts before and after the position, and deletes.
                other.save_thread(Thread(churn[step], "r9", "", None, T0, T0))
                other.save_thread(Thread(f"aaa-{step}", "r9", "", None, T0, T0))
                if step:
                    other.delete_thread(churn[step - 1])
                step += 1
                if page.next_after is None:
                    break
                after = page.next_after
        assert len(seen) == len(set(seen))
        assert [i for i in seen if i.startswith("keep-")] == lasting

    run(api, upstash_url, scenario)


@pytest.mark.parametrize("api", APIS)
def test_bulk_insert_reports_present_ids_and_never_moves_a_thread(
    api: Api, upstash_url: str, upstash_prefix: str, raw: Any
) -> None:
    p = upstash_prefix
    raw.set(p + "mastra_threads:id:ts-owned", mastra_thread("ts-owned", "ts-owner"))  # Mastra's, unindexed
    raw.set(p + "mastra_resources:ts-res", mastra_resource("ts-res"))

    async def scenario(store: Store) -> None:
        kept = await store.save_thread(Thread("mine", "alice", "original", {"v": 1}, T0, T0))
        await store.save_resource(Resource("alice", "# A", {"a": 1}, T0, T0))
        created = T0 - timedelta(days=3)
        updated = T0 + timedelta(hours=5, microseconds=123000)
        threads = [Thread(f"new-{n:04d}", f"bob-{n % 3}", f"n{n}", {"n": n}, created, updated) for n in range(450)]
        threads += [
            Thread("mine", "bob-0", "stolen?", None, created, updated),  # another owner's id: stays alice's
            Thread("ts-owned", "bob-0", "stolen?", None, created, updated),
        ]
        present = await store.insert_threads(threads)
        assert present == frozenset({"mine", "ts-owned"})
        assert await store.get_thread("mine") == kept
        assert json.loads(raw.get(p + "mastra_threads:id:ts-owned"))["resourceId"] == "ts-owner"
        assert await store.get_thread("new-0007") == Thread("new-0007", "bob-1", "n7", {"n": 7}, created, updated)
        for owner in ("bob-0", "bob-1", "bob-2"):
            listed = await store.list_threads(owner, per_page=None, order_by="updated_at")
            assert listed.total == 150 and all(t.resource_id == owner for t in listed.threads)
        assert raw.zcard(p + "workmem:ids:threads") == 451  # every insert in the id set (ts-owned: not yet)
        again = await store.insert_threads(threads[:5])
        assert again == frozenset(t.id for t in threads[:5])

        resources = [Resource(f"res-{n}", f"# {n}", {"n": n}, created, updated) for n in range(3)]
        resources += [Resource("alice", None, None, created, updated), Resource("ts-res", None, None, T0, T0)]
        assert await store.insert_resources(resources) == frozenset({"alice", "ts-res"})
        assert await store.get_resource("alice") == Resource("alice", "# A", {"a": 1}, T0, T0)
        assert await store.get_resource("res-2") == resources[2]
        assert json.loads(raw.get(p + "mastra_resources:ts-res"))["workingMemory"] == "# TS"
        assert [r.id for r in await store.all("resources", 2)] == ["alice", "res-0", "res-1", "res-2", "ts-res"]
        assert len(await store.all("threads", 100)) == 452
        assert await store.insert_threads([]) == frozenset()

    run(api, upstash_url, scenario)


def test_bulk_insert_splits_large_batches_and_checks_before_writing(
    upstash_url: str, upstash_prefix: str, raw: Any
) -> None:
    from workmem.adapters.upstash import storage as module

    with workmem.connect(upstash_url) as store:
        assert isinstance(store, UpstashStorage)
        big = "x" * (module._SCRIPT_BYTES // 3)
        calls: list[int] = []
        real = store._client.evaluate

        async def counting(script: Any, keys: Any, args: Any) -> Any:
            if script.name == "insert_absent":
                calls.append(len(keys))
            return await real(script, keys, args)

        store._client.evaluate = counting  # type: ignore[method-assign]
        present = store.insert_threads(Thread(f"big-{n}", "r", "", {"blob": big}, T0, T0) for n in range(7))
        assert present == frozenset() and len(calls) >= 3
        assert [t.id for t in store.iter_threads(page_size=2)] == [f"big-{n}" for n in range(7)]
        # An owner index that another program replaced with a string: the whole batch refused, nothing written.
        raw.set(upstash_prefix + "workmem:thread_index:created_at:victim", "not a sorted set")
        with pytest.raises(workmem.errors.BackendRefusedError, match="WRONGTYPE"):
            store.insert_threads([Thread("first-ok", "r"), Thread("second", "victim")])
        assert store.get_thread("first-ok") is None


@pytest.mark.parametrize("api", APIS)
def test_replace_thread_only_for_its_owner(api: Api, upstash_url: str, upstash_prefix: str, raw: Any) -> None:
    p = upstash_prefix
    raw.set(p + "mastra_threads:id:ts", mastra_thread("ts", "owner"))

    async def scenario(store: Store) -> None:
        await store.save_thread(Thread("t", "owner", "old", {"a": 1}, T0, T0))
        later = T0 + timedelta(days=2, milliseconds=5)
        new = Thread("t", "owner", "new", {"b": [1]}, T0 - timedelta(days=1), later)
        assert await store.restore_thread(new) is True
        assert await store.get_thread("t") == new
        listed = await store.list_threads("owner", order_by="updated_at")
        assert [t.id for t in listed.threads] == ["t"]
        score = raw.zscore(p + "workmem:thread_index:updated_at:owner", "t")
        assert score == int(later.timestamp() * 1000)
        assert await store.restore_thread(Thread("t", "thief", "x", None, T0, T0)) is False
        assert await store.get_thread("t") == new
        assert await store.restore_thread(Thread("missing", "owner", "x", None, T0, T0)) is False
        assert await store.get_thread("missing") is None
        # A Mastra document: replaced, the fields workmem does not know kept.
        assert await store.restore_thread(Thread("ts", "owner", "via workmem", None, T0, T0)) is True
        doc = json.loads(raw.get(p + "mastra_threads:id:ts"))
        assert doc["title"] == "via workmem" and doc["lastMessageAt"] == "2025-01-03T00:00:00.000Z"
        assert doc["createdAt"] == doc["updatedAt"] == "2025-01-02T03:04:05.678Z"

    run(api, upstash_url, scenario)


def test_reindex_adds_mastra_ids_to_the_id_sets(upstash_url: str, upstash_prefix: str, raw: Any) -> None:
    raw.set(upstash_prefix + "mastra_threads:id:ts-1", mastra_thread("ts-1", "res"))
    raw.set(upstash_prefix + "mastra_resources:res", mastra_resource("res"))
    with workmem.connect(upstash_url) as store:
        assert isinstance(store, UpstashStorage)
        assert store.threads_after("") == RecordPage((), (), None)  # not from the start: only the id set is read
        result = store.reindex()
        assert (result.threads, result.removed) == (1, 0)
        assert [t.id for t in store.threads_after("").records] == ["ts-1"]
        assert [r.id for r in store.resources_after("").records] == ["res"]
