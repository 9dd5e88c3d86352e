"""Working memory in LangGraph: the ``updateWorkingMemory`` tool and a prompt that shows the memory.

Install with ``pip install 'workmem[langgraph]'``. :class:`LangGraphMemory` wraps an
:class:`~workmem.agent.AsyncMemory` and gives a graph two things:

* :attr:`LangGraphMemory.tools`: the update tool as a LangChain tool (``[]`` in
  read-only mode), for ``model.bind_tools(...)`` and a ``ToolNode``. Its arguments
  schema is the raw JSON Schema of :meth:`~workmem.agent.AsyncMemory.tool_definition`
  (not a Pydantic model, which would fill the fields a partial update leaves out
  with ``null`` and erase them; no ``strict`` flag, which would make every field
  required), and the model's arguments reach :meth:`~workmem.agent.AsyncMemory.call_tool`
  exactly as sent. What the model got wrong comes back to it as an error tool
  message (``status="error"``) and the run goes on. With history on, the version
  records the source ``{"framework": "langgraph", "toolCallId": <the ToolCall's id>,
  "agent": <the metadata's lc_agent_name, when set>, "tool", "threadId"}``.
* :meth:`LangGraphMemory.prompt`: the messages for one model request with the memory
  system message inserted after the leading system messages, rendered from storage on
  every call, so the model request right after the tool result already shows the
  updated memory. The memory message is never stored in the graph state and is built
  as a plain ``SystemMessage`` (never a ``ChatPromptTemplate``: memory text and JSON
  schemas are full of braces).

A hand-built graph (``StateGraph`` + ``ToolNode``, what LangGraph 1.x recommends now
that ``create_react_agent`` is deprecated)::

    memory = LangGraphMemory(await AsyncMemory.open("file:agent.db"))
    model = chat_model.bind_tools(memory.tools)

    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(await memory.prompt(state, config), config)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(memory.tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile()
    config = {"configurable": {"thread_id": "chat-1", "resource_id": "user-1"}}
    await app.ainvoke({"messages": [("user", "hi")]}, config)

``create_react_agent(model, memory.tools, prompt=memory.prompt_runnable)`` works too, while it
lasts (``prompt=memory.prompt`` runs the same; the runnable form also satisfies its type).

**Where the ids come from.** The run config: ``config["configurable"]["thread_id"]``
(the key LangGraph's checkpointers use) and ``config["configurable"]["resource_id"]``,
or ``["user_id"]`` when there is no ``resource_id``. Take them from elsewhere with
``ids=``, a callable taking the ``RunnableConfig`` and returning a
:class:`~workmem.integrations.MemoryIds` or an awaitable of one (inside it,
``langgraph.runtime.get_runtime()`` gives the run's ``context``), or fix them
(``LangGraphMemory(memory, resource_id="user-1")``): a fixed id wins over its config
key and over what ``ids=`` returns (the two may be combined). Resource scope needs a
resource id, thread scope a thread id (a thread created with ``create_thread``
beforehand); missing ids, or ``ids=`` returning anything but ``MemoryIds``, raise
:class:`~workmem.integrations.MissingIdsError` at once, as do the other wiring
mistakes (a thread of another owner: :class:`~workmem.ThreadOwnershipError`): they
are never turned into tool messages, unless a ``ToolNode(handle_tool_errors=True)``
catches everything.

The tool and the prompt are coroutines: run the graph with ``ainvoke``/``astream``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from workmem.agent import MEMORY_MESSAGE_NAME, TOOL_NAME, is_memory_message
from workmem.errors import MissingDriverError, ValidationError
from workmem.integrations import Framework, MemoryIds, MemoryIntegration

try:
    from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages
    from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
    from langchain_core.tools import BaseTool, ToolException
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise MissingDriverError(
        f"workmem.integrations.langgraph needs LangGraph and LangChain core ({exc}): pip install 'workmem[langgraph]'"
    ) from exc

__all__ = ["HOW_TO_PASS_IDS", "LangGraphMemory", "MemoryIds", "WorkingMemoryTool"]

IdsFromConfig = Callable[[RunnableConfig], MemoryIds | Awaitable[MemoryIds]]
"""Finds a run's ids in its ``RunnableConfig``."""

HOW_TO_PASS_IDS = (
    'pass them in the run config, e.g. app.ainvoke(input, {"configurable": {"thread_id": "...", '
    '"resource_id": "..."}}) ("user_id" is read when there is no "resource_id"), or give them to '
    "LangGraphMemory(memory, thread_id=..., resource_id=...) or LangGraphMemory(memory, ids=...)"
)
"""The hint a :class:`~workmem.integrations.MissingIdsError` carries."""

_FRAMEWORK = "LangGraph"
SOURCE = "langgraph"
"""The ``framework`` of the source a change records (see :func:`~workmem.integrations.change_source`)."""

_TOOL_CALL_ID: ContextVar[str | None] = ContextVar("workmem_langgraph_tool_call_id", default=None)
"""The id of the tool call being run: LangChain hands it to ``ainvoke`` (a ``ToolCall``), not to ``_arun``."""


class LangGraphMemory(MemoryIntegration[RunnableConfig, "WorkingMemoryTool"]):
    """An :class:`~workmem.agent.AsyncMemory` (or a sync ``Memory``, run on worker threads) wired into LangGraph.

    It gives :attr:`tools` and :meth:`prompt`.

    ``ids`` finds the ids in the run's ``RunnableConfig``; without it they come from
    ``config["configurable"]`` (see the module docstring). ``thread_id`` /
    ``resource_id`` fix an id for every run, winning over either.
    """

    framework = Framework(_FRAMEWORK, HOW_TO_PASS_IDS, "the RunnableConfig", SOURCE)

    def found_ids(self, context: RunnableConfig) -> tuple[object, object]:
        """The default: ``configurable["thread_id"]``, and ``["resource_id"]`` or else ``["user_id"]``."""
        configurable = context.get("configurable") or {}
        resource_id = configurable.get("resource_id")
        return configurable.get("thread_id"), configurable.get("user_id") if resource_id is None else resource_id

    def make_tool(self) -> WorkingMemoryTool:
        return WorkingMemoryTool(self)

    @property
    def tools(self) -> list[BaseTool]:
        """The tools to bind to the model and give to the ``ToolNode``: the update tool, none in read-only mode."""
        return [] if self.tool is None else [self.tool]

    async def ids(self, context: RunnableConfig | None) -> MemoryIds:
        """The ids of the run with this config, checked for the memory's scope (see the module docstring)."""
        return await super().ids(context or {})

    @property
    def prompt_runnable(self) -> Runnable[Any, list[BaseMessage]]:
        """:meth:`prompt` as a LangChain ``Runnable`` (async only): ``create_react_agent(..., prompt=...)`` types it.

        ``create_react_agent(..., prompt=memory.prompt)`` runs just as well; this form also
        satisfies the type of that parameter, and composes in LCEL (``memory.prompt_runnable | model``).
        """
        return RunnableLambda(self.prompt, name="workmem_prompt")

    async def system_message(self, config: RunnableConfig) -> SystemMessage:
        """The memory system message for one model request, rendered from the memory as stored now."""
        return SystemMessage(content=await self.memory_message(config), name=MEMORY_MESSAGE_NAME)

    async def prompt(self, state: Any, config: RunnableConfig) -> list[BaseMessage]:
        """The messages to send to the model: ``state``'s with the memory message after the leading system messages.

        ``state`` is the graph state (a mapping or an object with ``messages``) or the
        message list itself. A memory message already in it is dropped, so one never
        stacks. Use it as ``create_react_agent(..., prompt=memory.prompt)`` or call it
        in your own model node, once per model request.
        """
        if isinstance(state, Mapping):
            raw = state.get("messages")
        elif isinstance(state, Sequence) and not isinstance(state, str | bytes):
            raw = state
        else:
            raw = getattr(state, "messages", None)
        if raw is None:
            raise ValidationError(
                f"prompt(state, config) needs the graph state with 'messages', or a message list, "
                f"not {type(state).__name__}"
            )
        messages = [m for m in convert_to_messages(raw) if not _is_memory_message(m)]
        position = 0
        while position < len(messages) and isinstance(messages[position], SystemMessage):
            position += 1
        memory_message = await self.system_message(config)
        return [*messages[:position], memory_message, *messages[position:]]


class WorkingMemoryTool(BaseTool):
    """The ``updateWorkingMemory`` tool of a :class:`LangGraphMemory`: raw JSON Schema in, raw arguments out."""

    integration: LangGraphMemory
    """Where the memory and the id rules are."""

    def __init__(self, integration: LangGraphMemory) -> None:
        definition = integration.memory.tool_definition()
        assert definition is not None  # not read-only
        super().__init__(
            integration=integration,
            name=definition["name"],
            description=definition["description"],
            args_schema=definition["parameters"],  # a dict: passed through, never validated into a model
            handle_tool_error=True,  # the model's mistakes (a ToolException) go back to it
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{TOOL_NAME} (workmem.integrations.langgraph) runs on AsyncMemory: run the graph with ainvoke or astream"
        )

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run a call as ``BaseTool.ainvoke`` does, keeping its id (a ``ToolCall``'s ``"id"``) for the source."""
        call_id = input.get("id") if isinstance(input, Mapping) and input.get("type") == "tool_call" else None
        token = _TOOL_CALL_ID.set(call_id if isinstance(call_id, str) else None)
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    async def _arun(self, *args: Any, config: RunnableConfig, **arguments: Any) -> str:
        # The agent's name: what langchain's create_agent(name=...) puts in the run's metadata.
        agent = (config.get("metadata") or {}).get("lc_agent_name")
        result = await self.integration.update(arguments, config, agent=agent, tool_call_id=_TOOL_CALL_ID.get())
        text = json.dumps(result, ensure_ascii=False)
        if not result.get("ok"):
            raise ToolException(text)  # handled by BaseTool: the content of a status="error" ToolMessage
        return text


def _is_memory_message(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage) and is_memory_message(
        {"role": "system", "content": message.content, "name": message.name}
    )
