"""The files of a maintained project say what is true: one version, the CI steps CONTRIBUTING.md lists, the hooks."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import yaml

import workmem

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_version_has_one_source() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "workmem/__init__.py"
    assert importlib.metadata.version("workmem") == workmem.__version__
    declared = re.findall(r'^__version__ = "([^"]+)"', (ROOT / "workmem" / "__init__.py").read_text(), re.MULTILINE)
    assert declared == [workmem.__version__]


def test_the_installed_metadata_carries_the_license_urls_and_classifiers() -> None:
    metadata = importlib.metadata.metadata("workmem")
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (metadata.get_all("License-File") or [])
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    classifiers = metadata.get_all("Classifier") or []
    python = {c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert python == {"3.11", "3.12", "3.13"}  # the versions ci/workflow.yml runs
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"


def test_psycopg_is_bounded_below_its_next_major() -> None:
    (postgres,) = PYPROJECT["project"]["optional-dependencies"]["postgres"]
    assert re.fullmatch(r"psycopg\[binary\]>=3\.\d+,<4", postgres), postgres


def test_the_changelog_keeps_an_unreleased_section_first() -> None:
    headings = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert headings[0] == "[Unreleased]"


def test_contributing_lists_the_steps_ci_runs_in_its_order() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    listed = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    positions = [CI_RUN.index(line) for line in listed]  # ValueError: a listed step .ci/run does not run
    assert positions == sorted(positions)
    first, last = CI_RUN.index("ruff check workmem tests bench examples"), CI_RUN.index("python -m pytest")
    steps = [line for line in CI_RUN[first : last + 1] if line and not line.startswith(("#", "log ", "export "))]
    assert steps == listed, "a step .ci/run runs that CONTRIBUTING.md does not list"


def test_the_pre_commit_hooks_run_what_ci_runs() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    entries = {hook["id"]: hook["entry"] for repo in config["repos"] for hook in repo["hooks"]}
    assert set(entries) == {"ruff", "ruff-format", "mypy", "workflow-lint", "docs"}
    ci = "\n".join(CI_RUN)
    for entry in entries.values():
        assert entry in ci, f"pre-commit runs {entry!r}, which .ci/run does not"
