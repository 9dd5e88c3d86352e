"""``workmem history URL --resource ID [--thread ID] [--limit N] [--before V] [--json]``.

Run in-process (``workmem.cli.main``) on a named ``memory://`` store, which every connection of
the process shares: the test writes with history on, the command reads what it wrote.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import workmem
from tests.support.no_history import no_history_url
from workmem import Thread
from workmem.cli import main


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def url() -> Iterator[str]:
    """A store with a resource ``u1`` of three versions and its thread ``t1`` of five."""
    name = f"memory://cli-history-{uuid.uuid4().hex}"
    with workmem.connect(name, history=True) as storage:
        storage.set_working_memory("# User\n- likes tea", scope="resource", resource_id="u1", source={"agent": "a"})
        storage.merge_working_memory({"x": 1}, scope="resource", resource_id="u2")
        storage.update_resource("u1", working_memory="# User\n- likes coffee")
        storage.restore_working_memory(1, scope="resource", resource_id="u1", source={"agent": "undo"})
        storage.create_thread(Thread("t1", "u1"))
        for n in range(1, 6):
            storage.merge_working_memory({"n": n}, scope="thread", resource_id="u1", thread_id="t1")
        yield name


def test_prints_a_resource_history_newest_first_with_kind_source_and_text(url: str) -> None:
    status, out, err = run_cli("history", url, "--resource", "u1")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "working memory of resource 'u1': 3 version(s), newest first"
    heads = [line.split("  ") for line in lines if line.startswith("v")]
    assert [(h[0], h[2]) for h in heads] == [("v3", "restore"), ("v2", "set"), ("v1", "set")]
    assert heads[0][3] == 'source {"agent": "undo", "restoredFrom": 1}' and len(heads[1]) == 3
    assert lines[2:4] == ["    # User", "    - likes tea"]  # the text, indented line by line
    assert "older versions" not in out


def test_a_thread_history_pages_with_limit_and_before(url: str) -> None:
    status, out, _ = run_cli("history", url, "--resource", "u1", "--thread", "t1", "--limit", "2")
    assert status == 0
    assert [line.split("  ")[0] for line in out.splitlines() if line.startswith("v")] == ["v5", "v4"]
    assert out.splitlines()[-1] == "older versions: --before 4"
    status, out, _ = run_cli("history", url, "--resource", "u1", "--thread", "t1", "--before", "4", "--json")
    assert status == 0
    document = json.loads(out)
    assert document["scope"] == "thread" and document["thread_id"] == "t1" and document["next_before"] is None
    assert [v["version"] for v in document["versions"]] == [3, 2, 1]
    newest = document["versions"][0]
    assert set(newest) == {"kind", "resource_id", "thread_id", "version", "change", "content", "changed_at", "source"}
    assert (newest["change"], newest["content"], newest["source"]) == ("merge", '{"n":3}', None)
    assert newest["changed_at"].endswith("Z")


def test_json_of_a_missing_thread_is_empty(url: str) -> None:
    status, out, _ = run_cli("history", url, "--resource", "u1", "--thread", "nope", "--json")
    assert status == 0
    assert json.loads(out) == {
        "resource_id": "u1",
        "thread_id": "nope",
        "scope": "thread",
        "versions": [],
        "next_before": None,
    }


def test_refusals_exit_2_with_the_reason(url: str, tmp_path: Path) -> None:
    status, out, err = run_cli("history", url, "--resource", "u2", "--thread", "t1")  # t1 is u1's
    assert (status, out) == (2, "") and "ThreadOwnershipError" in err
    status, out, err = run_cli("history", no_history_url(), "--resource", "u1")  # an adapter without history
    assert (status, out) == (2, "") and "OperationNotSupportedError" in err, err
    with pytest.raises(SystemExit) as exited:
        run_cli("history", url, "--resource", "u1", "--limit", "0")
    assert exited.value.code == 2
    with pytest.raises(SystemExit):
        run_cli("history", url)  # --resource is required


def test_a_password_in_the_url_is_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_cli("history", "postgresql://someone:s3cr3t-pw@127.0.0.1:1/db", "--resource", "u")
    assert status == 2 and "workmem history: error" in err
    assert "s3cr3t-pw" not in out + err + capsys.readouterr().err
