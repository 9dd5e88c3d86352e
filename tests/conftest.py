"""Test-session wiring: the required-backend guard and a per-backend summary.

Tests that talk to a backend carry ``pytest.mark.backend(name)``. With
``WORKMEM_REQUIRE_BACKENDS`` set (CI sets it), a required backend without a
single passing test fails the run (``servers.RequiredBackendsGuard``). Either
way, the end of the run lists every backend with its passed/failed/skipped
counts, so a skipped backend is reported as skipped, loudly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest
import servers


class BackendSummary:
    """Counts each backend's test outcomes and prints them at the end of the run."""

    def __init__(self) -> None:
        self.backends_of: dict[str, set[str]] = {}
        self.outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.skip_reasons: defaultdict[str, set[str]] = defaultdict(set)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            names = {str(m.args[0]) for m in item.iter_markers("backend") if m.args}
            if names:
                self.backends_of[item.nodeid] = names

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        names = self.backends_of.get(report.nodeid, set())
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            for name in names:
                self.outcomes[name]["skipped"] += 1
                self.skip_reasons[name].add(reason.removeprefix("Skipped: "))
        elif report.when == "call" or report.failed:
            for name in names:
                self.outcomes[name][report.outcome] += 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.outcomes:
            return
        terminalreporter.write_sep("=", "backends")
        for name in sorted(self.outcomes):
            counts = self.outcomes[name]
            ran = counts["passed"] + counts["failed"]
            status = "SKIPPED" if not ran else ("FAILED" if counts["failed"] else "ran")
            line = (
                f"{name:10} {status:8} passed={counts['passed']} failed={counts['failed']} skipped={counts['skipped']}"
            )
            terminalreporter.write_line(line, red=status != "ran", bold=status == "SKIPPED")
            if not ran:
                for reason in sorted(self.skip_reasons[name])[:2]:
                    terminalreporter.write_line(f"           {reason}")


def pytest_configure(config: pytest.Config) -> None:
    servers.install_guard(config)
    config.pluginmanager.register(BackendSummary(), "workmem-backend-summary")
