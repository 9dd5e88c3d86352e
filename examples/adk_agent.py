"""Working memory in a Google ADK agent: the model updates it in one session and sees it in the next.

Run: python examples/adk_agent.py   (needs ``pip install 'workmem[adk]'``)
Model: a scripted stand-in (no network, no key); with $GOOGLE_API_KEY set, Gemini ($WORKMEM_ADK_MODEL,
default gemini-2.5-flash).
Storage: an embedded libSQL file in a temporary folder, or the URL in $WORKMEM_URL.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import BaseModel, Field

from workmem import AsyncMemory
from workmem.integrations.adk import WorkingMemoryToolset

USER = "example-adk-user"


class Profile(BaseModel):
    name: str | None = Field(default=None, description="The user's name")
    city: str | None = None
    diet: str | None = None


class ScriptedGemini(BaseLlm):
    """Stands in for Gemini: the first session stores what the user said, the second answers from memory."""

    model: str = "scripted"
    step: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.step += 1
        if self.step == 1:  # a partial update: only the fields it learned
            call = types.FunctionCall(name="updateWorkingMemory", args={"memory": {"name": "Sam", "city": "Oslo"}})
            part = types.Part(function_call=call)
        else:
            part = types.Part(text="Nice to meet you, Sam." if self.step == 2 else "You live in Oslo.")
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        )
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


async def main() -> None:
    seen: list[str] = []  # the system instruction of every model request

    def record(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        seen.append(str(llm_request.config.system_instruction))

    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("WORKMEM_URL") or f"file:{Path(tmp) / 'example.db'}"
        async with await AsyncMemory.open(url, schema=Profile) as memory:
            await memory.storage.update_resource(USER, working_memory=None)  # start over on a persistent URL
            model: BaseLlm | str = (
                os.environ.get("WORKMEM_ADK_MODEL", "gemini-2.5-flash")
                if os.environ.get("GOOGLE_API_KEY")
                else ScriptedGemini()
            )
            agent = LlmAgent(
                name="assistant",
                model=model,
                instruction="You are a friendly assistant. Answer in one sentence.",
                tools=[WorkingMemoryToolset(memory)],  # ids: user_id -> resource, session id -> thread
                before_model_callback=record,
            )
            runner = InMemoryRunner(agent=agent, app_name="workmem-example")
            for text in ["Hi, I'm Sam and I live in Oslo.", "Where do I live?"]:
                session = await runner.session_service.create_session(app_name="workmem-example", user_id=USER)
                message = types.Content(role="user", parts=[types.Part(text=text)])
                print(f"user: {text}")
                async for event in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
                    for part in (event.content.parts if event.content else None) or []:
                        if part.function_call:
                            print(f"  tool call: {part.function_call.name}({part.function_call.args})")
                        if part.function_response:
                            print(f"  tool result: {part.function_response.response}")
                        if part.text:
                            print(f"assistant: {part.text}")
            second_session = seen[-1]
            start = second_session.index("<working_memory_data>")
            end = second_session.index("</working_memory_data>") + len("</working_memory_data>")
            print("the model saw, in the second session:")
            print(second_session[start:end])
            print(f"stored: {await memory.get_working_memory_data(resource_id=USER)}")


if __name__ == "__main__":
    asyncio.run(main())
