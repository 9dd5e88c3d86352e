"""``AsyncMemory``: :class:`~workmem.agent.Memory` as coroutines, on any ``AsyncMemoryStorage``.

The same settings, rules, results and errors as ``Memory`` (whose docstrings
are normative for both): every method that touches storage awaits the same flow
of :mod:`workmem.agent.operations` that ``Memory`` runs; what touches no storage
(:meth:`~workmem.agent.operations.MemoryBase.tool_definition`, :attr:`mode`) is the
very same method::

    import workmem

    async with await workmem.AsyncMemory.open("file:agent.db") as memory:
        await memory.create_thread("t-1", resource_id="user-1")
        messages = await memory.process_input(messages, thread_id="t-1")
        tools = [memory.tool_definition(format="openai")]
        ...                                                                    # call the model
        result = await memory.call_tool(tool_call.arguments, thread_id="t-1")  # send it back to the model
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self

from workmem.agent import operations
from workmem.agent.memory import Memory
from workmem.agent.operations import MemoryBase, ToolResult
from workmem.agent.schema import SchemaInput
from workmem.aio import AsyncMemoryStorage, ThreadedAsyncStorage
from workmem.errors import ValidationError
from workmem.history import ErasedResource, HistoryPage
from workmem.masking import Secret, forgets_locals_async
from workmem.records import UNSET, Direction, OrderBy, Scope, Thread, ThreadPage, Unset
from workmem.registry import connect_async
from workmem.storage import MemoryStorage

__all__ = ["AsyncMemory"]


class AsyncMemory(MemoryBase):
    """Working memory for agents, as coroutines: :class:`~workmem.agent.Memory` for asyncio code.

    ``AsyncMemory(storage, ...)`` uses an :class:`~workmem.aio.AsyncMemoryStorage`
    the caller opened (with :func:`workmem.connect_async`) and keeps owning:
    :meth:`close` leaves it open. ``await AsyncMemory.open(url, ...)`` opens the
    storage itself and owns it: :meth:`close`, or leaving an ``async with`` block,
    closes it. The settings (``scope``, ``template``, ``schema``, ``read_only``, ``max_chars``)
    and every method behave as ``Memory``'s; the methods that touch storage are
    coroutines, :meth:`tool_definition` and :attr:`mode` are not. Safe to share
    between tasks: concurrent schema-mode merges are atomic in the database, and so is the ``max_chars`` check.
    """

    _kind: ClassVar[str] = "AsyncMemory"

    def __init__(
        self,
        storage: AsyncMemoryStorage,
        *,
        scope: Scope = "resource",
        template: str | None = None,
        schema: SchemaInput | None = None,
        read_only: bool = False,
        max_chars: int | None = None,
    ) -> None:
        super().__init__(scope=scope, template=template, schema=schema, read_only=read_only, max_chars=max_chars)
        if not isinstance(storage, AsyncMemoryStorage):
            raise ValidationError(_not_async_storage(storage))
        self.storage: AsyncMemoryStorage = storage
        """The storage the working memory lives in."""
        self._owns_storage = False

    @classmethod
    @forgets_locals_async  # the URL is in the frames below
    async def open(
        cls,
        url: str | os.PathLike[str] | Secret,
        *,
        scope: Scope = "resource",
        template: str | None = None,
        schema: SchemaInput | None = None,
        read_only: bool = False,
        max_chars: int | None = None,
        **options: Any,
    ) -> Self:
        """An ``AsyncMemory`` on the storage :func:`workmem.connect_async` opens for ``url``, owned by it.

        The settings are checked before anything is opened. ``read_only=True``
        opens with ``create=False`` (nothing is created: a SELECT-only role, a
        read-only file works). ``options`` go to ``connect_async`` (``history=True``, pool sizes, timeouts, ...).
        """
        if not isinstance(url, str | os.PathLike | Secret):
            raise ValidationError(f"url must be a URL string or a path, not {type(url).__name__}")
        memory = cls.__new__(cls)
        # The settings first, as the constructor checks them: a bad one raises before any connection.
        MemoryBase.__init__(
            memory, scope=scope, template=template, schema=schema, read_only=read_only, max_chars=max_chars
        )
        memory.storage = await connect_async(url, create=not read_only, **options)
        memory._owns_storage = True
        return memory

    @classmethod
    def from_memory(cls, memory: Memory) -> Self:
        """An ``AsyncMemory`` with ``memory``'s settings on ``memory``'s storage, for code that runs in coroutines.

        For a sync :class:`~workmem.agent.Memory` the rest of an application already
        uses, handed to an agent framework (which runs tools and prompts as
        coroutines): the sync storage runs on worker threads of a
        :class:`~workmem.aio.ThreadedAsyncStorage`, as :func:`workmem.connect_async`
        runs a sync-only adapter, so the event loop never waits on it. Both see the
        same memory. ``memory`` keeps owning its storage: closing this
        ``AsyncMemory`` leaves it open, and ``memory.close()`` closes it for both.
        """
        if not isinstance(memory, Memory):
            raise ValidationError(f"AsyncMemory.from_memory takes a Memory, not {type(memory).__name__}")
        view = cls.__new__(cls)
        view.__dict__.update(vars(memory))  # the settings as Memory checked them: scope, template or schema, ...
        view.storage = ThreadedAsyncStorage(memory.storage)
        view._owns_storage = False
        return view

    async def close(self) -> None:
        """Close the storage if :meth:`open` opened it. Idempotent."""
        if self._owns_storage:
            await self.storage.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- threads -------------------------------------------------------------------

    async def create_thread(
        self,
        thread_id: str | None = None,
        *,
        resource_id: str,
        title: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> Thread:
        """See :meth:`Memory.create_thread <workmem.agent.Memory.create_thread>`."""
        return await operations.create_thread(self, thread_id, resource_id, title, metadata)

    async def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        """See :meth:`Memory.get_thread <workmem.agent.Memory.get_thread>`."""
        return await operations.get_thread(self, thread_id, resource_id)

    async def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        resource_id: str | None = None,
    ) -> Thread:
        """See :meth:`Memory.update_thread <workmem.agent.Memory.update_thread>`."""
        return await operations.update_thread(self, thread_id, title, metadata, resource_id)

    async def delete_thread(self, thread_id: str, *, resource_id: str | None = None) -> bool:
        """See :meth:`Memory.delete_thread <workmem.agent.Memory.delete_thread>`."""
        return await operations.delete_thread(self, thread_id, resource_id)

    async def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        """See :meth:`Memory.list_threads <workmem.agent.Memory.list_threads>`."""
        return await operations.list_threads(self, resource_id, page, per_page, order_by, direction)

    # -- working memory ------------------------------------------------------------

    async def get_working_memory(self, *, thread_id: str | None = None, resource_id: str | None = None) -> str | None:
        """See :meth:`Memory.get_working_memory <workmem.agent.Memory.get_working_memory>`."""
        return await operations.get_working_memory(self, thread_id, resource_id)

    async def get_working_memory_data(
        self, *, thread_id: str | None = None, resource_id: str | None = None
    ) -> dict[str, Any]:
        """See :meth:`Memory.get_working_memory_data <workmem.agent.Memory.get_working_memory_data>`."""
        return await operations.get_working_memory_data(self, thread_id, resource_id)

    async def update_working_memory(
        self,
        content: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        """See :meth:`Memory.update_working_memory <workmem.agent.Memory.update_working_memory>`."""
        await operations.update_working_memory(self, content, thread_id, resource_id, source)

    async def merge_working_memory(
        self,
        patch: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """See :meth:`Memory.merge_working_memory <workmem.agent.Memory.merge_working_memory>`."""
        return await operations.merge_working_memory(self, patch, thread_id, resource_id, source)

    # -- history and erasure ---------------------------------------------------------

    async def working_memory_history(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = 20,
        before: int | None = None,
    ) -> HistoryPage:
        """See :meth:`Memory.working_memory_history <workmem.agent.Memory.working_memory_history>`."""
        return await operations.working_memory_history(self, thread_id, resource_id, limit, before)

    async def restore_working_memory(
        self,
        version: int,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str | None:
        """See :meth:`Memory.restore_working_memory <workmem.agent.Memory.restore_working_memory>`."""
        return await operations.restore_working_memory(self, version, thread_id, resource_id, source)

    async def delete_resource(self, resource_id: str) -> ErasedResource:
        """See :meth:`Memory.delete_resource <workmem.agent.Memory.delete_resource>`."""
        return await operations.delete_resource(self, resource_id)

    # -- what the model sees and does ----------------------------------------------------

    async def call_tool(
        self,
        arguments: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> ToolResult:
        """See :meth:`Memory.call_tool <workmem.agent.Memory.call_tool>`."""
        return await operations.call_tool(self, arguments, thread_id, resource_id, source)

    async def system_message(self, *, thread_id: str | None = None, resource_id: str | None = None) -> str:
        """See :meth:`Memory.system_message <workmem.agent.Memory.system_message>`."""
        return await operations.system_message(self, thread_id, resource_id)

    async def process_input(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> list[Mapping[str, Any]]:
        """See :meth:`Memory.process_input <workmem.agent.Memory.process_input>`."""
        return await operations.process_input(self, messages, thread_id, resource_id)


def _not_async_storage(storage: object) -> str:
    if isinstance(storage, str | os.PathLike):
        return "AsyncMemory(storage) takes an AsyncMemoryStorage; to open a URL, use await AsyncMemory.open(url)"
    if isinstance(storage, MemoryStorage):
        return (
            "AsyncMemory needs an AsyncMemoryStorage, not the sync MemoryStorage "
            f"{type(storage).__name__}: open it with workmem.connect_async, or use Memory"
        )
    return f"storage must be an AsyncMemoryStorage, not {type(storage).__name__}"
