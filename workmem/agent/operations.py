"""Each working-memory operation once, for :class:`~workmem.agent.Memory` and :class:`~workmem.agent.AsyncMemory`.

:class:`MemoryBase` holds what both share without touching storage: the
configuration (scope, template or schema, read-only) and the pure rules (argument
and schema checks, the tool definition). The operations that touch storage are
the coroutines below, written once over the storage's own operations
(:mod:`workmem.operations`, awaited on the storage's hooks):

* ``AsyncMemory`` awaits them on its :class:`~workmem.aio.AsyncMemoryStorage`;
* ``Memory`` drives them with :func:`workmem._drive.run_sync` on its sync
  :class:`~workmem.storage.MemoryStorage`, whose hooks call the blocking driver and
  never suspend, so an operation runs to its end in one step without an event loop.

What the model sees and sends (the system message, the tool's arguments) is
rendered and parsed by the plain functions of :mod:`workmem.agent.prompt`,
:mod:`workmem.agent.tool` and :mod:`workmem.agent.templates`.
"""

from __future__ import annotations

import json
import uuid
from abc import ABC
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from workmem import operations
from workmem.agent.prompt import (
    insert_memory_message,
    render_system_message,
    stored_size_message,
    too_large_message,
    unescape_data,
    unfence,
)
from workmem.agent.schema import SchemaInput, WorkingMemorySchema
from workmem.agent.sub_agents import check_resource_id
from workmem.agent.templates import DEFAULT_TEMPLATE, check_template, is_blank_update
from workmem.agent.tool import (
    TOOL_NAME,
    ToolArgumentError,
    ToolFormat,
    a_json_type,
    format_tool,
    load_model_json,
    parse_tool_arguments,
    tool_definition,
)
from workmem.arguments import check_owner, thread_working_memory, thread_working_memory_to_merge
from workmem.errors import ReadOnlyMemoryError, ThreadNotFoundError, ValidationError, WorkingMemoryTooLargeError
from workmem.history import ErasedResource, HistoryPage, check_source
from workmem.hooks import StorageHooks
from workmem.limits import check_limit, check_max_chars, document_size, text_size
from workmem.merge_patch import apply_merge_patch, parse_json_object
from workmem.records import UNSET, WORKING_MEMORY_KEY, Direction, OrderBy, Scope, Thread, ThreadPage, Unset
from workmem.validation import dump_json, validate_id, validate_json_object, validate_text

__all__ = [
    "MemoryBase",
    "ToolResult",
    "call_tool",
    "create_thread",
    "delete_resource",
    "delete_thread",
    "get_thread",
    "get_working_memory",
    "get_working_memory_data",
    "list_threads",
    "merge_working_memory",
    "process_input",
    "restore_working_memory",
    "system_message",
    "update_thread",
    "update_working_memory",
    "working_memory_history",
]

ToolResult = dict[str, Any]
"""What ``call_tool`` returns: ``{"ok": True, "action", "message"}`` or ``{"ok": False, "error"}``."""


@dataclass(frozen=True, slots=True)
class _Address:
    """Where one working memory lives, as the storage methods take it."""

    scope: Scope
    resource_id: str | None
    thread_id: str | None


_NO_MEMORY = _Address("resource", None, None)
"""Read-only, resource scope, a ``thread_id`` alone naming no thread: no owner, so no memory (it reads as none)."""


class MemoryBase(ABC):
    """What ``Memory`` and ``AsyncMemory`` share: the configuration and every rule that touches no storage.

    The constructor checks the configuration (before any connection is made);
    see :class:`~workmem.agent.Memory` for what each setting means.
    """

    _kind: ClassVar[str]
    """The class name used in messages (``"Memory"`` or ``"AsyncMemory"``)."""

    def __init__(
        self,
        *,
        scope: Scope = "resource",
        template: str | None = None,
        schema: SchemaInput | None = None,
        read_only: bool = False,
        max_chars: int | None = None,
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
        self.max_chars: int | None = _check_max_chars(max_chars, self.template)
        """The size limit of the working memory in characters, or ``None`` for no limit."""

    storage: StorageHooks
    """The storage the operations below run on (a ``MemoryStorage`` or an ``AsyncMemoryStorage``)."""

    @property
    def mode(self) -> Literal["template", "schema"]:
        """``"template"`` (replace) or ``"schema"`` (merge)."""
        return "template" if self.schema is None else "schema"

    def __repr__(self) -> str:
        storage = getattr(self, "storage", None)
        limit = "" if self.max_chars is None else f", max_chars={self.max_chars}"
        return f"{self._kind}({storage!r}, scope={self.scope!r}, mode={self.mode!r}, read_only={self.read_only}{limit})"

    def tool_definition(self, *, format: ToolFormat = "neutral") -> dict[str, Any] | None:
        """The ``updateWorkingMemory`` tool, or ``None`` in read-only mode (there is no tool to offer).

        ``format``: ``"neutral"`` ``{"name", "description", "parameters"}``,
        ``"openai"`` ``{"type": "function", "function": {...}}`` or
        ``"anthropic"`` ``{"name", "description", "input_schema"}``.
        """
        if self.read_only:
            return None
        return format_tool(tool_definition(self.schema), format)

    # -- the pure rules ------------------------------------------------------------------

    def _require_writable(self, action: str) -> None:
        if self.read_only:
            raise ReadOnlyMemoryError(f"{action} refused: this {self._kind} is read-only")

    def _require_schema(self, action: str) -> None:
        if self.schema is None:
            raise ValidationError(f"{action} needs schema mode: create the {self._kind} with schema=...")

    def _size(self, stored: str | None) -> int:
        """The size of stored working memory as the model is shown it and a merge compares with.

        Template mode: the text itself (:func:`~workmem.limits.text_size`). Schema
        mode: the document as workmem writes it, compact, whatever formatting the
        stored text has (:func:`~workmem.limits.document_size`). Nothing stored
        (or blank) is 0.
        """
        return text_size(stored) if self.schema is None else document_size(stored)

    def _over_limit(self, size: int) -> bool:
        return self.max_chars is not None and size > self.max_chars

    def _check_size(self, size: int, current: int) -> None:
        """Refuse a result of ``size`` characters over the limit that is also larger than the ``current`` one.

        The rule of :func:`workmem.limits.check_limit`, which the storage applies again
        in the atomic step that writes: here only where a refusal must come before
        another write (a thread created or renamed along with the memory).
        """
        check_limit(size, current, self.max_chars)

    def _stored_message(self, done: str, size: int) -> str:
        """A tool result's message for a stored update; with a limit, it tells the use too."""
        return done if self.max_chars is None else stored_size_message(done, size, self.max_chars)

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

    def _render(self, stored: str | None) -> str:
        """The system message showing ``stored`` (the memory as stored, or ``None``)."""
        if self.schema is None:
            assert self.template is not None
            structure = self.template
            data = stored if stored is not None and stored.strip() else self.template
        else:
            structure = self.schema.to_json("document")
            data = _pretty_json(stored)
        size = None if self.max_chars is None else (self._size(stored), self.max_chars)
        return render_system_message(
            mode=self.mode, scope=self.scope, structure=structure, data=data, read_only=self.read_only, size=size
        )

    def _template_update(self, value: object) -> str | None:
        """Template mode: the text a tool call stores, or ``None`` when it would erase the memory."""
        assert self.template is not None
        if not isinstance(value, str):
            raise ToolArgumentError(
                f"'memory' must be a string holding the whole Markdown text, not {a_json_type(value)}"
            )
        # The model saw the memory with &, < and > escaped and may copy it back as shown:
        # decoding exactly those escapes stores what it meant, so round trips are stable.
        text = unescape_data(unfence(validate_text(value, "'memory'")))  # fence copied too: dropped
        return None if is_blank_update(text, [self.template]) else text


# -- threads -------------------------------------------------------------------------------


async def create_thread(
    memory: MemoryBase, thread_id: str | None, resource_id: str, title: str, metadata: Mapping[str, Any] | None
) -> Thread:
    memory._require_writable("create_thread")
    thread_id = str(uuid.uuid4()) if thread_id is None else validate_id(thread_id, "thread id")
    rest, given = memory._split_metadata(metadata)
    initial = None if given is UNSET else given  # null on a new thread: nothing to set
    if memory.scope == "thread" and initial is not None:
        rest[WORKING_MEMORY_KEY] = initial
    resource_id = check_resource_id(resource_id)
    if initial is not None:  # the size limit, before anything is written
        if memory.scope == "thread":
            memory._check_size(len(initial), 0)  # a new thread holds nothing yet
        else:
            await _check_write(memory, _Address("resource", resource_id, None), initial)
    thread = Thread(thread_id, resource_id, title, rest if metadata is not None else None)
    stored = await operations.create_thread(memory.storage, thread)  # insert-only, atomic in the database
    if memory.scope == "resource" and initial is not None:
        source = _source(None, thread_id)
        await operations.update_resource(memory.storage, resource_id, initial, UNSET, memory.max_chars, source)
    return stored


async def get_thread(memory: MemoryBase, thread_id: str, resource_id: str | None) -> Thread | None:
    thread = await operations.get_thread(memory.storage, thread_id, None)
    if thread is not None:
        check_owner(thread, None if resource_id is None else check_resource_id(resource_id))
    return thread


async def update_thread(
    memory: MemoryBase,
    thread_id: str,
    title: str | Unset,
    metadata: Mapping[str, Any] | Unset | None,
    resource_id: str | None,
) -> Thread:
    memory._require_writable("update_thread")
    source = _source(None, thread_id)  # a working memory given in the metadata: recorded as changed in this thread
    thread = await _existing_thread(memory, thread_id, resource_id)
    new_metadata: Mapping[str, Any] | Unset | None = metadata
    given: str | Unset | None = UNSET
    if isinstance(metadata, Mapping):
        rest, given = memory._split_metadata(metadata)
        if memory.scope == "thread" and given is not UNSET:
            rest[WORKING_MEMORY_KEY] = given
        new_metadata = rest if rest else UNSET
    if isinstance(given, str) and memory.scope == "resource":  # the size limit, before the thread is written
        await _check_write(memory, _Address("resource", thread.resource_id, None), given)
    if title is not UNSET or new_metadata is not UNSET:
        # conditioned on the owner read above: a thread re-created under another resource since is not written;
        # a thread-scope working memory is checked against the limit in that same write
        thread = await operations.update_thread(
            memory.storage, thread_id, title, new_metadata, thread.resource_id, memory.max_chars, source
        )
    if memory.scope == "resource" and given is not UNSET:
        await operations.update_resource(memory.storage, thread.resource_id, given, UNSET, memory.max_chars, source)
    return thread


async def delete_thread(memory: MemoryBase, thread_id: str, resource_id: str | None) -> bool:
    memory._require_writable("delete_thread")
    validate_id(thread_id, "thread id")
    owner = None if resource_id is None else check_resource_id(resource_id)
    return await operations.delete_thread(memory.storage, thread_id, owner)


async def list_threads(
    memory: MemoryBase, resource_id: str, page: int, per_page: int | None, order_by: OrderBy, direction: Direction
) -> ThreadPage:
    return await operations.list_threads(
        memory.storage, check_resource_id(resource_id), page, per_page, order_by, direction
    )


# -- working memory --------------------------------------------------------------------------


async def get_working_memory(memory: MemoryBase, thread_id: str | None, resource_id: str | None) -> str | None:
    return await _read(memory, await _address(memory, thread_id, resource_id))


async def get_working_memory_data(memory: MemoryBase, thread_id: str | None, resource_id: str | None) -> dict[str, Any]:
    memory._require_schema("get_working_memory_data")
    return parse_json_object(await get_working_memory(memory, thread_id, resource_id))


async def update_working_memory(
    memory: MemoryBase,
    content: str | Mapping[str, Any],
    thread_id: str | None,
    resource_id: str | None,
    source: Mapping[str, Any] | None = None,
) -> None:
    memory._require_writable("update_working_memory")
    recorded = _source(source, thread_id)
    text = memory._document_text(content, "working memory")
    await _write(memory, await _address(memory, thread_id, resource_id), text, recorded)


async def merge_working_memory(
    memory: MemoryBase,
    patch: str | Mapping[str, Any],
    thread_id: str | None,
    resource_id: str | None,
    source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    memory._require_schema("merge_working_memory")
    memory._require_writable("merge_working_memory")
    recorded = _source(source, thread_id)
    checked = memory._check_patch(patch)
    return await _merge(memory, await _address(memory, thread_id, resource_id), checked, recorded)


# -- history and erasure ---------------------------------------------------------------------


async def working_memory_history(
    memory: MemoryBase, thread_id: str | None, resource_id: str | None, limit: int, before: int | None
) -> HistoryPage:
    address = await _address(memory, thread_id, resource_id)
    if address is _NO_MEMORY:  # read-only, a thread not there yet: no memory, so no history
        return HistoryPage(())
    return await operations.working_memory_history(
        memory.storage, address.scope, address.resource_id, address.thread_id, limit, before
    )


async def restore_working_memory(
    memory: MemoryBase,
    version: int,
    thread_id: str | None,
    resource_id: str | None,
    source: Mapping[str, Any] | None = None,
) -> str | None:
    memory._require_writable("restore_working_memory")
    recorded = _source(source, thread_id)
    address = await _address(memory, thread_id, resource_id)
    return await operations.restore_working_memory(
        memory.storage,
        version,
        address.scope,
        address.resource_id,
        address.thread_id,
        memory.max_chars,
        recorded,
    )


async def delete_resource(memory: MemoryBase, resource_id: str) -> ErasedResource:
    memory._require_writable("delete_resource")
    return await operations.delete_resource(memory.storage, check_resource_id(resource_id))


# -- what the model sees and does ------------------------------------------------------------


async def call_tool(
    memory: MemoryBase,
    arguments: str | Mapping[str, Any],
    thread_id: str | None,
    resource_id: str | None,
    source: Mapping[str, Any] | None = None,
) -> ToolResult:
    memory._require_writable("call_tool")
    # The caller's source is the calling code's, not the model's: a bad one raises, it is not a tool result.
    recorded = _source(source, thread_id, tool=TOOL_NAME)
    address = await _address(memory, thread_id, resource_id)
    try:
        value = parse_tool_arguments(arguments)
        if memory.schema is None:
            text = memory._template_update(value)
            if text is None:
                return _ignored()
            await _write(memory, address, text, recorded)
            return {
                "ok": True,
                "action": "replaced",
                "message": memory._stored_message("Working memory replaced.", len(text)),
            }
        patch = memory._check_patch(value)
        if not patch:  # changes nothing; every field set to null is a real update (it clears the memory)
            return _ignored(_EMPTY_PATCH)
        merged = await _merge(memory, address, patch, recorded)
        message = memory._stored_message("Working memory updated.", len(dump_json(merged)))
        return {"ok": True, "action": "merged", "message": message}
    except WorkingMemoryTooLargeError as exc:  # the update was fine but too big: tell the model how to condense
        return {"ok": False, "error": too_large_message(memory.mode, exc.size, exc.limit, exc.current)}
    except ValidationError as exc:  # ToolArgumentError included: what the model sent was unusable
        return {"ok": False, "error": f"{str(exc).rstrip('.')}. Nothing was stored."}


async def system_message(memory: MemoryBase, thread_id: str | None, resource_id: str | None) -> str:
    return memory._render(await _read(memory, await _address(memory, thread_id, resource_id)))


async def process_input(
    memory: MemoryBase, messages: Sequence[Mapping[str, Any]], thread_id: str | None, resource_id: str | None
) -> list[Mapping[str, Any]]:
    return insert_memory_message(messages, await system_message(memory, thread_id, resource_id))


# -- internals ------------------------------------------------------------------------------


async def _existing_thread(memory: MemoryBase, thread_id: str, resource_id: str | None) -> Thread:
    thread = await get_thread(memory, thread_id, resource_id)
    if thread is None:
        raise ThreadNotFoundError(thread_id)
    return thread


async def _address(memory: MemoryBase, thread_id: str | None, resource_id: str | None) -> _Address:
    if thread_id is not None:
        validate_id(thread_id, "thread id")
    if resource_id is not None:
        resource_id = check_resource_id(resource_id)
    if memory.scope == "thread":
        if thread_id is None:
            raise ValidationError("scope 'thread' needs a thread_id")
        return _Address("thread", resource_id, thread_id)
    if thread_id is not None:
        thread = await operations.get_thread(memory.storage, thread_id, None)
        if thread is not None:
            check_owner(thread, resource_id)
            return _Address("resource", thread.resource_id, None)
        if resource_id is None:
            _thread_not_there(memory, thread_id)
            return _NO_MEMORY  # read-only: the thread has no owner yet, so no memory
    if resource_id is None:
        raise ValidationError("scope 'resource' needs a resource_id, or a thread_id to take its owner from")
    return _Address("resource", resource_id, None)


async def _read(memory: MemoryBase, address: _Address) -> str | None:
    if address is _NO_MEMORY:
        return None
    if address.scope == "thread":
        assert address.thread_id is not None
        thread = await get_thread(memory, address.thread_id, address.resource_id)
        if thread is None:
            _thread_not_there(memory, address.thread_id)
            return None
        return thread_working_memory(thread.metadata)
    return await operations.get_working_memory(memory.storage, "resource", address.resource_id, None)


def _thread_not_there(memory: MemoryBase, thread_id: str) -> None:
    """The rule for a ``thread_id`` naming no thread where the memory's place depends on that thread.

    Read-only, it returns: the memory of a thread that does not exist yet is empty (a read-only
    memory cannot create the thread, and an agent framework's new session has none yet). Otherwise
    :class:`ThreadNotFoundError`, as every write raises (writes are refused first in read-only mode).
    """
    if not memory.read_only:
        raise ThreadNotFoundError(thread_id)


async def _check_write(memory: MemoryBase, address: _Address, text: str) -> None:
    """Refuse storing ``text`` over the limit when it is also longer than the text stored now, before a first write.

    For an update that writes something else before the memory (the thread of
    ``create_thread``/``update_thread`` in resource scope). Only a text over the limit
    makes this read what is stored; the memory's own write decides again atomically.
    """
    if memory._over_limit(len(text)):
        memory._check_size(len(text), text_size(await _read(memory, address)))


def _source(source: Mapping[str, Any] | None, thread_id: str | None, **made_by: str) -> dict[str, Any] | None:
    """What a change through the agent layer records as its ``source`` (``None``: nothing to say).

    ``made_by`` (``tool="updateWorkingMemory"`` for the model's tool calls), then ``threadId``,
    the conversation the change came from (in resource scope too, where the memory is the
    resource's), then the caller's keys (an integration's ``framework``, ``agent``,
    ``toolCallId``), which win. Checked here, so a bad one raises before anything is read or
    written; the storage records it with the version when history is on.
    """
    given, _ = check_source(source)
    merged = {**made_by, **({} if thread_id is None else {"threadId": thread_id}), **(given or {})}
    return check_source(merged)[0] if merged else None


async def _write(memory: MemoryBase, address: _Address, text: str, source: dict[str, Any] | None = None) -> None:
    """Replace the memory with ``text``; the storage applies the limit in the write's atomic step."""
    await operations.set_working_memory(
        memory.storage, text, address.scope, address.resource_id, address.thread_id, memory.max_chars, source
    )


async def _merge(
    memory: MemoryBase, address: _Address, patch: dict[str, Any], source: dict[str, Any] | None = None
) -> dict[str, Any]:
    assert memory.schema is not None
    if address.scope == "thread":
        assert address.thread_id is not None
        thread = await _existing_thread(memory, address.thread_id, address.resource_id)
        stored = thread_working_memory_to_merge(thread.metadata)  # a non-string value raises, as the merge does
    else:
        stored = await _read(memory, address)
    preview = apply_merge_patch(parse_json_object(stored), patch)
    errors = memory.schema.document_errors(preview)
    if errors:
        problems = "; ".join(errors)
        raise ValidationError(f"the working memory would not match the schema after this update: {problems}")
    # The size limit is not decided on the read above: concurrent merges (parallel tool calls) would all pass
    # against it. The storage decides it on the merged result inside its atomic merge (a row lock, a
    # compare-and-set, ...), so however many merges run at once, the stored memory stays within the limit.
    return await operations.merge_working_memory(
        memory.storage, patch, address.scope, address.resource_id, address.thread_id, memory.max_chars, source
    )


_ERASING_UPDATE = (
    "Nothing was stored: the update was empty (an unfilled template) and would have erased the working memory. "
    "Send the memory with the information filled in."
)
_EMPTY_PATCH = (
    "Nothing was stored: the update was an empty object, which changes nothing. Send the fields that changed; "
    "set a field to null to remove it."
)


def _check_max_chars(max_chars: object, template: str | None) -> int | None:
    """``max_chars`` checked: ``None`` (no limit) or an int >= 1 that leaves room for the template."""
    limit = check_max_chars(max_chars)
    if limit is not None and template is not None and len(template) > limit:
        raise ValidationError(
            f"max_chars={limit} is smaller than the template ({len(template):,} characters): "
            "the filled-in template could never be stored"
        )
    return limit


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
