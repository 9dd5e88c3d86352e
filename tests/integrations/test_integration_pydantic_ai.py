"""workmem.integrations.pydantic_ai end to end: a real pydantic-ai Agent, a scripted FunctionModel, no network.

Each run is scripted as the model's responses in order; the script records every
request the model received (its instructions, the tools offered, the messages), so
the tests assert on exactly what the model saw. The e2e tests run two turns: in the
first the model calls ``updateWorkingMemory``, the second (a new ``agent.run`` on
the first one's history) must show the updated memory.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed: pip install 'workmem[pydantic-ai]'")

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.capabilities import Toolset
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scripted_model import fenced, patch_arguments

from workmem import AsyncMemory, ThreadOwnershipError
from workmem.agent import WorkingMemorySchema
from workmem.integrations import MemoryIds, MissingIdsError
from workmem.integrations.pydantic_ai import WorkingMemoryToolset

TOOL = "updateWorkingMemory"


@dataclass
class Deps:
    thread_id: str | None = None
    resource_id: str | None = None


@dataclass
class Seen:
    """One request as the model received it."""

    instructions: str
    tools: list[str]
    tool_schemas: dict[str, Any]
    strict: dict[str, bool | None]
    messages: list[ModelMessage]

    def data(self) -> str:
        """The memory data shown in the instructions (the fenced ``<working_memory_data>``)."""
        return fenced(self.instructions)

    def tool_results(self) -> list[Any]:
        last = self.messages[-1]
        assert isinstance(last, ModelRequest)
        return [part.content for part in last.parts if isinstance(part, ToolReturnPart)]


Step = Callable[[Seen], ModelResponse]


@dataclass
class Script:
    """The model: answers each request with the next scripted step and records what it was sent."""

    steps: list[Step] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen = Seen(
            instructions=info.instructions or "",
            tools=[tool.name for tool in info.function_tools],
            tool_schemas={tool.name: tool.parameters_json_schema for tool in info.function_tools},
            strict={tool.name: tool.strict for tool in info.function_tools},
            messages=list(messages),
        )
        self.seen.append(seen)
        assert self.steps, f"the model was asked more often than scripted ({len(self.seen)} requests)"
        return self.steps.pop(0)(seen)

    def then(self, *steps: Step) -> Script:
        self.steps.extend(steps)
        return self


def call(arguments: str | dict[str, Any]) -> Step:
    """The model calls the update tool with exactly these arguments (a JSON string or a dict, as APIs give them)."""
    return lambda seen: ModelResponse(parts=[ToolCallPart(TOOL, args=arguments)])


def reply(text: str = "ok") -> Step:
    return lambda seen: ModelResponse(parts=[TextPart(text)])


def agent_for(toolset: WorkingMemoryToolset[Any], script: Script) -> Agent[Any, str]:
    return Agent(FunctionModel(script), deps_type=Deps, toolsets=[toolset])


def rid() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


async def two_turns(
    memory: AsyncMemory, deps: Deps, first: list[Step], *, toolset: WorkingMemoryToolset[Any] | None = None
) -> Script:
    """Turn one runs ``first`` (the model's steps); turn two, on turn one's history, just replies."""
    script = Script().then(*first)
    agent = agent_for(toolset or WorkingMemoryToolset(memory), script)
    done = await agent.run("My name is Sam, I live in Oslo", deps=deps)
    assert done.output == "ok"
    script.then(reply())
    again = await agent.run("What do you know?", deps=deps, message_history=done.all_messages())
    assert again.output == "ok"
    return script


async def ids_for(memory: AsyncMemory) -> Deps:
    """A thread owned by a new resource: the deps of a run."""
    resource = rid()
    thread = await memory.create_thread(resource_id=resource)
    return Deps(thread_id=thread.id, resource_id=resource)


# -- template mode, both scopes ----------------------------------------------------------------

NEW_TEMPLATE_MEMORY = "# User Information\n- **First Name**: Sam {braces} & <tags>\n- **Location**: Oslo\n"
SHOWN_TEMPLATE_MEMORY = "# User Information\n- **First Name**: Sam {braces} &amp; &lt;tags&gt;\n- **Location**: Oslo\n"


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_template_update_is_shown_on_the_next_turn(url: str, scope: Any) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope) as memory:
            deps = await ids_for(memory)
            script = await two_turns(memory, deps, [call(json.dumps({"memory": NEW_TEMPLATE_MEMORY})), reply()])
            first, after_update, second_turn = script.seen
            assert first.tools == [TOOL]
            assert "Sam" not in first.data()
            assert after_update.tool_results() == [
                {"ok": True, "action": "replaced", "message": "Working memory replaced."}
            ]
            # Turn two: the first request of a new run shows what turn one stored, escaped as data.
            assert second_turn.data() == SHOWN_TEMPLATE_MEMORY
            assert await memory.get_working_memory(thread_id=deps.thread_id) == NEW_TEMPLATE_MEMORY
            if scope == "thread":  # thread scope: the resource's memory stays empty, a new thread sees none
                other = await memory.create_thread(resource_id=deps.resource_id or "")
                assert await memory.get_working_memory(thread_id=other.id) is None
            else:
                assert await memory.get_working_memory(resource_id=deps.resource_id) == NEW_TEMPLATE_MEMORY

    asyncio.run(body())


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_request_right_after_the_update_in_the_same_run_shows_the_new_memory(url: str, scope: Any) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope) as memory:
            deps = await ids_for(memory)
            updates = [
                call({"memory": "# User Information\n- **First Name**: Sam\n"}),
                call({"memory": "# User Information\n- **First Name**: Sam\n- **Location**: Oslo\n"}),
                reply(),
            ]
            script = await two_turns(memory, deps, updates)
            first, after_one, after_two, second_turn = script.seen
            assert "Sam" not in first.data()
            # Within the one run, each request after a tool result already shows that update: no stale copy.
            assert after_one.data() == "# User Information\n- **First Name**: Sam\n"
            assert after_two.data() == "# User Information\n- **First Name**: Sam\n- **Location**: Oslo\n"
            assert second_turn.data() == after_two.data()
            # The instructions sent are the request's own, as stored in the history.
            last = after_two.messages[-1]
            assert isinstance(last, ModelRequest) and last.instructions == after_two.instructions

    asyncio.run(body())


# -- schema mode -------------------------------------------------------------------------------------


class Contact(BaseModel):
    email: str | None = None
    phone: str | None = None


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None
    contact: Contact | None = None
    interests: list[str] | None = None


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_schema_partial_update_keeps_the_fields_it_leaves_out(url: str, scope: Any) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope, schema=Profile) as memory:
            deps = await ids_for(memory)
            stored = {"name": "Sam", "city": "Oslo", "contact": {"email": "sam@example.com"}, "interests": ["chess"]}
            await memory.update_working_memory(stored, thread_id=deps.thread_id, resource_id=deps.resource_id)
            # Partial: only city and a nested field; name, contact.email and interests are not sent at all.
            patch = {"memory": {"city": "Berlin", "contact": {"phone": "+49 30 1234567"}}}
            script = await two_turns(memory, deps, [call(json.dumps(patch)), reply()])
            first, after_update, second_turn = script.seen
            assert json.loads(first.data()) == stored
            # The tool is offered non-strict, with the patch schema: no field required inside "memory".
            assert first.strict == {TOOL: False}
            assert "required" not in first.tool_schemas[TOOL]["properties"]["memory"]
            assert after_update.tool_results() == [
                {"ok": True, "action": "merged", "message": "Working memory updated."}
            ]
            expected = {
                "name": "Sam",
                "city": "Berlin",
                "contact": {"email": "sam@example.com", "phone": "+49 30 1234567"},
                "interests": ["chess"],
            }
            assert json.loads(after_update.data()) == expected
            assert json.loads(second_turn.data()) == expected
            data = await memory.get_working_memory_data(thread_id=deps.thread_id, resource_id=deps.resource_id)
            assert data == expected

    asyncio.run(body())


def test_schema_null_removes_only_the_field_it_names(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            deps = await ids_for(memory)
            await memory.update_working_memory({"name": "Sam", "city": "Oslo"}, resource_id=deps.resource_id)
            script = await two_turns(memory, deps, [call({"memory": {"city": None}}), reply()])
            assert json.loads(script.seen[-1].data()) == {"name": "Sam"}

    asyncio.run(body())


# -- history: who wrote each version -----------------------------------------------------------------


def test_history_records_the_agent_and_the_tool_call_of_each_update() -> None:
    """pydantic-ai's tool call id and agent name reach the version's source, here of the call that erased a field.

    The model sends its patch as a JSON string inside the arguments, padded with null for the fields it
    did not mean to change, as models do: the second call erases the name, and history says which call did.
    """

    def patch(fields: dict[str, Any], call_id: str) -> Step:
        def step(seen: Seen) -> ModelResponse:
            arguments = patch_arguments(fields, WorkingMemorySchema(Profile), pad_with_null=True, as_string=True)
            return ModelResponse(parts=[ToolCallPart(TOOL, args=arguments, tool_call_id=call_id)])

        return step

    async def body(memory: AsyncMemory) -> None:
        deps = Deps("t-1", "user-1")
        await memory.create_thread("t-1", resource_id="user-1")
        script = Script()
        agent = Agent(FunctionModel(script), name="assistant", deps_type=Deps, toolsets=[WorkingMemoryToolset(memory)])
        script.then(patch({"name": "Sam"}, "call-a"), reply())
        await agent.run("I'm Sam", deps=deps)
        script.then(patch({"city": "Oslo"}, "call-b"), reply())
        await agent.run("I live in Oslo", deps=deps)

        assert await memory.get_working_memory_data(thread_id="t-1") == {"city": "Oslo"}
        erasing, first = (await memory.working_memory_history(thread_id="t-1")).versions
        who = {"tool": TOOL, "threadId": "t-1", "framework": "pydantic-ai", "agent": "assistant"}
        assert (first.version, first.kind, first.source) == (1, "merge", {**who, "toolCallId": "call-a"})
        assert first.content is not None and json.loads(first.content) == {"name": "Sam"}
        assert (erasing.version, erasing.source) == (2, {**who, "toolCallId": "call-b"})
        assert await memory.restore_working_memory(1, thread_id="t-1") == first.content

    async def scenario() -> None:
        url = f"memory://pydantic-ai-{uuid.uuid4().hex}"
        async with await AsyncMemory.open(url, scope="thread", schema=Profile, history=True) as memory:
            await body(memory)

    asyncio.run(scenario())


# -- model mistakes come back as the tool's result ----------------------------------------------------


def test_invalid_json_arguments_come_back_as_the_tool_result_and_the_run_goes_on(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            deps = await ids_for(memory)
            steps = [
                call('{"memory": {"name": "Sam"'),  # cut off: not JSON
                call({"memory": {"name": 42}}),  # a wrong type
                call({"memory": '{"name": "Sam"}'}),  # the patch as a JSON string inside the arguments
                reply(),
            ]
            script = await two_turns(memory, deps, steps)
            _, after_bad_json, after_wrong_type, after_fix, second_turn = script.seen
            (bad_json,) = after_bad_json.tool_results()
            assert bad_json["ok"] is False
            assert bad_json["error"].startswith("the arguments are not valid JSON")
            assert bad_json["error"].endswith("Nothing was stored.")
            (wrong_type,) = after_wrong_type.tool_results()
            assert wrong_type["ok"] is False and "42 is not of type" in wrong_type["error"]
            assert json.loads(after_wrong_type.data()) == {}  # nothing was stored by either mistake
            assert after_fix.tool_results() == [{"ok": True, "action": "merged", "message": "Working memory updated."}]
            assert json.loads(second_turn.data()) == {"name": "Sam"}

    asyncio.run(body())


def test_template_mode_object_instead_of_text_comes_back_as_the_tool_result(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url) as memory:
            deps = await ids_for(memory)
            steps = [
                call({"memory": {"name": "Sam"}}),
                call({"notes": "x"}),
                call({"memory": "# Notes\nSam\n"}),
                reply(),
            ]
            script = await two_turns(memory, deps, steps)
            (object_sent,) = script.seen[1].tool_results()
            assert object_sent == {
                "ok": False,
                "error": "'memory' must be a string holding the whole Markdown text, not an object. "
                "Nothing was stored.",
            }
            (no_memory,) = script.seen[2].tool_results()
            assert no_memory["ok"] is False and "no 'memory' field" in no_memory["error"]
            assert script.seen[-1].data() == "# Notes\nSam\n"

    asyncio.run(body())


# -- read-only --------------------------------------------------------------------------------------


def test_read_only_offers_no_tool_and_shows_the_current_memory(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, schema=Profile) as writer:
            deps = await ids_for(writer)
            await writer.update_working_memory({"name": "Sam"}, resource_id=deps.resource_id)
            async with await AsyncMemory.open(url, schema=Profile, read_only=True) as reader:
                script = Script().then(reply())
                agent = agent_for(WorkingMemoryToolset(reader), script)
                done = await agent.run("hi", deps=deps)
                await writer.merge_working_memory({"city": "Oslo"}, resource_id=deps.resource_id)
                script.then(reply())
                await agent.run("again", deps=deps, message_history=done.all_messages())
                first, second_turn = script.seen
                assert first.tools == [] and second_turn.tools == []
                assert TOOL not in first.instructions.split("<working_memory_data>")[0]
                assert json.loads(first.data()) == {"name": "Sam"}
                assert json.loads(second_turn.data()) == {"name": "Sam", "city": "Oslo"}

    asyncio.run(body())


def test_read_only_thread_scope_on_a_thread_not_there_yet_shows_the_empty_memory(url: str) -> None:
    """A new conversation has no thread yet; a read-only memory cannot create it, and the run goes on."""

    async def body() -> None:
        async with await AsyncMemory.open(url, scope="thread", schema=Profile):
            pass  # the tables
        async with await AsyncMemory.open(url, scope="thread", schema=Profile, read_only=True) as reader:
            deps = Deps(thread_id=f"t-{uuid.uuid4().hex[:8]}", resource_id=rid())
            script = Script().then(reply())
            done = await agent_for(WorkingMemoryToolset(reader), script).run("hi", deps=deps)
            assert done.output == "ok"
            (seen,) = script.seen
            assert seen.tools == [] and json.loads(seen.data()) == {}
            assert await reader.get_thread(deps.thread_id or "") is None  # nothing created

    asyncio.run(body())


# -- a sync Memory ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_a_sync_memory_is_run_on_worker_threads(url: str, scope: Any) -> None:
    """The Memory the rest of an application uses, handed over as it is: the same memory, both ways."""
    from workmem import Memory

    with Memory(url, scope=scope, schema=Profile) as memory:
        resource = rid()
        thread = memory.create_thread(resource_id=resource)
        deps = Deps(thread_id=thread.id, resource_id=resource)
        memory.update_working_memory({"name": "Sam"}, thread_id=thread.id)
        toolset = WorkingMemoryToolset(memory)
        assert isinstance(toolset.memory, AsyncMemory) and toolset.memory.schema is memory.schema

        async def body() -> Script:
            return await two_turns(toolset.memory, deps, [call({"memory": {"city": "Oslo"}}), reply()], toolset=toolset)

        script = asyncio.run(body())
        assert json.loads(script.seen[0].data()) == {"name": "Sam"}  # written by the sync Memory
        assert json.loads(script.seen[-1].data()) == {"name": "Sam", "city": "Oslo"}
        assert memory.get_working_memory_data(thread_id=thread.id) == {"name": "Sam", "city": "Oslo"}


# -- the ids ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "deps", "missing"),
    [
        ("resource", Deps(thread_id="t-1"), "resource-scoped working memory needs a resource_id"),
        ("thread", Deps(resource_id="user-1"), "thread-scoped working memory needs a thread_id"),
        ("resource", None, "resource-scoped working memory needs a resource_id"),
        ("resource", Deps(resource_id=""), "resource_id must be a non-empty string"),
    ],
)
def test_missing_ids_raise_at_once_saying_how_to_pass_them(url: str, scope: Any, deps: Any, missing: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope) as memory:
            script = Script().then(reply())
            with pytest.raises(MissingIdsError) as raised:
                await agent_for(WorkingMemoryToolset(memory), script).run("hi", deps=deps)
            assert missing in str(raised.value)
            assert str(raised.value).startswith("pydantic-ai: ")
            assert "agent.run(..., deps=...)" in str(raised.value) and "ids=" in str(raised.value)
            assert script.seen == []  # raised before the model was asked anything

    asyncio.run(body())


def test_ids_callable_overrides_the_deps(url: str) -> None:
    @dataclass
    class Session:
        conversation: str
        user: str

    async def body() -> None:
        async with await AsyncMemory.open(url, scope="thread") as memory:
            user = rid()
            thread = await memory.create_thread(resource_id=user)
            seen_contexts: list[Any] = []

            async def ids(ctx: Any) -> MemoryIds:
                seen_contexts.append(ctx)
                return MemoryIds(ctx.deps.conversation, ctx.deps.user)

            script = Script().then(call({"memory": "# Notes\nfrom the session\n"}), reply())
            agent: Agent[Session, str] = Agent(
                FunctionModel(script), deps_type=Session, toolsets=[WorkingMemoryToolset(memory, ids=ids)]
            )
            session = Session(thread.id, user)
            done = await agent.run("hi", deps=session)
            script.then(reply())
            await agent.run("again", deps=session, message_history=done.all_messages())
            assert script.seen[-1].data() == "# Notes\nfrom the session\n"
            assert await memory.get_working_memory(thread_id=thread.id) == "# Notes\nfrom the session\n"
            assert seen_contexts and all(ctx.deps is session for ctx in seen_contexts)

            def wrong(ctx: Any) -> Any:
                return (thread.id, user)

            with pytest.raises(MissingIdsError, match="ids= must return MemoryIds, not tuple"):
                await Agent(
                    FunctionModel(Script().then(reply())), toolsets=[WorkingMemoryToolset(memory, ids=wrong)]
                ).run("hi")

    asyncio.run(body())


def test_mapping_deps_and_the_capability_form(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url) as memory:
            user = rid()
            deps = {"resource_id": user}
            script = Script().then(call({"memory": "# Notes\nvia a capability\n"}), reply())
            agent: Agent[dict[str, str], str] = Agent(
                FunctionModel(script), capabilities=[Toolset(WorkingMemoryToolset(memory))]
            )
            done = await agent.run("hi", deps=deps)
            script.then(reply())
            await agent.run("again", deps=deps, message_history=done.all_messages())
            assert script.seen[0].tools == [TOOL]
            assert script.seen[-1].data() == "# Notes\nvia a capability\n"
            assert await memory.get_working_memory(resource_id=user) == "# Notes\nvia a capability\n"

    asyncio.run(body())


def test_a_thread_of_another_resource_raises_ownership_error(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url) as memory:
            owner = rid()
            thread = await memory.create_thread(resource_id=owner)
            script = Script().then(call({"memory": "# Notes\nstolen\n"}), reply())
            with pytest.raises(ThreadOwnershipError):
                await agent_for(WorkingMemoryToolset(memory), script).run("hi", deps=Deps(thread.id, rid()))
            assert await memory.get_working_memory(resource_id=owner) is None

    asyncio.run(body())


def test_two_memories_on_one_agent_need_distinct_ids(url: str) -> None:
    async def body() -> None:
        async with (
            await AsyncMemory.open(url) as user_memory,
            await AsyncMemory.open(url, scope="thread", read_only=True) as notes,
        ):
            deps = await ids_for(user_memory)
            script = Script().then(reply())
            toolsets = [WorkingMemoryToolset(user_memory), WorkingMemoryToolset(notes, id="workmem-thread")]
            await Agent(FunctionModel(script), deps_type=Deps, toolsets=toolsets).run("hi", deps=deps)
            assert script.seen[0].tools == [TOOL]
            assert script.seen[0].instructions.count("<working_memory_data>") == 2

    asyncio.run(body())


# -- construction and the optional extra --------------------------------------------------------------


def test_refuses_what_is_no_memory_and_bad_arguments(tmp_path: Path) -> None:
    from workmem import ValidationError

    with pytest.raises(ValidationError, match="WorkingMemoryToolset takes a Memory or an AsyncMemory, not str"):
        WorkingMemoryToolset("file:agent.db")  # type: ignore[arg-type]

    async def body() -> None:
        async with await AsyncMemory.open(f"file:{tmp_path / 'async.db'}") as memory:
            with pytest.raises(ValidationError, match="pydantic-ai: ids must be a callable taking the RunContext"):
                WorkingMemoryToolset(memory, ids="thread-1")  # type: ignore[arg-type]
            with pytest.raises(ValidationError, match="id must be a non-empty string"):
                WorkingMemoryToolset(memory, id="")

    asyncio.run(body())


def test_importing_workmem_does_not_import_pydantic_ai() -> None:
    code = "import sys, workmem, workmem.integrations; print('pydantic_ai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_without_pydantic_ai_the_module_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"
        "from workmem.errors import MissingDriverError\n"
        "try:\n    import workmem.integrations.pydantic_ai\n"
        "except MissingDriverError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'workmem[pydantic-ai]'" in done.stdout


# -- the example ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", [pytest.param("default", marks=pytest.mark.backend("libsql")), "memory"])
def test_example_runs_without_network_and_shows_the_memory_on_turn_two(where: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKMEM_URL", "OPENAI_API_KEY")}
    if where == "memory":
        env["WORKMEM_URL"] = "memory://"
    example = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_agent.py"
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "model: scripted",
        "turn 1: Nice to meet you, Sam!",
        '  stored: {"city": "Oslo", "name": "Sam"}',
        "turn 2: You live in Oslo, Sam.",
        "  the model saw on turn 2:",
        "    {",
        '      "name": "Sam",',
        '      "city": "Oslo"',
        "    }",
    ]
