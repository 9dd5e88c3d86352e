"""``bench --peers``: the runner, its report and targets, with workmem as the one real system.

Mastra and LangGraph have their own tests (``test_bench_peers_mastra.py``,
``test_bench_peers_langgraph.py``); here a peer that cannot run must be reported
as skipped, a peer failing one operation must not stop the others, and the
figures must come from what was measured.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.peers.base import OPERATIONS, Measurement, Peer, Unavailable
from bench.peers.report import evaluate_peer_targets, format_peers, peers_markdown
from bench.peers.runner import Lineup, run_peers
from bench.peers.workmem import WorkmemPeer


class _Broken(Peer):
    """A peer whose merges fail: its other operations still run and are reported."""

    system = "langgraph"
    backend = "file"

    def __init__(self) -> None:
        self.notes = ["a test double"]
        self.calls: dict[str, int] = {}

    def prepare(self) -> None:
        pass

    def measure(self, operation: str, start: int, count: int) -> Measurement:
        if operation == "merge_field":
            raise RuntimeError("no merge here")
        self.calls[operation] = self.calls.get(operation, 0) + count
        return Measurement([0.001] * count, 0.001 * count * 2)  # 500 ops/s by the wall clock

    def merges_kept(self) -> int:
        return 17

    def close(self) -> None:
        pass


def _unavailable() -> Peer:
    raise Unavailable("no Node here")


def test_runner_reports_measured_figures_skips_and_errors() -> None:
    broken = _Broken()

    def lineup(backend: str, url: str | None) -> Lineup:
        assert backend == "file"
        return [
            ("workmem", lambda: WorkmemPeer("file", sizes=(12, 2, 40))),
            ("mastra", _unavailable),
            ("langgraph", lambda: broken),
        ]

    results = run_peers(["file"], lineups=lineup, sizes=(30, 5))
    file = results["backends"]["file"]
    assert file["skipped"] == {"mastra": "no Node here"}
    assert file["errors"]["langgraph/merge_field"] == "RuntimeError: no merge here"
    ours = file["systems"]["workmem"]
    assert set(ours["operations"]) == set(OPERATIONS)
    for stats in ours["operations"].values():
        assert stats["calls"] == 3 * 30  # three rounds, warm-up not counted
        assert stats["min_ops_per_s"] <= stats["ops_per_s"] <= stats["max_ops_per_s"]
        assert 0 < stats["p50_us"] <= stats["p99_us"]
    assert ours["merges_kept"] == 320
    peer = file["systems"]["langgraph"]
    assert "merge_field" not in peer["operations"]
    assert peer["operations"]["get_thread"]["ops_per_s"] == pytest.approx(500)
    assert peer["merges_kept"] == 17
    # warm-up 5 + three rounds of 30 for each operation that works
    assert broken.calls["get_thread"] == 5 + 3 * 30
    json.dumps(results)  # what bench writes

    targets = {t["name"]: t for t in file["targets"]}
    kept = targets["embedded file: keys kept of 320 concurrent merges, workmem"]
    assert kept["verdict"] == "PASS"
    text = format_peers(results)
    assert "mastra SKIPPED: no Node here" in text
    assert "ERROR langgraph/merge_field" in text
    assert "| get thread by id |" in peers_markdown(results)


def test_rounds_are_chosen_and_the_median_one_reported() -> None:
    peer = _Broken()
    results = run_peers(["file"], lineups=lambda backend, url: [("langgraph", lambda: peer)], sizes=(10, 2), rounds=5)
    assert results["rounds"] == 5
    stats = results["backends"]["file"]["systems"]["langgraph"]["operations"]["get_thread"]
    assert stats["calls"] == 5 * 10 and len(stats["ops_per_s_rounds"]) == 5
    assert stats["ops_per_s"] == pytest.approx(sorted(stats["ops_per_s_rounds"])[2], abs=0.1)  # the median of five
    assert peer.calls["get_thread"] == 2 + 5 * 10
    with pytest.raises(ValueError, match="at least 1"):
        run_peers(["file"], lineups=lambda backend, url: [], rounds=0)


def test_targets_compare_equal_durability_on_the_file() -> None:
    def rates(value: float) -> dict[str, Any]:
        return {"operations": {op: {"ops_per_s": value} for op in OPERATIONS}, "merges_kept": 320}

    result = {
        "systems": {
            "workmem": rates(100.0),
            "workmem (normal)": rates(300.0),
            "mastra": rates(200.0),
            "mastra (normal)": rates(250.0),
            "langgraph (normal)": rates(400.0),
        }
    }
    targets = evaluate_peer_targets("file", result)
    verdicts = {t["name"]: (t["value"], t["verdict"]) for t in targets}
    # at equal durability: NORMAL against the peers set to NORMAL
    assert verdicts["embedded file: create thread, workmem (normal) / mastra (normal)"] == (1.2, "PASS")
    assert verdicts["embedded file: create thread, workmem (normal) / langgraph (normal)"] == (0.75, "MISS")
    # workmem's default against Mastra as it ships (NORMAL or FULL by what overlapped) is reported, not a target
    assert not any(name.endswith("workmem / mastra") for name in verdicts)
    # no LangGraph at its default in this result: no target for it
    assert not any(name.endswith("workmem / langgraph") for name in verdicts)
