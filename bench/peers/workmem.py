"""workmem as a peer: its sync API for the one-client operations, its async API for 16 concurrent readers.

The namespace comes from :func:`bench.backends.open_namespace` (a fresh schema,
a fresh file), the same one the rest of the benchmark uses. On the embedded
file the durability level is the ``synchronous`` option under test (``full``,
workmem's default, or ``normal``, Mastra's setting), applied to every
connection by the adapter.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import workmem
from bench.backends import Namespace, open_namespace
from bench.peers.base import (
    CONCURRENT_CLIENTS,
    LIST_THREADS,
    MERGES_PER_CLIENT,
    RESOURCES,
    THREADS_PER_RESOURCE,
    Measurement,
    Peer,
    in_threads,
    replacement,
    resource_index,
    thread_index,
)
from workmem import Resource, Thread
from workmem.aio import AsyncMemoryStorage
from workmem.storage import MemoryStorage

__all__ = ["WorkmemPeer", "open_workmem"]

T = TypeVar("T")
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_BACKENDS = {"postgres": "postgres", "file": "libsql"}
LIST_RESOURCE = "bench-list"


def _found(record: T | None, what: str) -> T:
    """A read's record; a read that finds nothing is an error, not a fast sample."""
    if record is None:
        raise LookupError(f"the fixture has no {what}")
    return record


class WorkmemPeer(Peer):
    """workmem on ``postgres`` or ``file``; ``synchronous`` picks the embedded file's durability."""

    system = "workmem"

    def __init__(self, backend: str, *, synchronous: str | None = None, sizes: tuple[int, int, int] | None = None):
        if backend not in _BACKENDS:
            raise ValueError(f"unknown backend {backend!r}")
        self.backend = backend
        self.synchronous = synchronous
        self.resources, self.threads_per_resource, self.list_threads = sizes or (
            RESOURCES,
            THREADS_PER_RESOURCE,
            LIST_THREADS,
        )
        if synchronous is not None:
            self.system = f"workmem ({synchronous})"
        self._stack = ExitStack()
        self._ns: Namespace | None = None
        self._storage: MemoryStorage | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async: AsyncMemoryStorage | None = None
        self.notes = [
            "Python 3.11, the sync API (one call at a time); get_thread_16 on PostgreSQL runs 16 asyncio "
            "tasks on the async API (workmem.connect_async, its async connection pool), on the file 16 "
            "threads sharing one sync storage (its connection pool); get_thread_16_threads is 16 threads "
            "sharing one sync storage on both backends",
            "merge_field is MemoryStorage.merge_working_memory: one atomic statement (PostgreSQL) or one "
            "BEGIN IMMEDIATE transaction (SQLite), RFC 7396",
            "create_thread is create_thread: the owner check and the exact per-resource count "
            "(a trigger) in the same statement",
        ]

    # -- ids ----------------------------------------------------------------------

    def resource_id(self, i: int) -> str:
        return f"bench-r{resource_index(i, self.resources)}"

    def thread_id(self, i: int) -> str:
        r, t = resource_index(i, self.resources), thread_index(i, self.resources, self.threads_per_resource)
        return f"bench-t{r}-{t}"

    # -- setup --------------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        return {} if self.synchronous is None else {"synchronous": self.synchronous}

    def prepare(self) -> None:
        self._ns = self._stack.enter_context(open_namespace(_BACKENDS[self.backend]))
        self._storage = self._ns.connect(**self._options())
        self._stack.callback(self._storage.close)
        if self.backend == "file":  # the engine and level the storage reports, not what was asked for
            engine, level = getattr(self._storage, "engine", "?"), getattr(self._storage, "synchronous", "?")
            self.notes.append(f"embedded file on the {engine} engine, WAL, synchronous={level} on every connection")
        storage = self._storage
        memory = json.dumps({"name": "Ada", "plan": "pro", "prefs": {"tone": "brief"}})
        stamp = _EPOCH
        storage.insert_resources(
            [
                Resource(id=self.resource_id(r), working_memory=memory, metadata={}, created_at=stamp, updated_at=stamp)
                for r in range(self.resources)
            ]
            + [Resource(id=LIST_RESOURCE, working_memory=memory, metadata={}, created_at=stamp, updated_at=stamp)]
        )
        threads = [
            Thread(
                id=f"bench-t{r}-{t}",
                resource_id=self.resource_id(r),
                title=f"thread {t}",
                metadata={"topic": "bench"},
                created_at=stamp,
                updated_at=stamp,
            )
            for r in range(self.resources)
            for t in range(self.threads_per_resource)
        ]
        threads += [
            Thread(
                id=f"bench-l{n:05d}",
                resource_id=LIST_RESOURCE,
                title=f"listed {n}",
                metadata={},
                created_at=stamp + timedelta(seconds=n),
                updated_at=stamp + timedelta(seconds=n),
            )
            for n in range(self.list_threads)
        ]
        for begin in range(0, len(threads), 1000):
            storage.insert_threads(threads[begin : begin + 1000])
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._stack.callback(loop.close)
        self._async = loop.run_until_complete(workmem.connect_async(self._ns.url, **self._options()))
        self._stack.callback(lambda: loop.run_until_complete(self._async.close()) if self._async else None)

    # -- measurements -------------------------------------------------------------

    def _call(self, operation: str) -> Any:
        storage = self._storage
        assert storage is not None, "prepare() first"
        if operation == "get_thread":
            return lambda i: _found(storage.get_thread(self.thread_id(i)), self.thread_id(i))
        if operation == "get_resource":
            return lambda i: _found(storage.get_resource(self.resource_id(i)), self.resource_id(i))
        if operation == "create_thread":
            return lambda i: storage.create_thread(
                Thread(id=f"bench-new-{i}", resource_id=self.resource_id(i), title="new", metadata={})
            )
        if operation == "replace_working_memory":
            return lambda i: storage.update_resource(self.resource_id(i), working_memory=replacement(i))
        if operation == "merge_field":
            return lambda i: storage.merge_working_memory(
                {f"f{i % 10}": i}, scope="resource", resource_id=self.resource_id(i)
            )
        if operation == "list_newest_20":
            return lambda i: storage.list_threads(LIST_RESOURCE, per_page=20, order_by="updated_at")
        raise ValueError(f"unknown operation {operation!r}")

    def measure(self, operation: str, start: int, count: int) -> Measurement:
        if operation == "get_thread_16_threads" or (operation == "get_thread_16" and self.backend == "file"):
            return self._threaded_reads(start, count)
        if operation == "get_thread_16":
            return self._concurrent_reads(start, count)
        call = self._call(operation)
        clock = time.perf_counter_ns
        latencies: list[float] = []
        began = clock()
        for i in range(start, start + count):
            before = clock()
            call(i)
            latencies.append((clock() - before) / 1e9)
        return Measurement(latencies, (clock() - began) / 1e9)

    def _concurrent_reads(self, start: int, count: int) -> Measurement:
        assert self._loop is not None and self._async is not None, "prepare() first"
        storage = self._async
        clock = time.perf_counter_ns
        latencies: list[float] = []

        async def client(first: int) -> None:
            for i in range(first, start + count, CONCURRENT_CLIENTS):
                before = clock()
                _found(await storage.get_thread(self.thread_id(i)), self.thread_id(i))
                latencies.append((clock() - before) / 1e9)

        async def block() -> float:
            began = clock()
            await asyncio.gather(*(client(start + c) for c in range(CONCURRENT_CLIENTS)))
            return (clock() - began) / 1e9

        seconds = self._loop.run_until_complete(block())
        return Measurement(latencies, seconds)

    def _threaded_reads(self, start: int, count: int) -> Measurement:
        storage = self._storage
        assert storage is not None, "prepare() first"
        clock = time.perf_counter_ns
        per_client: list[list[float]] = [[] for _ in range(CONCURRENT_CLIENTS)]

        def client(c: int) -> None:
            out = per_client[c]
            for i in range(start + c, start + count, CONCURRENT_CLIENTS):
                before = clock()
                _found(storage.get_thread(self.thread_id(i)), self.thread_id(i))
                out.append((clock() - before) / 1e9)

        seconds = in_threads(CONCURRENT_CLIENTS, client)
        return Measurement([x for out in per_client for x in out], seconds)

    def merges_kept(self) -> int:
        storage = self._storage
        assert storage is not None, "prepare() first"
        target = f"bench-race-{time.monotonic_ns()}"
        storage.update_resource(target, working_memory="{}")
        ns = self._ns
        assert ns is not None

        def client(c: int) -> None:
            with ns.connect(**self._options()) as own:  # each client its own storage, as 16 processes would
                for k in range(MERGES_PER_CLIENT):
                    own.merge_working_memory({f"c{c}k{k}": k}, scope="resource", resource_id=target)

        in_threads(CONCURRENT_CLIENTS, client)
        stored = storage.get_working_memory(scope="resource", resource_id=target)
        return len(json.loads(stored)) if stored else 0

    def close(self) -> None:
        self._stack.close()


def open_workmem(backend: str, *, synchronous: str | None = None) -> WorkmemPeer:
    return WorkmemPeer(backend, synchronous=synchronous)
