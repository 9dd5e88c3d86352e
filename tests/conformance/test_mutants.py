"""Proof the conformance suite has teeth: adapters that each break ONE rule fail the right checks, on both APIs.

Every mutant is one definition: a mixin over :class:`ReferenceHooks` that
changes the hooks where its rule lives (or, for a rule kept at the door by the
shared flows, a public method written once as a coroutine and marked
:func:`door`). :func:`faces` turns it into a sync class (mixin +
``ReferenceStorage``) and an async one (mixin + ``AsyncReferenceStorage``); both
run through ``workmem.conformance.run`` (profile ``ci``, derandomized) and must
be reported failed on the checks that guard that rule.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import functools
import json
import os
import random
import re
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

import workmem
from workmem import UNSET, Resource, Scope, Thread, ThreadOwnershipError, ThreadPage, operations
from workmem.adapters.reference import AsyncReferenceStorage, ReferenceHooks, ReferenceStorage
from workmem.arguments import (
    check_owner,
    check_resource_update,
    check_thread_update,
    thread_working_memory,
    thread_working_memory_to_merge,
)
from workmem.changes import (
    ResourceChange,
    ThreadChange,
    memory_given,
    merge_document,
    updated_resource,
    updated_thread,
    with_thread_memory,
)
from workmem.conformance import PROFILES, Report, run
from workmem.conformance.apis import APIS, Api
from workmem.conformance.processes import spawn
from workmem.history import ErasedResource, HistoryKey, MemoryVersion, Recording, with_version
from workmem.hooks import ListQuery, ScopeTarget
from workmem.kit import MergeChange, run_sync
from workmem.limits import check_limit, document_size, text_size
from workmem.merge_patch import parse_json_object
from workmem.records import (
    WORKING_MEMORY_KEY,
    Direction,
    OrderBy,
    RecordPage,
    Unset,
    private_copy,
    trusted_resource,
    trusted_thread,
)
from workmem.timestamps import utc_now
from workmem.validation import dump_json, validate_id, validate_json_object

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])
R = TypeVar("R", Resource, Thread)
Metadata = dict[str, Any] | Unset | None
"""What the update hooks receive as metadata."""

# -- one definition, two faces ------------------------------------------------------------------------------


def door(method: F) -> F:
    """Mark a mixin's coroutine as a public method (a rule the flows check at the door): both faces get it."""
    method.__workmem_door__ = True  # type: ignore[attr-defined]
    return method


def _sync_door(method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(method)
    def public(self: ReferenceStorage, *args: Any, **kwargs: Any) -> Any:
        return run_sync(method(self, *args, **kwargs))  # the reference hooks never suspend

    return public


FACES: dict[type[ReferenceHooks], tuple[type[ReferenceStorage], type[AsyncReferenceStorage]]] = {}


def faces(mixin: type[ReferenceHooks]) -> tuple[type[ReferenceStorage], type[AsyncReferenceStorage]]:
    """The sync and the async class of one mutant (made once; importable from this module by name)."""
    if mixin not in FACES:
        doors = {name: f for name, f in vars(mixin).items() if getattr(f, "__workmem_door__", False)}
        common = {"__module__": __name__, "__doc__": mixin.__doc__}
        async_face = type(f"{mixin.__name__}Async", (mixin, AsyncReferenceStorage), dict(common))
        sync_body = {**common, **{n: _sync_door(f) for n, f in doors.items()}}
        sync_body["async_adapter"] = f"{__name__}:{async_face.__name__}"  # connect_async opens the async face
        sync_face = type(f"{mixin.__name__}Sync", (mixin, ReferenceStorage), sync_body)
        for cls in (sync_face, async_face):
            globals()[cls.__name__] = cls
        FACES[mixin] = (sync_face, async_face)
    return FACES[mixin]


def face(mixin: type[ReferenceHooks], api: Api) -> type[ReferenceStorage] | type[AsyncReferenceStorage]:
    sync_face, async_face = faces(mixin)
    return sync_face if api == "sync" else async_face


class _SpinLock:
    """Mutual exclusion on both faces: a flag behind a thread lock, waited for with the storage's own ``_pause``."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False

    async def acquire(self, hooks: ReferenceHooks) -> None:
        while True:
            with self._guard:
                if not self._held:
                    self._held = True
                    return
            await hooks._pause(0.0002)

    def release(self) -> None:
        with self._guard:
            self._held = False


# -- merges with one step changed ---------------------------------------------------------------------------

Merge = Callable[[str | None], tuple[dict[str, Any], str]]
"""From the stored text to (the merged document, the text to store)."""


def _merging(
    patch: dict[str, Any],
    parse: Callable[[str | None], dict[str, Any]] = parse_json_object,
    apply: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] = workmem.apply_merge_patch,
    finish: Callable[[Any], Any] = lambda merged: merged,
) -> Merge:
    def merge(stored: str | None) -> tuple[dict[str, Any], str]:
        merged = finish(apply(parse(stored), patch))
        return merged, dump_json(merged)

    return merge


def _merge_in_store(
    hooks: ReferenceHooks, target: ScopeTarget, now: datetime, merge: Merge, max_chars: int | None = None
) -> dict[str, Any]:
    """The reference merge (atomic, owner checked, where the text lives, size limit kept), computing the result
    with ``merge``."""
    store = hooks._store
    with store.lock:
        if target.scope == "resource":
            assert target.resource_id is not None
            old = store.resources.get(target.resource_id)
            merged, text = _limited(merge, None if old is None else old.working_memory, max_chars)
            store.resources[target.resource_id] = updated_resource(
                old, target.resource_id, ResourceChange(text, UNSET, now)
            )
            return merged
        assert target.thread_id is not None
        thread = store.threads.get(target.thread_id)
        if thread is None:
            raise workmem.ThreadNotFoundError(target.thread_id)
        check_owner(thread, target.resource_id)
        merged, text = _limited(merge, thread_working_memory_to_merge(thread.metadata), max_chars)
        store.threads[thread.id] = with_thread_memory(thread, text, now)
        return merged


def _limited(merge: Merge, stored: str | None, max_chars: int | None) -> tuple[dict[str, Any], str]:
    merged, text = merge(stored)
    check_limit(len(text), document_size(stored), max_chars)
    return merged, text


class OwnerChanging(ReferenceHooks):
    """save_thread moves an existing thread to the new owner (what the TypeScript adapters do)."""

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        with self._store.lock:
            self._store.threads.pop(thread.id, None)
            return await super()._save_thread(thread, now)


class RacyMerge(ReferenceHooks):
    """merge reads, pauses, then writes: nothing makes the read-modify-write one step."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now = change.patch, change.now
        if target.scope == "resource":
            assert target.resource_id is not None
            old = await self._get_resource(target.resource_id)
            current = None if old is None else old.working_memory
        else:
            assert target.thread_id is not None
            thread = await self._get_thread(target.thread_id)
            if thread is None:
                raise workmem.ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
            current = thread_working_memory(thread.metadata)
        await self._pause(0.002)  # another writer slips in here
        merged: dict[str, Any] = workmem.apply_merge_patch(parse_json_object(current), patch)
        if target.scope == "resource":
            assert target.resource_id is not None
            await self._update_resource(target.resource_id, ResourceChange(dump_json(merged), UNSET, now))
        else:
            assert target.thread_id is not None
            change = ThreadChange(UNSET, {WORKING_MEMORY_KEY: dump_json(merged)}, now, target.resource_id)
            await self._update_thread(target.thread_id, change)
        return merged


def _null_as_value(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result = dict(target)
    for key, value in patch.items():
        old = result.get(key)
        result[key] = _null_as_value(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
    return result


class NullIsAValue(ReferenceHooks):
    """merge stores ``null`` instead of deleting the key."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        return _merge_in_store(self, target, now, _merging(patch, apply=_null_as_value), max_chars)


def _shallow(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result = {**target, **patch}
    return {k: v for k, v in result.items() if v is not None}


class ShallowMerge(ReferenceHooks):
    """merge replaces top-level values instead of merging objects deeply."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        return _merge_in_store(self, target, now, _merging(patch, apply=_shallow), max_chars)


class ScopeLeak(ReferenceHooks):
    """A thread-scope write also lands on the owning resource's working memory."""

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        thread = await super()._update_thread(thread_id, change)
        memory = change.metadata.get(WORKING_MEMORY_KEY) if isinstance(change.metadata, dict) else None
        if isinstance(memory, str):
            await self._update_resource(thread.resource_id, ResourceChange(memory, UNSET, change.now))
        return thread


class UnstableTies(ReferenceHooks):
    """list_threads orders by the timestamp only: threads with equal timestamps come in any order."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        owned = _owned_by(self, lambda owner: owner == query.resource_id)
        random.shuffle(owned)
        owned.sort(key=lambda t: getattr(t, query.order_by), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of(owned[query.offset : end], len(owned))


class OffByOnePages(ReferenceHooks):
    """has_more is computed with ``<=``: the last full page claims there is more."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        got = await super()._list_threads(query)
        if query.per_page is None:
            return got
        has_more = query.offset + len(got.threads) <= got.total and got.total > 0
        return dataclasses.replace(got, has_more=has_more)


class CreatedAtReset(ReferenceHooks):
    """update_resource stamps created_at with now as well."""

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        updated = await super()._update_resource(resource_id, change)
        return await self._save_resource(dataclasses.replace(updated, created_at=updated.updated_at))


def _without_nul(value: Any) -> Any:
    return value.replace("\x00", "") if isinstance(value, str) else value


class AcceptsNul(ReferenceHooks):
    """Working memory with NUL is accepted (the NUL silently dropped) instead of rejected (at the door)."""

    @door
    async def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        return await operations.update_resource(self, resource_id, _without_nul(working_memory), metadata)

    @door
    async def set_working_memory(
        self, content: str, *, scope: Scope, resource_id: str | None = None, thread_id: str | None = None
    ) -> None:
        await operations.set_working_memory(self, _without_nul(content), scope, resource_id, thread_id)


# -- issue 19, part B: number types, corner states, the clock, slow shrinking ---------------------------
# Each mutant below was run against the suite before the check that kills it was written, and survived.


def _floats(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_floats(item) for item in value]
    if isinstance(value, dict):
        return {key: _floats(item) for key, item in value.items()}
    return value


class IntsBecomeFloats(ReferenceHooks):
    """Every integer in stored metadata and merged working memory comes back as a float (``1`` -> ``1.0``)."""

    async def _save_resource(self, resource: Resource) -> Resource:
        return await super()._save_resource(dataclasses.replace(resource, metadata=_floats(resource.metadata)))

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        return await super()._update_resource(
            resource_id, dataclasses.replace(change, metadata=_floats(change.metadata))
        )

    async def _create_thread(self, thread: Thread) -> Thread:
        return await super()._create_thread(dataclasses.replace(thread, metadata=_floats(thread.metadata)))

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        return await super()._save_thread(dataclasses.replace(thread, metadata=_floats(thread.metadata)), now)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        return await super()._update_thread(thread_id, dataclasses.replace(change, metadata=_floats(change.metadata)))

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        return _merge_in_store(self, target, now, _merging(patch, finish=_floats), max_chars)


def _blank_is_not_empty(text: str | None) -> dict[str, Any]:
    return {} if text is None or text == "" else parse_json_object(text.strip() or "not json")


class BlankMemoryIsNotEmpty(ReferenceHooks):
    """merge counts only missing or empty memory as ``{}``: whitespace-only text raises WorkingMemoryFormatError."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        return _merge_in_store(self, target, now, _merging(patch, parse=_blank_is_not_empty), max_chars)


def _falsy_is_empty(text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    value = json.loads(text) or {}  # JSON null, false, 0, "" and [] all read as {}
    return parse_json_object(json.dumps(value))


class NullTextIsEmpty(ReferenceHooks):
    """merge reads stored text ``null`` (or any falsy JSON) as ``{}`` instead of raising WorkingMemoryFormatError."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        return _merge_in_store(self, target, now, _merging(patch, parse=_falsy_is_empty), max_chars)


class DeleteKeepsThreadMemory(ReferenceHooks):
    """Thread working memory lives apart and outlives delete_thread: a thread re-created with the id gets it back."""

    def _kept(self) -> dict[str, str]:
        kept: dict[str, str] = self._store.__dict__.setdefault("kept_memory", {})
        return kept

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        with self._store.lock:
            old = self._store.threads.get(thread_id)
            memory = None if old is None else thread_working_memory(old.metadata)
            if memory is not None:
                self._kept()[thread_id] = memory
            return await super()._delete_thread(thread_id, owner=owner)

    def _revive(self, thread: Thread) -> Thread:
        if thread.id in self._store.threads:
            return thread
        memory = self._kept().pop(thread.id, None)
        if memory is None:
            return thread
        return dataclasses.replace(thread, metadata={**(thread.metadata or {}), WORKING_MEMORY_KEY: memory})

    async def _create_thread(self, thread: Thread) -> Thread:
        with self._store.lock:
            return await super()._create_thread(self._revive(thread))

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        with self._store.lock:
            return await super()._save_thread(self._revive(thread), now)


class ReadMovesUpdatedAt(ReferenceHooks):
    """Reading a record that holds working memory re-stores it (a "read repair"), so updated_at moves to now."""

    async def _get_resource(self, resource_id: str) -> Resource | None:
        with self._store.lock:
            old = await super()._get_resource(resource_id)
            if old is not None and old.working_memory is not None:
                self._store.resources[resource_id] = dataclasses.replace(old, updated_at=utc_now())
            return old

    async def _get_thread(self, thread_id: str) -> Thread | None:
        with self._store.lock:
            old = await super()._get_thread(thread_id)
            if old is not None and thread_working_memory(old.metadata) is not None:
                self._store.threads[thread_id] = dataclasses.replace(old, updated_at=utc_now())
            return old


class FailedMergeMovesUpdatedAt(ReferenceHooks):
    """merge stamps updated_at, then parses the stored text: a merge into text that is no JSON object raises
    WorkingMemoryFormatError but has moved updated_at."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        now = change.now
        with self._store.lock:
            if target.scope == "resource" and target.resource_id in self._store.resources:
                old = self._store.resources[target.resource_id]
                self._store.resources[old.id] = dataclasses.replace(old, updated_at=now)
            elif target.scope == "thread" and target.thread_id in self._store.threads:
                thread = self._store.threads[target.thread_id]
                if target.resource_id in (None, thread.resource_id):
                    self._store.threads[thread.id] = dataclasses.replace(thread, updated_at=now)
            return await super()._merge_working_memory(target, change)


class BulkMovesThreads(ReferenceHooks):
    """insert_threads writes every thread, present ones too: a bulk write moves a thread to a new owner."""

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        with self._store.lock:
            present = frozenset(t.id for t in threads if t.id in self._store.threads)
            self._store.threads.update((t.id, t) for t in threads)
        return present


class OffsetIteration(ReferenceHooks):
    """Pages of every thread cut by OFFSET (a count of records before), not by the last id seen."""

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        with self._store.lock:
            ids = sorted(self._store.threads)
            offset = 0 if after is None else int(after)
            chosen = ids[offset : offset + limit]
            records = tuple(self._store.threads[i] for i in chosen)
        return RecordPage(records, (), str(offset + limit) if len(chosen) == limit else None)


class CheckThenWrite(ReferenceHooks):
    """update_thread / delete_thread naming an owner read the thread and check its owner, then write by id alone."""

    async def _checked(self, thread_id: str, owner: str | None) -> None:
        if owner is not None:
            old = await self._get_thread(thread_id)
            if old is None:
                raise workmem.ThreadNotFoundError(thread_id)
            check_owner(old, owner)
            await self._pause(0.002)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        await self._checked(thread_id, change.owner)
        return await super()._update_thread(thread_id, dataclasses.replace(change, owner=None))

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        await self._checked(thread_id, owner)
        return await super()._delete_thread(thread_id, owner=None)


class OwnerIgnored(ReferenceHooks):
    """update_thread / delete_thread ignore the owner they are given: another resource's thread is written."""

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        return await super()._update_thread(thread_id, dataclasses.replace(change, owner=None))

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        return await super()._delete_thread(thread_id, owner=None)


# -- the max_chars size limit (issue 26, item 3) ------------------------------------------------------------


async def _stored_memory(hooks: ReferenceHooks, target: ScopeTarget) -> str | None:
    """The working memory a merge into ``target`` starts from, read outside any atomic step."""
    if target.scope == "resource":
        resource = await hooks._get_resource(str(target.resource_id))
        return None if resource is None else resource.working_memory
    thread = await hooks._get_thread(str(target.thread_id))
    return None if thread is None else thread_working_memory_to_merge(thread.metadata)


class LimitOnStaleRead(ReferenceHooks):
    """merge checks max_chars on the memory read before its atomic step (as the agent layer did): concurrent
    merges all pass against the same read, and together store more than the limit."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, max_chars = change.patch, change.max_chars
        merge_document(await _stored_memory(self, target), patch, max_chars)  # the check, on the read
        await self._pause(0.002)  # other merges slip in here
        return await super()._merge_working_memory(target, dataclasses.replace(change, max_chars=None))


class ReplaceLimitOnStaleRead(ReferenceHooks):
    """set_working_memory checks max_chars on the memory read before its write: a larger replace lands after a
    smaller one."""

    async def _stale_check(self, target: ScopeTarget, text: object, max_chars: int | None) -> None:
        if isinstance(text, str):
            check_limit(len(text), text_size(await _stored_memory(self, target)), max_chars)
            await self._pause(0.002)

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        await self._stale_check(ScopeTarget("resource", resource_id, None), change.working_memory, change.max_chars)
        return await super()._update_resource(resource_id, dataclasses.replace(change, max_chars=None))

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        memory = change.metadata.get(WORKING_MEMORY_KEY) if isinstance(change.metadata, dict) else None
        await self._stale_check(ScopeTarget("thread", change.owner, thread_id), memory, change.max_chars)
        return await super()._update_thread(thread_id, dataclasses.replace(change, max_chars=None))


class LimitCountsBytes(ReferenceHooks):
    """max_chars counts the merged JSON's UTF-8 bytes, not its characters."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars

        def merge(stored: str | None) -> tuple[dict[str, Any], str]:
            merged, text = merge_document(stored, patch)
            check_limit(len(text.encode("utf-8")), len(dump_json(parse_json_object(stored))), max_chars)
            return merged, text

        return _merge_in_store(self, target, now, merge)


class LimitCountsStoredText(ReferenceHooks):
    """A merge compares its compact result with the stored text as it is (indented by another program), not
    with that document written compact: memory above the limit grows."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars

        def merge(stored: str | None) -> tuple[dict[str, Any], str]:
            merged, text = merge_document(stored, patch)
            check_limit(len(text), text_size(stored), max_chars)
            return merged, text

        return _merge_in_store(self, target, now, merge)


MUTANTS_MAX_CHARS: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    (LimitOnStaleRead, {"max_chars_merge_race"}, {"max_chars_merge_race"}),
    (ReplaceLimitOnStaleRead, {"max_chars_replace_race"}, {"max_chars_replace_race"}),
    (LimitCountsBytes, {"max_chars_rules"}, {"max_chars_rules"}),
    (LimitCountsStoredText, {"max_chars_rules"}, {"max_chars_rules"}),
]
"""The size limit: decided in the atomic step, on the measure every backend shares."""


# -- issue 29: histories checked for linearizability, every owner-naming write raced, no aliasing -----------


class StaleReadCache(ReferenceHooks):
    """Each connection caches the records it read for 50 ms: another connection's write is not seen meanwhile
    (its own write of a record drops what it cached of that record)."""

    TTL = 0.05

    def _cache(self) -> dict[str, tuple[float, Any]]:
        cache: dict[str, tuple[float, Any]] = self.__dict__.setdefault("_read_cache", {})
        return cache

    async def _cached(self, key: str, read: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        hit = self._cache().get(key)
        if hit is None or hit[0] <= time.monotonic():
            hit = (time.monotonic() + self.TTL, await read())
            self._cache()[key] = hit
        return None if hit[1] is None else private_copy(hit[1])  # stale, but the caller's own

    def _forget(self, key: str) -> None:
        self._cache().pop(key, None)

    async def _get_resource(self, resource_id: str) -> Resource | None:
        return await self._cached("r:" + resource_id, lambda: ReferenceHooks._get_resource(self, resource_id))  # type: ignore[no-any-return]

    async def _get_thread(self, thread_id: str) -> Thread | None:
        return await self._cached("t:" + thread_id, lambda: ReferenceHooks._get_thread(self, thread_id))  # type: ignore[no-any-return]

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        self._forget("r:" + resource_id)
        return await super()._update_resource(resource_id, change)

    async def _create_thread(self, thread: Thread) -> Thread:
        self._forget("t:" + thread.id)
        return await super()._create_thread(thread)

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        self._forget("t:" + thread.id)
        return await super()._save_thread(thread, now)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        self._forget("t:" + thread_id)
        return await super()._update_thread(thread_id, change)

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        self._forget("t:" + thread_id)
        return await super()._delete_thread(thread_id, owner=owner)

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        self._forget("r:" + str(target.resource_id) if target.scope == "resource" else "t:" + str(target.thread_id))
        return await super()._merge_working_memory(target, change)


class CountedTotal(ReferenceHooks):
    """list_threads reports a total kept per owner by a counter that creates and deletes read, then write back."""

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = self._store.__dict__.setdefault("thread_counts", {})
        return counts

    async def _count(self, owner: str, change: int) -> None:
        seen = self._counts().get(owner, 0)
        await self._pause(0.001)  # the round trip between the read and the write of the counter
        self._counts()[owner] = seen + change

    async def _create_thread(self, thread: Thread) -> Thread:
        created = await super()._create_thread(thread)
        await self._count(thread.resource_id, 1)
        return created

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        new = thread.id not in self._store.threads
        saved = await super()._save_thread(thread, now)
        if new:
            await self._count(thread.resource_id, 1)
        return saved

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        old = self._store.threads.get(thread_id)
        deleted = await super()._delete_thread(thread_id, owner=owner)
        if deleted and old is not None:
            await self._count(old.resource_id, -1)
        return deleted

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        page = await super()._list_threads(query)
        return query.page_of(list(page.threads), self._counts().get(query.resource_id, 0))


class SplitConnectionMerge(ReferenceHooks):
    """merge reads the stored document on one connection and writes the merged one on another, unconditionally."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        reader = type(self)(self.name)  # a second connection to the same store
        if target.scope == "resource":
            assert target.resource_id is not None
            old = await reader._get_resource(target.resource_id)
            current = None if old is None else old.working_memory
        else:
            assert target.thread_id is not None
            thread = await reader._get_thread(target.thread_id)
            if thread is None:
                raise workmem.ThreadNotFoundError(target.thread_id)
            check_owner(thread, target.resource_id)
            current = thread_working_memory_to_merge(thread.metadata)
        await self._pause(0.001)  # the round trip to the other connection
        merged, text = merge_document(current, patch, max_chars)
        if target.scope == "resource":
            assert target.resource_id is not None
            await self._update_resource(target.resource_id, ResourceChange(text, UNSET, now))
        else:
            assert target.thread_id is not None
            await self._update_thread(
                target.thread_id, ThreadChange(UNSET, {WORKING_MEMORY_KEY: text}, now, target.resource_id)
            )
        return merged


class DeleteChecksOwnerFirst(ReferenceHooks):
    """delete_thread alone checks the owner it names by a read, then deletes by id (update_thread is right)."""

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        if owner is not None:
            old = await self._get_thread(thread_id)
            if old is None:
                return False
            check_owner(old, owner)
            await self._pause(0.002)
        return await super()._delete_thread(thread_id, owner=None)


class ThreadMergeChecksOwnerFirst(ReferenceHooks):
    """A thread-scope merge alone checks the owner it names by a read, then merges by thread id."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        if target.scope == "thread" and target.resource_id is not None:
            assert target.thread_id is not None
            old = await self._get_thread(target.thread_id)
            if old is None:
                raise workmem.ThreadNotFoundError(target.thread_id)
            check_owner(old, target.resource_id)
            await self._pause(0.002)
            target = ScopeTarget("thread", None, target.thread_id)
        return await super()._merge_working_memory(target, change)


class ParseCacheAliases(ReferenceHooks):
    """A cache of parsed records hands out the record it holds: a caller's edit to the returned metadata is
    written back with the next write of that record."""

    def _parsed(self) -> dict[str, tuple[Any, Any]]:
        parsed: dict[str, tuple[Any, Any]] = self._store.__dict__.setdefault("parsed", {})
        return parsed

    def _held(self, key: str, stored: R | None) -> R | None:
        """The parsed record of ``stored``, made once per stored version (under the store's lock)."""
        if stored is None:
            return None
        hit = self._parsed().get(key)
        if hit is None or hit[0] is not stored:
            hit = (stored, private_copy(stored))
            self._parsed()[key] = hit
        return hit[1]

    async def _get_resource(self, resource_id: str) -> Resource | None:
        with self._store.lock:
            return self._held("r:" + resource_id, self._store.resources.get(resource_id))

    async def _get_thread(self, thread_id: str) -> Thread | None:
        with self._store.lock:
            return self._held("t:" + thread_id, self._store.threads.get(thread_id))

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        with self._store.lock:
            old = self._held("r:" + resource_id, self._store.resources.get(resource_id))
            new = updated_resource(old, resource_id, change)
            self._store.resources[resource_id] = new
            return new

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        with self._store.lock:
            old = self._held("t:" + thread_id, self._store.threads.get(thread_id))
            if old is None:
                raise workmem.ThreadNotFoundError(thread_id)
            new = updated_thread(old, change)
            self._store.threads[thread_id] = new
            return new


MUTANTS_ISSUE_29: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    (StaleReadCache, {"linearizable"}, {"linearizable"}),
    (CountedTotal, {"linearizable"}, {"linearizable"}),
    (SplitConnectionMerge, {"linearizable"}, {"linearizable"}),
    (DeleteChecksOwnerFirst, {"owner_race", "linearizable"}, {"owner_race", "linearizable"}),
    (ThreadMergeChecksOwnerFirst, {"owner_race", "linearizable"}, {"owner_race", "linearizable"}),
    (ParseCacheAliases, {"no_aliasing", "linearizable"}, {"no_aliasing", "linearizable"}),
]
"""Issue 29's mutants: each caught by the linearizability check, and by the targeted check of its rule."""


# -- listings that are no snapshot (capabilities.snapshot_listing=False, as Upstash's listing="scan") ----------


class TwoStepListing(ReferenceHooks):
    """Not a mutant: an honest listing in two steps, as a scan lists, and declared so (``snapshot_listing=False``):
    the owner's thread ids, then (5 ms later) each one read again and kept if it is still the owner's. A thread
    created or deleted in between may be counted either way; one that exists throughout is always listed."""

    capabilities = dataclasses.replace(ReferenceHooks.capabilities, snapshot_listing=False)

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        with self._store.lock:
            ids = [t.id for t in self._store.threads.values() if t.resource_id == query.resource_id]
        await self._pause(0.005)
        with self._store.lock:
            found = [self._store.threads.get(thread_id) for thread_id in ids]
        owned = [t for t in found if t is not None and t.resource_id == query.resource_id]
        owned.sort(key=lambda t: (getattr(t, query.order_by), t.id), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of([private_copy(t) for t in owned[query.offset : end]], len(owned))


class CountThenPage(ReferenceHooks):
    """list_threads counts the owner's threads, then reads the page 5 ms later (two statements, no transaction
    around them), and claims its listings are snapshots: a create or delete in between gives a total of
    another moment than the page's."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        with self._store.lock:
            total = sum(t.resource_id == query.resource_id for t in self._store.threads.values())
        await self._pause(0.005)
        page = await super()._list_threads(query)
        return query.page_of(page.threads, total)


class RebuildingIndex(TwoStepListing):
    """Each create, save and delete rebuilds its owner's listing index (cleared, then refilled 2 ms later): a listing
    meanwhile finds none of the owner's threads, the steady ones too. It declares its listings no snapshot, so
    the linearizability check leaves them out: ``listing_under_churn`` must catch it."""

    def _rebuilding(self) -> dict[str, int]:
        rebuilding: dict[str, int] = self._store.__dict__.setdefault("rebuilding", {})
        return rebuilding

    async def _rebuild(self, owner: str) -> None:
        with self._store.lock:
            self._rebuilding()[owner] = self._rebuilding().get(owner, 0) + 1
        await self._pause(0.002)
        with self._store.lock:
            self._rebuilding()[owner] -= 1

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        created = await super()._create_thread(thread, record)
        await self._rebuild(thread.resource_id)
        return created

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        saved = await super()._save_thread(thread, now, record)
        await self._rebuild(thread.resource_id)
        return saved

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        old = self._store.threads.get(thread_id)
        deleted = await super()._delete_thread(thread_id, owner=owner)
        if deleted and old is not None:
            await self._rebuild(old.resource_id)
        return deleted

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        with self._store.lock:
            if self._rebuilding().get(query.resource_id):
                return query.page_of([], 0)
        return await super()._list_threads(query)


MUTANTS_LISTINGS: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    (CountThenPage, {"linearizable", "listing_under_churn"}, {"linearizable", "listing_under_churn"}),
    (RebuildingIndex, {"listing_under_churn"}, {"listing_under_churn", "linearizable"}),
]
"""Listings: one that is no snapshot but claims to be, and one, declared no snapshot, that loses threads that
exist throughout."""


MUTANTS_OWNER_WRITES: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    (CheckThenWrite, {"owner_race"}, {"owner_race"}),
    (OwnerIgnored, {"owner_immutable"}, {"owner_immutable"}),
]
"""Writes naming an owner: the check must be the write's own condition."""


MUTANTS_ISSUE_17: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    (BulkMovesThreads, {"bulk_insert_keeps_what_exists"}, {"bulk_insert_keeps_what_exists"}),
    (OffsetIteration, {"iteration_across_concurrent_writes"}, {"iteration_across_concurrent_writes"}),
]
"""Issue 17's mutants: (mutant, checks that must fail, checks run)."""


MUTANTS_B: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    (IntsBecomeFloats, {"round_trip_json"}, {"round_trip_json"}),
    (BlankMemoryIsNotEmpty, {"corner_states"}, {"corner_states"}),
    (NullTextIsEmpty, {"corner_states"}, {"corner_states"}),
    (DeleteKeepsThreadMemory, {"corner_states"}, {"corner_states"}),
    (ReadMovesUpdatedAt, {"timestamps", "stateful"}, {"timestamps", "stateful"}),
    (
        FailedMergeMovesUpdatedAt,
        {"timestamps", "corner_states", "stateful"},
        {"timestamps", "corner_states", "stateful"},
    ),
]
"""Part B's mutants: (mutant, checks that must fail, checks run)."""

# -- end of issue 19, part B ------------------------------------------------------------------------------


# -- issue 31: history and erasure -----------------------------------------------------------------------------


def _no_keep(record: Recording | None) -> Recording | None:
    return None if record is None else dataclasses.replace(record, keep=None)


class RecordsRefusedWrites(ReferenceHooks):
    """Records a thread's version before the write checks the owner, the size limit and the text: a refused
    write leaves a version behind."""

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        with self._store.lock:
            thread = self._store.threads.get(thread_id)
            if thread is not None:
                key = HistoryKey(thread.resource_id, thread_id)
                self._store.record(change.record, key, memory_given(change.metadata), change.now)
            return await super()._update_thread(thread_id, dataclasses.replace(change, record=None))


class NoRetention(ReferenceHooks):
    """Keeps every version whatever ``history=N`` asked (its store records each write as if told to keep all)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        store, record = self._shared, type(self._shared).record
        store.record = lambda recording, *args: record(store, _no_keep(recording), *args)  # type: ignore[method-assign]


class RacyNumbering(ReferenceHooks):
    """Merges atomically, then numbers the version outside the lock: reads the newest, writes one above it."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        merged = await super()._merge_working_memory(target, dataclasses.replace(change, record=None))
        record, now = change.record, change.now
        if record is not None:
            thread = None if target.thread_id is None else self._store.threads.get(target.thread_id)
            key = (
                HistoryKey(target.resource_id or "", None)
                if thread is None
                else HistoryKey(thread.resource_id, thread.id)
            )
            versions = list(self._store.history.get(key, []))  # read the newest ...
            await self._pause(0.001)  # ... another merge numbers its version here ...
            self._store.history[key] = with_version(versions, record, key, dump_json(merged), now)  # ... write
        return merged


class DeleteThreadKeepsHistory(ReferenceHooks):
    """``delete_thread`` removes the thread and leaves its history (a thread re-created under the id inherits it)."""

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        with self._store.lock:
            saved = dict(self._store.history)
            deleted = await super()._delete_thread(thread_id, owner=owner)
            self._store.history.update(saved)
            return deleted


class DeleteKeepsHistoryUnlessRecording(ReferenceHooks):
    """``delete_thread`` takes the thread's history only on a connection that records history."""

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        if self.history is not None:
            return await super()._delete_thread(thread_id, owner=owner)
        with self._store.lock:
            saved = dict(self._store.history)
            deleted = await super()._delete_thread(thread_id, owner=owner)
            self._store.history.update(saved)
            return deleted


class HistoryByMemoryId(ReferenceHooks):
    """Reads a working memory's history by the id of its record alone: a resource and a thread of one id share it."""

    async def _history(self, key: HistoryKey, limit: int, before: int | None) -> list[MemoryVersion]:
        with self._store.lock:
            versions = [v for k, vs in self._store.history.items() if k.memory_id == key.memory_id for v in vs]
        older = sorted((v for v in versions if before is None or v.version < before), key=lambda v: -v.version)
        return older[:limit]


class RestoreRecordedAsSet(ReferenceHooks):
    """Records a restore as a plain set, without its source."""

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        record = change.record
        if record is not None and record.kind == "restore":
            change = dataclasses.replace(change, record=Recording("set", record.at, keep=record.keep))
        return await super()._update_resource(resource_id, change)


class EraseByPrefix(ReferenceHooks):
    """Erases every resource whose id starts with the one given (a ``LIKE 'id%'``)."""

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        with self._store.lock:
            ids = {r for r in self._store.resources if r.startswith(resource_id)}
            ids |= {t.resource_id for t in self._store.threads.values() if t.resource_id.startswith(resource_id)}
            for other in sorted(ids - {resource_id}):
                await super()._delete_resource(other)
            return await super()._delete_resource(resource_id)


class EraseKeepsThreadHistory(ReferenceHooks):
    """Erases the user's records and its resource history, not its threads' history."""

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        with self._store.lock:
            kept = {k: v for k, v in self._store.history.items() if k.resource_id == resource_id and k.thread_id}
            erased = await super()._delete_resource(resource_id)
            self._store.history.update(kept)
        return erased  # counts the versions it left as removed


class EraseInSteps(ReferenceHooks):
    """Lists the user's threads, then (another round trip later) erases the history and the threads it listed."""

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        store = self._store
        with store.lock:
            threads = tuple(t.id for t in store.threads.values() if t.resource_id == resource_id)
        await self._pause(0.005)  # a round trip later: a thread created now is not listed ...
        with store.lock:
            keys = [key for key in store.history if key.resource_id == resource_id]
            versions = sum(len(store.history.pop(key)) for key in keys)  # ... but its history goes
            for thread_id in threads:
                store.threads.pop(thread_id, None)
            resource = store.resources.pop(resource_id, None) is not None
        return ErasedResource(resource_id, resource, tuple(sorted(threads)), versions)


class WholeRecordWritesUnrecorded(ReferenceHooks):
    """Records the working-memory operations only: create_thread, save_thread and save_resource change working
    memory without a version (what history did before whole-record writes were recorded)."""

    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        return await super()._save_resource(resource)

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        return await super()._create_thread(thread)

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        return await super()._save_thread(thread, now)


class UnchangedMemoryRecorded(ReferenceHooks):
    """save_resource records a version on every save, its working memory changed or not."""

    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        with self._store.lock:
            saved = await super()._save_resource(resource)
            if record is not None:
                self._store.record(record, HistoryKey(resource.id), resource.working_memory, record.at)
        return saved


MUTANTS_HISTORY: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    (WholeRecordWritesUnrecorded, {"history_whole_record_writes"}, {"history_whole_record_writes"}),
    (UnchangedMemoryRecorded, {"history_whole_record_writes"}, {"history_whole_record_writes"}),
    (RecordsRefusedWrites, {"history_atomic_with_write"}, {"history_atomic_with_write"}),
    (NoRetention, {"history_retention"}, {"history_retention"}),
    (RacyNumbering, {"history_complete_under_concurrency"}, {"history_complete_under_concurrency"}),
    (DeleteThreadKeepsHistory, {"history_delete_thread"}, {"history_delete_thread"}),
    (DeleteKeepsHistoryUnlessRecording, {"history_delete_thread"}, {"history_delete_thread"}),
    (HistoryByMemoryId, {"history_scope_isolation"}, {"history_scope_isolation"}),
    (
        RestoreRecordedAsSet,
        {"history_restore", "history_atomic_with_write"},
        {"history_restore", "history_atomic_with_write"},
    ),
    (EraseByPrefix, {"delete_resource_erases_one_user"}, {"delete_resource_erases_one_user"}),
    (EraseKeepsThreadHistory, {"delete_resource_erases_one_user"}, {"delete_resource_erases_one_user"}),
    (EraseInSteps, {"delete_resource_races_writes"}, {"delete_resource_races_writes"}),
]
"""Issue 31's mutants: history recorded with its write, complete, scoped, kept; a user erased whole and alone."""


FAST_SHRINK = dataclasses.replace(PROFILES["standard"], shrink_seconds=0, shrink_total_seconds=None)
"""The ci profile without shrinking: the same examples, so the same verdict, sooner (the test only needs that)."""


def _factory(mixin: type[ReferenceHooks], api: Api) -> Callable[[], ReferenceHooks]:
    name = f"mutant-{mixin.__name__}-{uuid.uuid4().hex}"
    cls = face(mixin, api)
    return lambda: cls(name)


@functools.cache
def _mutant_report(mutant: type[ReferenceHooks], checks: frozenset[str], api: Api) -> Report:
    """The ci verdict on one mutant through one API (once per session: the per-mutant tests and the kill rate
    share it)."""
    return run(_factory(mutant, api), profile=FAST_SHRINK, only=checks, api=api)  # type: ignore[arg-type]


MUTANTS: list[tuple[type[ReferenceHooks], set[str], set[str]]] = [
    # (mutant, checks that must fail, checks run)
    (OwnerChanging, {"owner_immutable", "owner_race", "stateful"}, {"owner_immutable", "owner_race", "stateful"}),
    (
        RacyMerge,
        {"no_lost_updates_resource", "no_lost_updates_thread"},
        {"no_lost_updates_resource", "no_lost_updates_thread"},
    ),
    (NullIsAValue, {"merge_patch_algebra", "stateful"}, {"merge_patch_algebra", "stateful"}),
    (ShallowMerge, {"merge_patch_algebra"}, {"merge_patch_algebra"}),
    (ScopeLeak, {"scope_isolation", "stateful"}, {"scope_isolation", "stateful"}),
    (UnstableTies, {"pagination"}, {"pagination"}),
    (OffByOnePages, {"pagination", "stateful"}, {"pagination", "stateful"}),
    (CreatedAtReset, {"timestamps", "stateful"}, {"timestamps", "stateful"}),
    (AcceptsNul, {"validation", "stateful"}, {"validation", "stateful"}),
    *MUTANTS_B,
    *MUTANTS_ISSUE_17,
    *MUTANTS_OWNER_WRITES,
    *MUTANTS_MAX_CHARS,
    *MUTANTS_ISSUE_29,
    *MUTANTS_LISTINGS,
    *MUTANTS_HISTORY,
]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("mutant", "must_fail", "checks"), MUTANTS, ids=[m[0].__name__ for m in MUTANTS])
def test_mutant_is_caught(mutant: type[ReferenceHooks], must_fail: set[str], checks: set[str], api: Api) -> None:
    report = _mutant_report(mutant, frozenset(checks), api)
    assert report.api == api
    assert report.adapter == f"{__name__}:{face(mutant, api).__name__}"  # the face of that API ran
    failed = {c.name for c in report.checks if c.status == "failed"}
    assert must_fail <= failed, f"{mutant.__name__} ({api}) was not caught by {sorted(must_fail - failed)}"
    assert not report.passed
    for result in report.checks:
        if result.status == "failed":
            assert result.reason, f"{result.name} failed without a reason"


@pytest.mark.parametrize("api", APIS)
def test_a_listing_declared_no_snapshot_passes_what_it_promises(api: Api) -> None:
    """A listing declared no snapshot passes the linearizability check (its listings run, unchecked there) and
    ``listing_under_churn``, which holds it to what such a listing keeps."""
    report = _mutant_report(TwoStepListing, frozenset({"linearizable", "listing_under_churn"}), api)
    assert [(c.name, c.status, c.reason) for c in report.checks] == [
        ("linearizable", "passed", None),
        ("listing_under_churn", "passed", None),
    ]
    # One whose listings often find nothing: left out of the history (the check passes), caught by the churn.
    report = _mutant_report(RebuildingIndex, frozenset({"listing_under_churn", "linearizable"}), api)
    statuses = [(c.name, c.status) for c in report.checks]
    assert statuses == [("linearizable", "passed"), ("listing_under_churn", "failed")]


@pytest.mark.parametrize("api", APIS)
def test_kill_rate_every_mutant_is_killed(capsys: pytest.CaptureFixture[str], api: Api) -> None:
    """The mutation score of the suite: every mutant above must be caught by the checks it breaks, on each API."""
    every = MUTANTS + [(mutant, {check}, {check}) for mutant, check in EDGE_MUTANTS]
    survivors = []
    for mutant, must_fail, checks in every:
        report = _mutant_report(mutant, frozenset(checks), api)
        failed = {c.name for c in report.checks if c.status == "failed"}
        if not must_fail <= failed:
            survivors.append(f"{mutant.__name__} (passed {', '.join(sorted(must_fail - failed))})")
    killed = len(every) - len(survivors)
    rate = f"{killed}/{len(every)} mutants ({100 * killed / len(every):.0f}%)"
    line = f"conformance suite kill rate, {api} API: {rate} caught by the ci profile"
    with capsys.disabled():
        print(f"\n{line}")
    assert not survivors, f"{line}; survived: {'; '.join(survivors)}"


def test_failure_reason_carries_the_falsifying_example() -> None:
    report = run(_factory(ShallowMerge, "sync"), profile="standard", only=["merge_patch_algebra"])  # type: ignore[arg-type]
    (result,) = report.checks
    assert result.status == "failed" and result.reason is not None
    assert "Falsifying example" in result.reason or "Failing test case" in result.reason, result.reason
    assert "merge(" in result.reason  # the note() of each step is part of the reason


@pytest.mark.parametrize("api", APIS)
def test_the_honest_adapter_passes_every_check(api: Api) -> None:
    name = uuid.uuid4().hex
    honest: Callable[[], object] = (
        (lambda: ReferenceStorage(name)) if api == "sync" else lambda: AsyncReferenceStorage(name)
    )
    report = run(honest, profile="standard", api=api)  # type: ignore[arg-type]
    problems = [(c.name, c.status, c.reason) for c in report.checks if c.status not in ("passed", "skipped")]
    assert not problems
    assert report.passed and report.api == api
    skipped = {c.name for c in report.checks if c.status == "skipped"}
    assert skipped == {"cross_process_atomic", "persistence"}  # capabilities ReferenceStorage does not declare
    assert all(not c.required for c in report.checks if c.status == "skipped")


def test_an_async_factory_may_be_a_coroutine_function_and_the_wrong_face_is_refused() -> None:
    name = uuid.uuid4().hex

    async def opens() -> AsyncReferenceStorage:
        return AsyncReferenceStorage(name)

    report = run(opens, profile="quick", only=["owner_immutable"], api="async")
    assert [c.status for c in report.checks] == ["passed"]
    assert report.adapter == "workmem.adapters.reference:AsyncReferenceStorage" and report.backend == "reference"
    with pytest.raises(TypeError, match="not an AsyncMemoryStorage"):
        run(lambda: ReferenceStorage(name), only=["owner_immutable"], api="async")
    with pytest.raises(TypeError, match="api='async'"):
        run(lambda: AsyncReferenceStorage(name), only=["owner_immutable"])
    with pytest.raises(ValueError, match="api must be one of"):
        run("memory://", api="both")  # type: ignore[arg-type]


def test_xfail_turns_a_failure_into_xfailed_but_the_run_still_fails_on_a_required_check() -> None:
    nul = _factory(AcceptsNul, "sync")
    report = run(nul, profile="quick", only=["validation"], xfail={"validation": "known gap"})  # type: ignore[arg-type]
    (result,) = report.checks
    assert result.status == "xfailed" and result.reason is not None and result.reason.startswith("known gap")
    assert not report.passed  # a required check that did not pass
    with pytest.raises(ValueError, match="reason"):
        run(nul, only=["validation"], xfail={"validation": " "})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown check"):
        run(nul, only=["validation"], xfail={"no_such_check": "why"})  # type: ignore[arg-type]


def test_a_required_check_cannot_be_skipped() -> None:
    from workmem.conformance import CheckSkipped
    from workmem.conformance.profiles import get_profile
    from workmem.conformance.registry import Check
    from workmem.conformance.runner import _execute
    from workmem.conformance.target import Target

    def skips(ctx: object) -> None:
        raise CheckSkipped("not here")

    required = _execute(Check("x", "t", skips), Target("memory://"), get_profile("quick"), None)
    optional = _execute(Check("y", "t", skips, "persistent"), Target("memory://"), get_profile("quick"), None)
    assert (required.status, optional.status) == ("failed", "skipped")
    assert required.reason is not None and "cannot be skipped" in required.reason


@pytest.mark.parametrize("api", APIS)
def test_a_mutant_registered_under_a_scheme_fails_through_its_url(api: Api) -> None:
    scheme = f"mutant-owner-{uuid.uuid4().hex[:8]}"
    sync_face, async_face = faces(OwnerChanging)
    workmem.register(scheme, f"{__name__}:{sync_face.__name__}")  # its async_adapter names the async face
    report = run(f"{scheme}://shared-{uuid.uuid4().hex}", profile="quick", only=["owner_immutable"], api=api)
    ran = sync_face if api == "sync" else async_face
    assert report.backend == scheme and report.adapter == f"{__name__}:{ran.__name__}"
    assert [c.status for c in report.checks] == ["failed"]
    assert "ThreadOwnershipError" in (report.checks[0].reason or "")


class Leaky(ReferenceHooks):
    """Its driver's error message carries the URL's password."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Any:
        return cls("leaky")

    @classmethod
    async def open(cls, url: str, **options: Any) -> Any:
        return cls("leaky")

    async def _get_thread(self, thread_id: str) -> Thread | None:
        raise workmem.BackendUnavailableError("cannot reach postgres://app:hunter2@db/x")


@pytest.mark.parametrize("api", APIS)
def test_reasons_are_masked_of_secrets(api: Api) -> None:
    scheme = f"leaky-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{__name__}:{faces(Leaky)[0].__name__}")
    report = run(f"{scheme}://app:hunter2@db/x", profile="quick", only=["owner_immutable"], api=api)
    (result,) = report.checks
    assert result.status == "failed"
    assert "hunter2" not in json.dumps(report.to_dict()) and "***" in (result.reason or "")


def test_owner_error_is_the_contract_error() -> None:
    # guards the mutants themselves: the honest adapter raises where OwnerChanging does not, on both faces
    sync_face, async_face = faces(OwnerChanging)
    honest, mutant = ReferenceStorage(), sync_face()
    for storage in (honest, mutant):
        storage.save_thread(Thread("t", "a", created_at=utc_now()))
    with pytest.raises(ThreadOwnershipError):
        honest.save_thread(Thread("t", "b"))
    assert mutant.save_thread(Thread("t", "b")).resource_id == "b"

    async def on_the_async_face() -> str:
        storage = async_face()
        await storage.save_thread(Thread("t", "a"))
        return (await storage.save_thread(Thread("t", "b"))).resource_id

    assert asyncio.run(on_the_async_face()) == "b"


# -- cross-process: a persistent adapter whose merge is not atomic between processes ----------------


class RacyFileStorage(ReferenceHooks):
    """Claims cross-process atomicity, keeps its data in a JSON file, merges by read-pause-write.

    Each thread it writes records the class (the face) that wrote it, so a test can tell which API
    the worker processes used.
    """

    capabilities = workmem.Capabilities(cross_process_atomic=True, persistent=True)

    def __init__(self, path: str) -> None:
        super().__init__(None)
        self.path = path

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Any:
        return cls(url.split("://", 1)[1])

    @classmethod
    async def open(cls, url: str, **options: Any) -> Any:
        return cls(url.split("://", 1)[1])

    def _load(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)  # type: ignore[no-any-return]
        except (FileNotFoundError, ValueError):
            return {}

    def _write(self, key: str, value: Any) -> None:
        data = self._load()
        data[key] = value
        temporary = f"{self.path}.{uuid.uuid4().hex}"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(temporary, self.path)  # each write is whole; the read-modify-write is not

    async def _get_resource(self, resource_id: str) -> Resource | None:
        text = self._load().get("r:" + resource_id)
        return None if text is None else Resource(resource_id, text)

    async def _get_thread(self, thread_id: str) -> Thread | None:
        row = self._load().get("t:" + thread_id)
        if row is None:
            return None
        return Thread(thread_id, row["owner"], metadata={WORKING_MEMORY_KEY: row["wm"]} if row["wm"] else None)

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        old = await self._get_thread(thread.id)
        await self._pause(0.01)  # check, then act: another process slips in between
        if old is not None and old.resource_id != thread.resource_id:
            raise ThreadOwnershipError(thread.id, thread.resource_id)
        self._write("t:" + thread.id, {"owner": thread.resource_id, "wm": None, "face": type(self).__name__})
        return thread

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch = change.patch
        if target.scope == "resource":
            current = (await self._get_resource(str(target.resource_id)) or Resource("x")).working_memory
        else:
            thread = await self._get_thread(str(target.thread_id))
            assert thread is not None
            current = thread_working_memory(thread.metadata)
        merged: dict[str, Any] = workmem.apply_merge_patch(parse_json_object(current), patch)
        await self._pause(0.01)
        if target.scope == "resource":
            self._write("r:" + str(target.resource_id), dump_json(merged))
        else:
            assert thread is not None
            row = {"owner": thread.resource_id, "wm": dump_json(merged), "face": type(self).__name__}
            self._write("t:" + str(target.thread_id), row)
        return merged


@pytest.mark.parametrize("api", APIS)
def test_cross_process_check_catches_merges_that_are_atomic_only_in_one_process(tmp_path: Path, api: Api) -> None:
    scheme = f"racyfile-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{__name__}:{faces(RacyFileStorage)[0].__name__}")
    path = tmp_path / "store.json"
    report = run(f"{scheme}://{path}", profile="quick", only=["cross_process_atomic", "persistence"], api=api)
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["cross_process_atomic"] == "failed", report.format_failures()
    reason = report.checks[0].reason or ""
    assert "lost" in reason or "succeeded" in reason, reason
    # every writer, the worker processes included, went through the face of the run's API
    writers = {row["face"] for key, row in json.loads(path.read_text()).items() if key.startswith("t:")}
    assert writers == {face(RacyFileStorage, api).__name__}, writers


@pytest.mark.parametrize("api", APIS)
def test_worker_processes_use_the_api_they_are_given(tmp_path: Path, api: Api) -> None:
    scheme = f"racyfile-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{__name__}:{faces(RacyFileStorage)[0].__name__}")
    path = tmp_path / "store.json"
    job = {"url": f"{scheme}://{path}", "op": "create_thread", "thread_id": "t", "resource_id": "r", "title": "x"}
    assert spawn([job], api=api) == [{"ok": True}]
    assert json.loads(path.read_text())["t:t"]["face"] == face(RacyFileStorage, api).__name__


# -- issue 19, gaps A: look-alike ids, big lists, order after updates, metadata merges, Unicode in
# merged JSON, exact limits, mixed valid/invalid arguments, concurrent metadata updates --------------
# Each mutant below passed every check of the suite before workmem/conformance/edges.py existed.


def _owned_by(storage: ReferenceHooks, matches: Callable[[str], bool]) -> list[Thread]:
    with storage._store.lock:
        return [t for t in storage._store.threads.values() if matches(t.resource_id)]


def _listing(query: ListQuery, threads: list[Thread], total: int | None = None, cap: int | None = None) -> ThreadPage:
    threads.sort(key=lambda t: (getattr(t, query.order_by), t.id), reverse=query.direction == "desc")
    end = None if query.per_page is None else query.offset + query.per_page
    chunk = threads[query.offset : end][:cap]
    return query.page_of(chunk, len(threads) if total is None else total)


def _like(pattern: str) -> re.Pattern[str]:
    """SQL ``LIKE`` without an ``ESCAPE`` clause, ASCII case-insensitive as in SQLite."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.compile(regex, re.IGNORECASE | re.DOTALL)


class LikeListing(ReferenceHooks):
    """list_threads selects ``WHERE resourceId LIKE ?``: ``%``/``_`` in an id are wildcards, case is folded."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        pattern = _like(query.resource_id)
        return _listing(query, _owned_by(self, lambda owner: pattern.fullmatch(owner) is not None))


class GlobListing(ReferenceHooks):
    """list_threads scans keys with the id as a Redis ``MATCH`` glob, escaping ``[`` but not ``*`` and ``?``."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        glob = query.resource_id.replace("[", "[[]")
        return _listing(query, _owned_by(self, lambda owner: fnmatch.fnmatchcase(owner, glob)))


class PrefixListing(ReferenceHooks):
    """list_threads ranges over keys starting with the id: a resource id's prefix lists the longer one's threads."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        return _listing(query, _owned_by(self, lambda owner: owner.startswith(query.resource_id)))


class LikeTotal(ReferenceHooks):
    """The page is right, but the separate COUNT query matches with an unescaped, case-folding ``LIKE``."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        pattern = _like(query.resource_id)
        total = len(_owned_by(self, lambda owner: pattern.fullmatch(owner) is not None))
        return _listing(query, _owned_by(self, lambda owner: owner == query.resource_id), total)


class GlobDelete(ReferenceHooks):
    """delete_thread deletes every key matching ``thread:{id}`` as an unescaped Redis glob."""

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        pattern = thread_id.replace("[", "[[]")
        with self._store.lock:
            doomed = [tid for tid in self._store.threads if fnmatch.fnmatchcase(tid, pattern)]
            for tid in doomed:
                del self._store.threads[tid]
            return bool(doomed)


class CappedAll(ReferenceHooks):
    """``per_page=None`` silently returns the default page size (100) instead of every thread."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        cap = 100 if query.per_page is None else None
        return _listing(query, _owned_by(self, lambda owner: owner == query.resource_id), cap=cap)


class Batch64(ReferenceHooks):
    """Rows are fetched in one batch of at most 64: a page of more threads is cut short, total still right."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        return _listing(query, _owned_by(self, lambda owner: owner == query.resource_id), cap=64)


class StaleUpdatedIndex(ReferenceHooks):
    """Orders by updated_at through an index written by save/create only: update_thread and merges leave it stale."""

    def _index(self) -> dict[str, Any]:
        with self._store.lock:
            index: dict[str, Any] = self._store.__dict__.setdefault("updated_index", {})
            return index

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        saved = await super()._save_thread(thread, now)
        self._index()[saved.id] = saved.updated_at
        return saved

    async def _create_thread(self, thread: Thread) -> Thread:
        created = await super()._create_thread(thread)
        self._index()[created.id] = created.updated_at
        return created

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        self._index().pop(thread_id, None)
        return await super()._delete_thread(thread_id, owner=owner)

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        owned = _owned_by(self, lambda owner: owner == query.resource_id)
        if query.order_by == "created_at":
            return _listing(query, owned)
        index = self._index()
        owned.sort(key=lambda t: (index.get(t.id, t.updated_at), t.id), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page
        return query.page_of(owned[query.offset : end], len(owned))


def _deep(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A lodash-style deep merge: objects merge key by key, anything else (null too) replaces."""
    result = dict(old)
    for key, value in new.items():
        before = result.get(key)
        result[key] = _deep(before, value) if isinstance(before, dict) and isinstance(value, dict) else value
    return result


class DeepMetadataMerge(ReferenceHooks):
    """update_resource/update_thread merge nested metadata objects deeply instead of shallowly."""

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        with self._store.lock:
            old = self._store.resources.get(resource_id)
            if old is not None and old.metadata and isinstance(change.metadata, dict):
                change = dataclasses.replace(change, metadata=_deep(old.metadata, change.metadata))
            return await super()._update_resource(resource_id, change)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        with self._store.lock:
            old = self._store.threads.get(thread_id)
            if old is not None and old.metadata and isinstance(change.metadata, dict):
                change = dataclasses.replace(change, metadata=_deep(old.metadata, change.metadata))
            return await super()._update_thread(thread_id, change)


def _nfc(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, list):
        return [_nfc(v) for v in value]
    if isinstance(value, dict):
        return {_nfc(k): _nfc(v) for k, v in value.items()}
    return value


class NormalizingMerge(ReferenceHooks):
    """merge_working_memory sends the patch through a JSON layer that NFC-normalizes every string and key."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch = change.patch
        return await super()._merge_working_memory(target, dataclasses.replace(change, patch=_nfc(patch)))


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 1


def _one_level_less(value: Any) -> Any:
    """``value`` with its deepest container flattened away, for a validator that counts from 0."""
    if isinstance(value, dict):
        if any(isinstance(v, dict | list) for v in value.values()):
            return {k: _one_level_less(v) for k, v in value.items()}
        return 0
    if isinstance(value, list):
        if any(isinstance(v, dict | list) for v in value):
            return [_one_level_less(v) for v in value]
        return 0
    return value


def _lax(value: Any) -> dict[str, Any] | None:
    """Metadata 33 levels deep let through (everything else about it still checked); ``None`` for the rest."""
    if isinstance(value, Mapping) and _depth(dict(value)) == 33:
        validate_json_object(_one_level_less(dict(value)))
        return json.loads(json.dumps(dict(value)))  # type: ignore[no-any-return]
    return None


class DepthOffByOne(ReferenceHooks):
    """The nesting limit is checked with ``>`` on a depth counted from 0: 33 levels are accepted (at the door)."""

    @door
    async def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        lax = _lax(metadata)
        if lax is None:
            return await operations.update_resource(self, resource_id, working_memory, metadata)
        validate_id(resource_id, "resource id")
        checked, _ = check_resource_update(working_memory, UNSET)
        with self._store.lock:  # written as trusted: a Resource would check the depth again
            old = self._store.resources.get(resource_id)
            now = utc_now()
            new = trusted_resource(
                resource_id,
                (old.working_memory if old else None) if isinstance(checked, Unset) else checked,
                {**((old.metadata if old else None) or {}), **lax},
                old.created_at if old else now,
                now,
            )
            self._store.resources[resource_id] = new
            return new

    @door
    async def update_thread(
        self, thread_id: str, *, title: str | Unset = UNSET, metadata: Mapping[str, Any] | Unset | None = UNSET
    ) -> Thread:
        lax = _lax(metadata)
        if lax is None:
            return await operations.update_thread(self, thread_id, title, metadata)
        validate_id(thread_id, "thread id")
        checked, _ = check_thread_update(title, UNSET)
        with self._store.lock:
            old = self._store.threads.get(thread_id)
            if old is None:
                raise workmem.ThreadNotFoundError(thread_id)
            new = trusted_thread(
                old.id,
                old.resource_id,
                old.title if isinstance(checked, Unset) else checked,
                {**(old.metadata or {}), **lax},
                old.created_at,
                utc_now(),
            )
            self._store.threads[thread_id] = new
            return new


def _long(value: object) -> bool:
    """An id over 512 UTF-8 bytes in at most 512 characters (and otherwise valid)."""
    return (
        isinstance(value, str)
        and len(value.encode("utf-8", "surrogatepass")) > 512
        and len(value) <= 512
        and "\x00" not in value
    )


class LenientStoredDepth(ReferenceHooks):
    """merge parses the stored document with the nesting limit off by one: it merges into 33 levels."""

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars

        def lenient(stored: str | None) -> tuple[dict[str, Any], str]:
            try:
                document = json.loads(stored or "")
            except ValueError:
                document = None
            if not isinstance(document, dict) or _depth(document) != 33:
                return merge_document(stored, patch, max_chars)
            merged: dict[str, Any] = workmem.apply_merge_patch(document, patch)
            return merged, json.dumps(merged)

        return _merge_in_store(self, target, now, lenient, max_chars)


class CharLimitIds(ReferenceHooks):
    """Ids are limited to 512 *characters* (``len(id)``), not 512 UTF-8 bytes (at the door)."""

    @door
    async def get_resource(self, resource_id: str) -> Resource | None:
        if _long(resource_id):
            return await self._get_resource(resource_id)
        return await operations.get_resource(self, resource_id)

    @door
    async def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        if not _long(resource_id):
            return await operations.update_resource(self, resource_id, working_memory, metadata)
        checked_memory, checked_metadata = check_resource_update(working_memory, metadata)
        return await self._update_resource(resource_id, ResourceChange(checked_memory, checked_metadata, utc_now()))

    @door
    async def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        if _long(resource_id):
            return ThreadPage((), 0, page, per_page, False)
        return await operations.list_threads(self, resource_id, page, per_page, order_by, direction)


class PartialWrite(ReferenceHooks):
    """update_resource writes one field at a time: bad metadata leaves the new working memory written.

    (The same bug in update_thread, metadata then title, is caught by the state machine's bad titles.)
    """

    @door
    async def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        if isinstance(working_memory, Unset) or isinstance(metadata, Unset):
            return await operations.update_resource(self, resource_id, working_memory, metadata)
        await operations.update_resource(self, resource_id, working_memory, UNSET)
        return await operations.update_resource(self, resource_id, UNSET, metadata)


class RacyMetadata(ReferenceHooks):
    """Metadata updates read the record, pause, then write the merged whole back."""

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        if not isinstance(change.metadata, dict):
            return await super()._update_resource(resource_id, change)
        old = await self._get_resource(resource_id)
        await self._pause(0.002)
        return await self._save_resource(updated_resource(old, resource_id, change))

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        if not isinstance(change.metadata, dict):
            return await super()._update_thread(thread_id, change)
        old = await self._get_thread(thread_id)
        if old is None:
            raise workmem.ThreadNotFoundError(thread_id)
        await self._pause(0.002)
        new = updated_thread(old, change)
        with self._store.lock:
            self._store.threads[thread_id] = new
        return new


class SeparateMetadataLock(ReferenceHooks):
    """update_thread serializes on a lock of its own (say, a version that merges never bump): merges slip between."""

    _metadata_lock = _SpinLock()  # shared by every connection: update_thread alone is atomic

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        if not isinstance(change.metadata, dict):
            return await super()._update_thread(thread_id, change)
        await self._metadata_lock.acquire(self)
        try:
            old = await self._get_thread(thread_id)
            if old is None:
                raise workmem.ThreadNotFoundError(thread_id)
            await self._pause(0.002)
            new = updated_thread(old, change)
            with self._store.lock:
                self._store.threads[thread_id] = new
            return new
        finally:
            self._metadata_lock.release()


EDGE_MUTANTS: list[tuple[type[ReferenceHooks], str]] = [
    # (mutant, the check that must fail)
    (LikeListing, "list_lookalike_ids"),
    (GlobListing, "list_lookalike_ids"),
    (PrefixListing, "list_lookalike_ids"),
    (LikeTotal, "list_lookalike_ids"),
    (GlobDelete, "list_lookalike_ids"),
    (CappedAll, "list_beyond_default_page"),
    (Batch64, "list_beyond_default_page"),
    (StaleUpdatedIndex, "list_order_after_update"),
    (DeepMetadataMerge, "metadata_merge_shallow"),
    (NormalizingMerge, "merged_json_unicode_exact"),
    (DepthOffByOne, "exact_limits"),
    (LenientStoredDepth, "exact_limits"),
    (CharLimitIds, "exact_limits"),
    (PartialWrite, "no_partial_write"),
    (RacyMetadata, "concurrent_metadata_updates"),
    (SeparateMetadataLock, "concurrent_metadata_updates"),
]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("mutant", "must_fail"), EDGE_MUTANTS, ids=[m[0].__name__ for m in EDGE_MUTANTS])
def test_edge_mutant_is_caught(mutant: type[ReferenceHooks], must_fail: str, api: Api) -> None:
    report = _mutant_report(mutant, frozenset([must_fail]), api)
    (result,) = report.checks
    assert result.status == "failed", f"{mutant.__name__} ({api}) was not caught by {must_fail}"
    assert result.reason and "Flaky" not in result.reason, result.reason


# -- issue 29, section 4: failures name the rule that broke ------------------------------------------------


def _whole_seconds(record: R | None) -> R | None:
    if record is None:
        return None
    return dataclasses.replace(
        record, created_at=record.created_at.replace(microsecond=0), updated_at=record.updated_at.replace(microsecond=0)
    )


class SecondsOnRead(ReferenceHooks):
    """Stored timestamps are read back without their milliseconds (a parser that drops the fraction)."""

    async def _get_resource(self, resource_id: str) -> Resource | None:
        return _whole_seconds(await super()._get_resource(resource_id))

    async def _get_thread(self, thread_id: str) -> Thread | None:
        return _whole_seconds(await super()._get_thread(thread_id))


class PagesOneTooLong(ReferenceHooks):
    """A page holds one thread more than per_page (a LIMIT of per_page + 1, meant to tell has_more)."""

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        owned = _owned_by(self, lambda owner: owner == query.resource_id)
        owned.sort(key=lambda t: (getattr(t, query.order_by), t.id), reverse=query.direction == "desc")
        end = None if query.per_page is None else query.offset + query.per_page + 1
        return query.page_of(owned[query.offset : end], len(owned))


def test_a_timestamp_precision_bug_is_named_by_owner_immutable() -> None:
    (result,) = _mutant_report(SecondsOnRead, frozenset(["owner_immutable"]), "sync").checks
    assert result.status == "failed" and result.reason is not None
    first = result.reason.splitlines()[0]
    assert first != "AssertionError:" and "timestamps" in first and "milliseconds" in first, result.reason


def test_a_page_size_bug_is_not_called_a_confusion_of_look_alike_ids() -> None:
    (result,) = _mutant_report(PagesOneTooLong, frozenset(["list_lookalike_ids"]), "sync").checks
    assert result.status == "failed" and result.reason is not None
    assert "confused look-alike ids" not in result.reason and "wrong size" in result.reason, result.reason


def test_a_stateful_failure_shows_the_calls_on_the_ids_it_names() -> None:
    """Without time to shrink, Hypothesis prints every step; the report keeps the calls that touch the ids the
    failure names (and connection switches, and the last call), each dropped run counted in one line."""
    (result,) = _mutant_report(CreatedAtReset, frozenset(["stateful"]), "sync").checks
    assert result.status == "failed" and result.reason is not None
    lines = result.reason.splitlines()
    prefix = re.search(r"ids are prefixed with '([^']+)'", result.reason)
    assert prefix is not None, result.reason
    named = set(re.findall(re.escape(prefix.group(1)) + r"[^'\s,)]+", lines[0]))
    calls = [line for line in lines if " -> " in line]
    assert named and calls and not [line for line in lines if line.startswith("state.")], result.reason
    assert all(any(n in line for n in named) for line in calls[:-1]), result.reason
    assert any(line.endswith("on other ids, not shown") for line in lines), result.reason


# Both faces of every mutant exist from the import on: a worker process imports this module to find one by name.
for _mixin in [m for m in list(globals().values()) if isinstance(m, type) and issubclass(m, ReferenceHooks)]:
    if _mixin.__module__ == __name__ and not issubclass(_mixin, ReferenceStorage | AsyncReferenceStorage):
        faces(_mixin)
