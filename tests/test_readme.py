"""The README's runnable code blocks run one after another, and again, in one folder (one ``agent.db``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _runnable_blocks() -> list[str]:
    """The blocks that are whole programs: they import what they use and open ``file:agent.db``."""
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    return [b for b in blocks if b.startswith(("import ", "from ")) and '"file:agent.db"' in b]


def test_the_readme_has_the_runnable_blocks_this_test_expects() -> None:
    blocks = _runnable_blocks()
    assert len(blocks) == 5
    assert "storage.save_thread" in blocks[0] and "workmem.connect_async" in blocks[1]
    assert "memory.create_thread" in blocks[2] and "AsyncMemory.open" in blocks[3]
    assert "storage.query" in blocks[4]


def test_readme_blocks_run_in_sequence_and_twice(tmp_path: Path) -> None:
    for run in range(2):
        for index, block in enumerate(_runnable_blocks()):
            done = subprocess.run(
                [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
            )
            assert done.returncode == 0, f"run {run + 1}, block {index + 1} failed:\n{done.stderr}"
    assert (tmp_path / "agent.db").exists()


def test_the_mastra_versions_the_readme_names_are_those_of_the_lock() -> None:
    import json

    lock = json.loads((README.parent / "interop" / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    pinned = json.loads((README.parent / "interop" / "package.json").read_text(encoding="utf-8"))["dependencies"]
    section = README.read_text(encoding="utf-8").split("### Mastra interop (the published packages)", 1)[1]
    named = dict(re.findall(r"^\| `([^`]+)`[^|]* \| ([\d.]+) \|$", section.split("\n### ", 1)[0], re.MULTILINE))
    assert named == {name: lock[f"node_modules/{name}"]["version"] for name in pinned}
    assert all(pinned[name] == version for name, version in named.items()), "package.json pins exact versions"
