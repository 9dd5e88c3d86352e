"""The copy engine: every resource, then every thread, page by page, with the insert / skip / conflict rules.

Built only on the storage contract's operations (``resources_after``/``threads_after``,
``insert_resources``/``insert_threads``, ``get_resource``/``get_thread``,
``save_resource``, ``restore_thread``), called as their operations
(:mod:`workmem.operations`, what each public method runs): each flow here is one
coroutine over a storage's hooks, driven with :func:`~workmem._drive.run_sync`
for sync storages (:func:`copy`) and awaited for async ones (:func:`copy_async`).

A copy overlaps its I/O: while the destination writes a page, the source's
next page is read, and up to :data:`WRITES_IN_FLIGHT` pages are written at
once (worker threads under the sync API, tasks under the async one; see
:mod:`workmem.transfer.concurrency`). Each page's outcome (inserted, skipped,
conflict) is settled in page order as its write returns. Memory stays flat: at
most ``WRITES_IN_FLIGHT + 2`` pages of the source (and one of the destination,
read to settle the ids it already held) are held at a time.

The rules, shared by :func:`copy` and :func:`import_records`: a record whose id
the destination lacks is inserted as it is (ids, owner, both timestamps,
metadata and working memory); one the destination holds identically (the same
canonical export line) is skipped; any other is a conflict, reported and left
alone, unless ``overwrite`` is set: then a differing resource is replaced whole
(``save_resource``) and a differing thread of the same owner is replaced
(``restore_thread``). A thread the destination gives to another resource stays
a conflict even with ``overwrite``: an owner never moves.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Final, Literal

from workmem import operations
from workmem._drive import run_sync
from workmem.aio import AsyncMemoryStorage
from workmem.errors import WorkmemError
from workmem.history import HistoryKey, MemoryVersion
from workmem.hooks import StorageHooks
from workmem.masking import forgets_locals, forgets_locals_async
from workmem.records import RecordPage, Resource, Thread
from workmem.storage import MemoryStorage
from workmem.transfer.concurrency import Pending, Runner, TaskRunner, ThreadRunner
from workmem.transfer.format import (
    HEADER_LINE,
    BadLine,
    Record,
    field_values,
    parse_header,
    parse_line,
    read_lines,
    record_line,
    version_line,
)
from workmem.transfer.progress import Progress
from workmem.transfer.report import Issue, TransferReport
from workmem.transfer.versions import VersionBatch, copy_history, history_keys, user_records, versions_of
from workmem.validation import validate_id

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DESTINATION_NOTE",
    "KINDS",
    "WRITES_IN_FLIGHT",
    "AsyncStorageLike",
    "Kind",
    "StorageLike",
    "Writer",
    "copy",
    "copy_async",
    "export_records",
    "import_records",
]

Kind = Literal["resource", "thread"]
KINDS: Final[tuple[Kind, Kind]] = ("resource", "thread")
DEFAULT_PAGE_SIZE: Final = 500
WRITES_IN_FLIGHT: Final = 4
"""Pages a copy writes at once, each on a connection of its own, while the source's next page is read.

One write at a time leaves a server idle while Python reads and encodes the next page, and a
single statement uses one server process. Measured here (libSQL -> PostgreSQL, 100,000 threads,
2 shared cores, interleaved runs, medians): 1 in flight 2.3x psycopg COPY, 2 1.6-2.4x, 4 1.3-2.0x.
"""
DESTINATION_NOTE: Final = "(raised opening the destination)"
"""The note (``exc.__notes__``) on an error raised opening the destination of a copy or import by its URL."""
StorageLike = MemoryStorage | str | os.PathLike[str]
"""An open (sync) storage, used and left open, or a URL, opened and closed here."""
AsyncStorageLike = AsyncMemoryStorage | str | os.PathLike[str]
"""An open async storage, used and left open, or a URL, opened (``workmem.connect_async``) and closed here."""


class _Unreadable:
    """Marks a destination record that is stored in a form workmem cannot read."""


UNREADABLE: Final = _Unreadable()
_NO_SCAN: Final = object()


def kind_of(record: Record) -> Kind:
    return "resource" if isinstance(record, Resource) else "thread"


async def page(storage: StorageHooks, kind: Kind, after: str | None, limit: int) -> RecordPage[Any]:
    """``storage``'s page of ``kind`` after ``after`` (its ``resources_after`` / ``threads_after``)."""
    if kind == "resource":
        return await operations.resources_after(storage, after, limit)
    return await operations.threads_after(storage, after, limit)


async def _insert(storage: StorageHooks, kind: Kind, records: Sequence[Record]) -> frozenset[str]:
    if kind == "resource":
        return await operations.insert_resources(storage, records)  # type: ignore[arg-type]
    return await operations.insert_threads(storage, records)  # type: ignore[arg-type]


async def _get(storage: StorageHooks, kind: Kind, record_id: str) -> Record | None:
    if kind == "resource":
        return await operations.get_resource(storage, record_id)
    return await operations.get_thread(storage, record_id, None)


def describe_differences(source: Record, target: Record) -> str:
    """What differs between the two records, field by field (short values shown, long ones only named)."""
    return describe_fields(field_values(source), field_values(target)) or "the records differ"


def describe_fields(left: dict[str, Any], right: dict[str, Any]) -> str:
    """The fields of ``left`` whose values differ in ``right`` (short values shown, long ones only named); ``""``."""
    parts = []
    for name in left:
        mine, theirs = (json.dumps(side.get(name), ensure_ascii=False, sort_keys=True) for side in (left, right))
        if mine == theirs:
            continue
        if len(mine) + len(theirs) <= 100:
            parts.append(f"{name} {mine} in the source, {theirs} in the destination")
        else:
            parts.append(f"{name} differs")
    return "; ".join(parts)


_OTHER_API: Final = {
    "sync": "expected a URL or an open workmem.MemoryStorage (an AsyncMemoryStorage is copied with workmem.copy_async)",
    "async": "expected a URL or an open workmem.AsyncMemoryStorage (a MemoryStorage is copied with workmem.copy)",
}


def _refuse(storage: object, api: str) -> TypeError:
    return TypeError(f"{_OTHER_API[api]}, got {type(storage).__name__}")


@contextmanager
def _noted(note: str | None) -> Iterator[None]:
    """A :class:`WorkmemError` raised inside gets ``note`` (when given), so a caller can tell where it arose."""
    try:
        yield
    except WorkmemError as exc:
        if note is not None:
            exc.add_note(note)
        raise


@contextmanager
def opened(storage: StorageLike, *, create: bool, note: str | None = None) -> Iterator[MemoryStorage]:
    """``storage`` itself when open (left open), else ``workmem.connect(storage, create=create)``, closed after.

    A source is opened with ``create=False``: a copy, export or verify changes nothing in it (a
    database only the TypeScript adapters wrote stays without workmem's tables and triggers).
    ``note``: added to an error of the opening (:data:`DESTINATION_NOTE` for a destination).
    """
    if isinstance(storage, MemoryStorage):
        yield storage
        return
    if not isinstance(storage, (str, os.PathLike)):
        raise _refuse(storage, "sync")
    from workmem.registry import connect

    with _noted(note):
        connection = connect(storage, create=create)
    with connection:
        yield connection


@asynccontextmanager
async def opened_async(
    storage: AsyncStorageLike, *, create: bool, note: str | None = None
) -> AsyncIterator[AsyncMemoryStorage]:
    """:func:`opened` for the async API: ``storage`` itself when open, else ``workmem.connect_async``."""
    if isinstance(storage, AsyncMemoryStorage):
        yield storage
        return
    if not isinstance(storage, (str, os.PathLike)):
        raise _refuse(storage, "async")
    from workmem.registry import connect_async

    with _noted(note):
        connection = await connect_async(storage, create=create)
    async with connection:
        yield connection


class Writer:
    """Writes batches of records of one kind into ``dst`` by the insert / skip / conflict / overwrite rules."""

    def __init__(self, dst: StorageHooks, report: TransferReport, *, overwrite: bool, page_size: int) -> None:
        self.dst = dst
        self.report = report
        self.overwrite = overwrite
        self.page_size = page_size

    async def write(
        self, kind: Kind, records: Sequence[Record], *, scan_after: object = _NO_SCAN, lines: Sequence[int] = ()
    ) -> None:
        """Insert ``records`` (distinct ids, all of ``kind``) and settle those whose ids ``dst`` already holds."""
        present = await _insert(self.dst, kind, records)
        await self.settle(kind, records, present, scan_after=scan_after, lines=lines)

    async def settle(
        self,
        kind: Kind,
        records: Sequence[Record],
        present: frozenset[str],
        *,
        scan_after: object = _NO_SCAN,
        lines: Sequence[int] = (),
    ) -> None:
        """Count ``records`` just inserted, the ids ``present`` aside, and settle those by the rules.

        ``scan_after``: an id (or ``None``, the start) below every id of ``records``: the records ``dst``
        already holds are then read by scanning its pages from there (few reads), else one by one.
        ``lines``: the import line of each record, for its issues.
        """
        self.report.count(kind, "inserted", len(records) - len(present))
        if not present:
            return
        existing = await self._existing(kind, present, scan_after)
        for index, record in enumerate(records):
            if record.id in present:
                await self._settle(kind, record, existing.get(record.id), lines[index] if lines else None)

    async def _existing(self, kind: Kind, ids: frozenset[str], scan_after: object) -> dict[str, Record | _Unreadable]:
        found: dict[str, Record | _Unreadable] = {}
        if scan_after is _NO_SCAN:
            for record_id in sorted(ids):
                record = await _get(self.dst, kind, record_id)
                if record is not None:
                    found[record_id] = record
            return found
        assert scan_after is None or isinstance(scan_after, str)
        after, last = scan_after, max(ids)
        while True:
            current = await page(self.dst, kind, after, self.page_size)
            found.update((r.id, r) for r in current.records if r.id in ids)
            found.update((i, UNREADABLE) for i in current.unreadable if i in ids)
            if current.next_after is None or current.next_after >= last:
                return found
            after = current.next_after

    def _issue(self, kind: Kind, record: Record, detail: str, line: int | None) -> None:
        self.report.count(kind, "conflict")
        self.report.add(Issue("conflict", kind, record.id, detail, line))

    async def _settle(self, kind: Kind, record: Record, stored: Record | _Unreadable | None, line: int | None) -> None:
        if stored is None:  # deleted between the insert and the read: insert it again
            if record.id not in await _insert(self.dst, kind, [record]):
                self.report.count(kind, "inserted")
                return
            stored = await _get(self.dst, kind, record.id)
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
            await operations.save_resource(self.dst, record)
        elif not await operations.restore_thread(self.dst, record):
            self._issue(kind, record, "the destination's thread changed owner or vanished while it was replaced", line)
            return
        self.report.count(kind, "replaced")


async def count_records(storage: StorageHooks, kind: Kind) -> int:
    """How many records of ``kind`` (readable or not) ``storage`` holds, by reading its pages."""
    total, after = 0, None
    while True:
        current = await page(storage, kind, after, 10_000)
        total += len(current.records) + len(current.unreadable)
        if current.next_after is None:
            return total
        after = current.next_after


async def count_all(storage: StorageHooks, progress: Progress | None) -> int | None:
    """Every record of ``storage``, counted for a progress bar (``None``, nothing read, when none is drawn)."""
    if progress is None or not progress.tty:
        return None
    return sum([await count_records(storage, kind) for kind in KINDS])


def _unreadable(report: TransferReport, kind: Kind, ids: Iterable[str], where: str) -> None:
    for record_id in ids:
        report.count(kind, "unreadable")
        report.add(Issue("unreadable", kind, record_id, f"{where} holds it in a form workmem cannot read"))


class _Written:
    """A source page on its way into the destination: the insert started, the id the page was read after."""

    __slots__ = ("after", "current", "insert")

    def __init__(self, current: RecordPage[Any], insert: Pending[frozenset[str]] | None, after: str | None) -> None:
        self.current = current
        self.insert = insert
        self.after = after


async def _copy_kind(
    source: StorageHooks, writer: Writer, kind: Kind, page_size: int, runner: Runner, progress: Progress | None
) -> None:
    """Every record of ``kind``: the next page read while earlier ones are written, settled in page order."""
    report = writer.report
    reading = runner.start(page, source, kind, None, page_size)
    writing: deque[_Written] = deque()
    after: str | None = None
    while True:
        current = await reading.result()
        last = current.next_after is None
        if not last:
            reading = runner.start(page, source, kind, current.next_after, page_size)
        _unreadable(report, kind, current.unreadable, "the source")
        insert = runner.start(_insert, writer.dst, kind, current.records) if current.records else None
        writing.append(_Written(current, insert, after))
        while writing and (last or len(writing) >= WRITES_IN_FLIGHT):
            done = writing.popleft()
            if done.insert is not None:
                present = await done.insert.result()
                await writer.settle(kind, done.current.records, present, scan_after=done.after)
            if progress is not None:
                progress.advance(len(done.current.records) + len(done.current.unreadable))
        if last:
            return
        after = current.next_after


@dataclass(frozen=True, slots=True)
class _CopySettings:
    """What a copy was asked to do, as both faces (:func:`copy`, :func:`copy_async`) hand it to :func:`_copy`."""

    overwrite: bool
    verify: bool
    page_size: int
    progress: Progress | None


async def _copy(
    source: StorageHooks, target: StorageHooks, runner: Runner, report: TransferReport, settings: _CopySettings
) -> None:
    from workmem.transfer.verify import compare

    overwrite, verify, page_size, progress = settings.overwrite, settings.verify, settings.page_size, settings.progress
    operations.check_page_size(page_size)
    total = await count_all(source, progress)
    if progress is not None:
        progress.start("copy", total)
    writer = Writer(target, report, overwrite=overwrite, page_size=page_size)
    for kind in KINDS:
        await _copy_kind(source, writer, kind, page_size, runner, progress)
    await copy_history(source, target, report, page_size)
    if progress is not None:
        progress.finish()
    if verify:
        await compare(source, target, report=report, page_size=page_size, progress=progress, source_unreadable=False)


@forgets_locals  # a URL given is in the frames below
def copy(
    src: StorageLike,
    dst: StorageLike,
    *,
    overwrite: bool = False,
    verify: bool = False,
    create: bool = True,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Copy every resource, then every thread, from ``src`` to ``dst``; return what happened.

    ``src`` and ``dst`` are URLs (the source opened with ``create=False``: a
    copy changes nothing in its source) or open sync storages (left open). Ids,
    owners, both timestamps, metadata and working memory are kept exactly.
    Reads and writes overlap on worker threads (:data:`WRITES_IN_FLIGHT`
    pages written at once, storages are thread-safe). Re-runnable: records already identical in
    ``dst`` are skipped; a conflict (a thread ``dst`` gives to another resource,
    a record that differs) is reported and left alone unless ``overwrite``
    (see :mod:`workmem.transfer.engine`). Records the source cannot read are
    reported as ``unreadable``. ``verify``: then compare both sides record by
    record, and the versions of their history (:func:`workmem.transfer.verify.compare`), differences reported.
    ``create``: whether ``dst``, given as a URL, is opened creating its missing
    tables (``False``: nothing is created, for a role that may write rows but
    not create tables; the tables must exist, else
    :class:`~workmem.errors.MissingTablesError`).
    ``page_size`` records (1 to 10,000) are read and written at a time.
    ``progress`` shows the run; ``on_issue`` is called with each problem as it
    is found. :attr:`TransferReport.ok` is false on any conflict, unreadable
    record or difference. When ``src`` keeps working memory's history, its
    versions follow the records (:mod:`workmem.transfer.versions`): inserted
    where ``dst`` keeps history too, counted ``dropped`` where it keeps none.
    """
    report = TransferReport(on_issue=on_issue)
    with (
        opened(src, create=False) as source,
        opened(dst, create=create, note=DESTINATION_NOTE) as target,
        ThreadRunner(1 + WRITES_IN_FLIGHT) as runner,
    ):
        run_sync(_copy(source, target, runner, report, _CopySettings(overwrite, verify, page_size, progress)))
    return report


@forgets_locals_async  # a URL given is in the frames below
async def copy_async(
    src: AsyncStorageLike,
    dst: AsyncStorageLike,
    *,
    overwrite: bool = False,
    verify: bool = False,
    create: bool = True,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """:func:`copy` for the async API: the same flow, awaited; the I/O overlapped by tasks, not threads.

    ``src`` and ``dst`` are URLs (opened with :func:`workmem.connect_async`, the source with
    ``create=False``) or open :class:`~workmem.aio.AsyncMemoryStorage` (left open).
    """
    report = TransferReport(on_issue=on_issue)
    async with (
        opened_async(src, create=False) as source,
        opened_async(dst, create=create, note=DESTINATION_NOTE) as target,
        TaskRunner() as runner,
    ):
        await _copy(source, target, runner, report, _CopySettings(overwrite, verify, page_size, progress))
    return report


@forgets_locals  # a URL given is in the frames below
def export_records(
    src: StorageLike,
    out: BinaryIO,
    *,
    resource_id: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Write every record of ``src`` to ``out`` in the export format (header, resources, threads; by id).

    Then, when ``src`` keeps working memory's history, the versions of each record's working memory
    (each resource's, then each thread's, by id; oldest first). ``resource_id``: one user only: that
    resource, the threads it owns and their history (what a user asking to see their data is given).
    """
    if resource_id is not None:
        validate_id(resource_id, "resource id")
    report = TransferReport(on_issue=on_issue)
    with opened(src, create=False) as source:
        run_sync(_export(source, out, report, page_size=page_size, progress=progress, resource_id=resource_id))
    return report


@forgets_locals_async  # a URL given is in the frames below
async def export_records_async(
    src: AsyncStorageLike,
    out: BinaryIO,
    *,
    resource_id: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """:func:`export_records` for the async API: ``src`` an open :class:`~workmem.aio.AsyncMemoryStorage` (left
    open) or a URL (opened with :func:`workmem.connect_async`, ``create=False``); the same lines, awaited.

    ``out`` is written as each page arrives, with blocking writes (a file or an in-memory buffer).
    """
    if resource_id is not None:
        validate_id(resource_id, "resource id")
    report = TransferReport(on_issue=on_issue)
    async with opened_async(src, create=False) as source:
        await _export(source, out, report, page_size=page_size, progress=progress, resource_id=resource_id)
    return report


async def _export(
    source: StorageHooks,
    out: BinaryIO,
    report: TransferReport,
    *,
    page_size: int,
    progress: Progress | None,
    resource_id: str | None = None,
) -> None:
    total = await count_all(source, progress) if resource_id is None else None
    if progress is not None:
        progress.start("export", total)
    out.write(HEADER_LINE.encode("utf-8"))
    if resource_id is None:
        for kind in KINDS:
            await _export_kind(source, out, report, kind, page_size, progress)
        keys: AsyncIterator[HistoryKey] = history_keys(source, page_size)
    else:
        resource, threads = await user_records(source, resource_id, report)
        records: list[Record] = [resource, *threads] if resource is not None else list(threads)
        out.write("".join(record_line(record) for record in records).encode("utf-8"))
        report.count("resource", "exported", len(records) - len(threads))
        report.count("thread", "exported", len(threads))
        if progress is not None:
            progress.advance(len(records))
        keys = _listed([HistoryKey(resource_id), *(HistoryKey(t.resource_id, t.id) for t in threads)])
    if source.capabilities.history:
        async for key in keys:
            versions = await versions_of(source, key)
            out.write("".join(version_line(version) for version in versions).encode("utf-8"))
            report.count("version", "exported", len(versions))
    if progress is not None:
        progress.finish()


async def _listed(keys: list[HistoryKey]) -> AsyncIterator[HistoryKey]:
    for key in keys:
        yield key


async def _export_kind(
    source: StorageHooks, out: BinaryIO, report: TransferReport, kind: Kind, page_size: int, progress: Progress | None
) -> None:
    after: str | None = None
    while True:
        current = await page(source, kind, after, page_size)
        _unreadable(report, kind, current.unreadable, "the source")
        out.write("".join(record_line(record) for record in current.records).encode("utf-8"))
        report.count(kind, "exported", len(current.records))
        if progress is not None:
            progress.advance(len(current.records) + len(current.unreadable))
        if current.next_after is None:
            return
        after = current.next_after


class _Batch:
    """Records of one kind with distinct ids, waiting to be written, and their line numbers."""

    def __init__(self) -> None:
        self.kind: Kind = "resource"
        self.records: list[Record] = []
        self.lines: list[int] = []
        self.ids: set[str] = set()


@forgets_locals  # a URL given is in the frames below
def import_records(
    dst: StorageLike,
    lines: BinaryIO | Iterable[bytes],
    *,
    overwrite: bool = False,
    create: bool = True,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
    total: int | None = None,
    on_issue: Callable[[Issue], None] | None = None,
) -> TransferReport:
    """Import an export into ``dst``: ``lines`` is a binary stream (a file opened ``"rb"``) or its lines as bytes.

    Each line is parsed and validated whole before anything of it is written;
    a bad one (whatever is wrong with it) is reported (``bad line``, with its
    number) and skipped, and the import goes on. A stream is read in bounded
    memory: a line longer than :data:`~workmem.transfer.format.MAX_LINE_BYTES`
    is a bad line, skipped without being held whole. The insert / skip /
    conflict rules and ``create`` are :func:`copy`'s. A first line that is no
    export header imports nothing. ``total``: the number of lines, for the
    progress bar. Lines that are not bytes (a file opened in text mode) raise
    :class:`~workmem.errors.ValidationError`.
    """
    report = TransferReport(on_issue=on_issue)
    numbered = read_lines(lines)
    first = next(numbered, None)
    try:
        if first is None:
            raise BadLine("the file is empty (an export starts with its header line)")
        if isinstance(first[1], BadLine):
            raise first[1]
        version = parse_header(first[1])
    except BadLine as exc:
        report.add(Issue("bad line", None, None, str(exc), 1))
        return report
    with opened(dst, create=create, note=DESTINATION_NOTE) as target:
        run_sync(
            _import(
                target,
                numbered,
                report,
                overwrite=overwrite,
                page_size=page_size,
                progress=progress,
                total=total,
                version=version,
            )
        )
    return report


async def _import(
    target: StorageHooks,
    numbered: Iterator[tuple[int, bytes | BadLine]],
    report: TransferReport,
    *,
    overwrite: bool,
    page_size: int,
    progress: Progress | None,
    total: int | None,
    version: int,
) -> None:
    """The lines after the header, parsed one by one and written in batches of one kind with distinct ids.

    History versions (format 2) are written as given, in batches of their own (:class:`VersionBatch`).
    """
    writer = Writer(target, report, overwrite=overwrite, page_size=page_size)
    versions = VersionBatch(target, report, page_size)
    highest: dict[Kind, str] = {}
    batch = _Batch()

    async def flush() -> None:
        if not batch.records:
            return
        low, high = min(batch.ids), max(batch.ids)
        previous = highest.get(batch.kind)
        scan: object = previous if previous is None or low > previous else _NO_SCAN
        await writer.write(batch.kind, batch.records, scan_after=scan, lines=batch.lines)
        highest[batch.kind] = high if previous is None else max(previous, high)
        if progress is not None:
            progress.advance(len(batch.records))
        batch.records, batch.lines, batch.ids = [], [], set()

    if progress is not None:
        progress.start("import", None if total is None else max(total - 1, 0))
    for number, raw in numbered:
        if not isinstance(raw, BadLine) and not raw.strip():
            continue
        try:
            if isinstance(raw, BadLine):
                raise raw
            record = parse_line(raw, version=version)
        except BadLine as exc:
            report.add(Issue("bad line", None, None, str(exc), number))
            if progress is not None:
                progress.advance(1)
            continue
        if isinstance(record, MemoryVersion):
            await versions.add([record])
            if progress is not None:
                progress.advance(1)
            continue
        kind = kind_of(record)
        if batch.records and (kind != batch.kind or record.id in batch.ids or len(batch.records) >= page_size):
            await flush()
        batch.kind = kind
        batch.records.append(record)
        batch.lines.append(number)
        batch.ids.add(record.id)
    await flush()
    await versions.flush()
    if progress is not None:
        progress.finish()
