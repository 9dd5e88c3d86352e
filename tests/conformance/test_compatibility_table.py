"""The committed compatibility table is exactly what the committed conformance reports say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from workmem.conformance import all_checks

ROOT = Path(__file__).resolve().parents[2]


def test_committed_table_is_regenerated_from_the_committed_reports(tmp_path: Path) -> None:
    out = tmp_path / "COMPATIBILITY.md"
    command = [sys.executable, "-m", "workmem.conformance.table", str(ROOT / "ci" / "reports")]
    command += ["--expect", "mongodb", "--expect", "oracle", "-o", str(out)]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True)
    committed = (ROOT / "COMPATIBILITY.md").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, (
        "COMPATIBILITY.md is stale: workmem conformance table ci/reports --expect mongodb --expect oracle "
        "-o COMPATIBILITY.md"
    )


def test_backends_without_a_server_here_are_shown_as_missing_not_passing() -> None:
    table = (ROOT / "COMPATIBILITY.md").read_text(encoding="utf-8")
    header = next(line for line in table.splitlines() if line.startswith("| Check"))
    result = next(line for line in table.splitlines() if line.startswith("| **Suite result**"))
    cells = dict(zip(header.split("|")[2:-1], result.split("|")[2:-1], strict=True))
    assert cells[" mongodb "].strip() == "no report"
    assert cells[" oracle "].strip() == "no report"
    # Every check of the suite as it is now, none skipped.
    every = len(all_checks())
    for backend in ("libsql", "postgres", "upstash"):
        assert cells[f" {backend} "].strip().startswith(f"✅ passed ({every}/{every})")


def test_mastra_columns_show_history_and_erasure_as_skipped_not_failed() -> None:
    """Mastra's stores declare neither history nor erasure (issue 31): those ten rows say skipped in each Mastra
    column, with the reason, never a verdict; its suite result counts every check of the suite."""
    table = (ROOT / "COMPATIBILITY.md").read_text(encoding="utf-8").splitlines()
    header = next(line for line in table if line.startswith("| Check")).split("|")[2:-1]
    mastra = [i for i, label in enumerate(header) if label.strip().startswith("mastra+")]
    assert len(mastra) == 3, header
    gated = [c.name for c in all_checks() if c.capability in ("history", "erase")]
    assert len(gated) == 10
    for name in gated:
        row = next(line for line in table if line.startswith(f"| `{name}` —")).split("|")[2:-1]
        assert all(row[i].strip().startswith("⏭ skipped (the adapter does not declare") for i in mastra), (name, row)
    every = len(all_checks())
    result = next(line for line in table if line.startswith("| **Suite result**")).split("|")[2:-1]
    for i in mastra:
        assert re.fullmatch(rf"❌ failed \(\d+/{every}\)", result[i].strip()), (header[i], result[i])
