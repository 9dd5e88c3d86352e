"""The ``workmem`` command.

``workmem compat REPORTS... [-o FILE]`` merges conformance JSON reports into a
Markdown compatibility table (see :mod:`workmem.compat`).

``workmem conformance [URL] [--profile quick|ci|thorough] [--json FILE] [--check NAME]`` runs
the conformance suite against ``URL`` and prints a table of the checks; the
exit status is 0 only if every required check passed (1 if a check failed,
2 if the suite could not run). Without ``URL`` it uses the embedded libSQL
default, a ``workmem.db`` in a fresh temporary folder (or ``memory://`` when
the libSQL adapter is not available).
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

import workmem
from workmem.conformance.target import masked
from workmem.errors import WorkmemError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workmem", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"workmem {workmem.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    conf = commands.add_parser("conformance", help="run the conformance suite against a backend")
    conf.add_argument("url", nargs="?", help="backend URL (default: a libSQL file in a fresh temporary folder)")
    conf.add_argument("--profile", choices=["quick", "ci", "thorough"], default="ci", help="default: ci")
    conf.add_argument("--check", action="append", metavar="NAME", help="run only this check (repeatable)")
    conf.add_argument("--json", dest="json_file", metavar="FILE", help="write the JSON report to FILE ('-': stdout)")
    from workmem import compat

    compat.configure_parser(
        commands.add_parser("compat", help="merge conformance JSON reports into a Markdown compatibility table")
    )
    return parser


@contextmanager
def _default_url(err: TextIO) -> Iterator[str]:
    """The embedded libSQL default in a fresh temporary folder, or ``memory://`` without the adapter."""
    try:
        importlib.import_module("workmem.adapters.libsql")
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


def _conformance(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from workmem.conformance import CheckResult, run
    from workmem.conformance.checks import Check

    def progress(check: Check, result: CheckResult | None) -> None:
        if result is None:
            print(f"  {check.name} ...", end="", file=err, flush=True)
        else:
            print(f" {result.status} ({result.duration_s:.2f}s)", file=err, flush=True)

    with _default_url(err) if args.url is None else _given(args.url, err) as url:
        print(f"workmem conformance, profile {args.profile}:", file=err)
        try:
            with _hypothesis_home():
                report = run(url, profile=args.profile, only=args.check, progress=progress)
        except (WorkmemError, ValueError, TypeError, OSError) as exc:
            message = masked(url, f"cannot run against {url}: {type(exc).__name__}: {exc}")
            print(f"\nworkmem conformance: {message}", file=err)
            return 2
    failures = report.format_failures()
    if failures:
        print("\nFailures:\n" + failures, file=out)
    print("\n" + report.format_table(), file=out)
    if args.json_file:
        text = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
        if args.json_file == "-":
            print(text, file=out)
        else:
            Path(args.json_file).write_text(text + "\n", encoding="utf-8")
            print(f"JSON report written to {args.json_file}", file=err)
    return 0 if report.passed else 1


@contextmanager
def _given(url: str, err: TextIO) -> Iterator[str]:
    print(f"backend: {masked(url)}", file=err)
    yield url


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point of the ``workmem`` console script; returns the exit status."""
    if not faulthandler.is_enabled():
        with suppress(Exception):  # stderr without a file descriptor (captured): go without
            faulthandler.enable()  # a crash in a native driver then shows where it happened
    args = _parser().parse_args(argv)
    out, err = out or sys.stdout, err or sys.stderr
    if args.command == "conformance":
        return _conformance(args, out, err)
    if args.command == "compat":
        from workmem import compat

        return compat.run_cli(args)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
