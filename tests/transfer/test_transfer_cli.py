"""``workmem copy|export|import`` as a shell sees them: ``--no-create``, a pipe closed early, an output path.

* ``--no-create`` (``create=False`` in Python) writes with a PostgreSQL role
  that may write rows but not create tables, on the real local server (a
  random database and role, dropped afterwards); without it the error says
  what the command line can do.
* ``workmem export URL | head -1`` through a real pipe: quiet, status 141.
* ``-o FILE`` names ``FILE`` in its errors, never the temporary file beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import workmem
from workmem import Resource, Thread
from workmem.cli import main
from workmem.transfer import export_records, import_records
from workmem.transfer.engine import DESTINATION_NOTE
from workmem.transfer.format import HEADER_LINE

T0 = datetime(2022, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


# -- --no-create: a role that may write rows but not create tables ---------------------------------


@contextlib.contextmanager
def database_with_row_only_role() -> Iterator[tuple[str, str]]:
    """``(owner_url, writer_url)``: a new random database, and a new role that may create nothing in it.

    Once the owner has created workmem's tables, :func:`grant_rows` lets the role
    read and write their rows. The database and the role are dropped afterwards.
    """
    import psycopg
    from test_connect_without_creating import _database_with_select_only_role as database_and_role

    with database_and_role() as (owner_url, writer_url):
        database = urlsplit(owner_url).path.lstrip("/")
        with psycopg.connect(owner_url, autocommit=True) as owner:
            owner.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            owner.execute(f'REVOKE CREATE ON DATABASE "{database}" FROM PUBLIC')
        yield owner_url, writer_url


def grant_rows(owner_url: str, writer_url: str) -> None:
    import psycopg

    role = urlsplit(writer_url).username
    with psycopg.connect(owner_url, autocommit=True) as owner:
        owner.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        owner.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"')


def owned_by(owner_url: str, writer_url: str) -> int:
    """How many tables, indexes, functions and schemas the writer's role owns in the database."""
    import psycopg

    role = urlsplit(writer_url).username
    with psycopg.connect(owner_url, autocommit=True) as owner:
        row = owner.execute(
            "SELECT (SELECT count(*) FROM pg_class WHERE relowner = r.oid)"
            " + (SELECT count(*) FROM pg_proc WHERE proowner = r.oid)"
            " + (SELECT count(*) FROM pg_namespace WHERE nspowner = r.oid) FROM pg_roles r WHERE rolname = %s",
            (role,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def assert_advises_the_flag(err: str) -> None:
    """The error tells a command-line user what they can do: the flag, not the Python keyword."""
    assert "--no-create" in err, err
    assert "create=False" not in err, err


@pytest.mark.backend("postgres")
def test_no_create_writes_with_a_role_that_may_not_create_tables(tmp_path: Path) -> None:
    records = [Resource("r-1", "# wm", {"a": 1}, T0, T0), Thread("t-1", "r-1", "title", None, T0, T0)]
    source = f"file:{tmp_path / 'source.db'}"
    with workmem.connect(source) as storage:
        storage.insert_resources([records[0]])  # type: ignore[list-item]
        storage.insert_threads([records[1]])  # type: ignore[list-item]
    export = tmp_path / "export.jsonl"
    status, _, err = run_cli("export", source, "-o", str(export))
    assert status == 0, err
    with database_with_row_only_role() as (owner_url, writer_url):
        # no tables yet: --no-create creates nothing, and says how to get them created
        status, _, err = run_cli("import", writer_url, str(export), "--no-create")
        assert status == 2 and "MissingTablesError" in err and "mastra_threads" in err, err
        assert "without --no-create" in err and "create=False" not in err, err
        # the default creates them, which this role may not do: the error names the flag
        status, _, err = run_cli("import", writer_url, str(export))
        assert status == 2 and "permission denied" in err, err
        assert_advises_the_flag(err)
        workmem.connect(owner_url).close()  # the owner creates the tables
        grant_rows(owner_url, writer_url)
        for argv in (("import", writer_url, str(export)), ("copy", source, writer_url)):
            status, _, err = run_cli(*argv)
            assert status == 2 and "permission denied" in err, (argv, err)
            assert_advises_the_flag(err)
        status, out, err = run_cli("import", writer_url, str(export), "--no-create")
        assert status == 0 and "resources: 1 inserted" in out and "threads: 1 inserted" in out, (out, err)
        with workmem.connect(source) as storage:
            storage.save_resource(Resource("r-2", "second", None, T0, T0))
        status, out, err = run_cli("copy", source, writer_url, "--no-create", "--verify")
        assert status == 0 and "resources: 1 inserted, 1 skipped" in out, (out, err)
        report = workmem.copy(source, writer_url, create=False)  # the same through Python
        assert report.ok and report.counts["resource", "skipped"] == 2
        with workmem.connect(writer_url, create=False) as storage:
            assert [r.id for r in storage.iter_resources()] == ["r-1", "r-2"]
            assert storage.get_thread("t-1") == records[1]
        assert owned_by(owner_url, writer_url) == 0


def test_create_false_in_python_creates_nothing_sync_and_async(tmp_path: Path) -> None:
    target = tmp_path / "none.db"
    export = io.BytesIO(HEADER_LINE.encode())
    with pytest.raises(workmem.MissingTablesError, match="create=False") as raised:
        workmem.copy("memory://", f"file:{target}", create=False)
    assert DESTINATION_NOTE in raised.value.__notes__  # how the command line tells the destination's error
    with pytest.raises(workmem.MissingTablesError, match="create=False"):
        asyncio.run(workmem.copy_async("memory://", f"file:{target}", create=False))
    with pytest.raises(workmem.MissingTablesError, match="create=False"):
        import_records(f"file:{target}", export, create=False)
    assert not target.exists()


# -- a pipe closed early ---------------------------------------------------------------------------


def test_export_into_a_pipe_closed_early_exits_quietly(tmp_path: Path) -> None:
    url = f"file:{tmp_path / 'many.db'}"
    with workmem.connect(url) as storage:  # far more than a pipe's buffer holds
        storage.insert_resources([Resource(f"r-{i:05d}", "x" * 300, None, T0, T0) for i in range(4000)])
    export = subprocess.Popen(
        [sys.executable, "-m", "workmem", "export", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert export.stdout is not None and export.stderr is not None
    head = subprocess.Popen(["head", "-1"], stdin=export.stdout, stdout=subprocess.PIPE)
    export.stdout.close()  # head alone holds the pipe's reading end
    first, _ = head.communicate(timeout=120)
    err = export.stderr.read().decode()
    export.stderr.close()
    status = export.wait(timeout=120)
    assert first.decode() == HEADER_LINE
    assert "Traceback" not in err and "BrokenPipe" not in err and "error" not in err.lower(), err
    assert status == 141, (status, err)  # 128 + SIGPIPE, as for any program a closed pipe stops


def test_import_reads_standard_input_given_as_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``workmem export A | workmem import B -`` through a real pipe; a stdin without bytes is an error, status 2."""
    src, dst = f"file:{tmp_path / 'src.db'}", f"file:{tmp_path / 'dst.db'}"
    with workmem.connect(src) as storage:
        storage.save_resource(Resource("r-1", "# wm", {"k": 1}, T0, T0))
        storage.save_thread(Thread("t-1", "r-1", "title", {"n": 2}, T0, T0))
    export = subprocess.Popen([sys.executable, "-m", "workmem", "export", src], stdout=subprocess.PIPE)
    imported = subprocess.run(
        [sys.executable, "-m", "workmem", "import", dst, "-"], stdin=export.stdout, capture_output=True, timeout=120
    )
    assert export.stdout is not None
    export.stdout.close()
    assert export.wait(timeout=120) == 0
    assert imported.returncode == 0, imported.stderr.decode()
    assert "resources: 1 inserted" in imported.stdout.decode() and "threads: 1 inserted" in imported.stdout.decode()
    with workmem.connect(dst, create=False) as storage:
        assert storage.get_resource("r-1") == Resource("r-1", "# wm", {"k": 1}, T0, T0)
        assert storage.get_thread("t-1") == Thread("t-1", "r-1", "title", {"n": 2}, T0, T0)

    monkeypatch.setattr(sys, "stdin", io.StringIO(HEADER_LINE))  # text only: no binary buffer under it
    status, _, err = run_cli("import", dst, "-")
    assert status == 2 and "standard input has no binary buffer" in err, (status, err)


def test_export_into_a_broken_pipe_in_python_is_not_mistaken_for_the_cli(tmp_path: Path) -> None:
    """Only the command line turns a closed standard output into a quiet exit; Python callers get the OSError."""

    class Closed(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: object) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        export_records("memory://", Closed())  # type: ignore[arg-type]


# -- -o FILE ---------------------------------------------------------------------------------------


def test_an_output_path_that_cannot_be_written_is_named_as_given(tmp_path: Path) -> None:
    for target in (tmp_path / "missing_dir" / "out.jsonl", tmp_path):
        status, _, err = run_cli("export", "memory://", "-o", str(target))
        assert status == 2 and f"'{target}'" in err, err
        assert ".partial" not in err, err
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_an_output_that_is_no_regular_file_is_written_in_place_not_replaced(tmp_path: Path) -> None:
    """A symlink stays a link (its target is written), a FIFO stays a FIFO (its reader gets the export)."""
    import os
    import stat
    import threading

    target, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert run_cli("export", "memory://", "-o", str(link))[0] == 0
    assert link.is_symlink() and target.read_text(encoding="utf-8") == HEADER_LINE
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    status, _, err = run_cli("export", "memory://", "-o", str(fifo))
    reader.join(timeout=30)
    assert status == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert received == [HEADER_LINE.encode()]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fifo", "link.jsonl", "real.jsonl"]


# -- workmem verify: two backends compared, nothing copied ----------------------------------------


@pytest.mark.backend("libsql")
def test_verify_compares_two_files_and_changes_neither(tmp_path: Path) -> None:
    source, target = f"file:{tmp_path / 'a.db'}", f"file:{tmp_path / 'b.db'}"
    with workmem.connect(source) as storage:
        storage.save_resource(Resource("u1", "# notes", {}, T0, T0))
        storage.save_thread(Thread("t1", "u1", "first", {}, T0, T0))
        storage.update_resource("u1", working_memory="# notes, again")  # a version of its history
    assert run_cli("copy", source, target)[0] == 0

    status, out, err = run_cli("verify", source, target)
    assert status == 0, out + err
    assert "workmem verify:" in out and "difference" not in out

    with workmem.connect(target) as storage:
        storage.update_thread("t1", title="changed")
    before = (tmp_path / "b.db").read_bytes()
    status, out, err = run_cli("verify", source, target, "--page-size", "1")
    assert status == 1, out + err
    assert "difference: thread 't1'" in out and "title" in out
    assert (tmp_path / "b.db").read_bytes() == before  # only read

    status, out, err = run_cli("verify", source, f"file:{tmp_path / 'missing.db'}")
    assert status == 2 and "workmem verify: error:" in err
    assert not (tmp_path / "missing.db").exists()  # never created
