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

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

from workmem.agent.agents import check_resource_id
from workmem.agent.prompt import insert_memory_message, render_system_message, unescape_data, unfence
from workmem.agent.schema import SchemaInput, WorkingMemorySchema
from workmem.agent.templates import DEFAULT_TEMPLATE, check_template, is_blank_update
from workmem.agent.tool import (
    ToolArgumentError,
    ToolFormat,
    a_json_type,
    format_tool,
    load_model_json,
    parse_tool_arguments,
    tool_definition,
)
from workmem.errors import ReadOnlyMemoryError, ThreadNotFoundError, ValidationError
from workmem.merge_patch import apply_merge_patch, parse_json_object
from workmem.records import UNSET, WORKING_MEMORY_KEY, Direction, OrderBy, Scope, Thread, ThreadPage, Unset
from workmem.registry import connect
from workmem.storage import MemoryStorage, check_owner, thread_working_memory, thread_working_memory_to_merge
from workmem.validation import dump_json, validate_id, validate_json_object, validate_text

__all__ = ["Memory", "ToolResult"]

ToolResult = dict[str, Any]
"""What :meth:`Memory.call_tool` returns: ``{"ok": True, "action", "message"}`` or ``{"ok": False, "error"}``."""


@dataclass(frozen=True, slots=True)
class _Address:
    """Where one working memory lives, as the storage methods take it."""

    scope: Scope
    resource_id: str | None
    thread_id: str | None


class Memory:
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

    Resource ids starting with ``"workmem-sub-agent:"`` are reserved for isolated
    sub-agents: every method refuses them as plain strings (``ValidationError``)
    and takes them only as a :class:`~workmem.agent.agents.SubAgentResourceId`
    (see :func:`~workmem.agent.agents.sub_agent_resource_id`).
    """

    def __init__(
        self,
        storage: MemoryStorage | str | os.PathLike[str],
        *,
        scope: Scope = "resource",
        template: str | None = None,
        schema: SchemaInput | None = None,
        read_only: bool = False,
    ) -> None:
        if scope not in ("resource", "thread"):
            raise ValidationError(f"scope must be 'resource' or 'thread', not {scope!r}")
        if template is not None and schema is not None:
            raise ValidationError("give either a template (Markdown, replace) or a schema (JSON, merge), not both")
        if not isinstance(read_only, bool):
            raise ValidationError(f"read_only must be a bool, not {type(read_only).__name__}")
        self.scope: Scope = scope
        """``"resource"`` or ``"thread"``."""
        self.read_only = read_only
        """Whether every write is refused."""
        self.schema: WorkingMemorySchema | None = None if schema is None else WorkingMemorySchema(schema)
        """The schema and its derived forms (schema mode), else ``None``."""
        self.template: str | None = None if self.schema is not None else check_template(template or DEFAULT_TEMPLATE)
        """The Markdown template (template mode), else ``None``."""
        if isinstance(storage, str | os.PathLike):  # a URL, or the path of a libSQL file
            # read-only: create nothing either (a SELECT-only role, a read-only file)
            self.storage: MemoryStorage = connect(storage, create=False) if read_only else connect(storage)
            self._owns_storage = True
        elif isinstance(storage, MemoryStorage):
            self.storage = storage
            self._owns_storage = False
        else:
            raise ValidationError(
                f"storage must be a MemoryStorage, a URL string or a path, not {type(storage).__name__}"
            )

    @property
    def mode(self) -> Literal["template", "schema"]:
        """``"template"`` (replace) or ``"schema"`` (merge)."""
        return "template" if self.schema is None else "schema"

    def __repr__(self) -> str:
        return f"Memory({self.storage!r}, scope={self.scope!r}, mode={self.mode!r}, read_only={self.read_only})"

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
        self._require_writable("create_thread")
        thread_id = str(uuid.uuid4()) if thread_id is None else validate_id(thread_id, "thread id")
        rest, given = self._split_metadata(metadata)
        initial = None if given is UNSET else given  # null on a new thread: nothing to set
        if self.scope == "thread" and initial is not None:
            rest[WORKING_MEMORY_KEY] = initial
        resource_id = check_resource_id(resource_id)
        thread = Thread(thread_id, resource_id, title, rest if metadata is not None else None)
        stored = self.storage.create_thread(thread)  # insert-only, atomic in the database
        if self.scope == "resource" and initial is not None:
            self.storage.update_resource(resource_id, working_memory=initial)
        return stored

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        """The thread or ``None``; a ``resource_id`` that does not own it raises :class:`ThreadOwnershipError`."""
        thread = self.storage.get_thread(thread_id)
        if thread is not None:
            check_owner(thread, None if resource_id is None else check_resource_id(resource_id))
        return thread

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
        self._require_writable("update_thread")
        thread = self._existing_thread(thread_id, resource_id)
        new_metadata: Mapping[str, Any] | Unset | None = metadata
        given: str | Unset | None = UNSET
        if isinstance(metadata, Mapping):
            rest, given = self._split_metadata(metadata)
            if self.scope == "thread" and given is not UNSET:
                rest[WORKING_MEMORY_KEY] = given
            new_metadata = rest if rest else UNSET
        if title is not UNSET or new_metadata is not UNSET:
            thread = self.storage.update_thread(thread_id, title=title, metadata=new_metadata)
        if self.scope == "resource" and given is not UNSET:
            self.storage.update_resource(thread.resource_id, working_memory=given)
        return thread

    def delete_thread(self, thread_id: str, *, resource_id: str | None = None) -> bool:
        """Delete the thread; ``True`` if it existed. A non-owner ``resource_id`` raises, deleting nothing."""
        self._require_writable("delete_thread")
        if resource_id is not None:
            self.get_thread(thread_id, resource_id=resource_id)
        return self.storage.delete_thread(thread_id)

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
        return self.storage.list_threads(
            check_resource_id(resource_id), page=page, per_page=per_page, order_by=order_by, direction=direction
        )

    # -- working memory ------------------------------------------------------------

    def get_working_memory(self, *, thread_id: str | None = None, resource_id: str | None = None) -> str | None:
        """The stored working memory text of this scope, or ``None`` when none is stored.

        Under resource scope a ``thread_id`` alone is enough: the resource is the
        thread's owner. A ``thread_id`` naming no thread raises
        :class:`ThreadNotFoundError` wherever the memory's place depends on it: in
        thread scope always (reads such as this one, :meth:`system_message` and
        :meth:`process_input`, as well as writes), in resource scope when no
        ``resource_id`` is given. A resource with no stored memory reads as ``None``.
        """
        return self._read(self._address(thread_id, resource_id))

    def get_working_memory_data(
        self, *, thread_id: str | None = None, resource_id: str | None = None
    ) -> dict[str, Any]:
        """Schema mode: the stored memory as a dict (``{}`` when none is stored)."""
        self._require_schema("get_working_memory_data")
        return parse_json_object(self.get_working_memory(thread_id=thread_id, resource_id=resource_id))

    def update_working_memory(
        self,
        content: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> None:
        """Replace the working memory whole.

        Template mode takes text. Schema mode takes a dict or JSON text, which
        must match the schema's document form (every field optional).
        """
        self._require_writable("update_working_memory")
        text = self._document_text(content, "working memory")
        self._write(self._address(thread_id, resource_id), text)

    def merge_working_memory(
        self,
        patch: str | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> dict[str, Any]:
        """Schema mode: merge an RFC 7396 patch (dict or JSON text) atomically; return the merged memory.

        Before anything is written the patch is checked against the schema's
        patch form, and the result of merging it into the memory as stored now is
        checked against the document form; either failing raises
        :class:`ValidationError` with nothing written. The write itself is the
        storage's atomic merge. Because the derived forms are closed under merge
        (see :mod:`workmem.agent.schema`), a concurrent merge by another writer
        in between cannot make the result invalid, as long as the stored memory
        was valid.
        """
        self._require_schema("merge_working_memory")
        self._require_writable("merge_working_memory")
        checked = self._check_patch(patch)
        return self._merge(self._address(thread_id, resource_id), checked)

    # -- what the model sees and does ----------------------------------------------------

    def tool_definition(self, *, format: ToolFormat = "neutral") -> dict[str, Any] | None:
        """The ``updateWorkingMemory`` tool, or ``None`` in read-only mode (there is no tool to offer).

        ``format``: ``"neutral"`` ``{"name", "description", "parameters"}``,
        ``"openai"`` ``{"type": "function", "function": {...}}`` or
        ``"anthropic"`` ``{"name", "description", "input_schema"}``.
        """
        if self.read_only:
            return None
        return format_tool(tool_definition(self.schema), format)

    def call_tool(
        self, arguments: str | Mapping[str, Any], *, thread_id: str | None = None, resource_id: str | None = None
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
        """
        self._require_writable("call_tool")
        address = self._address(thread_id, resource_id)
        try:
            value = parse_tool_arguments(arguments)
            if self.schema is None:
                assert self.template is not None
                if not isinstance(value, str):
                    raise ToolArgumentError(
                        f"'memory' must be a string holding the whole Markdown text, not {a_json_type(value)}"
                    )
                # The model saw the memory with &, < and > escaped and may copy it back as shown:
                # decoding exactly those escapes stores what it meant, so round trips are stable.
                value = unescape_data(unfence(validate_text(value, "'memory'")))  # fence copied too: dropped
                if is_blank_update(value, [self.template]):
                    return _ignored()
                self._write(address, value)
                return {"ok": True, "action": "replaced", "message": "Working memory replaced."}
            patch = self._check_patch(value)
            if not patch:  # changes nothing; every field set to null is a real update (it clears the memory)
                return _ignored(_EMPTY_PATCH)
            self._merge(address, patch)
            return {"ok": True, "action": "merged", "message": "Working memory updated."}
        except ValidationError as exc:  # ToolArgumentError included: what the model sent was unusable
            return {"ok": False, "error": f"{str(exc).rstrip('.')}. Nothing was stored."}

    def system_message(self, *, thread_id: str | None = None, resource_id: str | None = None) -> str:
        """The system message for the model: instructions, the template or schema, and the current data.

        The stored data is fenced in ``<working_memory_data>`` with ``&``, ``<``
        and ``>`` escaped (template mode as ``&amp;``, ``&lt;``, ``&gt;``; schema
        mode as JSON's ``\\u0026``, ``\\u003c``, ``\\u003e``), and marked as data
        rather than instructions. Read-only mode renders only the data, as context.
        """
        stored = self._read(self._address(thread_id, resource_id))
        if self.schema is None:
            assert self.template is not None
            structure = self.template
            data = stored if stored is not None and stored.strip() else self.template
        else:
            structure = self.schema.to_json("document")
            data = _pretty_json(stored)
        return render_system_message(
            mode=self.mode, scope=self.scope, structure=structure, data=data, read_only=self.read_only
        )

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
        content = self.system_message(thread_id=thread_id, resource_id=resource_id)
        return insert_memory_message(messages, content)

    # -- internals --------------------------------------------------------------------

    def _require_writable(self, action: str) -> None:
        if self.read_only:
            raise ReadOnlyMemoryError(f"{action} refused: this Memory is read-only")

    def _require_schema(self, action: str) -> None:
        if self.schema is None:
            raise ValidationError(f"{action} needs schema mode: create the Memory with schema=...")

    def _existing_thread(self, thread_id: str, resource_id: str | None) -> Thread:
        thread = self.get_thread(thread_id, resource_id=resource_id)
        if thread is None:
            raise ThreadNotFoundError(thread_id)
        return thread

    def _address(self, thread_id: str | None, resource_id: str | None) -> _Address:
        if thread_id is not None:
            validate_id(thread_id, "thread id")
        if resource_id is not None:
            resource_id = check_resource_id(resource_id)
        if self.scope == "thread":
            if thread_id is None:
                raise ValidationError("scope 'thread' needs a thread_id")
            return _Address("thread", resource_id, thread_id)
        if thread_id is not None:
            thread = self.storage.get_thread(thread_id)
            if thread is not None:
                check_owner(thread, resource_id)
                return _Address("resource", thread.resource_id, None)
            if resource_id is None:
                raise ThreadNotFoundError(thread_id)
        if resource_id is None:
            raise ValidationError("scope 'resource' needs a resource_id, or a thread_id to take its owner from")
        return _Address("resource", resource_id, None)

    def _read(self, address: _Address) -> str | None:
        if address.scope == "thread":
            assert address.thread_id is not None
            # A missing thread raises, as it does under resource scope (and as every write does).
            thread = self._existing_thread(address.thread_id, address.resource_id)
            return thread_working_memory(thread.metadata)
        return self.storage.get_working_memory(scope="resource", resource_id=address.resource_id)

    def _write(self, address: _Address, text: str) -> None:
        self.storage.set_working_memory(
            text, scope=address.scope, resource_id=address.resource_id, thread_id=address.thread_id
        )

    def _merge(self, address: _Address, patch: dict[str, Any]) -> dict[str, Any]:
        assert self.schema is not None
        if address.scope == "thread":
            assert address.thread_id is not None
            thread = self._existing_thread(address.thread_id, address.resource_id)
            stored = thread_working_memory_to_merge(thread.metadata)  # a non-string value raises, as the merge does
        else:
            stored = self._read(address)
        preview = apply_merge_patch(parse_json_object(stored), patch)
        errors = self.schema.document_errors(preview)
        if errors:
            problems = "; ".join(errors)
            raise ValidationError(f"the working memory would not match the schema after this update: {problems}")
        return self.storage.merge_working_memory(
            patch, scope=address.scope, resource_id=address.resource_id, thread_id=address.thread_id
        )

    def _check_patch(self, patch: object) -> dict[str, Any]:
        assert self.schema is not None
        checked = _json_object(patch, "the update")
        errors = self.schema.patch_errors(checked)
        if errors:
            raise ValidationError("the update does not match the schema: " + "; ".join(errors) + ".")
        return checked

    def _document_text(self, content: object, what: str) -> str:
        if self.schema is None:
            return validate_text(content, what)
        document = _json_object(content, what)
        errors = self.schema.document_errors(document)
        if errors:
            raise ValidationError(f"{what} does not match the schema: " + "; ".join(errors))
        return dump_json(document)

    def _split_metadata(self, metadata: Mapping[str, Any] | None) -> tuple[dict[str, Any], str | Unset | None]:
        """Metadata without ``workingMemory``, and that working memory: checked text, ``None``, or ``UNSET``."""
        if metadata is None:
            return {}, UNSET
        if not isinstance(metadata, Mapping):
            validate_json_object(metadata)  # raises, naming what it got
        # The working memory is checked as working memory (its own limit), the rest as metadata.
        rest = validate_json_object({key: value for key, value in metadata.items() if key != WORKING_MEMORY_KEY})
        if WORKING_MEMORY_KEY not in metadata:
            return rest, UNSET
        value = metadata[WORKING_MEMORY_KEY]
        if value is None:
            return rest, None
        return rest, self._document_text(value, "working memory")


_ERASING_UPDATE = (
    "Nothing was stored: the update was empty (an unfilled template) and would have erased the working memory. "
    "Send the memory with the information filled in."
)
_EMPTY_PATCH = (
    "Nothing was stored: the update was an empty object, which changes nothing. Send the fields that changed; "
    "set a field to null to remove it."
)


def _ignored(message: str = _ERASING_UPDATE) -> ToolResult:
    return {"ok": True, "action": "ignored", "message": message}


def _json_object(value: object, what: str) -> dict[str, Any]:
    """A JSON object from a dict or JSON text, checked against the shared input rules."""
    if isinstance(value, str):
        value = load_model_json(value, what)
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} must be a JSON object, not {a_json_type(value)}.")
    return validate_json_object(value, what)


def _pretty_json(stored: str | None) -> str:
    if stored is None or not stored.strip():
        return "{}"
    try:
        return json.dumps(json.loads(stored), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to indent: shown as stored
        return stored
