"""Hypothesis strategies for the checks: valid text, JSON values, patches and small pools of ids."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "JSON_FLOATS",
    "STAMPS",
    "json_objects",
    "json_values",
    "patches",
    "small_json",
    "small_objects",
    "stored_texts",
    "valid_text",
]

# The characters workmem accepts: every code point but NUL and lone surrogates.
_ALPHABET = st.characters(exclude_categories=["Cs"], exclude_characters=["\x00"])

JSON_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
_SAFE_INTS = st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)

STAMPS = [
    datetime(2024, 1, 1, 0, 0, 0, 0, tzinfo=UTC),
    datetime(2024, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
    datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC),
]
"""A few past instants, so that equal timestamps (ties) are common."""


def valid_text(min_size: int = 0, max_size: int | None = None) -> st.SearchStrategy[str]:
    """Any Unicode text workmem accepts."""
    return st.text(_ALPHABET, min_size=min_size, max_size=max_size)


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values within workmem's limits."""
    scalars = st.none() | st.booleans() | _SAFE_INTS | JSON_FLOATS | valid_text(max_size=20)
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(valid_text(max_size=8), children, max_size=4),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 20) -> st.SearchStrategy[dict[str, Any]]:
    """Arbitrary JSON objects within workmem's limits."""
    return st.dictionaries(valid_text(max_size=8), json_values(max_leaves), max_size=5)


# Small pools, so that the state machine and the algebra properties collide often.
_KEYS = st.sampled_from(["a", "b", "c"])
_SMALL_SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from([0.5, "", "x", "ü✓"])


def small_json() -> st.SearchStrategy[Any]:
    """JSON values drawn from a tiny pool (nested one or two levels)."""
    return st.recursive(
        _SMALL_SCALARS,
        lambda children: st.lists(children, max_size=2) | st.dictionaries(_KEYS, children, max_size=2),
        max_leaves=4,
    )


def small_objects() -> st.SearchStrategy[dict[str, Any]]:
    """Metadata-like objects on keys ``a``, ``b``, ``c`` and sometimes ``workingMemory``."""
    keys = st.sampled_from(["a", "b", "c", "workingMemory"])
    wm_values = st.sampled_from(['{"a":1}', "# notes", ""]) | small_json()
    return st.dictionaries(keys, small_json(), max_size=3).flatmap(
        lambda d: st.just(d) if "workingMemory" not in d else wm_values.map(lambda v: {**d, "workingMemory": v})
    )


def patches() -> st.SearchStrategy[dict[str, Any]]:
    """RFC 7396 patches on the small key pool: nulls delete, objects recurse, anything else replaces."""
    return st.dictionaries(_KEYS, small_json(), max_size=3)


def stored_texts() -> st.SearchStrategy[str]:
    """Working memory text: Markdown, JSON objects, JSON that is not an object, blank, or random."""
    return st.sampled_from(
        ["", "  ", "# User\n- name: Ada", '{"a":1}', '{"a":{"b":[1]},"c":null}', "[1]", "3", "null"]
    ) | (valid_text(max_size=6))
