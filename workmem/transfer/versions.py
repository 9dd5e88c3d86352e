"""Working memory's history on the move: read from a source, written to a destination, one user picked out.

A store that keeps history (``capabilities.history``) has the versions of each working
memory under its record: a resource's under the resource, a thread's under the thread
(and its owner). A copy or an export reads them record by record, after the records;
an import or a copy writes them as given (:meth:`~workmem.hooks.StorageHooks._insert_versions`:
a version whose working memory already has that number is left alone and counted
``skipped``), once the destination holds their record (a thread: of the same owner; else they are
a ``conflict``, reported). A destination without history keeps none of them: they are counted
``dropped``. Nothing here invents a version: a record whose source kept no history
arrives without one. A verify reads both sides' versions the same way, a page at a time
(:func:`workmem.transfer.verify.compare_history`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final

from workmem import operations
from workmem.history import HistoryKey, MemoryVersion
from workmem.hooks import StorageHooks
from workmem.records import Resource, Thread
from workmem.transfer.report import Issue, TransferReport

__all__ = ["HISTORY_PAGE", "VersionBatch", "history_keys", "holds", "newest_first", "user_records", "versions_of"]

HISTORY_PAGE: Final = 10_000
"""Versions read at a time from one working memory's history."""
KEY_PAGE: Final = 10_000
"""Keys of versioned working memories listed at a time (:meth:`~workmem.hooks.StorageHooks._versioned_keys`)."""


async def newest_first(source: StorageHooks, key: HistoryKey, page_size: int) -> AsyncIterator[MemoryVersion]:
    """Every version of ``key``'s working memory in ``source``, newest first, read ``page_size`` at a time."""
    before: int | None = None
    while True:
        page = await source._history(key, page_size, before)
        for version in page:
            yield version
        if len(page) < page_size or page[-1].version <= 1:
            return
        before = page[-1].version


async def versions_of(source: StorageHooks, key: HistoryKey) -> list[MemoryVersion]:
    """Every version of ``key``'s working memory in ``source``, oldest first."""
    return [version async for version in newest_first(source, key, HISTORY_PAGE)][::-1]


async def history_keys(source: StorageHooks, page_size: int) -> AsyncIterator[HistoryKey]:
    """The working memory of every record of ``source`` that may have versions, in the export's order.

    That order is each resource's (by id), then each thread's (by id), ids compared by code point.
    Where the store lists the keys that have versions (:meth:`~workmem.hooks.StorageHooks._versioned_keys`),
    those keys are gathered (the keys, not their versions), put in that order, and kept when
    the store holds their record (a version whose record is gone is not copied). Otherwise
    every resource and every thread is asked: one history read per record.
    """
    page = await source._versioned_keys(None, KEY_PAGE)
    if page is None:
        async for resource in operations.iter_resources(source, page_size):
            yield HistoryKey(resource.id)
        async for thread in operations.iter_threads(source, page_size):
            yield HistoryKey(thread.resource_id, thread.id)
        return
    keys: list[HistoryKey] = []
    while page:
        keys.extend(page)
        if len(page) < KEY_PAGE:
            break
        page = await source._versioned_keys(page[-1], KEY_PAGE) or []
    keys.sort(key=lambda key: (key.scope, key.memory_id))  # "resource" < "thread"; str order is code point order
    for key in keys:
        if await holds(source, key):
            yield key


async def holds(storage: StorageHooks, key: HistoryKey) -> bool:
    """Whether ``storage`` holds the record of ``key``'s working memory (a thread: owned by that resource)."""
    if key.thread_id is None:
        return await operations.get_resource(storage, key.resource_id) is not None
    thread = await operations.get_thread(storage, key.thread_id, None)
    return thread is not None and thread.resource_id == key.resource_id


async def user_records(
    source: StorageHooks, resource_id: str, report: TransferReport
) -> tuple[Resource | None, list[Thread]]:
    """One user's resource record (if any) and the threads it owns, by id; an unreadable thread is reported."""
    resource = await operations.get_resource(source, resource_id)
    listing = await operations.list_threads(source, resource_id, 0, None, "created_at", "asc")
    for thread_id in listing.unreadable:
        report.count("thread", "unreadable")
        report.add(Issue("unreadable", "thread", thread_id, "the source holds it in a form workmem cannot read"))
    return resource, sorted(listing.threads, key=lambda t: t.id)


class VersionBatch:
    """Versions on their way into ``target``, written ``page_size`` at a time (or counted dropped without history)."""

    def __init__(self, target: StorageHooks, report: TransferReport, page_size: int) -> None:
        self.target = target
        self.report = report
        self.page_size = page_size
        self.pending: list[MemoryVersion] = []
        self.keeps = target.capabilities.history

    async def add(self, versions: Sequence[MemoryVersion]) -> None:
        self.pending.extend(versions)
        if len(self.pending) >= self.page_size:
            await self.flush()

    async def flush(self) -> None:
        batch, self.pending = self.pending, []
        if not batch:
            return
        if not self.keeps:
            self.report.count("version", "dropped", len(batch))
            return
        homes = {key: await holds(self.target, key) for key in dict.fromkeys(v.key for v in batch)}
        for key, home in homes.items():
            if not home:
                detail = "its history is not written: the destination holds no {} of that id"
                if key.thread_id is None:
                    self.report.add(Issue("conflict", "resource", key.resource_id, detail.format("resource")))
                else:
                    owned = f"{detail.format('thread')} owned by {key.resource_id!r}"
                    self.report.add(Issue("conflict", "thread", key.thread_id, owned))
        kept = [v for v in batch if homes[v.key]]
        self.report.count("version", "conflict", len(batch) - len(kept))
        added = await self.target._insert_versions(kept) if kept else 0
        self.report.count("version", "inserted", added)
        self.report.count("version", "skipped", len(kept) - added)


async def copy_history(source: StorageHooks, target: StorageHooks, report: TransferReport, page_size: int) -> None:
    """The versions of every record's working memory in ``source``, written to ``target`` (none without history)."""
    if not source.capabilities.history:
        return
    batch = VersionBatch(target, report, page_size)
    async for key in history_keys(source, page_size):
        await batch.add(await versions_of(source, key))
    await batch.flush()
