"""Verify: compare two storages record by record, both read in id order, one page of each at a time; then history.

A merge of the two id-ordered streams (every backend orders ids alike, by code
point): an id on one side only, a record that differs (its canonical export
line), or one a side cannot read is a ``difference``; records the source
cannot read are ``unreadable``. Verify clean means both sides hold the same
records: a destination holding records the source lacks is not clean.

Then, where both sides keep working memory's history, the versions of each
working memory, merged the same way (:func:`compare_history`): a version on one
side only, or one that differs, is a ``difference`` too. A copy that lost or
changed a version does not verify clean.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Final, TypeVar

from workmem._drive import run_sync
from workmem.history import HistoryKey, MemoryVersion
from workmem.hooks import StorageHooks
from workmem.masking import forgets_locals
from workmem.transfer.engine import (
    DEFAULT_PAGE_SIZE,
    KINDS,
    UNREADABLE,
    Kind,
    StorageLike,
    _Unreadable,
    count_all,
    describe_differences,
    describe_fields,
    opened,
    page,
)
from workmem.transfer.format import Record, record_line, version_line, version_values
from workmem.transfer.progress import Progress
from workmem.transfer.report import Issue, TransferReport
from workmem.transfer.versions import history_keys, newest_first

__all__ = ["ONE_SIDED_HISTORY", "compare", "compare_history", "verify"]

T = TypeVar("T")


class OutOfOrderError(RuntimeError):
    """A storage returned ids out of ascending order: an adapter bug, not a difference in data."""


async def _stream(
    storage: StorageHooks, kind: Kind, page_size: int, side: str
) -> AsyncIterator[tuple[str, Record | _Unreadable]]:
    """``(id, record or UNREADABLE)`` of every record of ``kind``, ascending by id, a page at a time."""
    after: str | None = None
    previous: str | None = None
    while True:
        current = await page(storage, kind, after, page_size)
        entries: list[tuple[str, Record | _Unreadable]] = [(r.id, r) for r in current.records]
        entries += [(record_id, UNREADABLE) for record_id in current.unreadable]
        entries.sort(key=lambda entry: entry[0])
        for record_id, record in entries:
            if previous is not None and record_id <= previous:
                raise OutOfOrderError(f"the {side} returned {kind} id {record_id!r} after {previous!r}")
            previous = record_id
            yield record_id, record
        if current.next_after is None:
            return
        after = current.next_after


async def _pairs(
    left: AsyncIterator[T], right: AsyncIterator[T], rank: Callable[[T], Any]
) -> AsyncIterator[tuple[T | None, T | None]]:
    """Two streams ascending by ``rank``, merged: ``(a, b)`` of one rank, ``(a, None)``/``(None, b)`` of one side."""
    a, b = await anext(left, None), await anext(right, None)
    while a is not None or b is not None:
        if b is None or (a is not None and rank(a) < rank(b)):
            yield a, None
            a = await anext(left, None)
        elif a is None or rank(b) < rank(a):
            yield None, b
            b = await anext(right, None)
        else:
            yield a, b
            a, b = await anext(left, None), await anext(right, None)


async def compare(
    source: StorageHooks,
    target: StorageHooks,
    *,
    report: TransferReport,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    source_unreadable: bool = True,
) -> None:
    """Add to ``report`` every difference between ``source`` and ``target`` (open storages, sync or async).

    The records, then the history of their working memories (:func:`compare_history`).
    ``source_unreadable=False`` leaves out the source's unreadable records (a copy reported them already).
    """
    if progress is not None:
        progress.start("verify", await count_all(source, progress))

    def differ(kind: Kind, record_id: str, detail: str) -> None:
        report.add(Issue("difference", kind, record_id, detail))

    def unreadable(kind: Kind, record_id: str) -> None:
        if source_unreadable:
            report.add(Issue("unreadable", kind, record_id, "the source holds it in a form workmem cannot read"))

    for kind in KINDS:
        left = _stream(source, kind, page_size, "source")
        right = _stream(target, kind, page_size, "destination")
        async for a, b in _pairs(left, right, _id):
            if a is None:
                assert b is not None
                differ(kind, b[0], "only in the destination")
                continue
            mine = a[1]
            theirs = None if b is None else b[1]
            if isinstance(mine, _Unreadable):
                unreadable(kind, a[0])
            elif theirs is None:
                differ(kind, a[0], "missing in the destination")
            elif isinstance(theirs, _Unreadable):
                differ(kind, a[0], "the destination holds it in a form workmem cannot read")
            elif record_line(mine) != record_line(theirs):
                differ(kind, a[0], describe_differences(mine, theirs))
            else:
                report.count(kind, "verified")
            if progress is not None:
                progress.advance(1)
    await compare_history(source, target, report=report, page_size=page_size)
    if progress is not None:
        progress.finish()


def _id(entry: tuple[str, Record | _Unreadable]) -> str:
    return entry[0]


ONE_SIDED_HISTORY: Final = "the {} keeps working memory's history and the {} cannot: versions not compared"
"""The note of a verify whose sides differ in ``capabilities.history`` (said once, not for every version)."""


async def compare_history(
    source: StorageHooks, target: StorageHooks, *, report: TransferReport, page_size: int
) -> None:
    """Add to ``report`` every version that differs between the histories of both sides' working memories.

    Where both keep history (``capabilities.history``): the keys of the working memories that have versions
    (:func:`~workmem.transfer.versions.history_keys`: the store's list of them where it has one), merged in the
    export's order, and for each key the versions of both sides, newest first, ``page_size`` at a time: a version
    number on one side only, or whose content, time, kind or source differ, is a ``difference``; each that matches
    is counted ``verified``. Where one side keeps history and the other cannot, a note says so once.
    """
    keeps = source.capabilities.history, target.capabilities.history
    if keeps != (True, True):
        if any(keeps):
            sides = ("source", "destination") if keeps[0] else ("destination", "source")
            report.note(ONE_SIDED_HISTORY.format(*sides))
        return
    left = _keys(source, page_size, "source")
    right = _keys(target, page_size, "destination")
    async for mine, theirs in _pairs(left, right, _key_rank):
        key = mine or theirs
        assert key is not None
        versions = (
            _versions(source, key, page_size, "source") if mine else _none(),
            _versions(target, key, page_size, "destination") if theirs else _none(),
        )
        async for a, b in _pairs(*versions, _newest_first):
            if a is not None and b is not None:
                if version_line(a) == version_line(b):
                    report.count("version", "verified")
                else:
                    detail = describe_fields(version_values(a), version_values(b))
                    _differ(report, key, a.version, detail or "the versions differ")
            elif a is not None:
                _differ(report, key, a.version, "missing in the destination")
            elif b is not None:
                _differ(report, key, b.version, "only in the destination")


def _differ(report: TransferReport, key: HistoryKey, number: int, detail: str) -> None:
    owner = "" if key.thread_id is None else f", resource {key.resource_id!r}"
    where = f"working memory version {number} ({key.scope} scope{owner})"
    report.add(Issue("difference", key.scope, key.memory_id, f"{where}: {detail}"))


def _key_rank(key: HistoryKey) -> tuple[str, str, str]:
    """:func:`~workmem.transfer.versions.history_keys`' order, then the owner (a thread's other owner: another key)."""
    return key.scope, key.memory_id, key.resource_id


def _newest_first(version: MemoryVersion) -> int:
    return -version.version


async def _keys(storage: StorageHooks, page_size: int, side: str) -> AsyncIterator[HistoryKey]:
    """:func:`~workmem.transfer.versions.history_keys`, checked to ascend (a merge of two streams relies on it)."""
    previous: HistoryKey | None = None
    async for key in history_keys(storage, page_size):
        if previous is not None and _key_rank(key) <= _key_rank(previous):
            raise OutOfOrderError(f"the {side} listed the history of {key} after {previous}")
        previous = key
        yield key


async def _versions(storage: StorageHooks, key: HistoryKey, page_size: int, side: str) -> AsyncIterator[MemoryVersion]:
    """:func:`~workmem.transfer.versions.newest_first`, checked to descend."""
    previous: int | None = None
    async for version in newest_first(storage, key, page_size):
        if previous is not None and version.version >= previous:
            raise OutOfOrderError(f"the {side} returned version {version.version} of {key} after {previous}")
        previous = version.version
        yield version


async def _none() -> AsyncIterator[MemoryVersion]:
    """No versions: a side that lists no history for a key (it holds none, or not that key's record)."""
    return
    yield  # pragma: no cover - makes this an async generator


@forgets_locals  # a URL given is in the frames below
def verify(
    src: StorageLike,
    dst: StorageLike,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Compare ``src`` and ``dst`` (URLs, opened without creating anything, or open storages) record by record.

    Then the versions of their working memories' history, where both keep it (:func:`compare_history`);
    where one side keeps history and the other cannot, :attr:`TransferReport.notes` says so.
    """
    report = TransferReport(on_issue=on_issue)
    with opened(src, create=False) as source, opened(dst, create=False) as target:
        run_sync(compare(source, target, report=report, page_size=page_size, progress=progress))
    return report
