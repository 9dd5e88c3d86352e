"""Where each backend is benchmarked: a server URL, a fresh random namespace, and its cleanup.

Servers are found the way the tests find them: ``WORKMEM_<SERVER>_URL``
(``POSTGRES``, ``REDIS``, ``MONGODB``, ``ORACLE``), else a server listening on
the default local port. Each run gets its own namespace and removes it
afterwards -- it never reads or writes anything outside it:

* ``postgres``: schema ``wmbench_<random>`` (``?schema=``), dropped with ``CASCADE``;
* ``libsql``: a file in a new temporary directory, deleted;
* ``sqld``: remote libSQL, a ``sqld`` server of the run's own (``workmem.testing.sqld``, the binary
  ``python ci/install_sqld.py`` installs) on a free loopback port, its directory deleted;
* ``upstash``: a ``python -m workmem.testing.upstash_bridge`` subprocess in front of Redis and
  the key prefix ``wmbench_<random>:`` (``?prefix=``); every key under it is deleted;
* ``mongodb``: database ``wmbench_<random>`` (``database=`` option), dropped;
* ``oracle``: tables under ``table_prefix=WMB<random>_``, dropped with ``drop_tables()``;
* ``memory``: the named in-process store ``memory://wmbench-<random>``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import workmem
from workmem.storage import MemoryStorage
from workmem.testing.upstash_bridge import BridgeProcess, spawn_bridge
from workmem.urls import mask_url

__all__ = ["ALL_BACKENDS", "Namespace", "Unavailable", "open_namespace", "server_url"]

ALL_BACKENDS = ("postgres", "libsql", "sqld", "upstash", "mongodb", "oracle", "memory")

_LOCAL = {
    "postgres": ("127.0.0.1", 5432, "postgresql://postgres@127.0.0.1:5432/postgres"),
    "redis": ("127.0.0.1", 6379, "redis://127.0.0.1:6379"),
    "mongodb": ("127.0.0.1", 27017, "mongodb://127.0.0.1:27017"),
    "oracle": ("127.0.0.1", 1521, "oracle://system:oracle@127.0.0.1:1521/?service_name=FREEPDB1"),
}


class Unavailable(Exception):
    """The backend cannot be benchmarked here; the message says why and what to set."""


@dataclass
class Namespace:
    """One backend's fresh namespace: the URL that reaches it and what the raw floors need."""

    backend: str
    url: str
    """The workmem URL (may hold a token: print :attr:`masked_url` instead)."""
    options: dict[str, Any] = field(default_factory=dict)
    """``connect()`` options for every storage object of the run."""
    writer_options: dict[str, Any] = field(default_factory=dict)
    """``connect()`` options for each concurrent writer (a small pool of its own)."""
    detail: dict[str, Any] = field(default_factory=dict)
    """What the raw floors and bulk loaders need: schema, file, prefix, bridge URL, ..."""
    max_threads: int = 100_000
    """Threads of the one large resource of the scaling run."""
    scale_base: int = 100
    """Threads of the small resource the large one is compared with."""
    max_resources: int = 10_000

    @property
    def masked_url(self) -> str:
        return mask_url(self.url)

    def connect(self, **extra: Any) -> MemoryStorage:
        """A new storage object on this namespace."""
        return workmem.connect(self.url, **{**self.options, **extra})


def _server(name: str) -> tuple[str, str]:
    """``(server URL, how it was found)``, or :class:`Unavailable`."""
    env = f"WORKMEM_{name.upper()}_URL"
    if os.environ.get(env):
        return os.environ[env], env
    host, port, url = _LOCAL[name]
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return url, f"local server {host}:{port}"
    except OSError:
        raise Unavailable(f"no {name} server: set {env}, or run one on {host}:{port}") from None


def server_url(name: str) -> str:
    """The ``name`` server's URL (``postgres``, ``redis``, ...), found as for every backend, or :class:`Unavailable`."""
    return _server(name)[0]


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    return urlunsplit(parts._replace(query=urlencode(query + list(params.items()))))


def _token() -> str:
    return secrets.token_hex(5)


@contextmanager
def _postgres() -> Iterator[Namespace]:
    server, how = _server("postgres")
    psycopg = __import__("psycopg")
    schema = f"wmbench_{_token()}"
    ns = Namespace(
        "postgres",
        _with_query(server, schema=schema),
        writer_options={"min_size": 1, "max_size": 1},
        detail={"conninfo": server, "schema": schema, "found": how},
    )
    try:
        yield ns
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def _libsql() -> Iterator[Namespace]:
    try:
        __import__("apsw")
    except ImportError:
        raise Unavailable("the apsw driver is not installed: pip install 'workmem[libsql]'") from None
    directory = tempfile.mkdtemp(prefix="wmbench_")
    path = os.path.join(directory, "bench.db")
    try:
        yield Namespace("libsql", f"file:{path}", writer_options={"pool_size": 1}, detail={"path": path})
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def _sqld() -> Iterator[Namespace]:
    try:
        __import__("libsql")
    except ImportError:
        raise Unavailable("the libsql driver is not installed: pip install 'workmem[libsql]'") from None
    from workmem.testing.sqld import Sqld, find_sqld

    binary, where = find_sqld()
    if binary is None:
        raise Unavailable(f"no sqld binary at {where}: run `python ci/install_sqld.py` (or set WORKMEM_SQLD)")
    server = Sqld(binary)
    try:
        yield Namespace(
            "sqld",
            server.url,
            writer_options={"pool_size": 1},
            detail={"path": server.http_url, "found": where},  # what the libsql floor opens: the same server
            max_threads=2_000,
            scale_base=20,
            max_resources=1_000,
        )
    finally:
        server.close()


def _delete_prefix(bridge: BridgeProcess, prefix: str) -> None:
    from upstash_redis import Redis

    from workmem.adapters.upstash.keys import glob_escape

    assert prefix.startswith("wmbench_"), "refusing to delete outside a benchmark prefix"
    client: Any = Redis(url=bridge.url, token=bridge.token, allow_telemetry=False)
    try:
        cursor = 0
        while True:
            cursor, keys = client.scan(cursor, match=f"{glob_escape(prefix)}*", count=1000)
            keys = [key for key in keys if key.startswith(prefix)]
            if keys:
                client.delete(*keys)
            if int(cursor) == 0:
                return
    finally:
        client.close()


@contextmanager
def _upstash() -> Iterator[Namespace]:
    try:
        __import__("upstash_redis")
    except ImportError:
        raise Unavailable("the upstash-redis driver is not installed: pip install 'workmem[upstash]'") from None
    redis_url, how = _server("redis")
    try:
        bridge = spawn_bridge(redis_url)
    except RuntimeError as exc:
        raise Unavailable(f"the workmem bridge did not start: {exc}") from None
    prefix = f"wmbench_{_token()}:"
    try:
        rest = bridge.url.split("://", 1)[1]
        ns = Namespace(
            "upstash",
            _with_query(f"upstash+http://{rest}", token=bridge.token, prefix=prefix),
            detail={"rest_url": bridge.url, "token": bridge.token, "prefix": prefix, "found": how},
            max_threads=20_000,
            scale_base=20,
            max_resources=10_000,
        )
        try:
            yield ns
        finally:
            _delete_prefix(bridge, prefix)
    finally:
        bridge.stop()


@contextmanager
def _mongodb() -> Iterator[Namespace]:
    try:
        pymongo = __import__("pymongo")
    except ImportError:
        raise Unavailable("the pymongo driver is not installed: pip install 'workmem[mongodb]'") from None
    server, how = _server("mongodb")
    database = f"wmbench_{_token()}"
    ns = Namespace(
        "mongodb",
        server,
        options={"database": database},
        writer_options={"maxPoolSize": 2},
        detail={"url": server, "database": database, "found": how},
    )
    try:
        yield ns
    finally:
        client = pymongo.MongoClient(server, serverSelectionTimeoutMS=5000)
        try:
            client.drop_database(database)
        finally:
            client.close()


@contextmanager
def _oracle() -> Iterator[Namespace]:
    try:
        __import__("oracledb")
    except ImportError:
        raise Unavailable("the oracledb driver is not installed: pip install 'workmem[oracle]'") from None
    server, how = _server("oracle")
    prefix = f"WMB{_token().upper()}_"
    ns = Namespace(
        "oracle",
        server,
        options={"table_prefix": prefix},
        writer_options={"min_size": 1, "max_size": 1},
        detail={"url": server, "table_prefix": prefix, "found": how},
        max_threads=10_000,  # no raw bulk loader: the adapter's save_thread, one round trip each
        max_resources=1_000,
    )
    try:
        yield ns
    finally:
        with suppress(Exception), ns.connect() as storage:
            storage.drop_tables()  # type: ignore[attr-defined]


@contextmanager
def _memory() -> Iterator[Namespace]:
    yield Namespace("memory", f"memory://wmbench-{_token()}")


_OPENERS: dict[str, Callable[[], Any]] = {
    "postgres": _postgres,
    "libsql": _libsql,
    "sqld": _sqld,
    "upstash": _upstash,
    "mongodb": _mongodb,
    "oracle": _oracle,
    "memory": _memory,
}


@contextmanager
def open_namespace(backend: str) -> Iterator[Namespace]:
    """A fresh namespace on ``backend``, removed on exit; :class:`Unavailable` if it cannot be had here."""
    if backend not in _OPENERS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(ALL_BACKENDS)}")
    with _OPENERS[backend]() as ns:
        yield ns
