"""The published Mastra stores through the wire protocol (``interop/mastra-store.mjs``): the suite runs to its end.

Which checks Mastra passes is the compatibility table's business (it changes when Mastra does); these
tests assert that a whole run completes from the CLI, with a JSON report of the pinned shape naming every
check, the package versions in its adapter, no harness error (the shim keeps to the protocol), and the
operations Mastra has no way to do reported ``unsupported``, never failed.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from mastra_node import require_mastra
from test_wire import _console_script

import workmem
from workmem.adapters.wire.mastra import SCHEMES, MastraStorage, store_spec
from workmem.conformance import all_checks
from workmem.conformance.report import STATUSES, Report
from workmem.registry import builtin_schemes, resolve

pytestmark = pytest.mark.backend("mastra")

ROOT = Path(__file__).resolve().parents[2]
UNSUPPORTED_OPS = {"create_thread", "resource_page", "thread_page", "insert_resources", "insert_threads"}


@contextlib.contextmanager
def fresh_postgres_database() -> Iterator[str]:
    import psycopg
    from servers import server_url

    server = server_url("postgres")
    name = f"wm_wire_{secrets.token_hex(6)}"
    parts = urlsplit(server)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(("mastra+pg", parts.netloc, f"/{name}", parts.query, ""))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_cli(url: str, out: Path) -> Report:
    proc = subprocess.run(
        [*_console_script(), "conformance", url, "--profile", "quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 2: the suite could not run
    return Report.from_dict(json.loads(out.read_text(encoding="utf-8")))  # the pinned shape, or ReportFormatError


def assert_completed(report: Report, package: str) -> None:
    assert [c.name for c in report.checks] == [c.name for c in all_checks()]
    assert {c.status for c in report.checks} <= STATUSES
    assert package in report.adapter and "@mastra/memory" in report.adapter, report.adapter
    broken = [(c.name, c.reason) for c in report.checks if c.status == "harness_error"]
    assert not broken, broken
    for c in report.checks:
        assert c.status == "passed" or c.reason, c  # every other outcome says why
        if c.status == "unsupported":
            assert c.reason is not None and ("does not support" in c.reason or "max_chars" in c.reason)


def test_mastra_postgres_runs_through_the_whole_suite(tmp_path: Path) -> None:
    require_mastra()
    with fresh_postgres_database() as url:
        report = run_cli(url, tmp_path / "report.json")
    assert report.backend == "mastra+pg"
    assert_completed(report, "@mastra/pg")


def test_mastra_libsql_file_runs_through_the_whole_suite(tmp_path: Path) -> None:
    require_mastra()
    report = run_cli(f"mastra+file:{tmp_path / 'mastra.db'}", tmp_path / "report.json")
    assert report.backend == "mastra+file"
    assert_completed(report, "@mastra/libsql")


def test_a_mastra_connection_declares_what_mastra_cannot_do(tmp_path: Path) -> None:
    require_mastra()
    with workmem.connect(f"mastra+file:{tmp_path / 'mastra.db'}") as storage:
        assert storage.capabilities.unsupported >= UNSUPPORTED_OPS
        assert not storage.capabilities.cross_process_atomic and storage.capabilities.persistent
        with pytest.raises(workmem.OperationNotSupportedError):
            storage.create_thread(workmem.Thread("t-1", "user-1"))
        with pytest.raises(workmem.OperationNotSupportedError):
            storage.set_working_memory("x", scope="resource", resource_id="user-1", max_chars=10)
        # what Mastra does do, it does: a set through Memory.updateWorkingMemory, a merge through its tool
        storage.set_working_memory('{"city": "Lyon"}', scope="resource", resource_id="user-1")
        assert storage.merge_working_memory({"tea": True}, scope="resource", resource_id="user-1") == {
            "city": "Lyon",
            "tea": True,
        }


def test_every_mastra_scheme_is_registered_and_names_a_store() -> None:
    assert {s for s in builtin_schemes() if s.startswith("mastra+")} == set(SCHEMES)
    assert all(resolve(f"{s}://x") is MastraStorage for s in SCHEMES)
    assert store_spec("mastra+pg://u:p%40ss@h:5432/db?schemaName=s&sslmode=disable") == {
        "kind": "pg",
        "connectionString": "postgresql://u:p%40ss@h:5432/db?sslmode=disable",
        "schemaName": "s",
    }
    assert store_spec("mastra+file:/tmp/a.db") == {"kind": "libsql", "url": "file:/tmp/a.db"}
    assert store_spec("mastra+libsql+http://127.0.0.1:8080") == {"kind": "libsql", "url": "http://127.0.0.1:8080"}
    assert store_spec("mastra+upstash+http://127.0.0.1:9?token=abc") == {
        "kind": "upstash",
        "url": "http://127.0.0.1:9",
        "token": "abc",
    }
    with pytest.raises(workmem.ValidationError, match="token"):
        store_spec("mastra+upstash+https://example.com")
