"""What a copy, export, import or verify found: counts, and each problem as an :class:`Issue`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, overload

__all__ = ["MAX_KEPT_ISSUES", "Issue", "IssueKind", "Outcome", "TransferReport"]

IssueKind = Literal["conflict", "unreadable", "difference", "bad line"]
Outcome = Literal["inserted", "skipped", "replaced", "conflict", "unreadable", "exported", "verified", "dropped"]
"""What became of a record; ``dropped``: a history version the destination could not keep (it keeps no history)."""

OUTCOMES: Final[tuple[Outcome, ...]] = (
    "inserted",
    "skipped",
    "replaced",
    "conflict",
    "unreadable",
    "exported",
    "verified",
    "dropped",
)

MAX_KEPT_ISSUES: Final = 1000
"""At most this many issues are kept in :attr:`TransferReport.issues` (all are counted and passed to ``on_issue``)."""


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem: a conflict, an unreadable record, a difference found by verify, or a bad import line."""

    kind: IssueKind
    record: Literal["resource", "thread"] | None
    """Which kind of record (``None`` for a line that names none)."""
    id: str | None
    """The record's id, when known."""
    detail: str
    """What is wrong, in words."""
    line: int | None = None
    """The line number (from 1) of the import file, for ``bad line`` and the issues of an import."""

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        what = f"{self.record} {self.id!r}: " if self.record is not None and self.id is not None else ""
        return f"{where}{self.kind}: {what}{self.detail}"


class _IssueCount:
    """A read-only attribute of a report: how many issues of one kind it found (all of them, kept or not)."""

    __slots__ = ("kind",)

    def __init__(self, kind: IssueKind) -> None:
        self.kind = kind

    @overload
    def __get__(self, report: None, owner: type[Any] | None = None) -> _IssueCount: ...
    @overload
    def __get__(self, report: TransferReport, owner: type[Any] | None = None) -> int: ...
    def __get__(self, report: TransferReport | None, owner: type[Any] | None = None) -> _IssueCount | int:
        return self if report is None else report.issue_counts[self.kind]


@dataclass(slots=True)
class TransferReport:
    """The counts of one run, per record kind and outcome, and its issues (the first :data:`MAX_KEPT_ISSUES`)."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    """``(record kind, outcome) -> how many``; outcomes as in :data:`Outcome`; record kinds ``resource``, ``thread``
    and ``version`` (of working memory's history)."""
    issues: list[Issue] = field(default_factory=list)
    issue_counts: Counter[str] = field(default_factory=Counter)
    """``issue kind -> how many`` (all of them, kept or not)."""
    on_issue: Callable[[Issue], None] | None = None
    notes: list[str] = field(default_factory=list)
    """What the run left undone that is no problem, each said once (history kept on one side only: its versions not
    compared); in :meth:`summary`, never an issue."""

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def count(self, record: str, outcome: Outcome, n: int = 1) -> None:
        if n:
            self.counts[record, outcome] += n

    def add(self, issue: Issue) -> None:
        self.issue_counts[issue.kind] += 1
        if len(self.issues) < MAX_KEPT_ISSUES:
            self.issues.append(issue)
        if self.on_issue is not None:
            self.on_issue(issue)

    @property
    def ok(self) -> bool:
        """No conflict, unreadable record, difference or bad line."""
        return not self.issue_counts

    conflicts: ClassVar[_IssueCount] = _IssueCount("conflict")
    """How many ``conflict`` issues (an ``int``)."""
    differences: ClassVar[_IssueCount] = _IssueCount("difference")
    """How many ``difference`` issues."""
    unreadable: ClassVar[_IssueCount] = _IssueCount("unreadable")
    """How many ``unreadable`` issues."""
    bad_lines: ClassVar[_IssueCount] = _IssueCount("bad line")
    """How many ``bad line`` issues."""

    def summary(self) -> str:
        """Lines such as ``resources: 10 inserted, 2 skipped``, the issue totals, then the notes."""
        lines = []
        for record in ("resource", "thread", "version"):
            parts = [
                f"{self.counts[record, outcome]:,} {outcome}" for outcome in OUTCOMES if self.counts[record, outcome]
            ]
            if parts:
                lines.append(f"{record}s: {', '.join(parts)}")
        if self.issue_counts:
            problems = ", ".join(
                f"{n:,} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(self.issue_counts.items())
            )
            lines.append(f"problems: {problems}")
        else:
            lines.append("problems: none")
        lines += [f"note: {text}" for text in self.notes]
        return "\n".join(lines)
