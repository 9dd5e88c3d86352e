"""``python -m bench.regress``: this tree against a revision, alternating probe processes on one machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.regress import PROBE, compare, main

ROOT = Path(__file__).resolve().parents[2]


def test_the_ratio_is_this_tree_over_the_revision_and_a_drop_below_the_threshold_is_a_regression() -> None:
    current = [
        {"get": 80.0, "put": 10.0, "new": 5.0},
        {"get": 90.0, "put": 12.0, "new": 7.0},
        {"get": 70.0, "put": 11.0, "new": 6.0},
    ]
    base = [
        {"get": 100.0, "put": 10.0, "new": None},
        {"get": 100.0, "put": 10.0, "new": None},
        {"get": 120.0, "put": 10.0, "new": None},
    ]
    rows = {row.operation: row for row in compare(current, base, threshold=0.85)}
    assert rows["get"].current == 80.0 and rows["get"].base == 100.0
    assert rows["get"].ratio == pytest.approx(0.8) and rows["get"].regressed
    assert rows["put"].ratio == pytest.approx(1.1) and not rows["put"].regressed
    assert rows["new"].base is None and rows["new"].ratio is None and not rows["new"].regressed  # n/a, not a pass


def test_a_run_against_head_measures_every_operation_on_both_sides_and_leaves_no_worktree(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: bench.regress compares git revisions")
    out = tmp_path / "regress.json"
    code = main(["--against", "HEAD", "--rounds", "1", "--calls", "20", "--json", str(out)])
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert {row["operation"] for row in payload["rows"]} == {
        "get_thread", "list_threads", "create_thread", "set_working_memory", "merge_working_memory",
    }  # fmt: skip
    for side in ("current", "base"):
        (only,) = payload[side]
        assert all(isinstance(rate, float) and rate > 0 for rate in only.values()), only
    assert code == (1 if any(row["regressed"] for row in payload["rows"]) else 0)
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "workmem-regress-" not in worktrees.stdout


def test_the_probe_reports_an_operation_the_revision_lacks_as_missing_not_as_a_failure(tmp_path: Path) -> None:
    old = tmp_path / "old" / "workmem"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("from workmem.store import connect\n", encoding="utf-8")
    (old / "records.py").write_text(
        "from dataclasses import dataclass, field\n"
        "@dataclass\nclass Thread:\n    id: str\n    resource_id: str\n    title: str = ''\n"
        "    metadata: dict | None = None\n",
        encoding="utf-8",
    )
    (old / "store.py").write_text(
        "class Store:\n"
        "    def __init__(self): self.threads = {}\n"
        "    def save_thread(self, t): self.threads[t.id] = t; return t\n"
        "    def get_thread(self, i): return self.threads.get(i)\n"
        "    def close(self): pass\n"
        "def connect(url): return Store()\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-P", str(PROBE), "10"],
        env={**os.environ, "PYTHONPATH": str(old.parent)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rates = json.loads(done.stdout)
    assert rates["get_thread"] > 0  # create falls back to save_thread, as on revisions before create_thread
    assert rates["list_threads"] is None and rates["merge_working_memory"] is None
