"""How the conformance suite reports: number kinds compared strictly, plain (never "Flaky") timing failures, and a
``ci`` run that ends within a minute even against an adapter that fails nearly every check."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import pytest
from hypothesis import Phase, given
from hypothesis import strategies as st
from test_mutants import (
    FailedMergeMovesUpdatedAt,
    IntsBecomeFloats,
    OffByOnePages,
    ReadMovesUpdatedAt,
    UnstableTies,
    faces,
)

from workmem.adapters.reference import ReferenceHooks
from workmem.conformance import PROFILES, run
from workmem.conformance.expect import json_difference, json_equal
from workmem.conformance.registry import Check, CheckContext
from workmem.conformance.runner import FLAKY_NOTE, _execute
from workmem.conformance.target import Target


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        (1, 1, True),
        (1, 1.0, False),  # an int written must read back an int
        (2.0, 2, True),  # an integral float may read back as an int (JavaScript cannot tell them apart)
        (2.5, 2.5, True),
        (2.5, 2, False),
        (0, False, False),
        (True, 1, False),
        ({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]}, False),
        ({"a": [1.0, {"b": 2.0}]}, {"a": [1, {"b": 2}]}, True),
        (-0.0, 0, True),
    ],
)
def test_json_equal_keeps_integers_integers(expected: Any, actual: Any, equal: bool) -> None:
    assert json_equal(expected, actual) is equal


def test_json_difference_names_the_path_and_the_number_kind() -> None:
    found = json_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]})
    assert found == "['a'][1]['b']: the integer 2 came back as the float 2.0 (an int must read back an int)"
    assert json_difference({"a": 2.0}, {"a": 2}) is None


def _factory(mutant: type[ReferenceHooks]) -> Any:
    """New connections to one store through the sync face of ``mutant`` (its hooks, see test_mutants.py)."""
    name = f"verdict-{mutant.__name__}-{uuid.uuid4().hex}"
    cls = faces(mutant)[0]
    return lambda: cls(name)


def test_an_adapter_that_turns_integers_into_floats_fails_with_a_plain_message() -> None:
    report = run(_factory(IntsBecomeFloats), profile="standard", only=["round_trip_json"])
    (result,) = report.checks
    assert result.status == "failed"
    assert "the integer 1 came back as the float 1.0" in (result.reason or ""), result.reason


@pytest.mark.parametrize("mutant", [ReadMovesUpdatedAt, FailedMergeMovesUpdatedAt], ids=lambda m: m.__name__)
def test_timestamp_bugs_fail_the_same_way_every_run_never_flaky(mutant: type[ReferenceHooks]) -> None:
    # The state machine waits for the clock after each write, so these fail at the same step on every run and on
    # Hypothesis's replay; before, they failed only when the millisecond ticked and were often reported "Flaky".
    quick_ci = dataclasses.replace(PROFILES["standard"], shrink_seconds=0, shrink_total_seconds=None)
    for _ in range(3):
        report = run(_factory(mutant), profile=quick_ci, only=["stateful", "timestamps"])
        for result in report.checks:
            assert result.status == "failed", result
            reason = result.reason or ""
            assert reason.startswith("AssertionError: ") and "Flaky" not in reason, reason
            assert "updated_at" in reason.splitlines()[0], reason


def test_a_failure_hypothesis_cannot_replay_is_still_reported_as_the_adapters() -> None:
    calls = {"n": 0}

    def once(ctx: CheckContext) -> None:
        @ctx.profile.settings(max_examples=5)
        @given(st.integers(0, 3))
        def prop(value: int) -> None:
            calls["n"] += 1
            assert calls["n"] != 1, "updated_at moved on a read"

        prop()

    result = _execute(Check("once", "fails once", once), Target("memory://"), PROFILES["standard"], None)
    assert result.status == "failed"
    reason = result.reason or ""
    assert reason.startswith(FLAKY_NOTE), reason
    assert "AssertionError: updated_at moved on a read" in reason, reason


def test_ci_without_shrinking_leaves_out_the_shrink_phase() -> None:
    ci = PROFILES["standard"]
    assert Phase.shrink in ci.settings().phases
    assert Phase.shrink not in dataclasses.replace(ci, shrink_seconds=0).settings().phases
    assert ci.shrink_seconds <= 5 and ci.shrink_total_seconds is not None and ci.shrink_total_seconds <= 20


def test_ci_shrinks_a_slow_to_shrink_failure_for_seconds_not_half_a_minute() -> None:
    # has_more off by one needs a long sequence of steps to show: the state machine used to shrink it for 30 s
    report = run(_factory(OffByOnePages), profile="standard", only=["stateful"])
    (result,) = report.checks
    assert result.status == "failed" and "has_more" in (result.reason or ""), result.reason
    assert result.duration_s < 20, f"the failing stateful check took {result.duration_s:.0f} s"


class FailsEverywhere(IntsBecomeFloats, OffByOnePages, UnstableTies, ReadMovesUpdatedAt):
    """Integers as floats, has_more off by one, unstable ties, reads that move updated_at."""


def test_ci_ends_within_a_minute_on_an_adapter_that_fails_most_checks() -> None:
    started = time.perf_counter()
    report = run(_factory(FailsEverywhere), profile="standard")
    elapsed = time.perf_counter() - started
    failed = {c.name for c in report.checks if c.status == "failed"}
    assert {"stateful", "merge_patch_algebra", "round_trip_json", "pagination", "timestamps"} <= failed, failed
    assert elapsed < 60, f"the ci profile took {elapsed:.0f} s on a failing adapter: {report.format_table()}"
    for result in report.checks:
        assert result.status != "failed" or "Flaky" not in (result.reason or ""), result.reason
