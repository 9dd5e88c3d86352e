"""A scripted stand-in for the model, doing with the working memory what real models do.

Real models answer the ``updateWorkingMemory`` tool from what the system
message shows them, and they do it sloppily. The habits are plain functions of
the memory message a model is shown, returning tool arguments as an API returns
them (a JSON string), so sync and async tests share them:

* :func:`copy_back_arguments` copies the fenced data as shown, escapes and all;
* :func:`edit_arguments` copies it with one substring replaced, as a model adding a fact does;
* :func:`template_arguments` sends the unfilled template (from the template fence) as shown;
* :func:`patch_arguments` sends a schema-mode patch, optionally padded with ``null`` for every
  field it did not mean to change, and optionally with the patch as a JSON string inside the arguments;
* :func:`nested_arguments` builds arguments nested absurdly deep.

:class:`ScriptedModel` plays them against a :class:`Memory`: it reads the message
exactly as :meth:`Memory.process_input` would give it to a model and sends the
arguments to :meth:`Memory.call_tool`. An async test does the same with
``await AsyncMemory.process_input`` / ``call_tool`` and :func:`memory_message`.

No network and no randomness: each call does one thing, so tests can drive many turns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from workmem.agent import DATA_TAG, Memory, ToolResult, WorkingMemorySchema

__all__ = [
    "ScriptedModel",
    "copy_back_arguments",
    "edit_arguments",
    "fenced",
    "memory_arguments",
    "memory_message",
    "nested_arguments",
    "patch_arguments",
    "template_arguments",
]

USER_TURN = [{"role": "user", "content": "hi"}]
"""The message list the model's prompt is built from."""


def fenced(message: str, tag: str = DATA_TAG) -> str:
    """The text between ``<tag>`` and the first ``</tag>`` after it, exactly as shown to the model."""
    opening, closing = f"<{tag}>\n", f"\n</{tag}>"
    start = message.index(opening) + len(opening)
    return message[start : message.index(closing, start)]


def nested_arguments(depth: int, *, leaf: object = "x") -> str:
    """``{"memory": {"a": {"a": ... leaf ...}}}`` nested ``depth`` objects deep, as a JSON string."""
    return '{"memory": ' + '{"a": ' * depth + json.dumps(leaf) + "}" * depth + "}"


def memory_message(messages: Sequence[Mapping[str, Any]]) -> str:
    """The content of the one system message in ``messages`` (what ``process_input`` of :data:`USER_TURN` gives)."""
    system = [m for m in messages if m["role"] == "system"]
    assert len(system) == 1, system
    content = system[0]["content"]
    assert isinstance(content, str)
    return content


def memory_arguments(memory: object, *, as_string: bool = False) -> str:
    """``{"memory": memory}``; ``as_string`` sends a JSON value as a JSON string instead, as models do."""
    value = json.dumps(memory) if as_string else memory
    return json.dumps({"memory": value})


def copy_back_arguments(prompt: str, mode: str) -> str:
    """The memory sent back as shown: text in template mode, the shown JSON as the patch in schema mode."""
    shown = fenced(prompt)
    return memory_arguments(shown if mode == "template" else json.loads(shown))


def edit_arguments(prompt: str, old: str, new: str) -> str:
    """Template mode: what is shown with ``old`` replaced by ``new`` (a model recording a fact)."""
    shown = fenced(prompt)
    assert old in shown, (old, shown)
    return memory_arguments(shown.replace(old, new, 1))


def template_arguments(prompt: str) -> str:
    """Template mode: the unfilled template exactly as the template fence shows it."""
    return memory_arguments(fenced(prompt, "working_memory_template"))


def patch_arguments(
    patch: dict[str, Any], schema: WorkingMemorySchema, *, pad_with_null: bool = False, as_string: bool = False
) -> str:
    """Schema mode: ``patch``; ``pad_with_null`` adds ``null`` for every other top-level field."""
    if pad_with_null:
        patch = {name: None for name in schema.top_level_properties} | patch
    return memory_arguments(patch, as_string=as_string)


class ScriptedModel:
    """The model's side of one working memory (``thread_id`` / ``resource_id`` as ``Memory`` takes them)."""

    def __init__(self, memory: Memory, *, thread_id: str | None = None, resource_id: str | None = None) -> None:
        self.memory = memory
        self.address: dict[str, Any] = {"thread_id": thread_id, "resource_id": resource_id}
        self.calls: list[str] = []
        """Every argument string sent, oldest first."""

    def prompt(self) -> str:
        """The memory message, as ``process_input`` puts it in front of the model."""
        return memory_message(self.memory.process_input(USER_TURN, **self.address))

    def sees(self) -> str:
        """The working memory exactly as the model sees it (escaped, inside the data fence)."""
        return fenced(self.prompt())

    def call(self, arguments: str) -> ToolResult:
        """Send raw tool arguments (a JSON string)."""
        self.calls.append(arguments)
        return self.memory.call_tool(arguments, **self.address)

    def send(self, memory: object, *, as_string: bool = False) -> ToolResult:
        """Send ``{"memory": memory}``; ``as_string`` sends a JSON value as a JSON string instead, as models do."""
        return self.call(memory_arguments(memory, as_string=as_string))

    def copy_back(self) -> ToolResult:
        """Send the memory back as shown: text in template mode, the shown JSON as the patch in schema mode."""
        return self.call(copy_back_arguments(self.prompt(), self.memory.mode))

    def edit(self, old: str, new: str) -> ToolResult:
        """Template mode: send what is shown with ``old`` replaced by ``new`` (a model recording a fact)."""
        return self.call(edit_arguments(self.prompt(), old, new))

    def echo_template(self) -> ToolResult:
        """Template mode: send the unfilled template exactly as the template fence shows it."""
        return self.call(template_arguments(self.prompt()))

    def send_patch(self, patch: dict[str, Any], *, pad_with_null: bool = False, as_string: bool = False) -> ToolResult:
        """Schema mode: send ``patch``; ``pad_with_null`` adds ``null`` for every other top-level field."""
        assert self.memory.schema is not None
        return self.call(patch_arguments(patch, self.memory.schema, pad_with_null=pad_with_null, as_string=as_string))
