"""PostgreSQL's one-statement merge (``workmem_merge_document``) against RFC 7396, on a REAL server.

The merge runs in SQL (:mod:`workmem.adapters.postgres.dialect`): these tests hold
it to the text Python writes (``dump_json`` of RFC 7396 applied by the model in
:mod:`workmem.conformance.model`), byte for byte, including where the function
takes its shortcuts (an object value with no null in it copied as sent, an
unchanged subtree left as it is). Its speed on a 60,000-key patch is measured by
``python -m bench --only big_merge``, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_writes import json_writes
from postgres_schemas import fresh_schema_url

import workmem
from workmem.conformance.model import model_merge_patch
from workmem.storage import MemoryStorage
from workmem.validation import dump_json

pytestmark = pytest.mark.backend("postgres")

# Text that stays on the one-statement path (no \u escape in dump_json's output, no exponent, no long
# number, no '":' inside a string): quotes, backslashes, the escapes \n and \t, non-ASCII, "null" in strings.
_TEXT = st.lists(st.sampled_from(['"', "\\", "\n", "\t", " ", ",", "{", "}", "é", "✓", "x", "null"]), max_size=6).map(
    "".join
)
_KEYS = st.sampled_from(["a", "b", "c", 'q"', "é", "n\\"])
_SCALARS = (
    st.none() | st.booleans() | st.integers(-(10**15 - 1), 10**15 - 1) | st.sampled_from([0.5, -1.25, 3.0]) | _TEXT
)


def _values(max_leaves: int) -> st.SearchStrategy[Any]:
    return st.recursive(
        _SCALARS,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=4),
        max_leaves=max_leaves,
    )


_DOCUMENTS = st.dictionaries(_KEYS, _values(24), max_size=5).map(
    lambda doc: model_merge_patch({}, doc)  # stored memory holds no null members (a merge never leaves one)
)
_PATCHES = st.dictionaries(_KEYS, _values(24), max_size=5)


@pytest.fixture(scope="module")
def storage() -> Iterator[MemoryStorage]:
    with fresh_schema_url() as url, workmem.connect(url) as opened:
        yield opened


@pytest.fixture(scope="module")
def sql(storage: MemoryStorage) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(storage._settings.conninfo, autocommit=True) as conn:  # type: ignore[attr-defined]
        yield conn


def _merge_in_sql(sql: psycopg.Connection[Any], storage: MemoryStorage, stored: str | None, patch: Any) -> str:
    merge = f"{storage.dialect._prefix}.workmem_merge_document"  # type: ignore[attr-defined]
    row = sql.execute(f"SELECT {merge}(%s, CAST(%s AS json))", [stored, dump_json(patch)]).fetchone()
    assert row is not None
    return str(row[0])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_DOCUMENTS, patch=_PATCHES, variant=st.sampled_from(["stored", "nothing", "itself", "patched twice"]))
def test_the_sql_merge_writes_the_text_python_writes(
    storage: MemoryStorage, sql: psycopg.Connection[Any], doc: dict[str, Any], patch: dict[str, Any], variant: str
) -> None:
    """RFC 7396 exactly, and the stored text byte for byte: kept keys in order, then new ones, compact."""
    target: dict[str, Any] | None = {
        "stored": doc,
        "nothing": None,
        "itself": model_merge_patch({}, patch),
        "patched twice": model_merge_patch(doc, patch),
    }[variant]
    stored = None if target is None else dump_json(target)
    assert _merge_in_sql(sql, storage, stored, patch) == dump_json(model_merge_patch(target, patch))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_DOCUMENTS, patch=_PATCHES, scope=st.sampled_from(["resource", "thread"]))
def test_a_merge_through_the_api_stores_the_text_python_writes(
    storage: MemoryStorage, doc: dict[str, Any], patch: dict[str, Any], scope: str
) -> None:
    place = {"scope": scope, "resource_id": "r-merge", "thread_id": "t-merge" if scope == "thread" else None}
    if scope == "thread" and storage.get_thread("t-merge") is None:
        storage.create_thread(workmem.Thread("t-merge", "r-merge"))
    storage.set_working_memory(dump_json(doc), **place)  # type: ignore[arg-type]
    expected = model_merge_patch(doc, patch)
    assert storage.merge_working_memory(patch, **place) == expected  # type: ignore[arg-type]
    assert storage.get_working_memory(**place) == dump_json(expected)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stored", "patch", "merged"),
    [
        # an object value with no null merges into a non-object, into nothing and into {} as itself
        ('{"a":[1,2]}', {"a": {"b": {"c": 1}}}, '{"a":{"b":{"c":1}}}'),
        (None, {"a": {"b": 1}, "c": [None]}, '{"a":{"b":1},"c":[null]}'),
        ("{ }", {"a": {"b": 1}}, '{"a":{"b":1}}'),
        # a null anywhere under it is a deletion: dropped, also inside a new object
        (None, {"a": {"b": None, "c": {"d": None}}}, '{"a":{"c":{}}}'),
        ('{"a":5}', {"a": {"b": None}}, '{"a":{}}'),
        # "null" inside a string is text, not a deletion
        ('{"a":{"b":"null"}}', {"a": {"b": "null", "c": "x"}}, '{"a":{"b":"null","c":"x"}}'),
        # an unchanged subtree stays, a changed one is merged deeply, kept keys keep their place
        ('{"x":1,"a":{"b":1,"c":2},"y":2}', {"a": {"b": 1, "c": 2}}, '{"x":1,"a":{"b":1,"c":2},"y":2}'),
        ('{"x":1,"a":{"b":1,"c":2},"y":2}', {"a": {"c": 3, "d": 4}, "x": None}, '{"a":{"b":1,"c":3,"d":4},"y":2}'),
        # everything deleted: the empty object
        ('{"a":1,"b":{"c":2}}', {"a": None, "b": None}, "{}"),
    ],
)
def test_merge_cases(
    storage: MemoryStorage, sql: psycopg.Connection[Any], stored: str | None, patch: Any, merged: str
) -> None:
    assert _merge_in_sql(sql, storage, stored, patch) == merged
    assert json.loads(merged) == model_merge_patch(None if stored is None else json.loads(stored), patch)


def _nested(depth: int, leaf: str, path: str = "") -> Any:
    """A binary tree of objects ``depth`` levels deep: 2**depth leaves, about 2**(depth + 1) keys."""
    if depth == 0:
        return f"{leaf}{path}"
    return {f"k{path}{i}": _nested(depth - 1, leaf, f"{path}{i}") for i in range(2)}


def test_a_large_nested_patch_merges_exactly(storage: MemoryStorage, sql: psycopg.Connection[Any]) -> None:
    """Thousands of objects on many levels (the shape that made the per-object recursion slow): still exact."""
    stored = _nested(10, "old")
    patch = _nested(10, "new")
    patch["k0"]["k00"] = None
    patch["k1"]["k11"]["k110"] = {"fresh": {"x": None, "y": [None]}}
    assert _merge_in_sql(sql, storage, dump_json(stored), patch) == dump_json(model_merge_patch(stored, patch))


def test_large_memory_nested_deep_is_merged_under_a_row_lock(
    storage: MemoryStorage, sql: psycopg.Connection[Any]
) -> None:
    """Over 256 KiB and 4 levels deep the SQL merge hands over (WM004); the row-locked merge is as exact."""
    stored, patch = _nested(13, "old"), _nested(13, "new")  # 16,382 objects, about 400 KB
    patch["k1"]["k10"]["k100"]["k1000"] = None
    with pytest.raises(psycopg.Error) as raised:
        _merge_in_sql(sql, storage, dump_json(stored), patch)
    assert raised.value.sqlstate == "WM004"
    with pytest.raises(psycopg.Error) as raised:  # a patch like that, with a null, into nothing
        _merge_in_sql(sql, storage, None, patch)
    assert raised.value.sqlstate == "WM004"
    wide = {f"k{i}": f"new-{i}" for i in range(30_000)}  # as large, one level: merged in SQL
    assert _merge_in_sql(sql, storage, dump_json({"a": 1}), wide) == dump_json({"a": 1, **wide})
    for scope in ("resource", "thread"):
        place = {"scope": scope, "resource_id": "r-large", "thread_id": "t-large" if scope == "thread" else None}
        if scope == "thread":
            storage.create_thread(workmem.Thread("t-large", "r-large"))
        storage.set_working_memory(dump_json(stored), **place)  # type: ignore[arg-type]
        expected = model_merge_patch(stored, patch)
        assert storage.merge_working_memory(patch, **place) == expected  # type: ignore[arg-type]
        assert storage.get_working_memory(**place) == dump_json(expected)  # type: ignore[arg-type]


def test_a_merge_in_sql_writes_the_patch_once_in_python(storage: MemoryStorage) -> None:
    storage.merge_working_memory({"a": {"b": [1, 2]}}, scope="resource", resource_id="once")
    with json_writes() as written:
        merged = storage.merge_working_memory({"c": "d"}, scope="resource", resource_id="once")
    assert merged == {"a": {"b": [1, 2]}, "c": "d"}
    assert written == [{"c": "d"}]  # the door's text goes to the statement: PostgreSQL merges (it was written twice)
