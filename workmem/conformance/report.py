"""The outcome of a conformance run: one :class:`CheckResult` per check, as a table or as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal, cast, get_args

from workmem.validation import json_type

__all__ = ["APIS", "STATUSES", "Api", "CheckResult", "Report", "ReportFormatError", "Status"]

Status = Literal["passed", "failed", "skipped", "xfailed", "unsupported", "harness_error"]
STATUSES: Final = frozenset(get_args(Status))
"""The check outcomes a report may contain."""
Api = Literal["sync", "async"]
"""Which face of the storage a run drives."""
APIS: Final[tuple[Api, ...]] = get_args(Api)
"""The APIs a run may drive (``Report.api``); a report without the field is from a sync run."""


class ReportFormatError(ValueError):
    """A JSON report (``Report.to_dict()`` output) that does not have the pinned shape; the message says where."""


def _require(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise ReportFormatError(f"{where}missing {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ReportFormatError(f"{where}{key!r} has the wrong type (a JSON {json_type(value)})")
    return value


def _number(data: Mapping[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportFormatError(f"{where}{key!r} must be a number")
    return float(value)


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
    """``passed``, ``failed``, ``skipped`` (optional check, capability not declared), ``xfailed``,
    ``unsupported`` (the store declared an operation the check needs unsupported) or ``harness_error`` (the
    store broke the wire protocol: no verdict on the contract, see :class:`~workmem.errors.HarnessError`)."""
    reason: str | None
    """Why it failed, was skipped or is expected to fail (secrets masked); ``None`` when it passed."""
    duration_s: float
    """Wall time of the check in seconds."""

    @classmethod
    def from_dict(cls, item: Any) -> CheckResult:
        """One entry of a JSON report's ``checks``; :class:`ReportFormatError` names the check and the field."""
        if not isinstance(item, Mapping):
            raise ReportFormatError("a check is not an object")
        name = _require(item, "name", str, "")
        where = f"check {name!r}: "
        status = _require(item, "status", str, where)
        if status not in STATUSES:
            raise ReportFormatError(f"{where}unknown status {status!r} (expected one of {', '.join(sorted(STATUSES))})")
        reason = item.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ReportFormatError(f"{where}'reason' must be a string or null")
        return cls(
            name=name,
            title=_require(item, "title", str, where),
            required=_require(item, "required", bool, where),
            status=cast(Status, status),
            reason=reason,
            duration_s=_number(item, "duration_s", where),
        )


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
    api: Api = "sync"
    """The API the checks drove: ``sync`` (:func:`workmem.connect`) or ``async`` (:func:`workmem.connect_async`)."""

    @property
    def passed(self) -> bool:
        """Every required check passed and no check failed or met a harness error."""
        return all(c.status == "passed" for c in self.checks if c.required) and not any(
            c.status in ("failed", "harness_error") for c in self.checks
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (the format the compatibility table is built from)."""
        return {
            "workmem_version": self.workmem_version,
            "backend": self.backend,
            "adapter": self.adapter,
            "url": self.url,
            "profile": self.profile,
            "api": self.api,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "passed": self.passed,
            "checks": [asdict(c) for c in self.checks],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        """The report a :meth:`to_dict` JSON object describes, validated; :class:`ReportFormatError` says what is
        wrong. Its ``passed`` must agree with its checks (it is derived from them, never taken on trust)."""
        if not isinstance(data, Mapping):
            raise ReportFormatError("not a JSON object")
        for key in ("workmem_version", "backend", "adapter", "url", "profile", "started_at", "duration_s", "passed"):
            if key not in data:
                raise ReportFormatError(f"missing {key!r}")
        url = data["url"]
        if url is not None and not isinstance(url, str):
            raise ReportFormatError(f"'url' has the wrong type (a JSON {json_type(url)})")
        api = data.get("api", "sync")  # reports from before the async API ran the sync one
        if api not in APIS:
            raise ReportFormatError(f"'api' must be one of {', '.join(APIS)}, not {api!r}")
        checks = [CheckResult.from_dict(item) for item in _require(data, "checks", list, "")]
        names = [c.name for c in checks]
        if len(set(names)) != len(names):
            raise ReportFormatError("a check name appears twice")
        report = cls(
            workmem_version=_require(data, "workmem_version", str, ""),
            backend=_require(data, "backend", str, ""),
            adapter=_require(data, "adapter", str, ""),
            url=url,
            profile=_require(data, "profile", str, ""),
            started_at=_require(data, "started_at", str, ""),
            duration_s=_number(data, "duration_s", ""),
            checks=checks,
            api=api,
        )
        passed = _require(data, "passed", bool, "")
        if passed != report.passed:
            says = str(report.passed).lower()
            raise ReportFormatError(f"'passed' is {str(passed).lower()} but its checks say {says}")
        return report

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(get_args(Status), 0)
        for c in self.checks:
            counts[c.status] += 1
        return counts

    def format_failures(self) -> str:
        """The full reason of every failed check, and of every harness error (falsifying examples included)."""
        shown = {"failed": "", "harness_error": " (harness error)"}
        parts = [f"--- {c.name}{shown[c.status]} ---\n{c.reason}" for c in self.checks if c.status in shown]
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
            f"{verdict}: {summary} in {self.duration_s:.1f}s"
            f" ({self.backend}, {self.adapter}, profile {self.profile}, {self.api} API)"
        )
        return "\n".join(line.rstrip() for line in lines)
