"""The ``updateWorkingMemory`` tool: its definition in the common tool-calling shapes, and its arguments.

``tool_definition`` builds the neutral shape ``{"name", "description",
"parameters"}`` (``parameters`` is a JSON Schema); :func:`to_openai_tool` and
:func:`to_anthropic_tool` convert it to what the OpenAI-compatible and Anthropic
APIs take.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Literal

from workmem.agent.schema import WorkingMemorySchema
from workmem.errors import ValidationError
from workmem.validation import MAX_DEPTH, json_type

__all__ = [
    "TOOL_NAME",
    "ToolArgumentError",
    "ToolFormat",
    "a_json_type",
    "format_tool",
    "load_model_json",
    "parse_tool_arguments",
    "to_anthropic_tool",
    "to_openai_tool",
    "tool_definition",
]

TOOL_NAME = "updateWorkingMemory"

ToolFormat = Literal["neutral", "openai", "anthropic"]

TEMPLATE_DESCRIPTION = (
    "Update the working memory. Send the WHOLE working memory as Markdown text following the template: "
    "it replaces what is stored, so anything left out is lost. Pass a string, never an object."
)
SCHEMA_DESCRIPTION = (
    "Update the working memory. Send only what changed, as a JSON object: it is merged into what is stored "
    "(objects merge key by key, recursively). Set a field to null to remove it. An array replaces the stored "
    "array whole, so send the complete list."
)


class ToolArgumentError(ValidationError):
    """The model's tool arguments were unusable; the message is written for the model to read."""


def tool_definition(schema: WorkingMemorySchema | None) -> dict[str, Any]:
    """The neutral tool definition: template mode when ``schema`` is ``None``, schema mode otherwise."""
    if schema is None:
        memory: dict[str, Any] = {
            "type": "string",
            "description": "The whole working memory as Markdown, following the template.",
        }
        defs: dict[str, Any] = {}
        description = TEMPLATE_DESCRIPTION
    else:
        memory = copy.deepcopy(schema.patch)
        memory.pop("$schema", None)
        memory.pop("$id", None)
        # $ref pointers are resolved against the root of "parameters": hoist the definitions there.
        defs = {key: memory.pop(key) for key in ("$defs", "definitions") if key in memory}
        memory["description"] = (
            "The changes to merge into the working memory: only the fields that changed; null removes a field; "
            "arrays are replaced whole."
        )
        description = SCHEMA_DESCRIPTION
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"memory": memory},
        "required": ["memory"],
        "additionalProperties": False,
        **defs,
    }
    return {"name": TOOL_NAME, "description": description, "parameters": parameters}


def to_openai_tool(definition: Mapping[str, Any]) -> dict[str, Any]:
    """``{"type": "function", "function": {...}}``, the shape of OpenAI-compatible chat APIs."""
    return {"type": "function", "function": copy.deepcopy(dict(definition))}


def to_anthropic_tool(definition: Mapping[str, Any]) -> dict[str, Any]:
    """``{"name", "description", "input_schema"}``, the shape of Anthropic's Messages API."""
    return {
        "name": definition["name"],
        "description": definition["description"],
        "input_schema": copy.deepcopy(definition["parameters"]),
    }


def format_tool(definition: dict[str, Any], format: ToolFormat) -> dict[str, Any]:
    """``definition`` in the named shape."""
    if format == "neutral":
        return definition
    if format == "openai":
        return to_openai_tool(definition)
    if format == "anthropic":
        return to_anthropic_tool(definition)
    raise ValidationError(f"format must be 'neutral', 'openai' or 'anthropic', not {format!r}")


def a_json_type(value: object) -> str:
    """``json_type(value)`` with its article, for messages: ``an object``, ``a string``, ``null``."""
    kind = json_type(value)
    return kind if kind == "null" else ("an " if kind[0] in "aeiou" else "a ") + kind


def load_model_json(text: str | bytes | bytearray, what: str, *, verb: str = "is", hint: str = "") -> object:
    """Parse JSON a model sent; what cannot be used raises :class:`ToolArgumentError` naming ``what``.

    Nesting deeper than Python's recursion limit is a :class:`ToolArgumentError`
    too, never a ``RecursionError``: the model gets a message it can act on.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ToolArgumentError(
            f"{what} {verb} nested far more than {MAX_DEPTH} levels deep; send at most {MAX_DEPTH} levels{hint}"
        ) from None
    except ValueError as exc:
        raise ToolArgumentError(f"{what} {verb} not valid JSON ({exc}){hint}") from None


def parse_tool_arguments(arguments: object) -> object:
    """The ``memory`` value from tool arguments given as a dict or a JSON string.

    Raises :class:`ToolArgumentError` (a message for the model) when the
    arguments are not a JSON object holding exactly the key ``memory``.
    """
    if isinstance(arguments, (str, bytes, bytearray)):
        arguments = load_model_json(arguments, "the arguments", verb="are", hint='; send {"memory": ...}')
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(
            f'the arguments must be a JSON object like {{"memory": ...}}, not {a_json_type(arguments)}'
        )
    if "memory" not in arguments:
        raise ToolArgumentError("the arguments have no 'memory' field; send {\"memory\": ...}")
    extra = sorted(str(key) for key in arguments if key != "memory")
    if extra:
        raise ToolArgumentError(f"unexpected argument(s) {', '.join(extra)}; send only the 'memory' field")
    return arguments["memory"]
