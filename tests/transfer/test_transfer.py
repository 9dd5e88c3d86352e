"""``workmem.copy``, ``workmem copy|export|import``: every pair of backends, conflicts, interruption, the format."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from backends import fresh_url

import workmem
from workmem import MemoryStorage, Resource, Thread
from workmem.cli import main
from workmem.transfer import Progress, export_records, record_line, verify
from workmem.transfer.format import HEADER_LINE

HERE = ("memory", "libsql", "postgres", "upstash")
"""The backends that run here (MongoDB and Oracle have no server in this environment)."""
SERVERS = {"postgres", "upstash"}

T0 = datetime(2021, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)
T1 = datetime(2024, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
OLD = datetime(1, 1, 1, tzinfo=UTC)
LATE = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)


def marks(*backends: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.backend(name) for name in backends]


def sample() -> tuple[list[Resource], list[Thread]]:
    """Records that exercise the format: unicode ids in tricky code-point order, nested metadata, odd timestamps."""
    resources = [
        Resource("r-plain", "# User\n- likes tea", {"plan": "pro", "n": 3, "ok": True, "x": None}, T0, T1),
        Resource("r-none", None, None, OLD, LATE),
        Resource("r-json", '{"name":"Ada"}', {"nested": {"b": [1, 2.5, {"c": "ü"}], "a": 0.1}}, T1, T1),
        Resource("R-upper", "uppercase sorts first", {}, T0, T0),
        Resource("r-é", "café ☕ \u2028 line sep", {"emoji": "😀", "k é": "v"}, T0, T1),
        Resource("r-😀", "astral", {"float": 1e-7, "big": 2**53 - 1, "neg": -5}, T0, T1),
    ]
    threads = [
        Thread("t-1", "r-plain", "first", {"workingMemory": "# thread wm", "tag": "a"}, T0, T1),
        Thread("t-2", "r-plain", "", None, OLD, LATE),
        Thread("t-ünï", "r-é", "ünïcode title", {"workingMemory": '{"k": 1}', "deep": {"x": [[], {}]}}, T0, T0),
        Thread("t-orphan", "r-nobody", "owner has no resource row", {"a": 1}, T1, T1),
        Thread("T-upper", "R-upper", "upper", {}, T0, T1),
    ]
    threads += [Thread(f"t-bulk-{i:03d}", f"r-bulk-{i % 4}", f"bulk {i}", {"i": i}, T0, T1) for i in range(40)]
    resources += [Resource(f"r-bulk-{i}", f"wm {i}", None, T0, T1) for i in range(4)]
    return resources, threads


def fill(storage: MemoryStorage, resources: list[Resource], threads: list[Thread]) -> None:
    assert storage.insert_resources(resources) == frozenset()
    assert storage.insert_threads(threads) == frozenset()


def export_bytes(storage: MemoryStorage | str) -> bytes:
    out = io.BytesIO()
    report = export_records(storage, out)
    assert report.ok, report.issues
    return out.getvalue()


def expected_export(resources: list[Resource], threads: list[Thread]) -> bytes:
    lines = [record_line(r) for r in sorted(resources, key=lambda r: r.id)]
    lines += [record_line(t) for t in sorted(threads, key=lambda t: t.id)]
    return (HEADER_LINE + "".join(lines)).encode("utf-8")


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


# -- every pair of backends --------------------------------------------------------------


PAIRS = [
    pytest.param(src, dst, id=f"{src}-to-{dst}", marks=marks(*{src, dst})) for src in HERE for dst in HERE if src != dst
]


@pytest.mark.parametrize(("src_backend", "dst_backend"), PAIRS)
def test_copy_between_every_pair_keeps_every_field(src_backend: str, dst_backend: str) -> None:
    resources, threads = sample()
    with fresh_url(src_backend) as src_url, fresh_url(dst_backend) as dst_url:
        with workmem.connect(src_url) as src:
            fill(src, resources, threads)
        report = workmem.copy(src_url, dst_url, verify=True, page_size=7)
        assert report.ok, report.issues
        assert report.counts["resource", "inserted"] == len(resources)
        assert report.counts["thread", "inserted"] == len(threads)
        assert report.counts["thread", "verified"] == len(threads)
        with workmem.connect(dst_url) as dst:
            for record in resources:
                assert dst.get_resource(record.id) == record
            for thread in threads:
                assert dst.get_thread(thread.id) == thread
            assert export_bytes(dst) == expected_export(resources, threads)
        again = workmem.copy(src_url, dst_url, verify=True, page_size=5)  # re-run: all skipped
        assert again.ok, again.issues
        assert again.counts["resource", "skipped"] == len(resources)
        assert again.counts["thread", "skipped"] == len(threads)
        assert again.counts["thread", "inserted"] == 0


@pytest.mark.parametrize("backend", [pytest.param(b, marks=marks(b)) for b in HERE])
def test_export_import_export_is_byte_identical(backend: str, tmp_path: Path) -> None:
    resources, threads = sample()
    with fresh_url("memory") as origin_url, fresh_url(backend) as url:
        with workmem.connect(origin_url) as origin:
            fill(origin, resources, threads)
        original = tmp_path / "original.jsonl"
        assert run_cli("export", origin_url, "-o", str(original))[0] == 0
        assert original.read_bytes() == expected_export(resources, threads)
        status, out, _ = run_cli("import", url, str(original), "--page-size", "3")
        assert status == 0, out
        assert f"{len(threads):,} inserted" in out
        again = tmp_path / "again.jsonl"
        assert run_cli("export", url, "-o", str(again), "--page-size", "4")[0] == 0
        assert again.read_bytes() == original.read_bytes()
        status, out, _ = run_cli("import", url, str(original))  # re-import: identical, skipped
        assert status == 0 and f"{len(threads):,} skipped" in out, out


# -- conflicts and --overwrite -------------------------------------------------------------


@contextmanager
def conflicting(dst_backend: str) -> Iterator[tuple[str, str]]:
    """A source and a destination that disagree: a resource differs, a thread has another owner, one differs."""
    with fresh_url("memory") as src_url, fresh_url(dst_backend) as dst_url:
        with workmem.connect(src_url) as src, workmem.connect(dst_url) as dst:
            fill(
                src,
                [Resource("r-1", "source memory", {"v": 1}, T0, T1), Resource("r-same", "same", None, T0, T0)],
                [
                    Thread("t-owned", "r-1", "mine", None, T0, T1),
                    Thread("t-differs", "r-1", "source title", {"workingMemory": "src"}, T0, T1),
                    Thread("t-new", "r-1", "new", None, T0, T1),
                ],
            )
            fill(
                dst,
                [Resource("r-1", "destination memory", {"v": True}, T0, T0), Resource("r-same", "same", None, T0, T0)],
                [
                    Thread("t-owned", "r-other", "theirs", None, T0, T0),
                    Thread("t-differs", "r-1", "destination title", None, T0, T0),
                ],
            )
        yield src_url, dst_url


@pytest.mark.parametrize("backend", [pytest.param(b, marks=marks(b)) for b in HERE])
def test_conflicts_are_reported_and_left_alone(backend: str) -> None:
    with conflicting(backend) as (src_url, dst_url):
        status, out, _ = run_cli("copy", src_url, dst_url)
        assert status == 1, out
        assert "conflict: resource 'r-1'" in out and "working_memory" in out and "metadata" in out
        assert "conflict: thread 't-owned'" in out and "'r-other'" in out
        assert "conflict: thread 't-differs'" in out and "title" in out
        assert "problems: 3 conflicts" in out
        with workmem.connect(dst_url) as dst:
            assert dst.get_resource("r-1") == Resource("r-1", "destination memory", {"v": True}, T0, T0)
            owned = dst.get_thread("t-owned")
            assert owned is not None and owned.resource_id == "r-other" and owned.title == "theirs"
            differs = dst.get_thread("t-differs")
            assert differs is not None and differs.title == "destination title"
            assert dst.get_thread("t-new") == Thread("t-new", "r-1", "new", None, T0, T1)  # the rest is copied
        status, out, _ = run_cli("copy", src_url, dst_url, "--verify")
        assert status == 1 and out.count("difference: ") == 3, out


@pytest.mark.parametrize("backend", [pytest.param(b, marks=marks(b)) for b in HERE])
def test_overwrite_replaces_same_owner_records_but_never_moves_a_thread(backend: str) -> None:
    with conflicting(backend) as (src_url, dst_url):
        report = workmem.copy(src_url, dst_url, overwrite=True)
        assert report.conflicts == 1 and [(i.record, i.id) for i in report.issues] == [("thread", "t-owned")]
        assert report.counts["resource", "replaced"] == 1 and report.counts["thread", "replaced"] == 1
        assert report.counts["resource", "skipped"] == 1
        with workmem.connect(dst_url) as dst:
            assert dst.get_resource("r-1") == Resource("r-1", "source memory", {"v": 1}, T0, T1)
            assert dst.get_thread("t-differs") == Thread(
                "t-differs", "r-1", "source title", {"workingMemory": "src"}, T0, T1
            )
            owned = dst.get_thread("t-owned")
            assert owned is not None and owned.resource_id == "r-other"
        status, out, _ = run_cli("copy", src_url, dst_url, "--overwrite", "--verify")
        assert status == 1 and "conflict: thread 't-owned'" in out and out.count("difference: ") == 1, out


@pytest.mark.backend("postgres")
def test_verify_reports_records_only_in_the_destination_and_changed_ones() -> None:
    resources, threads = sample()
    with fresh_url("libsql") as src_url, fresh_url("postgres") as dst_url:
        with workmem.connect(src_url) as src:
            fill(src, resources, threads)
        assert workmem.copy(src_url, dst_url).ok
        assert verify(src_url, dst_url).ok
        with workmem.connect(dst_url) as dst:
            dst.save_thread(Thread("t-extra", "r-plain", "extra"))
            dst.update_resource("r-plain", working_memory="changed behind our back")
        report = verify(src_url, dst_url)
        found = sorted((i.record, i.id, i.detail.split(" ")[0]) for i in report.issues)
        assert found == [("resource", "r-plain", "working_memory"), ("thread", "t-extra", "only")], report.issues
        status, out, _ = run_cli("copy", src_url, dst_url, "--verify")
        assert status == 1 and "only in the destination" in out and "conflict: resource 'r-plain'" in out


# -- unreadable records, bad input, exit codes ----------------------------------------------


def test_unreadable_source_records_are_reported_and_the_rest_copied(tmp_path: Path) -> None:
    from raw_sqlite import raw

    src_url = f"file:{tmp_path / 'src.db'}"
    with workmem.connect(src_url) as src:
        fill(src, [Resource("r", "wm", None, T0, T0)], [Thread("t-fine", "r", "", None, T0, T0)])
        conn = raw(src._database)  # type: ignore[attr-defined]
        conn.execute(
            'INSERT INTO mastra_threads ("id", "resourceId", "title", "metadata", "createdAt", "updatedAt") '
            "VALUES (?, ?, ?, ?, ?, ?)",
            ("t-bad", "r", "x", "[1, 2]", "2024-01-01T00:00:00.000Z", "2024-01-01T00:00:00.000Z"),
        )
        conn.execute(  # as Mastra's libSQL store writes a thread: JSON text with spaces, ISO text stamps
            'INSERT INTO mastra_threads ("id", "resourceId", "title", "metadata", "createdAt", "updatedAt") '
            "VALUES (?, ?, ?, ?, ?, ?)",
            ("t-mastra", "r", "from TS", '{"workingMemory": "# m", "b": 2, "a": 1}', "2024-05-06T07:08:09.123Z",
             "2024-05-06T07:08:09.456Z"),
        )  # fmt: skip
        conn.close()
    with fresh_url("memory") as dst_url:
        status, out, _ = run_cli("copy", src_url, dst_url, "--verify")
        assert status == 1 and "unreadable: thread 't-bad'" in out, out
        assert out.count("unreadable: ") == 1  # reported once, not again by --verify
        with workmem.connect(dst_url) as dst, workmem.connect(src_url) as src:
            assert dst.get_thread("t-fine") is not None and dst.get_thread("t-bad") is None
            mastra = dst.get_thread("t-mastra")
            assert mastra is not None and mastra == src.get_thread("t-mastra")
            assert mastra.metadata == {"workingMemory": "# m", "b": 2, "a": 1}
            assert mastra.updated_at == datetime(2024, 5, 6, 7, 8, 9, 456000, tzinfo=UTC)
        status, out, err = run_cli("export", src_url)
        assert status == 1 and "t-fine" in out and "t-bad" not in out and "unreadable: thread 't-bad'" in err


BAD_LINES = [
    (b"not json at all", "not JSON"),
    (b'{"kind":"resource","id":"r-x"}', "needs the field(s) working_memory"),
    (b'{"kind":"robot","id":"x"}', '"kind" must be'),
    (b"[1,2,3]", "must be a JSON object"),
    (
        b'{"kind":"thread","id":"t-x","resource_id":"r","title":"","metadata":null,'
        b'"created_at":"yesterday","updated_at":"2024-01-01T00:00:00.000Z"}',
        "created_at is no ISO-8601",
    ),
    (
        b'{"kind":"thread","id":"t-nul\\u0000","resource_id":"r","title":"","metadata":null,'
        b'"created_at":"2024-01-01T00:00:00.000Z","updated_at":"2024-01-01T00:00:00.000Z"}',
        "NUL",
    ),
    (
        b'{"kind":"thread","id":"t-long","resource_id":"r","title":"' + b"x" * 1100 + b'","metadata":null,'
        b'"created_at":"2024-01-01T00:00:00.000Z","updated_at":"2024-01-01T00:00:00.000Z"}',
        "title is larger than 1024 bytes",
    ),
    (
        b'{"kind":"resource","id":"r-dup","id":"r-dup2","working_memory":null,"metadata":null,'
        b'"created_at":"2024-01-01T00:00:00.000Z","updated_at":"2024-01-01T00:00:00.000Z"}',
        "appears twice",
    ),
    (
        b'{"kind":"resource","id":"r-nan","working_memory":null,"metadata":{"n":NaN},'
        b'"created_at":"2024-01-01T00:00:00.000Z","updated_at":"2024-01-01T00:00:00.000Z"}',
        "NaN is not a JSON number",
    ),
    (
        b'{"kind":"resource","id":"r-extra","working_memory":null,"metadata":null,"colour":"red",'
        b'"created_at":"2024-01-01T00:00:00.000Z","updated_at":"2024-01-01T00:00:00.000Z"}',
        "unknown field(s) for a resource: 'colour'",
    ),
    (b"\xff\xfe broken utf-8", "not UTF-8"),
]


@pytest.mark.parametrize("backend", [pytest.param(b, marks=marks(b)) for b in ("libsql", "postgres")])
def test_bad_import_lines_are_reported_with_their_numbers_and_nothing_of_them_written(
    backend: str, tmp_path: Path
) -> None:
    good: list[Resource | Thread] = [
        Resource("r-good", "wm", None, T0, T1),
        Thread("t-good", "r-good", "ok", None, T0, T1),
    ]
    lines = [HEADER_LINE.encode(), record_line(good[0]).encode()]
    for raw, _ in BAD_LINES:
        lines.append(raw + b"\n")
    lines.append(record_line(good[1]).encode())
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(lines))
    with fresh_url(backend) as url:
        status, out, _ = run_cli("import", url, str(path))
        assert status == 1
        for number, (_, reason) in enumerate(BAD_LINES, 3):
            assert f"line {number}: bad line: " in out and reason in out, (number, reason, out)
        assert f"problems: {len(BAD_LINES)} bad lines" in out
        with workmem.connect(url) as storage:
            assert storage.get_resource("r-good") == good[0] and storage.get_thread("t-good") == good[1]
            assert [r.id for r in storage.iter_resources()] == ["r-good"]
            assert [t.id for t in storage.iter_threads()] == ["t-good"]


def test_an_import_without_the_header_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "no-header.jsonl"
    path.write_text(record_line(Resource("r", "wm", None, T0, T0)), encoding="utf-8")
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"format":"workmem-export","version":3}\n', encoding="utf-8")
    with fresh_url("libsql") as url:
        status, out, _ = run_cli("import", url, str(path))
        assert status == 1 and "line 1: bad line: the first line is not a workmem export header" in out
        status, out, _ = run_cli("import", url, str(newer))
        assert status == 1 and "version 3: this workmem reads versions 1 and 2" in out
        with workmem.connect(url) as storage:
            assert list(storage.iter_resources()) == []


def test_import_applies_copys_conflict_rules_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        HEADER_LINE
        + record_line(Resource("r-1", "new", None, T0, T1))
        + record_line(Thread("t-1", "r-1", "title", None, T0, T1))
        + record_line(Thread("t-1", "r-1", "title", None, T0, T1)),  # a repeat of an identical line is skipped
        encoding="utf-8",
    )
    with fresh_url("memory") as url:
        with workmem.connect(url) as storage:
            storage.save_resource(Resource("r-1", "old", None, T0, T0))
            storage.save_thread(Thread("t-1", "r-2", "other owner", None, T0, T0))
        status, out, _ = run_cli("import", url, str(path))
        assert status == 1 and "line 2: conflict: resource 'r-1'" in out and "line 3: conflict: thread 't-1'" in out
        assert "line 4: conflict: thread 't-1'" in out, out
        status, out, _ = run_cli("import", url, str(path), "--overwrite")
        assert status == 1 and "line 2:" not in out and "line 3: conflict: thread 't-1'" in out
        with workmem.connect(url) as storage:
            assert storage.get_resource("r-1") == Resource("r-1", "new", None, T0, T1)


def test_cli_exit_codes(tmp_path: Path) -> None:
    with fresh_url("memory") as src_url, fresh_url("memory") as dst_url:
        with workmem.connect(src_url) as src:
            fill(src, [Resource("r", "wm", None, T0, T0)], [])
        assert run_cli("copy", src_url, dst_url, "--verify")[0] == 0
        status, _, err = run_cli("copy", "nosuchscheme://x", dst_url)
        assert status == 2 and "workmem copy: error:" in err
        status, _, err = run_cli("copy", f"file:{tmp_path / 'missing.db'}", dst_url)
        assert status == 2 and "error" in err and not (tmp_path / "missing.db").exists()
        status, _, err = run_cli("import", dst_url, str(tmp_path / "no-such-file.jsonl"))
        assert status == 2 and "No such file" in err
    for bad in ("0", "10001", "ten"):
        with pytest.raises(SystemExit) as raised:
            run_cli("copy", "memory://", "memory://", "--page-size", bad)
        assert raised.value.code == 2


def test_cli_hides_the_password_of_a_url_it_cannot_open() -> None:
    status, _, err = run_cli("copy", "postgresql://user:s3cret-pw@127.0.0.1:1/db?connect_timeout=1", "memory://")
    assert status == 2 and "s3cret-pw" not in err


def test_export_to_a_file_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    status, _, _ = run_cli("export", "nosuchscheme://x", "-o", str(target))
    assert status == 2 and not target.exists() and list(tmp_path.iterdir()) == []


# -- progress -------------------------------------------------------------------------------


def test_progress_bar_on_a_terminal_and_log_lines_otherwise() -> None:
    tty = io.StringIO()
    bar = Progress(tty, tty=True)
    bar.start("copy", 200)
    bar._started -= 2.0  # two seconds in
    bar._shown -= 1.0
    bar.advance(50)
    assert "\r" in tty.getvalue() and "[#####" in tty.getvalue() and "50/200 records" in tty.getvalue()
    assert "ETA 0:00:0" in tty.getvalue() and "/s" in tty.getvalue()
    bar.message("conflict: something")
    assert "\r\x1b[2Kconflict: something\n" in tty.getvalue()
    bar.finish()
    assert tty.getvalue().endswith("done\n")
    log = io.StringIO()
    lines = Progress(log, tty=False, interval=0.0)
    lines.start("copy")
    lines.advance(10)
    lines.advance(10)
    lines.finish()
    text = log.getvalue()
    assert "\r" not in text and text.splitlines()[:2] == [line for line in text.splitlines()[:2] if "records" in line]
    assert "20 records" in text.splitlines()[-1]


def test_copy_reads_and_writes_in_pages_only(tmp_path: Path) -> None:
    """Memory stays flat: the source is read a page at a time, and Python's peak does not grow with the records."""
    import tracemalloc

    def peak(n: int) -> int:
        with ExitStack() as stack:
            src_url = f"file:{tmp_path / f'src{n}.db'}"
            dst_url = f"file:{tmp_path / f'dst{n}.db'}"
            src = stack.enter_context(workmem.connect(src_url))
            src.insert_resources(Resource(f"r{i:06d}", "x" * 200, None, T0, T0) for i in range(n // 10))
            src.insert_threads(Thread(f"t{i:06d}", f"r{i % (n // 10):06d}", "t" * 100, None, T0, T0) for i in range(n))
            dst = stack.enter_context(workmem.connect(dst_url))
            tracemalloc.start()
            try:
                assert workmem.copy(src, dst, page_size=200).ok
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    small, large = peak(1_000), peak(10_000)
    assert large < small * 2 + 200_000, (small, large)


# -- an interrupted copy ----------------------------------------------------------------------


def _thread_count(dst_url: str) -> int:
    import psycopg
    from servers import server_url

    schema = parse_qs(urlsplit(dst_url).query)["schema"][0]
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".mastra_threads',)).fetchone()
        if exists is None or exists[0] is None:
            return 0
        row = conn.execute(f'SELECT count(*) FROM "{schema}".mastra_threads').fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.backend("postgres")
def _settled_thread_count(url: str, *, quiet_s: float = 1.0, timeout_s: float = 30.0) -> int:
    """The thread count once it has not changed for ``quiet_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    count, since = _thread_count(url), time.monotonic()
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, "the thread count kept changing after the copy was killed"
        time.sleep(0.1)
        now = _thread_count(url)
        if now != count:
            count, since = now, time.monotonic()
    return count


def test_a_copy_killed_part_way_completes_when_run_again(tmp_path: Path) -> None:
    n_threads = 30_000
    src_url = f"file:{tmp_path / 'src.db'}"
    with workmem.connect(src_url) as src:
        src.insert_resources(Resource(f"r{i:05d}", f"memory {i}", {"i": i}, T0, T1) for i in range(1_000))
        src.insert_threads(
            Thread(f"t{i:06d}", f"r{i % 1_000:05d}", f"thread {i}", {"workingMemory": f"wm {i}"}, T0, T1)
            for i in range(n_threads)
        )
    command = [sys.executable, "-m", "workmem", "copy", src_url, "", "--page-size", "100"]
    with fresh_url("postgres") as dst_url:
        command[5] = dst_url
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
        try:
            deadline = time.monotonic() + 120
            while _thread_count(dst_url) < 2_000:
                assert process.poll() is None, "the copy ended before it could be killed: use more records"
                assert time.monotonic() < deadline
                time.sleep(0.02)
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=30) == -signal.SIGKILL
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()
        # A COMMIT the killed copy had sent may still be applied by the server after the kill: count once
        # the count has stopped moving.
        copied = _settled_thread_count(dst_url)
        assert 0 < copied < n_threads, copied
        second = subprocess.run([*command, "--verify"], capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        summary = second.stdout
        assert "resources: 1,000 skipped, 1,000 verified" in summary, summary
        assert f"{copied:,} skipped" in summary and f"{n_threads - copied:,} inserted" in summary, summary
        assert "problems: none" in summary
        assert _thread_count(dst_url) == n_threads


def test_sample_ids_sort_by_code_point() -> None:
    """The sample really exercises ordering: upper case before lower, astral after BMP."""
    ids = [r.id for r in sample()[0]]
    assert sorted(ids)[0] == "R-upper" and sorted(ids)[-1] == "r-😀"
    assert json.loads(record_line(sample()[0][2]))["metadata"] == {"nested": {"a": 0.1, "b": [1, 2.5, {"c": "ü"}]}}
