"""Insert-only thread creation: ``create_thread`` never replaces, and of racing creates exactly one wins."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from workmem.errors import ThreadExistsError
from workmem.records import Thread
from workmem.storage import MemoryStorage

from .concurrency import race
from .registry import CheckContext, check

__all__ = ["CREATE_WORKERS"]

CREATE_WORKERS = 8

_GIVEN_AT = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


def _refused(storage: MemoryStorage, thread: Thread) -> None:
    try:
        storage.create_thread(thread)
    except ThreadExistsError as exc:
        assert exc.thread_id == thread.id, f"ThreadExistsError names {exc.thread_id!r}, not {thread.id!r}"
    else:
        raise AssertionError(f"create_thread of the existing id {thread.id!r} (owner {thread.resource_id!r}) succeeded")


@check(
    "create_thread_insert_only",
    "create_thread stores a new thread as given; an existing id, any owner, raises ThreadExistsError, nothing changed",
)
def create_thread_insert_only(ctx: CheckContext) -> None:
    storage, other = ctx.storage, ctx.open()
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    given = Thread(tid, rid, "first", {"k": 1}, _GIVEN_AT, _GIVEN_AT)
    created = storage.create_thread(given)
    assert created == given, f"create_thread returned {created!r}, not the thread given {given!r}"
    stored = other.get_thread(tid)
    assert stored == given, f"create_thread stored {stored!r}, not the thread given {given!r}"
    for owner in (rid, p + "someone-else"):
        _refused(other, Thread(tid, owner, "second", {"k": 2}))
        after = storage.get_thread(tid)
        assert after == stored, f"a refused create_thread (owner {owner!r}) changed the thread to {after!r}"
    assert storage.list_threads(rid).total == 1, "a refused create_thread changed the thread count"
    assert storage.list_threads(p + "someone-else").total == 0, "a refused create_thread listed the thread"
    assert storage.delete_thread(tid)
    again = storage.create_thread(Thread(tid, p + "someone-else", "again"))
    assert other.get_thread(tid) == again, "a deleted thread's id could not be created again"


def _creates(p: str) -> Callable[[int, MemoryStorage], Thread]:
    return lambda i, storage: storage.create_thread(Thread(p + "t", p + "r", f"by {i}"))


@check(
    "create_thread_race",
    f"{CREATE_WORKERS} connections creating one thread id at once: one succeeds, the rest get ThreadExistsError",
)
def create_thread_race(ctx: CheckContext) -> None:
    conns = [ctx.open() for _ in range(CREATE_WORKERS)]
    for _ in range(ctx.profile.race_rounds):
        p = ctx.prefix()
        results = race(conns, _creates(p))
        winners = [i for i, r in enumerate(results) if isinstance(r, Thread)]
        others = [r for r in results if not isinstance(r, Thread | ThreadExistsError)]
        assert not others, f"racing create_thread raised {others[0]!r}"
        assert len(winners) == 1, f"{len(winners)} of {CREATE_WORKERS} racing creates of one thread id succeeded"
        stored = ctx.storage.get_thread(p + "t")
        title = f"by {winners[0]}"
        assert stored is not None and stored.title == title, f"the winner wrote {title!r}, but {stored!r} is stored"
        assert ctx.storage.list_threads(p + "r").total == 1
