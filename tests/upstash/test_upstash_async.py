"""The async Upstash adapter (``upstash_redis.asyncio``) against a real redis-server behind the REST bridge."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from upstash_fixtures import Bridge, bridge, upstash_prefix, upstash_url

import workmem
from workmem import Resource, Thread, ThreadExistsError, ThreadNotFoundError, ThreadOwnershipError
from workmem.adapters.upstash import AsyncUpstashStorage, UpstashStorage
from workmem.errors import BackendRefusedError, BackendUnavailableError, StorageClosedError, ValidationError

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge", "upstash_prefix", "upstash_url"]

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


async def _open(url: str) -> AsyncUpstashStorage:
    store = await workmem.connect_async(url)
    assert type(store) is AsyncUpstashStorage  # the native twin, not the sync adapter on threads
    return store


def _chain(exc: BaseException) -> str:
    parts = []
    seen: BaseException | None = exc
    while seen is not None:
        parts.append(f"{type(seen).__name__}: {seen!s} {seen!r}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def test_connect_async_opens_the_native_twin_and_hides_the_token(bridge: Bridge, upstash_url: str) -> None:
    assert UpstashStorage.async_adapter == "workmem.adapters.upstash.storage:AsyncUpstashStorage"

    async def main() -> None:
        async with await _open(upstash_url) as store:
            assert bridge.token not in repr(store) + repr(store._client) + repr(store._settings)
            assert await store.get_resource("nobody") is None
        with pytest.raises(StorageClosedError):
            await store.get_resource("r")
        await store.close()  # idempotent
        wrong = f"wrong-{secrets.token_hex(8)}"
        with pytest.raises(BackendRefusedError) as refused:
            await workmem.connect_async(f"upstash+{bridge.url}?token={wrong}&retries=0")
        assert "WRONGPASS" in str(refused.value) and wrong not in _chain(refused.value)
        with pytest.raises(BackendUnavailableError) as unreachable:
            await workmem.connect_async(f"upstash+http://127.0.0.1:9?token={wrong}&retries=0")
        assert wrong not in _chain(unreachable.value)
        with pytest.raises(ValidationError, match="unknown Upstash option"):
            await workmem.connect_async(upstash_url + "&bogus=1")

    asyncio.run(main())


def test_main_operations(upstash_url: str) -> None:
    async def main() -> None:
        async with await _open(upstash_url) as store:
            saved = await store.save_resource(Resource("r", "# Notes", {"plan": "pro"}, T0, T0))
            assert await store.get_resource("r") == saved
            updated = await store.update_resource("r", metadata={"n": 1})
            assert updated.metadata == {"plan": "pro", "n": 1} and updated.working_memory == "# Notes"
            assert updated.created_at == T0 and updated.updated_at > T0

            first = await store.create_thread(Thread("t1", "r", "one", {"k": [1]}, T0, T0))
            with pytest.raises(ThreadExistsError):
                await store.create_thread(Thread("t1", "r", "again"))
            await store.save_thread(Thread("t2", "r", "two", None, T0 + timedelta(hours=1), T0))
            assert await store.get_thread("t1") == first
            assert await store.get_thread("t1", resource_id="other") is None
            renamed = await store.update_thread("t1", title="renamed", metadata={"x": {}})
            assert renamed.title == "renamed" and renamed.metadata == {"k": [1], "x": {}}
            with pytest.raises(ThreadNotFoundError):
                await store.update_thread("missing", title="x")

            page = await store.list_threads("r", order_by="created_at", direction="asc")
            assert [t.id for t in page.threads] == ["t1", "t2"] and page.total == 2
            page = await store.list_threads("r", order_by="updated_at", per_page=1)
            assert [t.id for t in page.threads] == ["t1"] and page.has_more

            await store.set_working_memory("# md", scope="thread", thread_id="t2", resource_id="r")
            assert await store.get_working_memory(scope="thread", thread_id="t2") == "# md"
            merged = await store.merge_working_memory({"a": {"b": 1}, "l": []}, scope="resource", resource_id="m")
            merged = await store.merge_working_memory({"a": {"c": 2}}, scope="resource", resource_id="m")
            assert merged == {"a": {"b": 1, "c": 2}, "l": []}
            text = await store.get_working_memory(scope="resource", resource_id="m")
            assert text is not None and json.loads(text) == merged

            assert await store.delete_thread("t2") is True
            assert await store.delete_thread("t2") is False
            assert (await store.list_threads("r")).total == 1
            assert await store.reindex() == type(await store.reindex())(1, 0)
            with pytest.raises(ValidationError):
                await store.get_resource("")

        # The sync adapter reads what the async one wrote: the same keys.
        with workmem.connect(upstash_url) as sync_store:
            assert sync_store.get_thread("t1") == renamed
            assert [t.id for t in sync_store.list_threads("r").threads] == ["t1"]

    asyncio.run(main())


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_twenty_concurrent_merges_keep_every_key(upstash_url: str, scope: Literal["resource", "thread"]) -> None:
    async def main() -> dict[str, Any]:
        async with await _open(upstash_url) as store:
            await store.save_thread(Thread("shared", "r"))
            thread_id = "shared" if scope == "thread" else None
            results = await asyncio.gather(
                *(
                    store.merge_working_memory(
                        {f"k{n}": {"n": n, "list": [n]}}, scope=scope, resource_id="r", thread_id=thread_id
                    )
                    for n in range(20)
                )
            )
            assert all(f"k{n}" in result for n, result in enumerate(results))
            text = await store.get_working_memory(scope=scope, resource_id="r", thread_id=thread_id)
            assert text is not None
            return json.loads(text)  # type: ignore[no-any-return]

    stored = asyncio.run(main())
    assert stored == {f"k{n}": {"n": n, "list": [n]} for n in range(20)}


def test_owner_change_is_refused(upstash_url: str) -> None:
    async def main() -> None:
        async with await _open(upstash_url) as store:
            original = await store.save_thread(Thread("t", "owner", "mine", {"a": 1}, T0, T0))
            with pytest.raises(ThreadOwnershipError):
                await store.save_thread(Thread("t", "thief", "stolen"))
            with pytest.raises(ThreadOwnershipError):
                await store.merge_working_memory({"x": 1}, scope="thread", thread_id="t", resource_id="thief")
            with pytest.raises(ThreadOwnershipError):
                await store.set_working_memory("x", scope="thread", thread_id="t", resource_id="thief")
            assert await store.get_thread("t") == original
            assert (await store.list_threads("thief")).total == 0
            assert [t.id for t in (await store.list_threads("owner")).threads] == ["t"]

            # 10 racing saves of one new id with different owners: exactly one wins.
            outcomes = await asyncio.gather(
                *(store.save_thread(Thread("race", f"o{n}", f"by {n}")) for n in range(10)), return_exceptions=True
            )
            winners = [o for o in outcomes if isinstance(o, Thread)]
            assert len(winners) == 1
            assert all(isinstance(o, ThreadOwnershipError) for o in outcomes if not isinstance(o, Thread))
            stored = await store.get_thread("race")
            assert stored is not None and stored.resource_id == winners[0].resource_id

    asyncio.run(main())


# -- cancellation -------------------------------------------------------------------------------


async def _cancel_at(
    store: AsyncUpstashStorage, when: Literal["before", "after"], call: Callable[[], Awaitable[Any]]
) -> None:
    """Cancel ``call`` while its write script is in flight: ``before`` it is sent, or ``after`` the server ran it."""
    http = store._client._redis._http._client
    real_post = http.post
    reached = asyncio.Event()

    async def hanging_post(url: str, *args: Any, **kwargs: Any) -> Any:
        command = kwargs.get("json") or []
        is_write = bool(command) and command[0] == "EVALSHA"
        if is_write and when == "before":
            reached.set()
            await asyncio.sleep(3600)
        response = await real_post(url, *args, **kwargs)
        if is_write and when == "after":
            reached.set()
            await asyncio.sleep(3600)  # the script ran; its response never arrives
        return response

    http.post = hanging_post
    try:
        task = asyncio.ensure_future(call())
        await asyncio.wait_for(reached.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        http.post = real_post


def test_a_cancelled_call_writes_all_or_nothing_and_the_next_call_works(upstash_url: str) -> None:
    async def main() -> None:
        async with await _open(upstash_url) as store:
            await _cancel_at(store, "before", lambda: store.save_thread(Thread("t1", "r", "x", None, T0, T0)))
            assert await store.get_thread("t1") is None
            assert (await store.list_threads("r")).total == 0

            await _cancel_at(store, "after", lambda: store.save_thread(Thread("t1", "r", "x", None, T0, T0)))
            assert await store.get_thread("t1") == Thread("t1", "r", "x", None, T0, T0)  # document ...
            for order_by in ("created_at", "updated_at"):  # ... and both index entries
                page = await store.list_threads("r", order_by=order_by)
                assert [t.id for t in page.threads] == ["t1"] and page.total == 1

            await _cancel_at(
                store, "after", lambda: store.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
            )
            await _cancel_at(
                store, "before", lambda: store.merge_working_memory({"b": 2}, scope="resource", resource_id="r")
            )
            assert await store.merge_working_memory({"c": 3}, scope="resource", resource_id="r") == {"a": 1, "c": 3}

            await _cancel_at(store, "after", lambda: store.delete_thread("t1"))
            assert await store.get_thread("t1") is None and (await store.list_threads("r")).total == 0
            assert (await store.reindex()).removed == 0  # nothing stale was left behind

    asyncio.run(main())


def test_timeouts_at_any_point_leave_documents_and_indexes_consistent(upstash_url: str) -> None:
    async def main() -> None:
        async with await _open(upstash_url) as store:
            outcomes = {"done": 0, "timed_out": 0}
            for n in range(40):
                timeout = 0.0 if n % 4 == 0 else 10.0 if n % 4 == 3 else 0.0005 * n
                thread = Thread(f"t{n % 10}", "r", f"v{n}", {"n": n}, T0 + timedelta(seconds=n), T0)
                call = store.save_thread(thread) if n % 3 else store.delete_thread(thread.id)
                try:
                    await asyncio.wait_for(call, timeout)
                    outcomes["done"] += 1
                except TimeoutError:
                    outcomes["timed_out"] += 1
            assert outcomes["done"] >= 10 and outcomes["timed_out"] >= 10
            stored = {t.id: t for n in range(10) if (t := await store.get_thread(f"t{n}")) is not None}
            for order_by in ("created_at", "updated_at"):
                page = await store.list_threads("r", per_page=None, order_by=order_by)
                assert {t.id: t for t in page.threads} == stored and page.total == len(stored)
            assert await store.reindex() == type(await store.reindex())(len(stored), 0)

    asyncio.run(main())
