"""Stores in other programs over the wire protocol (``docs/wire-protocol.md``): ``wire:COMMAND``.

* the example store in JavaScript (``examples/wire-store/store.mjs``, Node 22 of ``interop/``, ``node:sqlite``)
  passes the suite from the CLI, the pytest plugin and ``run()``;
* a store that breaks the protocol (crash, malformed line, a response to no request, timeout, unknown error
  class) makes the check that met it a ``harness_error``, never passed or failed, whichever API, and also when
  it happens in a worker process of a cross-process check; an operation declared unsupported makes it
  ``unsupported``. The misbehaving stores are ``tests/support/fixtures/wire_scripted_store.py``: workmem's reference
  store behind the protocol, misbehaving on one operation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from mastra_node import NODE
from servers import skip_or_fail

import workmem
from workmem.conformance import all_checks, run
from workmem.conformance.report import Report

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "examples" / "wire-store" / "store.mjs"
SCRIPTED = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "wire_scripted_store.py"
SINGLE = ["merge_patch_algebra"]  # a check on one connection (the scripted store's records are its process's own)


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("workmem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "workmem.cli"]


def scripted(mode: str, op: str = "merge_working_memory") -> str:
    return f"wire:{sys.executable} {SCRIPTED} {mode} {op}"


@pytest.fixture
def example_url(tmp_path: Path) -> str:
    if not NODE.exists():
        skip_or_fail("mastra", f"no Node binary at {NODE}: run `npm ci --ignore-scripts` in interop/")
    return f"wire:{NODE} --no-warnings {STORE} {tmp_path / f'store-{uuid.uuid4().hex}.db'}"


# -- the example store passes, three ways -------------------------------------------------------------


@pytest.mark.backend("mastra")
def test_example_store_passes_the_suite_from_the_cli(example_url: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [*_console_script(), "conformance", example_url, "--profile", "quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = Report.from_dict(json.loads(out.read_text()))
    assert report.passed and report.backend == "wire"
    assert "examples/wire-store (node:sqlite)" in report.adapter
    statuses = {c.name: c.status for c in report.checks}
    undeclared = {c.name for c in all_checks() if c.capability in ("history", "erase")}  # the wire has neither
    assert {statuses[name] for name in undeclared} == {"skipped"}, statuses
    assert {s for name, s in statuses.items() if name not in undeclared} == {"passed"}, statuses  # the rest declared
    assert statuses["cross_process_atomic"] == statuses["persistence"] == "passed"


@pytest.mark.backend("mastra")
def test_example_store_passes_through_run_on_the_async_api(example_url: str) -> None:
    report = run(example_url, profile="quick", api="async", only=["stateful", "no_lost_updates_thread", "linearizable"])
    assert report.passed, report.format_failures()
    assert [c.status for c in report.checks] == ["passed"] * 3


@pytest.mark.backend("mastra")
@pytest.mark.parametrize("blank", ["\x85", "\x1c\x1f", " \u3000\n"])
def test_example_store_reads_as_blank_what_the_contract_calls_blank(example_url: str, blank: str) -> None:
    """Blank is Python's ``str.isspace()``: JavaScript's ``trim()`` keeps U+0085 and U+001C-U+001F (the state
    machine found U+0085 stored and a merge refused as "not JSON")."""
    with workmem.connect(example_url) as storage:
        storage.set_working_memory(blank, scope="resource", resource_id="r")
        assert storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r") == {"a": 1}
        storage.set_working_memory("\ufeff", scope="resource", resource_id="r")  # not blank to Python
        with pytest.raises(workmem.WorkingMemoryFormatError):
            storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")


@pytest.mark.backend("mastra")
def test_example_store_passes_through_the_pytest_plugin(example_url: str, pytester: pytest.Pytester) -> None:
    chosen = "stateful or cross_process or owner_race"
    result = pytester.runpytest("--workmem-url", example_url, "--workmem-profile", "quick", "-v", "-k", chosen)
    result.assert_outcomes(passed=3)


def test_the_example_store_sees_what_another_connection_wrote(example_url: str) -> None:
    with workmem.connect(example_url) as one, workmem.connect(example_url) as two:
        assert one.capabilities == workmem.Capabilities(cross_process_atomic=True, persistent=True)
        one.merge_working_memory({"city": "Lyon"}, scope="resource", resource_id="user-1")
        assert two.merge_working_memory({"tea": True}, scope="resource", resource_id="user-1") == {
            "city": "Lyon",
            "tea": True,
        }
        one.save_thread(workmem.Thread("t-1", "user-1"))
        with pytest.raises(workmem.ThreadOwnershipError) as raised:
            two.save_thread(workmem.Thread("t-1", "user-2"))
        assert (raised.value.thread_id, raised.value.resource_id) == ("t-1", "user-2")


def test_the_handshake_may_declare_listings_no_snapshot() -> None:
    """Absent, ``snapshot_listing`` is the strict ``true`` (a store that says nothing is checked on its pages)."""
    from workmem.adapters.wire.hooks import _capabilities
    from workmem.errors import HarnessError

    assert _capabilities({"persistent": True}) == workmem.Capabilities(cross_process_atomic=False, persistent=True)
    assert not _capabilities({"snapshot_listing": False}).snapshot_listing
    with pytest.raises(HarnessError, match=r"capabilities\.snapshot_listing is not a boolean"):
        _capabilities({"snapshot_listing": "no"})


# -- harness errors: never passed, never failed -------------------------------------------------------

KINDS = {
    "crash": "harness error (crash): the store process exited with status 3: scripted store: crashing on purpose",
    "malformed": "harness error (malformed): the store wrote a line that is not JSON: this is not JSON",
    "wrong_id": "harness error (malformed): the store wrote a line that is no response (it answers no request",
    "timeout": "harness error (timeout): the store did not answer merge_working_memory",
    "unknown_class": "harness error (unknown_error_class): the store raised an error class workmem does not have: "
    "'FrobnicationError'",
}


def test_the_scripted_store_passes_the_check_when_it_keeps_to_the_protocol() -> None:
    report = run(scripted("ok"), profile="quick", only=SINGLE)
    assert [c.status for c in report.checks] == ["passed"], report.format_failures()


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("mode", sorted(KINDS))
def test_a_protocol_break_is_a_harness_error(mode: str, api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKMEM_WIRE_TIMEOUT", "2")
    report = run(scripted(mode), profile="quick", only=SINGLE, api=api)  # type: ignore[arg-type]
    (result,) = report.checks
    assert result.status == "harness_error", result
    assert result.reason is not None and result.reason.startswith(KINDS[mode]), result.reason
    assert not report.passed
    assert report.counts()["harness_error"] == 1 and report.counts()["failed"] == 0
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))).checks == report.checks


def test_a_harness_error_in_a_worker_process_is_reported_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """cross_process_atomic: the parent's save_thread works, the workers' merges crash their stores."""
    monkeypatch.setenv("WIRE_SCRIPTED_CROSS", "1")
    report = run(scripted("crash"), profile="quick", only=["cross_process_atomic"])
    (result,) = report.checks
    assert result.status == "harness_error", result
    assert result.reason is not None and result.reason.startswith("in a worker process: harness error (crash)")


def test_an_unsupported_operation_is_reported_unsupported() -> None:
    url = scripted("unsupported")
    with workmem.connect(url) as storage:
        assert storage.capabilities.unsupported == frozenset({"merge_working_memory"})
        with pytest.raises(workmem.OperationNotSupportedError):
            storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
    report = run(url, profile="quick", only=[*SINGLE, "round_trip_text"])
    statuses = {c.name: (c.status, c.reason) for c in report.checks}
    assert statuses["merge_patch_algebra"] == ("unsupported", "the store does not support merge_working_memory")
    assert not report.passed  # a required check not passed


def test_the_cli_and_the_pytest_plugin_show_harness_errors_and_unsupported(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [*_console_script(), "conformance", scripted("malformed"), "--profile", "quick", "--check", SINGLE[0]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "HARNESS_ERROR  merge_patch_algebra" in proc.stdout
    assert "--- merge_patch_algebra (harness error) ---" in proc.stdout
    result = pytester.runpytest("--workmem-url", scripted("timeout"), "-k", "merge_patch_algebra", "-rA")
    result.stdout.fnmatch_lines(["*1 harness error*"])
    assert result.ret == 1
    result = pytester.runpytest("--workmem-url", scripted("unsupported"), "-k", "merge_patch_algebra", "-v")
    result.stdout.fnmatch_lines(["*test_merge_patch_algebra UNSUPPORTED*", "*1 unsupported*"])
    assert result.ret == 0


def test_a_store_that_cannot_start_or_shake_hands_raises_before_any_check() -> None:
    with pytest.raises(workmem.HarnessError, match=r"\(crash\)"):
        workmem.connect("wire:/nonexistent/store --flag")
    with pytest.raises(workmem.HarnessError, match="speaks protocol"):
        workmem.connect(f'wire:{sys.executable} -c "print(\'{{\\"id\\": 1, \\"ok\\": {{\\"protocol\\": 9}}}}\')"')
    with pytest.raises(workmem.ValidationError, match="needs a command"):
        workmem.connect("wire:")
