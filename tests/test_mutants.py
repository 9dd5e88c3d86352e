"""Proof the conformance suite has teeth: adapters that each break ONE rule fail the right checks.

Every mutant is an :class:`InMemoryStorage` with one method changed; each
runs through ``workmem.conformance.run`` (profile ``ci``, derandomized) and
must be reported failed on the checks that guard that rule.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import json
import os
import random
import re
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import workmem
from workmem import UNSET, Resource, Scope, Thread, ThreadOwnershipError, ThreadPage
from workmem.adapters.reference import InMemoryStorage
from workmem.conformance import PROFILES, Report, run
from workmem.merge_patch import parse_json_object
from workmem.records import Direction, OrderBy, Unset, trusted_resource, trusted_thread
from workmem.storage import (
    ListQuery,
    check_list_args,
    check_owner,
    check_resource_update,
    check_scope,
    check_thread_update,
    thread_working_memory,
)
from workmem.timestamps import utc_now
from workmem.validation import dump_json, validate_id, validate_json_object


class OwnerChanging(InMemoryStorage):
    """save_thread moves an existing thread to the new owner (what the TypeScript adapters do)."""

    def save_thread(self, thread: Thread) -> Thread:
        with self._store.lock:
            self._store.threads.pop(thread.id, None)
            return super().save_thread(thread)


class RacyMerge(InMemoryStorage):
    """merge reads, pauses, then writes; the lock it holds belongs to this connection only."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self._own_lock = threading.Lock()

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        with self._own_lock:
            current = self.get_working_memory(scope=scope, resource_id=resource_id, thread_id=thread_id)
            time.sleep(0.002)
            merged = workmem.apply_merge_patch(parse_json_object(current), dict(patch))
            self.set_working_memory(dump_json(merged), scope=scope, resource_id=resource_id, thread_id=thread_id)
            return merged  # type: ignore[no-any-return]


def _merge_then_store(
    storage: InMemoryStorage,
    patch: Mapping[str, Any],
    merge: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]],
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
) -> dict[str, Any]:
    target = check_scope(scope, resource_id, thread_id)
    patch = validate_json_object(patch, "patch")
    with storage._store.lock:
        if target.scope == "resource":
            assert target.resource_id is not None
            current = storage.get_working_memory(scope="resource", resource_id=target.resource_id)
        else:
            assert target.thread_id is not None
            thread = storage._store.threads.get(target.thread_id)
            if thread is None:
                raise workmem.ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
            current = thread_working_memory(thread.metadata)
        merged = merge(parse_json_object(current), patch)
        storage.set_working_memory(dump_json(merged), scope=scope, resource_id=resource_id, thread_id=thread_id)
        return merged


def _null_as_value(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result = dict(target)
    for key, value in patch.items():
        old = result.get(key)
        result[key] = _null_as_value(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
    return result


class NullIsAValue(InMemoryStorage):
    """merge stores ``null`` instead of deleting the key."""

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        return _merge_then_store(self, patch, _null_as_value, scope, resource_id, thread_id)


def _shallow(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result = {**target, **patch}
    return {k: v for k, v in result.items() if v is not None}


class ShallowMerge(InMemoryStorage):
    """merge replaces top-level values instead of merging objects deeply."""

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        return _merge_then_store(self, patch, _shallow, scope, resource_id, thread_id)


class ScopeLeak(InMemoryStorage):
    """A thread-scope write also lands on the owning resource's working memory."""

    def set_working_memory(
        self, content: str, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> None:
        super().set_working_memory(content, scope=scope, resource_id=resource_id, thread_id=thread_id)
        if scope == "thread" and thread_id is not None:
            thread = self.get_thread(thread_id)
            if thread is not None:
                self.update_resource(thread.resource_id, working_memory=content)


class UnstableTies(InMemoryStorage):
    """list_threads orders by the timestamp only: threads with equal timestamps come in any order."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        with self._store.lock:
            owned = [t for t in self._store.threads.values() if t.resource_id == query.resource_id]
        random.shuffle(owned)
        owned.sort(key=lambda t: getattr(t, query.order_by), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of(owned[query.offset : end], len(owned))


class OffByOnePages(InMemoryStorage):
    """has_more is computed with ``<=``: the last full page claims there is more."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        got = super().list_threads(resource_id, page=page, per_page=per_page, order_by=order_by, direction=direction)
        if per_page is None:
            return got
        has_more = page * per_page + len(got.threads) <= got.total and got.total > 0
        return dataclasses.replace(got, has_more=has_more)


class CreatedAtReset(InMemoryStorage):
    """update_resource stamps created_at with now as well."""

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        updated = super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)
        reset = dataclasses.replace(updated, created_at=updated.updated_at)
        self.save_resource(reset)
        return reset


class AcceptsNul(InMemoryStorage):
    """Working memory with NUL is accepted (the NUL silently dropped) instead of rejected."""

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        if isinstance(working_memory, str):
            working_memory = working_memory.replace("\x00", "")
        return super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)

    def set_working_memory(
        self, content: str, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> None:
        clean = content.replace("\x00", "") if isinstance(content, str) else content
        super().set_working_memory(clean, scope=scope, resource_id=resource_id, thread_id=thread_id)


# -- issue 19, part B: number types, corner states, the clock, slow shrinking ---------------------------
# Each mutant below was run against the suite before the check that kills it was written, and survived.


def _floats(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_floats(item) for item in value]
    if isinstance(value, dict):
        return {key: _floats(item) for key, item in value.items()}
    return value


class IntsBecomeFloats(InMemoryStorage):
    """Every integer in stored metadata and merged working memory comes back as a float (``1`` -> ``1.0``)."""

    def save_resource(self, resource: Resource) -> Resource:
        if isinstance(resource, Resource):
            resource = dataclasses.replace(resource, metadata=_floats(resource.metadata))
        return super().save_resource(resource)

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        if isinstance(metadata, Mapping):
            metadata = _floats(validate_json_object(metadata, "metadata"))
        return super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)

    def create_thread(self, thread: Thread) -> Thread:
        if isinstance(thread, Thread):
            thread = dataclasses.replace(thread, metadata=_floats(thread.metadata))
        return super().create_thread(thread)

    def save_thread(self, thread: Thread) -> Thread:
        if isinstance(thread, Thread):
            thread = dataclasses.replace(thread, metadata=_floats(thread.metadata))
        return super().save_thread(thread)

    def update_thread(
        self, thread_id: str, *, title: str | Unset = UNSET, metadata: Mapping[str, Any] | Unset | None = UNSET
    ) -> Thread:
        if isinstance(metadata, Mapping):
            metadata = _floats(validate_json_object(metadata, "metadata"))
        return super().update_thread(thread_id, title=title, metadata=metadata)

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        return _merge_parsed(self, patch, parse_json_object, scope, resource_id, thread_id, finish=_floats)


def _merge_parsed(
    storage: InMemoryStorage,
    patch: Mapping[str, Any],
    parse: Callable[[str | None], dict[str, Any]],
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
    finish: Callable[[Any], Any] = lambda merged: merged,
) -> dict[str, Any]:
    """The honest merge, but reading the stored text with ``parse`` and storing ``finish(merged)``."""
    target = check_scope(scope, resource_id, thread_id)
    patch = validate_json_object(patch, "patch")
    with storage._store.lock:
        if target.scope == "resource":
            assert target.resource_id is not None
            current = storage.get_working_memory(scope="resource", resource_id=target.resource_id)
        else:
            assert target.thread_id is not None
            thread = storage._store.threads.get(target.thread_id)
            if thread is None:
                raise workmem.ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
            current = thread_working_memory(thread.metadata)
        merged = finish(workmem.apply_merge_patch(parse(current), patch))
        InMemoryStorage.set_working_memory(
            storage, dump_json(merged), scope=scope, resource_id=resource_id, thread_id=thread_id
        )
        return merged  # type: ignore[no-any-return]


def _blank_is_not_empty(text: str | None) -> dict[str, Any]:
    return {} if text is None or text == "" else parse_json_object(text.strip() or "not json")


class BlankMemoryIsNotEmpty(InMemoryStorage):
    """merge counts only missing or empty memory as ``{}``: whitespace-only text raises WorkingMemoryFormatError."""

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        return _merge_parsed(self, patch, _blank_is_not_empty, scope, resource_id, thread_id)


def _falsy_is_empty(text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    value = json.loads(text) or {}  # JSON null, false, 0, "" and [] all read as {}
    return parse_json_object(json.dumps(value))


class NullTextIsEmpty(InMemoryStorage):
    """merge reads stored text ``null`` (or any falsy JSON) as ``{}`` instead of raising WorkingMemoryFormatError."""

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        return _merge_parsed(self, patch, _falsy_is_empty, scope, resource_id, thread_id)


class DeleteKeepsThreadMemory(InMemoryStorage):
    """Thread working memory lives apart and outlives delete_thread: a thread re-created with the id gets it back."""

    def _kept(self) -> dict[str, str]:
        kept: dict[str, str] = self._store.__dict__.setdefault("kept_memory", {})
        return kept

    def delete_thread(self, thread_id: str) -> bool:
        with self._store.lock:
            old = self._store.threads.get(thread_id) if isinstance(thread_id, str) else None
            memory = None if old is None else thread_working_memory(old.metadata)
            if memory is not None:
                self._kept()[thread_id] = memory
            return super().delete_thread(thread_id)

    def _revive(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread) or thread.id in self._store.threads:
            return thread
        memory = self._kept().pop(thread.id, None)
        if memory is None:
            return thread
        return dataclasses.replace(thread, metadata={**(thread.metadata or {}), "workingMemory": memory})

    def create_thread(self, thread: Thread) -> Thread:
        with self._store.lock:
            return super().create_thread(self._revive(thread))

    def save_thread(self, thread: Thread) -> Thread:
        with self._store.lock:
            return super().save_thread(self._revive(thread))


class ReadMovesUpdatedAt(InMemoryStorage):
    """Reading stored working memory re-stores the record (a "read repair"), so updated_at moves to now."""

    def get_working_memory(
        self, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> str | None:
        with self._store.lock:
            text = super().get_working_memory(scope=scope, resource_id=resource_id, thread_id=thread_id)
            if text is not None and scope == "resource" and isinstance(resource_id, str):
                old = self._store.resources[resource_id]
                self._store.resources[resource_id] = dataclasses.replace(old, updated_at=utc_now())
            elif text is not None and isinstance(thread_id, str):
                thread = self._store.threads[thread_id]
                self._store.threads[thread_id] = dataclasses.replace(thread, updated_at=utc_now())
            return text


class FailedMergeMovesUpdatedAt(InMemoryStorage):
    """merge checks its arguments, stamps updated_at, then parses the stored text: a merge into text that is no
    JSON object raises WorkingMemoryFormatError but has moved updated_at."""

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        target = check_scope(scope, resource_id, thread_id)
        validate_json_object(patch, "patch")
        with self._store.lock:
            now = utc_now()
            if target.scope == "resource" and target.resource_id in self._store.resources:
                old = self._store.resources[target.resource_id]
                self._store.resources[old.id] = dataclasses.replace(old, updated_at=now)
            elif target.scope == "thread" and target.thread_id in self._store.threads:
                thread = self._store.threads[target.thread_id]
                if target.resource_id in (None, thread.resource_id):
                    self._store.threads[thread.id] = dataclasses.replace(thread, updated_at=now)
            return super().merge_working_memory(patch, scope=scope, resource_id=resource_id, thread_id=thread_id)


MUTANTS_B: list[tuple[type[InMemoryStorage], set[str], set[str]]] = [
    (IntsBecomeFloats, {"round_trip_json"}, {"round_trip_json"}),
    (BlankMemoryIsNotEmpty, {"corner_states"}, {"corner_states"}),
    (NullTextIsEmpty, {"corner_states"}, {"corner_states"}),
    (DeleteKeepsThreadMemory, {"corner_states"}, {"corner_states"}),
    (ReadMovesUpdatedAt, {"timestamps", "stateful"}, {"timestamps", "stateful"}),
    (
        FailedMergeMovesUpdatedAt,
        {"timestamps", "corner_states", "stateful"},
        {"timestamps", "corner_states", "stateful"},
    ),
]
"""Part B's mutants: (mutant, checks that must fail, checks run)."""

# -- end of issue 19, part B ------------------------------------------------------------------------------


FAST_SHRINK = dataclasses.replace(PROFILES["ci"], shrink_seconds=0, shrink_total_seconds=None)
"""The ci profile without shrinking: the same examples, so the same verdict, sooner (the test only needs that)."""


def _factory(cls: type[InMemoryStorage]) -> Callable[[], InMemoryStorage]:
    name = f"mutant-{cls.__name__}-{uuid.uuid4().hex}"
    return lambda: cls(name)


@functools.cache
def _mutant_report(mutant: type[InMemoryStorage], checks: frozenset[str]) -> Report:
    """The ci verdict on one mutant (once per session: the per-mutant tests and the kill rate share it)."""
    return run(_factory(mutant), profile=FAST_SHRINK, only=checks)


MUTANTS: list[tuple[type[InMemoryStorage], set[str], set[str]]] = [
    # (mutant, checks that must fail, checks run)
    (OwnerChanging, {"owner_immutable", "owner_race", "stateful"}, {"owner_immutable", "owner_race", "stateful"}),
    (
        RacyMerge,
        {"no_lost_updates_resource", "no_lost_updates_thread"},
        {"no_lost_updates_resource", "no_lost_updates_thread"},
    ),
    (NullIsAValue, {"merge_patch_algebra", "stateful"}, {"merge_patch_algebra", "stateful"}),
    (ShallowMerge, {"merge_patch_algebra"}, {"merge_patch_algebra"}),
    (ScopeLeak, {"scope_isolation", "stateful"}, {"scope_isolation", "stateful"}),
    (UnstableTies, {"pagination"}, {"pagination"}),
    (OffByOnePages, {"pagination", "stateful"}, {"pagination", "stateful"}),
    (CreatedAtReset, {"timestamps", "stateful"}, {"timestamps", "stateful"}),
    (AcceptsNul, {"validation", "stateful"}, {"validation", "stateful"}),
    *MUTANTS_B,
]


@pytest.mark.parametrize(("mutant", "must_fail", "checks"), MUTANTS, ids=[m[0].__name__ for m in MUTANTS])
def test_mutant_is_caught(mutant: type[InMemoryStorage], must_fail: set[str], checks: set[str]) -> None:
    report = _mutant_report(mutant, frozenset(checks))
    failed = {c.name for c in report.checks if c.status == "failed"}
    assert must_fail <= failed, f"{mutant.__name__} was not caught by {sorted(must_fail - failed)}"
    assert not report.passed
    for result in report.checks:
        if result.status == "failed":
            assert result.reason, f"{result.name} failed without a reason"


def test_kill_rate_every_mutant_is_killed(capsys: pytest.CaptureFixture[str]) -> None:
    """The mutation score of the suite: every mutant above must be caught by the checks it breaks."""
    every = MUTANTS + [(mutant, {check}, {check}) for mutant, check in EDGE_MUTANTS]
    survivors = []
    for mutant, must_fail, checks in every:
        report = _mutant_report(mutant, frozenset(checks))
        failed = {c.name for c in report.checks if c.status == "failed"}
        if not must_fail <= failed:
            survivors.append(f"{mutant.__name__} (passed {', '.join(sorted(must_fail - failed))})")
    killed = len(every) - len(survivors)
    rate = f"{killed}/{len(every)} mutants ({100 * killed / len(every):.0f}%)"
    line = f"conformance suite kill rate: {rate} caught by the ci profile"
    with capsys.disabled():
        print(f"\n{line}")
    assert not survivors, f"{line}; survived: {'; '.join(survivors)}"


def test_failure_reason_carries_the_falsifying_example() -> None:
    report = run(_factory(ShallowMerge), profile="ci", only=["merge_patch_algebra"])
    (result,) = report.checks
    assert result.status == "failed" and result.reason is not None
    assert "Falsifying example" in result.reason or "Failing test case" in result.reason, result.reason
    assert "merge(" in result.reason  # the note() of each step is part of the reason


def test_the_honest_adapter_passes_every_check() -> None:
    report = run(_factory(InMemoryStorage), profile="ci")
    problems = [(c.name, c.status, c.reason) for c in report.checks if c.status not in ("passed", "skipped")]
    assert not problems
    assert report.passed
    skipped = {c.name for c in report.checks if c.status == "skipped"}
    assert skipped == {"cross_process_atomic", "persistence"}  # capabilities InMemoryStorage does not declare
    assert all(not c.required for c in report.checks if c.status == "skipped")


def test_xfail_turns_a_failure_into_xfailed_but_the_run_still_fails_on_a_required_check() -> None:
    report = run(_factory(AcceptsNul), profile="quick", only=["validation"], xfail={"validation": "known gap"})
    (result,) = report.checks
    assert result.status == "xfailed" and result.reason is not None and result.reason.startswith("known gap")
    assert not report.passed  # a required check that did not pass
    with pytest.raises(ValueError, match="reason"):
        run(_factory(AcceptsNul), only=["validation"], xfail={"validation": " "})
    with pytest.raises(ValueError, match="unknown check"):
        run(_factory(AcceptsNul), only=["validation"], xfail={"no_such_check": "why"})


def test_a_required_check_cannot_be_skipped() -> None:
    from workmem.conformance import CheckSkipped
    from workmem.conformance.checks import Check
    from workmem.conformance.profiles import get_profile
    from workmem.conformance.runner import _execute
    from workmem.conformance.target import Target

    def skips(ctx: object) -> None:
        raise CheckSkipped("not here")

    required = _execute(Check("x", "t", skips), Target("memory://"), get_profile("quick"), None)
    optional = _execute(Check("y", "t", skips, "persistent"), Target("memory://"), get_profile("quick"), None)
    assert (required.status, optional.status) == ("failed", "skipped")
    assert required.reason is not None and "cannot be skipped" in required.reason


def test_a_mutant_registered_under_a_scheme_fails_through_its_url() -> None:
    scheme = f"mutant-owner-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{__name__}:OwnerChanging")
    report = run(f"{scheme}://shared-{uuid.uuid4().hex}", profile="quick", only=["owner_immutable"])
    assert report.backend == scheme and report.adapter.endswith(":OwnerChanging")
    assert [c.status for c in report.checks] == ["failed"]
    assert "ThreadOwnershipError" in (report.checks[0].reason or "")


def test_reasons_are_masked_of_secrets() -> None:
    class Leaky(InMemoryStorage):
        @classmethod
        def from_url(cls, url: str, **options: Any) -> Leaky:
            return cls("leaky")

        def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
            raise workmem.BackendUnavailableError("cannot reach postgres://app:hunter2@db/x")

    scheme = f"leaky-{uuid.uuid4().hex[:8]}"
    globals()["Leaky"] = Leaky
    workmem.register(scheme, f"{__name__}:Leaky")
    report = run(f"{scheme}://app:hunter2@db/x", profile="quick", only=["owner_immutable"])
    (result,) = report.checks
    assert result.status == "failed"
    assert "hunter2" not in json.dumps(report.to_dict()) and "***" in (result.reason or "")


def test_owner_error_is_the_contract_error() -> None:
    # guards the mutants themselves: the honest adapter raises where OwnerChanging does not
    honest, mutant = InMemoryStorage(), OwnerChanging()
    for storage in (honest, mutant):
        storage.save_thread(Thread("t", "a", created_at=utc_now()))
    with pytest.raises(ThreadOwnershipError):
        honest.save_thread(Thread("t", "b"))
    assert mutant.save_thread(Thread("t", "b")).resource_id == "b"


# -- cross-process: a persistent adapter whose merge is not atomic between processes ----------------


class RacyFileStorage(InMemoryStorage):
    """Claims cross-process atomicity, keeps its data in a JSON file, merges by read-pause-write."""

    capabilities = workmem.Capabilities(cross_process_atomic=True, persistent=True)

    def __init__(self, path: str) -> None:
        super().__init__(None)
        self.path = path

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RacyFileStorage:
        return cls(url.split("://", 1)[1])

    def _load(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)  # type: ignore[no-any-return]
        except (FileNotFoundError, ValueError):
            return {}

    def get_resource(self, resource_id: str) -> Resource | None:
        text = self._load().get("r:" + resource_id)
        return None if text is None else Resource(resource_id, text)

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        row = self._load().get("t:" + thread_id)
        if row is None or (resource_id is not None and row["owner"] != resource_id):
            return None
        return Thread(thread_id, row["owner"], metadata={"workingMemory": row["wm"]} if row["wm"] else None)

    def _write(self, key: str, value: Any) -> None:
        data = self._load()
        data[key] = value
        temporary = f"{self.path}.{uuid.uuid4().hex}"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(temporary, self.path)  # each write is whole; the read-modify-write is not

    def save_thread(self, thread: Thread) -> Thread:
        old = self.get_thread(thread.id)
        time.sleep(0.01)  # check, then act: another process slips in between
        if old is not None and old.resource_id != thread.resource_id:
            raise ThreadOwnershipError(thread.id, thread.resource_id)
        self._write("t:" + thread.id, {"owner": thread.resource_id, "wm": None})
        return thread

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        current = self.get_working_memory(scope=scope, resource_id=resource_id, thread_id=thread_id)
        merged: dict[str, Any] = workmem.apply_merge_patch(parse_json_object(current), dict(patch))
        time.sleep(0.01)
        if scope == "resource":
            self._write("r:" + str(resource_id), dump_json(merged))
        else:
            thread = self.get_thread(str(thread_id))
            assert thread is not None
            self._write("t:" + str(thread_id), {"owner": thread.resource_id, "wm": dump_json(merged)})
        return merged


def test_cross_process_check_catches_merges_that_are_atomic_only_in_one_process(tmp_path: Path) -> None:
    scheme = f"racyfile-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{RacyFileStorage.__module__}:RacyFileStorage")
    report = run(f"{scheme}://{tmp_path / 'store.json'}", profile="quick", only=["cross_process_atomic", "persistence"])
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["cross_process_atomic"] == "failed", report.format_failures()
    reason = report.checks[0].reason or ""
    assert "lost" in reason or "succeeded" in reason, reason


# -- issue 19, gaps A: look-alike ids, big lists, order after updates, metadata merges, Unicode in
# merged JSON, exact limits, mixed valid/invalid arguments, concurrent metadata updates --------------
# Each mutant below passed every check of the suite before workmem/conformance/edges.py existed.


def _owned_by(storage: InMemoryStorage, matches: Callable[[str], bool]) -> list[Thread]:
    with storage._store.lock:
        return [t for t in storage._store.threads.values() if matches(t.resource_id)]


def _listing(
    storage: InMemoryStorage,
    query: ListQuery,
    threads: list[Thread],
    total: int | None = None,
    cap: int | None = None,
) -> ThreadPage:
    threads.sort(key=lambda t: (getattr(t, query.order_by), t.id), reverse=query.direction == "desc")
    end = None if query.per_page is None else query.offset + query.per_page
    chunk = threads[query.offset : end][:cap]
    return query.page_of(chunk, len(threads) if total is None else total)


def _like(pattern: str) -> re.Pattern[str]:
    """SQL ``LIKE`` without an ``ESCAPE`` clause, ASCII case-insensitive as in SQLite."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.compile(regex, re.IGNORECASE | re.DOTALL)


class LikeListing(InMemoryStorage):
    """list_threads selects ``WHERE resourceId LIKE ?``: ``%``/``_`` in an id are wildcards, case is folded."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        pattern = _like(query.resource_id)
        return _listing(self, query, _owned_by(self, lambda owner: pattern.fullmatch(owner) is not None))


class GlobListing(InMemoryStorage):
    """list_threads scans keys with the id as a Redis ``MATCH`` glob, escaping ``[`` but not ``*`` and ``?``."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        glob = query.resource_id.replace("[", "[[]")
        return _listing(self, query, _owned_by(self, lambda owner: fnmatch.fnmatchcase(owner, glob)))


class PrefixListing(InMemoryStorage):
    """list_threads ranges over keys starting with the id: a resource id's prefix lists the longer one's threads."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        return _listing(self, query, _owned_by(self, lambda owner: owner.startswith(query.resource_id)))


class LikeTotal(InMemoryStorage):
    """The page is right, but the separate COUNT query matches with an unescaped, case-folding ``LIKE``."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        pattern = _like(query.resource_id)
        total = len(_owned_by(self, lambda owner: pattern.fullmatch(owner) is not None))
        return _listing(self, query, _owned_by(self, lambda owner: owner == query.resource_id), total)


class GlobDelete(InMemoryStorage):
    """delete_thread deletes every key matching ``thread:{id}`` as an unescaped Redis glob."""

    def delete_thread(self, thread_id: str) -> bool:
        validate_id(thread_id, "thread id")
        pattern = thread_id.replace("[", "[[]")
        with self._store.lock:
            doomed = [tid for tid in self._store.threads if fnmatch.fnmatchcase(tid, pattern)]
            for tid in doomed:
                del self._store.threads[tid]
            return bool(doomed)


class CappedAll(InMemoryStorage):
    """``per_page=None`` silently returns the default page size (100) instead of every thread."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        cap = 100 if query.per_page is None else None
        return _listing(self, query, _owned_by(self, lambda owner: owner == query.resource_id), cap=cap)


class Batch64(InMemoryStorage):
    """Rows are fetched in one batch of at most 64: a page of more threads is cut short, total still right."""

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        return _listing(self, query, _owned_by(self, lambda owner: owner == query.resource_id), cap=64)


class StaleUpdatedIndex(InMemoryStorage):
    """Orders by updated_at through an index written by save/create only: update_thread and merges leave it stale."""

    def _index(self) -> dict[str, Any]:
        with self._store.lock:
            index: dict[str, Any] = self._store.__dict__.setdefault("updated_index", {})
            return index

    def save_thread(self, thread: Thread) -> Thread:
        saved = super().save_thread(thread)
        self._index()[saved.id] = saved.updated_at
        return saved

    def create_thread(self, thread: Thread) -> Thread:
        created = super().create_thread(thread)
        self._index()[created.id] = created.updated_at
        return created

    def delete_thread(self, thread_id: str) -> bool:
        self._index().pop(thread_id, None)
        return super().delete_thread(thread_id)

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        owned = _owned_by(self, lambda owner: owner == query.resource_id)
        if query.order_by == "created_at":
            return _listing(self, query, owned)
        index = self._index()
        owned.sort(key=lambda t: (index.get(t.id, t.updated_at), t.id), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of(owned[query.offset : end], len(owned))


def _deep(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A lodash-style deep merge: objects merge key by key, anything else (null too) replaces."""
    result = dict(old)
    for key, value in new.items():
        before = result.get(key)
        result[key] = _deep(before, value) if isinstance(before, dict) and isinstance(value, dict) else value
    return result


class DeepMetadataMerge(InMemoryStorage):
    """update_resource/update_thread merge nested metadata objects deeply instead of shallowly."""

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        with self._store.lock:
            old = self._store.resources.get(resource_id) if isinstance(resource_id, str) else None
            if old is not None and old.metadata and isinstance(metadata, Mapping):
                metadata = _deep(old.metadata, validate_json_object(metadata))
            return super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)

    def update_thread(
        self, thread_id: str, *, title: str | Unset = UNSET, metadata: Mapping[str, Any] | Unset | None = UNSET
    ) -> Thread:
        with self._store.lock:
            old = self._store.threads.get(thread_id) if isinstance(thread_id, str) else None
            if old is not None and old.metadata and isinstance(metadata, Mapping):
                metadata = _deep(old.metadata, validate_json_object(metadata))
            return super().update_thread(thread_id, title=title, metadata=metadata)


def _nfc(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, list):
        return [_nfc(v) for v in value]
    if isinstance(value, dict):
        return {_nfc(k): _nfc(v) for k, v in value.items()}
    return value


class NormalizingMerge(InMemoryStorage):
    """merge_working_memory sends the patch through a JSON layer that NFC-normalizes every string and key."""

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        clean = _nfc(dict(patch)) if isinstance(patch, Mapping) else patch
        return super().merge_working_memory(clean, scope=scope, resource_id=resource_id, thread_id=thread_id)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 1


def _one_level_less(value: Any) -> Any:
    """``value`` with its deepest container flattened away, for a validator that counts from 0."""
    if isinstance(value, dict):
        if any(isinstance(v, dict | list) for v in value.values()):
            return {k: _one_level_less(v) for k, v in value.items()}
        return 0
    if isinstance(value, list):
        if any(isinstance(v, dict | list) for v in value):
            return [_one_level_less(v) for v in value]
        return 0
    return value


class DepthOffByOne(InMemoryStorage):
    """The nesting limit is checked with ``>`` on a depth counted from 0: 33 levels are accepted."""

    def _lax(self, value: Any) -> Any:
        if isinstance(value, Mapping) and _depth(dict(value)) == 33:
            validate_json_object(_one_level_less(dict(value)))  # everything else is still checked
            return json.loads(json.dumps(dict(value)))
        return None

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        lax = self._lax(metadata)
        if lax is None:
            return super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)
        validate_id(resource_id, "resource id")
        wm, _ = check_resource_update(working_memory, UNSET)
        with self._store.lock:
            old = self._store.resources.get(resource_id)
            now = utc_now()
            new = trusted_resource(
                resource_id,
                (old.working_memory if old else None) if isinstance(wm, Unset) else wm,
                {**((old.metadata if old else None) or {}), **lax},
                old.created_at if old else now,
                now,
            )
            self._store.resources[resource_id] = new
            return new

    def update_thread(
        self, thread_id: str, *, title: str | Unset = UNSET, metadata: Mapping[str, Any] | Unset | None = UNSET
    ) -> Thread:
        lax = self._lax(metadata)
        if lax is None:
            return super().update_thread(thread_id, title=title, metadata=metadata)
        validate_id(thread_id, "thread id")
        title, _ = check_thread_update(title, UNSET)
        with self._store.lock:
            old = self._store.threads.get(thread_id)
            if old is None:
                raise workmem.ThreadNotFoundError(thread_id)
            new = trusted_thread(
                old.id,
                old.resource_id,
                old.title if isinstance(title, Unset) else title,
                {**(old.metadata or {}), **lax},
                old.created_at,
                utc_now(),
            )
            self._store.threads[thread_id] = new
            return new


class CharLimitIds(InMemoryStorage):
    """Ids are limited to 512 *characters* (``len(id)``), not 512 UTF-8 bytes."""

    @staticmethod
    def _long(value: object) -> bool:
        return (
            isinstance(value, str)
            and len(value.encode("utf-8", "surrogatepass")) > 512
            and len(value) <= 512
            and "\x00" not in value
        )

    def get_resource(self, resource_id: str) -> Resource | None:
        if self._long(resource_id):
            with self._store.lock:
                return self._store.resources.get(resource_id)
        return super().get_resource(resource_id)

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        if not self._long(resource_id):
            return super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)
        working_memory, metadata = check_resource_update(working_memory, metadata)
        with self._store.lock:
            old = self._store.resources.get(resource_id)
            now = utc_now()
            new = trusted_resource(
                resource_id,
                (old.working_memory if old else None) if isinstance(working_memory, Unset) else working_memory,
                (old.metadata if old else None) if isinstance(metadata, Unset) or metadata is None else metadata,
                old.created_at if old else now,
                now,
            )
            self._store.resources[resource_id] = new
            return new

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        if self._long(resource_id):
            return ThreadPage((), 0, page, per_page, False)
        return super().list_threads(resource_id, page=page, per_page=per_page, order_by=order_by, direction=direction)


class PartialWrite(InMemoryStorage):
    """update_resource writes one field at a time: bad metadata leaves the new working memory written.

    (The same bug in update_thread, metadata then title, is caught by the state machine's bad titles.)
    """

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        if isinstance(working_memory, Unset) or isinstance(metadata, Unset):
            return super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)
        super().update_resource(resource_id, working_memory=working_memory)
        return super().update_resource(resource_id, metadata=metadata)


class RacyMetadata(InMemoryStorage):
    """Metadata updates read the record, pause, then write the merged whole back (a lock per connection only)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self._own_lock = threading.Lock()

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        if not isinstance(metadata, Mapping):
            return super().update_resource(resource_id, working_memory=working_memory, metadata=metadata)
        with self._own_lock:
            old = self.get_resource(resource_id)
            time.sleep(0.002)
            merged = {**((old.metadata if old else None) or {}), **validate_json_object(metadata)}
            now = utc_now()
            base = old or Resource(resource_id, None, None, now, now)
            new = dataclasses.replace(
                base,
                working_memory=base.working_memory if isinstance(working_memory, Unset) else working_memory,
                metadata=merged,
                updated_at=now,
            )
            return self.save_resource(new)

    def update_thread(
        self, thread_id: str, *, title: str | Unset = UNSET, metadata: Mapping[str, Any] | Unset | None = UNSET
    ) -> Thread:
        if not isinstance(metadata, Mapping):
            return super().update_thread(thread_id, title=title, metadata=metadata)
        with self._own_lock:
            old = self.get_thread(thread_id)
            if old is None:
                raise workmem.ThreadNotFoundError(thread_id)
            time.sleep(0.002)
            merged = {**(old.metadata or {}), **validate_json_object(metadata)}
            new = dataclasses.replace(
                old, title=old.title if isinstance(title, Unset) else title, metadata=merged, updated_at=utc_now()
            )
            with self._store.lock:
                self._store.threads[thread_id] = new
            return new


class LenientStoredDepth(InMemoryStorage):
    """merge parses the stored document with the nesting limit off by one: it merges into 33 levels."""

    def merge_working_memory(
        self, patch: Mapping[str, Any], *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        ids: dict[str, Any] = {"scope": scope, "resource_id": resource_id, "thread_id": thread_id}
        with self._store.lock:
            try:
                stored = json.loads(self.get_working_memory(**ids) or "")
            except ValueError:
                stored = None
            if not isinstance(stored, dict) or _depth(stored) != 33:
                return super().merge_working_memory(patch, **ids)
            merged: dict[str, Any] = workmem.apply_merge_patch(stored, validate_json_object(patch, "patch"))
            self.set_working_memory(json.dumps(merged), **ids)
            return merged


class SeparateMetadataLock(InMemoryStorage):
    """update_thread serializes on a lock of its own (say, a version that merges never bump): merges slip between."""

    _metadata_lock = threading.Lock()  # shared by every connection: update_thread alone is atomic

    def update_thread(
        self, thread_id: str, *, title: str | Unset = UNSET, metadata: Mapping[str, Any] | Unset | None = UNSET
    ) -> Thread:
        if not isinstance(metadata, Mapping):
            return super().update_thread(thread_id, title=title, metadata=metadata)
        with self._metadata_lock:
            old = self.get_thread(thread_id)
            if old is None:
                raise workmem.ThreadNotFoundError(thread_id)
            time.sleep(0.002)
            merged = {**(old.metadata or {}), **validate_json_object(metadata)}
            new = dataclasses.replace(
                old, title=old.title if isinstance(title, Unset) else title, metadata=merged, updated_at=utc_now()
            )
            with self._store.lock:
                self._store.threads[thread_id] = new
            return new


EDGE_MUTANTS: list[tuple[type[InMemoryStorage], str]] = [
    # (mutant, the check that must fail)
    (LikeListing, "list_lookalike_ids"),
    (GlobListing, "list_lookalike_ids"),
    (PrefixListing, "list_lookalike_ids"),
    (LikeTotal, "list_lookalike_ids"),
    (GlobDelete, "list_lookalike_ids"),
    (CappedAll, "list_beyond_default_page"),
    (Batch64, "list_beyond_default_page"),
    (StaleUpdatedIndex, "list_order_after_update"),
    (DeepMetadataMerge, "metadata_merge_shallow"),
    (NormalizingMerge, "merged_json_unicode_exact"),
    (DepthOffByOne, "exact_limits"),
    (LenientStoredDepth, "exact_limits"),
    (CharLimitIds, "exact_limits"),
    (PartialWrite, "no_partial_write"),
    (RacyMetadata, "concurrent_metadata_updates"),
    (SeparateMetadataLock, "concurrent_metadata_updates"),
]


@pytest.mark.parametrize(("mutant", "must_fail"), EDGE_MUTANTS, ids=[m[0].__name__ for m in EDGE_MUTANTS])
def test_edge_mutant_is_caught(mutant: type[InMemoryStorage], must_fail: str) -> None:
    report = _mutant_report(mutant, frozenset([must_fail]))
    (result,) = report.checks
    assert result.status == "failed", f"{mutant.__name__} was not caught by {must_fail}"
    assert result.reason and "Flaky" not in result.reason, result.reason
