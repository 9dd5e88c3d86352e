"""Every record at once: iteration in id order (keyset pages) and bulk inserts, checked like single writes.

Iteration returns every record exactly once, ascending by id in code point order
(ids differing only in case or Unicode normalization are different ids), across
page boundaries and while other connections insert and delete: a record present
throughout appears exactly once, none appears twice. Bulk inserts leave every
present record as it was (and report its id), never move a thread to another
owner, store timestamps exactly as given, and insert the absent records of a
mixed batch. ``restore_thread`` restores only the same owner's thread.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage

from .concurrency import race
from .registry import CheckContext, check

__all__ = ["IDS_THAT_LOOK_ALIKE", "PAGE"]

R = TypeVar("R", Resource, Thread)

PAGE = 4
"""The page size the iteration checks read with (small: many page boundaries)."""
IDS_THAT_LOOK_ALIKE = ("a", "A", "\u00e9", "e\u0301", "\u00c9", "ss", "\u00df", "z", "Z", "\U0001f600", "\uffff", "~")
"""Suffixes that differ only in case or normalization, and code points on both sides of U+FFFF."""

T0 = datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)


def _mine(records: Iterable[Resource | Thread], prefix: str) -> Iterator[str]:
    return (record.id for record in records if record.id.startswith(prefix))


def _assert_ascending(ids: list[str], what: str) -> None:
    for before, after in itertools.pairwise(ids):
        assert before < after, f"{what} returned {after!r} after {before!r}: not strictly ascending by code point"


@check(
    "iteration_every_record_once",
    "iter_threads / iter_resources / *_page return every record once, ascending by code point, across pages",
)
def iteration_every_record_once(ctx: CheckContext) -> None:
    s, p = ctx.storage, ctx.prefix()
    suffixes = [*IDS_THAT_LOOK_ALIKE, *(f"n{i:02}" for i in range(3 * PAGE))]
    assert s.insert_resources(Resource(p + x, f"memory {x}", None, T0, T0) for x in suffixes) == frozenset()
    assert s.insert_threads(Thread(p + x, p + "owner", x, None, T0, T0) for x in suffixes) == frozenset()
    expected = sorted(p + x for x in suffixes)
    listed: tuple[tuple[str, list[Resource | Thread]], ...] = (
        ("iter_threads", list(s.iter_threads(page_size=PAGE))),
        ("iter_resources", list(s.iter_resources(page_size=PAGE))),
    )
    for what, records in listed:
        ids = [record.id for record in records]
        _assert_ascending(ids, what)
        assert list(_mine(records, p)) == expected, f"{what} returned {list(_mine(records, p))}, not {expected}"
    # The pages themselves: at most limit each, next_after the last id, None only after the last page.
    seen: list[str] = []
    after: str | None = None
    for _ in range(len(expected) + 2 * PAGE + 10_000):
        page = s.threads_after(after, limit=PAGE)
        ids = [t.id for t in page.records] + list(page.unreadable)
        assert len(ids) <= PAGE, f"threads_after(limit={PAGE}) returned {len(ids)} records"
        assert after is None or all(i > after for i in ids), f"threads_after({after!r}) returned ids not after it"
        seen += [t.id for t in page.records]
        if page.next_after is None:
            break
        assert page.next_after == max(ids), f"next_after {page.next_after!r} is not the page's last id"
        after = page.next_after
    assert [i for i in seen if i.startswith(p)] == expected, "threads_after, page by page, missed or repeated threads"
    tail = s.resources_after(expected[-1], limit=PAGE)
    assert not [r.id for r in tail.records if r.id.startswith(p)], "resources_after(last id) returned the last again"


@check(
    "iteration_across_concurrent_writes",
    "iteration while others insert and delete: records present throughout appear exactly once, none twice",
)
def iteration_across_concurrent_writes(ctx: CheckContext) -> None:
    s, other, p = ctx.storage, ctx.open(), ctx.prefix()
    count = 8 * PAGE
    stable = {f"{p}{i:03}" for i in range(0, count, 2)}
    doomed = [f"{p}{i:03}" for i in range(1, count, 2)]
    s.insert_threads(Thread(i, p + "owner", "", None, T0, T0) for i in sorted(stable | set(doomed)))
    s.insert_resources(Resource(i, None, None, T0, T0) for i in sorted(stable))
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:  # really concurrent: inserts and deletes racing the reader, on its own connection
        writer, n = ctx.open(), 0
        try:
            while not stop.is_set() and n < 4 * count:  # bounded: a correct reader always ends
                writer.insert_threads([Thread(f"{p}{n % count:03}~{n}", p + "churn", "", None, T0, T0)])
                writer.insert_resources([Resource(f"{p}{n % count:03}~{n}", None, None, T0, T0)])
                writer.delete_thread(f"{p}{(n - 3) % count:03}~{n - 3}")
                n += 1
        except BaseException as exc:
            errors.append(exc)

    racer = threading.Thread(target=churn, daemon=True)
    racer.start()
    try:
        readers: tuple[tuple[str, Callable[[], Iterator[Resource | Thread]]], ...] = (
            ("iter_threads", lambda: s.iter_threads(page_size=PAGE)),
            ("iter_resources", lambda: s.iter_resources(page_size=PAGE)),
        )
        for what, iterate in readers:
            _read_while_writing(what, iterate, other, p, stable, doomed if what == "iter_threads" else [])
    finally:
        stop.set()
        racer.join(timeout=60)
    assert not errors, f"a concurrent writer failed: {errors[0]!r}"


def _read_while_writing(
    what: str,
    iterate: Callable[[], Iterator[Resource | Thread]],
    other: MemoryStorage,
    p: str,
    stable: set[str],
    doomed: list[str],
) -> None:
    """Iterate; after each record, another connection deletes a thread already passed and inserts one before it."""
    ids: list[str] = []
    bound = 10 * (len(stable) + len(doomed)) + 100  # records of this check read: more means it does not end
    mine = 0
    for n, record in enumerate(iterate()):
        ids.append(record.id)
        if not record.id.startswith(p):
            continue
        mine += 1
        assert mine <= bound, (
            f"{what} read {mine} records of this check and never reached the end (pages cut by offset?)"
        )
        passed = [d for d in doomed if d < record.id]
        if passed:  # a deletion behind the reader: an offset-based reader would skip a record now
            doomed.remove(passed[0])
            other.delete_thread(passed[0])
        # an insert behind the reader: an offset-based reader would return a record twice now
        behind = f"{p}!{n:05}"  # '!' sorts before the digits of every id made here
        if behind < record.id:
            other.insert_threads([Thread(behind, p + "late", "", None, T0, T0)])
            other.insert_resources([Resource(behind, None, None, T0, T0)])
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"{what} returned {twice[:5]} more than once while others wrote"
    missing = sorted(stable - set(ids))
    assert not missing, f"{what} skipped {missing[:5]}, present throughout, while others inserted and deleted"
    _assert_ascending(ids, what)


@check(
    "bulk_insert_keeps_what_exists",
    "insert_threads / insert_resources report present ids and leave them, never move a thread, keep timestamps",
)
def bulk_insert_keeps_what_exists(ctx: CheckContext) -> None:
    s, p = ctx.storage, ctx.prefix()
    alice, bob = p + "alice", p + "bob"
    made, changed = T0, T0 + timedelta(days=3, milliseconds=1)
    first = [
        Thread(p + "t0", alice, "zero", {"workingMemory": "# zero", "n": 1}, made, changed),
        Thread(p + "t1", alice, "", None, made, made),
        Thread(p + "t2", bob, "two", {"deep": {"x": [1, 2.5, None]}}, made - timedelta(days=400), changed),
    ]
    assert s.insert_threads(first) == frozenset(), "insert_threads into nothing reported ids as present"
    for thread in first:
        assert s.get_thread(thread.id) == thread, f"insert_threads stored {s.get_thread(thread.id)!r}, not {thread!r}"
    assert s.get_working_memory(scope="thread", thread_id=p + "t0") == "# zero"
    # A mixed batch: present ids (offered with another owner, title and times) stay; the absent ones go in.
    mixed = [
        Thread(p + "t0", bob, "stolen", None, changed, changed),
        Thread(p + "t3", bob, "three", {"k": "v"}, made, changed),
        Thread(p + "t2", alice, "moved?", None, made, made),
        Thread(p + "t4", alice, "four", None, changed, changed),
    ]
    present = s.insert_threads(mixed)
    assert present == {p + "t0", p + "t2"}, f"insert_threads reported {sorted(present)} present, not t0 and t2"
    for thread in first:
        stored = s.get_thread(thread.id)
        assert stored == thread, f"a bulk insert changed the present thread {thread.id!r}: {stored!r}"
    for thread in (mixed[1], mixed[3]):
        assert s.get_thread(thread.id) == thread, f"the absent thread {thread.id!r} was not inserted as given"
    assert s.list_threads(alice).total == 3, "the owner's thread count is not exact after a bulk insert"
    assert s.list_threads(bob).total == 2, "the owner's thread count is not exact after a bulk insert"
    assert [t.id for t in s.list_threads(bob, order_by="created_at", direction="asc").threads] == [p + "t2", p + "t3"]
    # Resources: the same rules; working memory and metadata exactly as given.
    resources = [Resource(p + "r0", "# r0", {"a": 1}, made, changed), Resource(p + "r1", None, None, made, made)]
    assert s.insert_resources(resources) == frozenset()
    again = [Resource(p + "r0", "# other", {"b": 2}, changed, changed), Resource(p + "r2", "{}", None, made, made)]
    assert s.insert_resources(again) == {p + "r0"}, "insert_resources did not report the present resource"
    for resource in (*resources, again[1]):
        stored_resource = s.get_resource(resource.id)
        assert stored_resource == resource, f"resource {resource.id!r} is {stored_resource!r}, not {resource!r}"
    assert s.insert_threads([]) == frozenset() and s.insert_resources(iter(())) == frozenset()


@check(
    "bulk_insert_race",
    "racing bulk inserts of the same ids with different owners: each id is inserted by exactly one, never moved",
)
def bulk_insert_race(ctx: CheckContext) -> None:
    workers = 4
    conns = [ctx.open() for _ in range(workers)]
    for _ in range(max(1, ctx.profile.race_rounds // 4)):
        p = ctx.prefix()
        ids = [f"{p}{i:02}" for i in range(12)]

        results = race(conns, _bulk_inserts(p, ids))
        failures = [r for r in results if isinstance(r, BaseException)]
        assert not failures, f"a racing insert_threads raised {failures[0]!r}"
        for i in ids:
            inserted_by = [w for w, r in enumerate(results) if isinstance(r, frozenset) and i not in r]
            assert len(inserted_by) == 1, f"{len(inserted_by)} racing bulk inserts each claim to have inserted {i!r}"
            stored = ctx.storage.get_thread(i)
            winner = inserted_by[0]
            assert stored is not None and (stored.resource_id, stored.title) == (f"{p}owner{winner}", str(winner)), (
                f"{i!r} was inserted by worker {winner} but is stored as {stored!r}"
            )
        total = sum(ctx.storage.list_threads(f"{p}owner{w}").total for w in range(workers))
        assert total == len(ids), f"the owners' thread counts add up to {total}, not {len(ids)}"


@check("replace_thread_refuses_others", "replace_thread replaces title, metadata and both timestamps of the same owner")
def replace_thread_refuses_others(ctx: CheckContext) -> None:
    s, p = ctx.storage, ctx.prefix()
    original = Thread(p + "t", p + "alice", "original", {"workingMemory": "# a"}, T0, T0 + timedelta(hours=1))
    s.create_thread(original)
    assert s.restore_thread(Thread(p + "t", p + "mallory", "taken", None, T0, T0)) is False
    assert s.get_thread(p + "t") == original, "restore_thread with another owner changed the thread"
    assert s.restore_thread(Thread(p + "nothing", p + "alice")) is False
    assert s.get_thread(p + "nothing") is None, "restore_thread created a thread"
    replacement = Thread(p + "t", p + "alice", "", {"n": 2}, T0 - timedelta(days=9), T0 - timedelta(days=8))
    assert s.restore_thread(replacement) is True
    assert s.get_thread(p + "t") == replacement, "restore_thread did not store every field as given"
    assert s.get_working_memory(scope="thread", thread_id=p + "t") is None
    assert s.list_threads(p + "alice").total == 1 and s.list_threads(p + "mallory").total == 0


def _bulk_inserts(p: str, ids: list[str]) -> Callable[[int, MemoryStorage], frozenset[str]]:
    def work(index: int, storage: MemoryStorage) -> frozenset[str]:
        order = ids if index % 2 else ids[::-1]
        return storage.insert_threads(Thread(i, f"{p}owner{index}", str(index), None, T0, T0) for i in order)

    return work
