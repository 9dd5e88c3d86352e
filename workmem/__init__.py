"""workmem: durable working memory for AI agents on the database your team already runs.

Open a backend by URL and use the :class:`MemoryStorage` contract::

    import workmem

    with workmem.connect("file:agent.db") as storage:
        storage.update_resource("user-1", working_memory="# User Information")
"""

from __future__ import annotations

from workmem.agent import (
    DEFAULT_TEMPLATE,
    TOOL_NAME,
    AsyncMemory,
    Memory,
    SubAgentResourceId,
    WorkingMemorySchema,
    sub_agent_resource_id,
)
from workmem.aio import AsyncMemoryStorage
from workmem.errors import (
    RETRYABLE_ERRORS,
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    DriverError,
    HarnessError,
    MissingDriverError,
    MissingTablesError,
    OperationNotSupportedError,
    QueryTimeoutError,
    ReadOnlyMemoryError,
    StorageClosedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    UnknownSchemeError,
    UnreadableRecordError,
    ValidationError,
    VersionNotFoundError,
    WorkingMemoryFormatError,
    WorkingMemoryTooLargeError,
    WorkmemError,
    WrongEventLoopError,
)
from workmem.history import ErasedResource, HistoryPage, HistoryPolicy, MemoryVersion
from workmem.hooks import Capabilities
from workmem.masking import Secret
from workmem.merge_patch import apply_merge_patch
from workmem.records import UNSET, WORKING_MEMORY_KEY, RecordPage, Resource, Scope, Thread, ThreadPage
from workmem.registry import connect, connect_async, known_schemes, register
from workmem.storage import MemoryStorage
from workmem.transfer import copy, copy_async

__all__ = [
    "DEFAULT_TEMPLATE",
    "RETRYABLE_ERRORS",
    "TOOL_NAME",
    "UNSET",
    "WORKING_MEMORY_KEY",
    "AsyncMemory",
    "AsyncMemoryStorage",
    "BackendBusyError",
    "BackendRefusedError",
    "BackendUnavailableError",
    "Capabilities",
    "DriverError",
    "ErasedResource",
    "HarnessError",
    "HistoryPage",
    "HistoryPolicy",
    "Memory",
    "MemoryStorage",
    "MemoryVersion",
    "MissingDriverError",
    "MissingTablesError",
    "OperationNotSupportedError",
    "QueryTimeoutError",
    "ReadOnlyMemoryError",
    "RecordPage",
    "Resource",
    "Scope",
    "Secret",
    "StorageClosedError",
    "SubAgentResourceId",
    "Thread",
    "ThreadExistsError",
    "ThreadNotFoundError",
    "ThreadOwnershipError",
    "ThreadPage",
    "UnknownSchemeError",
    "UnreadableRecordError",
    "ValidationError",
    "VersionNotFoundError",
    "WorkingMemoryFormatError",
    "WorkingMemorySchema",
    "WorkingMemoryTooLargeError",
    "WorkmemError",
    "WrongEventLoopError",
    "apply_merge_patch",
    "connect",
    "connect_async",
    "copy",
    "copy_async",
    "known_schemes",
    "register",
    "sub_agent_resource_id",
]

__version__ = "0.1.0"  # the one version source: pyproject.toml reads it ([tool.hatch.version])
