"""The new record an update or merge produces from the old one (no I/O).

The contract's update rules (``workmem.storage``) in one place, shared by every
adapter that computes a change in Python: the reference adapter, the
read-modify-write transactions of SQL dialects, and the compare-and-swap loops
of MongoDB and Upstash.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from workmem.arguments import check_owner, thread_working_memory
from workmem.errors import ThreadOwnershipError
from workmem.history import Recording
from workmem.limits import check_limit, text_size
from workmem.merge_patch import apply_merge_patch, read_json_object
from workmem.records import WORKING_MEMORY_KEY, Resource, Thread, Unset, trusted_thread, validate_thread_metadata
from workmem.timestamps import normalize
from workmem.validation import dump_json, json_object_text

__all__ = [
    "MergeChange",
    "ResourceChange",
    "ThreadChange",
    "memory_given",
    "merge_document",
    "replaced_thread",
    "shallow",
    "updated_resource",
    "updated_thread",
    "with_thread_memory",
]


def shallow(old: dict[str, Any] | None, new: dict[str, Any] | Unset | None) -> dict[str, Any] | None:
    """``{**old, **new}``; ``UNSET`` or ``None`` leaves ``old`` as it is."""
    if isinstance(new, Unset) or new is None:
        return old
    return {**(old or {}), **new}


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceChange:
    """An ``update_resource`` as the operation checked it: what :meth:`StorageHooks._update_resource` applies.

    ``working_memory``: ``UNSET`` keeps the stored one, ``None`` clears it. ``metadata``: merged
    shallowly (``UNSET`` or ``None`` keeps it). ``max_chars``: the size limit on a working memory
    given, decided against the stored one in the hook's atomic step (:func:`updated_resource`).
    """

    working_memory: str | Unset | None
    metadata: dict[str, Any] | Unset | None
    now: datetime
    max_chars: int | None = None
    record: Recording | None = None
    """History is on and this change sets working memory: the hook records a version in its atomic step."""


@dataclasses.dataclass(frozen=True, slots=True)
class ThreadChange:
    """An ``update_thread`` as the operation checked it: what :meth:`StorageHooks._update_thread` applies.

    ``title``: ``UNSET`` keeps the stored one. ``metadata``: merged shallowly. ``owner``: when not
    ``None``, the thread must be that resource's at the moment of the write
    (:class:`~workmem.errors.ThreadOwnershipError` otherwise). ``max_chars``: the size limit on a
    ``workingMemory`` string in ``metadata``, decided in the same atomic step (:func:`updated_thread`).
    """

    title: str | Unset
    metadata: dict[str, Any] | Unset | None
    now: datetime
    owner: str | None = None
    max_chars: int | None = None
    record: Recording | None = None
    """History is on and ``metadata`` sets ``workingMemory``: the hook records a version in its atomic step."""


@dataclasses.dataclass(frozen=True, slots=True)
class MergeChange:
    """A ``merge_working_memory`` as the operation checked it: what :meth:`StorageHooks._merge_working_memory` applies.

    ``patch``: the checked RFC 7396 patch (a :class:`~workmem.hooks.CheckedPatch`, its JSON text with it:
    :func:`~workmem.hooks.patch_text`). ``max_chars``: the size limit on the merged document, decided in the
    merge's atomic step (:func:`merge_document`). ``record``: history is on; the hook records the merged text.
    """

    patch: dict[str, Any]
    now: datetime
    max_chars: int | None = None
    record: Recording | None = None


def updated_resource(old: Resource | None, resource_id: str, change: ResourceChange) -> Resource:
    """The resource after ``update_resource`` (created when ``old`` is ``None``).

    With ``change.max_chars``, a working memory given is checked against the one it replaces
    (:func:`workmem.limits.check_limit`) before anything is built.
    """
    now, working_memory = change.now, change.working_memory
    if old is None:
        old = Resource(resource_id, None, None, now, now)
    if isinstance(working_memory, str):
        check_limit(len(working_memory), text_size(old.working_memory), change.max_chars)
    return dataclasses.replace(
        old,
        working_memory=old.working_memory if isinstance(working_memory, Unset) else working_memory,
        metadata=shallow(old.metadata, change.metadata),
        updated_at=now,
    )


def updated_thread(old: Thread, change: ThreadChange) -> Thread:
    """The thread after ``update_thread``.

    A new ``title`` was validated by the caller; a kept one is taken as stored (another
    program may have stored a longer one). The merged metadata is checked whole (its size limit).
    A ``change.owner`` that is not ``old``'s raises :class:`ThreadOwnershipError` (see
    :func:`workmem.arguments.check_owner`). With ``change.max_chars``, a working memory given in
    ``metadata`` is checked against the one it replaces (:func:`workmem.limits.check_limit`).
    """
    check_owner(old, change.owner)
    memory = memory_given(change.metadata)
    if memory is not None:
        check_limit(len(memory), text_size(thread_working_memory(old.metadata)), change.max_chars)
    merged = shallow(old.metadata, change.metadata)
    return trusted_thread(
        old.id,
        old.resource_id,
        old.title if isinstance(change.title, Unset) else change.title,
        None if merged is None else validate_thread_metadata(merged),
        old.created_at,
        normalize(change.now),
    )


def memory_given(metadata: dict[str, Any] | Unset | None) -> str | None:
    """The working-memory text a thread update's ``metadata`` sets (its ``workingMemory`` string), if any."""
    memory = metadata.get(WORKING_MEMORY_KEY) if isinstance(metadata, dict) else None
    return memory if isinstance(memory, str) else None


def replaced_thread(old: Thread | None, thread: Thread, now: datetime) -> Thread:
    """What ``save_thread(thread)`` stores over ``old``: the same owner's thread keeps ``created_at``.

    No ``old``: ``thread`` as given. Another owner: :class:`ThreadOwnershipError`
    (an owner never changes). Otherwise title and metadata are replaced and
    ``updated_at`` moves to ``now``.
    """
    if old is None:
        return thread
    if old.resource_id != thread.resource_id:
        raise ThreadOwnershipError(thread.id, thread.resource_id)
    return dataclasses.replace(old, title=thread.title, metadata=thread.metadata, updated_at=normalize(now))


def merge_document(
    stored: str | None, patch: dict[str, Any], max_chars: int | None = None
) -> tuple[dict[str, Any], str]:
    """The merged working memory and the text to store; raises before anything is written.

    With ``max_chars``, the merged text is checked against the stored document written the
    same way (:func:`workmem.limits.check_limit`), before the input rules' own size limit.
    """
    document, written = read_json_object(stored)  # the stored document, and its text as workmem writes it
    merged: dict[str, Any] = apply_merge_patch(document, patch)
    text = dump_json(merged)  # once: the limit, the input rules' size and the text stored all measure it
    if max_chars is not None:
        check_limit(len(text), 0 if written is None else len(written), max_chars)
    return merged, json_object_text(merged, "merged working memory", text)


def with_thread_memory(thread: Thread, text: str, now: datetime) -> Thread:
    """``thread`` with its working memory replaced by ``text``."""
    return updated_thread(thread, ThreadChange(thread.title, {WORKING_MEMORY_KEY: text}, now))
