"""``python -m bench.regress [--against REV] [--rounds N] [--calls N] [--threshold R]``: is this tree slower than REV?

Absolute figures move with the machine, so a stored number cannot say whether a change made workmem slower. This
compares two revisions on the same machine in the same run: REV (default ``HEAD``, i.e. the working tree against
its last commit) is checked out into a temporary git worktree, and child processes alternate between the two trees
(:mod:`bench.regress_probe`: the same workload on a fresh embedded file, each child importing its own tree's
workmem), the order swapped every round. Each operation's figure is the median of its rounds; the ratio is this
tree's ops/s over REV's. A ratio below ``--threshold`` (default 0.85) is reported as a regression and the command
exits 1. An operation REV lacks is shown as ``n/a``.

Example: ``python -m bench.regress --against dab9751`` (the check that would have caught the file-read regression
of issue 28).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Comparison", "compare", "main"]

PROBE = Path(__file__).resolve().parent / "regress_probe.py"


@dataclass(frozen=True)
class Comparison:
    """One operation: median ops/s of this tree and of REV, and their ratio (``None`` where either side lacks it)."""

    operation: str
    current: float | None
    base: float | None
    ratio: float | None
    regressed: bool


def compare(
    current: list[dict[str, float | None]], base: list[dict[str, float | None]], threshold: float
) -> list[Comparison]:
    """Median each operation's rounds on both sides; an operation is regressed when its ratio is below threshold."""
    rows = []
    for operation in current[0]:
        mine = [r[operation] for r in current if r.get(operation) is not None]
        theirs = [r[operation] for r in base if r.get(operation) is not None]
        now = statistics.median(mine) if mine else None  # type: ignore[type-var]
        then = statistics.median(theirs) if theirs else None  # type: ignore[type-var]
        ratio = None if now is None or then is None else now / then
        rows.append(Comparison(operation, now, then, ratio, ratio is not None and ratio < threshold))
    return rows


def _probe(tree: Path, calls: int) -> dict[str, float | None]:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # -P: bench/ (its copy.py) must not shadow the standard library
    done = subprocess.run(
        [sys.executable, "-P", str(PROBE), str(calls)], env=env, cwd=tree, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed in {tree}:\n{done.stderr.strip()[-2000:]}")
    result: dict[str, float | None] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def run(against: str, rounds: int, calls: int) -> tuple[list[dict[str, float | None]], list[dict[str, float | None]]]:
    """Alternate probe processes between this tree and REV; each side's per-round results."""
    root = Path(_git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel"))
    current: list[dict[str, float | None]] = []
    base: list[dict[str, float | None]] = []
    with tempfile.TemporaryDirectory(prefix="workmem-regress-") as folder:
        tree = Path(folder) / "base"
        _git(root, "worktree", "add", "--detach", "--quiet", str(tree), against)
        try:
            for round_ in range(rounds):
                sides = [(root, current), (tree, base)]
                for path, results in sides if round_ % 2 == 0 else reversed(sides):
                    results.append(_probe(path, calls))
        finally:
            _git(root, "worktree", "remove", "--force", str(tree))
    return current, base


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.regress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="HEAD", help="the revision to compare with (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=5, help="probe processes per side (default: 5)")
    parser.add_argument("--calls", type=int, default=3000, help="calls per operation in each probe (default: 3000)")
    parser.add_argument("--threshold", type=float, default=0.85, help="a lower ratio is a regression (default 0.85)")
    parser.add_argument("--json", type=Path, help="also write the rounds and the comparison here")
    args = parser.parse_args(argv)
    current, base = run(args.against, args.rounds, args.calls)
    rows = compare(current, base, args.threshold)
    print(f"embedded file, ops/s, median of {args.rounds} rounds; this tree vs {args.against}")
    print(f"{'operation':<22} {'this tree':>12} {args.against[:12]:>12} {'ratio':>7}")
    for row in rows:
        ratio = "n/a" if row.ratio is None else f"{row.ratio:.2f}x"
        flag = "  REGRESSION" if row.regressed else ""
        print(f"{row.operation:<22} {_fmt(row.current):>12} {_fmt(row.base):>12} {ratio:>7}{flag}")
    if args.json:
        payload = {"against": args.against, "current": current, "base": base, "rows": [row.__dict__ for row in rows]}
        args.json.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 1 if any(row.regressed for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
