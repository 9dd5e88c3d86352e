"""Opening Upstash storages is cheap: every HTTP client of the adapter shares one TLS context."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest
from upstash_fixtures import bridge, upstash_prefix, upstash_url

import workmem
from workmem.adapters.upstash import transport

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge", "upstash_prefix", "upstash_url"]


def test_storages_and_event_loops_build_one_tls_context(upstash_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx builds a context (reading the whole CA bundle, ~30 ms) per client unless given one.
    built: list[ssl.SSLContext] = []
    default = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(default(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(ssl, "create_default_context", counting)
    monkeypatch.setattr(transport, "_contexts", {}, raising=False)  # as in a fresh process
    stores = [workmem.connect(upstash_url) for _ in range(3)]
    try:
        assert [store.get_thread("nobody") for store in stores] == [None] * 3
    finally:
        for store in stores:
            store.close()

    async def one_loop() -> None:
        async with await workmem.connect_async(upstash_url) as store:
            assert await store.get_resource("nobody") is None

    asyncio.run(one_loop())  # the storage's own client
    asyncio.run(one_loop())

    async def two_loops() -> None:
        store = await workmem.connect_async(upstash_url)
        try:
            await asyncio.to_thread(asyncio.run, store.get_resource("nobody"))  # a second loop: a client of its own
        finally:
            await store.close()

    asyncio.run(two_loops())
    assert len(built) == 1
