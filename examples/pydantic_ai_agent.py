"""A pydantic-ai agent with working memory: it learns a fact on turn one and still knows it on turn two.

Run: python examples/pydantic_ai_agent.py   (needs pip install 'workmem[pydantic-ai]')
Model: a scripted stand-in (pydantic-ai's FunctionModel, no network); with $OPENAI_API_KEY set, a real
OpenAI model ($PYDANTIC_AI_MODEL, default openai:gpt-4o-mini; needs pip install 'pydantic-ai-slim[openai]').
Storage: an embedded libSQL file in a temporary folder, or the URL in $WORKMEM_URL.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from workmem import AsyncMemory
from workmem.agent import DATA_TAG
from workmem.integrations.pydantic_ai import WorkingMemoryToolset

RESOURCE_ID = "user-pydantic-ai-example"
THREAD_ID = "thread-pydantic-ai-example"


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None


@dataclass
class Deps:
    """The run's deps: the toolset takes the working memory's ids from here."""

    thread_id: str
    resource_id: str


def shown_memory(instructions: str | None) -> str:
    """The working memory data as the instructions show it to the model."""
    text = instructions or ""
    start = text.index(f"<{DATA_TAG}>") + len(DATA_TAG) + 2
    return text[start : text.index(f"</{DATA_TAG}>", start)].strip()


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Does what a model would: stores what the user says about themselves, answers from the memory it is shown."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if any(isinstance(part, ToolReturnPart) for part in last.parts):
        return ModelResponse(parts=[TextPart("Nice to meet you, Sam!")])
    memory = json.loads(shown_memory(info.instructions))
    if "city" not in memory:  # turn one: a partial update, only what was learnt
        return ModelResponse(parts=[ToolCallPart("updateWorkingMemory", {"memory": {"name": "Sam", "city": "Oslo"}})])
    return ModelResponse(parts=[TextPart(f"You live in {memory['city']}, {memory['name']}.")])


def pick_model() -> tuple[Model | str, str]:
    if os.environ.get("OPENAI_API_KEY"):
        name = os.environ.get("PYDANTIC_AI_MODEL", "openai:gpt-4o-mini")
        return name, name
    return FunctionModel(scripted_model), "scripted"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("WORKMEM_URL") or f"file:{Path(tmp) / 'example.db'}"
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            # Start over on a persistent $WORKMEM_URL: drop what an earlier run left.
            for thread in (await memory.list_threads(RESOURCE_ID, per_page=None)).threads:
                await memory.delete_thread(thread.id)
            await memory.storage.update_resource(RESOURCE_ID, working_memory=None)
            await memory.create_thread(THREAD_ID, resource_id=RESOURCE_ID)

            model, label = pick_model()
            agent = Agent(model, deps_type=Deps, toolsets=[WorkingMemoryToolset(memory)])
            deps = Deps(thread_id=THREAD_ID, resource_id=RESOURCE_ID)
            print(f"model: {label}")

            first = await agent.run("Hi, I'm Sam and I live in Oslo.", deps=deps)
            print(f"turn 1: {first.output}")
            stored = await memory.get_working_memory_data(resource_id=RESOURCE_ID)
            print(f"  stored: {json.dumps(stored, sort_keys=True)}")

            second = await agent.run("Where do I live?", deps=deps, message_history=first.all_messages())
            print(f"turn 2: {second.output}")
            turn_two = next(m for m in second.new_messages() if isinstance(m, ModelRequest))
            print("  the model saw on turn 2:")
            for line in shown_memory(turn_two.instructions).splitlines():
                print(f"    {line}")


if __name__ == "__main__":
    asyncio.run(main())
