"""Schema mode without storage: the derived document and patch forms, merge safety, readable errors."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal

import jsonschema  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from workmem.agent import Memory, WorkingMemorySchema
from workmem.errors import MissingDriverError, ValidationError
from workmem.merge_patch import apply_merge_patch


class Address(BaseModel):
    city: str
    zip: str | None = None


class Person(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Full name")
    age: int | None = None
    home: Address
    work: Address | None = None
    tags: dict[str, int] = Field(default_factory=dict)
    visited: list[Address] = Field(default_factory=list)
    parent: Person | None = None


def test_document_form_drops_required_on_merge_paths_only() -> None:
    schema = WorkingMemorySchema(Person)
    assert schema.document_errors({}) == []
    assert schema.document_errors({"home": {}}) == []  # nested required dropped too
    assert schema.document_errors({"parent": {"parent": {"home": {"zip": "1"}}}}) == []  # recursive model
    # Under an array the item is replaced whole: its required fields still apply.
    assert schema.document_errors({"visited": [{"zip": "1"}]}) == ["at $.visited[0]: 'city' is a required property"]
    assert schema.document_errors({"age": "x"}) != []
    # extra="forbid" is kept (additionalProperties: false).
    assert schema.document_errors({"nickname": "x"}) != []
    assert schema.source == Person.model_json_schema()


def test_patch_form_makes_every_merged_field_nullable() -> None:
    schema = WorkingMemorySchema(Person)
    assert schema.patch_errors({"name": None, "home": {"city": None}, "tags": {"a": None}, "parent": None}) == []
    assert schema.patch_errors({"visited": None}) == []
    assert schema.patch_errors({"visited": [None]}) != []  # inside arrays nothing becomes nullable
    errors = schema.patch_errors({"home": {"city": 5}, "tags": {"a": "x"}, "visited": [{}]})
    assert errors == [
        "at $.home.city: 5 is not of type 'string'",
        """at $.tags.a: "x" is not of type 'integer'""",
        "at $.visited[0]: 'city' is a required property",
    ]
    assert schema.top_level_properties == ["name", "age", "home", "work", "tags", "visited", "parent"]


def test_a_free_form_object_schema_is_accepted() -> None:
    schema = WorkingMemorySchema({"type": "object"})
    assert schema.patch_errors({"anything": {"goes": [1]}}) == []
    assert schema.patch_errors([1]) == ["at $: [1] is not of type 'object'"]


def test_errors_are_capped() -> None:
    schema = WorkingMemorySchema({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(9)}})
    errors = schema.patch_errors({f"f{i}": i for i in range(9)})
    assert len(errors) == 6 and errors[-1] == "... and 4 more"


def test_unused_definitions_are_left_out() -> None:
    schema = WorkingMemorySchema(Person)
    assert set(schema.patch["$defs"]) == {"Address", "Address__patch", "Person__patch"}
    assert set(schema.document["$defs"]) == {"Address", "Address__document", "Person__document"}


def test_draft07_definitions_and_escaped_names() -> None:
    source = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"a/b": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
        "properties": {"thing": {"$ref": "#/definitions/a~1b"}},
        "required": ["thing"],
    }
    schema = WorkingMemorySchema(source)
    assert schema.document_errors({"thing": {}}) == []
    assert schema.patch_errors({"thing": {"x": None}}) == []
    assert schema.patch_errors({"thing": {"x": "no"}}) == ["""at $.thing.x: "no" is not of type 'integer'"""]
    # In the tool, the definitions move to the root of "parameters", where the $refs resolve.
    definition = Memory("memory://", schema=source).tool_definition(format="anthropic")
    assert definition is not None
    params = definition["input_schema"]
    assert "$schema" not in params["properties"]["memory"] and "definitions" in params
    validator = jsonschema.Draft7Validator(params)
    assert validator.is_valid({"memory": {"thing": {"x": None}}})
    assert not validator.is_valid({"memory": {"thing": {"x": "no"}}})


class Cat(BaseModel):
    kind: Literal["cat"]
    meows: bool = True


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: bool = True


class Owner(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"type": "object", "minProperties": 1}}}, "minProperties"),
        ({"type": "object", "properties": {"a": {}}, "maxProperties": 3}, "maxProperties"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "dependentRequired": {"a": ["b"]}}, "dependent"),
        ({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}, "'not'"),
        ({"type": "object", "properties": {"a": {"if": {}, "then": {}}}}, "'if'"),
        ({"type": "object", "properties": {"a": {"enum": [{"x": 1}, {"y": 2}]}}}, "object values"),
        (
            {
                "type": "object",
                "properties": {
                    "a": {
                        "anyOf": [
                            {"type": "object", "properties": {"x": {"type": "string"}}},
                            {"type": "object", "properties": {"y": {"type": "string"}}},
                        ]
                    }
                },
            },
            "'anyOf' has 2 object variants",
        ),
        ({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}, "only local references"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "points to nothing"),
        (Owner, "'oneOf' has 2 variants"),
    ],
)
def test_schemas_that_merges_cannot_keep_valid_are_rejected(source: Any, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        WorkingMemorySchema(source)


def test_constructs_merges_cannot_break_are_accepted_where_merges_do_not_reach() -> None:
    # Under an array the whole value is replaced, so anything goes there.
    schema = WorkingMemorySchema(
        {
            "type": "object",
            "properties": {
                "pets": {"type": "array", "items": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}},
                "code": {"type": "string", "not": {"const": ""}},
                "mood": {"enum": ["happy", "sad"]},
                "note": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"t": {"type": "string"}}}]},
            },
            "$defs": {
                "Cat": Cat.model_json_schema(),
                "Dog": Dog.model_json_schema(),
            },
        }
    )
    assert schema.patch_errors({"pets": [{"kind": "cat"}], "code": "x", "mood": "sad", "note": {"t": None}}) == []
    assert schema.patch_errors({"code": ""}) != []


def test_missing_optional_dependencies_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    with pytest.raises(MissingDriverError, match=r"workmem\[schema\]"):
        WorkingMemorySchema({"type": "object", "properties": {"a": {}}})
    with pytest.raises(MissingDriverError, match=r"workmem\[schema\]"):
        Memory("memory://", schema={"type": "object", "properties": {"a": {}}})
    monkeypatch.setitem(sys.modules, "pydantic", None)
    with pytest.raises(MissingDriverError, match=r"workmem\[schema\]"):
        WorkingMemorySchema(Person)


# -- the derived forms are closed under merge ---------------------------------------------------------

_SCHEMA = WorkingMemorySchema(Person)
_scalar = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "a", "Berlin"])


def _address() -> st.SearchStrategy[Any]:
    return _scalar | st.fixed_dictionaries({}, optional={"city": _scalar, "zip": _scalar, "other": _scalar})


_person_patch = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "name": _scalar,
            "age": _scalar,
            "home": _address(),
            "work": _address(),
            "tags": _scalar | st.dictionaries(st.sampled_from(["a", "b"]), _scalar, max_size=2),
            "visited": _scalar | st.lists(_address(), max_size=2),
            "nickname": _scalar,
        },
    ),
    lambda inner: st.fixed_dictionaries({}, optional={"parent": st.none() | inner, "name": _scalar}),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_person_patch, min_size=1, max_size=8))
def test_valid_patches_keep_a_valid_document_valid(patches: list[dict[str, Any]]) -> None:
    """Whatever order concurrent writers' valid patches land in, the document stays valid."""
    document: dict[str, Any] = {}
    for patch in patches:
        if _SCHEMA.patch_errors(patch):
            continue
        document = apply_merge_patch(document, patch)
        assert _SCHEMA.document_errors(document) == [], (patch, document)


def test_errors_the_model_reads_show_values_as_json() -> None:
    """The model wrote JSON: a refused value is shown as JSON (true, null, "3"), never as Python (True, None, '3')."""
    memory = Memory(
        "memory://",
        schema={
            "type": "object",
            "properties": {"age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
        },
    )
    cases = {
        '{"memory": {"age": true}}': "true is not of type",
        '{"memory": {"age": "3"}}': '"3" is not of type',
        '{"memory": {"tags": [null]}}': "null is not of type",
        '{"memory": {"tags": [false, "ok"]}}': "false is not of type",
    }
    for arguments, shown in cases.items():
        result = memory.call_tool(arguments, resource_id="u")
        assert result["ok"] is False and shown in result["error"], result
        assert not any(word in result["error"] for word in ("True", "False", "None", "'3'")), result
    assert memory.get_working_memory(resource_id="u") is None
