"""Working memory's history (capability ``history``): one version per change, atomic with it, complete, scoped.

Every check here opens its connections with ``history`` on (``connect(url, history=True)``,
or ``history=N`` for retention; a factory's connections are set to record the same way) and
is reported skipped on an adapter that does not declare ``capabilities.history``.
(:mod:`workmem.conformance.history` is another thing: the call history the linearizability
checker reads.)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from workmem.errors import (
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    VersionNotFoundError,
    WorkingMemoryFormatError,
    WorkingMemoryTooLargeError,
)
from workmem.history import HistoryKey, MemoryVersion
from workmem.records import Resource, Scope, Thread
from workmem.storage import MemoryStorage
from workmem.timestamps import utc_now

from .concurrency import race
from .expect import json_equal
from .registry import CheckContext, check

__all__ = ["all_versions", "memory_of", "raises", "versions_of"]

_history_check = functools.partial(check, capability="history")
"""Registers a check gated on ``capabilities.history``."""

EVERY = 10_000
"""A page that holds every version the checks write."""


def _where(key: HistoryKey) -> dict[str, Any]:
    """The scope arguments of ``key``'s working memory."""
    scope: Scope = key.scope
    return {"scope": scope, "resource_id": key.resource_id, "thread_id": key.thread_id}


def versions_of(conn: MemoryStorage, key: HistoryKey) -> list[MemoryVersion]:
    """Every version of ``key``'s working memory, newest first (one page)."""
    page = conn.working_memory_history(**_where(key), limit=EVERY)
    assert page.next_before is None, f"a page of {EVERY} versions of {key} has next_before={page.next_before}"
    return list(page.versions)


def all_versions(conn: MemoryStorage, key: HistoryKey) -> list[MemoryVersion]:
    """Every version of ``key``'s working memory, oldest first, checked to be numbered 1, 2, ... without a gap."""
    versions = versions_of(conn, key)[::-1]
    numbers = [v.version for v in versions]
    assert numbers == list(range(1, len(numbers) + 1)), f"the versions of {key} are numbered {numbers}, not 1..N"
    return versions


def memory_of(conn: MemoryStorage, key: HistoryKey) -> str | None:
    return conn.get_working_memory(**_where(key))


def _both_scopes(conn: MemoryStorage, p: str) -> tuple[HistoryKey, HistoryKey]:
    """The two working memories of a fresh user ``p + "r"``: its own, and its thread ``p + "t"``'s (created here)."""
    conn.create_thread(Thread(p + "t", p + "r"))
    return HistoryKey(p + "r"), HistoryKey(p + "r", p + "t")


def _recording(ctx: CheckContext) -> tuple[MemoryStorage, str]:
    """A connection recording every version, and a fresh id prefix."""
    return ctx.open(history=True), ctx.prefix()


def raises(error: type[Exception], call: Callable[[], object], what: str) -> None:
    """Run ``call``, which must raise ``error`` (``what`` says what the call was)."""
    try:
        call()
    except error:
        return
    raise AssertionError(f"{what} did not raise {error.__name__}")


def _doc(version: MemoryVersion) -> dict[str, Any]:
    assert version.content is not None, f"version {version.version} of a merged memory has no content"
    doc = json.loads(version.content)
    assert isinstance(doc, dict), f"version {version.version} of a merged memory is not a JSON object"
    return doc


# -- each write records one version, a refused one none ---------------------------------------------------------


class _Ledger:
    """The history of the working memories a check writes, as it must be after each call."""

    def __init__(self, conn: MemoryStorage) -> None:
        self.conn = conn
        self.known: dict[HistoryKey, list[MemoryVersion]] = {}

    def seen(self, key: HistoryKey) -> list[MemoryVersion]:
        return self.known.setdefault(key, versions_of(self.conn, key))

    def recorded(
        self, what: str, key: HistoryKey, write: Callable[[], object], kind: str, source: dict[str, Any] | None
    ) -> MemoryVersion:
        """Run ``write``, which must record one version of ``key``: the memory after it, ``kind``, ``source``."""
        before = self.seen(key)
        started = utc_now()
        write()
        ended = utc_now()
        now = versions_of(self.conn, key)
        assert len(now) == len(before) + 1, f"{what} recorded {len(now) - len(before)} versions of {key}, not 1"
        assert now[1:] == before, f"{what} changed the earlier versions of {key}: {before!r} became {now[1:]!r}"
        newest = now[0]
        number = before[0].version + 1 if before else 1
        assert newest.version == number, f"{what} recorded version {newest.version}, not {number}"
        assert newest.key == key, f"{what} recorded a version of {newest.key}, asked for {key}"
        memory = memory_of(self.conn, key)
        assert newest.content == memory, f"{what} recorded {newest.content!r}, but the memory after it is {memory!r}"
        assert newest.kind == kind, f"{what} recorded a version of kind {newest.kind!r}, not {kind!r}"
        assert json_equal(source, newest.source), f"{what} recorded the source {newest.source!r}, given {source!r}"
        assert started <= newest.changed_at <= ended, (
            f"{what} recorded changed_at={newest.changed_at.isoformat()}, outside its call "
            f"({started.isoformat()} .. {ended.isoformat()})"
        )
        self.known[key] = now
        return newest

    def unrecorded(self, what: str, key: HistoryKey, write: Callable[[], object], error: type[Exception]) -> None:
        """Run ``write``, which must raise ``error``, changing neither ``key``'s memory nor its history."""
        before, memory = self.seen(key), memory_of(self.conn, key)
        raises(error, write, what)
        after = versions_of(self.conn, key)
        assert after == before, f"{what} was refused ({error.__name__}) but the history of {key} became {after!r}"
        assert memory_of(self.conn, key) == memory, f"{what} was refused but changed the memory of {key}"

    def silent(self, what: str, key: HistoryKey, write: Callable[[], object]) -> None:
        """Run ``write``, which succeeds and must record no version of ``key``."""
        before = self.seen(key)
        write()
        after = versions_of(self.conn, key)
        assert after == before, f"{what} recorded versions of {key}: {after[: len(after) - len(before)]!r}"


@_history_check(
    "history_atomic_with_write",
    "with history on, every set, merge, restore and working-memory update of either scope records exactly one "
    "version (numbered one above the newest, the memory after it, its kind, source and time); a refused write "
    "(another owner, a missing thread, over max_chars, stored text no JSON object) and a write on a connection "
    "without history record none",
)
def history_atomic_with_write(ctx: CheckContext) -> None:
    conn, off = ctx.open(history=True), ctx.open()
    ledger = _Ledger(conn)
    p = ctx.prefix()
    r, other, tid = p + "r", p + "other", p + "t"
    res, thr = HistoryKey(r), HistoryKey(r, tid)
    on_res: dict[str, Any] = {"scope": "resource", "resource_id": r}
    on_thr: dict[str, Any] = {"scope": "thread", "resource_id": r, "thread_id": tid}

    src = {"agent": "a", "toolCallId": "call-1", "n": [1, 2.5, None, True]}
    ledger.recorded("set (resource)", res, lambda: conn.set_working_memory('{"a":1}', **on_res, source=src), "set", src)
    ledger.recorded("merge (resource)", res, lambda: conn.merge_working_memory({"b": 2}, **on_res), "merge", None)
    ledger.silent("update_resource(metadata=...)", res, lambda: conn.update_resource(r, metadata={"m": 1}))
    ledger.unrecorded(
        "a merge over max_chars",
        res,
        lambda: conn.merge_working_memory({"c": "x" * 40}, **on_res, max_chars=20),
        WorkingMemoryTooLargeError,
    )
    ledger.recorded(
        "update_resource(working_memory=...)",
        res,
        lambda: conn.update_resource(r, working_memory="# not JSON"),
        "set",
        None,
    )
    ledger.unrecorded(
        "a merge into text that is no JSON object",
        res,
        lambda: conn.merge_working_memory({"c": 3}, **on_res),
        WorkingMemoryFormatError,
    )
    ledger.unrecorded(
        "a set over max_chars",
        res,
        lambda: conn.set_working_memory("x" * 40, **on_res, max_chars=20),
        WorkingMemoryTooLargeError,
    )
    ledger.silent("a set on a connection without history", res, lambda: off.set_working_memory('{"off":1}', **on_res))
    restored = {"by": "restore"}
    ledger.recorded(
        "restore_working_memory (resource)",
        res,
        lambda: conn.restore_working_memory(2, **on_res, source=restored),
        "restore",
        {**restored, "restoredFrom": 2},
    )

    ledger.unrecorded(
        "a set on a missing thread",
        thr,
        lambda: conn.set_working_memory('{"early":1}', **on_thr),
        ThreadNotFoundError,
    )
    ledger.unrecorded(
        "a merge on a missing thread",
        thr,
        lambda: conn.merge_working_memory({"early": 1}, **on_thr),
        ThreadNotFoundError,
    )
    conn.create_thread(Thread(tid, r, "history"))
    ledger.known.pop(thr)  # the thread is there now: what the refused writes left is read through it
    assert not ledger.seen(thr), f"writes refused on a missing thread left versions: {ledger.seen(thr)!r}"
    ledger.recorded("set (thread)", thr, lambda: conn.set_working_memory('{"t":1}', **on_thr, source=src), "set", src)
    ledger.recorded("merge (thread)", thr, lambda: conn.merge_working_memory({"u": [1]}, **on_thr), "merge", None)
    ledger.silent("update_thread(title=...)", thr, lambda: conn.update_thread(tid, title="renamed"))
    ledger.recorded(
        "update_thread(metadata={'workingMemory': ...})",
        thr,
        lambda: conn.update_thread(tid, metadata={"workingMemory": "plain", "k": 1}),
        "set",
        None,
    )
    wrong = {**on_thr, "resource_id": other}
    ledger.unrecorded(
        "a set naming another owner", thr, lambda: conn.set_working_memory("{}", **wrong), ThreadOwnershipError
    )
    ledger.unrecorded(
        "a merge naming another owner", thr, lambda: conn.merge_working_memory({}, **wrong), ThreadOwnershipError
    )
    ledger.unrecorded(
        "a restore naming another owner", thr, lambda: conn.restore_working_memory(1, **wrong), ThreadOwnershipError
    )
    ledger.unrecorded(
        "a merge into text that is no JSON object (thread)",
        thr,
        lambda: conn.merge_working_memory({"v": 1}, **on_thr),
        WorkingMemoryFormatError,
    )
    ledger.unrecorded(
        "a restore over max_chars",
        thr,
        lambda: conn.restore_working_memory(2, **on_thr, max_chars=3),
        WorkingMemoryTooLargeError,
    )
    ledger.recorded(
        "restore_working_memory (thread)",
        thr,
        lambda: conn.restore_working_memory(2, **on_thr),
        "restore",
        {"restoredFrom": 2},
    )
    assert not versions_of(conn, HistoryKey(other)), "writes naming another owner recorded versions of that owner"


@_history_check(
    "history_whole_record_writes",
    "with history on, a write of the whole record records its working memory where it changes it: create_thread "
    "with a workingMemory string (version 1), save_thread and save_resource when the text differs from the stored "
    "one (a cleared resource memory as content None), none when it is the same; a refused create or save (the id "
    "taken, another owner) records nothing",
)
def history_whole_record_writes(ctx: CheckContext) -> None:
    conn = ctx.open(history=True)
    ledger = _Ledger(conn)
    p = ctx.prefix()
    r, other, tid, plain = p + "r", p + "other", p + "t", p + "plain"
    res, thr = HistoryKey(r), HistoryKey(r, tid)

    def thread(memory: str, **extra: Any) -> Thread:
        return Thread(tid, r, "whole", {"workingMemory": memory, **extra})

    ledger.recorded("create_thread with a working memory", thr, lambda: conn.create_thread(thread("a")), "set", None)
    ledger.silent(
        "save_thread of a new thread without one", HistoryKey(r, plain), lambda: conn.save_thread(Thread(plain, r))
    )
    ledger.unrecorded("create_thread of a taken id", thr, lambda: conn.create_thread(thread("b")), ThreadExistsError)
    ledger.silent("save_thread keeping the memory", thr, lambda: conn.save_thread(thread("a", k=1)))
    ledger.recorded("save_thread changing the memory", thr, lambda: conn.save_thread(thread("b")), "set", None)
    taken = Thread(tid, other, "whole", {"workingMemory": "c"})
    ledger.unrecorded("save_thread of another owner", thr, lambda: conn.save_thread(taken), ThreadOwnershipError)

    ledger.recorded("save_resource (new)", res, lambda: conn.save_resource(Resource(r, "m")), "set", None)
    ledger.silent("save_resource keeping the memory", res, lambda: conn.save_resource(Resource(r, "m", {"k": 1})))
    ledger.recorded("save_resource changing it", res, lambda: conn.save_resource(Resource(r, "n")), "set", None)
    ledger.recorded("save_resource clearing it", res, lambda: conn.save_resource(Resource(r)), "set", None)
    ledger.silent(
        "save_resource of a new resource without one", HistoryKey(other), lambda: conn.save_resource(Resource(other))
    )


# -- complete under concurrency ----------------------------------------------------------------------------------

MERGE_CONNECTIONS = 4


def _merges_per_connection(ctx: CheckContext) -> int:
    """4 per connection (16 in all) in ``quick`` and ``standard``; 16 (64 in all) in ``thorough``."""
    return 16 if ctx.profile.name == "thorough" else 4


@_history_check(
    "history_complete_under_concurrency",
    "concurrent merges of distinct fields through several connections, in either scope, record versions "
    "1..N with no gap and no repeat, each version's document the previous one plus the field its own merge "
    "(named by its source) added, the newest the final working memory",
)
def history_complete_under_concurrency(ctx: CheckContext) -> None:
    conns = [ctx.open(history=True) for _ in range(MERGE_CONNECTIONS)]
    each = _merges_per_connection(ctx)
    for _ in range(max(1, ctx.profile.race_rounds // 3)):  # one round in standard, both scopes: 32 merges
        p = ctx.prefix()
        for key in _both_scopes(conns[0], p):
            where = _where(key)

            def merges(i: int, conn: MemoryStorage, where: dict[str, Any] = where) -> None:
                for j in range(each):
                    conn.merge_working_memory({f"w{i}m{j}": j}, **where, source={"field": f"w{i}m{j}"})

            failed = [r for r in race(conns, merges) if isinstance(r, BaseException)]
            assert not failed, f"a concurrent merge ({key.scope} scope) raised {failed[0]!r}"
            _check_merged(conns[0], key, MERGE_CONNECTIONS * each)


def _check_merged(conn: MemoryStorage, key: HistoryKey, merges: int) -> None:
    versions = all_versions(conn, key)
    assert len(versions) == merges, f"{merges} concurrent merges ({key.scope} scope) left {len(versions)} versions"
    previous: dict[str, Any] = {}
    for version in versions:
        doc = _doc(version)
        field = (version.source or {}).get("field")
        assert isinstance(field, str), f"version {version.version} lost its merge's source: {version.source!r}"
        expected = {**previous, field: int(field.rsplit("m", 1)[1])}
        assert version.kind == "merge", f"version {version.version} of a merge has kind {version.kind!r}"
        assert json_equal(expected, doc), (
            f"version {version.version} ({key.scope} scope, recorded by the merge of {field!r}) is {doc!r}; "
            f"the version before it plus that field is {expected!r}"
        )
        previous = doc
    final = memory_of(conn, key)
    assert final == versions[-1].content, f"the newest version is {versions[-1].content!r}, the memory {final!r}"


# -- scopes ------------------------------------------------------------------------------------------------------


@_history_check(
    "history_scope_isolation",
    "a resource's history never shows its threads' versions nor another resource's, a thread's never its "
    "owner's nor another thread's, even where the ids coincide (a thread named like its owner, a resource "
    "named like a thread); a thread's history asked for under another owner raises ThreadOwnershipError",
)
def history_scope_isolation(ctx: CheckContext) -> None:
    conn, p = _recording(ctx)
    r, r2 = p + "r", p + "r2"
    keys = [
        HistoryKey(r),
        HistoryKey(r2),
        HistoryKey(p + "r_"),  # a look-alike: LIKE's one-character wildcard
        HistoryKey(r, r),  # a thread named like its owner
        HistoryKey(r, p + "t"),
        HistoryKey(r2, p + "t2"),
        HistoryKey(p + "t"),  # a resource named like a thread of another
    ]
    for key in keys:
        if key.thread_id is not None:
            conn.create_thread(Thread(key.thread_id, key.resource_id))
    for round_ in range(2):
        for index, key in enumerate(keys):
            conn.set_working_memory(f"{index}/{round_}", **_where(key), source={"key": index})
    for index, key in enumerate(keys):
        versions = all_versions(conn, key)
        strays = [v for v in versions if v.key != key or v.content not in (f"{index}/0", f"{index}/1")]
        assert not strays, f"the history of {key} holds versions of other working memories: {strays!r}"
        assert [v.content for v in versions] == [f"{index}/0", f"{index}/1"], (
            f"the history of {key} is {[v.content for v in versions]!r}, not its two writes"
        )
    wrong: dict[str, Any] = {"scope": "thread", "resource_id": r2, "thread_id": p + "t"}
    raises(
        ThreadOwnershipError, lambda: conn.working_memory_history(**wrong), "a history asked for under another owner"
    )


# -- restore -----------------------------------------------------------------------------------------------------


@_history_check(
    "history_restore",
    "restore_working_memory writes that version's text as a new version (kind 'restore', its source with "
    "restoredFrom), rewriting no earlier version; a version never written or dropped by retention, or a "
    "missing thread, raises VersionNotFoundError and changes nothing",
)
def history_restore(ctx: CheckContext) -> None:
    conn, p = _recording(ctx)
    for key in _both_scopes(conn, p):
        where = _where(key)
        conn.set_working_memory('{"v":"one"}', **where)
        conn.merge_working_memory({"w": "two"}, **where)
        conn.set_working_memory("three", **where)
        before = all_versions(conn, key)
        text = conn.restore_working_memory(1, **where, source={"agent": "undo"})
        assert text == '{"v":"one"}', f'restore_working_memory(1) returned {text!r}, version 1 is \'{{"v":"one"}}\''
        after = all_versions(conn, key)
        assert after[:3] == before, f"a restore rewrote the history of {key}: {before!r} became {after[:3]!r}"
        assert len(after) == 4, f"a restore of {key} recorded {len(after) - 3} versions, not 1"
        newest = after[3]
        assert (newest.kind, newest.content) == ("restore", '{"v":"one"}'), f"a restore recorded {newest!r}"
        assert json_equal({"agent": "undo", "restoredFrom": 1}, newest.source), f"a restore's source: {newest!r}"
        assert memory_of(conn, key) == '{"v":"one"}', f"after a restore of {key} its memory is {memory_of(conn, key)!r}"
        merged = conn.merge_working_memory({"x": 1}, **where)  # the restored text is the working memory, merged on
        assert merged == {"v": "one", "x": 1}, f"a merge after a restore gave {merged!r}"
        for missing in (6, 99):
            _refused_restore(conn, key, missing)
    kept = ctx.open(history=2)
    key = HistoryKey(p + "kept")
    for n in range(3):
        kept.set_working_memory(str(n), **_where(key))
    _refused_restore(kept, key, 1)  # dropped by retention
    gone: dict[str, Any] = {"scope": "thread", "thread_id": p + "missing"}
    raises(VersionNotFoundError, lambda: conn.restore_working_memory(1, **gone), "a restore on a missing thread")


def _refused_restore(conn: MemoryStorage, key: HistoryKey, version: int) -> None:
    before, memory = versions_of(conn, key), memory_of(conn, key)
    restore = functools.partial(conn.restore_working_memory, version, **_where(key))
    raises(VersionNotFoundError, restore, f"restoring version {version}, which {key}'s history does not hold,")
    assert versions_of(conn, key) == before, f"a refused restore of version {version} changed the history of {key}"
    assert memory_of(conn, key) == memory, f"a refused restore of version {version} changed the memory of {key}"


# -- retention and paging ----------------------------------------------------------------------------------------


@_history_check(
    "history_retention",
    "with history=N each write keeps exactly the newest N versions of its working memory (numbering goes on), "
    "in either scope; a connection keeping every version drops none",
)
def history_retention(ctx: CheckContext) -> None:
    three, every = ctx.open(history=3), ctx.open(history=True)
    p = ctx.prefix()
    for key in _both_scopes(three, p):
        where = _where(key)
        for n in range(1, 8):
            if n % 2:
                three.set_working_memory(f'{{"n":{n}}}', **where)
            else:
                three.merge_working_memory({"n": n}, **where)
            numbers = [v.version for v in versions_of(every, key)]
            expected = list(range(n, max(0, n - 3), -1))
            assert numbers == expected, f"with history=3, after {n} writes {key} keeps versions {numbers}"
        every.set_working_memory('{"n":8}', **where)
        numbers = [v.version for v in versions_of(every, key)]
        assert numbers == [8, 7, 6, 5], f"a write keeping every version left {numbers} of {key}, not [8, 7, 6, 5]"
        three.set_working_memory('{"n":9}', **where)
        numbers = [v.version for v in versions_of(every, key)]
        assert numbers == [9, 8, 7], f"with history=3 a write left versions {numbers} of {key}, not [9, 8, 7]"
        contents = [v.content for v in versions_of(every, key)]
        assert contents == ['{"n":9}', '{"n":8}', '{"n":7}'], f"the versions kept of {key} hold {contents!r}"


@_history_check(
    "history_paging",
    "working_memory_history pages newest first: at most limit versions, each numbered below before, "
    "next_before leading to the next older page and None on the last",
)
def history_paging(ctx: CheckContext) -> None:
    conn, p = _recording(ctx)
    for key in _both_scopes(conn, p):
        where = _where(key)
        for n in range(1, 8):
            conn.set_working_memory(f"v{n}", **where)
        cases: list[tuple[int, int | None, list[int], int | None]] = [
            (3, None, [7, 6, 5], 5),
            (3, 5, [4, 3, 2], 2),
            (3, 2, [1], None),
            (7, None, [7, 6, 5, 4, 3, 2, 1], None),
            (20, 4, [3, 2, 1], None),
            (2, 100, [7, 6], 6),
            (1, 2, [1], None),
            (5, 1, [], None),
        ]
        for limit, before, numbers, next_before in cases:
            page = conn.working_memory_history(**where, limit=limit, before=before)
            got = [v.version for v in page.versions]
            assert (got, page.next_before) == (numbers, next_before), (
                f"working_memory_history({key.scope}, limit={limit}, before={before}) gave versions {got} and "
                f"next_before={page.next_before}, not {numbers} and {next_before}"
            )
            assert all(v.content == f"v{v.version}" for v in page.versions), f"a page holds {page.versions!r}"


# -- deleting a thread -------------------------------------------------------------------------------------------


@_history_check(
    "history_delete_thread",
    "delete_thread removes the thread's history with it, also through a connection that records none (a thread "
    "re-created under that id, by its owner or another, starts at version 1) and leaves its owner's history alone",
)
def history_delete_thread(ctx: CheckContext) -> None:
    conn, p = _recording(ctx)
    plain = ctx.open()  # history off: its deletes must take a thread's history all the same
    r, tid = p + "r", p + "t"
    conn.set_working_memory("owner's", scope="resource", resource_id=r)
    for round_, owner in enumerate((r, p + "r2", r, p + "r2", r)):  # the third is deleted without history
        conn.create_thread(Thread(tid, owner))
        key = HistoryKey(owner, tid)
        left = versions_of(conn, key)
        assert not left, f"a thread re-created under {tid!r} (owner {owner!r}) has the old thread's history: {left!r}"
        conn.set_working_memory('{"n":1}', **_where(key))
        conn.merge_working_memory({"n": 2}, **_where(key))
        numbers = [v.version for v in versions_of(conn, key)]
        assert numbers == [2, 1], f"a re-created thread's history is numbered {numbers}, not [2, 1]"
        deleting = plain if round_ == 2 else conn
        assert deleting.delete_thread(tid), "delete_thread of an existing thread returned False"
    kept = [v.content for v in versions_of(conn, HistoryKey(r))]
    assert kept == ["owner's"], f"deleting the owner's threads changed its history: {kept!r}"
