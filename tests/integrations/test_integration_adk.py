"""Google ADK end to end: a real ``InMemoryRunner`` and ``LlmAgent``, a scripted ``BaseLlm``, no network.

Every e2e test runs two turns on one ADK session: in the first the scripted model
calls ``updateWorkingMemory``; the second asserts on the exact request the model
received. Both backends: embedded libSQL (a file) and PostgreSQL (a fresh schema).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

for _name in [name for name in os.environ if name.startswith(("OTEL_EXPORTER_", "GOOGLE_CLOUD_AGENT_ENGINE"))]:
    del os.environ[_name]  # no exporter: ADK's telemetry stays in-process
for _name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
    os.environ.pop(_name, None)
os.environ["OTEL_SDK_DISABLED"] = "true"

pytest.importorskip("google.adk", reason="the workmem[adk] extra is not installed")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.readonly_context import ReadonlyContext  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402
from scripted_model import edit_arguments  # noqa: E402

from workmem import AsyncMemory, Memory, ThreadOwnershipError, ValidationError  # noqa: E402
from workmem.integrations import MemoryIds, MissingIdsError  # noqa: E402
from workmem.integrations.adk import WorkingMemoryToolset  # noqa: E402
from workmem.records import Scope  # noqa: E402

TOOL = "updateWorkingMemory"
APP = "workmem-test"


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None
    diet: str | None = None


# -- the scripted model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One request as the model received it."""

    system: str
    tools: list[types.FunctionDeclaration]
    contents: list[types.Content]

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            dict(part.function_response.response or {})
            for content in self.contents
            for part in content.parts or []
            if part.function_response is not None
        ]


Call = tuple[str, dict[str, Any]]


class ScriptedModel(BaseLlm):
    """Answers each request with the next scripted reply: a list of function calls, or a final text."""

    model: str = "scripted"
    replies: list[list[Call] | str | Callable[[Seen], list[Call]]] = Field(default_factory=list)
    """Function calls, a final text, or a function of the request making the calls (answering what it is shown)."""
    seen: list[Seen] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        system = llm_request.config.system_instruction
        assert isinstance(system, str)
        tools = [
            declaration.model_copy(deep=True)
            for tool in llm_request.config.tools or []
            if isinstance(tool, types.Tool)
            for declaration in tool.function_declarations or []
        ]
        self.seen.append(Seen(system, tools, [content.model_copy(deep=True) for content in llm_request.contents]))
        reply = self.replies.pop(0)
        if callable(reply):
            reply = reply(self.seen[-1])
        if isinstance(reply, str):
            parts = [types.Part(text=reply)]
        else:
            parts = [types.Part(function_call=types.FunctionCall(name=name, args=args)) for name, args in reply]
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        )
        yield LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage)


class Agent:
    """One ADK app around a toolset, with one session per user."""

    def __init__(self, memory: AsyncMemory, model: ScriptedModel, **toolset: Any) -> None:
        self.model = model
        agent = LlmAgent(
            name="assistant",
            model=model,
            instruction="Be brief.",
            tools=[WorkingMemoryToolset(memory, **toolset)],
        )
        self.runner = InMemoryRunner(agent=agent, app_name=APP)

    async def session(self, user_id: str, session_id: str | None = None) -> str:
        session = await self.runner.session_service.create_session(app_name=APP, user_id=user_id, session_id=session_id)
        return session.id

    async def turn(self, user_id: str, session_id: str, text: str) -> list[str]:
        """Run one user turn; the texts the agent answered."""
        message = types.Content(role="user", parts=[types.Part(text=text)])
        answers: list[str] = []
        async for event in self.runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
            answers += [part.text for part in (event.content.parts if event.content else None) or [] if part.text]
        return answers


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection beyond this machine (an API, a telemetry endpoint) fails the test."""
    connect = socket.socket.connect

    def local_only(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
                raise AssertionError(f"network connection attempted to {address!r}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


def _user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def _data(seen: Seen) -> str:
    """The fenced data of the memory message the model saw."""
    start = seen.system.index("<working_memory_data>")
    return seen.system[start : seen.system.index("</working_memory_data>", start)]


# -- the tests -------------------------------------------------------------------------------------


def test_history_records_the_agent_and_the_function_call_of_each_update() -> None:
    """ADK's function call id (as the session's events hold it) and agent name reach the version's source."""

    def edit(old: str, new: str) -> Callable[[Seen], list[Call]]:
        return lambda seen: [(TOOL, json.loads(edit_arguments(seen.system, old, new)))]

    async def call_ids(agent: Agent, user: str, session_id: str) -> list[str | None]:
        """The ids ADK gave the model's function calls, as the session's events hold them."""
        session = await agent.runner.session_service.get_session(app_name=APP, user_id=user, session_id=session_id)
        assert session is not None
        return [call.id for event in session.events for call in event.get_function_calls()]

    async def body() -> None:
        url = f"memory://adk-{uuid.uuid4().hex}"
        async with await AsyncMemory.open(url, scope="thread", history=True) as memory:
            name, city = edit("**First Name**: ", "**First Name**: Sam"), edit("**Location**: ", "**Location**: Oslo")
            replies = [name, "Noted.", city, "Ok."]
            agent = Agent(memory, ScriptedModel(replies=replies))
            user = _user()
            session = await agent.session(user)
            await agent.turn(user, session, "I'm Sam")
            await agent.turn(user, session, "I live in Oslo")

            first_id, second_id = await call_ids(agent, user, session)
            assert first_id and second_id and first_id != second_id
            assert first_id.startswith("adk-")  # the model gave none: ADK's own id, as the session keeps it
            newest, first = (await memory.working_memory_history(thread_id=session)).versions
            who = {"tool": TOOL, "threadId": session, "framework": "adk", "agent": "assistant"}
            assert (first.version, first.resource_id, first.source) == (1, user, {**who, "toolCallId": first_id})
            assert first.content is not None and "**First Name**: Sam\n" in first.content
            assert "**Location**: \n" in first.content
            assert (newest.version, newest.source) == (2, {**who, "toolCallId": second_id})
            assert newest.content == await memory.get_working_memory(thread_id=session)
            assert newest.content is not None and "**Location**: Oslo\n" in newest.content

    asyncio.run(body())


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_template_update_shows_in_the_same_run_and_the_next_turn(url: str, scope: Scope) -> None:
    new_memory = '# User\n- **Name**: Sam {the} "{{braces}}"\n- **City**: Oslo\n'

    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope) as memory:
            model = ScriptedModel(replies=[[(TOOL, {"memory": new_memory})], "Noted.", "You are Sam."])
            agent = Agent(memory, model)
            user = _user()
            session = await agent.session(user)

            assert await agent.turn(user, session, "I'm Sam from Oslo") == ["Noted."]
            first, after_tool = model.seen
            assert [tool.name for tool in first.tools] == [TOOL]
            assert first.system.startswith("Be brief.")  # the agent's own instruction stays first
            assert "Sam" not in _data(first)
            assert after_tool.tool_results() == [
                {"ok": True, "action": "replaced", "message": "Working memory replaced."}
            ]
            assert new_memory in _data(after_tool)  # same run, right after the tool: already the new memory

            assert await agent.turn(user, session, "Who am I?") == ["You are Sam."]
            second_turn = model.seen[2]
            assert new_memory in _data(second_turn)
            assert second_turn.system.count("<working_memory_data>") == 1  # shown once, never stacked
            # stored where the scope says: on the user, or on the workmem thread named after the session
            if scope == "resource":
                assert await memory.get_working_memory(resource_id=user) == new_memory
            else:
                thread = await memory.get_thread(session, resource_id=user)
                assert thread is not None
                assert await memory.get_working_memory(thread_id=session) == new_memory

    asyncio.run(body())


def test_thread_scope_keeps_sessions_apart_and_resource_scope_shares(url: str) -> None:
    async def body() -> None:
        scopes: list[Scope] = ["thread", "resource"]
        for scope in scopes:
            async with await AsyncMemory.open(url, scope=scope) as memory:
                model = ScriptedModel(replies=[[(TOOL, {"memory": f"# Topic\n- {scope} trip to Rome\n"})], "Ok.", "?"])
                agent = Agent(memory, model)
                user = _user()
                await agent.turn(user, await agent.session(user), "Planning Rome")
                await agent.turn(user, await agent.session(user), "What was I planning?")  # a new session
                assert ("Rome" in _data(model.seen[2])) is (scope == "resource")

    asyncio.run(body())


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_schema_partial_update_keeps_the_untouched_fields(url: str, scope: Scope) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope, schema=Profile) as memory:
            model = ScriptedModel(replies=[[(TOOL, {"memory": {"city": "Berlin"}})], "Noted.", "Berlin."])
            agent = Agent(memory, model)
            user = _user()
            session = await agent.session(user)
            if scope == "thread":
                await memory.create_thread(session, resource_id=user, metadata={"workingMemory": {"name": "Sam"}})
            else:
                await memory.update_working_memory({"name": "Sam", "diet": "vegan"}, resource_id=user)

            await agent.turn(user, session, "I moved to Berlin")
            declaration = model.seen[0].tools[0]
            assert declaration.parameters_json_schema == memory.tool_definition()["parameters"]  # type: ignore[index]
            assert declaration.parameters is None  # the JSON Schema as it is, no typed conversion
            assert model.seen[1].tool_results()[0]["action"] == "merged"
            assert '"city": "Berlin"' in _data(model.seen[1])

            await agent.turn(user, session, "Where do I live?")
            expected = {"name": "Sam", "city": "Berlin"} | ({"diet": "vegan"} if scope == "resource" else {})
            shown = _data(model.seen[2])
            for key, value in expected.items():
                assert f'"{key}": "{value}"' in shown
            assert "null" not in shown  # nothing was filled in
            assert await memory.get_working_memory_data(thread_id=session, resource_id=user) == expected

    asyncio.run(body())


def test_model_mistakes_come_back_as_tool_results_and_the_run_goes_on(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            model = ScriptedModel(
                replies=[
                    [(TOOL, {"memory": '{"name": "Sam",'})],  # JSON in a string, cut off
                    [(TOOL, {"memory": {"name": 5}})],  # a wrong type
                    [(TOOL, {"facts": "Sam"})],  # the wrong field
                    [(TOOL, {"memory": '{"name": "Sam"}'})],  # JSON in a string, valid: taken
                    "Hello Sam.",
                    "Sam.",
                ]
            )
            agent = Agent(memory, model)
            user = _user()
            session = await agent.session(user)
            assert await agent.turn(user, session, "I'm Sam") == ["Hello Sam."]
            results = model.seen[4].tool_results()
            assert [result["ok"] for result in results] == [False, False, False, True]
            assert all("Nothing was stored" in result["error"] for result in results[:3])
            assert "is not of type 'string'" in results[1]["error"]
            assert "{}" in _data(model.seen[1])  # after the mistakes nothing was stored
            assert '"name": "Sam"' in _data(model.seen[4])

            await agent.turn(user, session, "Who am I?")
            assert '"name": "Sam"' in _data(model.seen[5])

    asyncio.run(body())


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_read_only_offers_no_tool_and_shows_the_memory_as_context(url: str, scope: Scope) -> None:
    async def body() -> None:
        user = _user()
        async with await AsyncMemory.open(url, scope=scope) as writer:
            session = f"s-{uuid.uuid4().hex[:8]}"
            await writer.create_thread(session, resource_id=user, metadata={"workingMemory": "# User\n- Kim\n"})
        async with await AsyncMemory.open(url, scope=scope, read_only=True) as memory:
            model = ScriptedModel(replies=["Hi Kim.", "Still Kim."])
            agent = Agent(memory, model)
            await agent.session(user, session)
            await agent.turn(user, session, "Hi")
            await agent.turn(user, session, "Again")
            for seen in model.seen:
                assert seen.tools == []
                assert TOOL not in seen.system
                assert "# User\n- Kim\n" in _data(seen)

    asyncio.run(body())


def test_ids_can_come_from_elsewhere(url: str) -> None:
    async def tenant_ids(context: ReadonlyContext) -> MemoryIds:  # an ids function may be a coroutine
        return MemoryIds(thread_id=None, resource_id=f"tenant:{context.state['tenant']}")

    async def body() -> None:
        async with await AsyncMemory.open(url) as memory:
            model = ScriptedModel(replies=[[(TOOL, {"memory": "# Team\n- likes tea\n"})], "Ok.", "Tea."])
            agent = Agent(memory, model, ids=tenant_ids)
            tenant = uuid.uuid4().hex[:8]
            first = await agent.runner.session_service.create_session(
                app_name=APP, user_id=_user(), state={"tenant": tenant}
            )
            second = await agent.runner.session_service.create_session(
                app_name=APP, user_id=_user(), state={"tenant": tenant}
            )
            await agent.turn(first.user_id, first.id, "We like tea")
            await agent.turn(second.user_id, second.id, "What do we like?")  # another user, same tenant
            assert "likes tea" in _data(model.seen[2])
            assert await memory.get_working_memory(resource_id=f"tenant:{tenant}") == "# Team\n- likes tea\n"

            # a fixed id takes priority over the session's (and the ids function's)
            model = ScriptedModel(replies=[[(TOOL, {"memory": "# Desk\n- blue\n"})], "Ok.", "Blue."])
            team = f"team-{tenant}"
            agent = Agent(memory, model, resource_id=team)
            await agent.turn(first.user_id, await agent.session(first.user_id), "Our desk is blue")
            other = _user()
            await agent.turn(other, await agent.session(other), "Desk colour?")
            assert "- blue" in _data(model.seen[2])
            assert await memory.get_working_memory(resource_id=team) == "# Desk\n- blue\n"
            assert await memory.get_working_memory(resource_id=other) is None

    asyncio.run(body())


@pytest.mark.parametrize(
    ("scope", "ids", "message"),
    [
        ("resource", MemoryIds(thread_id="t-1", resource_id=None), "needs a resource_id"),
        ("thread", MemoryIds(thread_id=None, resource_id="user-1"), "needs a thread_id"),
        ("resource", MemoryIds(thread_id=None, resource_id=""), "resource_id must be a non-empty string"),
    ],
)
def test_missing_ids_raise_with_the_adk_hint(url: str, scope: Scope, ids: MemoryIds, message: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope) as memory:
            model = ScriptedModel(replies=["never sent"])
            agent = Agent(memory, model, ids=lambda context: ids)
            user = _user()
            with pytest.raises(MissingIdsError) as raised:
                await agent.turn(user, await agent.session(user), "Hi")
            assert message in str(raised.value)
            assert "session's user_id" in str(raised.value)
            assert "WorkingMemoryToolset(memory, ids=" in str(raised.value)
            assert model.seen == []  # raised before the model was asked anything

    asyncio.run(body())


def test_a_session_id_naming_another_users_thread_raises(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope="thread") as memory:
            session = f"s-{uuid.uuid4().hex[:8]}"
            await memory.create_thread(session, resource_id="someone-else")
            model = ScriptedModel(replies=["never sent"])
            agent = Agent(memory, model)
            user = _user()
            await agent.session(user, session)
            with pytest.raises(ThreadOwnershipError):
                await agent.turn(user, session, "Hi")
            assert model.seen == []

    asyncio.run(body())


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_a_sync_memory_is_run_on_worker_threads(url: str, scope: Scope) -> None:
    """The Memory the rest of an application uses, handed over as it is: same memory, the loop never blocked."""

    async def body(memory: Memory) -> None:
        model = ScriptedModel(replies=[[(TOOL, {"memory": {"city": "Oslo"}})], "Noted.", "Oslo."])
        agent = Agent(memory, model)  # type: ignore[arg-type]
        user = _user()
        session = await agent.session(user)
        await agent.turn(user, session, "I live in Oslo")
        await agent.turn(user, session, "Where?")
        assert '"city": "Oslo"' in _data(model.seen[1]) and '"city": "Oslo"' in _data(model.seen[2])
        # the sync Memory reads what the run wrote (a thread-scope session's thread included)
        assert memory.get_working_memory_data(thread_id=session, resource_id=user) == {"city": "Oslo"}

    with Memory(url, scope=scope, schema=Profile) as memory:
        asyncio.run(body(memory))
        toolset = WorkingMemoryToolset(memory)
        assert isinstance(toolset.memory, AsyncMemory) and toolset.memory.storage is not memory.storage
        assert (toolset.memory.scope, toolset.memory.schema) == (scope, memory.schema)  # the same settings


def test_the_toolset_refuses_what_is_no_memory() -> None:
    with pytest.raises(ValidationError, match="WorkingMemoryToolset takes a Memory or an AsyncMemory, not str"):
        WorkingMemoryToolset("file:agent.db")  # type: ignore[arg-type]


def test_read_only_thread_scope_on_a_new_session_shows_the_empty_memory(url: str) -> None:
    """No thread yet for the session: a read-only memory cannot create it, and the run goes on with none."""

    async def body() -> None:
        async with await AsyncMemory.open(url, scope="thread"):
            pass  # the tables
        async with await AsyncMemory.open(url, scope="thread", read_only=True) as memory:
            model = ScriptedModel(replies=["Hi.", "Hi again."])
            agent = Agent(memory, model)
            user = _user()
            session = await agent.session(user)
            assert await agent.turn(user, session, "Hi") == ["Hi."]
            assert await agent.turn(user, session, "Again") == ["Hi again."]
            empty = await memory.system_message(thread_id=session)
            for seen in model.seen:
                assert seen.tools == []
                assert seen.system.startswith("Be brief.") and seen.system.endswith(f"\n\n{empty}")
                assert _data(seen).startswith("<working_memory_data>\n# User Information")  # the empty template
            assert await memory.get_thread(session) is None  # nothing created

    asyncio.run(body())


def test_workmem_imports_no_framework_and_a_missing_adk_names_the_extra() -> None:
    code = (
        "import sys, workmem, workmem.integrations\n"
        "assert not [m for m in sys.modules if m.startswith('google.adk')], 'google.adk imported'\n"
        "sys.modules['google.adk'] = None\n"
        "try:\n"
        "    import workmem.integrations.adk\n"
        "except workmem.MissingDriverError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'workmem[adk]'" in done.stdout


def test_thread_scope_creates_the_sessions_thread_once_also_when_a_concurrent_request_did(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope="thread") as memory:
            create = memory.create_thread
            calls: list[str | None] = []

            async def raced(thread_id: str | None = None, **options: Any) -> Any:
                calls.append(thread_id)
                await create(thread_id, **options)  # another request of the session got there first
                return await create(thread_id, **options)  # so this one raises ThreadExistsError

            memory.create_thread = raced  # type: ignore[method-assign]
            model = ScriptedModel(replies=[[(TOOL, {"memory": "# Topic\n- jazz\n"})], "Ok.", "Jazz."])
            agent = Agent(memory, model)
            user = _user()
            session = await agent.session(user)
            await agent.turn(user, session, "Let's talk jazz")
            await agent.turn(user, session, "Topic?")
            assert calls == [session]  # created on the first request only
            assert "- jazz" in _data(model.seen[2])
            thread = await memory.get_thread(session, resource_id=user)  # owned by the session's user
            assert thread is not None

    asyncio.run(body())


@pytest.mark.backend("libsql")
def test_the_example_runs_without_network_or_key() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKMEM_URL", "GOOGLE_API_KEY")}
    example = Path(__file__).resolve().parents[2] / "examples" / "adk_agent.py"
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert "  tool call: updateWorkingMemory({'memory': {'name': 'Sam', 'city': 'Oslo'}})" in lines
    assert lines[-8:] == [
        "the model saw, in the second session:",
        "<working_memory_data>",
        "{",
        '  "name": "Sam",',
        '  "city": "Oslo"',
        "}",
        "</working_memory_data>",
        "stored: {'name': 'Sam', 'city': 'Oslo'}",
    ]
