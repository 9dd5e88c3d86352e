"""workmem.conformance.table: merging conformance JSON reports into the Markdown compatibility table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workmem.conformance.report import CheckResult, Report
from workmem.conformance.table import ReportError, build_table, canonical_backend, load_report, main, render_markdown

CHECKS = [
    ("crud_roundtrip", "Saved records read back unchanged", True),
    ("merge_atomic", "Concurrent merges lose no key", True),
    ("cross_process", "Atomic across processes", False),
]


def report(
    backend: str,
    *,
    statuses: dict[str, tuple[str, str | None]] | None = None,
    url: str = "postgresql://postgres:***@localhost:5432/postgres",
    started_at: str = "2025-01-02T03:04:05Z",
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A report in the pinned format; every check passes unless ``statuses`` says otherwise."""
    statuses = statuses or {}
    checks = [
        {
            "name": name,
            "title": title,
            "required": required,
            "status": statuses.get(name, ("passed", None))[0],
            "reason": statuses.get(name, ("passed", None))[1],
            "duration_s": 0.25,
        }
        for name, title, required in CHECKS
        if name not in drop
    ]
    return {
        "workmem_version": "0.1.0",
        "backend": backend,
        "adapter": f"workmem.adapters.{backend}:Storage",
        "url": url,
        "profile": "ci",
        "started_at": started_at,
        "duration_s": 12.5,
        "passed": all(c["status"] != "failed" or not c["required"] for c in checks),
        "checks": checks,
    }


def write(directory: Path, name: str, data: dict[str, Any]) -> Path:
    path = directory / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def parse(markdown: str) -> dict[str, dict[str, str]]:
    """The table as ``{row head: {column label: cell}}``."""
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split(" | ")]
    table: dict[str, dict[str, str]] = {}
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip().removeprefix("| ").removesuffix(" |").split(" | ")]
        assert len(cells) == len(header), line
        table[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return table


def row(table: dict[str, dict[str, str]], check: str) -> dict[str, str]:
    (head,) = [h for h in table if h.startswith(f"`{check}`")]
    return table[head]


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    """Hand-written reports: libsql all green, postgres 17 with a failure and an optional skip, upstash an xfail;
    no mongodb and no oracle report at all."""
    write(tmp_path, "report-libsql-embedded-py3.12.json", report("file", url="file:/tmp/x.db"))
    write(
        tmp_path,
        "report-postgres-17-py3.12.json",
        report(
            "postgresql",
            statuses={
                "merge_atomic": ("failed", "lost key 'b' | after 3 rounds\nsecond line"),
                "cross_process": ("skipped", "needs a server reachable from a second process"),
            },
            started_at="2025-01-02T03:10:00Z",
        ),
    )
    write(
        tmp_path,
        "report-upstash-redis7-py3.12.json",
        report("upstash+http", statuses={"cross_process": ("xfailed", "bridge is single-threaded")}),
    )
    return tmp_path


def test_cells_say_exactly_what_each_report_says(reports: Path) -> None:
    loaded = [load_report(p) for p in sorted(reports.glob("*.json"))]
    markdown = render_markdown(build_table(loaded))
    table = parse(markdown)
    assert list(table["**Suite result**"]) == ["libsql", "postgres", "upstash", "mongodb", "oracle"]
    assert table["**Suite result**"]["libsql"] == "✅ passed (3/3)"
    assert table["**Suite result**"]["postgres"] == "❌ failed (1/3)"
    assert row(table, "crud_roundtrip") == {
        "libsql": "✅",
        "postgres": "✅",
        "upstash": "✅",
        "mongodb": "no report",
        "oracle": "no report",
    }
    merge = row(table, "merge_atomic")
    assert merge["postgres"] == "❌ lost key 'b' \\| after 3 rounds second line"
    cross = row(table, "cross_process")
    assert cross["postgres"] == "⏭ skipped (needs a server reachable from a second process)"
    assert cross["upstash"] == "⚠ xfail (bridge is single-threaded)"
    assert cross["libsql"] == "✅"


def test_a_missing_backend_is_never_shown_as_passing(reports: Path) -> None:
    table = parse(render_markdown(build_table(load_report(p) for p in reports.glob("*.json"))))
    for cells in table.values():
        assert cells["mongodb"] == "no report"
        assert cells["oracle"] == "no report"
    assert not build_table(load_report(p) for p in reports.glob("*.json")).ok


def test_rows_keep_the_suite_order_and_mark_optional_checks(reports: Path) -> None:
    markdown = render_markdown(build_table(load_report(p) for p in reports.glob("*.json")))
    heads = list(parse(markdown))[1:]
    assert [h.split("`")[1] for h in heads] == ["crud_roundtrip", "merge_atomic", "cross_process"]
    assert heads[2] == "`cross_process` — Atomic across processes *(optional)*"
    assert "*(optional)*" not in heads[0]


def test_footer_lists_every_source_with_its_timestamp(reports: Path) -> None:
    markdown = render_markdown(build_table(load_report(p) for p in reports.glob("*.json")))
    footer = markdown.split("Sources:", 1)[1]
    assert "`report-postgres-17-py3.12.json`: postgres" in footer
    assert "started 2025-01-02T03:10:00Z" in footer
    assert "`report-libsql-embedded-py3.12.json`: libsql" in footer
    assert "`report-upstash-redis7-py3.12.json`: upstash" in footer


def test_a_check_absent_from_one_report_is_not_run_there(tmp_path: Path) -> None:
    a = load_report(write(tmp_path, "report-postgres-17-py3.12.json", report("postgres")))
    b = load_report(write(tmp_path, "report-oracle-23-py3.12.json", report("oracle", drop=("cross_process",))))
    table = parse(render_markdown(build_table([a, b], expected=["postgres", "oracle"])))
    assert row(table, "cross_process") == {"postgres": "✅", "oracle": "— not run"}


def test_identical_pythons_merge_and_different_ones_split(tmp_path: Path) -> None:
    for py in ("3.11", "3.12", "3.13"):
        write(tmp_path, f"report-postgres-13-py{py}.json", report("postgres"))
    write(tmp_path, "report-postgres-17-py3.11.json", report("postgres"))
    write(
        tmp_path,
        "report-postgres-17-py3.13.json",
        report("postgres", statuses={"merge_atomic": ("failed", "boom")}),
    )
    loaded = [load_report(p) for p in sorted(tmp_path.glob("*.json"))]
    merged = parse(render_markdown(build_table(loaded, expected=["postgres"])))
    assert list(merged["**Suite result**"]) == [
        "postgres 13 (py3.11, 3.12, 3.13)",
        "postgres 17 (py3.11)",
        "postgres 17 (py3.13)",
    ]
    assert row(merged, "merge_atomic")["postgres 17 (py3.13)"] == "❌ boom"
    assert row(merged, "merge_atomic")["postgres 13 (py3.11, 3.12, 3.13)"] == "✅"
    split = parse(render_markdown(build_table(loaded, expected=["postgres"], merge=False)))
    assert len(split["**Suite result**"]) == 5


def test_one_report_per_backend_gives_a_plain_backend_column(tmp_path: Path) -> None:
    loaded = load_report(write(tmp_path, "report-mongodb-8.0-py3.12.json", report("mongodb")))
    assert (loaded.backend, loaded.version, loaded.python) == ("mongodb", "8.0", "3.12")
    table = parse(render_markdown(build_table([loaded], expected=["mongodb"])))
    assert list(table["**Suite result**"]) == ["mongodb"]


def test_backend_names_are_canonical() -> None:
    assert canonical_backend("postgresql") == "postgres"
    assert canonical_backend("postgresql+psycopg") == "postgres"
    assert canonical_backend("file") == "libsql"
    assert canonical_backend("upstash+https") == "upstash"
    assert canonical_backend("mongodb+srv") == "mongodb"
    assert canonical_backend("oracle+oracledb") == "oracle"
    assert canonical_backend("Oracle") == "oracle"
    assert canonical_backend("acme-db") == "acme-db"
    assert canonical_backend("memory") == "memory"  # the reference adapter keeps its scheme's name


def test_a_url_secret_never_reaches_the_table(tmp_path: Path) -> None:
    data = report("postgres", url="postgresql://postgres:hunter2@db:5432/postgres?token=s3cret")
    markdown = render_markdown(build_table([load_report(write(tmp_path, "r.json", data))]))
    assert "hunter2" not in markdown
    assert "s3cret" not in markdown
    assert "postgresql://postgres:***@db:5432/postgres?token=***" in markdown


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("passed"), "missing 'passed'"),
        (lambda d: d.update(passed="yes"), r"'passed' has the wrong type \(a JSON string\)"),
        (lambda d: d["checks"][0].update(status="ok"), "unknown status 'ok'"),
        (lambda d: d["checks"][1].pop("required"), "check 'merge_atomic': missing 'required'"),
        (lambda d: d["checks"][0].update(duration_s=True), "'duration_s' must be a number"),
        (lambda d: d["checks"].append(dict(d["checks"][0])), "a check name appears twice"),
        (lambda d: d.update(checks={}), r"'checks' has the wrong type \(a JSON object\)"),
        (lambda d: d.update(passed=False), "'passed' is false but its checks say true"),
    ],
)
def test_malformed_reports_are_rejected_naming_file_and_field(tmp_path: Path, mutate: Any, message: str) -> None:
    data = report("postgres")
    mutate(data)
    path = write(tmp_path, "bad.json", data)
    with pytest.raises(ReportError, match=message) as info:
        load_report(path)
    assert str(path) in str(info.value)


def test_not_json_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "report-x-1-py3.12.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ReportError, match="cannot read a JSON report"):
        load_report(path)


def test_cli_writes_the_file_and_exits_2_on_a_bad_report(
    reports: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "COMPATIBILITY.md"
    assert main([str(reports), "-o", str(out), "--title", "Backends"]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("## Backends\n")
    assert "| **Suite result** |" in text
    assert "wrote" in capsys.readouterr().err
    # --strict: mongodb and oracle have no report, postgres failed.
    assert main([str(reports), "-o", str(out), "--strict"]) == 1
    assert main([str(reports / "report-libsql-embedded-py3.12.json"), "--expect", "libsql", "--strict"]) == 0
    (reports / "broken.json").write_text("[]", encoding="utf-8")
    assert main([str(reports)]) == 2
    assert "broken.json: not a JSON object" in capsys.readouterr().err


def test_runs_as_python_dash_m(reports: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workmem.conformance.table", *sorted(str(p) for p in reports.glob("*.json"))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| `merge_atomic` — Concurrent merges lose no key |" in result.stdout
    assert result.stdout.count("no report") >= 2


def test_a_directory_is_searched_like_gh_run_download_lays_it_out(tmp_path: Path) -> None:
    for name, backend in (("report-postgres-17-py3.12", "postgresql"), ("report-oracle-23-py3.12", "oracle")):
        folder = tmp_path / name  # one folder per artifact
        folder.mkdir()
        write(folder, f"{name}.json", report(backend))
    out = tmp_path / "COMPATIBILITY.md"
    assert main([str(tmp_path), "-o", str(out), "--expect", "postgres", "--expect", "oracle", "--strict"]) == 0
    table = parse(out.read_text(encoding="utf-8"))
    assert table["**Suite result**"] == {"postgres": "✅ passed (3/3)", "oracle": "✅ passed (3/3)"}


def test_the_table_reads_a_report_through_the_report_type(tmp_path: Path) -> None:
    failed = CheckResult("merge_atomic", "Concurrent merges lose no key", True, "failed", "lost key 'b'", 0.5)
    skipped = CheckResult("cross_process", "Atomic across processes", False, "skipped", "no second process", 0.0)
    original = Report("0.1.0", "postgresql", "workmem.adapters.postgres:Storage", None, "ci", "2025-01-02", 1.0)
    original.checks.extend([failed, skipped])
    assert Report.from_dict(json.loads(json.dumps(original.to_dict()))) == original
    loaded = load_report(write(tmp_path, "report-postgres-17-py3.12.json", original.to_dict()))
    assert loaded.report == original
    assert (loaded.backend, loaded.version, loaded.python) == ("postgres", "17", "3.12")


@pytest.mark.parametrize("spelling", [["conformance", "table"], ["compat"]], ids=["conformance table", "compat"])
def test_workmem_conformance_table_writes_the_table_and_compat_is_its_former_name(
    reports: Path, tmp_path: Path, spelling: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from workmem.cli import main as workmem_main

    out = tmp_path / "COMPAT.md"
    assert workmem_main([*spelling, str(reports), "-o", str(out), "--title", "Backends"]) == 0
    assert out.read_text().startswith("## Backends")
    assert "workmem conformance table: wrote" in capsys.readouterr().err
