"""The outcome of a conformance run: one :class:`CheckResult` per check, as a table or as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["CheckResult", "Report", "Status"]

Status = Literal["passed", "failed", "skipped", "xfailed"]


@dataclass(frozen=True, slots=True)
class CheckResult:
    """How one check went."""

    name: str
    """The check's stable name."""
    title: str
    """What the check establishes."""
    required: bool
    """Whether every adapter must pass it (optional checks are gated on a capability)."""
    status: Status
    """``passed``, ``failed``, ``skipped`` (optional check, capability not declared) or ``xfailed``."""
    reason: str | None
    """Why it failed, was skipped or is expected to fail (secrets masked); ``None`` when it passed."""
    duration_s: float
    """Wall time of the check in seconds."""


@dataclass(slots=True)
class Report:
    """A whole run against one backend."""

    workmem_version: str
    backend: str
    """The URL scheme, or the adapter's module name for a factory."""
    adapter: str
    """``module:Class`` of the adapter."""
    url: str | None
    """The URL with secrets masked; ``None`` for a factory."""
    profile: str
    started_at: str
    """ISO-8601 UTC."""
    duration_s: float
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every required check passed and no check failed."""
        return all(c.status == "passed" for c in self.checks if c.required) and not any(
            c.status == "failed" for c in self.checks
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (the format the compatibility table is built from)."""
        return {
            "workmem_version": self.workmem_version,
            "backend": self.backend,
            "adapter": self.adapter,
            "url": self.url,
            "profile": self.profile,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "passed": self.passed,
            "checks": [asdict(c) for c in self.checks],
        }

    def counts(self) -> dict[str, int]:
        counts = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}
        for c in self.checks:
            counts[c.status] += 1
        return counts

    def format_failures(self) -> str:
        """The full reason of every failed check (falsifying examples included)."""
        parts = [f"--- {c.name} ---\n{c.reason}" for c in self.checks if c.status == "failed"]
        return "\n\n".join(parts)

    def format_table(self) -> str:
        """A plain-text table of the checks and a one-line summary."""
        rows = [("STATUS", "CHECK", "KIND", "TIME", "NOTE")]
        for c in self.checks:
            note = (c.reason or c.title).strip().splitlines()[0] if (c.reason or c.title) else ""
            rows.append(
                (
                    c.status.upper(),
                    c.name,
                    "required" if c.required else "optional",
                    f"{c.duration_s:.2f}s",
                    note if len(note) <= 70 else note[:67] + "...",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)) + "  " + row[4] for row in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 4)
        summary = ", ".join(f"{n} {status}" for status, n in self.counts().items() if n)
        verdict = "PASSED" if self.passed else "FAILED"
        lines.append("")
        lines.append(
            f"{verdict}: {summary} in {self.duration_s:.1f}s ({self.backend}, {self.adapter}, profile {self.profile})"
        )
        return "\n".join(line.rstrip() for line in lines)
