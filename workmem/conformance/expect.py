"""Comparisons shared by the checks: JSON values, timestamps and records against the model."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from workmem.records import Resource, Thread
from workmem.timestamps import utc_now

from .model import MergedJson, MResource, MThread, Window

__all__ = [
    "Outcome",
    "assert_utc_ms",
    "attempt",
    "clock_past",
    "json_difference",
    "json_equal",
    "record_mismatches",
    "wm_matches",
]

T = TypeVar("T")


def json_equal(expected: Any, actual: Any) -> bool:
    """JSON equality as the contract defines it: key order ignored, ``True`` is not ``1``, numbers keep their kind.

    An ``int`` written must come back an ``int`` (``1`` is not ``1.0``); a
    ``float`` may come back as the equal ``int`` (``2.0`` as ``2``: JavaScript
    readers cannot tell them apart, so backends need not keep them apart).
    """
    if isinstance(expected, MergedJson):
        return isinstance(actual, str) and _parses_to(actual, expected.doc)
    if expected is None or isinstance(expected, bool | str):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, int):
        return type(actual) is int and actual == expected
    if isinstance(expected, float):
        return type(actual) in (int, float) and actual == expected
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(json_equal(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and set(actual) == set(expected)
            and all(json_equal(expected[k], actual[k]) for k in expected)
        )
    raise TypeError(f"not a JSON value: {expected!r}")


def json_difference(expected: Any, actual: Any, path: str = "") -> str | None:
    """Where ``actual`` first differs from ``expected`` under :func:`json_equal`, in words; ``None`` if equal."""
    where = path or "the value"
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(actual) != set(expected):
            missing, extra = sorted(set(expected) - set(actual)), sorted(set(actual) - set(expected))
            return f"{where} has keys {sorted(actual)!r}: missing {missing!r}, extra {extra!r}"
        for key in expected:
            found = json_difference(expected[key], actual[key], f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = json_difference(e, a, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if json_equal(expected, actual):
        return None
    if type(expected) is int and type(actual) is float and actual == expected:
        return f"{where}: the integer {expected!r} came back as the float {actual!r} (an int must read back an int)"
    return f"{where}: expected {expected!r}, got {actual!r}"


def _parses_to(text: str, doc: dict[str, Any]) -> bool:
    try:
        return json_equal(doc, json.loads(text))
    except ValueError:
        return False


def wm_matches(expected: str | MergedJson | None, actual: str | None) -> bool:
    """Working memory: text set verbatim must match exactly, merged JSON must parse to the same object."""
    if isinstance(expected, MergedJson):
        return isinstance(actual, str) and _parses_to(actual, expected.doc)
    return type(actual) is type(expected) and actual == expected


def assert_utc_ms(value: datetime, what: str) -> None:
    """A stored timestamp is timezone-aware UTC with whole milliseconds."""
    assert isinstance(value, datetime), f"{what} is a {type(value).__name__}, not a datetime"
    assert value.tzinfo is not None and value.utcoffset() is not None, f"{what} {value!r} is naive"
    assert value.utcoffset() == UTC.utcoffset(value), f"{what} {value.isoformat()} is not in UTC"
    assert value.microsecond % 1000 == 0, f"{what} {value.isoformat()} has sub-millisecond digits"


def clock_past(stamp: datetime) -> None:
    """Wait until the millisecond clock reads later than ``stamp``.

    A write stamps ``updated_at`` with the current millisecond, so after this
    wait a read or a refused write that wrongly moves ``updated_at`` always
    shows (the stamp it leaves is no longer ``stamp``). Checks wait instead of
    hoping the clock ticks, so they fail every time, never "flakily".
    """
    while utc_now() <= stamp:
        time.sleep(0.0002)


def _stamp_ok(expected: datetime | Window, actual: datetime) -> bool:
    if isinstance(expected, Window):
        return expected.lo <= actual <= expected.hi
    return actual == expected


def _stamp_text(stamp: datetime | Window) -> str:
    if isinstance(stamp, Window):
        return f"between {stamp.lo.isoformat()} and {stamp.hi.isoformat()} (the clock around the call)"
    return stamp.isoformat()


def record_mismatches(expected: MResource | MThread, actual: Resource | Thread) -> list[str]:
    """How ``actual`` differs from the model's record (empty when it matches)."""
    problems: list[str] = []
    fields: list[tuple[str, Any, Any, Callable[[Any, Any], bool]]] = [("id", expected.id, actual.id, json_equal)]
    if isinstance(expected, MResource):
        assert isinstance(actual, Resource)
        fields.append(("working_memory", expected.working_memory, actual.working_memory, wm_matches))
    else:
        assert isinstance(actual, Thread)
        fields.append(("resource_id", expected.resource_id, actual.resource_id, json_equal))
        fields.append(("title", expected.title, actual.title, json_equal))
    fields.append(("metadata", expected.metadata, actual.metadata, json_equal))
    for name, want, got, same in fields:
        if not same(want, got):
            problems.append(f"{name}: expected {want!r}, got {got!r}")
    for name in ("created_at", "updated_at"):
        got_stamp = getattr(actual, name)
        assert_utc_ms(got_stamp, name)
        want_stamp = getattr(expected, name)
        if not _stamp_ok(want_stamp, got_stamp):
            problems.append(f"{name}: expected {_stamp_text(want_stamp)}, got {got_stamp.isoformat()}")
    return problems


class Outcome:
    """What one call did: a value or an exception."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    def describe(self) -> str:
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error}"
        return f"returned {self.value!r}"


def attempt(call: Callable[[], T]) -> tuple[Outcome, Window]:
    """Run ``call``; return its result or exception, and the clock window around it."""
    lo = utc_now()
    try:
        outcome = Outcome(call())
    except Exception as exc:
        outcome = Outcome(error=exc)
    return outcome, Window(lo, utc_now())
