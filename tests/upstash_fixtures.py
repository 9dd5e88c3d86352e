"""Fixtures for the Upstash adapter and the REST bridge: a real redis-server behind ``python -m workmem.bridge``.

Import the fixtures into a test module (``from upstash_fixtures import bridge, upstash_url``).
The bridge runs as a subprocess on a free port with a random token, once per
test session; each test gets its own random key prefix, and every key under it
is deleted afterwards (SCAN + DEL of that prefix only).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from servers import server_url

__all__ = ["Bridge", "bridge", "delete_prefix", "raw_client", "start_bridge", "upstash_url"]


@dataclass(frozen=True)
class Bridge:
    """A running bridge: its base URL and token, and the redis-server behind it."""

    url: str
    token: str
    redis_url: str
    process: subprocess.Popen[str]

    def storage_url(self, prefix: str) -> str:
        return f"upstash+{self.url}?token={self.token}&prefix={prefix}"


def start_bridge(redis_url: str, token: str | None = None) -> Bridge:
    """Start ``python -m workmem.bridge`` on a free port and wait until it listens."""
    token = token or secrets.token_urlsafe(24)
    env = {**os.environ, "WORKMEM_BRIDGE_TOKEN": token}
    process = subprocess.Popen(
        [sys.executable, "-m", "workmem.bridge", "--redis", redis_url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        _, err = process.communicate(timeout=10)
        raise RuntimeError(f"the bridge did not start: {line!r} {err!r}")
    url = line.split("listening on ", 1)[1].split()[0]
    return Bridge(url, token, redis_url, process)


def stop_bridge(bridge: Bridge) -> None:
    bridge.process.terminate()
    try:
        bridge.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        bridge.process.kill()
        bridge.process.wait()
    for stream in (bridge.process.stdout, bridge.process.stderr):
        if stream is not None:
            stream.close()


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
