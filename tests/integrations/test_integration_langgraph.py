"""workmem.integrations.langgraph end to end: the real LangGraph with a scripted chat model, no network.

Each end-to-end test runs two turns: in the first the scripted model calls ``updateWorkingMemory``;
in the second the test looks at the exact messages the model received. Both ways to build the agent
run: a hand-built ``StateGraph`` + ``ToolNode`` and the (deprecated) ``create_react_agent``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from langgraph.runtime import get_runtime
from langgraph.warnings import LangGraphDeprecatedSinceV10
from pydantic import BaseModel, Field
from scripted_model import edit_arguments, fenced

from workmem import ThreadOwnershipError, ValidationError
from workmem.agent import MEMORY_MESSAGE_NAME, TOOL_NAME, AsyncMemory, Memory
from workmem.integrations import MemoryIds, MissingIdsError
from workmem.integrations.langgraph import LangGraphMemory

# LangSmith tracing is off unless these say otherwise (read when a run starts): keep the tests offline.
os.environ["LANGSMITH_TRACING"] = os.environ["LANGCHAIN_TRACING_V2"] = "false"

TEMPLATE = "# User\n- **Name**:\n- **City**:\n"
FILLED = "# User\n- **Name**: Sam {name} {{braces}}\n- **City**: Berlin\n"  # braces: no template engine may touch it
USER, OTHER = "user-1", "user-2"


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None
    diet: str | None = None


# -- the scripted model ----------------------------------------------------------------------------

Step = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Answers each request with the next step of its script; records every request and the tools offered."""

    script: list[Step]
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    offered: list[list[dict[str, Any]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        self.offered.append(list(kwargs.get("tools", [])))
        assert self.script, "the model was asked more often than scripted"
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0)(list(messages)))])


_calls = iter(range(10**6))


def update(arguments: dict[str, Any]) -> Step:
    """A step calling updateWorkingMemory with exactly these arguments."""
    call_id = f"call-{next(_calls)}"
    return lambda messages: AIMessage(
        content="", tool_calls=[{"name": TOOL_NAME, "args": arguments, "id": call_id, "type": "tool_call"}]
    )


def say(text: str) -> Step:
    return lambda messages: AIMessage(content=text)


def memory_message(request: Sequence[BaseMessage]) -> str:
    """The one memory system message of a model request."""
    found = [m for m in request if isinstance(m, SystemMessage) and m.name == MEMORY_MESSAGE_NAME]
    assert len(found) == 1, request
    return str(found[0].content)


def as_offered(definition: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``tool_definition(format="openai")`` as LangChain hands it to a provider: annotation titles dropped, no more."""

    def drop_titles(value: Any, parent: str = "") -> Any:
        if isinstance(value, dict):
            return {
                key: drop_titles(item, key)
                for key, item in value.items()
                if not (key == "title" and isinstance(item, str) and parent != "properties")
            }
        return value  # LangChain does not look into lists (anyOf, ...): their titles stay

    assert definition is not None
    offered = drop_titles(definition)
    return [{**definition, "function": {**definition["function"], "parameters": offered["function"]["parameters"]}}]


def shown_data(request: Sequence[BaseMessage]) -> str:
    return fenced(memory_message(request))


# -- the two ways to build an agent ------------------------------------------------------------------

Build = Callable[..., Any]


def hand_built(
    model: ScriptedChatModel, memory: LangGraphMemory, *, checkpointer: bool = True, context_schema: Any = None
) -> Any:
    bound = model.bind_tools(memory.tools)

    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(await memory.prompt(state, config), config)]}

    graph = StateGraph(MessagesState, context_schema=context_schema)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(memory.tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver() if checkpointer else None)


def react_agent(model: ScriptedChatModel, memory: LangGraphMemory, *, checkpointer: bool = True) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        saver = InMemorySaver() if checkpointer else None
        return create_react_agent(model, memory.tools, prompt=memory.prompt_runnable, checkpointer=saver)


def react_agent_with_method(model: ScriptedChatModel, memory: LangGraphMemory) -> Any:
    """``prompt=memory.prompt``: the coroutine method itself (create_react_agent passes it the config)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(model, memory.tools, prompt=memory.prompt, checkpointer=InMemorySaver())  # type: ignore[arg-type]


BUILDS = [pytest.param(hand_built, id="stategraph"), pytest.param(react_agent, id="create_react_agent")]


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def config(thread_id: str | None = "t-1", resource_id: str | None = USER, **more: Any) -> RunnableConfig:
    configurable = {"thread_id": thread_id, "resource_id": resource_id, **more}
    return {"configurable": {k: v for k, v in configurable.items() if v is not None}}


def user(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# -- history: who wrote each version -------------------------------------------------------------------


def edit(old: str, new: str, call_id: str) -> Step:
    """A step copying the memory as shown with one line filled in, as a model recording a fact does."""
    return lambda messages: AIMessage(
        content="",
        tool_calls=[
            {
                "name": TOOL_NAME,
                "args": json.loads(edit_arguments(memory_message(messages), old, new)),
                "id": call_id,
                "type": "tool_call",
            }
        ],
    )


@pytest.mark.parametrize("build", BUILDS)
def test_history_records_the_tool_call_of_each_update(build: Build) -> None:
    """The ToolCall's id reaches the version's source, and the agent's name where the run's metadata has one."""

    async def scenario() -> None:
        url = f"memory://langgraph-{uuid.uuid4().hex}"
        async with await AsyncMemory.open(url, template=TEMPLATE, history=True) as memory:
            await memory.create_thread("t-1", resource_id=USER)
            model = ScriptedChatModel(
                script=[
                    edit("- **Name**:", "- **Name**: Sam", "call-a"),
                    say("Noted."),
                    edit("- **City**:", "- **City**: Oslo", "call-b"),
                    say("Noted too."),
                ]
            )
            app = build(model, LangGraphMemory(memory))
            await app.ainvoke(user("I'm Sam"), config())
            named = {**config(), "metadata": {"lc_agent_name": "assistant"}}
            await app.ainvoke(user("I live in Oslo"), named)

            stored = await memory.get_working_memory(resource_id=USER)
            assert stored == "# User\n- **Name**: Sam\n- **City**: Oslo\n"
            newest, first = (await memory.working_memory_history(thread_id="t-1")).versions
            who = {"tool": TOOL_NAME, "threadId": "t-1", "framework": "langgraph"}
            assert (first.version, first.kind, first.source) == (1, "set", {**who, "toolCallId": "call-a"})
            assert "agent" not in first.source  # nothing names the agent: none is recorded
            named_source = {**who, "toolCallId": "call-b", "agent": "assistant"}
            assert (newest.version, newest.content, newest.source) == (2, stored, named_source)

    run(scenario)


# -- end to end ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("build", [*BUILDS, pytest.param(react_agent_with_method, id="create_react_agent-method")])
@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_template_mode_two_turns(url: str, build: Build, scope: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE, scope=scope) as memory:  # type: ignore[arg-type]
            if scope == "thread":
                await memory.create_thread("t-1", resource_id=USER)
            model = ScriptedChatModel(script=[update({"memory": FILLED}), say("Noted."), say("You live in Berlin.")])
            app = build(model, LangGraphMemory(memory))
            await app.ainvoke(user("I'm Sam from Berlin"), config())
            await app.ainvoke(user("Where do I live?"), config())

            first, after_tool, second_turn = model.requests
            assert shown_data(first) == TEMPLATE
            # The same run, right after the tool result: the new memory already (no stale copy).
            assert isinstance(after_tool[-1], ToolMessage)
            assert json.loads(str(after_tool[-1].content))["action"] == "replaced"
            assert shown_data(after_tool) == FILLED
            # The next turn: the exact request the model received shows the updated memory, once.
            assert shown_data(second_turn) == FILLED
            assert isinstance(second_turn[-1], HumanMessage) and second_turn[-1].content == "Where do I live?"
            assert isinstance(second_turn[0], SystemMessage) and second_turn[0].name == MEMORY_MESSAGE_NAME
            assert await memory.get_working_memory(thread_id="t-1", resource_id=USER) == FILLED
            # The tool as offered: the raw JSON Schema of tool_definition, non-strict.
            assert model.offered[0] == as_offered(memory.tool_definition(format="openai"))
            assert "strict" not in model.offered[0][0]["function"]

    run(scenario)


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_schema_mode_partial_update_keeps_untouched_fields(url: str, build: Build, scope: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, schema=Profile, scope=scope) as memory:  # type: ignore[arg-type]
            await memory.create_thread("t-1", resource_id=USER)
            stored = {"name": "Sam", "city": "Berlin", "diet": "vegetarian {no} braces"}
            await memory.update_working_memory(stored, thread_id="t-1")
            model = ScriptedChatModel(
                script=[update({"memory": {"city": "Oslo"}}), say("Noted."), say("You live in Oslo.")]
            )
            app = build(model, LangGraphMemory(memory))
            await app.ainvoke(user("I moved to Oslo"), config())
            await app.ainvoke(user("Where do I live?"), config())

            expected = {**stored, "city": "Oslo"}
            assert json.loads(shown_data(model.requests[0])) == stored
            assert json.loads(shown_data(model.requests[1])) == expected  # same run, after the tool
            assert json.loads(shown_data(model.requests[2])) == expected  # next turn
            assert await memory.get_working_memory_data(thread_id="t-1") == expected
            assert model.offered[0] == as_offered(memory.tool_definition(format="openai"))
            assert "strict" not in model.offered[0][0]["function"]

    run(scenario)


@pytest.mark.parametrize("build", BUILDS)
def test_read_only_offers_no_tool_and_shows_memory_as_context(url: str, build: Build) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE) as writer:
            await writer.update_working_memory(FILLED, resource_id=USER)
            reader = AsyncMemory(writer.storage, template=TEMPLATE, read_only=True)
            integration = LangGraphMemory(reader)
            assert integration.tools == [] and integration.tool is None
            model = ScriptedChatModel(script=[say("Hello Sam."), say("Berlin.")])
            app = build(model, integration)
            await app.ainvoke(user("hi"), config())
            await app.ainvoke(user("where?"), config())
            assert len(model.requests) == 2
            assert all(offered == [] for offered in model.offered)
            shown = memory_message(model.requests[1])
            assert fenced(shown) == FILLED
            assert TOOL_NAME not in shown  # rendered as context only: no tool to call

    run(scenario)


@pytest.mark.parametrize("build", BUILDS)
def test_read_only_thread_scope_on_a_thread_not_there_yet_shows_the_empty_memory(url: str, build: Build) -> None:
    """A new conversation has no thread yet; a read-only memory cannot create it, and the run goes on."""

    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE, scope="thread"):
            pass  # the tables
        async with await AsyncMemory.open(url, template=TEMPLATE, scope="thread", read_only=True) as reader:
            model = ScriptedChatModel(script=[say("Hello."), say("Hello again.")])
            app = build(model, LangGraphMemory(reader))
            await app.ainvoke(user("hi"), config(thread_id="t-new"))
            await app.ainvoke(user("again"), config(thread_id="t-new"))
            assert [shown_data(request) for request in model.requests] == [TEMPLATE, TEMPLATE]  # the empty memory
            assert all(offered == [] for offered in model.offered)
            assert await reader.get_thread("t-new") is None  # nothing created

    run(scenario)


@pytest.mark.parametrize("build", BUILDS)
def test_a_sync_memory_is_run_on_worker_threads(url: str, build: Build) -> None:
    """The Memory the rest of an application uses, handed over as it is: the same memory, both ways."""
    with Memory(url, schema=Profile) as memory:
        memory.update_working_memory({"name": "Sam"}, resource_id=USER)
        integration = LangGraphMemory(memory)
        assert isinstance(integration.memory, AsyncMemory) and integration.memory.schema is memory.schema
        model = ScriptedChatModel(script=[update({"memory": {"city": "Oslo"}}), say("Noted."), say("Oslo.")])
        app = build(model, integration)

        async def scenario() -> None:
            named = {**config(), "metadata": {"lc_agent_name": "assistant"}}
            await app.ainvoke(user("I live in Oslo"), named)
            await app.ainvoke(user("Where?"), config())

        run(scenario)
        assert json.loads(shown_data(model.requests[0])) == {"name": "Sam"}  # written by the sync Memory
        assert json.loads(shown_data(model.requests[2])) == {"name": "Sam", "city": "Oslo"}
        assert memory.get_working_memory_data(resource_id=USER) == {"name": "Sam", "city": "Oslo"}


@pytest.mark.parametrize("build", BUILDS)
def test_model_mistakes_come_back_as_tool_results_and_the_run_goes_on(url: str, build: Build) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            await memory.update_working_memory({"name": "Sam"}, resource_id=USER)
            model = ScriptedChatModel(
                script=[
                    update({"memory": '{"city": "Oslo"'}),  # JSON as a string, and not valid
                    update({"memory": {"name": 5}}),  # a wrong type
                    update({"memory": {"city": "Oslo"}}),  # the retry that works
                    say("Done."),
                    say("Oslo."),
                ]
            )
            app = build(model, LangGraphMemory(memory))
            named = {**config(), "metadata": {"lc_agent_name": "assistant"}}
            await app.ainvoke(user("I live in Oslo"), named)
            await app.ainvoke(user("where?"), config())

            bad_json, wrong_type, good = (request[-1] for request in model.requests[1:4])
            for message in (bad_json, wrong_type):
                assert isinstance(message, ToolMessage) and message.status == "error"
                result = json.loads(str(message.content))
                assert result["ok"] is False and result["error"].endswith("Nothing was stored.")
            assert "$.name" in json.loads(str(wrong_type.content))["error"]
            assert json.loads(shown_data(model.requests[2])) == {"name": "Sam"}  # nothing stored by the mistakes
            assert isinstance(good, ToolMessage) and good.status == "success"
            assert json.loads(shown_data(model.requests[4])) == {"name": "Sam", "city": "Oslo"}

    run(scenario)


@pytest.mark.parametrize("build", BUILDS)
def test_missing_ids_raise_with_the_langgraph_hint(url: str, build: Build) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE) as memory:
            app = build(ScriptedChatModel(script=[say("never")]), LangGraphMemory(memory))
            with pytest.raises(MissingIdsError, match=r"LangGraph: resource-scoped .*\"configurable\""):
                await app.ainvoke(user("hi"), config(resource_id=None))
            thread_scoped = AsyncMemory(memory.storage, template=TEMPLATE, scope="thread")
            # (no checkpointer here: LangGraph's own checkpointers refuse a run without a thread_id first)
            app = build(ScriptedChatModel(script=[say("never")]), LangGraphMemory(thread_scoped), checkpointer=False)
            with pytest.raises(MissingIdsError, match=r"thread-scoped .*thread_id"):
                await app.ainvoke(user("hi"), {"configurable": {"resource_id": USER}})
            with pytest.raises(MissingIdsError, match="must be a non-empty string"):
                await app.ainvoke(user("hi"), config(thread_id="t-1", resource_id=""))

    run(scenario)


def test_the_tool_raises_wiring_mistakes_instead_of_returning_them(url: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE, scope="thread") as memory:
            await memory.create_thread("t-1", resource_id=USER)
            graph = StateGraph(MessagesState)
            graph.add_node("tools", ToolNode(LangGraphMemory(memory).tools))
            graph.add_edge(START, "tools")
            node = graph.compile()
            call = AIMessage(
                content="", tool_calls=[{"name": TOOL_NAME, "args": {"memory": FILLED}, "id": "c", "type": "tool_call"}]
            )
            with pytest.raises(MissingIdsError, match="configurable"):
                await node.ainvoke({"messages": [call]}, {"configurable": {}})
            with pytest.raises(ThreadOwnershipError):
                await node.ainvoke({"messages": [call]}, config(resource_id=OTHER))
            assert await memory.get_working_memory(thread_id="t-1") is None
            done = await node.ainvoke({"messages": [call]}, config())
            assert json.loads(done["messages"][-1].content)["action"] == "replaced"

    run(scenario)


@pytest.mark.parametrize("build", BUILDS)
def test_a_thread_of_another_owner_raises(url: str, build: Build) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE, scope="thread") as memory:
            await memory.create_thread("t-1", resource_id=USER)
            app = build(ScriptedChatModel(script=[say("never")]), LangGraphMemory(memory))
            with pytest.raises(ThreadOwnershipError):
                await app.ainvoke(user("hi"), config(resource_id=OTHER))

    run(scenario)


# -- where the ids come from ------------------------------------------------------------------------------


def test_ids_user_id_fallback_fixed_ids_and_a_callable(url: str) -> None:
    @dataclass
    class Context:
        user: str

    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE) as memory:
            # "user_id" when there is no "resource_id"
            model = ScriptedChatModel(script=[update({"memory": FILLED}), say("ok")])
            await hand_built(model, LangGraphMemory(memory)).ainvoke(
                user("hi"), {"configurable": {"thread_id": "t-1", "user_id": USER}}
            )
            assert await memory.get_working_memory(resource_id=USER) == FILLED

            # a fixed resource id replaces the config's
            model = ScriptedChatModel(script=[update({"memory": FILLED.replace("Berlin", "Rome")}), say("ok")])
            fixed = LangGraphMemory(memory, resource_id=OTHER)
            await hand_built(model, fixed).ainvoke(user("hi"), config(resource_id=USER))
            assert "Rome" in (await memory.get_working_memory(resource_id=OTHER) or "")
            assert "Rome" not in (await memory.get_working_memory(resource_id=USER) or "")

            # ids= finds them elsewhere: here in LangGraph's run context
            def from_context(run_config: RunnableConfig) -> MemoryIds:
                return MemoryIds(None, get_runtime(Context).context.user)

            model = ScriptedChatModel(script=[update({"memory": FILLED.replace("Berlin", "Lima")}), say("ok")])
            app = hand_built(model, LangGraphMemory(memory, ids=from_context), context_schema=Context)
            await app.ainvoke(user("hi"), {"configurable": {"thread_id": "x"}}, context=Context(user="user-3"))
            assert "Lima" in shown_data(model.requests[1])
            assert "Lima" in (await memory.get_working_memory(resource_id="user-3") or "")

    run(scenario)


def test_settings_are_checked(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open("memory://") as memory:
            with pytest.raises(ValidationError, match="callable"):
                LangGraphMemory(memory, ids="user")  # type: ignore[arg-type]
            integration = LangGraphMemory(memory, ids=lambda c: (None, USER))  # type: ignore[arg-type,return-value]
            with pytest.raises(MissingIdsError, match="ids= must return MemoryIds, not tuple"):
                await integration.prompt({"messages": []}, {})
            with pytest.raises(ValidationError, match="'messages'"):
                await LangGraphMemory(memory).prompt(42, config())

    with pytest.raises(ValidationError, match="LangGraphMemory takes a Memory or an AsyncMemory, not str"):
        LangGraphMemory("memory://")  # type: ignore[arg-type]
    run(scenario)


def test_prompt_replaces_an_earlier_memory_message_and_keeps_leading_system_messages() -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open("memory://", template=TEMPLATE) as memory:
            integration = LangGraphMemory(memory)
            once = await integration.prompt([SystemMessage("You are terse."), HumanMessage("hi")], config())
            assert [type(m).__name__ for m in once] == ["SystemMessage", "SystemMessage", "HumanMessage"]
            assert once[1].name == MEMORY_MESSAGE_NAME
            # A history that kept an old copy (its name dropped by a store) gets one fresh copy, not two.
            stale = SystemMessage(str(once[1].content))
            twice = await integration.prompt({"messages": [once[0], stale, *once[2:], ("user", "again")]}, config())
            assert len([m for m in twice if isinstance(m, SystemMessage)]) == 2
            assert twice[1].name == MEMORY_MESSAGE_NAME and twice[-1].content == "again"

    run(scenario)


# -- packaging and the example -------------------------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_importing_workmem_imports_no_framework_and_a_missing_one_names_the_extra() -> None:
    done = _python(
        "import sys, workmem, workmem.integrations\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain_core')))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    done = _python(
        "import sys\n"
        "sys.modules['langchain_core'] = None\n"
        "from workmem.errors import MissingDriverError\n"
        "try:\n"
        "    import workmem.integrations.langgraph\n"
        "except MissingDriverError as exc:\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'workmem[langgraph]'" in done.stdout


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_agent.py"


@pytest.mark.parametrize(
    "workmem_url", [pytest.param(None, id="libsql-default", marks=pytest.mark.backend("libsql")), "memory://"]
)
def test_example(workmem_url: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKMEM_URL", "OPENAI_API_KEY")}
    if workmem_url:
        env["WORKMEM_URL"] = workmem_url
    for _ in range(2):  # again on the same database: the example starts over
        done = subprocess.run(
            [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert done.stdout.splitlines() == [
            "tools: ['updateWorkingMemory']",
            "[monday] user: Hi, I'm Sam. I live in Berlin.",
            "  updateWorkingMemory -> replaced",
            "  the model saw this working memory:",
            "    # User",
            "    - **Name**:",
            "    - **City**:",
            "  assistant: Nice to meet you, Sam!",
            "[tuesday] user: Where do I live?",
            "  the model saw this working memory:",
            "    # User",
            "    - **Name**: Sam",
            "    - **City**: Berlin",
            "  assistant: You live in Berlin.",
        ]
