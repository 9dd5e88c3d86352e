"""Unit tests of the core: records, validation, RFC 7396, URLs and the registry."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import workmem
from workmem.merge_patch import apply_merge_patch, parse_json_object
from workmem.urls import mask_url, scheme_of


def test_rfc7396_appendix_a_examples() -> None:
    cases = [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ]
    for target, patch, expected in cases:
        assert apply_merge_patch(target, patch) == expected


def _merge_patch_as_written_in_rfc7396(target: Any, patch: Any) -> Any:
    """RFC 7396 section 2's pseudocode, recursive, as the reference."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch_as_written_in_rfc7396(result.get(key), value)
    return result


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=12,
)


@given(_json, _json)
def test_merge_patch_agrees_with_the_rfc_pseudocode(target: Any, patch: Any) -> None:
    before = json.dumps([target, patch])
    merged = apply_merge_patch(target, patch)
    assert json.dumps(merged) == json.dumps(_merge_patch_as_written_in_rfc7396(target, patch))  # key order too
    assert json.dumps([target, patch]) == before  # neither argument modified


def test_merge_patch_nested_past_the_recursion_limit() -> None:
    depth = 100_000
    patch: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        patch = {"a": patch}
    merged = apply_merge_patch({"keep": True}, patch)
    assert merged["keep"] is True
    node = merged
    for _ in range(depth):
        node = node["a"]
    assert node == {"leaf": 1}


def test_parse_json_object_rejects_non_objects() -> None:
    assert parse_json_object(None) == {}
    assert parse_json_object("  ") == {}
    assert parse_json_object('{"a": 1}') == {"a": 1}
    for text in ("# Markdown", "[1, 2]", '"text"', "3"):
        with pytest.raises(workmem.WorkingMemoryFormatError):
            parse_json_object(text)


def test_records_normalize_timestamps_to_utc_milliseconds() -> None:
    moment = datetime(2025, 1, 2, 4, 4, 5, 678999, tzinfo=timezone(timedelta(hours=1)))
    thread = workmem.Thread("t", "r", created_at=moment, updated_at=moment)
    assert thread.created_at == datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert thread.created_at.tzinfo == UTC
    with pytest.raises(workmem.ValidationError):
        workmem.Thread("t", "r", created_at=datetime(2025, 1, 1))  # naive


@pytest.mark.parametrize(
    "bad",
    [
        {"a": float("nan")},
        {"a": float("inf")},
        {"a": 2**53},
        {1: "x"},
        {"a": object()},
        {"a\x00": 1},
        {"a": "\ud800"},
        {"a": b"bytes"},
        "not a dict",
    ],
)
def test_bad_metadata_is_rejected(bad: object) -> None:
    with pytest.raises(workmem.ValidationError):
        workmem.Thread("t", "r", metadata=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "a\x00b", "x" * 513, "\udfff", 5])
def test_bad_ids_are_rejected(bad: object) -> None:
    with pytest.raises(workmem.ValidationError):
        workmem.Resource(bad)  # type: ignore[arg-type]


def test_deep_metadata_limit() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(40):
        node["k"] = {}
        node = node["k"]  # type: ignore[assignment]
    with pytest.raises(workmem.ValidationError, match="nested"):
        workmem.Resource("r", metadata=deep)


def test_mask_url_hides_passwords_and_tokens() -> None:
    assert mask_url("postgresql://bob:s3cret@db:5432/x") == "postgresql://bob:***@db:5432/x"
    masked = mask_url("libsql://h.turso.io?authToken=abc.def&x=1")
    assert "abc.def" not in masked and "x=1" in masked
    assert "SeCrEt" not in mask_url("upstash+https://h?token=SeCrEt")


def test_scheme_of() -> None:
    assert scheme_of(":memory:") == "file"
    assert scheme_of("agent.db") == "file"
    assert scheme_of("file:agent.db") == "file"
    assert scheme_of("PostgreSQL://h/db") == "postgresql"


def test_unknown_scheme_lists_known_ones() -> None:
    with pytest.raises(workmem.UnknownSchemeError, match="memory"):
        workmem.connect("nosuch://x")


def test_register_refuses_to_clobber() -> None:
    with pytest.raises(ValueError, match="already registered"):
        workmem.register("memory", "x:Y")
    workmem.register("test-mem-alias", "workmem.adapters.reference:ReferenceStorage")
    with pytest.raises(ValueError):
        workmem.register("test-mem-alias", "workmem.adapters.reference:ReferenceStorage")
    assert type(workmem.connect("test-mem-alias://n")).__name__ == "ReferenceStorage"


def test_register_refuses_a_scheme_no_url_can_have() -> None:
    """A scheme with a space, ':' or '/' (or not starting with a letter) could never be reached by connect()."""
    for scheme in ("has space", "my:db", "my/db", "1db", "-db", "db?", "mydb://"):
        with pytest.raises(workmem.ValidationError, match="scheme"):
            workmem.register(scheme, "workmem.adapters.reference:ReferenceStorage")
        assert scheme.lower() not in workmem.known_schemes()
    workmem.register("Test-Mem.Alias+2", "workmem.adapters.reference:ReferenceStorage", clobber=True)  # + - . too
    assert type(workmem.connect("test-mem.alias+2://n")).__name__ == "ReferenceStorage"


def test_core_imports_no_driver() -> None:
    import subprocess
    import sys

    code = (
        "import sys, workmem, workmem.adapters.reference;"
        "bad = {'psycopg','libsql','oracledb','pymongo','upstash_redis'} & set(sys.modules);"
        "print(sorted(bad)); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_negative_zero_is_stored_as_zero_everywhere() -> None:
    import math

    thread = workmem.Thread("t", "r", metadata={"z": -0.0, "deep": [{"z": -0.0}], "x": -1.5})
    assert thread.metadata is not None
    assert math.copysign(1.0, thread.metadata["z"]) == 1.0
    assert math.copysign(1.0, thread.metadata["deep"][0]["z"]) == 1.0
    assert thread.metadata["x"] == -1.5
