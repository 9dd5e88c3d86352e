"""Races inside one process: owner creation, merges and metadata updates, each worker on its own connection."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from workmem.errors import MissingDriverError, ThreadNotFoundError, ThreadOwnershipError, WorkingMemoryTooLargeError
from workmem.records import Thread
from workmem.storage import MemoryStorage

from .apis import AsyncStorageView
from .registry import CheckContext, check

__all__ = ["LIMIT", "MERGE_WORKERS", "OWNER_WORKERS", "race"]

T = TypeVar("T")

OWNER_WORKERS = 8
MERGE_WORKERS = 16
MERGES_PER_WORKER = 2


def race(conns: list[MemoryStorage], work: Callable[[int, MemoryStorage], T]) -> list[T | BaseException]:
    """Run ``work(i, conns[i])`` in one thread per connection, released together; results or exceptions."""
    barrier = threading.Barrier(len(conns))
    results: list[T | BaseException] = [RuntimeError("worker did not finish")] * len(conns)

    def worker(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = work(index, conns[index])
        except BaseException as exc:
            results[index] = exc

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(conns))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def _create(p: str) -> Callable[[int, MemoryStorage], Thread]:
    return lambda i, storage: storage.save_thread(Thread(p + "t", f"{p}owner{i}", f"by {i}"))


@check(
    "owner_race",
    "racing creates of one thread id with different owners: one wins, the rest get ThreadOwnershipError; "
    "no write naming a thread's former owner (update_thread, delete_thread, set and merge in thread scope, "
    "and Memory's) lands on the thread re-created under another",
)
def owner_race(ctx: CheckContext) -> None:
    conns = [ctx.open() for _ in range(OWNER_WORKERS)]
    for _ in range(ctx.profile.race_rounds):
        p = ctx.prefix()
        tid = p + "t"
        results = race(conns, _create(p))
        winners = [i for i, r in enumerate(results) if isinstance(r, Thread)]
        others = [r for r in results if not isinstance(r, Thread | ThreadOwnershipError)]
        assert not others, f"racing save_thread raised {others[0]!r}"
        assert len(winners) == 1, f"{len(winners)} of {OWNER_WORKERS} racing creates with different owners succeeded"
        winner = winners[0]
        for reader in (ctx.storage, conns[-1 - winner]):
            stored = reader.get_thread(tid)
            ok = stored is not None and (stored.resource_id, stored.title) == (f"{p}owner{winner}", f"by {winner}")
            assert ok, f"the winner was owner{winner} but the stored thread is {stored!r}"
    _former_owner_race(ctx)


@dataclass(frozen=True, slots=True)
class _OwnerWrite:
    """One public write naming the owner ``a``, raced against the thread's re-creation under ``b``."""

    name: str
    write: Callable[[], object]
    left: Callable[[Thread], bool]
    """Whether ``b``'s thread shows this write (a delete's shows as the thread gone: ``False`` here)."""


def _memory_of(thread: Thread) -> str | None:
    value = (thread.metadata or {}).get("workingMemory")
    return value if isinstance(value, str) else None


def _agent(conn: MemoryStorage, **settings: Any) -> Callable[..., Any]:
    """``call(method, *args, **kwargs)`` on a thread-scope ``Memory`` over ``conn`` (on the async API an
    ``AsyncMemory`` over the async storage behind it, awaited on the suite's loop)."""
    from workmem.agent import AsyncMemory, Memory

    if isinstance(conn, AsyncStorageView):
        memory = AsyncMemory(conn.storage, scope="thread", **settings)
        return lambda method, *args, **kwargs: conn.loop.run(getattr(memory, method)(*args, **kwargs))
    sync = Memory(conn, scope="thread", **settings)
    return lambda method, *args, **kwargs: getattr(sync, method)(*args, **kwargs)


def _owner_writes(ctx: CheckContext, tid: str, a: str) -> list[_OwnerWrite]:
    """Every public write that names a thread's owner, each leaving its own mark on the thread.

    Every text written is a JSON object, so that the merges racing with them merge (and write) too."""
    conn = ctx.open()
    agent = _agent(ctx.open())
    writes = [
        _OwnerWrite(
            "update_thread",
            lambda: conn.update_thread(tid, title="renamed by a", resource_id=a),
            lambda t: t.title == "renamed by a",
        ),
        _OwnerWrite(
            "set_working_memory (thread scope)",
            lambda: conn.set_working_memory('{"set by a": 1}', scope="thread", thread_id=tid, resource_id=a),
            lambda t: "set by a" in (_memory_of(t) or ""),
        ),
        _OwnerWrite(
            "merge_working_memory (thread scope)",
            lambda: conn.merge_working_memory({"merged by a": 1}, scope="thread", thread_id=tid, resource_id=a),
            lambda t: "merged by a" in (_memory_of(t) or ""),
        ),
        _OwnerWrite("delete_thread", lambda: conn.delete_thread(tid, resource_id=a), lambda t: False),
        _OwnerWrite("Memory.delete_thread", lambda: agent("delete_thread", tid, resource_id=a), lambda t: False),
        _OwnerWrite(
            "Memory.update_thread",
            lambda: agent("update_thread", tid, title="renamed by a's Memory", resource_id=a),
            lambda t: t.title == "renamed by a's Memory",
        ),
        _OwnerWrite(
            "Memory.update_working_memory",
            lambda: agent("update_working_memory", '{"set by a\'s Memory": 1}', thread_id=tid, resource_id=a),
            lambda t: "set by a's Memory" in (_memory_of(t) or ""),
        ),
        _OwnerWrite(
            "Memory.call_tool",
            lambda: agent("call_tool", {"memory": '{"told by a\'s Memory": 1}'}, thread_id=tid, resource_id=a),
            lambda t: "told by a's Memory" in (_memory_of(t) or ""),
        ),
    ]
    try:
        schema_agent = _agent(ctx.open(), schema={"type": "object"})
    except MissingDriverError:  # schema mode needs workmem[schema]; its merge is the storage's, raced above
        pass
    else:
        writes.append(
            _OwnerWrite(
                "Memory.merge_working_memory",
                lambda: schema_agent("merge_working_memory", {"merged by a's Memory": 1}, thread_id=tid, resource_id=a),
                lambda t: "merged by a's Memory" in (_memory_of(t) or ""),
            )
        )
    return writes


WRITERS_PER_WRITE = 2
"""Threads making one kind of write naming the owner at a time, each once per move."""


def _former_owner_race(ctx: CheckContext) -> None:
    """For each public write that names a thread's owner in turn: a mover creates a thread under ``a``, then
    deletes it and re-creates the id under ``b``, ``race_rounds`` times; as each ``a`` thread appears,
    :data:`WRITERS_PER_WRITE` threads make the write naming ``a``, so that it is in flight while the thread
    moves. ``b``'s thread must never show it: the owner a write names is checked by the write itself (a read
    before the write leaves the gap this race falls into). One write per thread and move keeps the thread's
    key from going hot (a compare-and-set adapter would starve the mover's delete)."""
    p = ctx.prefix()
    tid, a, b = p + "t-moved", p + "a", p + "b"
    mover = ctx.open()
    for write in _owner_writes(ctx, tid, a):
        stolen = _race_one_write(ctx, mover, write, tid, a, b)
        assert stolen is None, (
            f"{write.name} naming the former owner a landed on the thread re-created under b: {stolen}"
            f" (a = {a!r}, b = {b!r}). The owner a write names must be checked by the write itself (WHERE id = ..."
            " AND resourceId = ..., a row lock, a compare-and-set, a script), never by a read before it"
        )


def _race_one_write(
    ctx: CheckContext, mover: MemoryStorage, write: _OwnerWrite, tid: str, a: str, b: str
) -> str | None:
    """How ``b``'s thread showed ``write``, if it did in ``race_rounds`` moves; an unexpected error raises."""
    stop, created = threading.Event(), threading.Event()
    moves = [0]
    failures: list[BaseException] = []

    def write_once_per_move() -> None:
        done = 0
        while not stop.is_set():
            if not created.wait(0.05) or moves[0] == done:
                time.sleep(0.0002)
                continue
            done = moves[0]
            try:
                write.write()
            except (ThreadNotFoundError, ThreadOwnershipError):
                pass
            except BaseException as exc:
                failures.append(exc)
                return

    writers = [threading.Thread(target=write_once_per_move, daemon=True) for _ in range(WRITERS_PER_WRITE)]
    for writer in writers:
        writer.start()
    try:
        for _ in range(ctx.profile.race_rounds):
            moves[0] += 1
            mover.create_thread(Thread(tid, a, "a's"))
            created.set()  # the writers go: each write naming a starts while a's thread is there
            time.sleep(0.001)
            mover.delete_thread(tid)
            mover.create_thread(Thread(tid, b, "b's"))
            time.sleep(0.004)
            created.clear()
            got = mover.get_thread(tid)
            if got is None:
                return "it deleted it"
            if write.left(got) or got.resource_id != b or got.title != "b's" or got.metadata is not None:
                return f"the thread became {got!r}"
            mover.delete_thread(tid)
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=30)
    assert not failures, f"{write.name} naming the thread's owner raised {failures[0]!r}"
    return None


def _address(scope: str, rid: str, tid: str, worker: int) -> dict[str, Any]:
    if scope == "resource":
        return {"scope": scope, "resource_id": rid}
    return {"scope": scope, "thread_id": tid, "resource_id": rid if worker % 2 else None}


def _merges(scope: str, rid: str, tid: str) -> Callable[[int, MemoryStorage], None]:
    def work(i: int, storage: MemoryStorage) -> None:
        for j in range(MERGES_PER_WORKER):
            storage.merge_working_memory(
                {f"w{i}k{j}": j, "shared": {f"w{i}k{j}": True}}, **_address(scope, rid, tid, i)
            )

    return work


def _race_rounds(ctx: CheckContext) -> Iterator[tuple[list[MemoryStorage], str, str]]:
    """The rounds of a race: its connections (opened once), and a fresh resource id and thread id each round."""
    conns = [ctx.open() for _ in range(MERGE_WORKERS)]
    for _ in range(ctx.profile.race_rounds):
        p = ctx.prefix()
        yield conns, p + "r", p + "t"


def _no_lost_updates(ctx: CheckContext, scope: str) -> None:
    for conns, rid, tid in _race_rounds(ctx):
        if scope == "thread":
            ctx.storage.save_thread(Thread(tid, rid))
        results = race(conns, _merges(scope, rid, tid))
        errors = [r for r in results if r is not None]
        assert not errors, f"a concurrent merge raised {errors[0]!r}"
        text = ctx.storage.get_working_memory(**_address(scope, rid, tid, 0))
        doc = json.loads(text or "{}")
        keys = {f"w{i}k{j}" for i in range(MERGE_WORKERS) for j in range(MERGES_PER_WORKER)}
        lost = sorted(keys - set(doc))
        lost_shared = sorted(keys - set(doc.get("shared") or {}))
        total = MERGE_WORKERS * MERGES_PER_WORKER
        assert not lost and not lost_shared, (
            f"{len(lost)} of {total} concurrent {scope}-scope merges were lost"
            f" (top level: {lost[:8]}, nested: {lost_shared[:8]})"
        )


@check("no_lost_updates_resource", f"{MERGE_WORKERS} connections merging distinct keys into one resource lose none")
def no_lost_updates_resource(ctx: CheckContext) -> None:
    _no_lost_updates(ctx, "resource")


@check("no_lost_updates_thread", f"{MERGE_WORKERS} connections merging distinct keys into one thread lose none")
def no_lost_updates_thread(ctx: CheckContext) -> None:
    _no_lost_updates(ctx, "thread")


# -- concurrent metadata updates ------------------------------------------------------------

UPDATES_PER_WORKER = 1


@check(
    "concurrent_metadata_updates",
    f"{MERGE_WORKERS} connections updating distinct metadata keys of one thread and one resource, while merging"
    " working memory into both, lose none",
)
def concurrent_metadata_updates(ctx: CheckContext) -> None:
    for conns, rid, tid in _race_rounds(ctx):
        fresh = rid + "-new"
        ctx.storage.update_resource(rid, metadata={"base": True})
        ctx.storage.save_thread(Thread(tid, rid, "t", {"base": True}))

        def work(i: int, storage: MemoryStorage, rid: str = rid, tid: str = tid, fresh: str = fresh) -> None:
            for j in range(UPDATES_PER_WORKER):
                key = f"w{i}k{j}"
                if i % 2:  # half the workers merge working memory: the same records, other fields
                    storage.merge_working_memory({key: j}, scope="thread", thread_id=tid)
                    storage.merge_working_memory({key: j}, scope="resource", resource_id=rid)
                else:
                    storage.update_thread(tid, metadata={key: j})
                    storage.update_resource(rid, metadata={key: j})
                storage.update_resource(fresh, metadata={key: j})  # racing creates, too

        errors = [r for r in race(conns, work) if r is not None]
        assert not errors, f"a concurrent metadata update raised {errors[0]!r}"
        updated = {f"w{i}k{j}" for i in range(0, MERGE_WORKERS, 2) for j in range(UPDATES_PER_WORKER)}
        merged = {f"w{i}k{j}" for i in range(1, MERGE_WORKERS, 2) for j in range(UPDATES_PER_WORKER)}
        thread, resource = ctx.storage.get_thread(tid), ctx.storage.get_resource(rid)
        created = ctx.storage.get_resource(fresh)
        assert thread is not None and resource is not None and created is not None, "a record is missing"
        outcomes = [
            ("thread metadata", updated | {"base"}, set(thread.metadata or {})),
            ("resource metadata", updated | {"base"}, set(resource.metadata or {})),
            ("new resource metadata", updated | merged, set(created.metadata or {})),
            ("thread working memory", merged, set(json.loads((thread.metadata or {}).get("workingMemory") or "{}"))),
            ("resource working memory", merged, set(json.loads(resource.working_memory or "{}"))),
        ]
        for what, want, got in outcomes:
            lost = sorted(want - got)
            assert not lost, f"{len(lost)} of {len(want)} concurrent writes to the {what} were lost: {lost[:8]}"


# -- the size limit under concurrency ---------------------------------------------------------

LIMIT = 200
"""The ``max_chars`` of the size-limit races: about ten of the racing fields fit."""
REPLACES_START = 2 * LIMIT
"""The text stored (with no limit) before the replace race: twice the limit."""


def _limited_merges(rid: str, tid: str) -> Callable[[int, MemoryStorage], dict[str, str]]:
    def work(i: int, storage: MemoryStorage) -> dict[str, str]:
        outcome: dict[str, str] = {}
        for scope in ("resource", "thread"):
            try:
                storage.merge_working_memory({f"w{i:02d}": "v" * 10}, **_address(scope, rid, tid, i), max_chars=LIMIT)
                outcome[scope] = "stored"
            except WorkingMemoryTooLargeError:
                outcome[scope] = "refused"
        return outcome

    return work


@check(
    "max_chars_merge_race",
    f"{MERGE_WORKERS} connections merging distinct fields at once with max_chars: the stored memory never "
    "exceeds the limit, and exactly the merges reported stored are there (both scopes)",
)
def max_chars_merge_race(ctx: CheckContext) -> None:
    for conns, rid, tid in _race_rounds(ctx):
        ctx.storage.save_thread(Thread(tid, rid))
        results = race(conns, _limited_merges(rid, tid))
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, f"a merge with max_chars raised {errors[0]!r}, not WorkingMemoryTooLargeError"
        outcomes = [r for r in results if isinstance(r, dict)]
        for scope in ("resource", "thread"):
            text = ctx.storage.get_working_memory(**_address(scope, rid, tid, 0)) or ""
            assert len(text) <= LIMIT, (
                f"{MERGE_WORKERS} concurrent {scope}-scope merges with max_chars={LIMIT} stored {len(text)} "
                f"characters: {text[:80]!r}..."
            )
            stored = {f"w{i:02d}" for i, outcome in enumerate(outcomes) if outcome[scope] == "stored"}
            kept = set(json.loads(text or "{}"))
            assert kept == stored, (
                f"{scope} scope: merges reported stored but missing {sorted(stored - kept)[:8]}, "
                f"stored but reported refused {sorted(kept - stored)[:8]}"
            )
            assert stored and len(stored) < MERGE_WORKERS, f"{scope} scope: {len(stored)} merges stored"


@check(
    "max_chars_replace_race",
    f"{MERGE_WORKERS} connections replacing memory stored above max_chars at once: each replace over the limit "
    "is stored only if no larger than the memory it replaces, so the memory only shrinks (both scopes)",
)
def max_chars_replace_race(ctx: CheckContext) -> None:
    sizes = [REPLACES_START - 1 - 9 * i for i in range(MERGE_WORKERS)]  # all over the limit, all smaller than START
    for conns, rid, tid in _race_rounds(ctx):
        ctx.storage.save_thread(Thread(tid, rid))
        for scope in ("resource", "thread"):
            ctx.storage.set_working_memory("s" * REPLACES_START, **_address(scope, rid, tid, 0))

        def work(i: int, storage: MemoryStorage, rid: str = rid, tid: str = tid) -> dict[str, str]:
            outcome: dict[str, str] = {}
            for scope in ("resource", "thread"):
                try:
                    storage.set_working_memory(
                        chr(97 + i % 26) * sizes[i], **_address(scope, rid, tid, i), max_chars=LIMIT
                    )
                    outcome[scope] = "stored"
                except WorkingMemoryTooLargeError:
                    outcome[scope] = "refused"
            return outcome

        results = race(conns, work)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, f"a replace with max_chars raised {errors[0]!r}, not WorkingMemoryTooLargeError"
        outcomes = [r for r in results if isinstance(r, dict)]
        for scope in ("resource", "thread"):
            text = ctx.storage.get_working_memory(**_address(scope, rid, tid, 0)) or ""
            stored = [sizes[i] for i, outcome in enumerate(outcomes) if outcome[scope] == "stored"]
            refused = [sizes[i] for i, outcome in enumerate(outcomes) if outcome[scope] == "refused"]
            assert stored, f"{scope} scope: every replace was refused, though each is smaller than what was stored"
            assert len(text) == min(stored), (
                f"{scope} scope: a replace of {len(text)} characters landed after one of {min(stored)}: the limit "
                "compared with a stale read, not with the memory it replaced"
            )
            larger = [size for size in refused if size <= len(text)]
            assert not larger, (
                f"{scope} scope: replaces of {larger[:4]} characters were refused, not larger than {len(text)}"
            )
