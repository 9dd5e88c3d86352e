"""``workmem copy``, ``workmem verify``, ``workmem export`` and ``workmem import``.

Exit status: 0 when everything was copied (or skipped as identical) and, with
``--verify`` (or ``workmem verify``), both sides match; 1 on a conflict, an unreadable record, a
difference or a bad import line (each printed on stdout as it is found, the
summary after); 2 when the run could not start or stopped on an error (a URL
that cannot be opened, a backend that failed); 130 on Ctrl-C; 141 (128 +
SIGPIPE), with no message, when the reader of its output went away
(``workmem export URL | head -1``). Progress goes to stderr: a bar (records,
rate, ETA) on a terminal, a log line every few seconds otherwise.

``--no-create`` (``copy``, ``import``) opens the destination with
``create=False``: nothing is created there, so a role that may write rows but
not create tables can write into tables that exist. It is a flag, not a URL
parameter: a URL's query belongs to its backend's driver (libpq, pymongo, ...,
which refuse a ``create`` they do not know), and the same URL serves the role
that creates the tables and the one that only writes rows.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Final, TextIO, cast

from workmem.arguments import CREATE_FALSE_ADVICE, MISSING_TABLES_ADVICE
from workmem.errors import WorkmemError
from workmem.transfer.engine import DEFAULT_PAGE_SIZE, DESTINATION_NOTE, copy, export_records, import_records
from workmem.transfer.progress import Progress
from workmem.transfer.report import Issue, TransferReport
from workmem.transfer.verify import verify

__all__ = ["configure_parsers", "run", "whole_number"]

MAX_PAGE_SIZE = 10_000


def whole_number(text: str, low: int, high: int) -> int:
    """A command-line argument that must be a whole number from ``low`` to ``high``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,}, not {value}")
    return value


def _page_size(text: str) -> int:
    return whole_number(text, 1, MAX_PAGE_SIZE)


def _add_page_size(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--page-size",
        type=_page_size,
        default=DEFAULT_PAGE_SIZE,
        metavar="N",
        help=f"records read and written at a time, 1 to {MAX_PAGE_SIZE:,} (default: {DEFAULT_PAGE_SIZE})",
    )


def add_read_url(parser: argparse.ArgumentParser, dest: str = "url", metavar: str = "URL") -> None:
    """The URL of a backend a command only reads (opened with ``create=False``): ``history``, ``copy``, ``export``."""
    parser.add_argument(dest, metavar=metavar, help="the backend to read (never created or changed)")


def _add_no_create(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-create",
        dest="create",
        action="store_false",
        help="create nothing in the destination, whose tables must exist: for a role that may write rows but not "
        "create tables (Python: create=False)",
    )


def configure_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``copy``, ``verify``, ``export`` and ``import`` subcommands."""
    copy_parser = commands.add_parser(
        "copy",
        help="copy every resource and thread from one backend to another",
        description="Copy every resource, then every thread, from SRC_URL to DST_URL, keeping ids, owners and "
        "timestamps. Re-runnable: identical records are skipped; differing ones are conflicts (reported, "
        "left alone unless --overwrite).",
    )
    add_read_url(copy_parser, "src_url", "SRC_URL")
    copy_parser.add_argument("dst_url", metavar="DST_URL", help="the backend to write (tables created if missing)")
    copy_parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace records that differ in DST (a thread owned by another resource there stays a conflict)",
    )
    copy_parser.add_argument(
        "--verify",
        action="store_true",
        help="then compare both sides record by record, and their history version by version",
    )
    _add_no_create(copy_parser)
    _add_page_size(copy_parser)
    verify_parser = commands.add_parser(
        "verify",
        help="compare two backends record by record, and their history version by version",
        description="Compare SRC_URL and DST_URL as copy --verify does, without copying: every resource and "
        "thread, then every version of their working memories' history. Both are only read (never created or "
        "changed). Exit 0 when they match, 1 on a difference.",
    )
    add_read_url(verify_parser, "src_url", "SRC_URL")
    add_read_url(verify_parser, "dst_url", "DST_URL")
    _add_page_size(verify_parser)
    export_parser = commands.add_parser(
        "export", help="write every record (or one user's) and its history to a JSON Lines file (docs/export-format.md)"
    )
    add_read_url(export_parser)
    export_parser.add_argument("-o", "--output", metavar="FILE", help="the file to write (default: standard output)")
    export_parser.add_argument(
        "--resource",
        metavar="ID",
        help="one user only: that resource, the threads it owns and their history (default: every record)",
    )
    _add_page_size(export_parser)
    import_parser = commands.add_parser("import", help="load a JSON Lines export into a backend, as copy would")
    import_parser.add_argument("url", metavar="URL", help="the backend to write (tables created if missing)")
    import_parser.add_argument("file", metavar="FILE", help="the export to read ('-': standard input)")
    import_parser.add_argument("--overwrite", action="store_true", help="as for copy")
    _add_no_create(import_parser)
    _add_page_size(import_parser)


def _binary(stream: TextIO) -> BinaryIO | None:
    """The binary buffer under a text stream (``sys.stdout.buffer``), or ``None`` (an ``io.StringIO``)."""
    buffer = getattr(stream, "buffer", None)
    return cast(BinaryIO, buffer) if isinstance(buffer, io.IOBase) else None


class _TextSink(io.RawIOBase):
    """Bytes written to a text stream (one without a binary buffer, as in tests)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        assert isinstance(data, bytes | bytearray | memoryview)
        self.stream.write(bytes(data).decode("utf-8"))
        return len(data)


@contextmanager
def _output(name: str | None, out: TextIO) -> Iterator[BinaryIO]:
    """Standard output, or the file ``name``.

    A regular file (or a new one) is written whole: to a temporary file beside
    it, renamed over it when complete (through a symbolic link: beside its
    target, which is replaced, the link kept). Anything else that exists (a
    FIFO, a device such as ``/dev/stdout``) is written in place: a rename would
    put a regular file in its stead.
    """
    if name is None or name == "-":
        target = _binary(out)
        yield target if target is not None else _TextSink(out)  # type: ignore[misc]
        (target or out).flush()
        return
    try:
        mode: int | None = os.stat(name).st_mode
    except FileNotFoundError:  # a new file (or a link to one)
        mode = None
    except OSError as exc:
        raise _naming(exc, name) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    if mode is not None and not stat.S_ISREG(mode):
        with _named(name):
            file = open(name, "wb")  # noqa: SIM115 (closed by the with below)
        with file:
            yield file
        return
    path = Path(os.path.realpath(name))
    with _named(name):
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            yield file
        with _named(name):
            os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _naming(exc: OSError, name: str) -> OSError:
    """``exc`` told of ``name``, the path the user gave (not the temporary file beside it)."""
    return exc if exc.errno is None else type(exc)(exc.errno, exc.strerror, name)


@contextmanager
def _named(name: str) -> Iterator[None]:
    """An ``OSError`` raised inside names ``name`` (:func:`_naming`)."""
    try:
        yield
    except OSError as exc:
        raise _naming(exc, name) from None


def _count_lines(path: Path) -> int:
    count = 0
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            count += chunk.count(b"\n")
    return count


@contextmanager
def _input(name: str, *, count: bool) -> Iterator[tuple[BinaryIO, int | None]]:
    """Standard input (``-``) or the file ``name``, and its number of lines if ``count`` (a file only)."""
    if name == "-":
        stdin = _binary(sys.stdin)
        if stdin is None:
            raise OSError("standard input has no binary buffer to read an export from")
        yield stdin, None
        return
    path = Path(name)
    total = _count_lines(path) if count else None
    with path.open("rb") as lines:
        yield lines, total


def _printer(progress: Progress, out: TextIO) -> Callable[[Issue], None]:
    return lambda issue: progress.message(str(issue), out)


_COMMAND_LINE_ADVICE: Final = {
    CREATE_FALSE_ADVICE: "a role that may write rows but not create tables writes into tables that exist with "
    "--no-create",
    MISSING_TABLES_ADVICE: "--no-create creates nothing: run once without --no-create, as a role that may create "
    "tables, to create them",
}
"""The advice of an error opening the destination, as the command line takes it (a flag, not ``create=False``)."""


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if DESTINATION_NOTE in getattr(exc, "__notes__", ()):
        for advice, instead in _COMMAND_LINE_ADVICE.items():
            text = text.replace(advice, instead)
    return text


def _finish(command: str, report: TransferReport, progress: Progress, out: TextIO) -> int:
    progress.message(f"workmem {command}:\n{report.summary()}", out)
    return 0 if report.ok else 1


def run(args: argparse.Namespace, out: TextIO, err: TextIO, masked: Callable[[str, str], str]) -> int:
    """Run the parsed ``copy`` / ``verify`` / ``export`` / ``import`` command; the exit status."""
    progress = Progress(err)
    urls = [args.src_url, args.dst_url] if args.command in ("copy", "verify") else [args.url]

    def mask(text: str) -> str:
        for url in urls:
            text = masked(url, text)
        return text

    try:
        if args.command == "copy":
            report = copy(
                args.src_url,
                args.dst_url,
                overwrite=args.overwrite,
                verify=args.verify,
                create=args.create,
                page_size=args.page_size,
                progress=progress,
                on_issue=_printer(progress, out),
            )
            return _finish("copy", report, progress, out)
        if args.command == "verify":
            report = verify(
                args.src_url,
                args.dst_url,
                page_size=args.page_size,
                progress=progress,
                on_issue=_printer(progress, out),
            )
            return _finish("verify", report, progress, out)
        if args.command == "export":
            human = err if args.output in (None, "-") else out
            with _output(args.output, out) as target:
                report = export_records(
                    args.url,
                    target,
                    resource_id=args.resource,
                    page_size=args.page_size,
                    progress=progress,
                    on_issue=_printer(progress, human),
                )
            return _finish("export", report, progress, human)
        assert args.command == "import"
        with _input(args.file, count=progress.tty) as (lines, total):
            report = import_records(
                args.url,
                lines,
                overwrite=args.overwrite,
                create=args.create,
                page_size=args.page_size,
                progress=progress,
                total=total,
                on_issue=_printer(progress, out),
            )
        return _finish("import", report, progress, out)
    except BrokenPipeError:
        raise  # the reader of the output went away: the command ends quietly (workmem.cli)
    except (WorkmemError, OSError, ValueError, TypeError) as exc:
        progress.message(mask(f"workmem {args.command}: error: {_error_text(exc)}"), err)
        return 2
