"""One fresh, cleaned-up URL per backend, for tests that must run the same thing on every backend.

``fresh_url(backend)`` is a context manager yielding the URL of an empty
namespace on that backend, removed afterwards; the ``backend_url`` fixture runs
a test once per backend with it. Each namespace comes from the backend's own
test module, so there is one way to make each:

* ``memory``: a private named store ``memory://wm_<random>`` (several
  connections share it), forgotten afterwards;
* ``libsql``: a database file in a new temporary directory, deleted afterwards;
* ``postgres``: a random schema, dropped afterwards (``test_postgres.fresh_schema_url``);
* ``upstash``: a random key prefix behind one REST bridge per test session in
  front of the Redis that ``servers.server_url("redis")`` finds; every key
  under the prefix is deleted afterwards (``upstash_fixtures``);
* ``mongodb``: a random database, dropped afterwards (:func:`fresh_mongodb_url`);
* ``oracle``: fresh tables, dropped afterwards (``test_oracle_server.fresh_tables_url``).

The server backends skip loudly, or fail in CI, through ``servers.server_url``.
Backend modules are imported only when their backend is used, so a missing
driver affects that backend alone.
"""

from __future__ import annotations

import atexit
import contextlib
import secrets
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from upstash_fixtures import Bridge

__all__ = ["BACKENDS", "backend_url", "fresh_mongodb_url", "fresh_upstash_prefix", "fresh_url", "shared_bridge"]

BACKENDS = ("memory", "libsql", "postgres", "upstash", "mongodb", "oracle")
"""Every backend a test can run on, in the order tests run them."""

_bridge: Bridge | None = None
_bridge_lock = threading.Lock()


def shared_bridge() -> Bridge:
    """The REST bridge of this test session (started on first use, stopped when the process exits)."""
    global _bridge
    from servers import server_url
    from upstash_fixtures import start_bridge, stop_bridge

    with _bridge_lock:
        if _bridge is None or _bridge.process.poll() is not None:
            _bridge = start_bridge(server_url("redis"))
            atexit.register(stop_bridge, _bridge)
        return _bridge


@contextlib.contextmanager
def fresh_upstash_prefix(bridge: Bridge) -> Iterator[str]:
    """A new random key prefix on ``bridge``; every key under it is deleted afterwards."""
    from upstash_fixtures import delete_prefix

    prefix = f"wm_test_{secrets.token_hex(6)}:"
    try:
        yield prefix
    finally:
        delete_prefix(bridge, prefix)


@contextlib.contextmanager
def fresh_mongodb_url() -> Iterator[str]:
    """A URL naming a new random database on the test MongoDB server; the database is dropped afterwards."""
    import pymongo
    from servers import server_url
    from test_mongodb_server import fresh_database_url

    url, name = fresh_database_url(server_url("mongodb"))
    try:
        yield url
    finally:
        client: pymongo.MongoClient[dict[str, object]]
        with pymongo.MongoClient(url, serverSelectionTimeoutMS=5000) as client:
            client.drop_database(name)


@contextlib.contextmanager
def _fresh_memory_url() -> Iterator[str]:
    from workmem.adapters import reference

    name = f"wm_{secrets.token_hex(6)}"
    try:
        yield f"memory://{name}"
    finally:
        with reference._named_lock:  # forget the named store, as a dropped schema is forgotten
            reference._named.pop(name, None)


@contextlib.contextmanager
def fresh_url(backend: str) -> Iterator[str]:
    """The URL of an empty namespace on ``backend`` (one of :data:`BACKENDS`), removed afterwards."""
    if backend == "memory":
        with _fresh_memory_url() as url:
            yield url
    elif backend == "libsql":
        with tempfile.TemporaryDirectory(prefix="wm_libsql_") as directory:
            yield f"file:{Path(directory) / 'workmem.db'}"
    elif backend == "postgres":
        from postgres_schemas import fresh_schema_url

        with fresh_schema_url() as url:
            yield url
    elif backend == "upstash":
        bridge = shared_bridge()
        with fresh_upstash_prefix(bridge) as prefix:
            yield bridge.storage_url(prefix)
    elif backend == "mongodb":
        with fresh_mongodb_url() as url:
            yield url
    elif backend == "oracle":
        from test_oracle_server import fresh_tables_url

        with fresh_tables_url() as url:
            yield url
    else:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


@pytest.fixture(params=[pytest.param(name, id=name, marks=pytest.mark.backend(name)) for name in BACKENDS])
def backend_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test once per backend with the URL of a fresh namespace (server backends skip loudly)."""
    with fresh_url(request.param) as url:
        yield url
