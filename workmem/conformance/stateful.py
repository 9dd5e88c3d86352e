"""The state machine: random sequences of every contract operation, checked against the model.

Modelled on zarr's ``testing/stateful.py``: each rule calls the backend and
the :class:`~workmem.conformance.model.Model` with the same arguments and
compares results and error classes; an invariant after every step reads every
record of the example's id pool and compares it with the model (adopting the
timestamps the backend set to "now" once they are shown to lie in the clock
window of their call). Ids come from tiny pools (``r0``..``r2``, ``t0``..``t2``
and a thread also named ``r0``) behind a fresh prefix per example, so owners
collide, scopes share ids and each example has a namespace of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from workmem.errors import WorkmemError
from workmem.records import UNSET, Resource, Thread, Unset
from workmem.storage import MemoryStorage

from .expect import Outcome, attempt, clock_past, json_equal, record_mismatches, wm_matches
from .model import Model, MResource, MThread, Window
from .registry import CheckContext, check
from .strategies import STAMPS, patches, small_objects, stored_texts, valid_text

__all__ = ["StorageMachine"]

T = TypeVar("T")

RIDS = ["r0", "r1", "r2"]
TIDS = ["t0", "t1", "t2", "r0"]  # "r0" is also a resource id: the two must never meet

_rid = st.sampled_from(RIDS)
_tid = st.sampled_from(TIDS)
_stamp = st.sampled_from(STAMPS)
_titles = st.sampled_from(["", "Chat", "Ünïcødé ✓"]) | valid_text(max_size=5)


def _rarely(bad: Any, good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten, else the invalid value ``bad``."""
    return st.integers(0, 9).flatmap(lambda n: st.just(bad) if n == 0 else good)


_wm_text = _rarely("bad\x00text", stored_texts())
_meta_arg = st.just(UNSET) | st.none() | small_objects()
_bad_patch = {"a": float("nan")}
_limits = st.none() | st.integers(1, 40)
"""A merge's ``max_chars``: none, or small enough that the small documents meet it either way."""


def _model(call: Callable[[], T]) -> Outcome:
    try:
        return Outcome(call())
    except WorkmemError as exc:
        return Outcome(error=exc)


class StorageMachine(RuleBasedStateMachine):
    """Drives one backend (through two connections) and the model side by side."""

    def __init__(self, ctx: CheckContext, conns: list[MemoryStorage]) -> None:
        super().__init__()
        self.ctx = ctx
        self.conns = conns
        self.current = 0
        self.model = Model()
        self.prefix = ctx.prefix()
        self.written: datetime | None = None
        self.unchecked = True  # the backend may differ from the model somewhere not yet read back
        self.reopened: set[int] = set()  # connections reopened since the last write: reopening again reads the same
        self.steps_held = False  # every step so far, and the invariant after it, passed
        note(f"ids are prefixed with {self.prefix!r}")

    def _attempt(self, call: Callable[[], T], *, writes: bool = False) -> tuple[Outcome, Window]:
        """Run one operation; after one that ``writes`` (succeeding or not), wait for the clock to pass it.

        So no operation ever runs in the millisecond of an earlier write: a
        stamp set to "now" later (by a read or a refused write that wrongly
        moves ``updated_at``) never equals one already stored, and the bug
        fails the same step in every run and on replay, however fast the backend.
        """
        self.steps_held = False  # until the invariant after this step has run
        self._settle()
        outcome, window = attempt(call)
        if writes:
            self.written = window.hi
            self.unchecked = True
            self.reopened.clear()
        return outcome, window

    def _settle(self) -> None:
        if self.written is not None:
            clock_past(self.written)
            self.written = None

    @property
    def storage(self) -> MemoryStorage:
        return self.conns[self.current]

    def p(self, name: str | None) -> str | None:
        return None if name is None else self.prefix + name

    def _agree(self, call: str, actual: Outcome, expected: Outcome) -> bool:
        """Same error class, or both succeeded (then the caller compares values)."""
        note(f"{call} -> {actual.describe()}")
        if expected.error is not None:
            want = type(expected.error)
            assert isinstance(actual.error, want), f"{call}: expected {want.__name__}, but it {actual.describe()}"
            return False
        if actual.error is not None:
            raise AssertionError(f"{call}: expected success, but it {actual.describe()}") from actual.error
        return True

    @initialize(stamps=st.lists(_stamp, min_size=2, max_size=2), titles=st.lists(_titles, min_size=2, max_size=2))
    def some_threads(self, stamps: list[Any], titles: list[str]) -> None:
        """Start with thread ``t0`` of ``r0`` and thread ``r0`` of ``r1``, so thread-scope rules find threads."""
        for (t, r), stamp, title in zip([("t0", "r0"), ("r0", "r1")], stamps, titles, strict=True):
            self.save_thread(t, r, title, None, stamp, stamp)

    # -- connections ---------------------------------------------------------------

    @rule()
    def switch_connection(self) -> None:
        """Later operations go through the other connection: both see one namespace."""
        self.current = 1 - self.current
        note(f"switch to connection {self.current}")

    @precondition(lambda self: self.ctx.capabilities.persistent)
    @rule()
    def reopen(self) -> None:
        """A persistent backend keeps everything across a closed and reopened connection: read back through it.

        A connection reopened since the last write (done or refused) stays open: reopening it
        again would read back the very state its last reopen read. On a backend with slow
        opens these repeats were a third of the run (146 of 201 reopens in ``ci``).
        """
        if self.current in self.reopened:
            note(f"connection {self.current} was reopened after the last write: kept open")
            return
        note(f"close and reopen connection {self.current}")
        self.steps_held = False  # until the read-back below and the invariant after this step have run
        self.storage.close()
        self.conns[self.current] = self.ctx.open()
        self.reopened.add(self.current)
        self.read_back(self.storage)  # through the reopened connection, which may be either

    # -- resources -----------------------------------------------------------------

    @rule(r=_rid)
    def get_resource(self, r: str) -> None:
        rid = self.prefix + r
        actual, _ = self._attempt(lambda: self.storage.get_resource(rid))
        expected = _model(lambda: self.model.get_resource(rid))
        if self._agree(f"get_resource({rid!r})", actual, expected):
            self._same_record(expected.value, actual.value)

    @rule(
        r=_rid,
        wm=st.none() | stored_texts(),
        metadata=st.none() | small_objects(),
        created=_stamp,
        updated=_stamp,
    )
    def save_resource(
        self, r: str, wm: str | None, metadata: dict[str, Any] | None, created: Any, updated: Any
    ) -> None:
        rid = self.prefix + r
        record = Resource(rid, wm, metadata, created, updated)
        actual, _ = self._attempt(lambda: self.storage.save_resource(record), writes=True)
        expected = _model(lambda: self.model.save_resource(rid, wm, metadata, record.created_at, record.updated_at))
        if self._agree(f"save_resource({record!r})", actual, expected):
            self._same_record(self.model.resources[rid], actual.value)

    @rule(r=_rid, wm=st.just(UNSET) | st.none() | _wm_text, metadata=_meta_arg)
    def update_resource(self, r: str, wm: str | Unset | None, metadata: dict[str, Any] | Unset | None) -> None:
        rid = self.prefix + r
        actual, now = self._attempt(
            lambda: self.storage.update_resource(rid, working_memory=wm, metadata=metadata), writes=True
        )
        expected = _model(lambda: self.model.update_resource(rid, now, working_memory=wm, metadata=metadata))
        if self._agree(f"update_resource({rid!r}, working_memory={wm!r}, metadata={metadata!r})", actual, expected):
            self._same_record(expected.value, actual.value)

    # -- threads -------------------------------------------------------------------

    @rule(t=_tid, owner=st.none() | _rid)
    def get_thread(self, t: str, owner: str | None) -> None:
        tid, rid = self.prefix + t, self.p(owner)
        actual, _ = self._attempt(lambda: self.storage.get_thread(tid, resource_id=rid))
        expected = _model(lambda: self.model.get_thread(tid, rid))
        if self._agree(f"get_thread({tid!r}, resource_id={rid!r})", actual, expected):
            self._same_record(expected.value, actual.value)

    @rule(t=_tid, r=_rid, title=_titles, metadata=st.none() | small_objects(), created=_stamp, updated=_stamp)
    def save_thread(
        self, t: str, r: str, title: str, metadata: dict[str, Any] | None, created: Any, updated: Any
    ) -> None:
        record = Thread(self.prefix + t, self.prefix + r, title, metadata, created, updated)
        mine = MThread(record.id, record.resource_id, title, metadata, record.created_at, record.updated_at)
        actual, now = self._attempt(lambda: self.storage.save_thread(record), writes=True)
        expected = _model(lambda: self.model.save_thread(mine, now))
        if self._agree(f"save_thread({record!r})", actual, expected):
            self._same_record(expected.value, actual.value)

    @rule(t=_tid, title=st.just(UNSET) | _rarely("nul\x00title", _titles), metadata=_meta_arg)
    def update_thread(self, t: str, title: str | Unset, metadata: dict[str, Any] | Unset | None) -> None:
        tid = self.prefix + t
        actual, now = self._attempt(
            lambda: self.storage.update_thread(tid, title=title, metadata=metadata), writes=True
        )
        expected = _model(lambda: self.model.update_thread(tid, now, title, metadata))
        if self._agree(f"update_thread({tid!r}, title={title!r}, metadata={metadata!r})", actual, expected):
            self._same_record(expected.value, actual.value)

    @rule(t=_tid)
    def delete_thread(self, t: str) -> None:
        tid = self.prefix + t
        actual, _ = self._attempt(lambda: self.storage.delete_thread(tid), writes=True)
        expected = _model(lambda: self.model.delete_thread(tid))
        if self._agree(f"delete_thread({tid!r})", actual, expected):
            assert actual.value is expected.value, f"delete_thread({tid!r}) returned {actual.value!r}"

    @rule(
        r=_rid,
        page=_rarely(-1, st.integers(0, 3)),
        per_page=_rarely(0, st.none() | st.integers(1, 3)),
        order_by=_rarely("title", st.sampled_from(["created_at", "updated_at"])),
        direction=_rarely("sideways", st.sampled_from(["desc", "asc"])),
    )
    def list_threads(self, r: str, page: Any, per_page: Any, order_by: Any, direction: Any) -> None:
        rid = self.prefix + r
        args = f"page={page!r}, per_page={per_page!r}, order_by={order_by!r}, direction={direction!r}"
        call = f"list_threads({rid!r}, {args})"
        actual, _ = self._attempt(
            lambda: self.storage.list_threads(rid, page=page, per_page=per_page, order_by=order_by, direction=direction)
        )
        expected = _model(lambda: self.model.list_threads(rid, page, per_page, order_by, direction))
        if not self._agree(call, actual, expected):
            return
        threads, total, has_more = expected.value
        got = actual.value
        want_ids = [t.id for t in threads]
        got_ids = [t.id for t in got.threads]
        assert got_ids == want_ids, f"{call}: expected threads {want_ids}, got {got_ids}"
        assert (got.total, got.page, got.per_page, got.has_more) == (total, page, per_page, has_more), (
            f"{call}: expected total={total} page={page} per_page={per_page} has_more={has_more}, got {got!r}"
        )
        for want, thread in zip(threads, got.threads, strict=True):
            self._same_record(want, thread)

    # -- working memory ------------------------------------------------------------
    # One rule per operation and scope (so each is drawn often), and one for odd scope arguments.

    def _working_memory(
        self, op: str, arg: Any, scope: Any, rid: str | None, tid: str | None, limit: int | None = None
    ) -> None:
        ids = {"scope": scope, "resource_id": rid, "thread_id": tid}
        first = "" if op == "get" else f"{arg!r}, "
        last = "" if limit is None else f", max_chars={limit}"
        call = f"{op}_working_memory({first}scope={scope!r}, resource_id={rid!r}, thread_id={tid!r}{last})"
        if op == "get":
            actual, _ = self._attempt(lambda: self.storage.get_working_memory(**ids))
            expected = _model(lambda: self.model.get_working_memory(scope, rid, tid))
            if self._agree(call, actual, expected):
                assert wm_matches(expected.value, actual.value), (
                    f"{call}: expected {expected.value!r}, got {actual.value!r}"
                )
        elif op == "set":
            actual, now = self._attempt(lambda: self.storage.set_working_memory(arg, **ids), writes=True)
            expected = _model(lambda: self.model.set_working_memory(arg, scope, rid, tid, now))
            if self._agree(call, actual, expected):
                assert actual.value is None, f"{call} returned {actual.value!r}, not None"
        else:
            merge = self.storage.merge_working_memory
            actual, now = self._attempt(lambda: merge(arg, **ids, max_chars=limit), writes=True)
            expected = _model(lambda: self.model.merge_working_memory(arg, scope, rid, tid, now, limit))
            if self._agree(call, actual, expected):
                assert json_equal(expected.value, actual.value), (
                    f"{call}: expected {expected.value!r}, got {actual.value!r}"
                )

    @rule(r=_rid)
    def get_resource_memory(self, r: str) -> None:
        self._working_memory("get", None, "resource", self.prefix + r, None)

    @rule(t=_tid, owner=st.none() | _rid)
    def get_thread_memory(self, t: str, owner: str | None) -> None:
        self._working_memory("get", None, "thread", self.p(owner), self.prefix + t)

    @rule(content=_wm_text, r=_rid)
    def set_resource_memory(self, content: str, r: str) -> None:
        self._working_memory("set", content, "resource", self.prefix + r, None)

    @rule(content=_wm_text, t=_tid, owner=st.none() | _rid)
    def set_thread_memory(self, content: str, t: str, owner: str | None) -> None:
        self._working_memory("set", content, "thread", self.p(owner), self.prefix + t)

    @rule(patch=_rarely(_bad_patch, patches()), r=_rid, limit=_limits)
    def merge_resource_memory(self, patch: dict[str, Any], r: str, limit: int | None) -> None:
        self._working_memory("merge", patch, "resource", self.prefix + r, None, limit)

    @rule(patch=_rarely(_bad_patch, patches()), t=_tid, owner=st.none() | _rid, limit=_limits)
    def merge_thread_memory(self, patch: dict[str, Any], t: str, owner: str | None, limit: int | None) -> None:
        self._working_memory("merge", patch, "thread", self.p(owner), self.prefix + t, limit)

    @rule(
        op=st.sampled_from(["get", "set", "merge"]),
        scope=st.sampled_from(["resource", "thread", "session", None]),
        r=st.none() | _rid,
        t=st.none() | _tid,
    )
    def memory_with_any_scope_arguments(self, op: str, scope: Any, r: str | None, t: str | None) -> None:
        self._working_memory(op, {"set": '{"a":1}', "merge": {"b": 2}}.get(op), scope, self.p(r), self.p(t))

    # -- the state, after every step -----------------------------------------------

    def _same_record(self, want: MResource | MThread | None, got: Resource | Thread | None) -> None:
        if want is None or got is None:
            assert want is None and got is None, f"expected {want!r}, got {got!r}"
            return
        problems = record_mismatches(want, got)
        assert not problems, f"{got.id!r} differs from the model: " + "; ".join(problems)
        if isinstance(want.created_at, Window) or isinstance(want.updated_at, Window):
            Model.observe(want, got.created_at, got.updated_at)

    @invariant()
    def every_record_matches_the_model(self) -> None:
        """After every write (done or refused) and reopen, every record and listing reads as the model says.

        A step that only read is not followed by this read-back: a read that wrongly
        changed something is caught by the read-back after the next write, or by the
        one at the end of the run (:meth:`teardown`). On a backend with slow round
        trips the read-backs are most of the run's time.
        """
        if self.unchecked:
            self.read_back()
        self.steps_held = True

    def teardown(self) -> None:
        """The last read-back, unless a step or read-back already failed (its error is the one to report)."""
        if self.steps_held:
            self.read_back()

    def read_back(self, reader: MemoryStorage | None = None) -> None:
        """Compare every record and listing with the model, read through ``reader`` (connection 0 by default)."""
        self.unchecked = False
        self._settle()  # the reads below never share a millisecond with a write
        reader = self.conns[0] if reader is None else reader
        for r in RIDS:
            rid = self.prefix + r
            self._same_record(self.model.resources.get(rid), reader.get_resource(rid))
        # Every thread's owner is one of RIDS, so the owners' listings hold every stored thread: each listed
        # record is compared whole (get_thread is compared with the model at its own steps).
        listed: dict[str, Thread] = {}
        for r in RIDS:  # the default listing: newest created first, ties by id
            rid = self.prefix + r
            want = [t.id for t in self.model.list_threads(rid, 0, 100, "created_at", "desc")[0]]
            page = reader.list_threads(rid).threads
            got = [t.id for t in page]
            assert got == want, f"list_threads({rid!r}) lists {got}, expected {want}"
            listed.update((t.id, t) for t in page)
        for t in TIDS:
            tid = self.prefix + t
            self._same_record(self.model.threads.get(tid), listed.get(tid))


@check("stateful", "random sequences of every operation agree with a reference model")
def stateful(ctx: CheckContext) -> None:
    try:
        _run(ctx)
    except Exception as exc:
        _keep_relevant_steps(exc)
        raise


def _run(ctx: CheckContext) -> None:
    # The line with the lambda stays as it is, indentation included: ci's derandomized examples are seeded
    # from the source text of the state machine's factory (Hypothesis's function_digest).
    conns = [ctx.storage, ctx.open()]
    settings = ctx.profile.settings(max_examples=ctx.profile.stateful_examples)
    run_state_machine_as_test(lambda: StorageMachine(ctx, conns), settings=settings)  # type: ignore[arg-type]


_PREFIXED = re.compile(r"ids are prefixed with '([^']+)'")


def _keep_relevant_steps(exc: BaseException) -> None:
    """Trim the steps Hypothesis printed (every one, when it had no time to shrink) to those that matter.

    Kept: the calls on the ids the failure names, connection switches and reopens,
    and the last call; the rest become one line saying how many calls on other ids
    were left out. Hypothesis's own ``state.rule(...)`` lines repeat the calls and go.
    """
    for sub in exc.exceptions if isinstance(exc, BaseExceptionGroup) else ():
        _keep_relevant_steps(sub)
    notes: list[str] = getattr(exc, "__notes__", [])
    text = "\n".join(notes)
    found = _PREFIXED.search(text)
    if found is None:
        return
    prefix = found.group(1)
    named = set(re.findall(re.escape(prefix) + r"[^'\s,)]+", str(exc)))
    if not named:
        return
    lines = text.splitlines()
    steps = [i for i, line in enumerate(lines) if " -> " in line or line.startswith(("switch to", "close and reopen"))]
    if len(steps) <= 12:
        return
    kept: list[str] = []
    skipped = 0
    for i, line in enumerate(lines):
        if line.startswith(("state.", " ")) and not line.startswith("state = "):
            continue  # Hypothesis's replay of the call noted just before (and its continuation lines)
        relevant = i not in steps or i == steps[-1] or not line.count(prefix) or any(n in line for n in named)
        relevant = relevant or line.startswith(("switch to", "close and reopen"))
        if relevant:
            if skipped:
                kept.append(_left_out(skipped))
                skipped = 0
            kept.append(line)
        else:
            skipped += 1
    if skipped:
        kept.append(_left_out(skipped))
    exc.__notes__ = [*kept, f"(the calls on {', '.join(sorted(named))}, which the failure names, and the last call)"]


def _left_out(count: int) -> str:
    return f"... {count} call{'' if count == 1 else 's'} on other ids, not shown"
