"""The check ``listing_under_churn``: a listing raced by creates, deletes and moves still lists every steady thread.

What every listing must give, whether or not it is one instant's page
(``capabilities.snapshot_listing``): a thread that exists throughout the call is
in it, exactly as stored; a thread of another owner, or one that never existed,
is not; the page is in order, with ``total`` its length and no thread twice.
Threads created or deleted during the call may be listed either way. On an
adapter whose listings are snapshots the ``linearizable`` check holds them to
more; on one whose listings are not (Upstash's ``listing="scan"``, MongoDB) this
is what they are held to. Every thread is new when saved (``save_thread``, not
``create_thread``), so a store without insert-only creation is measured too.
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from typing import get_args

from workmem.records import Direction, OrderBy, Thread, ThreadPage
from workmem.storage import MemoryStorage

from .concurrency import race
from .registry import CheckContext, check

__all__ = ["CHURNERS", "LISTERS", "STEADY", "page_problems"]

STEADY = 3
"""Threads of the listed resource that exist before the race and are never touched during it."""
CHURNERS = 2
"""Connections creating, updating, moving and deleting other threads of that resource (and of another)."""
LISTERS = 2
"""Connections listing the resource until the churn ends, once more after it."""
CHURN_STEPS = 12
"""Steps per churner per round: each creates a thread, updates it and deletes it, and moves one between owners."""
MAX_LISTINGS = 500
"""A bound on one lister's listings per round (the churn ends long before on every adapter measured)."""

BASE = datetime(2024, 1, 1, tzinfo=UTC)


def _churn(storage: MemoryStorage, p: str, owner: str, other: str, worker: int) -> None:
    mover = f"{p}m{worker}"
    for step in range(CHURN_STEPS):
        passing = storage.save_thread(Thread(f"{p}c{worker}-{step}", (owner, other)[step % 2], "passing"))
        storage.update_thread(passing.id, title="passing, renamed")
        storage.delete_thread(passing.id)
        storage.delete_thread(mover)  # moved: deleted, then saved under the other owner
        storage.save_thread(Thread(mover, (other, owner)[step % 2], "moving"))


def page_problems(
    page: ThreadPage, steady: dict[str, Thread], owner: str, p: str, order_by: OrderBy, direction: Direction
) -> list[str]:
    """What is wrong with ``page``, a full listing of ``owner`` raced by churn, given the ``steady`` threads."""
    ids = [thread.id for thread in page.threads]
    problems = []
    missing = sorted(set(steady) - set(ids))
    if missing:
        problems.append(f"left out {missing}, which existed, unchanged, throughout the call")
    changed = [t.id for t in page.threads if t.id in steady and t != steady[t.id]]
    if changed:
        problems.append(f"listed {changed} otherwise than stored")
    foreign = [t.id for t in page.threads if t.resource_id != owner or not t.id.startswith(p)]
    if foreign:
        problems.append(f"listed {foreign}, not threads of {owner!r}")
    if len(set(ids)) != len(ids):
        problems.append(f"listed a thread twice: {ids}")
    keys = [(getattr(t, order_by), t.id) for t in page.threads]
    if keys != sorted(keys, reverse=direction == "desc"):
        problems.append(f"is not ordered by {order_by} then id, {direction}: {ids}")
    if (page.total, page.has_more) != (len(ids), False):
        problems.append(f"says total={page.total}, has_more={page.has_more} of a full page of {len(ids)}")
    return problems


@check(
    "listing_under_churn",
    f"{LISTERS} connections listing a resource while {CHURNERS} others create, update, move and delete its other"
    f" threads: every listing holds the {STEADY} threads that exist throughout, as stored, in order, and no"
    " thread of another owner",
)
def listing_under_churn(ctx: CheckContext) -> None:
    conns = [ctx.open() for _ in range(CHURNERS + LISTERS)]
    for _ in range(ctx.profile.race_rounds):
        problems = _round(ctx, conns)
        assert not problems, f"{len(problems)} listings raced by churn were wrong; the first: {problems[0]}"


def _round(ctx: CheckContext, conns: list[MemoryStorage]) -> list[str]:
    """One race on a fresh namespace: what was wrong with each listing."""
    p = ctx.prefix()
    owner, other = p + "r", p + "o"
    created = (
        ctx.storage.save_thread(Thread(f"{p}s{i}", owner, f"steady {i}", {"i": i}, BASE + timedelta(hours=i)))
        for i in range(STEADY)
    )
    steady = {thread.id: thread for thread in created}
    churning = [CHURNERS]
    lock, over = threading.Lock(), threading.Event()

    def churn(i: int, storage: MemoryStorage) -> None:
        try:
            _churn(storage, p, owner, other, i)
        finally:
            with lock:
                churning[0] -= 1
                if not churning[0]:
                    over.set()

    def listings(i: int, storage: MemoryStorage) -> list[str]:
        pick = random.Random(i)
        problems: list[str] = []
        for _ in range(MAX_LISTINGS):
            last = over.is_set()
            order_by = pick.choice(get_args(OrderBy))
            direction = pick.choice(get_args(Direction))
            page = storage.list_threads(owner, per_page=None, order_by=order_by, direction=direction)
            problems += [
                f"list_threads({owner!r}, order_by={order_by!r}, direction={direction!r}) {problem}"
                for problem in page_problems(page, steady, owner, p, order_by, direction)
            ]
            if last:
                break
        return problems

    results = race(conns, lambda i, storage: listings(i, storage) if i >= CHURNERS else churn(i, storage))
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"a call racing the listings raised {errors[0]!r}"
    return [problem for r in results if isinstance(r, list) for problem in r]
