"""An async storage works from any event loop, on every backend: the loop affinity docs/async.md documents.

One ``AsyncMemoryStorage`` opened on one loop is used from another loop in another thread (a
thread running its own ``asyncio.run``, as sync code calling into async helpers does): while the first
loop is idle, while both loops call at once, and from loops that come and go. Every call is bounded
by ``asyncio.wait_for``: ``AsyncUpstashStorage`` hung there (its HTTP connections belonged to the first
loop), or failed with a retryable "Event loop is closed"; ``AsyncPostgresStorage`` hung once callers of
several loops waited for pooled connections (a connection given back was handed to a waiter of another
loop from the wrong thread). Closing from one loop ends the calls of every loop with ``StorageClosedError``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from backends import backend_url

import workmem
from workmem import StorageClosedError, Thread

__all__ = ["backend_url"]

T = TypeVar("T")
_BOUND = 20.0
"""Seconds any one call may take here: far above a call's time, far below a hang's."""


def _bounded(call: Awaitable[T]) -> Awaitable[T]:
    return asyncio.wait_for(call, _BOUND)


def _on_new_loop(storage: Any, calls: Any) -> Any:
    """``asyncio.run(calls(storage))`` in a thread of its own: that thread's loop, not the caller's."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, calls(storage)).result(timeout=4 * _BOUND)


@pytest.fixture
def home(backend_url: str) -> Iterator[tuple[asyncio.Runner, Any]]:
    """A storage opened on the loop of an ``asyncio.Runner`` (kept for the whole test), and that runner."""
    with asyncio.Runner() as runner:
        storage = runner.run(workmem.connect_async(backend_url))
        try:
            yield runner, storage
        finally:
            runner.run(storage.close())


async def _merges(storage: Any, tag: str, count: int) -> None:
    for i in range(count):
        await _bounded(storage.merge_working_memory({f"{tag}{i}": i}, scope="resource", resource_id=tag))


def test_an_async_storage_works_from_any_event_loop(home: tuple[asyncio.Runner, Any]) -> None:
    runner, storage = home
    runner.run(_bounded(storage.save_thread(Thread("t-home", "r-home", "opened here"))))

    # another loop while the home loop is idle
    async def read(storage: Any) -> Any:
        return await _bounded(storage.get_thread("t-home"))

    assert _on_new_loop(storage, read).title == "opened here"

    # both loops calling at once
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(asyncio.run, _merges(storage, "b", 15))
        runner.run(_merges(storage, "a", 15))
        other.result(timeout=4 * _BOUND)

    # loops that come and go: each call on a new loop, from several threads at once
    def one_call(i: int) -> str | None:
        async def call() -> str | None:
            await _bounded(storage.save_thread(Thread(f"t-{i}", "r-many")))
            return await _bounded(storage.get_working_memory(scope="resource", resource_id="a"))

        return asyncio.run(call())

    with ThreadPoolExecutor(4) as pool:
        memories = list(pool.map(one_call, range(12)))
    assert all(memory == memories[0] for memory in memories)
    assert runner.run(_bounded(storage.list_threads("r-many", per_page=None))).total == 12
    for tag in "ab":  # every merge of both loops kept
        text = runner.run(_bounded(storage.get_working_memory(scope="resource", resource_id=tag)))
        assert text is not None and json.loads(text) == {f"{tag}{i}": i for i in range(15)}


def test_loops_contending_for_the_storages_connections(home: tuple[asyncio.Runner, Any]) -> None:
    """Three loops of 12 tasks each: more callers than any pool's default size, so callers of one loop wait
    for connections that tasks of another loop give back."""
    runner, storage = home

    async def crowd(storage: Any, tag: str) -> int:
        async def task(k: int) -> int:
            for i in range(8):
                await _bounded(storage.merge_working_memory({f"{k}-{i}": i}, scope="resource", resource_id=tag))
                assert await _bounded(storage.get_thread(f"{tag}-{k}-{i}")) is None
            return k

        return len(await asyncio.gather(*(task(k) for k in range(12))))

    with ThreadPoolExecutor(2) as pool:
        others = [pool.submit(asyncio.run, crowd(storage, tag)) for tag in ("b", "c")]
        assert runner.run(crowd(storage, "a")) == 12
        assert [other.result(timeout=6 * _BOUND) for other in others] == [12, 12]
    for tag in "abc":
        text = runner.run(_bounded(storage.get_working_memory(scope="resource", resource_id=tag)))
        assert text is not None and len(json.loads(text)) == 12 * 8


def test_close_on_one_loop_ends_the_calls_of_every_loop(home: tuple[asyncio.Runner, Any], backend_url: str) -> None:
    runner, storage = home
    if backend_url.startswith("memory:"):
        pytest.skip("the in-memory adapter has nothing to close and keeps working (documented)")
    used = threading.Event()
    closed = threading.Event()

    async def elsewhere() -> BaseException | None:
        await _bounded(storage.get_thread("t"))  # this loop now holds what the storage keeps per loop
        used.set()
        await asyncio.get_running_loop().run_in_executor(None, closed.wait, 4 * _BOUND)
        try:
            await _bounded(storage.get_thread("t"))
        except BaseException as exc:
            return exc
        return None

    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(asyncio.run, elsewhere())
        assert used.wait(4 * _BOUND)
        runner.run(_bounded(storage.close()))
        closed.set()
        assert type(other.result(timeout=4 * _BOUND)) is StorageClosedError
    with pytest.raises(StorageClosedError):
        runner.run(_bounded(storage.get_thread("t")))
