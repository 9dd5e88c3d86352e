"""Merging conformance reports into a compatibility table: one row per check, one column per backend, in Markdown.

Each input is a JSON report written by ``workmem conformance URL --json FILE``
(``Report.to_dict()``) and is read back with ``Report.from_dict()``. CI names them
``report-<backend>-<version>-py<python>.json`` (``...-py<python>-async.json`` for a run
through the async API); the version and Python are read from that name when it has this
shape, the backend and the API always from the report itself (a report from before the
``api`` field ran the sync API)::

    workmem conformance table reports/*.json -o COMPATIBILITY.md
    workmem conformance table reports/ --expect libsql --expect postgres

A directory argument stands for the ``*.json`` files in and below it
(``gh run download`` puts each artifact in its own folder). Columns are one per
backend, split by version, API and Python only where a backend has several; columns
of one backend version whose results are identical on every Python are merged
into one. Rows are the checks, in the order the suite ran them. Cells are ✅
passed, ❌ failed (reason), ⏭ skipped (reason), ⚠ xfail (reason), 🚫 not supported (an operation
the store declared unsupported), 💥 harness error (the store broke the wire protocol), "— not run"
(the check is absent from that report) and "no report" for an expected backend
with no report at all: nothing is ever shown as passing without a report that
says so. The footer lists every source file with its start time.

Exit status: 0, or 2 when a report cannot be read or does not have the pinned
shape; with ``--strict`` also 1 when a report failed or an expected backend has
no report.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from workmem.conformance.report import STATUSES, Report, ReportFormatError
from workmem.registry import builtin_schemes
from workmem.urls import mask_url

__all__ = [
    "DEFAULT_BACKENDS",
    "REPORT_NAME",
    "STATUSES",
    "Cell",
    "Column",
    "ReportError",
    "ReportFile",
    "Table",
    "build_table",
    "canonical_backend",
    "configure_parser",
    "expand_paths",
    "load_report",
    "main",
    "render_markdown",
    "run_cli",
]

DEFAULT_BACKENDS: Final = ("libsql", "postgres", "upstash", "mongodb", "oracle")
"""The backends CI tests; each gets a column, saying "no report" if none came in."""

REPORT_NAME = re.compile(
    r"^report-(?P<backend>[A-Za-z0-9_+]+)-(?P<version>.+)-py(?P<python>\d+(?:\.\d+)*)(?:-(?P<api>sync|async))?$"
)
"""CI's report file stem, ``report-<backend>-<version>-py<python>``, with ``-async`` for the async API's run."""
_REASON_CHARS: Final = 120


class ReportError(ValueError):
    """A report file that cannot be read or does not have the pinned shape (the message names the file)."""


@dataclass(frozen=True, slots=True)
class ReportFile:
    """One conformance report and where it came from."""

    source: str
    """The file name (no directory), as listed in the footer."""
    backend: str
    """Canonical backend name (``postgres``, ``libsql``, ...)."""
    version: str | None
    """Server version from the CI file name (``17``, ``8.0``), if the name carries one."""
    python: str | None
    """Python version from the CI file name (``3.12``), if the name carries one."""
    report: Report
    """The report itself, its URL's secrets masked."""


@dataclass(frozen=True, slots=True)
class Cell:
    """What one column says about one check."""

    status: str
    """A check status, ``not run`` or ``no report``."""
    reason: str | None = None

    def render(self) -> str:
        reason = _clean(self.reason)
        if self.status == "passed":
            return "✅"
        if self.status == "failed":
            return f"❌ {reason}" if reason else "❌"
        if self.status == "skipped":
            return f"⏭ skipped ({reason})" if reason else "⏭ skipped"
        if self.status == "xfailed":
            return f"⚠ xfail ({reason})" if reason else "⚠ xfail"
        if self.status == "unsupported":
            return f"🚫 not supported ({reason})" if reason else "🚫 not supported"
        if self.status == "harness_error":
            return f"💥 harness error ({reason})" if reason else "💥 harness error"
        if self.status == "not run":
            return "— not run"
        return "no report"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the table: one backend (version), from one or several identical reports, or none."""

    label: str
    backend: str
    reports: tuple[ReportFile, ...]
    """Empty for an expected backend with no report."""
    cells: Mapping[str, Cell] = field(default_factory=dict)

    @property
    def missing(self) -> bool:
        return not self.reports

    def cell(self, check: str) -> Cell:
        if self.missing:
            return Cell("no report")
        return self.cells.get(check, Cell("not run"))

    def summary(self) -> str:
        if self.missing:
            return "no report"
        checks = self.reports[0].report.checks
        passed = sum(1 for c in checks if c.status == "passed")
        verdict = "✅ passed" if self.reports[0].report.passed else "❌ failed"
        return f"{verdict} ({passed}/{len(checks)})"


@dataclass(frozen=True, slots=True)
class Table:
    """The merged table, ready to render."""

    columns: tuple[Column, ...]
    checks: tuple[tuple[str, str, bool], ...]
    """Rows: ``(name, title, required)`` in the order the suite ran them."""
    reports: tuple[ReportFile, ...]

    @property
    def ok(self) -> bool:
        """Every column has a report and every report passed."""
        return all(not c.missing and all(r.report.passed for r in c.reports) for c in self.columns)


def canonical_backend(name: str) -> str:
    """``postgresql``/``postgresql+psycopg`` → ``postgres``, ``file`` → ``libsql``: the adapter module's name when
    that is a scheme too, else the scheme (``memory`` for the reference adapter)."""
    key = name.strip().lower()
    schemes = builtin_schemes()
    spec = schemes.get(key)
    if spec is not None:
        module = spec.target.partition(":")[0].rsplit(".", 1)[-1]
        return module if module in schemes else key
    return key


def _clean(text: str | None) -> str:
    """``text`` on one line, cut to a table-friendly length, with Markdown table syntax escaped."""
    if not text:
        return ""
    one_line = " ".join(text.split())
    if len(one_line) > _REASON_CHARS:
        one_line = one_line[: _REASON_CHARS - 1].rstrip() + "…"
    return one_line.replace("|", "\\|")


def _masked(url: str) -> str:
    """``url`` as the report gives it, unless it still carries a secret (then masked)."""
    masked = mask_url(url)
    return masked if masked.count("***") > url.count("***") else url


def load_report(path: str | Path) -> ReportFile:
    """Read and validate one JSON report; :class:`ReportError` names the file and what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: cannot read a JSON report ({exc})") from exc
    try:
        report = Report.from_dict(data)
    except ReportFormatError as exc:
        raise ReportError(f"{path}: {exc}") from exc
    if report.url:
        report = replace(report, url=_masked(report.url))
    match = REPORT_NAME.match(path.stem)
    return ReportFile(
        source=path.name,
        backend=canonical_backend(report.backend),
        version=match["version"] if match else None,
        python=match["python"] if match else None,
        report=report,
    )


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Each path as given, a directory replaced by the ``*.json`` files in and below it (sorted)."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(path.rglob("*.json")))
        else:
            out.append(path)
    return out


def _natural(text: str | None) -> tuple[tuple[int, int | str], ...]:
    parts = re.split(r"(\d+)", text or "")
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p)


def _backend_order(backend: str, expected: Sequence[str]) -> tuple[int, str]:
    return (expected.index(backend), "") if backend in expected else (len(expected), backend)


def _cells(report: ReportFile) -> dict[str, Cell]:
    return {c.name: Cell(c.status, c.reason) for c in report.report.checks}


def _label(
    backend: str,
    version: str | None,
    pythons: Sequence[str],
    *,
    show_version: bool,
    show_python: bool,
    api: str | None = None,
) -> str:
    label = backend
    if show_version and version:
        label += f" {version}"
    if api:
        label += f" {api} API"
    if show_python and pythons:
        label += " (py" + ", ".join(pythons) + ")"
    return label


def _columns_for(backend: str, reports: list[ReportFile], *, merge: bool) -> list[Column]:
    versions = {r.version for r in reports}
    pythons = {r.python for r in reports if r.python}
    show_version = len(versions) > 1
    show_python = len(pythons) > 1
    show_api = len({r.report.api for r in reports}) > 1  # a backend run through both APIs: a column for each
    columns: list[Column] = []
    by_version: dict[tuple[str | None, str], list[ReportFile]] = {}
    order = sorted(reports, key=lambda r: (_natural(r.version), r.report.api != "sync", _natural(r.python), r.source))
    for r in order:
        by_version.setdefault((r.version, r.report.api), []).append(r)
    for (version, api), group in by_version.items():
        shown_api = api if show_api else None
        first = _cells(group[0])
        identical = all(_cells(r) == first and r.report.passed == group[0].report.passed for r in group[1:])
        if merge and identical:
            group_pythons = [r.python for r in group if r.python]
            label = _label(
                backend, version, group_pythons, show_version=show_version, show_python=show_python, api=shown_api
            )
            columns.append(Column(label, backend, tuple(group), first))
            continue
        for r in group:
            py = [r.python] if r.python else []
            label = _label(backend, version, py, show_version=show_version, show_python=show_python, api=shown_api)
            if not r.python and len(group) > 1:
                label += f" [{r.source}]"
            columns.append(Column(label, backend, (r,), _cells(r)))
    return columns


def build_table(
    reports: Iterable[ReportFile], *, expected: Sequence[str] = DEFAULT_BACKENDS, merge: bool = True
) -> Table:
    """Columns per backend (and version/Python where several), rows per check, absent backends as "no report"."""
    reports = tuple(reports)
    expected = [canonical_backend(b) for b in expected]
    by_backend: dict[str, list[ReportFile]] = {}
    for r in reports:
        by_backend.setdefault(r.backend, []).append(r)
    columns: list[Column] = []
    for backend in sorted(set(by_backend) | set(expected), key=lambda b: _backend_order(b, expected)):
        if backend in by_backend:
            columns.extend(_columns_for(backend, by_backend[backend], merge=merge))
        else:
            columns.append(Column(backend, backend, ()))
    rows: dict[str, tuple[str, str, bool]] = {}
    for r in sorted(reports, key=lambda r: r.source):
        for c in r.report.checks:
            rows.setdefault(c.name, (c.name, c.title, c.required))
    return Table(tuple(columns), tuple(rows.values()), reports)


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(table: Table, *, title: str = "Compatibility") -> str:
    """The table as GitHub-flavoured Markdown, with a legend and a footer listing the sources."""
    profiles = sorted({r.report.profile for r in table.reports})
    lines = [f"## {title}", ""]
    intro = "Conformance suite results per backend"
    if profiles:
        intro += f" (profile {', '.join(profiles)})"
    lines += [
        intro + ": ✅ passed · ❌ failed · ⏭ skipped · ⚠ expected failure (xfail) · 🚫 not supported (the store "
        "declares it has no way to do an operation the check needs) · 💥 harness error (the store broke the wire "
        "protocol: no verdict) · — not run · no report: no report was merged for that backend.",
        "",
        _row(["Check", *(c.label for c in table.columns)]),
        _row(["---", *(":-:" for _ in table.columns)]),
        _row(["**Suite result**", *(c.summary() for c in table.columns)]),
    ]
    for name, check_title, required in table.checks:
        head = f"`{name}` — {_clean(check_title)}" + ("" if required else " *(optional)*")
        lines.append(_row([head, *(c.cell(name).render() for c in table.columns)]))
    lines += ["", "Sources:", ""]
    if not table.reports:
        lines.append("- none: no reports were given.")
    for r in sorted(table.reports, key=lambda r: r.source):
        lines.append(
            f"- `{r.source}`: {r.backend} ({r.report.adapter}), workmem {r.report.workmem_version}, "
            f"profile {r.report.profile}{', async API' if r.report.api == 'async' else ''}, "
            f"started {r.report.started_at}, {r.report.duration_s:.1f} s"
            + (f", `{r.report.url}`" if r.report.url else "")
        )
    return "\n".join(lines) + "\n"


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The table options on ``parser`` (``workmem conformance table``, ``python -m workmem.conformance.table``)."""
    parser.add_argument("reports", nargs="*", help="JSON report files, or directories holding them")
    parser.add_argument("-o", "--output", help="write the Markdown here (default: standard output)")
    parser.add_argument(
        "--expect",
        action="append",
        metavar="BACKEND",
        help=f"a backend that must have a column (repeatable; default: {', '.join(DEFAULT_BACKENDS)})",
    )
    parser.add_argument("--title", default="Compatibility", help="the heading (default: %(default)s)")
    parser.add_argument(
        "--per-report", action="store_true", help="one column per report (do not merge identical Python columns)"
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a report failed or an expected backend has none"
    )
    return parser


def run_cli(args: argparse.Namespace) -> int:
    """Run with parsed arguments; returns the exit status."""
    try:
        reports = [load_report(p) for p in expand_paths(args.reports)]
    except ReportError as exc:
        print(f"workmem conformance table: {exc}", file=sys.stderr)
        return 2
    expected = tuple(args.expect) if args.expect else DEFAULT_BACKENDS
    table = build_table(reports, expected=expected, merge=not args.per_report)
    text = render_markdown(table, title=args.title)
    if args.output and args.output != "-":
        Path(args.output).write_text(text, encoding="utf-8")
        print(
            f"workmem conformance table: wrote {args.output} ({len(reports)} reports, {len(table.columns)} columns)",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return 1 if args.strict and not table.ok else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workmem.conformance.table``."""
    parser = argparse.ArgumentParser(
        prog="python -m workmem.conformance.table", description="Merge conformance JSON reports into a Markdown table."
    )
    return run_cli(configure_parser(parser).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
