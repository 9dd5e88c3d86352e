"""Working memory in a LangGraph agent: a hand-built StateGraph + ToolNode, two conversations with one user.

Run: python examples/langgraph_agent.py   (needs: pip install 'workmem[langgraph]')
Model: a scripted stand-in (no network, no key); with $OPENAI_API_KEY set, OpenAI through
langchain-openai (pip install langchain-openai; $OPENAI_MODEL picks the model, default gpt-4o-mini).
Storage: an embedded libSQL file in a temporary folder, or the URL in $WORKMEM_URL.

The first conversation tells the agent where the user lives; the model saves it with the
updateWorkingMemory tool. The second conversation (a new thread, no shared history) is answered
from the working memory, which is shared by all threads of the user (resource scope).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from workmem.agent import DATA_TAG, MEMORY_MESSAGE_NAME, TOOL_NAME, AsyncMemory
from workmem.integrations.langgraph import LangGraphMemory

TEMPLATE = """# User
- **Name**:
- **City**:
"""
USER = "user-sam"


class ScriptedModel(BaseChatModel):
    """Does what a model would: saves what the user tells it, then answers from the working memory."""

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
        last = messages[-1]
        if isinstance(last, HumanMessage) and "I live in" in str(last.content):
            city = str(last.content).split("I live in ")[1].rstrip(".")
            memory = f"# User\n- **Name**: Sam\n- **City**: {city}\n"
            call = {"name": TOOL_NAME, "args": {"memory": memory}, "id": "call-1", "type": "tool_call"}
            reply = AIMessage(content="", tool_calls=[call])
        elif isinstance(last, ToolMessage):
            reply = AIMessage(content="Nice to meet you, Sam!")
        else:
            found = re.search(r"\*\*City\*\*: (.+)", memory_data(messages))
            reply = AIMessage(content=f"You live in {found.group(1)}." if found else "I don't know yet.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def chat_model() -> BaseChatModel:
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI  # type: ignore[import-not-found]

        model: BaseChatModel = ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
        return model
    return ScriptedModel()


def memory_data(messages: Sequence[BaseMessage]) -> str:
    """The working memory as the model was shown it (inside the data fence of the memory message)."""
    for message in messages:
        if isinstance(message, SystemMessage) and message.name == MEMORY_MESSAGE_NAME:
            text = str(message.content)
            return text.split(f"<{DATA_TAG}>\n", 1)[1].split(f"\n</{DATA_TAG}>", 1)[0]
    return ""


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("WORKMEM_URL") or f"file:{Path(tmp) / 'example.db'}"
        async with await AsyncMemory.open(url, template=TEMPLATE) as memory:
            await memory.storage.update_resource(USER, working_memory=None)  # start over on a persistent URL
            working_memory = LangGraphMemory(memory)  # ids from config["configurable"]
            model = chat_model().bind_tools(working_memory.tools)
            seen: list[list[BaseMessage]] = []  # every request the model got

            async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
                messages = await working_memory.prompt(state, config)  # memory rendered fresh for each request
                seen.append(messages)
                return {"messages": [await model.ainvoke(messages, config)]}

            graph = StateGraph(MessagesState)
            graph.add_node("agent", agent)
            graph.add_node("tools", ToolNode(working_memory.tools))
            graph.add_edge(START, "agent")
            graph.add_conditional_edges("agent", tools_condition)
            graph.add_edge("tools", "agent")
            app = graph.compile(checkpointer=InMemorySaver())
            print(f"tools: {[tool.name for tool in working_memory.tools]}")

            for thread_id, text in [("monday", "Hi, I'm Sam. I live in Berlin."), ("tuesday", "Where do I live?")]:
                config: RunnableConfig = {"configurable": {"thread_id": thread_id, "resource_id": USER}}
                first_request = len(seen)
                result = await app.ainvoke({"messages": [HumanMessage(text)]}, config)
                print(f"[{thread_id}] user: {text}")
                for message in result["messages"]:
                    if isinstance(message, ToolMessage):
                        print(f"  {message.name} -> {json.loads(str(message.content))['action']}")
                print("  the model saw this working memory:")
                for line in memory_data(seen[first_request]).splitlines():
                    print(f"    {line}")
                print(f"  assistant: {result['messages'][-1].content}")


if __name__ == "__main__":
    asyncio.run(main())
