"""Erasing a user (capability ``erase``): ``delete_resource`` removes one user whole, and nobody else.

With ``capabilities.history`` too, the checks write with history on, so that the
versions of both scopes are part of what must go (and be counted).
"""

from __future__ import annotations

import threading
from typing import Any

from workmem.errors import ThreadNotFoundError
from workmem.history import ErasedResource, HistoryKey
from workmem.records import Thread
from workmem.storage import MemoryStorage

from .concurrency import race
from .registry import CheckContext, check
from .versions import versions_of

__all__: list[str] = []


def _history(ctx: CheckContext) -> bool | None:
    """``history=True`` where the adapter records versions, else off."""
    return True if ctx.capabilities.history else None


def _count(conn: MemoryStorage, key: HistoryKey) -> int:
    return len(versions_of(conn, key)) if conn.capabilities.history else 0


def _snapshot(conn: MemoryStorage, resource_id: str, thread_ids: list[str]) -> dict[str, Any]:
    """What one user's records and history look like now (to see that an erase of another left them alone)."""
    history = conn.capabilities.history
    state: dict[str, Any] = {"resource": conn.get_resource(resource_id)}
    state["listing"] = conn.list_threads(resource_id, per_page=None).threads
    if history:
        state["history"] = versions_of(conn, HistoryKey(resource_id))
    for tid in thread_ids:
        state[tid] = conn.get_thread(tid)
        if history:
            state[f"history {tid}"] = versions_of(conn, HistoryKey(resource_id, tid))
    return state


@check(
    "delete_resource_erases_one_user",
    "delete_resource removes the resource, every thread it owns, their working memory and the history of both "
    "scopes, returns exactly what it removed, is idempotent, and leaves every other resource (look-alike ids, "
    "a thread named like the erased user) untouched",
    capability="erase",
)
def delete_resource_erases_one_user(ctx: CheckContext) -> None:
    conn = ctx.open(history=_history(ctx))
    p = ctx.prefix()
    user = p + "u"
    t1, t2 = p + "t1", p + "t0"
    conn.update_resource(user, working_memory='{"likes":"tea"}', metadata={"plan": "pro"})
    conn.merge_working_memory({"city": "Lyon"}, scope="resource", resource_id=user)
    for tid in (t1, t2):
        conn.create_thread(Thread(tid, user, "mine"))
        conn.set_working_memory('{"topic":1}', scope="thread", resource_id=user, thread_id=tid)
        conn.merge_working_memory({"more": True}, scope="thread", resource_id=user, thread_id=tid)
    versions = _count(conn, HistoryKey(user)) + sum(_count(conn, HistoryKey(user, t)) for t in (t1, t2))
    others: dict[str, list[str]] = {}
    for index, other in enumerate((p + "u2", p + "U", p + "u_", p + "u%", p + "x")):
        own = [user] if index == 0 else [f"{other}-t"]  # the first owns a thread whose id is the erased user's
        conn.set_working_memory(f'{{"other":{index}}}', scope="resource", resource_id=other)
        for tid in own:
            conn.create_thread(Thread(tid, other, "theirs"))
            conn.set_working_memory('{"theirs":1}', scope="thread", resource_id=other, thread_id=tid)
        others[other] = own
    before = {other: _snapshot(conn, other, own) for other, own in others.items()}

    erased = conn.delete_resource(user)
    expected = ErasedResource(user, True, tuple(sorted((t1, t2))), versions)
    assert erased == expected, f"delete_resource returned {erased!r}; it removed {expected!r}"
    assert conn.get_resource(user) is None, "the erased resource is still there"
    for tid in (t1, t2):
        assert conn.get_thread(tid) is None, f"the erased user's thread {tid!r} is still there"
    listing = conn.list_threads(user, per_page=None)
    assert listing.total == 0 and not listing.threads, f"the erased user still lists {listing!r}"
    assert conn.get_working_memory(scope="resource", resource_id=user) is None, "the erased memory is still there"
    _no_history_left(ctx, conn, user, [t1, t2])
    after = {other: _snapshot(conn, other, own) for other, own in others.items()}
    for other in others:
        assert after[other] == before[other], (
            f"erasing {user!r} changed {other!r}: {before[other]!r} became {after[other]!r}"
        )

    again = conn.delete_resource(user)
    assert again == ErasedResource(user, False, (), 0), f"erasing {user!r} again returned {again!r}, not nothing"
    assert not again.removed_anything
    orphan = p + "orphan"  # threads whose owner has no resource record
    conn.create_thread(Thread(p + "o1", orphan))
    erased = conn.delete_resource(orphan)
    assert erased == ErasedResource(orphan, False, (p + "o1",), 0), f"erasing a user with no record: {erased!r}"
    nobody = conn.delete_resource(p + "nobody")
    assert nobody == ErasedResource(p + "nobody", False, (), 0), f"erasing nobody returned {nobody!r}"


def _no_history_left(ctx: CheckContext, conn: MemoryStorage, user: str, threads: list[str]) -> None:
    """No version of ``user`` is left, in either scope (a thread's read by re-creating it: a missing one has none)."""
    if not ctx.capabilities.history:
        return
    left = versions_of(conn, HistoryKey(user))
    assert not left, f"the erased user's resource history is still there: {left!r}"
    for tid in threads:
        conn.create_thread(Thread(tid, user))
        try:
            left = versions_of(conn, HistoryKey(user, tid))
            assert not left, f"the erased user's thread {tid!r} left its history: {left!r}"
        finally:
            conn.delete_thread(tid)


CREATORS = 3
THREADS_PER_CREATOR = 16
"""At most this many threads each creator makes in a round; the erase starts once one has made two."""


@check(
    "delete_resource_races_writes",
    "delete_resource raced against writers creating that user's threads and writing its working memory leaves "
    "a state some order explains: each thread erased (listed, gone, no history left) or created after the erase "
    "(whole, its history every write made to it); the count of erased versions exact",
    capability="erase",
)
def delete_resource_races_writes(ctx: CheckContext) -> None:
    history = _history(ctx)
    conns = [ctx.open(history=history) for _ in range(CREATORS + 1)]
    for _ in range(max(1, ctx.profile.race_rounds // 3)):  # one round in standard: an erase may chase for a while
        _erase_round(ctx, conns, history is not None)


def _erase_round(ctx: CheckContext, conns: list[MemoryStorage], history: bool) -> None:
    p = ctx.prefix()
    user = p + "u"
    conns[0].set_working_memory("before", scope="resource", resource_id=user)
    started, erasing, done = threading.Event(), threading.Event(), threading.Event()
    created: list[list[str]] = [[] for _ in conns]
    writes: dict[str, int] = {}
    """Per thread: how many of its writes succeeded."""
    lock = threading.Lock()

    def work(index: int, conn: MemoryStorage) -> ErasedResource | None:
        if index == 0:
            started.wait(timeout=30)
            erasing.set()
            try:
                return conn.delete_resource(user)
            finally:
                done.set()
        after = 0
        for j in range(THREADS_PER_CREATOR):  # bounded: an erase that chases new threads must not be fed forever
            if done.is_set():
                after += 1
                if after > 2:
                    break
            tid = f"{p}t{index}-{j:03}"
            conn.create_thread(Thread(tid, user))
            created[index].append(tid)
            for n in range(2):
                try:
                    conn.merge_working_memory({f"n{n}": n}, scope="thread", resource_id=user, thread_id=tid)
                except ThreadNotFoundError:  # erased in between: the rest of its writes are refused too
                    continue
                with lock:
                    writes[tid] = writes.get(tid, 0) + 1
            if j == 1:  # two threads made: the erase may start, and the rest are made while it runs
                started.set()
                erasing.wait(timeout=30)
        return None

    results = race(conns, work)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert not failed, f"a writer or the erase raised {failed[0]!r}"
    erased = results[0]
    assert isinstance(erased, ErasedResource), f"delete_resource returned {erased!r}"
    assert erased.resource, "delete_resource did not report the resource record that existed"
    reader = conns[0]
    assert reader.get_resource(user) is None, "the erased resource record is back"
    listed = set(erased.threads)
    every = {tid for ids in created for tid in ids}
    assert listed <= every, f"delete_resource reported threads nobody created: {sorted(listed - every)}"
    for tid in sorted(every):
        thread = reader.get_thread(tid)
        if tid in listed:
            assert thread is None, f"{tid!r} was reported erased but is there: {thread!r}"
            continue
        assert thread is not None, f"{tid!r} is gone but delete_resource did not report it"
        assert thread.resource_id == user, f"{tid!r} moved to {thread.resource_id!r}"
        memory = reader.get_working_memory(scope="thread", resource_id=user, thread_id=tid)
        wrote = writes.get(tid, 0)
        assert wrote == 2, f"{tid!r}, created after the erase, had {2 - wrote} of its writes refused"
        if history:
            versions = versions_of(reader, HistoryKey(user, tid))
            numbers = [v.version for v in versions]
            assert numbers == [2, 1], f"{tid!r}, created after the erase, has versions {numbers}, not [2, 1]"
            assert versions[0].content == memory, f"{tid!r}'s newest version is not its memory {memory!r}"
    if history:
        expected = 1 + sum(writes.get(tid, 0) for tid in listed)  # the resource's one version, the listed threads'
        assert erased.versions == expected, (
            f"delete_resource reported {erased.versions} versions erased; the writes it erased made {expected}"
        )
        _no_history_left(ctx, reader, user, sorted(listed))
    survivors = sorted(every - listed)
    listing = reader.list_threads(user, per_page=None)
    assert sorted(t.id for t in listing.threads) == survivors, (
        f"after the erase {user!r} lists {[t.id for t in listing.threads]}, not the threads created after it"
    )
