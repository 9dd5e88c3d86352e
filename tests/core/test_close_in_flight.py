"""Closing a storage while calls are in flight: every call that fails, fails with ``StorageClosedError``.

One class on every backend and through both APIs: a call cut by ``close()`` is not worth retrying, so it
must never surface as the retryable ``BackendUnavailableError`` (Upstash did, with "client has been
closed" or a read error, and only after the driver's retry interval). Each worker calls until a call
fails; the storage is closed once every worker has made a few calls, so some calls are in flight at
that moment. On Upstash a slow proxy holds every request, so that all of them are.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest
from backends import backend_url
from reachable import assert_unreachable
from tcp_proxy import TcpProxy
from upstash_fixtures import Bridge, bridge, upstash_prefix

import workmem
from workmem import StorageClosedError, Thread

__all__ = ["backend_url", "bridge", "upstash_prefix"]

_WORKERS = 6


def _operations(storage: Any, worker: int, i: int) -> list[Callable[[], Any]]:
    """The calls of one round (each returns a coroutine through the async API)."""
    return [
        lambda: storage.update_resource(f"r{worker}", metadata={"i": i}),
        lambda: storage.merge_working_memory({f"k{i}": i}, scope="resource", resource_id=f"r{worker}"),
        lambda: storage.save_thread(Thread(f"t{worker}-{i}", f"r{worker}")),
        lambda: storage.list_threads(f"r{worker}", per_page=5),
        lambda: storage.get_thread(f"t{worker}-{i}"),
    ]


def _skip_memory(url: str) -> None:
    if url.startswith("memory:"):
        pytest.skip("the in-memory adapter has nothing to close and keeps working (documented)")


def test_sync_calls_cut_by_close_raise_storage_closed(backend_url: str) -> None:
    _skip_memory(backend_url)
    storage = workmem.connect(backend_url)
    started = threading.Barrier(_WORKERS + 1)

    def work(worker: int) -> BaseException:
        i = 0
        while True:
            try:
                if i == 2:
                    started.wait(30)
                for call in _operations(storage, worker, i):
                    call()
            except BaseException as exc:
                return exc
            i += 1

    with ThreadPoolExecutor(_WORKERS) as pool:
        ended = [pool.submit(work, worker) for worker in range(_WORKERS)]
        started.wait(30)
        storage.close()
        errors = [future.result(timeout=60) for future in ended]
    assert all(type(error) is StorageClosedError for error in errors), errors


def test_async_calls_cut_by_close_raise_storage_closed(backend_url: str) -> None:
    _skip_memory(backend_url)

    async def main() -> list[BaseException]:
        storage = await workmem.connect_async(backend_url)
        started = asyncio.Event()
        counts = [0] * _WORKERS

        async def work(worker: int) -> BaseException:
            i = 0
            while True:
                try:
                    for call in _operations(storage, worker, i):
                        await call()
                except BaseException as exc:
                    return exc
                i += 1
                counts[worker] = i
                if min(counts) >= 2:
                    started.set()

        tasks = [asyncio.create_task(work(worker)) for worker in range(_WORKERS)]
        await asyncio.wait_for(started.wait(), 60)
        await storage.close()
        return await asyncio.wait_for(asyncio.gather(*tasks), 60)

    errors = asyncio.run(main())
    assert all(type(error) is StorageClosedError for error in errors), errors


# -- Upstash: every request held in flight by a slow proxy ------------------------------------------------


def _slow_url(bridge: Bridge, proxy: TcpProxy, prefix: str) -> str:
    # a long retry interval: a call cut by close() must fail at once, not after the driver's re-send
    return f"upstash+http://127.0.0.1:{proxy.port}?token={bridge.token}&prefix={prefix}&retry_interval=30"


@pytest.mark.backend("upstash")
def test_upstash_sync_calls_in_flight_at_close_raise_storage_closed(bridge: Bridge, upstash_prefix: str) -> None:
    with TcpProxy(("127.0.0.1", urlsplit(bridge.url).port or 0)) as proxy:
        storage = workmem.connect(_slow_url(bridge, proxy, upstash_prefix))
        proxy.delay = 0.5
        before = proxy.accepted

        def call(worker: int) -> BaseException | None:
            try:
                storage.update_resource(f"r{worker}", metadata={"n": worker})
            except BaseException as exc:
                return exc
            return None

        with ThreadPoolExecutor(_WORKERS) as pool:
            calls = [pool.submit(call, worker) for worker in range(_WORKERS)]
            deadline = time.monotonic() + 10
            while proxy.accepted - before < _WORKERS - 1 and time.monotonic() < deadline:
                time.sleep(0.01)  # each call holds a connection of its own (one may reuse the idle one)
            time.sleep(0.1)  # the requests are sent: the proxy holds them
            storage.close()
            outcomes = [future.result(timeout=20) for future in calls]
    assert all(type(outcome) is StorageClosedError for outcome in outcomes), outcomes
    for outcome in outcomes:  # nothing of the request cut by close() (its Authorization header) comes along
        assert outcome is not None
        assert_unreachable(outcome, bridge.token)


@pytest.mark.backend("upstash")
def test_upstash_async_calls_in_flight_at_close_raise_storage_closed(bridge: Bridge, upstash_prefix: str) -> None:
    async def main(proxy: TcpProxy) -> list[BaseException | None]:
        storage = await workmem.connect_async(_slow_url(bridge, proxy, upstash_prefix))
        proxy.delay = 0.5
        calls = [
            asyncio.create_task(storage.update_resource(f"r{worker}", metadata={"n": worker}))
            for worker in range(_WORKERS)
        ]
        await asyncio.sleep(0.25)  # every request sent, every one held by the proxy
        await storage.close()
        done = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 20)
        return [outcome if isinstance(outcome, BaseException) else None for outcome in done]

    with TcpProxy(("127.0.0.1", urlsplit(bridge.url).port or 0)) as proxy:
        outcomes = asyncio.run(main(proxy))
    assert all(type(outcome) is StorageClosedError for outcome in outcomes), outcomes
    for outcome in outcomes:
        assert outcome is not None
        assert_unreachable(outcome, bridge.token)
