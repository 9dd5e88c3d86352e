"""The ``workmem`` command: exit status, progress, table and JSON report of ``workmem conformance``."""

from __future__ import annotations

import gc
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import workmem
from workmem.adapters.reference import ReferenceStorage
from workmem.cli import _default_url, main
from workmem.conformance import all_checks

REPORT_KEYS = {
    "workmem_version",
    "backend",
    "adapter",
    "url",
    "profile",
    "api",
    "started_at",
    "duration_s",
    "passed",
    "checks",
}
CHECK_KEYS = {"name", "title", "required", "status", "reason", "duration_s"}
OPTIONAL = {"cross_process_atomic", "persistence", "delete_resource_erases_one_user", "delete_resource_races_writes"}
OPTIONAL |= {f"history_{name}" for name in ("atomic_with_write", "complete_under_concurrency", "scope_isolation")}
OPTIONAL |= {f"history_{name}" for name in ("restore", "retention", "paging", "delete_thread", "whole_record_writes")}


class StripsNul(ReferenceStorage):
    """Accepts working memory with NUL (drops it) instead of raising ValidationError."""

    def set_working_memory(self, content: str, **kw: Any) -> None:
        super().set_working_memory(content.replace("\x00", ""), **kw)


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("workmem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "workmem.cli"]


def test_console_script_passes_on_memory_and_writes_the_json_report(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [*_console_script(), "conformance", "memory://", "--profile", "quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # progress on stderr, one line per check
    for check in all_checks():
        assert f"{check.name} ..." in proc.stderr
    assert "backend: memory://" in proc.stderr
    # the table on stdout
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split() == ["STATUS", "CHECK", "KIND", "TIME", "NOTE"]
    assert any(line.startswith("PASSED") and " stateful " in line for line in lines)
    assert any(line.startswith("SKIPPED") and "persistence" in line for line in lines)
    assert lines[-1].startswith("PASSED: ") and "profile quick" in lines[-1]
    # the JSON report, in the pinned format
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report) == REPORT_KEYS
    assert report["passed"] is True and report["profile"] == "quick" and report["backend"] == "memory"
    assert report["url"] == "memory://" and report["adapter"] == "workmem.adapters.reference:ReferenceStorage"
    assert report["workmem_version"] == workmem.__version__ and report["started_at"].endswith("Z")
    assert [c["name"] for c in report["checks"]] == [c.name for c in all_checks()]
    for entry in report["checks"]:
        assert set(entry) == CHECK_KEYS
        assert entry["status"] in {"passed", "skipped"} and isinstance(entry["duration_s"], float)
        assert (entry["reason"] is None) == (entry["status"] == "passed")
        assert entry["required"] == (entry["name"] not in OPTIONAL)


def test_exit_status_is_one_when_a_required_check_fails() -> None:
    scheme = f"mutant-nul-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{__name__}:StripsNul")
    out, err = io.StringIO(), io.StringIO()
    status = main(
        [
            "conformance",
            f"{scheme}://x-{uuid.uuid4().hex}",
            "--profile",
            "quick",
            "--check",
            "validation",
            "--json",
            "-",
        ],
        out=out,
        err=err,
    )
    assert status == 1
    text = err.getvalue()  # with the JSON report on stdout, the human output is on stderr
    assert "Failures:" in text and "--- validation ---" in text and "was accepted" in text
    assert "FAILED   validation" in text or "FAILED  validation" in text
    report = json.loads(out.getvalue())
    assert report["passed"] is False and [c["status"] for c in report["checks"]] == ["failed"]


def test_exit_status_is_two_when_the_suite_cannot_run() -> None:
    err = io.StringIO()
    assert main(["conformance", "nosuchscheme://x", "--profile", "quick"], out=io.StringIO(), err=err) == 2
    assert "cannot run against nosuchscheme://x" in err.getvalue()


def test_passwords_never_reach_the_output() -> None:
    err = io.StringIO()
    main(["conformance", "nosuchscheme://user:hunter2@host/db", "--profile", "quick"], out=io.StringIO(), err=err)
    assert "hunter2" not in err.getvalue() and "***" in err.getvalue()


def test_default_backend_is_a_fresh_libsql_file_or_memory() -> None:
    err = io.StringIO()
    with _default_url(err) as url:
        if url.startswith("file:"):
            path = Path(url.removeprefix("file:"))
            assert path.name == "workmem.db" and path.parent.is_dir() and not any(path.parent.iterdir())
        else:
            assert url == "memory://" and "libSQL adapter is not available" in err.getvalue()
    assert "backend: " in err.getvalue()
    if url.startswith("file:"):
        assert not Path(url.removeprefix("file:")).parent.exists(), "the temporary folder was not removed"


def test_unknown_profile_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["conformance", "memory://", "--profile", "heavy"], out=io.StringIO(), err=io.StringIO())
    assert exc.value.code == 2


def test_json_to_stdout_is_the_report_alone(tmp_path: Path) -> None:
    """``--json -``: stdout is exactly one JSON document; the table and progress go to stderr."""
    proc = subprocess.run(
        [*_console_script(), "conformance", "memory://", "--profile", "quick", "--check", "validation", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # nothing else on stdout
    assert report["passed"] is True and [c["name"] for c in report["checks"]] == ["validation"]
    assert "STATUS" in proc.stderr and "PASSED: " in proc.stderr  # the table, for the human


def test_unwritable_json_path_fails_before_the_run(tmp_path: Path) -> None:
    for bad in (tmp_path / "no-such-folder" / "r.json", tmp_path):
        proc = subprocess.run(
            [*_console_script(), "conformance", "memory://", "--profile", "quick", "--json", str(bad)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 2, proc.stderr
        assert str(bad) in proc.stderr and "cannot write the JSON report" in proc.stderr
        assert "backend:" not in proc.stderr, "the run started before the bad path was noticed"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("missing", ["hypothesis", "pytest"])
def test_without_the_conformance_extra_the_command_says_what_to_install(missing: str) -> None:
    """``pip install 'workmem[libsql]'`` alone, then ``workmem conformance``: one line naming the extra, exit 2."""
    code = (
        f"import sys; sys.modules[{missing!r}] = None; from workmem.cli import main; "
        "sys.exit(main(['conformance', 'memory://', '--profile', 'quick']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'workmem[conformance]'" in proc.stderr and missing in proc.stderr
    assert "Traceback" not in proc.stderr and "backend:" not in proc.stderr


def test_python_dash_m_workmem_is_the_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "workmem", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"workmem {workmem.__version__}"
    command = [sys.executable, "-m", "workmem", "conformance", "--help"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--profile" in proc.stdout


def test_a_private_in_memory_libsql_url_is_refused_not_reported_as_failing_checks() -> None:
    """Every ``:memory:`` connection is its own empty database: the suite's checks would all fail for that alone."""
    for url in (":memory:", "file::memory:", "file::memory:?cache=private"):
        out, err = io.StringIO(), io.StringIO()
        assert main(["conformance", url, "--profile", "quick"], out=out, err=err) == 2
        assert "every connection" in err.getvalue() and "backend:" not in out.getvalue() + err.getvalue()


def test_an_empty_json_path_is_refused_not_ignored() -> None:
    """``--json ''`` (an unset shell variable) must not run the suite and silently write no report."""
    out, err = io.StringIO(), io.StringIO()
    assert main(["conformance", "memory://", "--profile", "quick", "--json", ""], out=out, err=err) == 2
    assert "--json" in err.getvalue() and "backend:" not in out.getvalue() + err.getvalue()


def test_json_path_check_leaves_no_file_behind_when_the_suite_cannot_run(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["conformance", "nosuchscheme://x", "--json", str(out)], out=io.StringIO(), err=io.StringIO()) == 2
    assert not out.exists()


def test_unknown_check_lists_the_valid_names() -> None:
    proc = subprocess.run(
        [*_console_script(), "conformance", "memory://", "--profile", "quick", "--check", "nosuchcheck"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "nosuchcheck" in proc.stderr and "Traceback" not in proc.stderr
    for check in all_checks():
        assert check.name in proc.stderr


# A test that sends SIGINT sets what SIGINT does itself: run from a background job or nohup, this process
# (and every child it starts) inherits SIGINT ignored, and the CLI rightly leaves an ignored SIGINT ignored.
_WITH_DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]
"""Runs the command after it (an executable's path first) with SIGINT's default action, as a terminal gives it."""


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in this process during the test, whatever it inherited."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_prints_one_line_and_exits_130() -> None:
    proc = subprocess.Popen(
        [*_WITH_DEFAULT_SIGINT, *_console_script(), "conformance", "memory://", "--profile", "thorough"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = ""
    while " ..." not in seen:  # a check is running
        char = proc.stderr.read(1)
        assert char, f"the command ended before a check started: {seen}"
        seen += char
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130, seen + rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    assert rest.strip().splitlines()[-1] == "workmem: interrupted"


@pytest.mark.usefixtures("sigint_raises")
def test_ctrl_c_dropped_inside_a_gc_callback_still_stops_the_run_at_once(capfd: pytest.CaptureFixture[str]) -> None:
    """Hypothesis runs Python code in a garbage-collector callback, where Python drops a KeyboardInterrupt."""
    from workmem import conformance

    swallowed: list[bool] = []

    def interrupt_inside_gc(*args: Any, **kwargs: Any) -> Any:
        def callback(phase: str, info: dict[str, Any]) -> None:
            if phase == "start" and not swallowed:
                swallowed.append(True)
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(10_000):  # the handler runs here, and Python drops its exception
                    pass

        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)
        for _ in range(300):  # a long check: the interrupt must stop it, not wait for its end
            time.sleep(0.01)
        raise AssertionError("the run went on after Ctrl-C")

    err = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conformance, "run", interrupt_inside_gc)
        status = main(["conformance", "memory://", "--profile", "quick"], out=io.StringIO(), err=err)
    assert swallowed, "the gc callback never ran"
    assert status == 130, err.getvalue()
    assert err.getvalue().strip().splitlines()[-1] == "workmem: interrupted"
    printed = capfd.readouterr()
    assert "KeyboardInterrupt" not in printed.err and "Exception ignored" not in printed.err


@pytest.mark.parametrize("spelling", ["standard", "ci"])
def test_the_default_profile_is_standard_and_ci_is_its_former_name(
    spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workmem.conformance import PROFILES
    from workmem.conformance.profiles import get_profile

    assert get_profile(spelling) is PROFILES["standard"] and "ci" not in PROFILES
    out = tmp_path / "report.json"
    args = ["conformance", "memory://", "--check", "validation", "--json", str(out)]
    assert main([*args, "--profile", spelling], out=io.StringIO(), err=io.StringIO()) == 0
    assert json.loads(out.read_text())["profile"] == "standard"
    assert main(args, out=io.StringIO(), err=io.StringIO()) == 0
    assert json.loads(out.read_text())["profile"] == "standard"
