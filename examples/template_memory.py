"""Template-mode working memory over a short conversation (the model's tool calls are simulated).

Run: python examples/template_memory.py
Storage: an embedded libSQL file in a temporary folder, or the URL in $WORKMEM_URL.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workmem.agent import Memory

TEMPLATE = """# User
- **Name**:
- **Location**:
- **Timezone**:
"""

# What a model would answer to each user message: the arguments of its updateWorkingMemory call,
# as the JSON string an API returns. In template mode every call carries the whole text.
CONVERSATION = [
    (
        "My name is Sam and I'm from Berlin",
        '{"memory": "# User\\n- **Name**: Sam\\n- **Location**: Berlin\\n- **Timezone**:\\n"}',
    ),
    (
        "I'm normally in CET",
        '{"memory": "# User\\n- **Name**: Sam\\n- **Location**: Berlin\\n- **Timezone**: CET\\n"}',
    ),
]


def field(memory_text: str, name: str) -> str:
    """The value of ``- **name**: value`` in a Markdown memory."""
    for line in memory_text.splitlines():
        prefix = f"- **{name}**:"
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return ""


def start_over(memory: Memory, *resource_ids: str) -> None:
    """Remove what an earlier run left (on a persistent $WORKMEM_URL): the resources' threads and memory."""
    for resource_id in resource_ids:
        for thread in memory.list_threads(resource_id, per_page=None).threads:
            memory.delete_thread(thread.id)
        memory.storage.update_resource(resource_id, working_memory=None)  # None: no working memory stored


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("WORKMEM_URL") or f"file:{Path(tmp) / 'example.db'}"
        with Memory(url, template=TEMPLATE) as memory:
            start_over(memory, "user-7")
            memory.create_thread("chat-1", resource_id="user-7", title="First chat")
            print(f"tool: {memory.tool_definition()['name']}")  # type: ignore[index]
            messages: list[Mapping[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
            for user_text, tool_arguments in CONVERSATION:
                # Each turn the memory message is refreshed in place, never stacked.
                messages = memory.process_input([*messages, {"role": "user", "content": user_text}], thread_id="chat-1")
                print(f"user: {user_text}")
                print(f"  prompt: {len(messages)} messages, {sum(m['role'] == 'system' for m in messages)} system")
                result = memory.call_tool(tool_arguments, thread_id="chat-1")  # the model's (simulated) tool call
                print(f"  updateWorkingMemory -> {result['action']}")
                messages.append({"role": "assistant", "content": "Noted!"})

            # A model that echoes the unfilled template would wipe the memory: the update is ignored.
            result = memory.call_tool({"memory": TEMPLATE}, thread_id="chat-1")
            print(f"unfilled template -> {result['action']}")

            text = memory.get_working_memory(thread_id="chat-1") or ""
            for name in ("Name", "Location", "Timezone"):
                print(f"{name}: {field(text, name)}")
            system = memory.system_message(thread_id="chat-1")
            print(f"system message shows the data fenced: {'<working_memory_data>' in system}")


if __name__ == "__main__":
    main()
