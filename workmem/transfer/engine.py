"""The copy engine: every resource, then every thread, page by page, with the insert / skip / conflict rules.

Built only on the public storage API (``resource_page``/``thread_page``,
``insert_resources``/``insert_threads``, ``get_resource``/``get_thread``,
``save_resource``, ``replace_thread``). Memory stays flat: one page of the
source (and at most one page of the destination) is held at a time.

The rules, shared by :func:`copy` and :func:`import_records`: a record whose id
the destination lacks is inserted as it is (ids, owner, both timestamps,
metadata and working memory); one the destination holds identically (the same
canonical export line) is skipped; any other is a conflict, reported and left
alone, unless ``overwrite`` is set: then a differing resource is replaced whole
(``save_resource``) and a differing thread of the same owner is replaced
(``replace_thread``). A thread the destination gives to another resource stays
a conflict even with ``overwrite``: an owner never moves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO, Final, Literal

from workmem.errors import MissingTablesError
from workmem.records import RecordPage, Resource, Thread
from workmem.storage import MemoryStorage
from workmem.transfer.format import (
    HEADER_LINE,
    BadLine,
    Record,
    field_values,
    parse_header,
    parse_record,
    record_line,
)
from workmem.transfer.progress import Progress
from workmem.transfer.report import Issue, TransferReport

__all__ = ["DEFAULT_PAGE_SIZE", "KINDS", "Kind", "StorageLike", "Writer", "copy", "export_records", "import_records"]

Kind = Literal["resource", "thread"]
KINDS: Final[tuple[Kind, Kind]] = ("resource", "thread")
DEFAULT_PAGE_SIZE: Final = 500
StorageLike = MemoryStorage | str | os.PathLike[str]
"""An open (sync) storage, used and left open, or a URL, opened and closed here."""


class _Unreadable:
    """Marks a destination record that is stored in a form workmem cannot read."""


UNREADABLE: Final = _Unreadable()
_NO_SCAN: Final = object()
_BOOKKEEPING: Final = frozenset({"workmem_thread_counts"})
"""Tables of workmem's own beside Mastra's (thread counts kept by triggers), created when a source lacks them."""


def kind_of(record: Record) -> Kind:
    return "resource" if isinstance(record, Resource) else "thread"


def page(storage: MemoryStorage, kind: Kind, after: str | None, limit: int) -> RecordPage[Any]:
    if kind == "resource":
        return storage.resource_page(after, limit=limit)
    return storage.thread_page(after, limit=limit)


def _insert(storage: MemoryStorage, kind: Kind, records: Sequence[Record]) -> frozenset[str]:
    if kind == "resource":
        return storage.insert_resources(records)  # type: ignore[arg-type]
    return storage.insert_threads(records)  # type: ignore[arg-type]


def _get(storage: MemoryStorage, kind: Kind, record_id: str) -> Record | None:
    return storage.get_resource(record_id) if kind == "resource" else storage.get_thread(record_id)


def describe_differences(source: Record, target: Record) -> str:
    """What differs between the two records, field by field (short values shown, long ones only named)."""
    left, right = field_values(source), field_values(target)
    parts = []
    for name in left:
        mine, theirs = (json.dumps(side.get(name), ensure_ascii=False, sort_keys=True) for side in (left, right))
        if mine == theirs:
            continue
        if len(mine) + len(theirs) <= 100:
            parts.append(f"{name} {mine} in the source, {theirs} in the destination")
        else:
            parts.append(f"{name} differs")
    return "; ".join(parts) or "the records differ"


@contextmanager
def opened(storage: StorageLike, *, create: bool) -> Iterator[MemoryStorage]:
    """``storage`` itself when open (left open), else ``workmem.connect(storage, create=create)``, closed after."""
    if isinstance(storage, MemoryStorage):
        yield storage
        return
    if not isinstance(storage, (str, os.PathLike)):
        raise TypeError(
            f"expected a URL or an open workmem.MemoryStorage, got {type(storage).__name__}"
            " (an AsyncMemoryStorage cannot be copied: open the URL with workmem.connect)"
        )
    from workmem.registry import connect

    try:
        connection = connect(storage, create=create)
    except MissingTablesError as error:
        if create or not error.tables or not set(error.tables) <= _BOOKKEEPING:
            raise
        # Mastra's tables are there, only workmem's own bookkeeping is not (a database the TypeScript adapters
        # alone wrote): create that, as any first workmem.connect does; the records are left as they are.
        connection = connect(storage, create=True)
    with connection:
        yield connection


class Writer:
    """Writes batches of records of one kind into ``dst`` by the insert / skip / conflict / overwrite rules."""

    def __init__(self, dst: MemoryStorage, report: TransferReport, *, overwrite: bool, page_size: int) -> None:
        self.dst = dst
        self.report = report
        self.overwrite = overwrite
        self.page_size = page_size

    def write(
        self, kind: Kind, records: Sequence[Record], *, scan_after: object = _NO_SCAN, lines: Sequence[int] = ()
    ) -> None:
        """Insert ``records`` (distinct ids, all of ``kind``) and settle those whose ids ``dst`` already holds.

        ``scan_after``: an id (or ``None``, the start) below every id of ``records``: the records ``dst``
        already holds are then read by scanning its pages from there (few reads), else one by one.
        ``lines``: the import line of each record, for its issues.
        """
        present = _insert(self.dst, kind, records)
        self.report.count(kind, "inserted", len(records) - len(present))
        if not present:
            return
        existing = self._existing(kind, present, scan_after)
        for index, record in enumerate(records):
            if record.id in present:
                self._settle(kind, record, existing.get(record.id), lines[index] if lines else None)

    def _existing(self, kind: Kind, ids: frozenset[str], scan_after: object) -> dict[str, Record | _Unreadable]:
        found: dict[str, Record | _Unreadable] = {}
        if scan_after is _NO_SCAN:
            for record_id in sorted(ids):
                record = _get(self.dst, kind, record_id)
                if record is not None:
                    found[record_id] = record
            return found
        assert scan_after is None or isinstance(scan_after, str)
        after, last = scan_after, max(ids)
        while True:
            current = page(self.dst, kind, after, self.page_size)
            found.update((r.id, r) for r in current.records if r.id in ids)
            found.update((i, UNREADABLE) for i in current.unreadable if i in ids)
            if current.next_after is None or current.next_after >= last:
                return found
            after = current.next_after

    def _issue(self, kind: Kind, record: Record, detail: str, line: int | None) -> None:
        self.report.count(kind, "conflict")
        self.report.add(Issue("conflict", kind, record.id, detail, line))

    def _settle(self, kind: Kind, record: Record, stored: Record | _Unreadable | None, line: int | None) -> None:
        if stored is None:  # deleted between the insert and the read: insert it again
            if record.id not in _insert(self.dst, kind, [record]):
                self.report.count(kind, "inserted")
                return
            stored = _get(self.dst, kind, record.id)
            if stored is None:
                self._issue(kind, record, "the destination's record changes while it is copied", line)
                return
        if isinstance(stored, _Unreadable):
            self._issue(kind, record, "the destination holds this id in a form workmem cannot read", line)
            return
        if record_line(stored) == record_line(record):
            self.report.count(kind, "skipped")
            return
        if isinstance(record, Thread) and isinstance(stored, Thread) and stored.resource_id != record.resource_id:
            self._issue(
                kind,
                record,
                f"the destination gives this thread to resource {stored.resource_id!r}, the source to "
                f"{record.resource_id!r} (an owner never moves, --overwrite or not)",
                line,
            )
            return
        if not self.overwrite:
            self._issue(kind, record, f"differs: {describe_differences(record, stored)}", line)
            return
        if isinstance(record, Resource):
            self.dst.save_resource(record)
        elif not self.dst.replace_thread(record):
            self._issue(kind, record, "the destination's thread changed owner or vanished while it was replaced", line)
            return
        self.report.count(kind, "replaced")


def count_records(storage: MemoryStorage, kind: Kind) -> int:
    """How many records of ``kind`` (readable or not) ``storage`` holds, by reading its pages."""
    total, after = 0, None
    while True:
        current = page(storage, kind, after, 10_000)
        total += len(current.records) + len(current.unreadable)
        if current.next_after is None:
            return total
        after = current.next_after


def _unreadable(report: TransferReport, kind: Kind, ids: Iterable[str], where: str) -> None:
    for record_id in ids:
        report.count(kind, "unreadable")
        report.add(Issue("unreadable", kind, record_id, f"{where} holds it in a form workmem cannot read"))


def copy(
    src: StorageLike,
    dst: StorageLike,
    *,
    overwrite: bool = False,
    verify: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Copy every resource, then every thread, from ``src`` to ``dst``; return what happened.

    ``src`` and ``dst`` are URLs (the source opened with ``create=False``) or
    open sync storages (left open). Ids, owners, both timestamps, metadata and
    working memory are kept exactly. Re-runnable: records already identical in
    ``dst`` are skipped; a conflict (a thread ``dst`` gives to another resource,
    a record that differs) is reported and left alone unless ``overwrite``
    (see :mod:`workmem.transfer.engine`). Records the source cannot read are
    reported as ``unreadable``. ``verify``: then compare both sides record by
    record (:func:`workmem.transfer.verify.compare`), differences reported.
    ``page_size`` records (1 to 10,000) are read and written at a time.
    ``progress`` shows the run; ``on_issue`` is called with each problem as it
    is found. :attr:`TransferReport.ok` is false on any conflict, unreadable
    record or difference.
    """
    from workmem.transfer.verify import compare

    report = TransferReport(on_issue=on_issue)
    with opened(src, create=False) as source, opened(dst, create=True) as target:
        total = sum(count_records(source, kind) for kind in KINDS) if progress is not None and progress.tty else None
        if progress is not None:
            progress.start("copy", total)
        writer = Writer(target, report, overwrite=overwrite, page_size=page_size)
        for kind in KINDS:
            after: str | None = None
            while True:
                current = page(source, kind, after, page_size)
                _unreadable(report, kind, current.unreadable, "the source")
                if current.records:
                    writer.write(kind, current.records, scan_after=after)
                if progress is not None:
                    progress.advance(len(current.records) + len(current.unreadable))
                if current.next_after is None:
                    break
                after = current.next_after
        if progress is not None:
            progress.finish()
        if verify:
            compare(source, target, report=report, page_size=page_size, progress=progress, source_unreadable=False)
    return report


def export_records(
    src: StorageLike,
    out: BinaryIO,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Write every record of ``src`` to ``out`` in the export format (header, resources, threads; by id)."""
    report = TransferReport(on_issue=on_issue)
    with opened(src, create=False) as source:
        total = sum(count_records(source, kind) for kind in KINDS) if progress is not None and progress.tty else None
        if progress is not None:
            progress.start("export", total)
        out.write(HEADER_LINE.encode("utf-8"))
        for kind in KINDS:
            after: str | None = None
            while True:
                current = page(source, kind, after, page_size)
                _unreadable(report, kind, current.unreadable, "the source")
                out.write("".join(record_line(record) for record in current.records).encode("utf-8"))
                report.count(kind, "exported", len(current.records))
                if progress is not None:
                    progress.advance(len(current.records) + len(current.unreadable))
                if current.next_after is None:
                    break
                after = current.next_after
        if progress is not None:
            progress.finish()
    return report


class _Batch:
    """Records of one kind with distinct ids, waiting to be written, and their line numbers."""

    def __init__(self) -> None:
        self.kind: Kind = "resource"
        self.records: list[Record] = []
        self.lines: list[int] = []
        self.ids: set[str] = set()


def import_records(
    dst: StorageLike,
    lines: Iterable[bytes],
    *,
    overwrite: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    total: int | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Import an export (``lines``: its lines as bytes, e.g. a file opened ``"rb"``) into ``dst``.

    Each line is parsed and validated whole before anything of it is written;
    a bad one is reported (``bad line``, with its number) and skipped, and the
    import goes on. The insert / skip / conflict rules are :func:`copy`'s. A
    first line that is no export header imports nothing. ``total``: the number
    of lines, for the progress bar.
    """
    report = TransferReport(on_issue=on_issue)
    numbered = enumerate(lines, 1)
    first = next(numbered, None)
    try:
        if first is None:
            raise BadLine("the file is empty (an export starts with its header line)")
        parse_header(first[1])
    except BadLine as exc:
        report.add(Issue("bad line", None, None, str(exc), 1))
        return report
    with opened(dst, create=True) as target:
        writer = Writer(target, report, overwrite=overwrite, page_size=page_size)
        highest: dict[Kind, str] = {}
        batch = _Batch()

        def flush() -> None:
            if not batch.records:
                return
            low, high = min(batch.ids), max(batch.ids)
            previous = highest.get(batch.kind)
            scan: object = previous if previous is None or low > previous else _NO_SCAN
            writer.write(batch.kind, batch.records, scan_after=scan, lines=batch.lines)
            highest[batch.kind] = high if previous is None else max(previous, high)
            if progress is not None:
                progress.advance(len(batch.records))
            batch.records, batch.lines, batch.ids = [], [], set()

        if progress is not None:
            progress.start("import", None if total is None else max(total - 1, 0))
        for number, raw in numbered:
            if not raw.strip():
                continue
            try:
                record = parse_record(raw)
            except BadLine as exc:
                report.add(Issue("bad line", None, None, str(exc), number))
                if progress is not None:
                    progress.advance(1)
                continue
            kind = kind_of(record)
            if batch.records and (kind != batch.kind or record.id in batch.ids or len(batch.records) >= page_size):
                flush()
            batch.kind = kind
            batch.records.append(record)
            batch.lines.append(number)
            batch.ids.add(record.id)
        flush()
        if progress is not None:
            progress.finish()
    return report
