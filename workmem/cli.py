"""The ``workmem`` command.

``workmem conformance table REPORTS... [-o FILE]`` merges conformance JSON reports into a
Markdown compatibility table (see :mod:`workmem.conformance.table`; ``workmem compat``, its former
name, still works).

``workmem conformance [URL] [--profile quick|standard|thorough] [--api sync|async] [--json FILE] [--check NAME]``
runs the conformance suite against ``URL`` (through the sync API, or with ``--api async`` the same
checks through ``workmem.connect_async``) and prints a table of the checks (on stderr when
``--json -`` puts the JSON report alone on stdout); the exit status is 0 only if every required
check passed (1 if a check failed, met a harness error or needed an operation the store does not support,
2 if the suite could not run or an argument is wrong, 130 on Ctrl-C). ``URL`` may be ``wire:COMMAND``, a
store in another program (see ``docs/wire-protocol.md``). Without ``URL`` it uses the embedded libSQL
default, a ``workmem.db`` in a fresh temporary folder (or ``memory://`` when the libSQL adapter is not available).

``workmem copy SRC_URL DST_URL [--overwrite] [--verify] [--no-create] [--page-size N]``, ``workmem export URL
[-o FILE] [--resource ID]`` and ``workmem import URL FILE [--no-create]`` move records between backends, and
``workmem verify SRC_URL DST_URL`` compares two (see :mod:`workmem.transfer.cli`).

``workmem history URL --resource ID [--thread ID] [--limit N] [--before V] [--json]`` prints the versions of one
working memory, newest first (the resource's, or with ``--thread`` that thread's): exit status 0, or 2 when the
store cannot be opened, keeps no history or refuses the arguments (a thread another resource owns).

When the reader of its output goes away (``workmem export URL | head -1``), a
command stops quietly with status 141 (128 + SIGPIPE), as a program that the
closed pipe stops does.
"""

from __future__ import annotations

import _thread
import argparse
import faulthandler
import importlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import workmem
from workmem.conformance.profiles import DEFAULT_PROFILE
from workmem.conformance.target import masked
from workmem.errors import WorkmemError
from workmem.records import Scope

__all__ = ["main"]


TABLE_COMMAND = "conformance-table"
"""The parser's name for ``workmem conformance table`` (``workmem compat``, its former name, is an alias)."""


def _spelled(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``conformance table`` as the one word the parser knows it by."""
    words = list(argv)
    return [TABLE_COMMAND, *words[2:]] if words[:2] == ["conformance", "table"] else words


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workmem", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"workmem {workmem.__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{conformance,conformance table,copy,verify,export,import,history}"
    )
    conf = commands.add_parser("conformance", help="run the conformance suite against a backend")
    conf.add_argument("url", nargs="?", help="backend URL (default: a libSQL file in a fresh temporary folder)")
    conf.add_argument(
        "--profile",
        choices=["quick", "standard", "thorough", "ci"],
        default=DEFAULT_PROFILE,
        help=f"default: {DEFAULT_PROFILE} (ci: its former name)",
    )
    conf.add_argument(
        "--api",
        choices=["sync", "async"],
        default="sync",
        help="the API the checks drive: sync (workmem.connect) or async (workmem.connect_async); default: sync",
    )
    conf.add_argument("--check", action="append", metavar="NAME", help="run only this check (repeatable)")
    conf.add_argument("--json", dest="json_file", metavar="FILE", help="write the JSON report to FILE ('-': stdout)")
    from workmem.conformance import table as compat_table

    compat_table.configure_parser(
        commands.add_parser(
            TABLE_COMMAND,
            aliases=["compat"],
            prog="workmem conformance table",
            help="workmem conformance table: merge conformance JSON reports into a Markdown compatibility table",
        )
    )
    from workmem.transfer import cli as transfer_cli

    transfer_cli.configure_parsers(commands)
    history = commands.add_parser(
        "history",
        help="print the versions of one working memory, newest first",
        description="Print the versions of a resource's working memory (or, with --thread, of that thread's), "
        "newest first: number, time, kind of change, source and text. Reads only; the store must keep history "
        "(written through connect(url, history=...)).",
    )
    transfer_cli.add_read_url(history)
    history.add_argument("--resource", required=True, metavar="ID", help="the resource (a thread's owner)")
    history.add_argument("--thread", metavar="ID", help="the thread, for its working memory (thread scope)")
    history.add_argument("--limit", type=_limit, default=20, metavar="N", help="versions to print, 1 to 10,000 (20)")
    history.add_argument("--before", type=_version, metavar="V", help="only versions numbered below V (older pages)")
    history.add_argument("--json", action="store_true", help="one JSON object: the versions and next_before")
    return parser


def _limit(text: str) -> int:
    from workmem.operations import MAX_PAGE_SIZE
    from workmem.transfer.cli import whole_number

    return whole_number(text, 1, MAX_PAGE_SIZE)


def _version(text: str) -> int:
    from workmem.transfer.cli import whole_number

    return whole_number(text, 1, 2**63 - 1)


def _history(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``workmem history``: one working memory's versions, newest first, as text or JSON."""
    from workmem.transfer.format import version_values

    scope: Scope = "resource" if args.thread is None else "thread"
    try:
        with workmem.connect(args.url, create=False) as storage:
            page = storage.working_memory_history(
                scope=scope, resource_id=args.resource, thread_id=args.thread, limit=args.limit, before=args.before
            )
    except (WorkmemError, OSError, ValueError, TypeError) as exc:
        print(masked(args.url, f"workmem history: error: {type(exc).__name__}: {exc}"), file=err)
        return 2
    if args.json:
        versions = [version_values(v) for v in page.versions]
        document = {"resource_id": args.resource, "thread_id": args.thread, "scope": scope}
        document |= {"versions": versions, "next_before": page.next_before}
        print(json.dumps(document, ensure_ascii=False, separators=(",", ":")), file=out)
        return 0
    what = f"resource {args.resource!r}" if args.thread is None else f"thread {args.thread!r} of {args.resource!r}"
    print(f"working memory of {what}: {len(page.versions)} version(s), newest first", file=out)
    for version in page.versions:
        fields = version_values(version)
        source = "" if version.source is None else "  source " + json.dumps(fields["source"], ensure_ascii=False)
        print(f"v{version.version}  {fields['changed_at']}  {version.kind}{source}", file=out)
        text = "(none)" if version.content is None else version.content
        print("".join(f"    {line}\n" for line in text.splitlines() or [""]), end="", file=out)
    if page.next_before is not None:
        print(f"older versions: --before {page.next_before}", file=out)
    return 0


@contextmanager
def _default_url(err: TextIO) -> Iterator[str]:
    """The embedded libSQL default in a fresh temporary folder, or ``memory://`` without the adapter."""
    try:
        importlib.import_module("workmem.adapters.libsql.storage")
    except ImportError as exc:
        print(f"backend: memory:// (the libSQL adapter is not available: {exc})", file=err)
        yield "memory://"
        return
    folder = Path(tempfile.mkdtemp(prefix="workmem-conformance-"))
    url = f"file:{folder / 'workmem.db'}"
    print(f"backend: {url} (embedded libSQL, removed afterwards)", file=err)
    try:
        yield url
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _hypothesis_home() -> Iterator[None]:
    """Keep Hypothesis's cache out of the user's working folder unless they chose a place for it."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    from hypothesis.configuration import set_hypothesis_home_dir

    with tempfile.TemporaryDirectory(prefix="workmem-hypothesis-") as folder:
        set_hypothesis_home_dir(folder)
        try:
            yield
        finally:
            set_hypothesis_home_dir(None)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent that is no package, a module without a spec
        return False


def _argument_error(args: argparse.Namespace) -> str | None:
    """Why the run cannot work (no conformance extra, an unknown check, an unwritable path), found before it starts."""
    missing = [name for name in ("hypothesis", "pytest") if not _importable(name)]
    if missing:
        return f"the conformance suite needs {' and '.join(missing)}: pip install 'workmem[conformance]'"
    if args.url is not None and (args.url == ":memory:" or args.url.lower().startswith("file::memory:")):
        return (
            f"{args.url} is a new, empty database for every connection, and the suite opens several to one "
            "database: use a file (no URL: a fresh one in a temporary folder) or memory://"
        )
    if args.check:
        from workmem.conformance import all_checks

        names = [check.name for check in all_checks()]
        unknown = [name for name in args.check if name not in names]
        if unknown:
            return f"unknown check(s) {', '.join(map(repr, unknown))}; valid checks: {', '.join(names)}"
    if args.json_file is not None and not args.json_file.strip():
        return "--json needs a file name ('-': standard output), not an empty one"
    if args.json_file and args.json_file != "-":
        path = Path(args.json_file)
        existed = path.exists()
        try:
            with path.open("a", encoding="utf-8"):  # appends nothing: only proves the report can be written
                pass
        except OSError as exc:
            return f"cannot write the JSON report to {args.json_file}: {exc.strerror or exc}"
        if not existed:
            path.unlink()
    return None


def _conformance(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from workmem.conformance import CheckResult, run
    from workmem.conformance.registry import Check

    human = err if args.json_file == "-" else out  # with the JSON report on stdout, the table goes to stderr

    def progress(check: Check, result: CheckResult | None) -> None:
        interrupt.raise_if_pending()
        if result is None:
            print(f"  {check.name} ...", end="", file=err, flush=True)
        else:
            print(f" {result.status} ({result.duration_s:.2f}s)", file=err, flush=True)

    interrupt = _Interrupt()
    with interrupt, _default_url(err) if args.url is None else _given(args.url, err) as url:
        print(f"workmem conformance, profile {args.profile}, {args.api} API:", file=err)
        try:
            with _hypothesis_home():
                report = run(url, profile=args.profile, only=args.check, progress=progress, api=args.api)
            interrupt.raise_if_pending()
        except (WorkmemError, ValueError, TypeError, OSError) as exc:
            message = masked(url, f"cannot run against {url}: {type(exc).__name__}: {exc}")
            print(f"\nworkmem conformance: {message}", file=err)
            return 2
    failures = report.format_failures()
    if failures:
        print("\nFailures:\n" + failures, file=human)
    print("\n" + report.format_table(), file=human)
    if args.json_file:
        text = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
        if args.json_file == "-":
            print(text, file=out)
        else:
            Path(args.json_file).write_text(text + "\n", encoding="utf-8")
            print(f"JSON report written to {args.json_file}", file=err)
    return 0 if report.passed else 1


class _Interrupt:
    """Ctrl-C that is never lost, even when Python drops the ``KeyboardInterrupt`` it raised.

    Python raises ``KeyboardInterrupt`` wherever the main thread is when the
    signal is handled. Inside a garbage-collector callback (Hypothesis installs
    one) or a ``__del__`` the exception is dropped, printed as "Exception
    ignored", and the run goes on. While this is entered, such a dropped
    interrupt is not printed but delivered again a moment later
    (``_thread.interrupt_main``), until it lands where it can stop the run;
    :meth:`raise_if_pending` also raises it between checks.
    """

    def __init__(self) -> None:
        self._pending = False
        self._previous_handler: Any = None
        self._previous_hook: Callable[[Any], object] | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._pending = True
        raise KeyboardInterrupt

    def _unraisable(self, unraisable: Any) -> None:
        if self._pending and issubclass(unraisable.exc_type, KeyboardInterrupt):
            timer = threading.Timer(0.01, _thread.interrupt_main)
            timer.daemon = True
            timer.start()
        elif self._previous_hook is not None:
            self._previous_hook(unraisable)

    def raise_if_pending(self) -> None:
        if self._pending:
            raise KeyboardInterrupt

    def __enter__(self) -> _Interrupt:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        ):
            self._previous_handler = signal.signal(signal.SIGINT, self._handle)
            self._previous_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            sys.unraisablehook = self._previous_hook or sys.__unraisablehook__


@contextmanager
def _given(url: str, err: TextIO) -> Iterator[str]:
    print(f"backend: {masked(url)}", file=err)
    yield url


CLOSED_PIPE = 141
"""The exit status when the reader of the output went away: 128 + SIGPIPE (13), what a shell reports for a
program the closed pipe stopped (``yes | head -1``)."""


def _discard_output(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at the null device, so that flushing it at exit raises nothing more."""
    with suppress(OSError, ValueError, AttributeError):  # no file descriptor (a StringIO): nothing to flush there
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point of the ``workmem`` console script; returns the exit status."""
    if not faulthandler.is_enabled():
        with suppress(Exception):  # stderr without a file descriptor (captured): go without
            faulthandler.enable()  # a crash in a native driver then shows where it happened
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = _parser().parse_args(_spelled(sys.argv[1:] if argv is None else argv))
        if args.command == "conformance":
            error = _argument_error(args)
            if error is not None:
                print(f"workmem conformance: error: {error}", file=err)
                return 2
            return _conformance(args, out, err)
        if args.command in (TABLE_COMMAND, "compat"):
            from workmem.conformance import table as compat_table

            return compat_table.run_cli(args)
        if args.command == "history":
            return _history(args, out, err)
        if args.command in ("copy", "verify", "export", "import"):
            from workmem.transfer import cli as transfer_cli

            return transfer_cli.run(args, out, err, masked)
    except KeyboardInterrupt:
        print("\nworkmem: interrupted", file=err, flush=True)
        return 130  # 128 + SIGINT, what a shell reports for Ctrl-C
    except BrokenPipeError:  # the reader of the output went away (| head): stop quietly
        _discard_output(out)
        return CLOSED_PIPE
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
