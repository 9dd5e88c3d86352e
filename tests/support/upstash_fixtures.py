"""Fixtures for the Upstash adapter and the REST bridge: a real redis-server behind
``python -m workmem.testing.upstash_bridge``.

Import the fixtures into a test module (``from upstash_fixtures import bridge, upstash_url``).
The bridge runs as a subprocess on a free port with a random token, once per
test session; each test gets its own random key prefix, and every key under it
is deleted afterwards (SCAN + DEL of that prefix only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from servers import server_url

from workmem.testing.upstash_bridge import BridgeProcess, spawn_bridge

__all__ = [
    "Bridge",
    "bridge",
    "delete_prefix",
    "delete_suffixed",
    "losing_script_responses",
    "mastra_keyspace",
    "raw_client",
    "start_bridge",
    "upstash_url",
]


Bridge = BridgeProcess


def start_bridge(redis_url: str, token: str | None = None) -> Bridge:
    """Start ``python -m workmem.testing.upstash_bridge`` on a free port and wait until it listens."""
    return spawn_bridge(redis_url, token=token)


def stop_bridge(bridge: Bridge) -> None:
    bridge.stop()


def raw_client(bridge: Bridge, **options: object) -> object:
    """An ``upstash_redis.Redis`` client talking to the bridge."""
    from upstash_redis import Redis

    return Redis(url=bridge.url, token=bridge.token, allow_telemetry=False, **options)  # type: ignore[arg-type]


def delete_prefix(bridge: Bridge, prefix: str) -> int:
    """Delete every key that starts with ``prefix`` (and nothing else)."""
    from workmem.adapters.upstash.keys import glob_escape

    assert prefix, "refusing to delete without a prefix"
    client = raw_client(bridge)
    deleted = 0
    cursor = 0
    try:
        while True:
            cursor, keys = client.scan(cursor, match=f"{glob_escape(prefix)}*", count=1000)  # type: ignore[attr-defined]
            keys = [k for k in keys if k.startswith(prefix)]
            if keys:
                deleted += client.delete(*keys)  # type: ignore[attr-defined]
            if cursor == 0:
                return deleted
    finally:
        client.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def bridge() -> Iterator[Bridge]:
    """A bridge subprocess in front of the redis-server that ``server_url("redis")`` finds."""
    running = start_bridge(server_url("redis"))
    try:
        yield running
    finally:
        stop_bridge(running)


@pytest.fixture
def upstash_prefix(bridge: Bridge) -> Iterator[str]:
    """A fresh random key prefix; every key under it is deleted afterwards."""
    from backends import fresh_upstash_prefix

    with fresh_upstash_prefix(bridge) as prefix:
        yield prefix


@pytest.fixture
def upstash_url(bridge: Bridge, upstash_prefix: str) -> str:
    """``upstash+http://127.0.0.1:PORT?token=...&prefix=...`` of a fresh keyspace."""
    return bridge.storage_url(upstash_prefix)


@contextlib.contextmanager
def mastra_keyspace(suffix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The workmem URL and the ``interop/driver.mjs`` store of the shared bridge's keyspace without a prefix.

    ``@mastra/upstash`` has no key prefix: its keys are Mastra's own, on the shared test Redis. Every id of
    a test carries its random ``suffix``, and every key naming it (and its entries in workmem's id sets) is
    deleted afterwards.
    """
    from backends import shared_bridge

    bridge = shared_bridge()
    try:
        yield bridge.storage_url(), {"kind": "upstash", "url": bridge.url, "token": bridge.token}
    finally:
        delete_suffixed(bridge, suffix)


def delete_suffixed(bridge: Bridge, suffix: str) -> None:
    """Delete every key naming ``suffix``, and the ids naming it in workmem's id sets (the unprefixed keyspace)."""
    client: Any = raw_client(bridge)
    try:
        cursor = 0
        while True:
            cursor, keys = client.scan(cursor, match=f"*{suffix}*", count=1000)
            if keys:
                client.delete(*keys)
            if cursor == 0:
                break
        for id_set in ("workmem:ids:threads", "workmem:ids:resources"):  # workmem's id sets: this test's ids
            cursor = 0
            while True:
                cursor, members = client.zscan(id_set, cursor, match=f"*{suffix}*", count=1000)
                if members:
                    client.zrem(id_set, *(member for member, _ in members))
                if cursor == 0:
                    break
    finally:
        client.close()


@contextlib.contextmanager
def losing_script_responses(store: Any) -> Iterator[list[str]]:
    """``store`` (a sync Upstash storage) losing the response of its next script run after the server applied it.

    Yields the list of scripts (SHA-1) whose response was lost; clear it to lose the next one too. The
    driver re-sends the request (connect with a short ``retry_interval``), as after a real lost response.
    """
    import httpx

    http = store._client._redis._http._client
    real_post = http.post
    lost: list[str] = []

    def lossy_post(url: str, *args: Any, **kwargs: Any) -> Any:
        response = real_post(url, *args, **kwargs)
        command = kwargs.get("json") or []
        if command and command[0] == "EVALSHA" and not lost:
            lost.append(command[1])
            raise httpx.ReadError("connection lost after the server applied the write")
        return response

    http.post = lossy_post
    try:
        yield lost
    finally:
        http.post = real_post
