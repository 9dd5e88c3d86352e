"""Working memory in an OpenAI Agents SDK agent, over two turns (``pip install 'workmem[openai-agents]'``).

Run: python examples/openai_agents_agent.py
Model: a scripted stand-in (no network, no key), or an OpenAI model when $OPENAI_API_KEY is set
($WORKMEM_OPENAI_MODEL names it; default gpt-4.1-mini).
Storage: an embedded libSQL file in a temporary folder, or the URL in $WORKMEM_URL.
It prints what the model was shown on the second turn: the memory the first turn stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # no trace export

from agents import Agent, Model, ModelResponse, RunContextWrapper, RunHooks, Runner, Usage, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
)
from pydantic import BaseModel

from workmem import AsyncMemory
from workmem.integrations import MemoryIds
from workmem.integrations.openai_agents import WorkingMemory

set_tracing_disabled(True)


class Profile(BaseModel):
    """What the agent keeps about its user (schema mode: the model sends only what changed)."""

    name: str | None = None
    city: str | None = None


class ScriptedModel(Model):
    """Plays what a model would answer: it stores the user's name and city, then answers from the memory."""

    def __init__(self) -> None:
        self.steps: list[Any] = [
            ResponseFunctionToolCall(
                id="fc-1",
                call_id="call-1",
                type="function_call",
                name="updateWorkingMemory",
                arguments=json.dumps({"memory": {"name": "Sam", "city": "Oslo"}}),
            ),
            _message("Nice to meet you, Sam!"),
            _message("You live in Oslo."),
        ]

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=[self.steps.pop(0)], usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")
        yield


def _message(text: str) -> ResponseOutputMessage:
    content: list[ResponseOutputText | ResponseOutputRefusal] = [
        ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])
    ]
    return ResponseOutputMessage(
        id=f"msg-{len(text)}", type="message", role="assistant", status="completed", content=content
    )


class ShownToModel(RunHooks[Any]):
    """Keeps the system prompt of each model request, as the SDK sends it."""

    def __init__(self) -> None:
        self.system_prompts: list[str | None] = []

    async def on_llm_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], system_prompt: str | None, input_items: list[Any]
    ) -> None:
        self.system_prompts.append(system_prompt)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("WORKMEM_URL") or f"file:{Path(tmp) / 'example.db'}"
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            # Start over on a persistent $WORKMEM_URL: remove what an earlier run left.
            for thread in (await memory.list_threads("user-sam", per_page=None)).threads:
                await memory.delete_thread(thread.id)
            await memory.storage.update_resource("user-sam", working_memory=None)
            await memory.create_thread("chat-1", resource_id="user-sam")

            model: Model | str = os.environ.get("WORKMEM_OPENAI_MODEL", "gpt-4.1-mini")
            if not os.environ.get("OPENAI_API_KEY"):
                model = ScriptedModel()
            agent = Agent(name="assistant", instructions="You are a friendly assistant. Be brief.", model=model)
            agent = WorkingMemory(memory).attach(agent)  # the updateWorkingMemory tool + the memory in the instructions
            print(f"tools: {[tool.name for tool in agent.tools]}")

            ids = MemoryIds(thread_id="chat-1", resource_id="user-sam")  # the run context carries the ids
            first = await Runner.run(agent, "Hi, I'm Sam and I live in Oslo.", context=ids)
            print(f"turn 1: {first.final_output}")
            stored = await memory.get_working_memory_data(resource_id="user-sam")
            print(f"  stored: {json.dumps(stored, sort_keys=True)}")

            shown = ShownToModel()
            second = await Runner.run(agent, "Where do I live?", context=ids, hooks=shown)
            print(f"turn 2: {second.final_output}")
            print("what the model saw on turn 2:")
            print(shown.system_prompts[0])


if __name__ == "__main__":
    asyncio.run(main())
