"""The example adapter of ``docs/adapters.md`` registers by entry point and passes the conformance suite.

Nothing is pip-installed: the test writes the ``*.dist-info`` that installing
``examples/adapter_dict`` would write (its entry point read from that package's
own ``pyproject.toml``) into a temporary directory on ``sys.path``, so
``workmem.connect("dictstore://...")`` finds the adapter the way it finds an
installed one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import workmem
from workmem.conformance import all_checks, run
from workmem.registry import ENTRY_POINT_GROUP

PACKAGE = Path(__file__).resolve().parents[2] / "examples" / "adapter_dict"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``examples/adapter_dict`` as if installed; yields its scheme."""
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    points = project["entry-points"][ENTRY_POINT_GROUP]
    assert points == {"dictstore": "workmem_dictstore:DictStorage"}
    info = tmp_path / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n", encoding="utf-8"
    )
    lines = [f"[{ENTRY_POINT_GROUP}]", *(f"{name} = {target}" for name, target in points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(PACKAGE))
    yield "dictstore"
    sys.modules.pop("workmem_dictstore", None)


def test_the_scheme_is_unknown_until_the_package_is_installed() -> None:
    assert "dictstore" not in workmem.known_schemes()
    with pytest.raises(workmem.UnknownSchemeError):
        workmem.connect("dictstore://nowhere")


def test_connect_finds_the_example_adapter_by_entry_point(installed: str) -> None:
    assert installed in workmem.known_schemes()
    name = f"example-{uuid.uuid4().hex}"
    with workmem.connect(f"dictstore://{name}") as one, workmem.connect(f"dictstore://{name}") as two:
        assert type(one).__module__ == "workmem_dictstore"
        one.set_working_memory("# Notes\n- likes tea", scope="resource", resource_id="user-1")
        assert two.get_working_memory(scope="resource", resource_id="user-1") == "# Notes\n- likes tea"
        merged = two.merge_working_memory({"city": "Lyon"}, scope="resource", resource_id="user-2")
        assert one.merge_working_memory({"tea": True}, scope="resource", resource_id="user-2") == {
            "city": "Lyon",
            "tea": True,
        }
        assert merged == {"city": "Lyon"}
    with pytest.raises(workmem.ValidationError, match="unknown dictstore options: pool_sise"):
        workmem.connect(f"dictstore://{name}", pool_sise=4)


def test_the_example_adapter_passes_the_conformance_suite(installed: str) -> None:
    report = run(f"{installed}://conformance-{uuid.uuid4().hex}", profile="standard")
    failed = [(r.name, r.status, r.reason) for r in report.checks if r.status not in ("passed", "skipped")]
    assert not failed, failed
    assert report.passed
    skipped = sorted(r.name for r in report.checks if r.status == "skipped")
    assert skipped == sorted(c.name for c in all_checks() if not c.required), skipped  # it declares no capability
    assert sum(r.status == "passed" for r in report.checks) >= 10


ADAPTERS_DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def _hook_table() -> list[str]:
    """The first cells of the hook table of ``docs/adapters.md`` (section 1)."""
    section = ADAPTERS_DOC.read_text(encoding="utf-8").split("## 1.", 1)[1].split("\n## ", 1)[0]
    table = section.split("| hook | notes |", 1)[1].split("\n\n", 1)[0]
    return [row.split(" | ", 1)[0] for row in table.strip().splitlines()[1:]]


def test_the_adapter_guide_lists_every_hook() -> None:
    from workmem.aio import AsyncMemoryStorage
    from workmem.hooks import StorageHooks
    from workmem.storage import MemoryStorage

    named = {name for cell in _hook_table() for name in re.findall(r"`(\w+)\(", cell)}
    required = set(StorageHooks.__abstractmethods__) | set(MemoryStorage.__abstractmethods__)
    assert named == required, f"missing: {sorted(required - named)}, not hooks: {sorted(named - required)}"
    assert f"({len(StorageHooks.__abstractmethods__)} hooks)" in ADAPTERS_DOC.read_text(encoding="utf-8")
    assert set(AsyncMemoryStorage.__abstractmethods__) - required == {"open"}
    assert "`async def open(cls, url, **options)`" in ADAPTERS_DOC.read_text(encoding="utf-8")


def test_the_guide_states_the_example_as_it_is(tmp_path: Path) -> None:
    """The size and the conformance result the guide states are those of the example, run as the guide runs it."""
    text = ADAPTERS_DOC.read_text(encoding="utf-8")
    module = PACKAGE / "workmem_dictstore" / "__init__.py"
    lines = len(module.read_text(encoding="utf-8").splitlines())
    assert f"one module of {lines} lines" in text, f"the example's module has {lines} lines"

    stated = re.search(r"^workmem conformance dictstore://scratch --profile quick +# (.+)$", text, re.MULTILINE)
    assert stated, "the guide's conformance command"
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = tmp_path / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n", encoding="utf-8"
    )
    points = project["entry-points"][ENTRY_POINT_GROUP]
    entry_points = "\n".join([f"[{ENTRY_POINT_GROUP}]", *(f"{name} = {target}" for name, target in points.items())])
    (info / "entry_points.txt").write_text(entry_points + "\n", encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PACKAGE)])}
    url = f"dictstore://scratch-{uuid.uuid4().hex}"
    done = subprocess.run(
        [sys.executable, "-m", "workmem", "conformance", url, "--profile", "quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = re.search(r"^PASSED: (\d+ passed, \d+ skipped) in ", done.stdout, re.MULTILINE)
    assert summary, done.stdout
    assert stated.group(1) == summary.group(1), f"the guide says {stated.group(1)!r}, the run said {summary.group(1)!r}"
