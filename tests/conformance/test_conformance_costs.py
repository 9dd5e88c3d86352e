"""What the checks cost: the cross-process check starts one worker process per racing party, not two."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workmem.conformance import processes, run


def test_cross_process_atomic_races_creates_and_merges_from_the_same_four_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []
    spawn = processes.spawn

    def counting(jobs: list[dict[str, Any]], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        started.append(len(jobs))
        return spawn(jobs, *args, **kwargs)

    monkeypatch.setattr(processes, "spawn", counting)
    report = run(f"file:{tmp_path}/x.db", profile="quick", only=["cross_process_atomic"])
    assert report.passed, report.format_failures()
    assert started == [processes.PROCESSES] == [4]  # each races the others' creates, then their merges
