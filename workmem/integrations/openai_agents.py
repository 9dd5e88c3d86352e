"""Working memory in the OpenAI Agents SDK (``pip install 'workmem[openai-agents]'``).

:class:`WorkingMemory` gives an ``agents.Agent`` the memory on an
:class:`~workmem.agent.AsyncMemory`::

    from agents import Agent, Runner

    from workmem import AsyncMemory
    from workmem.integrations import MemoryIds
    from workmem.integrations.openai_agents import WorkingMemory

    async with await AsyncMemory.open("file:agent.db") as memory:
        agent = WorkingMemory(memory).attach(Agent(name="assistant", instructions="Be brief."))
        ids = MemoryIds(thread_id="t-1", resource_id="user-1")
        result = await Runner.run(agent, "I'm Sam from Oslo", context=ids)

What it plugs in, and why:

* **the tool** is a ``FunctionTool`` named ``updateWorkingMemory`` with
  ``strict_json_schema=False`` (strict mode makes every field required, turning a
  schema-mode partial update into a full overwrite) whose ``on_invoke_tool``
  hands the model's raw JSON arguments string to :meth:`AsyncMemory.call_tool
  <workmem.agent.AsyncMemory.call_tool>` (nothing is validated into a model and
  dumped back, which would fill in the fields the model left out). The result
  dict goes back to the model as JSON, mistakes included (``{"ok": false,
  "error": ...}``), so it can retry. Read-only mode offers no tool. With history
  on, the version records the source ``{"framework": "openai-agents", "agent":
  <the agent's name>, "toolCallId": <the call's id>, "tool", "threadId"}``.
* **the instructions** are an async callable (``Agent.instructions`` takes one):
  the agent's own instructions, then :meth:`AsyncMemory.system_message
  <workmem.agent.AsyncMemory.system_message>`. The SDK calls it before every
  model request, so the model sees the memory as stored at that moment, also
  right after its own update in the same run. It is never a template string:
  memory and JSON schemas contain braces.

Where the ids come from: the run context, the object passed as
``Runner.run(agent, input, context=...)``: its ``thread_id`` and ``resource_id``
attributes, or keys when it is a mapping (a :class:`~workmem.integrations.MemoryIds`,
a dataclass of your own, or a dict all work). To override, pass ``ids=``, a
callable taking that context object and returning a
:class:`~workmem.integrations.MemoryIds` (or an awaitable of one), or fix ids with
``WorkingMemory(memory, thread_id=..., resource_id=...)``: a fixed id wins over
the context's and over what ``ids=`` returns (the two may be combined). Resource
scope (the default) needs a ``resource_id`` or a ``thread_id`` of an existing
thread to take its owner from; thread scope needs a ``thread_id`` (and checks a
given ``resource_id`` as its owner).

Wiring mistakes raise at once: missing ids (or ``ids=`` returning anything but
``MemoryIds``) raise :class:`~workmem.integrations.MissingIdsError` saying how to pass them, a
``resource_id`` that does not own the thread raises
:class:`~workmem.errors.ThreadOwnershipError`. The instructions run first on
every turn, so these come out of ``Runner.run`` as they are; a tool used without
:meth:`WorkingMemory.instructions` has them wrapped by the SDK in
``agents.exceptions.UserError`` (the original as ``__cause__``).

Every agent the run reaches needs the memory attached: a handoff target or an
agent used as a tool is a different ``Agent``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

from workmem.agent.tool import TOOL_NAME
from workmem.errors import MissingDriverError, ValidationError
from workmem.integrations import Framework, MemoryIds, MemoryIntegration, named_ids

try:
    from agents import Agent, FunctionTool, RunContextWrapper, Tool
    from agents.tool_context import ToolContext
except ImportError as exc:  # the optional extra
    raise MissingDriverError(
        f"the OpenAI Agents SDK ('agents') is not installed ({exc}): pip install 'workmem[openai-agents]'"
    ) from exc

__all__ = ["FRAMEWORK", "HOW_TO_PASS_IDS", "IdsFromContext", "Instructions", "WorkingMemory"]

FRAMEWORK = "OpenAI Agents SDK"
SOURCE = "openai-agents"
"""The ``framework`` of the source a change records (see :func:`~workmem.integrations.change_source`)."""

HOW_TO_PASS_IDS = (
    "pass them as the run context, Runner.run(agent, input, context=MemoryIds(thread_id=..., resource_id=...)) "
    "(any object with thread_id/resource_id attributes, or a dict with those keys), "
    "or give WorkingMemory(memory, thread_id=..., resource_id=...) or ids=lambda context: MemoryIds(...)"
)

IdsFromContext = Callable[[Any], MemoryIds | Awaitable[MemoryIds]]
"""``ids=``: the run context object (what ``Runner.run(context=...)`` got, or ``None``) to the run's ids."""

BaseInstructions = str | Callable[[RunContextWrapper[Any], Agent[Any]], Any] | None
"""The agent's own instructions: text, a (sync or async) callable as ``Agent.instructions`` takes, or none."""


class WorkingMemory(MemoryIntegration[Any, FunctionTool]):
    """The working memory of an :class:`~workmem.agent.AsyncMemory` (or a sync ``Memory``, run on worker threads),
    as an Agents SDK tool and instructions.

    ``ids`` computes the ids from the run context; without it they are read from
    the run context's fields (see the module docstring). ``thread_id`` /
    ``resource_id`` fix an id for every run, winning over either.
    """

    framework = Framework(FRAMEWORK, HOW_TO_PASS_IDS, "the run context", SOURCE)

    def found_ids(self, context: object) -> tuple[object, object]:
        """The default: the run context's ``thread_id`` and ``resource_id`` (attributes, or keys of a mapping)."""
        return named_ids(context)

    @property
    def tools(self) -> list[Tool]:
        """``[tool]``, or ``[]`` in read-only mode: what to add to ``Agent(tools=...)``."""
        return [] if self.tool is None else [self.tool]

    def instructions(self, base: BaseInstructions = None) -> Instructions:
        """``Agent.instructions`` for an agent with this memory: ``base`` (its own), then the memory message."""
        return Instructions(self, base)

    def attach(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of ``agent`` with the memory: its instructions followed by the memory message, plus the tool.

        ``agent`` itself is not changed. Attaching to an agent that already has
        the memory raises :class:`~workmem.errors.ValidationError`.
        """
        if isinstance(agent.instructions, Instructions) or any(
            getattr(tool, "name", None) == TOOL_NAME for tool in agent.tools
        ):
            raise ValidationError(f"agent {agent.name!r} already has working memory attached")
        return agent.clone(instructions=self.instructions(agent.instructions), tools=[*agent.tools, *self.tools])

    async def ids_of(self, context: object) -> MemoryIds:
        """The ids of a run with this context object, checked for the memory's scope: :meth:`ids` by its first name."""
        return await self.ids(context)

    async def system_message(self, context: object) -> str:
        """The memory message for a run with this context object, read now."""
        return await self.memory_message(context)

    def make_tool(self) -> FunctionTool:
        definition = self.memory.tool_definition()
        assert definition is not None  # not read-only

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            agent = getattr(context.agent, "name", None)  # the agent whose model made the call, when the SDK says
            # The raw JSON string, exactly as the model sent it: call_tool parses and checks it.
            result = await self.update(arguments, context.context, agent=agent, tool_call_id=context.tool_call_id)
            return json.dumps(result, ensure_ascii=False)

        return FunctionTool(
            name=definition["name"],
            description=definition["description"],
            params_json_schema=definition["parameters"],
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )


class Instructions:
    """An ``Agent.instructions`` callable: the agent's own instructions, then the memory message as stored now."""

    def __init__(self, working_memory: WorkingMemory, base: BaseInstructions = None) -> None:
        if base is not None and not isinstance(base, str) and not callable(base):
            raise ValidationError(f"base instructions must be a string, a callable or None, not {type(base).__name__}")
        self.working_memory = working_memory
        self.base = base
        """The agent's own instructions."""

    async def __call__(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        memory_message = await self.working_memory.system_message(context.context)
        own = self.base(context, agent) if callable(self.base) else self.base
        if inspect.isawaitable(own):
            own = await own
        if own is not None and not isinstance(own, str):
            raise ValidationError(f"the agent's instructions must give a string, not {type(own).__name__}")
        return f"{own}\n\n{memory_message}" if own else memory_message
