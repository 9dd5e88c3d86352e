"""The contract's two faces over one set of flows: run_sync, the sync/async method sets, connect_async."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

import workmem
from workmem import MemoryStorage, Resource, Thread, ThreadOwnershipError, ValidationError, flows
from workmem.adapters.reference import AsyncReferenceStorage, ReferenceStorage
from workmem.aio import ThreadedAsyncStorage
from workmem.flows import StorageHooks, SuspendedInSyncFlow, run_sync


def test_run_sync_returns_what_a_coroutine_that_never_suspends_returns() -> None:
    async def double(x: int) -> int:
        return 2 * x

    assert run_sync(double(21)) == 42


def test_run_sync_refuses_a_coroutine_that_suspends() -> None:
    async def waits() -> None:
        await asyncio.sleep(0)

    with pytest.raises(SuspendedInSyncFlow, match="suspended"):
        run_sync(waits())


def test_run_sync_raises_what_the_coroutine_raises() -> None:
    async def fails() -> None:
        raise ThreadOwnershipError("t", "r")

    with pytest.raises(ThreadOwnershipError):
        run_sync(fails())


def test_every_hook_is_abstract_so_an_incomplete_adapter_fails_at_construction() -> None:
    class Incomplete(MemoryStorage):
        @classmethod
        def from_url(cls, url: str, **options: Any) -> Incomplete:
            return cls()

    with pytest.raises(TypeError, match="_merge_working_memory"):
        Incomplete()
    assert {"_get_thread", "_save_thread", "_merge_working_memory", "_close"} <= StorageHooks.__abstractmethods__


def test_connect_async_opens_the_native_twin_and_shares_a_named_store_with_the_sync_api() -> None:
    async def main() -> None:
        async with await workmem.connect_async("memory://flows-twin") as storage:
            assert isinstance(storage, AsyncReferenceStorage)
            await storage.save_thread(Thread("t", "alice"))
            with pytest.raises(ThreadOwnershipError):
                await storage.save_thread(Thread("t", "mallory"))
            merged = await asyncio.gather(
                *(
                    storage.merge_working_memory({f"k{i}": i}, scope="thread", thread_id="t", resource_id="alice")
                    for i in range(20)
                )
            )
            assert len(merged) == 20
        sync = workmem.connect("memory://flows-twin")
        assert isinstance(sync, ReferenceStorage)
        memory = sync.get_working_memory(scope="thread", thread_id="t")
        assert memory is not None and len(workmem.apply_merge_patch({}, json.loads(memory))) == 20

    asyncio.run(main())


def test_the_async_face_validates_at_the_door_before_any_hook_runs() -> None:
    calls: list[str] = []

    class Spy(AsyncReferenceStorage):
        async def _merge_working_memory(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            calls.append("merge")
            return await super()._merge_working_memory(*args, **kwargs)

    async def main() -> None:
        storage = Spy()
        with pytest.raises(ValidationError):
            await storage.merge_working_memory({"a": 1}, scope="nope", resource_id="r")  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            await storage.merge_working_memory({"a": {1, 2}}, scope="resource", resource_id="r")
        with pytest.raises(ValidationError):
            await storage.get_thread("")
        for bad in (0, True, 2.5, "100"):
            with pytest.raises(ValidationError, match="max_chars must be an int >= 1 or None"):
                await storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r", max_chars=bad)  # type: ignore[arg-type]
            with pytest.raises(ValidationError, match="max_chars must be an int >= 1 or None"):
                await storage.set_working_memory("x", scope="resource", resource_id="r", max_chars=bad)  # type: ignore[arg-type]
        assert calls == []
        assert await storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r") == {"a": 1}
        assert calls == ["merge"]

    asyncio.run(main())


class SyncOnly(ReferenceStorage):
    """The reference adapter without its async twin: a sync-only third-party adapter."""

    async_adapter = None


def test_a_sync_only_adapter_runs_on_worker_threads_behind_the_async_api() -> None:
    workmem.register("flowssync", "test_flows:SyncOnly", clobber=True)

    async def main() -> None:
        storage = await workmem.connect_async("flowssync://threads")
        assert isinstance(storage, ThreadedAsyncStorage)
        assert type(storage.storage).__name__ == "SyncOnly"
        await storage.update_resource("r", working_memory="{}")
        await asyncio.gather(
            *(storage.merge_working_memory({f"k{i}": i}, scope="resource", resource_id="r") for i in range(20))
        )
        assert len(json.loads(await storage.get_working_memory(scope="resource", resource_id="r"))) == 20
        await storage.close()
        await storage.close()  # idempotent

    asyncio.run(main())


# -- iteration and bulk writes: the flows' door and their behaviour on both faces ------------------


T0 = datetime(2021, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


@pytest.mark.parametrize("bad", [0, 10_001, -1, True, 2.0, "5", None])
def test_page_sizes_are_checked_at_the_door_on_both_faces(bad: Any) -> None:
    storage = ReferenceStorage()
    with pytest.raises(ValidationError, match="page_size"):
        storage.iter_threads(page_size=bad)  # before the first next(): the call itself refuses
    with pytest.raises(ValidationError, match="limit"):
        storage.threads_after(limit=bad)
    with pytest.raises(ValidationError, match="page_size"):
        AsyncReferenceStorage().iter_resources(page_size=bad)


def test_bulk_inserts_refuse_what_is_no_record_and_after_must_be_text() -> None:
    storage = ReferenceStorage()
    with pytest.raises(ValidationError):
        storage.insert_threads([Resource("r")])  # type: ignore[list-item]
    with pytest.raises(ValidationError):
        storage.insert_resources(Resource("r"))  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        storage.restore_thread(Resource("r"))  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        storage.resources_after(5)  # type: ignore[arg-type]
    assert storage.resources_after().records == ()


def test_a_repeated_id_in_one_call_is_inserted_once_and_reported_present() -> None:
    storage = ReferenceStorage()
    present = storage.insert_threads([Thread("t", "alice", "first"), Thread("t", "bob", "second")])
    assert present == {"t"}
    stored = storage.get_thread("t")
    assert stored is not None and (stored.resource_id, stored.title) == ("alice", "first")


def test_a_long_stream_goes_in_batches_and_each_batch_is_one_hook_call() -> None:
    batches: list[int] = []

    class Counting(ReferenceStorage):
        async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
            batches.append(len(threads))
            return await super()._insert_threads(threads)

    storage = Counting()
    count = 2 * flows.BULK_BATCH + 7
    assert storage.insert_threads(Thread(f"t{i:05}", "r") for i in range(count)) == frozenset()
    assert batches == [flows.BULK_BATCH, flows.BULK_BATCH, 7]
    assert [t.id for t in storage.iter_threads(page_size=100)] == [f"t{i:05}" for i in range(count)]


def _fill(storage: MemoryStorage) -> list[str]:
    ids = ["b", "a", "B", "\u00e9", "e\u0301", "z\U0001f600", "\uffff", "aa"]
    storage.insert_threads(Thread(i, "r", "x", {"n": 1}, T0, T0) for i in ids)
    return sorted(ids)


def test_iteration_on_both_faces_and_the_threaded_face_agree() -> None:
    name = "flows-iter"
    expected = _fill(ReferenceStorage(name))

    async def main() -> None:
        native = AsyncReferenceStorage(name)
        assert [t.id async for t in native.iter_threads(page_size=3)] == expected
        threaded = ThreadedAsyncStorage(SyncOnly(name))
        assert [t.id async for t in threaded.iter_threads(page_size=2)] == expected
        page = await threaded.threads_after(expected[2], limit=2)
        assert [t.id for t in page.records] == expected[3:5] and page.next_after == expected[4]
        assert await threaded.insert_threads([Thread("a", "other")]) == {"a"}
        assert not await threaded.restore_thread(Thread("a", "other"))
        assert await threaded.restore_thread(Thread("a", "r", "new", None, T0, T0))
        await threaded.close()

    asyncio.run(main())
    sync = ReferenceStorage(name)
    assert [t.id for t in sync.iter_threads(page_size=1)] == expected
    stored = sync.get_thread("a")
    assert stored is not None and (stored.resource_id, stored.title, stored.updated_at) == ("r", "new", T0)


def test_a_sync_iterator_left_early_is_closed() -> None:
    storage = ReferenceStorage()
    _fill(storage)
    iterator = storage.iter_threads(page_size=2)
    assert next(iterator).id == "B"
    iterator.close()  # type: ignore[attr-defined]
    with pytest.raises(StopIteration):
        next(iterator)


class SlowOpening(ReferenceStorage):
    """A sync-only adapter whose connect takes a while and records its closing."""

    async_adapter = None
    closed: ClassVar[list[str]] = []

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SlowOpening:
        import time

        time.sleep(0.2)
        return super().from_url(url, **options)

    async def _close(self) -> None:
        SlowOpening.closed.append(repr(self))


def test_a_connect_async_cancelled_while_the_adapter_opens_closes_what_it_opened() -> None:
    workmem.register("flowsslow", "test_flows:SlowOpening", clobber=True)
    SlowOpening.closed.clear()

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(workmem.connect_async("flowsslow://cancelled"), 0.05)
        await asyncio.sleep(0.5)  # the open finishes on its thread, then what it opened is closed

    asyncio.run(main())
    assert SlowOpening.closed == ["SlowOpening(name='cancelled')"]
