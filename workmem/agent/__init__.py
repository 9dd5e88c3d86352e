"""The working-memory layer: :class:`Memory` and what it is built from.

``Memory`` wraps any :class:`~workmem.storage.MemoryStorage` (or a URL) and
gives an agent its working memory: threads, the stored memory in a Markdown
template or a JSON schema, the ``updateWorkingMemory`` tool and the system
message that shows the memory to the model. ``AsyncMemory`` is the same on an
:class:`~workmem.aio.AsyncMemoryStorage`, as coroutines (one implementation:
:mod:`workmem.agent.operations`).
"""

from __future__ import annotations

from workmem.agent.aio import AsyncMemory
from workmem.agent.memory import Memory, ToolResult
from workmem.agent.prompt import DATA_TAG, MEMORY_MESSAGE_NAME, escape_data, is_memory_message
from workmem.agent.schema import WorkingMemorySchema
from workmem.agent.sub_agents import SUB_AGENT_PREFIX, SubAgentResourceId, sub_agent_resource_id
from workmem.agent.templates import DEFAULT_TEMPLATE
from workmem.agent.tool import TOOL_NAME, to_anthropic_tool, to_openai_tool

__all__ = [
    "DATA_TAG",
    "DEFAULT_TEMPLATE",
    "MEMORY_MESSAGE_NAME",
    "SUB_AGENT_PREFIX",
    "TOOL_NAME",
    "AsyncMemory",
    "Memory",
    "SubAgentResourceId",
    "ToolResult",
    "WorkingMemorySchema",
    "escape_data",
    "is_memory_message",
    "sub_agent_resource_id",
    "to_anthropic_tool",
    "to_openai_tool",
]
