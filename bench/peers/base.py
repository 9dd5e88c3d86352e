"""What every system in ``bench --peers`` implements: the same nine measurements, on one backend.

A *peer* is one system (workmem, Mastra's TypeScript adapters, LangGraph's
stores) on one backend kind (``postgres`` or ``file``, the embedded SQLite
file). The runner (:mod:`bench.peers.runner`) opens every peer of a backend,
calls :meth:`Peer.prepare` once, then interleaves :meth:`Peer.measure` calls
(operation by operation, the peers' order rotating, three rounds unless `--rounds` says) so machine
noise lands on all alike.

Each operation means the same work for every peer; where a peer has no such
call, it does what that peer's users write instead (LangGraph has no merge: a
read, a change and a ``put``), and :attr:`Peer.notes` says so.

Call ``i`` of a block picks its record by ``i`` so every peer touches the same spread:
resource ``i % RESOURCES`` and that resource's thread ``(i // RESOURCES) % THREADS_PER_RESOURCE``
(:func:`resource_index`, :func:`thread_index`), which covers every fixture thread.

``get_thread``            read one thread by id (:func:`resource_index`'s thread :func:`thread_index`)
``get_resource``          read one resource (its working memory) by id: resource ``i % RESOURCES``
``create_thread``         create a new thread, fresh id ``bench-new-<i>``, for resource ``i % RESOURCES``
``replace_working_memory`` replace resource ``i % RESOURCES``'s working memory with a ~200-char text
                          that is a JSON object (``{"note": "<i>…"}``), so the merges that follow still apply
``merge_field``           merge one field ``{"f<i % 10>": i}`` into resource ``i % RESOURCES``'s JSON working memory
``list_newest_20``        the 20 most recently updated threads of the resource with :data:`LIST_THREADS` threads
``get_thread_16``         ``get_thread`` from 16 concurrent clients (threads, or async tasks for
                          workmem's async API and Node's event loop); ``count`` calls in all, each
                          sample one call's latency, ops/s from the block's wall time
``get_thread_16_threads`` ``get_thread_16`` on 16 OS threads sharing one sync client where the system has
                          threads (workmem's sync API, LangGraph); Node has none: Mastra's is its ``get_thread_16``
``merges_kept``           (not timed) 16 concurrent clients each merging 20 distinct keys into one
                          fresh resource's JSON working memory: how many of the 320 keys are kept
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONCURRENT_CLIENTS",
    "LIST_THREADS",
    "MERGES_PER_CLIENT",
    "OPERATIONS",
    "RESOURCES",
    "THREADS_PER_RESOURCE",
    "Measurement",
    "Peer",
    "Unavailable",
    "in_threads",
    "replacement",
    "resource_index",
    "thread_index",
]

OPERATIONS = (
    "get_thread",
    "get_resource",
    "create_thread",
    "replace_working_memory",
    "merge_field",
    "list_newest_20",
    "get_thread_16",
    "get_thread_16_threads",
)
"""The timed operations, in table order; ``merges_kept`` is counted, not timed."""

CONCURRENT_CLIENTS = 16
MERGES_PER_CLIENT = 20
LIST_THREADS = 2_000
"""Threads of the resource ``list_newest_20`` lists."""
RESOURCES = 200
"""Resources the fixture makes (each with a JSON working memory); ``get_*`` and writes spread over them."""
THREADS_PER_RESOURCE = 10
"""Threads per fixture resource (besides the one resource with :data:`LIST_THREADS`)."""


class Unavailable(Exception):
    """This peer cannot run here (no Node, a package missing, no server); the message says why."""


@dataclass
class Measurement:
    """One block of ``count`` calls of one operation."""

    latencies: list[float]
    """Seconds per call, in call order (for ``get_thread_16``: each call's own latency)."""
    seconds: float
    """Wall time of the whole block: ops/s is ``len(latencies) / seconds``."""
    extra: dict[str, Any] = field(default_factory=dict)


class Peer(ABC):
    """One system on one backend. Not thread-safe: the runner calls it from one thread."""

    system: str
    """``workmem``, ``workmem-async``, ``mastra`` or ``langgraph``."""
    backend: str
    """``postgres`` or ``file``."""
    notes: list[str]
    """What is not equal to the others (runtime, pool size, prepared statements, durability, work per call)."""

    @abstractmethod
    def prepare(self) -> None:
        """Create this peer's own fresh namespace and its fixture: :data:`RESOURCES` resources with
        :data:`THREADS_PER_RESOURCE` threads each, plus one resource with :data:`LIST_THREADS` threads."""

    @abstractmethod
    def measure(self, operation: str, start: int, count: int) -> Measurement:
        """``count`` calls of ``operation`` (one of :data:`OPERATIONS`), call ``i`` for ``i`` in
        ``start .. start+count-1`` (so writes can use fresh ids and reads can spread over the fixture)."""

    @abstractmethod
    def merges_kept(self) -> int:
        """:data:`CONCURRENT_CLIENTS` clients x :data:`MERGES_PER_CLIENT` distinct keys merged concurrently
        into one fresh resource's JSON working memory: how many keys it holds afterwards."""

    @abstractmethod
    def close(self) -> None:
        """Drop this peer's namespace (schema, file, keys) and release its connections."""


def resource_index(i: int, resources: int = RESOURCES) -> int:
    """The fixture resource call ``i`` works on."""
    return i % resources


def thread_index(i: int, resources: int = RESOURCES, threads_per_resource: int = THREADS_PER_RESOURCE) -> int:
    """Which of :func:`resource_index`'s threads call ``i`` reads: successive rounds of ids walk all of them."""
    return (i // resources) % threads_per_resource


def replacement(i: int) -> str:
    """The ~200-character JSON working memory ``replace_working_memory`` writes (a JSON object: merges still apply)."""
    return json.dumps({"note": f"{i} " + "the user prefers brief answers in English; " * 4})


def in_threads(clients: int, body: Callable[[int], None]) -> float:
    """Run ``body(c)`` for ``c`` in ``0 .. clients-1``, one OS thread each, released together; the wall seconds.

    The first error of any client is raised after all have finished, so a failing
    client fails the measurement instead of shortening it.
    """
    barrier = threading.Barrier(clients + 1)
    errors: list[BaseException] = []

    def run(c: int) -> None:
        barrier.wait()
        try:
            body(c)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(c,), name=f"bench-client-{c}") for c in range(clients)]
    for worker in workers:
        worker.start()
    barrier.wait()
    began = time.perf_counter_ns()
    for worker in workers:
        worker.join()
    seconds = (time.perf_counter_ns() - began) / 1e9
    if errors:
        raise errors[0]
    return seconds
