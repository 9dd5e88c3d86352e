"""Verify: compare two storages record by record, both read in id order, one page of each at a time.

A merge of the two id-ordered streams (every backend orders ids alike, by code
point): an id on one side only, a record that differs (its canonical export
line), or one a side cannot read is a ``difference``; records the source
cannot read are ``unreadable``. Verify clean means both sides hold the same
records: a destination holding records the source lacks is not clean.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from workmem._drive import run_sync
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
    opened,
    page,
)
from workmem.transfer.format import Record, record_line
from workmem.transfer.progress import Progress
from workmem.transfer.report import Issue, TransferReport

__all__ = ["compare", "verify"]


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

    ``source_unreadable=False`` leaves out the source's unreadable records (a copy reported them already).
    """
    if progress is not None:
        progress.start("verify", await count_all(source, progress))

    def differ(kind: Kind, record_id: str, detail: str) -> None:
        report.add(Issue("difference", kind, record_id, detail))

    for kind in KINDS:
        left = _stream(source, kind, page_size, "source")
        right = _stream(target, kind, page_size, "destination")
        a, b = await anext(left, None), await anext(right, None)
        while a is not None or b is not None:
            if b is None or (a is not None and a[0] < b[0]):
                assert a is not None
                if isinstance(a[1], _Unreadable):
                    if source_unreadable:
                        report.add(Issue("unreadable", kind, a[0], "the source holds it in a form workmem cannot read"))
                else:
                    differ(kind, a[0], "missing in the destination")
                a = await anext(left, None)
                if progress is not None:
                    progress.advance(1)
                continue
            if a is None or b[0] < a[0]:
                differ(kind, b[0], "only in the destination")
                b = await anext(right, None)
                continue
            mine, theirs = a[1], b[1]
            if isinstance(mine, _Unreadable):
                if source_unreadable:
                    report.add(Issue("unreadable", kind, a[0], "the source holds it in a form workmem cannot read"))
            elif isinstance(theirs, _Unreadable):
                differ(kind, a[0], "the destination holds it in a form workmem cannot read")
            elif record_line(mine) != record_line(theirs):
                differ(kind, a[0], describe_differences(mine, theirs))
            else:
                report.count(kind, "verified")
            a, b = await anext(left, None), await anext(right, None)
            if progress is not None:
                progress.advance(1)
    if progress is not None:
        progress.finish()


@forgets_locals  # a URL given is in the frames below
def verify(
    src: StorageLike,
    dst: StorageLike,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Compare ``src`` and ``dst`` (URLs, opened without creating anything, or open storages) record by record."""
    report = TransferReport(on_issue=on_issue)
    with opened(src, create=False) as source, opened(dst, create=False) as target:
        run_sync(compare(source, target, report=report, page_size=page_size, progress=progress))
    return report
