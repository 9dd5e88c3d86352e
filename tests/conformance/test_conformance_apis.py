"""One suite, both APIs: ``api="async"`` drives the same checks through ``workmem.connect_async``.

The async runs themselves (every check, every backend) are in test_conformance_backends.py and the
mutants in test_mutants.py (both beside this file); here: that the checks really run as concurrent tasks on one
event loop, that the report, the CLI and the compatibility table carry the API, and that reports from
before the field read as sync.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import threading
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from test_mutants import ShallowMerge, faces

import workmem
from workmem.adapters.reference import AsyncReferenceStorage, ReferenceStorage
from workmem.aio import ThreadedAsyncStorage
from workmem.cli import main
from workmem.conformance import Report, run
from workmem.conformance.report import ReportFormatError
from workmem.conformance.table import REPORT_NAME, build_table, load_report, render_markdown
from workmem.hooks import ScopeTarget
from workmem.kit import MergeChange

LOOP_THREAD = "workmem-conformance-loop"


class Watched(AsyncReferenceStorage):
    """The honest async adapter, noting which thread runs each merge and how many are in flight at once."""

    seen: ClassVar[set[str]] = set()
    in_flight: ClassVar[int] = 0
    most: ClassVar[int] = 0

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        cls = type(self)
        cls.seen.add(threading.current_thread().name)
        cls.in_flight += 1
        cls.most = max(cls.most, cls.in_flight)
        try:
            await asyncio.sleep(0.001)  # the loop runs other tasks meanwhile
            return await super()._merge_working_memory(target, change)
        finally:
            cls.in_flight -= 1


def test_concurrent_checks_run_as_concurrent_tasks_on_one_loop_thread() -> None:
    name = uuid.uuid4().hex
    report = run(lambda: Watched(name), profile="quick", only=["no_lost_updates_resource"], api="async")
    assert report.passed and report.api == "async", report.format_failures()
    assert Watched.seen == {LOOP_THREAD}  # every call of every worker thread was awaited on the loop
    assert Watched.most > 1  # and they overlapped: real async concurrency, not one call at a time
    assert not [t for t in threading.enumerate() if t.name == LOOP_THREAD]  # the loop stops with the check


def test_the_report_names_its_api_and_old_reports_read_as_sync() -> None:
    report = run("memory://", profile="quick", only=["owner_immutable"], api="async")
    data = report.to_dict()
    assert data["api"] == "async" and data["adapter"] == "workmem.adapters.reference:AsyncReferenceStorage"
    assert Report.from_dict(json.loads(json.dumps(data))) == report
    assert report.format_table().endswith("profile quick, async API)")
    old = {k: v for k, v in data.items() if k != "api"}
    assert Report.from_dict(old).api == "sync"
    with pytest.raises(ReportFormatError, match="'api' must be one of"):
        Report.from_dict({**data, "api": "both"})
    sync = run("memory://", profile="quick", only=["owner_immutable"])
    assert sync.api == "sync" and sync.to_dict()["api"] == "sync" and "sync API" in sync.format_table()


def test_cli_api_option(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    json_file = tmp_path / "async.json"
    code = main(
        ["conformance", "memory://", "--profile", "quick", "--api", "async", "--json", str(json_file)], out=out, err=err
    )
    assert code == 0, out.getvalue() + err.getvalue()
    assert "workmem conformance, profile quick, async API:" in err.getvalue()
    assert out.getvalue().rstrip().endswith("profile quick, async API)")
    assert json.loads(json_file.read_text(encoding="utf-8"))["api"] == "async"
    # a mutant's async face is what --api async runs: it fails there
    scheme = f"mutant-shallow-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{faces(ShallowMerge)[0].__module__}:{faces(ShallowMerge)[0].__name__}")
    out, err = io.StringIO(), io.StringIO()
    argv = ["conformance", f"{scheme}://x", "--profile", "quick", "--api", "async", "--check", "merge_patch_algebra"]
    assert main(argv, out=out, err=err) == 1
    assert f"test_mutants:{faces(ShallowMerge)[1].__name__}" in out.getvalue()
    with pytest.raises(SystemExit):
        main(["conformance", "memory://", "--api", "both"], out=io.StringIO(), err=io.StringIO())


def _write(folder: Path, stem: str, report: Report) -> Path:
    path = folder / f"{stem}.json"
    path.write_text(json.dumps(report.to_dict()), encoding="utf-8")
    return path


def test_the_table_keeps_the_apis_apart_and_merges_what_agrees(tmp_path: Path) -> None:
    assert REPORT_NAME.match("report-libsql-embedded-py3.12-async")["api"] == "async"  # type: ignore[index]
    assert REPORT_NAME.match("report-libsql-embedded-py3.12")["python"] == "3.12"  # type: ignore[index]
    honest_sync = run("memory://", profile="quick", only=["owner_immutable", "merge_patch_algebra"])
    honest_async = run("memory://", profile="quick", only=["owner_immutable", "merge_patch_algebra"], api="async")
    name = uuid.uuid4().hex
    broken_async = run(
        lambda: faces(ShallowMerge)[1](name),
        profile="quick",
        only=["owner_immutable", "merge_patch_algebra"],
        api="async",
    )
    same = [
        load_report(_write(tmp_path, "report-memory-x-py3.12", honest_sync)),
        load_report(_write(tmp_path, "report-memory-x-py3.12-async", honest_async)),
    ]
    assert [r.report.api for r in same] == ["sync", "async"] and same[1].python == "3.12"
    table = build_table(same, expected=["memory"])
    assert [c.label for c in table.columns] == ["memory sync API", "memory async API"]
    text = render_markdown(table)
    assert "profile quick, async API, started" in text and text.count("async API, started") == 1
    broken_async = dataclasses.replace(broken_async, backend="memory")  # as if memory:// had broken on one API
    differ = [same[0], load_report(_write(tmp_path, "report-memory-x-py3.12-async", broken_async))]
    columns = build_table(differ, expected=["memory"]).columns
    assert [(c.label, c.summary().split()[0]) for c in columns] == [
        ("memory sync API", "✅"),
        ("memory async API", "❌"),
    ]
    only_sync = build_table([same[0]], expected=["memory"])
    assert [c.label for c in only_sync.columns] == ["memory"]  # one API: no API in the label, as before


def test_a_sync_adapter_on_worker_threads_runs_through_the_async_api() -> None:
    name = uuid.uuid4().hex
    only = ["owner_race", "no_lost_updates_thread", "stateful"]
    report = run(lambda: ThreadedAsyncStorage(ReferenceStorage(name)), profile="quick", only=only, api="async")
    assert report.passed, report.format_failures()
    assert report.adapter == "workmem.aio:ThreadedAsyncStorage[workmem.adapters.reference:ReferenceStorage]"
    assert report.backend == "reference"
