"""``Memory``: the working-memory layer an agent developer uses, on any ``MemoryStorage``.

Everything here is written against the storage contract only, so it behaves
the same on every backend::

    from workmem import Memory

    with Memory("file:agent.db") as memory:
        memory.create_thread("t-1", resource_id="user-1")
        messages = memory.process_input(messages, thread_id="t-1")       # adds the memory system message
        tools = [memory.tool_definition(format="openai")]
        ...                                                              # call the model
        result = memory.call_tool(tool_call.arguments, thread_id="t-1")  # a dict to send back to the model
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self

from workmem._drive import run_sync
from workmem.agent import operations
from workmem.agent.operations import MemoryBase, ToolResult
from workmem.agent.schema import SchemaInput
from workmem.errors import ValidationError
from workmem.history import ErasedResource, HistoryPage
from workmem.masking import Secret, forgets_locals
from workmem.records import UNSET, Direction, OrderBy, Scope, Thread, ThreadPage, Unset
from workmem.registry import connect
from workmem.storage import MemoryStorage

__all__ = ["Memory", "ToolResult"]


class Memory(MemoryBase):
    """Working memory for agents: threads, the stored memory, the update tool and the system message.

    ``storage`` is a :class:`~workmem.storage.MemoryStorage` or a URL for
    :func:`workmem.connect` (then this ``Memory`` owns the connection and closes
    it in :meth:`close` and on leaving a ``with`` block).

    ``scope="resource"`` (default) keeps one memory per resource, shared by all
    its threads; ``scope="thread"`` keeps it in ``thread.metadata["workingMemory"]``.

    ``template`` (Markdown, replace semantics) and ``schema`` (a JSON Schema dict
    or a Pydantic model class, RFC 7396 merge semantics) are mutually exclusive;
    with neither, :data:`~workmem.agent.templates.DEFAULT_TEMPLATE` is used.

    ``read_only=True`` makes every write raise :class:`ReadOnlyMemoryError`
    (working memory and threads alike), offers no tool and renders the memory as
    context only.

    ``max_chars`` limits the size of the working memory, counted as ``len()`` of
    the text workmem stores (schema mode: the compact JSON text of the document).
    An update whose result would be larger is refused before anything is
    written: :meth:`call_tool` tells the model the limit, the size it tried and
    how to condense; :meth:`update_working_memory`, :meth:`merge_working_memory`
    and a ``workingMemory`` in thread metadata raise
    :class:`~workmem.errors.WorkingMemoryTooLargeError` (``limit``, ``size``,
    ``current``). :meth:`system_message` shows the use ("1,840 of 4,000
    characters"). Memory already stored above the limit (before the limit was
    set, or by another program) is still read and shown, marked as over the
    limit; an update that does not make it larger is accepted, one that grows
    it is refused. The limit is passed down to the storage's write
    (``max_chars=`` of :meth:`~workmem.storage.MemoryStorage.merge_working_memory`
    and :meth:`~workmem.storage.MemoryStorage.set_working_memory`), which decides
    it inside its atomic step: however many updates run at once (parallel tool
    calls), the stored memory never ends above the limit. ``None`` (default): no limit.

    ``history`` (with a URL): ``True`` records every change of the working memory as a
    version, ``N`` keeps the newest N per memory (``connect(url, history=...)``; default
    off). Read it with :meth:`working_memory_history`, put a version back with
    :meth:`restore_working_memory`; :meth:`delete_resource` forgets a user.

    Resource ids starting with ``"workmem-sub-agent:"`` are reserved for isolated
    sub-agents: every method refuses them as plain strings (``ValidationError``)
    and takes them only as a :class:`~workmem.agent.sub_agents.SubAgentResourceId`
    (see :func:`~workmem.agent.sub_agents.sub_agent_resource_id`).
    """

    _kind: ClassVar[str] = "Memory"

    @forgets_locals  # a URL given as storage is in the frames below
    def __init__(
        self,
        storage: MemoryStorage | str | os.PathLike[str] | Secret,
        *,
        scope: Scope = "resource",
        template: str | None = None,
        schema: SchemaInput | None = None,
        read_only: bool = False,
        max_chars: int | None = None,
        history: bool | int | None = None,
    ) -> None:
        super().__init__(scope=scope, template=template, schema=schema, read_only=read_only, max_chars=max_chars)
        if isinstance(storage, str | os.PathLike | Secret):  # a URL (maybe held as a Secret), or a libSQL file's path
            # read-only: create nothing either (a SELECT-only role, a read-only file)
            self.storage: MemoryStorage = connect(storage, create=not read_only, history=history)
            self._owns_storage = True
        elif history is not None:
            raise ValidationError("history= goes with a URL; for a storage you opened, connect(url, history=...)")
        elif isinstance(storage, MemoryStorage):
            self.storage = storage
            self._owns_storage = False
        else:
            raise ValidationError(
                f"storage must be a MemoryStorage, a URL string or a path, not {type(storage).__name__}"
            )

    def close(self) -> None:
        """Close the storage if this ``Memory`` opened it from a URL. Idempotent."""
        if self._owns_storage:
            self.storage.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- threads -------------------------------------------------------------------

    def create_thread(
        self,
        thread_id: str | None = None,
        *,
        resource_id: str,
        title: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> Thread:
        """Create a thread owned by ``resource_id`` (a new UUID when ``thread_id`` is ``None``).

        ``metadata["workingMemory"]`` (text, or in schema mode a dict or JSON
        text) sets the initial working memory: on the resource under resource
        scope (the thread metadata keeps no copy), in the thread metadata under
        thread scope. An existing id raises :class:`ThreadExistsError`, whoever
        owns it, and changes nothing: of several racing creates of one id exactly
        one succeeds. To reuse a thread that may exist, call :meth:`get_thread`
        first, or catch :class:`ThreadExistsError`.
        """
        return run_sync(operations.create_thread(self, thread_id, resource_id, title, metadata))

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        """The thread or ``None``; a ``resource_id`` that does not own it raises :class:`ThreadOwnershipError`."""
        return run_sync(operations.get_thread(self, thread_id, resource_id))

    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        resource_id: str | None = None,
    ) -> Thread:
        """Change the title and merge metadata shallowly; ``metadata["workingMemory"]`` as in :meth:`create_thread`.

        ``metadata={"workingMemory": None}`` clears the working memory of the scope.
        Raises :class:`ThreadNotFoundError` for a missing thread and
        :class:`ThreadOwnershipError` when ``resource_id`` is not its owner.
        """
        return run_sync(operations.update_thread(self, thread_id, title, metadata, resource_id))

    def delete_thread(self, thread_id: str, *, resource_id: str | None = None) -> bool:
        """Delete the thread; ``True`` if it existed. A non-owner ``resource_id`` raises, deleting nothing."""
        return run_sync(operations.delete_thread(self, thread_id, resource_id))

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        """One page of the resource's threads (as :meth:`MemoryStorage.list_threads`)."""
        return run_sync(operations.list_threads(self, resource_id, page, per_page, order_by, direction))

    # -- working memory ------------------------------------------------------------

    def get_working_memory(self, *, thread_id: str | None = None, resource_id: str | None = None) -> str | None:
        """The stored working memory text of this scope, or ``None`` when none is stored.

        Under resource scope a ``thread_id`` alone is enough: the resource is the
        thread's owner. A ``thread_id`` naming no thread raises
        :class:`ThreadNotFoundError` wherever the memory's place depends on it: in
        thread scope always (reads such as this one, :meth:`system_message` and
        :meth:`process_input`, as well as writes), in resource scope when no
        ``resource_id`` is given. A resource with no stored memory reads as ``None``.
        In read-only mode a thread that does not exist yet reads as ``None`` instead
        (the memory of a new conversation is empty; a read-only memory cannot create
        its thread), in the other reads too; nothing is created.
        """
        return run_sync(operations.get_working_memory(self, thread_id, resource_id))

    def get_working_memory_data(
        self, *, thread_id: str | None = None, resource_id: str | None = None
    ) -> dict[str, Any]:
        """Schema mode: the stored memory as a dict (``{}`` when none is stored)."""
        return run_sync(operations.get_working_memory_data(self, thread_id, resource_id))

    def update_working_memory(
        self,
        content: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        """Replace the working memory whole.

        Template mode takes text. Schema mode takes a dict or JSON text, which
        must match the schema's document form (every field optional). A result
        over ``max_chars`` that is longer than the text stored now raises
        :class:`~workmem.errors.WorkingMemoryTooLargeError`, writing nothing
        (decided by the storage in the write's atomic step).

        ``source`` (a JSON object) says who made the change; with history on
        (``connect(url, history=True)``) the version records it, together with
        ``threadId`` when a ``thread_id`` is given (see :meth:`working_memory_history`).
        """
        run_sync(operations.update_working_memory(self, content, thread_id, resource_id, source))

    def merge_working_memory(
        self,
        patch: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Schema mode: merge an RFC 7396 patch (dict or JSON text) atomically; return the merged memory.

        Before anything is written the patch is checked against the schema's
        patch form, and the result of merging it into the memory as stored now is
        checked against the document form; either failing raises
        :class:`ValidationError` with nothing written. The write itself is the
        storage's atomic merge. Because the derived forms are closed under merge
        (see :mod:`workmem.agent.schema`), a concurrent merge by another writer
        in between cannot make the result invalid, as long as the stored memory
        was valid. The ``max_chars`` limit is decided by the storage on the merged
        result inside its atomic merge, so concurrent merges cannot pass it
        together (:class:`~workmem.errors.WorkingMemoryTooLargeError`, nothing written).
        ``source``: as in :meth:`update_working_memory`.
        """
        return run_sync(operations.merge_working_memory(self, patch, thread_id, resource_id, source))

    # -- history and erasure ---------------------------------------------------------

    def working_memory_history(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = 20,
        before: int | None = None,
    ) -> HistoryPage:
        """The versions of this memory's working memory, newest first, at most ``limit``.

        Recorded while the storage has history on (``Memory(url, history=True)`` or
        ``connect(url, history=True)``): each version is a change (``kind`` ``"set"``,
        ``"merge"``, ``"restore"`` or ``"import"``), the text after it, its time and
        ``source``, for a change made by the model's tool call
        ``{"tool": "updateWorkingMemory", "threadId": ..., ...}`` plus what the framework
        integration adds (``framework``, ``agent``, ``toolCallId``). The ids name the memory
        as in :meth:`get_working_memory`. Pass the page's ``next_before`` as ``before``
        for older versions. :class:`~workmem.errors.OperationNotSupportedError` on a
        backend without history.
        """
        return run_sync(operations.working_memory_history(self, thread_id, resource_id, limit, before))

    def restore_working_memory(
        self,
        version: int,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Write ``version``'s text back as the working memory (a new version, ``kind="restore"``); return it.

        History is never rewritten: the restore is recorded like any change, its
        ``source`` carrying ``restoredFrom``. Needs history on;
        :class:`~workmem.errors.VersionNotFoundError` when that version is not kept.
        ``max_chars`` applies as to any write. Refused in read-only mode.
        """
        return run_sync(operations.restore_working_memory(self, version, thread_id, resource_id, source))

    def delete_resource(self, resource_id: str) -> ErasedResource:
        """Forget a user: the resource, every thread it owns, their working memory and all its history.

        Returns what was removed; idempotent; never touches another resource's records
        (see :meth:`MemoryStorage.delete_resource <workmem.storage.MemoryStorage.delete_resource>`).
        Refused in read-only mode.
        """
        return run_sync(operations.delete_resource(self, resource_id))

    # -- what the model sees and does ----------------------------------------------------

    def call_tool(
        self,
        arguments: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> ToolResult:
        """Run an ``updateWorkingMemory`` call from the model; return a result dict to send back to it.

        ``arguments`` is the call's arguments as a dict or JSON string. What the
        model got wrong (invalid JSON, a wrong shape, a value the schema
        rejects) comes back as ``{"ok": False, "error": "..."}`` with nothing
        written, so the agent loop can hand it to the model to retry. An empty
        update (blank, the unfilled template, ``{}``, or every schema field set
        to ``null``) would erase the memory and is ignored:
        ``{"ok": True, "action": "ignored", ...}``. Otherwise the memory is
        replaced (template) or merged (schema): ``{"ok": True, "action":
        "replaced" | "merged", "message": ...}``. Template text is stored with
        ``&amp;``, ``&lt;`` and ``&gt;`` decoded, undoing the escapes of
        :meth:`system_message`, so a memory copied back as shown is unchanged.

        Mistakes of the calling code raise instead: :class:`ReadOnlyMemoryError`
        in read-only mode, :class:`ValidationError` for missing or invalid ids,
        :class:`ThreadNotFoundError`, :class:`ThreadOwnershipError`, and storage errors.

        With history on, a stored update records the source
        ``{"tool": "updateWorkingMemory", "threadId": thread_id}`` plus ``source``
        (an integration passes ``framework``, ``agent`` and ``toolCallId``); an
        invalid ``source`` raises :class:`ValidationError` (the caller's mistake).
        """
        return run_sync(operations.call_tool(self, arguments, thread_id, resource_id, source))

    def system_message(self, *, thread_id: str | None = None, resource_id: str | None = None) -> str:
        """The system message for the model: instructions, the template or schema, and the current data.

        The stored data is fenced in ``<working_memory_data>`` with ``&``, ``<``
        and ``>`` escaped (template mode as ``&amp;``, ``&lt;``, ``&gt;``; schema
        mode as JSON's ``\\u0026``, ``\\u003c``, ``\\u003e``), and marked as data
        rather than instructions. Read-only mode renders only the data, as context.
        """
        return run_sync(operations.system_message(self, thread_id, resource_id))

    def process_input(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> list[Mapping[str, Any]]:
        """A new OpenAI-style message list with the memory system message after the leading system messages.

        The message is ``{"role": "system", "content": ..., "name": "workmem"}``;
        one inserted earlier is replaced, so calling this on every turn never
        stacks copies, also when the history was stored by a framework that
        dropped ``name`` or turned the content into text parts (it is then found
        by its content, see :func:`~workmem.agent.prompt.is_memory_message`).
        ``messages`` itself is not changed.
        """
        return run_sync(operations.process_input(self, messages, thread_id, resource_id))
