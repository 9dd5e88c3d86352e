"""Working memory for pydantic-ai agents: one toolset carrying the update tool and the memory instructions.

Needs ``pip install 'workmem[pydantic-ai]'`` (``pydantic-ai-slim`` 2.68 or later)::

    from dataclasses import dataclass

    from pydantic_ai import Agent

    from workmem import AsyncMemory
    from workmem.integrations.pydantic_ai import WorkingMemoryToolset


    @dataclass
    class Deps:
        thread_id: str
        resource_id: str


    async with await AsyncMemory.open("file:agent.db") as memory:
        agent = Agent("openai:gpt-5", deps_type=Deps, toolsets=[WorkingMemoryToolset(memory)])
        result = await agent.run("I'm Sam from Oslo", deps=Deps(thread_id="t-1", resource_id="user-1"))

:class:`WorkingMemoryToolset` is an ordinary pydantic-ai toolset, so it goes in
``Agent(toolsets=[...])``, ``agent.run(toolsets=[...])``, or, as a capability,
``Agent(capabilities=[Toolset(WorkingMemoryToolset(memory))])``. It contributes:

* **the instructions**: its ``get_instructions``, which pydantic-ai calls before every
  model request, renders ``await memory.system_message(...)`` afresh each time, so the
  request right after the model's own update already shows the new memory. The text is
  handed over as an :class:`~pydantic_ai.messages.InstructionPart` (never a template
  string: memory text and JSON schemas are full of braces), with pydantic-ai's default
  ``on_change="rewrite"``: every request carries the memory as it is now;
* **the tool** ``updateWorkingMemory`` (none in read-only mode), with the schema of
  :meth:`~workmem.agent.AsyncMemory.tool_definition` and ``strict=False`` (OpenAI's
  strict mode, which pydantic-ai otherwise turns on for a strict-compatible schema,
  would make every field required and a partial update a full overwrite). The model's
  arguments reach :meth:`~workmem.agent.AsyncMemory.call_tool` as the model sent them:
  nothing validates them into a Pydantic model (which would fill the fields the model
  left out with ``null`` and erase them), and arguments that are not even JSON are
  passed on as the text they are. What the model got wrong comes back to it as the
  tool's result (``{"ok": False, "error": ...}``) and the run goes on.

**Where the ids come from.** By default from the run's deps (``agent.run(...,
deps=...)``): their ``thread_id`` and ``resource_id`` attributes, or those keys when
the deps are a mapping. Resource scope needs a ``resource_id`` (a ``thread_id`` given
too is checked to belong to it); thread scope needs a ``thread_id`` naming an existing
thread (create it with :meth:`~workmem.agent.AsyncMemory.create_thread`). To take them
from anywhere else, pass ``ids=``, a function of the :class:`~pydantic_ai.RunContext`
returning :class:`~workmem.integrations.MemoryIds` (or an awaitable of one), e.g.
``ids=lambda ctx: MemoryIds(ctx.deps.session.id, ctx.deps.user.id)``; or fix one with
``thread_id=`` / ``resource_id=`` (a fixed id wins over the deps' and over what ``ids=``
returns; the two may be combined). Missing ids, or ``ids=`` returning anything but
``MemoryIds``, raise :class:`~workmem.integrations.MissingIdsError` at the first model
request, saying how to pass them; a thread that belongs to another resource raises
:class:`~workmem.errors.ThreadOwnershipError`. Both end the run: they are wiring
mistakes, not the model's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from workmem.agent.aio import AsyncMemory
from workmem.agent.memory import Memory
from workmem.agent.operations import ToolResult
from workmem.agent.tool import TOOL_NAME
from workmem.errors import MissingDriverError, ValidationError
from workmem.integrations import IdsRule, MemoryIds, async_memory, change_source, named_ids

try:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import InstructionPart
    from pydantic_ai.tools import AgentDepsT, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDriverError(
        "workmem.integrations.pydantic_ai needs pydantic-ai: pip install 'workmem[pydantic-ai]'"
    ) from exc

__all__ = ["DEFAULT_TOOLSET_ID", "IdsFunc", "WorkingMemoryToolset"]

DEFAULT_TOOLSET_ID = "workmem"
"""The toolset's default :attr:`~WorkingMemoryToolset.id` (give two toolsets on one agent distinct ids)."""

SOURCE = "pydantic-ai"
"""The ``framework`` of the source a change records (see :func:`~workmem.integrations.change_source`)."""

INSTRUCTION_NAME = "working_memory"
"""The name of the instruction part (its id reads ``toolset:<toolset id>:working_memory``)."""

HOW = (
    "give the run deps with thread_id and resource_id attributes (agent.run(..., deps=...)), "
    "or pass ids=lambda ctx: MemoryIds(thread_id, resource_id) or fixed thread_id=/resource_id= "
    "to WorkingMemoryToolset"
)

IdsFunc = Callable[["RunContext[AgentDepsT]"], MemoryIds | Awaitable[MemoryIds]]
"""``ids=``: the run context to the ids of the run's working memory."""

_UNPARSED = "\x00workmem:unparsed-arguments"
"""The key under which arguments that are not a JSON object travel through pydantic-ai's validation step."""


class _RawArguments:
    """An ``args_validator`` that validates nothing: the model's arguments go to ``call_tool`` as they came.

    A JSON object comes through as its dict (exactly what ``call_tool`` would parse
    from the text); anything else (invalid JSON, a JSON array or string) comes through
    untouched under :data:`_UNPARSED`, so ``call_tool`` tells the model what was wrong
    in the tool's result, instead of pydantic-ai spending a retry on a schema error.
    """

    def validate_json(
        self,
        input: str | bytes | bytearray,
        *,
        allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        try:
            parsed = json.loads(input)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        return {_UNPARSED: input.decode("utf-8", "replace") if isinstance(input, bytes | bytearray) else input}

    def validate_python(
        self, input: Any, *, allow_partial: bool | Literal["off", "on", "trailing-strings"] = False, **kwargs: Any
    ) -> dict[str, Any]:
        if isinstance(input, Mapping):
            return dict(input)
        if isinstance(input, str | bytes | bytearray):
            return self.validate_json(input)
        return {_UNPARSED: input}


_RAW_ARGUMENTS = _RawArguments()


class WorkingMemoryToolset(AbstractToolset[AgentDepsT]):
    """A pydantic-ai toolset giving an agent working memory: the instructions showing it, and the tool updating it.

    ``memory`` is an :class:`~workmem.agent.AsyncMemory` or a sync :class:`~workmem.agent.Memory`
    (run on worker threads; any backend, any mode and scope; read-only offers no tool and
    shows the memory as context). ``ids``
    overrides where the thread and resource ids come from (default: the run's deps,
    see the module docstring); a fixed ``thread_id`` / ``resource_id`` wins over
    either. ``id`` is the toolset's id (needed to tell two of these apart on one
    agent, and by durable execution).
    """

    def __init__(
        self,
        memory: AsyncMemory | Memory,
        *,
        ids: IdsFunc[AgentDepsT] | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        id: str = DEFAULT_TOOLSET_ID,
    ) -> None:
        memory = async_memory(memory, "WorkingMemoryToolset")
        self._ids: IdsRule[RunContext[AgentDepsT]] = IdsRule(
            "pydantic-ai", HOW, _ids_in_deps, "the RunContext", ids, thread_id, resource_id
        )
        if not isinstance(id, str) or not id:
            raise ValidationError(f"id must be a non-empty string, not {id!r}")
        self.memory = memory
        """The working memory this toolset shows and updates (a sync ``Memory`` given: one on its storage)."""
        self._id = id

    @property
    def id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"WorkingMemoryToolset({self.memory!r}, id={self._id!r})"

    async def memory_ids(self, ctx: RunContext[AgentDepsT]) -> MemoryIds:
        """The ids of this run's working memory; :class:`MissingIdsError` saying how to pass them."""
        return await self._ids.resolve(ctx, self.memory.scope)

    async def get_instructions(self, ctx: RunContext[AgentDepsT]) -> InstructionPart:
        """The memory system message as it is now (pydantic-ai asks before every model request)."""
        found = await self.memory_ids(ctx)
        text = await self.memory.system_message(thread_id=found.thread_id, resource_id=found.resource_id)
        return InstructionPart(content=text, dynamic=True, name=INSTRUCTION_NAME)

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """``updateWorkingMemory``, non-strict, its arguments unvalidated; nothing in read-only mode."""
        definition = self.memory.tool_definition()
        if definition is None:
            return {}
        tool_def = ToolDefinition(
            name=definition["name"],
            description=definition["description"],
            parameters_json_schema=definition["parameters"],
            strict=False,
        )
        return {TOOL_NAME: ToolsetTool(toolset=self, tool_def=tool_def, max_retries=1, args_validator=_RAW_ARGUMENTS)}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> ToolResult:
        """Run the model's update through :meth:`AsyncMemory.call_tool`; its result dict goes back to the model.

        With history on, the version records the source ``{"framework": "pydantic-ai",
        "agent": <the agent's name>, "toolCallId": <the call's id>, "tool", "threadId"}``.
        """
        found = await self.memory_ids(ctx)
        arguments = tool_args[_UNPARSED] if set(tool_args) == {_UNPARSED} else tool_args
        source = change_source(SOURCE, agent=getattr(ctx.agent, "name", None), tool_call_id=ctx.tool_call_id)
        return await self.memory.call_tool(
            arguments, thread_id=found.thread_id, resource_id=found.resource_id, source=source
        )


def _ids_in_deps(ctx: RunContext[Any]) -> tuple[object, object]:
    """The default: the deps' ``thread_id`` and ``resource_id`` (attributes, or keys of a mapping)."""
    return named_ids(ctx.deps)
