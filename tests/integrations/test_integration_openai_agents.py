"""Working memory in the OpenAI Agents SDK, end to end: the real ``Runner`` with a scripted model, no network.

The scripted model is a subclass of ``agents.models.interface.Model``: it records
every request (``system_instructions``, ``input``, ``tools``) and answers with the
tool calls and messages it was given. Each test runs two turns (two
``Runner.run`` calls) and checks what the model was shown on the second one,
on an embedded libSQL file and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # before the SDK reads it: no trace export, no network
agents = pytest.importorskip("agents")

from agents import Agent, ModelResponse, RunContextWrapper, Runner, Usage  # noqa: E402
from agents.exceptions import UserError  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from scripted_model import edit_arguments  # noqa: E402

from workmem import AsyncMemory, Memory  # noqa: E402
from workmem.errors import ThreadOwnershipError, ValidationError  # noqa: E402
from workmem.integrations import MemoryIds, MissingIdsError  # noqa: E402
from workmem.integrations.openai_agents import HOW_TO_PASS_IDS, WorkingMemory  # noqa: E402

agents.set_tracing_disabled(True)

TEMPLATE = "# User\n- **Name**:\n- **City**:\n"
UPDATED = "# User\n- **Name**: Sam\n- **City**: Oslo {the capital}\n"  # braces: never formatted as a template
ROOT = Path(__file__).resolve().parents[2]


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None
    pets: list[str] | None = None


# -- the scripted model --------------------------------------------------------------------


@dataclass
class Request:
    """One model request, as the SDK made it."""

    system_instructions: str | None
    input: list[Any]
    tool_names: list[str]
    tools: list[Any]

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool outputs in this request's input, parsed from the JSON the tool returned."""
        return [json.loads(_get(item, "output")) for item in self.input if _get(item, "type") == "function_call_output"]

    def user_texts(self) -> list[str]:
        return [str(_get(item, "content")) for item in self.input if _get(item, "role") == "user"]


@dataclass
class ScriptedModel(Model):
    """Answers each request with the next step (a list of output items) and records the request."""

    steps: list[list[Any] | Callable[[Request], list[Any]]]
    """Output items, or a function of the request making them (a model answering what it is shown)."""
    requests: list[Request] = field(default_factory=list)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.requests.append(Request(system_instructions, items, [tool.name for tool in tools], list(tools)))
        if not self.steps:
            raise AssertionError(f"unexpected model request #{len(self.requests)}")
        step = self.steps.pop(0)
        output = step(self.requests[-1]) if callable(step) else step
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")
        yield  # pragma: no cover  (makes this an async generator, as the interface declares)


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def tool_call(arguments: str | dict[str, Any], call_id: str = "call-1") -> list[Any]:
    """A step: the model calls updateWorkingMemory with these arguments (a dict is sent as JSON text)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return [
        ResponseFunctionToolCall(
            id=f"fc-{call_id}", call_id=call_id, type="function_call", name="updateWorkingMemory", arguments=text
        )
    ]


def say(text: str) -> list[Any]:
    """A step: the model answers with this text (ending the run)."""
    return [
        ResponseOutputMessage(
            id=f"msg-{abs(hash(text))}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])],
        )
    ]


# -- backends ------------------------------------------------------------------------------


# -- template mode, resource scope -----------------------------------------------------------


def test_update_is_seen_in_the_same_run_and_on_the_next_turn(url: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE) as memory:
            await memory.create_thread("t-1", resource_id="user-1")
            before = await memory.system_message(thread_id="t-1")
            model = ScriptedModel([tool_call({"memory": UPDATED}), say("Noted."), say("You live in Oslo.")])
            agent = WorkingMemory(memory).attach(Agent(name="assistant", instructions="Be brief.", model=model))
            ids = MemoryIds(thread_id="t-1", resource_id="user-1")

            first = await Runner.run(agent, "I'm Sam from Oslo", context=ids)
            assert first.final_output == "Noted."
            assert await memory.get_working_memory(resource_id="user-1") == UPDATED
            after = await memory.system_message(thread_id="t-1")
            assert "Oslo {the capital}" in after

            second = await Runner.run(agent, "Where do I live?", context=ids)
            assert second.final_output == "You live in Oslo."

            opening, same_run, next_turn = model.requests
            assert opening.system_instructions == f"Be brief.\n\n{before}"
            # The tool the model is offered: non-strict, with the memory's own parameters (nothing made required).
            assert opening.tool_names == ["updateWorkingMemory"]
            (tool,) = opening.tools
            assert tool.strict_json_schema is False
            definition = memory.tool_definition()
            assert definition is not None and tool.params_json_schema == definition["parameters"]
            # Right after the update, in the same run: the new memory, not a copy from the start of the run.
            assert same_run.tool_results() == [
                {"ok": True, "action": "replaced", "message": "Working memory replaced."}
            ]
            assert same_run.system_instructions == f"Be brief.\n\n{after}"
            # The next turn's request shows the updated memory.
            assert next_turn.user_texts() == ["Where do I live?"]
            assert next_turn.system_instructions == f"Be brief.\n\n{after}"
            assert "- **Name**: Sam" in next_turn.system_instructions

    asyncio.run(scenario())


# -- schema mode, thread scope: a partial update keeps the other fields ---------------------


def test_schema_partial_update_keeps_untouched_fields(url: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, schema=Profile, scope="thread") as memory:
            initial = {"name": "Sam", "city": "Oslo", "pets": ["cat"]}
            await memory.create_thread("t-1", resource_id="user-1", metadata={"workingMemory": initial})
            await memory.create_thread("t-2", resource_id="user-1")
            model = ScriptedModel([tool_call({"memory": {"city": "Bergen"}}), say("Moved!"), say("Hi again.")])
            agent = WorkingMemory(memory).attach(Agent(name="assistant", model=model))
            context = {"thread_id": "t-1", "resource_id": "user-1"}  # a dict works as the run context too

            await Runner.run(agent, "I moved to Bergen", context=context)
            expected = {"name": "Sam", "city": "Bergen", "pets": ["cat"]}
            assert await memory.get_working_memory_data(thread_id="t-1") == expected
            await Runner.run(agent, "Hello", context=context)

            opening, same_run, next_turn = model.requests
            # The patch schema reaches the model as derived: no field turned required by strict mode.
            definition = memory.tool_definition()
            assert definition is not None
            assert opening.tools[0].params_json_schema == definition["parameters"]
            assert "required" not in opening.tools[0].params_json_schema["properties"]["memory"]
            assert same_run.tool_results() == [{"ok": True, "action": "merged", "message": "Working memory updated."}]
            shown = await memory.system_message(thread_id="t-1")
            assert opening.system_instructions != shown
            assert same_run.system_instructions == shown
            assert next_turn.system_instructions == shown
            for text in ('"name": "Sam"', '"city": "Bergen"', '"cat"'):
                assert text in next_turn.system_instructions
            # Thread scope: the other thread of the same user has its own (empty) memory.
            assert await memory.get_working_memory(thread_id="t-2") is None

    asyncio.run(scenario())


# -- history: who wrote each version -----------------------------------------------------------


def test_history_records_the_agent_and_the_tool_call_of_each_update() -> None:
    """The SDK's tool call id and agent name reach the version's source; the model copies what it is shown."""

    def edit(old: str, new: str, call_id: str) -> Callable[[Request], list[Any]]:
        return lambda request: tool_call(edit_arguments(request.system_instructions or "", old, new), call_id)

    async def scenario() -> None:
        url = f"memory://openai-agents-{uuid.uuid4().hex}"
        async with await AsyncMemory.open(url, template=TEMPLATE, history=True) as memory:
            await memory.create_thread("t-1", resource_id="user-1")
            model = ScriptedModel(
                [
                    edit("- **Name**:", "- **Name**: Sam", "call-a"),
                    say("Noted."),
                    edit("- **City**:", "- **City**: Oslo", "call-b"),
                    say("Noted too."),
                ]
            )
            agent = WorkingMemory(memory).attach(Agent(name="assistant", model=model))
            ids = MemoryIds(thread_id="t-1", resource_id="user-1")
            await Runner.run(agent, "I'm Sam", context=ids)
            await Runner.run(agent, "I live in Oslo", context=ids)

            stored = await memory.get_working_memory(resource_id="user-1")
            assert stored == "# User\n- **Name**: Sam\n- **City**: Oslo\n"
            newest, first = (await memory.working_memory_history(thread_id="t-1")).versions
            who = {"tool": "updateWorkingMemory", "threadId": "t-1", "framework": "openai-agents", "agent": "assistant"}
            assert (first.version, first.kind, first.source) == (1, "set", {**who, "toolCallId": "call-a"})
            assert first.content == "# User\n- **Name**: Sam\n- **City**:\n"
            assert (newest.version, newest.content, newest.source) == (2, stored, {**who, "toolCallId": "call-b"})

    asyncio.run(scenario())


# -- read-only mode ---------------------------------------------------------------------------


def test_read_only_offers_no_tool_and_shows_the_memory(url: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE) as writer:
            await writer.create_thread("t-1", resource_id="user-1")
            await writer.update_working_memory(UPDATED, resource_id="user-1")
        async with await AsyncMemory.open(url, template=TEMPLATE, read_only=True) as memory:
            working_memory = WorkingMemory(memory)
            assert working_memory.tool is None and working_memory.tools == []
            model = ScriptedModel([say("Hello Sam."), say("Still Oslo.")])
            agent = working_memory.attach(Agent(name="assistant", instructions="Be brief.", model=model))
            ids = MemoryIds(thread_id="t-1", resource_id="user-1")
            await Runner.run(agent, "hi", context=ids)
            await Runner.run(agent, "where?", context=ids)
            shown = await memory.system_message(thread_id="t-1")
            assert "updateWorkingMemory" not in shown
            for request in model.requests:
                assert request.tool_names == []
                assert request.system_instructions == f"Be brief.\n\n{shown}"
                assert "Oslo {the capital}" in request.system_instructions

    asyncio.run(scenario())


def test_read_only_thread_scope_on_a_thread_not_there_yet_shows_the_empty_memory(url: str) -> None:
    """A new conversation has no thread yet; a read-only memory cannot create it, and the run goes on."""

    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE, scope="thread"):
            pass  # the tables
        async with await AsyncMemory.open(url, template=TEMPLATE, scope="thread", read_only=True) as memory:
            model = ScriptedModel([say("Hello.")])
            agent = WorkingMemory(memory).attach(Agent(name="assistant", instructions="Be brief.", model=model))
            result = await Runner.run(agent, "hi", context=MemoryIds(thread_id="t-new", resource_id="user-1"))
            assert result.final_output == "Hello."
            (request,) = model.requests
            assert request.tool_names == []
            assert request.system_instructions == f"Be brief.\n\n{await memory.system_message(thread_id='t-new')}"
            assert f"<working_memory_data>\n{TEMPLATE}" in (request.system_instructions or "")  # the empty memory
            assert await memory.get_thread("t-new") is None  # nothing created

    asyncio.run(scenario())


# -- a sync Memory ------------------------------------------------------------------------------


def test_a_sync_memory_is_run_on_worker_threads(url: str) -> None:
    """The Memory the rest of an application uses, handed over as it is: the same memory, both ways."""
    with Memory(url, schema=Profile) as memory:
        memory.create_thread("t-1", resource_id="user-1", metadata={"workingMemory": {"name": "Sam"}})
        working_memory = WorkingMemory(memory)
        assert isinstance(working_memory.memory, AsyncMemory) and working_memory.memory.schema is memory.schema
        model = ScriptedModel([tool_call({"memory": {"city": "Oslo"}}), say("Noted."), say("Oslo.")])
        agent = working_memory.attach(Agent(name="assistant", model=model))
        ids = MemoryIds(thread_id="t-1", resource_id="user-1")

        async def scenario() -> None:
            await Runner.run(agent, "I live in Oslo", context=ids)
            await Runner.run(agent, "Where?", context=ids)

        asyncio.run(scenario())
        opening, same_run, next_turn = model.requests
        assert '"name": "Sam"' in (opening.system_instructions or "")  # written by the sync Memory
        assert same_run.tool_results() == [{"ok": True, "action": "merged", "message": "Working memory updated."}]
        assert '"city": "Oslo"' in (next_turn.system_instructions or "")
        assert memory.get_working_memory_data(resource_id="user-1") == {"name": "Sam", "city": "Oslo"}


# -- the model's mistakes go back to it ---------------------------------------------------------


def test_model_mistakes_come_back_as_tool_results_and_the_run_continues(url: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            await memory.create_thread("t-1", resource_id="user-1", metadata={"workingMemory": {"name": "Sam"}})
            model = ScriptedModel(
                [
                    tool_call({"memory": '{"city": "Oslo"'}, "c1"),  # the patch as a string that is not valid JSON
                    tool_call({"memory": {"pets": "cat"}}, "c2"),  # a wrong type
                    tool_call('{"memory": {"city": ', "c3"),  # the arguments themselves are broken JSON
                    tool_call({"memory": {"city": "Oslo"}}, "c4"),  # and then right
                    say("Got it."),
                    say("Welcome back."),
                ]
            )
            agent = WorkingMemory(memory).attach(Agent(name="assistant", model=model))
            ids = MemoryIds(thread_id="t-1", resource_id="user-1")
            first = await Runner.run(agent, "I live in Oslo and have a cat", context=ids)
            assert first.final_output == "Got it."
            await Runner.run(agent, "hi", context=ids)

            assert len(model.requests) == 6
            unchanged = model.requests[0].system_instructions
            wrongs = ("not valid JSON", "is not of type 'array'", "not valid JSON")
            for request, wrong in zip(model.requests[1:4], wrongs, strict=True):
                (result,) = request.tool_results()[-1:]
                assert result["ok"] is False and wrong in result["error"], result
                assert result["error"].endswith("Nothing was stored.")
                assert request.system_instructions == unchanged  # nothing was written
            assert model.requests[4].tool_results()[-1] == {
                "ok": True,
                "action": "merged",
                "message": "Working memory updated.",
            }
            assert await memory.get_working_memory_data(resource_id="user-1") == {"name": "Sam", "city": "Oslo"}
            shown = await memory.system_message(resource_id="user-1")
            assert model.requests[4].system_instructions == shown
            assert model.requests[5].system_instructions == shown and '"city": "Oslo"' in shown

    asyncio.run(scenario())


# -- wiring mistakes raise at once ----------------------------------------------------------------


def test_missing_ids_raise_with_the_sdk_hint(url: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url) as memory:
            model = ScriptedModel([say("unreachable")])
            agent = WorkingMemory(memory).attach(Agent(name="assistant", model=model))
            with pytest.raises(MissingIdsError) as raised:
                await Runner.run(agent, "hi")  # no context
            message = str(raised.value)
            assert message.startswith("OpenAI Agents SDK: resource-scoped working memory needs a resource_id")
            assert "Runner.run(agent, input, context=MemoryIds(thread_id=..., resource_id=...))" in message
            assert message.endswith(HOW_TO_PASS_IDS)
            with pytest.raises(MissingIdsError, match="resource_id must be a non-empty string, not ''"):
                await Runner.run(agent, "hi", context={"resource_id": ""})

        async with await AsyncMemory.open(url, scope="thread") as memory:
            await memory.create_thread("t-1", resource_id="user-1")
            agent = WorkingMemory(memory).attach(Agent(name="assistant", model=model))
            with pytest.raises(MissingIdsError, match="thread-scoped working memory needs a thread_id"):
                await Runner.run(agent, "hi", context=MemoryIds(thread_id=None, resource_id="user-1"))
            with pytest.raises(ThreadOwnershipError):
                await Runner.run(agent, "hi", context=MemoryIds(thread_id="t-1", resource_id="someone-else"))
            # The tool alone, without the instructions: the SDK wraps what the tool raises in UserError.
            bare_model = ScriptedModel([tool_call({"memory": UPDATED})])
            bare = Agent(name="bare", model=bare_model, tools=WorkingMemory(memory).tools)
            with pytest.raises(UserError) as wrapped:
                await Runner.run(bare, "hi", context=None)
            assert isinstance(wrapped.value.__cause__, MissingIdsError)
            assert HOW_TO_PASS_IDS in str(wrapped.value)
            assert await memory.get_working_memory(thread_id="t-1") is None
        assert model.requests == []  # the model was never asked

    asyncio.run(scenario())


# -- where the ids come from ----------------------------------------------------------------------


@dataclass
class AppContext:
    """A run context of the application's own, not shaped like MemoryIds."""

    user: str
    conversation: str
    seen: list[str] = field(default_factory=list)


def test_ids_callable_fixed_ids_and_own_instructions(url: str) -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url, template=TEMPLATE) as memory:
            await memory.create_thread("c-1", resource_id="u-1")

            def own(context: RunContextWrapper[AppContext], agent: Agent[AppContext]) -> str:
                context.context.seen.append(agent.name)
                return f"Help {context.context.user}."

            working_memory = WorkingMemory(memory, ids=lambda ctx: MemoryIds(ctx.conversation, ctx.user))
            model = ScriptedModel([tool_call({"memory": UPDATED}), say("ok"), say("ok")])
            agent = working_memory.attach(Agent(name="helper", instructions=own, model=model))
            app = AppContext(user="u-1", conversation="c-1")
            await Runner.run(agent, "I'm Sam", context=app)
            await Runner.run(agent, "hi", context=app)
            assert app.seen == ["helper"] * 3
            assert await memory.get_working_memory(resource_id="u-1") == UPDATED
            shown = await memory.system_message(resource_id="u-1")
            assert model.requests[2].system_instructions == f"Help u-1.\n\n{shown}"

            # Fixed ids win over the context's; an async base callable works too.
            async def own_async(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
                return "Async {instructions}."

            fixed = WorkingMemory(memory, resource_id="u-1")
            model = ScriptedModel([say("ok"), say("ok")])
            agent = Agent(name="fixed", model=model, instructions=fixed.instructions(own_async), tools=fixed.tools)
            await Runner.run(agent, "hi", context={"resource_id": "not-this-one"})
            await Runner.run(agent, "hi", context=None)
            for request in model.requests:
                assert request.system_instructions == f"Async {{instructions}}.\n\n{shown}"

    asyncio.run(scenario())


def test_wiring_checks() -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open("memory://") as memory:
            with pytest.raises(ValidationError, match="ids must be a callable"):
                WorkingMemory(memory, ids="u-1")  # type: ignore[arg-type]
            agent = WorkingMemory(memory).attach(Agent(name="a", instructions="x"))
            with pytest.raises(ValidationError, match="already has working memory"):
                WorkingMemory(memory).attach(agent)
            bad = WorkingMemory(memory, ids=lambda ctx: ("t", "u"))  # type: ignore[arg-type,return-value]
            with pytest.raises(MissingIdsError, match="ids= must return MemoryIds, not tuple"):
                await bad.ids_of(None)
        with pytest.raises(ValidationError, match="WorkingMemory takes a Memory or an AsyncMemory, not str"):
            WorkingMemory("memory://")  # type: ignore[arg-type]

    asyncio.run(scenario())


# -- the framework is an optional extra -------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)


def test_workmem_does_not_import_the_sdk() -> None:
    done = _python(
        "import sys, workmem, workmem.integrations\n"
        "assert 'agents' not in sys.modules, 'agents imported'\n"
        "print('ok')\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_missing_sdk_names_the_extra() -> None:
    done = _python(
        "import sys\n"
        "sys.modules['agents'] = None  # as if not installed\n"
        "from workmem.errors import MissingDriverError\n"
        "try:\n"
        "    import workmem.integrations.openai_agents\n"
        "except MissingDriverError as exc:\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'workmem[openai-agents]'" in done.stdout


# -- the example -------------------------------------------------------------------------------


def _run_example(workmem_url: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKMEM_URL", "OPENAI_API_KEY")}  # scripted model
    if workmem_url is not None:
        env["WORKMEM_URL"] = workmem_url
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents_agent.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.splitlines()


def _check_example(lines: list[str]) -> None:
    assert lines[:5] == [
        "tools: ['updateWorkingMemory']",
        "turn 1: Nice to meet you, Sam!",
        '  stored: {"city": "Oslo", "name": "Sam"}',
        "turn 2: You live in Oslo.",
        "what the model saw on turn 2:",
    ]
    shown = "\n".join(lines[5:])
    assert shown.startswith("You are a friendly assistant. Be brief.\n\nWORKING MEMORY")
    assert shown.endswith('<working_memory_data>\n{\n  "name": "Sam",\n  "city": "Oslo"\n}\n</working_memory_data>')


@pytest.mark.backend("libsql")
def test_example_runs_on_its_default() -> None:
    _check_example(_run_example(None))


def test_example_runs_again_on_one_database(url: str) -> None:
    for _ in range(2):
        _check_example(_run_example(url))
