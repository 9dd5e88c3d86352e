"""A scripted stand-in for the model, doing with the working memory what real models do.

Real models answer the ``updateWorkingMemory`` tool from what the system
message shows them, and they do it sloppily. :class:`ScriptedModel` reads the
message exactly as :meth:`Memory.process_input` would give it to a model and
answers with tool arguments as an API returns them (a JSON string):

* :meth:`ScriptedModel.copy_back` copies the fenced data as shown, escapes and all;
* :meth:`ScriptedModel.edit` copies it with one substring replaced, as a model adding a fact does;
* :meth:`ScriptedModel.echo_template` sends the unfilled template (from the template fence) as shown;
* :meth:`ScriptedModel.send_patch` sends a schema-mode patch, optionally padded with ``null`` for every
  field it did not mean to change, and optionally with the patch as a JSON string inside the arguments;
* :func:`nested_arguments` builds arguments nested absurdly deep.

No network and no randomness: each call does one thing, so tests can drive many turns.
"""

from __future__ import annotations

import json
from typing import Any

from workmem.agent import DATA_TAG, Memory, ToolResult

__all__ = ["ScriptedModel", "fenced", "nested_arguments"]


def fenced(message: str, tag: str = DATA_TAG) -> str:
    """The text between ``<tag>`` and the first ``</tag>`` after it, exactly as shown to the model."""
    opening, closing = f"<{tag}>\n", f"\n</{tag}>"
    start = message.index(opening) + len(opening)
    return message[start : message.index(closing, start)]


def nested_arguments(depth: int, *, leaf: object = "x") -> str:
    """``{"memory": {"a": {"a": ... leaf ...}}}`` nested ``depth`` objects deep, as a JSON string."""
    return '{"memory": ' + '{"a": ' * depth + json.dumps(leaf) + "}" * depth + "}"


class ScriptedModel:
    """The model's side of one working memory (``thread_id`` / ``resource_id`` as ``Memory`` takes them)."""

    def __init__(self, memory: Memory, *, thread_id: str | None = None, resource_id: str | None = None) -> None:
        self.memory = memory
        self.address: dict[str, Any] = {"thread_id": thread_id, "resource_id": resource_id}
        self.calls: list[str] = []
        """Every argument string sent, oldest first."""

    def prompt(self) -> str:
        """The memory message, as ``process_input`` puts it in front of the model."""
        messages = self.memory.process_input([{"role": "user", "content": "hi"}], **self.address)
        system = [m for m in messages if m["role"] == "system"]
        assert len(system) == 1, system
        content = system[0]["content"]
        assert isinstance(content, str)
        return content

    def sees(self) -> str:
        """The working memory exactly as the model sees it (escaped, inside the data fence)."""
        return fenced(self.prompt())

    def call(self, arguments: str) -> ToolResult:
        """Send raw tool arguments (a JSON string)."""
        self.calls.append(arguments)
        return self.memory.call_tool(arguments, **self.address)

    def send(self, memory: object, *, as_string: bool = False) -> ToolResult:
        """Send ``{"memory": memory}``; ``as_string`` sends a JSON value as a JSON string instead, as models do."""
        value = json.dumps(memory) if as_string else memory
        return self.call(json.dumps({"memory": value}))

    def copy_back(self) -> ToolResult:
        """Send the memory back as shown: text in template mode, the shown JSON as the patch in schema mode."""
        shown = self.sees()
        if self.memory.mode == "template":
            return self.send(shown)
        return self.send(json.loads(shown))

    def edit(self, old: str, new: str) -> ToolResult:
        """Template mode: send what is shown with ``old`` replaced by ``new`` (a model recording a fact)."""
        shown = self.sees()
        assert old in shown, (old, shown)
        return self.send(shown.replace(old, new, 1))

    def echo_template(self) -> ToolResult:
        """Template mode: send the unfilled template exactly as the template fence shows it."""
        return self.send(fenced(self.prompt(), "working_memory_template"))

    def send_patch(self, patch: dict[str, Any], *, pad_with_null: bool = False, as_string: bool = False) -> ToolResult:
        """Schema mode: send ``patch``; ``pad_with_null`` adds ``null`` for every other top-level field."""
        assert self.memory.schema is not None
        if pad_with_null:
            patch = {name: None for name in self.memory.schema.top_level_properties} | patch
        return self.send(patch, as_string=as_string)
