"""Working memory for Google ADK agents: one toolset that offers the update tool and shows the memory.

Add a :class:`WorkingMemoryToolset` to an agent's ``tools``; keep your own ``instruction``::

    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner

    from workmem import AsyncMemory
    from workmem.integrations.adk import WorkingMemoryToolset

    memory = await AsyncMemory.open("file:agent.db")
    agent = LlmAgent(
        name="assistant",
        model="gemini-2.5-flash",
        instruction="You are a helpful assistant.",
        tools=[WorkingMemoryToolset(memory)],
    )
    runner = InMemoryRunner(agent=agent)
    # runner.run_async(user_id="user-1", session_id=session.id, new_message=...)

How it plugs in (``google-adk`` 2.x):

* **The memory, on every model request.** ADK calls a toolset's
  ``process_llm_request`` each time it builds a request for the model (every step
  of a run, so also right after the model's own update). The toolset renders
  ``await memory.system_message(...)`` there and appends it to the request's
  system instruction. It never goes through ADK's ``instruction`` string, which
  ADK treats as a template (``{name}`` in the memory or in the JSON Schema would
  raise), and it leaves the agent's own instruction alone.
* **The update tool** (:class:`UpdateWorkingMemoryTool`) is a ``BaseTool`` with a
  hand-written ``FunctionDeclaration`` whose ``parameters_json_schema`` is the
  memory's own schema, not a typed ``FunctionTool``: ADK hands it the model's raw
  arguments, which go to :meth:`AsyncMemory.call_tool` as they are (a partial
  schema-mode update stays partial; nothing is validated into a model class and
  dumped back with nulls). What the model got wrong comes back to it as the
  tool's result (``{"ok": False, "error": ...}``) and the run goes on.
* **Read-only** memory offers no tool; the memory is still shown, as context.

Where the ids come from: ``resource_id`` is the session's ``user_id`` and
``thread_id`` is the session's id (what ``runner.run_async(user_id=...,
session_id=...)`` is given). To take them from elsewhere (session state, a
tenant), pass ``ids=``, a function of ADK's ``ReadonlyContext`` (the
``ToolContext`` is one) returning :class:`~workmem.integrations.MemoryIds`, or
an awaitable of one; or fix one with ``thread_id=`` / ``resource_id=`` (a fixed
id wins over the session's and over what ``ids=`` returns; the two may be
combined). Missing or empty ids, or ``ids=`` returning anything but
``MemoryIds``, raise :class:`~workmem.integrations.MissingIdsError` at the first
model request, and a
session id naming a thread of another user raises ``ThreadOwnershipError``:
both are wiring mistakes, not the model's.

In thread scope the memory lives on a workmem thread with the session's id; the
toolset creates that thread (owned by the ``resource_id``) the first time a
session needs it, unless the memory is read-only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from workmem.agent.operations import ToolResult
from workmem.errors import MissingDriverError, ThreadExistsError, ThreadNotFoundError, ValidationError
from workmem.integrations import Framework, MemoryIds, MemoryIntegration

try:
    from google.adk.agents.readonly_context import ReadonlyContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.base_toolset import BaseToolset
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDriverError(f"Google ADK is not installed ({exc}): pip install 'workmem[adk]'") from exc

_T = TypeVar("_T")

__all__ = ["IdsFunction", "UpdateWorkingMemoryTool", "WorkingMemoryToolset", "session_ids"]

IdsFunction = Callable[[ReadonlyContext], MemoryIds | Awaitable[MemoryIds]]
"""Where a run's ids come from: ADK's context in, :class:`~workmem.integrations.MemoryIds` (or an awaitable) out."""

_FRAMEWORK = "Google ADK"
SOURCE = "adk"
"""The ``framework`` of the source a change records (see :func:`~workmem.integrations.change_source`)."""
_HOW = (
    "ADK takes resource_id from the session's user_id and thread_id from the session id "
    "(runner.run_async(user_id=..., session_id=...)); to take them from elsewhere pass "
    "WorkingMemoryToolset(memory, ids=lambda context: MemoryIds(thread_id=..., resource_id=...)), "
    "or fix them with WorkingMemoryToolset(memory, thread_id=..., resource_id=...)"
)


def session_ids(context: ReadonlyContext) -> MemoryIds:
    """The default ids: ``thread_id`` = the session's id, ``resource_id`` = the session's ``user_id``."""
    return MemoryIds(*_session_fields(context))


def _session_fields(context: ReadonlyContext) -> tuple[str, str]:
    return context.session.id, context.user_id


class WorkingMemoryToolset(MemoryIntegration[ReadonlyContext, "UpdateWorkingMemoryTool"], BaseToolset):
    """Working memory for an ADK agent: the update tool, and the memory shown on every model request.

    ``memory`` is an :class:`~workmem.agent.AsyncMemory`, or a sync
    :class:`~workmem.agent.Memory` run on worker threads (the caller keeps owning
    it: closing the toolset leaves it open). ``ids`` overrides where the thread
    and resource ids come from (default: :func:`session_ids`); a fixed
    ``thread_id`` or ``resource_id`` wins over either.
    """

    framework = Framework(_FRAMEWORK, _HOW, "ADK's ReadonlyContext", SOURCE)

    def found_ids(self, context: ReadonlyContext) -> tuple[object, object]:
        """The default, :func:`session_ids`: the session's id and its ``user_id``."""
        return _session_fields(context)

    def make_tool(self) -> UpdateWorkingMemoryTool:
        return UpdateWorkingMemoryTool(self)

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        """The update tool, or nothing when the memory is read-only."""
        return [] if self.tool is None else [self.tool]

    async def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> None:
        """Append the memory, as stored now, to the system instruction of this model request."""
        llm_request.append_instructions([await self.memory_message(tool_context)])

    async def call_tool(self, arguments: dict[str, Any], context: ReadonlyContext) -> ToolResult:
        """Run the model's update with its raw ``arguments``; the result goes back to the model.

        With history on, the version records the source ``{"framework": "adk", "agent":
        <the agent's name>, "toolCallId": <the function call's id>, "tool", "threadId"}``.
        """
        call_id = getattr(context, "function_call_id", None)  # a ToolContext's; a plain ReadonlyContext has none
        return await self.update(arguments, context, agent=context.agent_name, tool_call_id=call_id)

    async def _run(self, ids: MemoryIds, operation: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``operation``; in thread scope, create the session's missing thread first and run it again."""
        try:
            return await operation()
        except ThreadNotFoundError:
            if self.memory.scope != "thread" or self.memory.read_only or ids.resource_id is None:
                raise
        assert ids.thread_id is not None  # thread scope: memory_ids checked it
        with contextlib.suppress(
            ThreadExistsError
        ):  # created meanwhile by a concurrent request: the retry checks the owner
            await self.memory.create_thread(ids.thread_id, resource_id=ids.resource_id)
        return await operation()


class UpdateWorkingMemoryTool(BaseTool):
    """The ``updateWorkingMemory`` tool of a :class:`WorkingMemoryToolset`, declared with the memory's own schema."""

    def __init__(self, toolset: WorkingMemoryToolset) -> None:
        definition = toolset.memory.tool_definition()
        if definition is None:
            raise ValidationError("a read-only memory offers no update tool")
        super().__init__(name=definition["name"], description=definition["description"])
        self._toolset = toolset
        self._parameters: dict[str, Any] = definition["parameters"]

    def _get_declaration(self) -> types.FunctionDeclaration:
        # The JSON Schema as it is (not types.Schema, not derived from a typed function): non-strict,
        # every field optional as the memory defines it, and the arguments arrive raw.
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self._parameters
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> ToolResult:
        return await self._toolset.call_tool(args, tool_context)
