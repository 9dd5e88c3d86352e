"""Finding a real server for each backend's tests — one way, used by every backend fixture.

Order: an explicit URL (``WORKMEM_<BACKEND>_URL``), then testcontainers when a
Docker engine answers, then a server this machine already runs, else a skip
whose reason says exactly what to set. Backends named in
``WORKMEM_REQUIRE_BACKENDS`` (comma-separated; CI sets it) fail instead of
skipping, so a CI job can never pass by not testing its backend.

Each function returns a *server* URL; the backend's own fixtures make a fresh
namespace on it (schema, database, key prefix, file) and clean it up.
"""

from __future__ import annotations

import atexit
import functools
import os
import socket
from collections.abc import Callable

import pytest

__all__ = ["docker_available", "port_open", "required_backends", "server_url"]


def required_backends() -> set[str]:
    return {b.strip() for b in os.environ.get("WORKMEM_REQUIRE_BACKENDS", "").split(",") if b.strip()}


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@functools.cache
def docker_available() -> bool:
    """Whether a Docker *engine* answers (the client alone is not enough)."""
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:
        return False


def _start_container(make: Callable[[], object], url_of: Callable[[object], str]) -> str:
    container = make()
    container.start()  # type: ignore[attr-defined]
    atexit.register(container.stop)  # type: ignore[attr-defined]
    return url_of(container)


def _postgres_container() -> str:
    from testcontainers.postgres import PostgresContainer

    return _start_container(
        lambda: PostgresContainer("postgres:17", driver=None),
        lambda c: c.get_connection_url(),  # type: ignore[attr-defined]
    )


def _mongodb_container() -> str:
    from testcontainers.mongodb import MongoDbContainer

    return _start_container(
        lambda: MongoDbContainer("mongo:8.0"),
        lambda c: c.get_connection_url(),  # type: ignore[attr-defined]
    )


def _oracle_container() -> str:
    from testcontainers.oracle import OracleDbContainer

    def url(c: object) -> str:
        host = c.get_container_host_ip()  # type: ignore[attr-defined]
        port = c.get_exposed_port(1521)  # type: ignore[attr-defined]
        return f"oracle://system:{c.oracle_password}@{host}:{port}/?service_name=FREEPDB1"  # type: ignore[attr-defined]

    return _start_container(lambda: OracleDbContainer("gvenzl/oracle-free:slim-faststart"), url)


def _redis_container() -> str:
    from testcontainers.redis import RedisContainer

    return _start_container(
        lambda: RedisContainer("redis:7"),
        lambda c: f"redis://{c.get_container_host_ip()}:{c.get_exposed_port(6379)}",  # type: ignore[attr-defined]
    )


_CONTAINERS: dict[str, Callable[[], str]] = {
    "postgres": _postgres_container,
    "mongodb": _mongodb_container,
    "oracle": _oracle_container,
    "redis": _redis_container,
}

_LOCAL: dict[str, tuple[str, int, str]] = {
    "postgres": ("127.0.0.1", 5432, "postgresql://postgres@127.0.0.1:5432/postgres"),
    "redis": ("127.0.0.1", 6379, "redis://127.0.0.1:6379"),
    "mongodb": ("127.0.0.1", 27017, "mongodb://127.0.0.1:27017"),
    "oracle": ("127.0.0.1", 1521, "oracle://system:oracle@127.0.0.1:1521/?service_name=FREEPDB1"),
}

_EXAMPLES = {
    "postgres": "postgresql://user:pass@host:5432/postgres",
    "redis": "redis://host:6379",
    "mongodb": "mongodb://user:pass@host:27017",
    "oracle": "oracle://system:pass@host:1521/?service_name=FREEPDB1",
}


@functools.cache
def _find(backend: str) -> tuple[str | None, str]:
    env = f"WORKMEM_{backend.upper()}_URL"
    if os.environ.get(env):
        return os.environ[env], f"{env}"
    if docker_available() and backend in _CONTAINERS:
        return _CONTAINERS[backend](), "testcontainers"
    host, port, url = _LOCAL[backend]
    if port_open(host, port):
        return url, f"local server {host}:{port}"
    return None, (
        f"no {backend} server: set {env}={_EXAMPLES[backend]}, start a Docker engine for testcontainers, "
        f"or run a server on {host}:{port}"
    )


def server_url(backend: str) -> str:
    """The URL of a real ``backend`` server (``postgres``, ``redis``, ``mongodb``, ``oracle``), or skip/fail."""
    url, how = _find(backend)
    if url is None:
        if backend in required_backends():
            pytest.fail(f"SKIP NOT ALLOWED ({backend} is in WORKMEM_REQUIRE_BACKENDS): {how}", pytrace=False)
        pytest.skip(f"SKIPPED {backend}: {how}")
    return url
