"""Each storage operation once: checked at the door, the time stamped, then the adapter's narrow hooks.

These coroutines are the contract's public operations, written once over the
hooks of :class:`~workmem.hooks.StorageHooks`. :class:`~workmem.storage.MemoryStorage`
runs them with :func:`workmem._drive.run_sync`; :class:`~workmem.aio.AsyncMemoryStorage`
awaits them; the agent layer (:mod:`workmem.agent.operations`) awaits them for
``Memory`` and ``AsyncMemory`` alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from itertools import islice
from typing import Any, TypeVar

from workmem.arguments import (
    check_list_args,
    check_owner,
    check_record,
    check_resource_update,
    check_scope,
    check_thread_update,
    thread_working_memory,
)
from workmem.changes import MergeChange, ResourceChange, ThreadChange, memory_given
from workmem.errors import OperationNotSupportedError, ValidationError, VersionNotFoundError
from workmem.history import (
    ErasedResource,
    HistoryKey,
    HistoryPage,
    Recording,
    VersionKind,
    check_source,
    check_version,
    history_page,
)
from workmem.hooks import CheckedPatch, ScopeTarget, StorageHooks
from workmem.limits import check_max_chars
from workmem.records import (
    UNSET,
    WORKING_MEMORY_KEY,
    Direction,
    OrderBy,
    RecordPage,
    Resource,
    Scope,
    Thread,
    ThreadPage,
    Unset,
)
from workmem.timestamps import utc_now
from workmem.validation import validate_id, validate_text, validated_json_object

__all__ = [
    "BULK_BATCH",
    "MAX_PAGE_SIZE",
    "OPERATIONS",
    "check_page_size",
    "create_thread",
    "delete_resource",
    "delete_thread",
    "get_resource",
    "get_thread",
    "get_working_memory",
    "insert_resources",
    "insert_threads",
    "iter_resources",
    "iter_threads",
    "list_threads",
    "merge_working_memory",
    "resources_after",
    "restore_thread",
    "restore_working_memory",
    "save_resource",
    "save_thread",
    "set_working_memory",
    "threads_after",
    "update_resource",
    "update_thread",
    "working_memory_history",
]

R = TypeVar("R", Resource, Thread)

MAX_PAGE_SIZE = 10_000
"""The largest ``page_size`` / ``limit`` of the iteration methods."""
BULK_BATCH = 500
"""How many records :func:`insert_resources` / :func:`insert_threads` hand an adapter's hook at once."""


# -- the operations ----------------------------------------------------------------------


def _recording(hooks: StorageHooks, kind: VersionKind, at: datetime, source: object = None) -> Recording | None:
    """What a write at ``at`` records in history (``None``: history is off); ``source`` is checked either way."""
    checked, text = check_source(source)
    policy = hooks.history
    return None if policy is None else Recording(kind, at, checked, text, policy.keep)


async def get_resource(hooks: StorageHooks, resource_id: str) -> Resource | None:
    return await hooks._get_resource(validate_id(resource_id, "resource id"))


async def save_resource(hooks: StorageHooks, resource: Resource) -> Resource:
    checked = check_record(resource, Resource)
    record = _recording(hooks, "set", utc_now())
    if record is None:  # an adapter without history is never handed the argument
        return await hooks._save_resource(checked)
    return await hooks._save_resource(checked, record)


async def update_resource(
    hooks: StorageHooks,
    resource_id: str,
    working_memory: str | Unset | None,
    metadata: Mapping[str, Any] | Unset | None,
    max_chars: int | None = None,
    source: Mapping[str, Any] | None = None,
) -> Resource:
    validate_id(resource_id, "resource id")
    checked_memory, checked_metadata = check_resource_update(working_memory, metadata)
    limit = check_max_chars(max_chars)
    now = utc_now()
    record = None if checked_memory is UNSET else _recording(hooks, "set", now, source)
    change = ResourceChange(checked_memory, checked_metadata, now, limit, record)
    return await hooks._update_resource(resource_id, change)


async def get_thread(hooks: StorageHooks, thread_id: str, resource_id: str | None) -> Thread | None:
    validate_id(thread_id, "thread id")
    if resource_id is not None:
        validate_id(resource_id, "resource id")
    thread = await hooks._get_thread(thread_id)
    if thread is None or resource_id is None or thread.resource_id == resource_id:
        return thread
    return None


async def create_thread(hooks: StorageHooks, thread: Thread) -> Thread:
    checked = check_record(thread, Thread)
    record = None if memory_given(checked.metadata) is None else _recording(hooks, "set", utc_now())
    if record is None:
        return await hooks._create_thread(checked)
    return await hooks._create_thread(checked, record)


async def save_thread(hooks: StorageHooks, thread: Thread) -> Thread:
    checked = check_record(thread, Thread)
    now = utc_now()
    record = _recording(hooks, "set", now)
    if record is None:
        return await hooks._save_thread(checked, now)
    return await hooks._save_thread(checked, now, record)


async def update_thread(
    hooks: StorageHooks,
    thread_id: str,
    title: str | Unset,
    metadata: Mapping[str, Any] | Unset | None,
    resource_id: str | None = None,
    max_chars: int | None = None,
    source: Mapping[str, Any] | None = None,
) -> Thread:
    validate_id(thread_id, "thread id")
    owner = None if resource_id is None else validate_id(resource_id, "resource id")
    checked_title, checked_metadata = check_thread_update(title, metadata)
    limit = check_max_chars(max_chars)
    now = utc_now()
    record = None if memory_given(checked_metadata) is None else _recording(hooks, "set", now, source)
    change = ThreadChange(checked_title, checked_metadata, now, owner, limit, record)
    return await hooks._update_thread(thread_id, change)


async def delete_thread(hooks: StorageHooks, thread_id: str, resource_id: str | None = None) -> bool:
    validate_id(thread_id, "thread id")
    owner = None if resource_id is None else validate_id(resource_id, "resource id")
    return await hooks._delete_thread(thread_id, owner=owner)


async def list_threads(
    hooks: StorageHooks,
    resource_id: str,
    page: int,
    per_page: int | None,
    order_by: OrderBy,
    direction: Direction,
) -> ThreadPage:
    return await hooks._list_threads(check_list_args(resource_id, page, per_page, order_by, direction))


async def get_working_memory(
    hooks: StorageHooks, scope: Scope, resource_id: str | None, thread_id: str | None
) -> str | None:
    target = check_scope(scope, resource_id, thread_id)
    if target.scope == "resource":
        assert target.resource_id is not None
        resource = await hooks._get_resource(target.resource_id)
        return None if resource is None else resource.working_memory
    assert target.thread_id is not None
    thread = await hooks._get_thread(target.thread_id)
    if thread is None:
        return None
    check_owner(thread, target.resource_id)
    return thread_working_memory(thread.metadata)


async def set_working_memory(
    hooks: StorageHooks,
    content: str,
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
    max_chars: int | None = None,
    source: Mapping[str, Any] | None = None,
) -> None:
    target = check_scope(scope, resource_id, thread_id)
    validate_text(content)
    now = utc_now()
    await _write_memory(hooks, target, content, check_max_chars(max_chars), now, _recording(hooks, "set", now, source))


async def _write_memory(
    hooks: StorageHooks,
    target: ScopeTarget,
    content: str | None,
    limit: int | None,
    now: datetime,
    record: Recording | None,
) -> None:
    if target.scope == "resource":
        assert target.resource_id is not None
        await hooks._update_resource(target.resource_id, ResourceChange(content, UNSET, now, limit, record))
        return
    assert target.thread_id is not None
    _, metadata = check_thread_update(UNSET, {WORKING_MEMORY_KEY: content})
    # The owner (and the size limit) are checked by the write itself: the thread may be deleted and its id
    # re-created under another resource, or its memory rewritten, between any read and the write.
    change = ThreadChange(UNSET, metadata, now, target.resource_id, limit, record)
    await hooks._update_thread(target.thread_id, change)


async def merge_working_memory(
    hooks: StorageHooks,
    patch: Mapping[str, Any],
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
    max_chars: int | None = None,
    source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    target = check_scope(scope, resource_id, thread_id)
    checked = CheckedPatch(*validated_json_object(patch, "patch"))  # its text goes down with it: written once
    now = utc_now()
    change = MergeChange(checked, now, check_max_chars(max_chars), _recording(hooks, "merge", now, source))
    return await hooks._merge_working_memory(target, change)


# -- history and erasure -----------------------------------------------------------------


def _require(hooks: StorageHooks, capability: str, operation: str) -> None:
    if not getattr(hooks.capabilities, capability):
        raise OperationNotSupportedError(operation)


async def _history_key(hooks: StorageHooks, target: ScopeTarget) -> HistoryKey | None:
    """The history of ``target``'s working memory: a thread's is its owner's (``None``: no such thread)."""
    if target.scope == "resource":
        assert target.resource_id is not None
        return HistoryKey(target.resource_id)
    assert target.thread_id is not None
    thread = await hooks._get_thread(target.thread_id)
    if thread is None:
        return None
    check_owner(thread, target.resource_id)
    return HistoryKey(thread.resource_id, thread.id)


async def working_memory_history(
    hooks: StorageHooks,
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
    limit: int = 20,
    before: int | None = None,
) -> HistoryPage:
    target = check_scope(scope, resource_id, thread_id)
    limit = check_page_size(limit, "limit")
    before = None if before is None else check_version(before, "before")
    _require(hooks, "history", "working memory history")
    key = await _history_key(hooks, target)
    if key is None:
        return HistoryPage(())
    return history_page(await hooks._history(key, limit, before), limit)


async def restore_working_memory(
    hooks: StorageHooks,
    version: int,
    scope: Scope,
    resource_id: str | None,
    thread_id: str | None,
    max_chars: int | None = None,
    source: Mapping[str, Any] | None = None,
) -> str | None:
    target = check_scope(scope, resource_id, thread_id)
    check_version(version)
    limit = check_max_chars(max_chars)
    now = utc_now()
    record = _recording(hooks, "restore", now, _restored_source(source, version))  # checked here, before any I/O
    _require(hooks, "history", "restore_working_memory")
    if record is None:
        raise OperationNotSupportedError("restore_working_memory without history (connect(url, history=True))")
    key = await _history_key(hooks, target)
    found = [] if key is None else await hooks._history(key, 1, version + 1)
    if not found or found[0].version != version:
        raise VersionNotFoundError(version)
    content = found[0].content
    await _write_memory(hooks, target, content, limit, now, record)
    return content


def _restored_source(source: object, version: int) -> object:
    """What a restore records as its source: the caller's with ``restoredFrom`` (a non-mapping left to be refused)."""
    if source is None:
        return {"restoredFrom": version}
    return {**source, "restoredFrom": version} if isinstance(source, Mapping) else source


async def delete_resource(hooks: StorageHooks, resource_id: str) -> ErasedResource:
    validate_id(resource_id, "resource id")
    _require(hooks, "erase", "delete_resource")
    return await hooks._delete_resource(resource_id)


# -- iteration and bulk writes -----------------------------------------------------------


def check_page_size(value: object, what: str = "page_size") -> int:
    """``value`` when it is an ``int`` from 1 to :data:`MAX_PAGE_SIZE`; :class:`ValidationError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what} must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_PAGE_SIZE:
        raise ValidationError(f"{what} must be from 1 to {MAX_PAGE_SIZE}, not {value}")
    return value


def _check_after(after: object) -> str | None:
    if after is not None and not isinstance(after, str):
        raise ValidationError(f"after must be a str (a page's next_after) or None, not {type(after).__name__}")
    return after


async def resources_after(hooks: StorageHooks, after: str | None, limit: int) -> RecordPage[Resource]:
    return await hooks._resource_page(_check_after(after), check_page_size(limit, "limit"))


async def threads_after(hooks: StorageHooks, after: str | None, limit: int) -> RecordPage[Thread]:
    return await hooks._thread_page(_check_after(after), check_page_size(limit, "limit"))


async def _records(
    page: Callable[[str | None, int], Coroutine[Any, Any, RecordPage[R]]], page_size: int
) -> AsyncIterator[R]:
    after: str | None = None
    while True:
        current = await page(after, page_size)
        for record in current.records:
            yield record
        if current.next_after is None:
            return
        after = current.next_after


def iter_resources(hooks: StorageHooks, page_size: int) -> AsyncIterator[Resource]:
    """Every readable resource once, ascending by id, ``page_size`` per read (checked now, not on first use)."""
    return _records(hooks._resource_page, check_page_size(page_size))


def iter_threads(hooks: StorageHooks, page_size: int) -> AsyncIterator[Thread]:
    """Every readable thread once, ascending by id (see :func:`iter_resources`)."""
    return _records(hooks._thread_page, check_page_size(page_size))


async def _insert(
    records: Iterable[object], kind: type[R], insert: Callable[[Sequence[R]], Coroutine[Any, Any, frozenset[str]]]
) -> frozenset[str]:
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
        raise ValidationError(f"expected an iterable of {kind.__name__} records, got {type(records).__name__}")
    present: set[str] = set()
    items = iter(records)
    while batch := list(islice(items, BULK_BATCH)):
        distinct: dict[str, R] = {}
        for record in batch:
            checked = check_record(record, kind)
            if checked.id in distinct:  # the first of the call is inserted (or present); a repeat finds it there
                present.add(checked.id)
            else:
                distinct[checked.id] = checked
        present |= await insert(list(distinct.values()))
    return frozenset(present)


async def insert_resources(hooks: StorageHooks, resources: Iterable[Resource]) -> frozenset[str]:
    """Insert the absent resources as given, in batches of :data:`BULK_BATCH`; the ids already present."""
    return await _insert(resources, Resource, hooks._insert_resources)


async def insert_threads(hooks: StorageHooks, threads: Iterable[Thread]) -> frozenset[str]:
    """Insert the absent threads as given, in batches; the ids already present (never moved to another owner)."""
    return await _insert(threads, Thread, hooks._insert_threads)


async def restore_thread(hooks: StorageHooks, thread: Thread) -> bool:
    return await hooks._replace_thread(check_record(thread, Thread))


OPERATIONS: tuple[str, ...] = tuple(name for name in __all__ if name.islower() and name != "check_page_size")
"""The public operations by name: each storage face has a method of that name (and ``close``)."""
