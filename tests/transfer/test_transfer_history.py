"""History on the move (issue 31): export format 2's version lines, one user's export, copy and import carrying it.

The reference adapter (``memory://NAME``, shared by name in the process) keeps history, as do the libSQL file and
PostgreSQL; a side without history is a store that cannot keep it (``tests/support/no_history.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import uuid
from pathlib import Path

import pytest
from backends import backend_url, fresh_url

import workmem
from tests.support.no_history import no_history_url
from workmem import MemoryStorage, Thread
from workmem.cli import main
from workmem.history import HistoryKey, MemoryVersion
from workmem.kit import run_sync
from workmem.timestamps import utc_now
from workmem.transfer import (
    TransferReport,
    copy,
    export_records,
    export_records_async,
    import_records,
    verify,
    versions,
)
from workmem.transfer.format import BadLine, parse_line, version_line

USER = "u1"

__all__ = ["backend_url"]


def named() -> str:
    return f"memory://transfer-history-{uuid.uuid4().hex}"


def filled(url: str) -> MemoryStorage:
    """Two users with history in both scopes, and a look-alike id (``u10``) that a per-user export leaves out."""
    storage = workmem.connect(url, history=True)
    storage.set_working_memory("# u1", scope="resource", resource_id=USER, source={"agent": "a", "n": [1, 2]})
    storage.merge_working_memory({"city": "Lyon"}, scope="resource", resource_id="u2")
    storage.update_resource("u10", working_memory="# u10")
    for tid, owner in (("t2", USER), ("t1", USER), ("t3", "u2"), ("t4", "u10")):
        storage.create_thread(Thread(tid, owner, f"{tid} of {owner}"))
        storage.set_working_memory('{"a":1}', scope="thread", resource_id=owner, thread_id=tid)
        storage.merge_working_memory({"b": 2}, scope="thread", resource_id=owner, thread_id=tid)
    storage.restore_working_memory(1, scope="thread", resource_id=USER, thread_id="t1", source={"agent": "undo"})
    return storage


def exported(storage: MemoryStorage, resource_id: str | None = None) -> list[dict[str, object]]:
    out = io.BytesIO()
    report = export_records(storage, out, resource_id=resource_id)
    assert report.ok, report.issues
    return [json.loads(line) for line in out.getvalue().decode("utf-8").splitlines()]


def history(storage: MemoryStorage, key: HistoryKey) -> list[MemoryVersion]:
    scope = "resource" if key.thread_id is None else "thread"
    return list(
        storage.working_memory_history(scope=scope, resource_id=key.resource_id, thread_id=key.thread_id).versions
    )


KEYS = [HistoryKey(USER), HistoryKey("u2"), HistoryKey("u10"), *(HistoryKey(o, t) for t, o in [("t1", USER)])]


def test_one_users_export_holds_its_records_and_history_and_nothing_else() -> None:
    with filled(named()) as storage:
        lines = exported(storage, USER)
    assert lines[0] == {"format": "workmem-export", "version": 2}
    kinds = [(line["kind"], line.get("id"), line.get("thread_id")) for line in lines[1:]]
    assert kinds == [
        ("resource", USER, None),
        ("thread", "t1", None),
        ("thread", "t2", None),
        ("version", None, None),
        ("version", None, "t1"),
        ("version", None, "t1"),
        ("version", None, "t1"),
        ("version", None, "t2"),
        ("version", None, "t2"),
    ]
    versions = [line for line in lines if line.get("kind") == "version"]
    assert {line["resource_id"] for line in versions} == {USER}
    first = versions[0]
    assert first == {
        "kind": "version",
        "resource_id": USER,
        "thread_id": None,
        "version": 1,
        "change": "set",
        "content": "# u1",
        "changed_at": first["changed_at"],
        "source": {"agent": "a", "n": [1, 2]},
    }
    restored = versions[3]
    assert (restored["version"], restored["change"]) == (3, "restore")
    assert restored["source"] == {"agent": "undo", "restoredFrom": 1}


def test_a_whole_export_round_trips_with_history_and_reimports_as_skipped() -> None:
    with filled(named()) as source, workmem.connect(named()) as target:
        out = io.BytesIO()
        export_records(source, out)
        lines = out.getvalue().splitlines(keepends=True)
        assert sum(b'"kind":"version"' in line for line in lines) == 3 + 4 * 2 + 1  # resources', threads', a restore
        report = import_records(target, io.BytesIO(out.getvalue()))
        assert report.ok and report.counts["version", "inserted"] == 12
        for key in [*KEYS, HistoryKey("u2", "t3"), HistoryKey("u10", "t4"), HistoryKey(USER, "t2")]:
            assert history(target, key) == history(source, key), key
        again = import_records(target, io.BytesIO(out.getvalue()))
        assert again.ok and again.counts["version", "skipped"] == 12 and again.counts["version", "inserted"] == 0
        reexported = io.BytesIO()
        export_records(target, reexported)
        assert reexported.getvalue() == out.getvalue()  # byte-identical, history included


def test_copy_carries_history_where_both_sides_keep_it_and_counts_it_dropped_elsewhere(tmp_path: Path) -> None:
    with filled(named()) as source, workmem.connect(named()) as target:
        report = copy(source, target)
        assert report.ok and report.counts["version", "inserted"] == 12
        assert history(target, HistoryKey(USER, "t1")) == history(source, HistoryKey(USER, "t1"))
        plain = no_history_url()
        report = copy(source, plain)
        assert report.ok and report.counts["version", "dropped"] == 12, report.summary()
        assert "versions: 12 dropped" in report.summary()
        back = copy(plain, target)  # a source without history gives none
        assert back.ok and not back.counts["version", "inserted"] and back.counts["resource", "skipped"] == 3


def test_an_import_into_a_store_without_history_keeps_the_records_and_drops_the_versions(tmp_path: Path) -> None:
    with filled(named()) as source:
        out = io.BytesIO()
        export_records(source, out, resource_id=USER)
    plain = no_history_url()
    report = import_records(plain, io.BytesIO(out.getvalue()))
    assert report.ok and report.counts["version", "dropped"] == 6 and report.counts["thread", "inserted"] == 2
    with workmem.connect(plain) as storage:
        assert storage.get_working_memory(scope="resource", resource_id=USER) == "# u1"
        lines = exported(storage)
    assert not [line for line in lines if line.get("kind") == "version"]  # no history: no version line


def test_version_1_exports_still_import_and_a_version_line_needs_version_2() -> None:
    v1 = b'{"format":"workmem-export","version":1}\n'
    record = b'{"kind":"resource","id":"r","working_memory":"x","metadata":null,'
    record += b'"created_at":"2025-01-02T03:04:05.678Z","updated_at":"2025-01-02T03:04:05.678Z"}\n'
    version = version_line(MemoryVersion("r", None, 1, "x", utc_now(), "set")).encode()
    with workmem.connect(named()) as target:
        report = import_records(target, io.BytesIO(v1 + record + version))
        assert report.counts["resource", "inserted"] == 1 and report.bad_lines == 1
        assert report.issues[0].line == 3 and '"kind" must be "resource" or "thread"' in report.issues[0].detail
        assert history(target, HistoryKey("r")) == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"change": "rewrite"}, "kind must be one of"),
        ({"version": 0}, "version must be an int from 1"),
        ({"version": True}, "version must be an integer"),
        ({"source": [1]}, "source must be a JSON object"),
        ({"content": "a\u0000b"}, "NUL"),
        ({"changed_at": "2025-01-02T03:04:05"}, "changed_at"),
        ({"extra": 1}, "unknown field(s) for a version: 'extra'"),
    ],
)
def test_a_bad_version_line_is_refused_with_the_reason(change: dict[str, object], reason: str) -> None:
    original = MemoryVersion("r", "t", 2, "x", utc_now(), "merge", {"a": 1})
    good = json.loads(version_line(original))
    assert parse_line(json.dumps(good).encode()) == original  # the line as written reads back
    with pytest.raises(BadLine) as refused:
        parse_line(json.dumps({**good, **change}).encode())
    assert reason.lower() in str(refused.value).lower(), str(refused.value)


def test_the_cli_exports_one_user(tmp_path: Path) -> None:
    url = named()
    with filled(url):
        target = tmp_path / "u1.jsonl"
        out, err = io.StringIO(), io.StringIO()
        assert main(["export", url, "--resource", USER, "-o", str(target)], out=out, err=err) == 0
        lines = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
        assert {line.get("id") for line in lines if line.get("kind") in ("resource", "thread")} == {USER, "t1", "t2"}
        assert "versions: 6 exported" in out.getvalue()
        assert main(["export", url, "--resource", "nobody"], out=(nobody := io.StringIO()), err=err) == 0
        assert nobody.getvalue() == '{"format":"workmem-export","version":2}\n'
        assert main(["export", url, "--resource", ""], out=io.StringIO(), err=(bad := io.StringIO())) == 2
        assert "resource id must not be empty" in bad.getvalue()


def test_copy_async_carries_history_too() -> None:
    import asyncio

    from workmem.transfer import copy_async

    url, target_url = named(), named()

    async def run() -> None:
        async with await workmem.connect_async(url) as source, await workmem.connect_async(target_url) as target:
            report = await copy_async(source, target)
            assert report.ok and report.counts["version", "inserted"] == 12

    with filled(url) as source:
        asyncio.run(run())
        with workmem.connect(target_url) as target:
            for key in [*KEYS, HistoryKey(USER, "t2")]:
                assert history(target, key) == history(source, key), key


def test_the_documented_version_line_is_a_canonical_line() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "export-format.md").read_text(encoding="utf-8")
    line = next(row for row in doc.splitlines() if row.startswith('{"kind":"version"'))
    parsed = parse_line(line.encode())
    assert isinstance(parsed, MemoryVersion) and parsed.kind == "merge" and parsed.thread_id == "thread-1"
    assert version_line(parsed) == line + "\n"


def test_versions_of_a_record_the_destination_lacks_or_gives_another_owner_are_not_imported() -> None:
    with filled(named()) as source:
        out = io.BytesIO()
        export_records(source, out, resource_id=USER)
    lines = out.getvalue().splitlines(keepends=True)
    without_t2 = b"".join(line for line in lines if b'"kind":"thread","id":"t2"' not in line)
    with workmem.connect(named(), history=True) as target:
        target.create_thread(Thread("t1", "someone-else"))  # the destination gives t1 to another resource
        report = import_records(target, io.BytesIO(without_t2))
        assert report.counts["thread", "conflict"] == 1
        assert report.counts["version", "inserted"] == 1  # the resource's own
        assert report.counts["version", "conflict"] == 3 + 2  # t1's (another owner) and t2's (no such thread)
        assert {issue.id for issue in report.issues} == {"t1", "t2"}
        assert history(target, HistoryKey("someone-else", "t1")) == []
        target.create_thread(Thread("t2", USER))  # a thread made later under that id starts without history
        assert history(target, HistoryKey(USER, "t2")) == []
        target.delete_thread("t1")
        target.create_thread(Thread("t1", USER))
        assert history(target, HistoryKey(USER, "t1")) == []


def test_one_users_export_through_the_async_api_is_the_sync_one() -> None:
    url = named()
    with filled(url) as source:
        out = io.BytesIO()
        export_records(source, out, resource_id=USER)

        async def main() -> bytes:
            async with await workmem.connect_async(url) as storage:
                awaited = io.BytesIO()
                report = await export_records_async(storage, awaited, resource_id=USER)
                assert report.ok
                return awaited.getvalue()

        assert asyncio.run(main()) == out.getvalue()
        assert b'"kind":"version"' in out.getvalue() and b'"u2"' not in out.getvalue()


def test_a_copy_reads_history_only_where_versions_are_and_never_an_orphans(
    backend_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that lists its versioned memories is not asked for the history of every record (one read per record
    made copying 100,000 threads from PostgreSQL five times slower); a version whose record is gone stays behind."""
    with workmem.connect(backend_url, history=True) as source, workmem.connect(named()) as target:
        for n in range(12):
            source.create_thread(Thread(f"plain-{n:02d}", f"r{n % 3}", "no working memory"))
        source.merge_working_memory({"a": 1}, scope="resource", resource_id="r1")
        source.create_thread(Thread("kept", "r2", "with working memory"))
        source.set_working_memory("# one", scope="thread", resource_id="r2", thread_id="kept")
        source.set_working_memory("# two", scope="thread", resource_id="r2", thread_id="kept")
        source.create_thread(Thread("a-thread", "a0", "owned by a resource sorted before r1"))
        source.set_working_memory("# a", scope="thread", resource_id="a0", thread_id="a-thread")
        orphan = MemoryVersion("gone", "t-gone", 1, "# orphan", utc_now(), "set", None)
        assert run_sync(source._insert_versions([orphan])) == 1
        asked: list[HistoryKey] = []
        real = source._history

        async def counted(key: HistoryKey, limit: int, before: int | None) -> list[MemoryVersion]:
            asked.append(key)
            return await real(key, limit, before)

        source._history = counted  # type: ignore[method-assign]
        monkeypatch.setattr(versions, "KEY_PAGE", 2)  # pages of two keys: the listing goes on from the last key
        report = copy(source, target)
        asked_by_copy = list(asked)
        assert report.ok, report.issues
        assert report.counts["version", "inserted"] == 4 and not report.counts["version", "conflict"]
        for key in (HistoryKey("r1"), HistoryKey("r2", "kept"), HistoryKey("a0", "a-thread")):
            assert history(target, key) == history(source, key)
        assert history(target, HistoryKey("gone", "t-gone")) == []
        assert exported(source) == exported(target)  # the export's order whether a store lists its keys or not
        listed = run_sync(source._versioned_keys(None, 10))
        if listed is not None:  # the store lists them: the two memories with a record, nothing else
            kept = [HistoryKey("r1"), HistoryKey("a0", "a-thread"), HistoryKey("r2", "kept")]
            assert set(listed) == {*kept, HistoryKey("gone", "t-gone")}
            assert asked_by_copy == kept  # resources by id, then threads by id: the export's order
        else:  # it cannot: every record's history is read
            assert len(asked_by_copy) == 1 + 14  # r1 (the merge made it) and the 14 threads


# -- verify compares the history too ------------------------------------------------------------------------------


def tamper(url: str, sql: str, params: tuple[object, ...]) -> None:
    """Run ``sql`` (``?`` parameters) on the history table of a libSQL file or PostgreSQL schema, behind workmem."""
    if url.startswith("file:"):
        from raw_sqlite import raw

        conn = raw(url.removeprefix("file:"))
        try:
            conn.execute(sql, params)
            assert conn.changes() == 1
        finally:
            conn.close()
        return
    import psycopg

    from workmem.adapters.postgres import parse_postgres_url

    conninfo, schema = parse_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        assert conn.execute(sql.replace("?", "%s"), params).rowcount == 1  # type: ignore[arg-type]


def alter_version(url: str, key: HistoryKey, number: int, content: str) -> None:
    if url.startswith("memory://"):
        with workmem.connect(url) as storage:
            kept = storage._store.history[key]  # type: ignore[attr-defined]
            kept[number - 1] = dataclasses.replace(kept[number - 1], content=content)
        return
    tamper(
        url,
        "UPDATE workmem_memory_history SET content = ? WHERE resource_id = ? AND scope = ? AND memory_id = ? "
        "AND version = ?",
        (content, key.resource_id, key.scope, key.memory_id, number),
    )


def delete_version(url: str, key: HistoryKey, number: int) -> None:
    if url.startswith("memory://"):
        with workmem.connect(url) as storage:
            history = storage._store.history  # type: ignore[attr-defined]
            history[key] = [v for v in history[key] if v.version != number]
        return
    tamper(
        url,
        "DELETE FROM workmem_memory_history WHERE resource_id = ? AND scope = ? AND memory_id = ? AND version = ?",
        (key.resource_id, key.scope, key.memory_id, number),
    )


def differences(report: TransferReport) -> list[str]:
    return sorted(str(issue) for issue in report.issues)


SIDES = [pytest.param(name, id=name, marks=pytest.mark.backend(name)) for name in ("memory", "libsql", "postgres")]


@pytest.mark.parametrize("backend", SIDES)
def test_verify_reports_each_version_the_destination_lost_altered_or_gained(backend: str) -> None:
    source_url = named()
    with filled(source_url) as source, fresh_url(backend) as target_url:
        source.create_thread(Thread("t5", USER, "no working memory: no history"))
        report = copy(source, target_url, verify=True)
        assert report.ok, report.issues
        assert report.counts["version", "inserted"] == 12 and report.counts["version", "verified"] == 12
        clean = verify(source, target_url)
        assert clean.ok and clean.counts["version", "verified"] == 12 and not clean.notes, clean.issues

        alter_version(target_url, HistoryKey(USER, "t1"), 2, '{"a":1,"b":3}')
        altered = verify(source, target_url)
        assert differences(altered) == [
            "difference: thread 't1': working memory version 2 (thread scope, resource 'u1'): "
            'content "{\\"a\\":1,\\"b\\":2}" in the source, "{\\"a\\":1,\\"b\\":3}" in the destination'
        ]
        assert altered.differences == 1 and altered.counts["version", "verified"] == 11

        delete_version(target_url, HistoryKey("u2"), 1)  # u2's only version: no history of u2 left there
        delete_version(target_url, HistoryKey(USER, "t2"), 2)
        with workmem.connect(target_url) as target:
            extra = MemoryVersion(USER, "t5", 1, "# only here", utc_now(), "set", {"agent": "x"})
            newer = MemoryVersion(USER, None, 2, "# newer", utc_now(), "set", None)
            assert run_sync(target._insert_versions([extra, newer])) == 2
        changed = verify(source, target_url)
        assert differences(changed) == [
            "difference: resource 'u1': working memory version 2 (resource scope): only in the destination",
            "difference: resource 'u2': working memory version 1 (resource scope): missing in the destination",
            "difference: thread 't1': working memory version 2 (thread scope, resource 'u1'): "
            'content "{\\"a\\":1,\\"b\\":2}" in the source, "{\\"a\\":1,\\"b\\":3}" in the destination',
            "difference: thread 't2': working memory version 2 (thread scope, resource 'u1'): "
            "missing in the destination",
            "difference: thread 't5': working memory version 1 (thread scope, resource 'u1'): only in the destination",
        ]
        assert changed.differences == 5 and changed.counts["version", "verified"] == 9
        assert "problems: 5 differences" in changed.summary()

        out = io.StringIO()
        assert main(["copy", source_url, target_url, "--verify"], out=out, err=io.StringIO()) == 1
        printed = out.getvalue()  # the copy put back what was lost; what was altered or added stays
        assert printed.count("difference: ") == 3 and "versions: 2 inserted, 10 skipped, 11 verified" in printed


def test_verify_compares_versions_alike_where_a_store_cannot_list_its_versioned_memories() -> None:
    """The merge of both sides' keys holds when one side lists every record (no ``_versioned_keys``)."""
    with filled(named()) as source, workmem.connect(named()) as target:
        first = history(source, HistoryKey(USER))[-1]
        other = dataclasses.replace(first, kind="import", source={"agent": "b"})  # there before the copy: kept
        assert run_sync(target._insert_versions([other])) == 1
        assert copy(source, target).ok
        assert run_sync(target._insert_versions([MemoryVersion("u10", None, 7, "x", utc_now(), "set")])) == 1

        async def unlisted(after: HistoryKey | None, limit: int) -> list[HistoryKey] | None:
            return None

        for side in (source, target):
            side._versioned_keys = unlisted  # type: ignore[method-assign]
            report = verify(source, target)
            assert differences(report) == [
                "difference: resource 'u1': working memory version 1 (resource scope): change \"set\" in the source, "
                '"import" in the destination; source {"agent": "a", "n": [1, 2]} in the source, {"agent": "b"} in the '
                "destination",
                "difference: resource 'u10': working memory version 7 (resource scope): only in the destination",
            ]
            assert report.counts["version", "verified"] == 11


def test_verify_where_one_side_keeps_no_history_says_so_once_and_stays_clean() -> None:
    source_url = named()
    with filled(source_url) as source:
        plain = no_history_url()
        assert copy(source, plain).counts["version", "dropped"] == 12
        there = verify(source, plain)
        assert there.ok and not there.counts["version", "verified"], there.issues
        assert there.notes == ["the source keeps working memory's history and the destination cannot: versions not "
                               "compared"]  # fmt: skip
        assert there.summary().endswith(f"\nnote: {there.notes[0]}")
        back = verify(plain, source)
        assert back.ok and back.notes == [
            "the destination keeps working memory's history and the source cannot: versions not compared"
        ]
    out = io.StringIO()
    assert main(["copy", source_url, plain, "--verify"], out=out, err=io.StringIO()) == 0
    assert out.getvalue().count("note: the source keeps working memory's history") == 1, out.getvalue()
