"""What is already stored decides nothing by accident: odd timestamps, odd working memory, records of other programs.

Each test goes through the public API on every backend it applies to. Records
"written by another program" are written with the backend's own driver (the
``libsql`` wheel, psycopg, the Upstash REST client), as that program would.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from backends import backend_url, shared_bridge

import workmem
from workmem.errors import WorkingMemoryFormatError
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage

__all__ = ["backend_url"]

NEVER = datetime.min.replace(tzinfo=UTC)
"""A common "never": 0001-01-01T00:00:00Z."""
BEFORE_1000 = datetime(999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
RAW_BACKENDS = ("libsql", "postgres", "upstash")
"""Backends whose records a test writes with the raw driver, as another program would."""


def backend_of(url: str) -> str:
    for prefix, name in (("memory:", "memory"), ("file:", "libsql"), ("postgres", "postgres"), ("upstash", "upstash")):
        if url.startswith(prefix):
            return name
    return url.partition(":")[0]


@dataclass
class Raw:
    """Writes records with the backend's own driver, the way another program (Mastra) would."""

    backend: str
    storage: MemoryStorage

    def thread(self, doc: dict[str, Any]) -> None:
        """A thread with Mastra's field names; values are written as given (text, or JSON text for metadata)."""
        self._write("mastra_threads", ("id", "resourceId", "title", "metadata", "createdAt", "updatedAt"), doc)

    def resource(self, doc: dict[str, Any]) -> None:
        self._write("mastra_resources", ("id", "workingMemory", "metadata", "createdAt", "updatedAt"), doc)

    def _write(self, table: str, columns: tuple[str, ...], doc: dict[str, Any]) -> None:
        if self.backend == "upstash":
            from upstash_fixtures import raw_client

            keys = self.storage.keys  # type: ignore[attr-defined]
            key = keys.thread(doc["id"]) if table == "mastra_threads" else keys.resource(doc["id"])
            client: Any = raw_client(shared_bridge())
            try:
                client.set(key, json.dumps(doc))
            finally:
                client.close()
            return
        values = [doc.get(column) for column in columns]
        names = ", ".join(f'"{column}"' for column in columns)
        if self.backend == "libsql":
            from raw_sqlite import raw

            conn = raw(self.storage._database)  # type: ignore[attr-defined]
            try:
                conn.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})", values)
            finally:
                conn.close()
        elif self.backend == "postgres":
            import psycopg

            dialect = self.storage.dialect  # type: ignore[attr-defined]
            target = dialect.threads if table == "mastra_threads" else dialect.resources
            marks = ", ".join("%s::jsonb" if c == "metadata" else "%s" for c in columns)
            with psycopg.connect(self.storage._settings.conninfo, autocommit=True) as conn:  # type: ignore[attr-defined]
                conn.execute(f"INSERT INTO {target} ({names}) VALUES ({marks})", values)  # type: ignore[arg-type]
        else:
            raise AssertionError(f"no raw writer for {self.backend}")


@contextlib.contextmanager
def opened(url: str) -> Iterator[tuple[MemoryStorage, Raw]]:
    with workmem.connect(url) as storage:
        yield storage, Raw(backend_of(url), storage)


def raw_only(url: str) -> None:
    if backend_of(url) not in RAW_BACKENDS:
        pytest.skip(f"no raw driver writes for {backend_of(url)} in this test")


# -- item 5: timestamps before year 1000 ----------------------------------------------------


def test_timestamps_before_year_1000_read_back(backend_url: str) -> None:
    with workmem.connect(backend_url) as storage:
        resource = storage.save_resource(Resource("r-old", "notes", {"k": 1}, NEVER, BEFORE_1000))
        assert storage.get_resource("r-old") == resource
        old = storage.save_thread(Thread("t-old", "r-old", "old", None, NEVER, BEFORE_1000))
        new = storage.save_thread(Thread("t-new", "r-old", "new"))
        page = storage.list_threads("r-old", order_by="created_at", direction="asc")
        assert [t.id for t in page.threads] == ["t-old", "t-new"]
        assert page.threads[0].created_at == NEVER and page.threads[0].updated_at == BEFORE_1000
        assert storage.get_thread("t-old") == old
        assert storage.get_thread("t-new") == new
        updated = storage.update_resource("r-old", metadata={"k": 2})
        assert updated.created_at == NEVER


@pytest.mark.parametrize("backend", ["libsql", "upstash"])
def test_stored_stamps_use_four_digit_years(backend: str) -> None:
    """The text form is JavaScript's ``toISOString()``: ``0001-01-01T00:00:00.000Z``."""
    from backends import fresh_url

    with fresh_url(backend) as url, opened(url) as (storage, _):
        storage.save_thread(Thread("t-old", "r-old", "", None, NEVER, BEFORE_1000))
        if backend == "libsql":
            from raw_sqlite import raw

            conn = raw(storage._database)  # type: ignore[attr-defined]
            try:
                stamps = conn.execute('SELECT "createdAt", "updatedAt" FROM mastra_threads').fetchall()[0]
            finally:
                conn.close()
        else:
            from upstash_fixtures import raw_client

            client: Any = raw_client(shared_bridge())
            try:
                doc = json.loads(client.get(storage.keys.thread("t-old")))  # type: ignore[attr-defined]
            finally:
                client.close()
            stamps = (doc["createdAt"], doc["updatedAt"])
        assert tuple(stamps) == ("0001-01-01T00:00:00.000Z", "0999-12-31T23:59:59.999Z")


def test_stamps_written_with_short_years_still_read(backend_url: str) -> None:
    """Rows an earlier workmem wrote as ``1-01-01T…`` read as year 1; the list around them stays readable."""
    raw_only(backend_url)
    with opened(backend_url) as (storage, raw):
        if raw.backend == "postgres":
            pytest.skip("PostgreSQL keeps timestamps as timestamp columns, never as text")
        storage.save_thread(Thread("t-fine", "r-short", "fine"))
        raw.thread(
            {
                "id": "t-short",
                "resourceId": "r-short",
                "title": "short",
                "metadata": None,
                "createdAt": "1-01-01T00:00:00.000Z",
                "updatedAt": "999-12-31T23:59:59.999Z",
            }
        )
        raw.resource({"id": "r-short", "createdAt": "1-01-01T00:00:00.000Z", "updatedAt": "1-01-01T00:00:00.000Z"})
        if raw.backend == "upstash":
            storage.reindex()  # type: ignore[attr-defined]
        thread = storage.get_thread("t-short")
        assert thread is not None and thread.created_at == NEVER and thread.updated_at == BEFORE_1000
        resource = storage.get_resource("r-short")
        assert resource is not None and resource.created_at == NEVER
        page = storage.list_threads("r-short", order_by="created_at", direction="asc")
        assert [t.id for t in page.threads] == ["t-short", "t-fine"]


def test_a_stamp_before_year_1_in_utc_is_refused() -> None:
    """``datetime.min`` at UTC+05:00 is before year 1 in UTC: a ValidationError, not an OverflowError."""
    from datetime import timedelta, timezone

    from workmem.errors import ValidationError

    with pytest.raises(ValidationError, match="outside years 1 to 9999"):
        Thread("t", "r", created_at=datetime.min.replace(tzinfo=timezone(timedelta(hours=5))))


def test_oracle_stamps_use_four_digit_years() -> None:
    """Oracle's bind text (no server needed): ``TO_TIMESTAMP_TZ`` gets the year as four digits."""
    from workmem.adapters.oracle.dialect import encode_timestamp

    assert encode_timestamp(NEVER) == "0001-01-01 00:00:00.000 +00:00"
    assert encode_timestamp(BEFORE_1000) == "0999-12-31 23:59:59.999 +00:00"


# -- items 4 and 6: stored working memory that cannot be merged ------------------------------

PYTHON_TYPE_NAMES = re.compile(r"\b(dict|list|tuple|str|int|float|bool|NoneType)\b")


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


STORED_UNMERGEABLE = {
    "100 000 [": "[" * 100_000,
    '100 000 {"a":': '{"a":' * 100_000,
    "100 000 levels, closed": _deep(100_000),
    "33 levels": _deep(32),
    "1e400": '{"a": 1e400}',
    "-1e400 in a list": '{"a": [1, -1e400]}',
    "NaN": '{"a": NaN}',
    "2**53": '{"a": 9007199254740992}',
    "-(2**53 + 1)": '{"a": -9007199254740993}',
    "10**30 nested": '{"a": {"b": 1000000000000000000000000000000}}',
    "\\u0000": '{"a": "x\\u0000"}',
    "\\u0000 in a key": '{"x\\u0000": 1}',
    "lone surrogate escape": '{"a": "\\ud800"}',
    "lone low surrogate in a nested key": '{"a": {"\\udfff": 1}}',
    "duplicate keys": '{"a": 1, "a": 2}',
    "duplicate keys, spaced": '{"a": 1, "a" : 2}',
    "nested duplicate keys": '{"x": [{"a": 1, "a": 1}]}',
    "an array": "[1, 2]",
    "a string": '"text"',
    "null": "null",
    "not JSON": "# Notes\n- likes tea",
}


def _merge(storage: MemoryStorage, scope: str) -> dict[str, Any]:
    if scope == "resource":
        return storage.merge_working_memory({"new": 1}, scope="resource", resource_id="r-stored")
    return storage.merge_working_memory({"new": 1}, scope="thread", thread_id="t-stored", resource_id="r-stored")


def _stored(storage: MemoryStorage, scope: str) -> str | None:
    if scope == "resource":
        return storage.get_working_memory(scope="resource", resource_id="r-stored")
    return storage.get_working_memory(scope="thread", thread_id="t-stored")


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_unmergeable_stored_memory_is_a_format_error(backend_url: str, scope: str) -> None:
    """Every case, every backend: WorkingMemoryFormatError, nothing changed, a message in JSON's terms."""
    with workmem.connect(backend_url) as storage:
        storage.save_thread(Thread("t-stored", "r-stored", "stored"))
        outcomes: dict[str, str] = {}
        for name, text in STORED_UNMERGEABLE.items():
            storage.set_working_memory(text, scope=scope, resource_id="r-stored", thread_id="t-stored")  # type: ignore[arg-type]
            try:
                merged = _merge(storage, scope)
            except WorkingMemoryFormatError as exc:
                outcome = "format error"
                if PYTHON_TYPE_NAMES.search(str(exc)):
                    outcome += f" naming a Python type: {exc}"
            except Exception as exc:  # every other outcome is reported below
                outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
            else:
                outcome = f"merged: {str(merged)[:100]}"
            if _stored(storage, scope) != text:
                outcome += ", and the stored text changed"
            outcomes[name] = outcome
        assert outcomes == dict.fromkeys(STORED_UNMERGEABLE, "format error")


STORED_MERGEABLE = {
    "-0.0 reads as 0.0": (
        '{"a": -0.0, "b": [-0.0, -0], "c": {"d": -0.0e3}}',
        {"a": 0.0, "b": [0.0, 0], "c": {"d": 0.0}},
    ),
    "2**53 - 1 stays an int": ('{"a": 9007199254740991, "b": -9007199254740991}', {"a": 2**53 - 1, "b": -(2**53 - 1)}),
    "exponents are floats": ('{"a": 1e5, "b": 1.5E-3, "c": 2e+2}', {"a": 100000.0, "b": 0.0015, "c": 200.0}),
    "pretty-printed": ('{\n  "a": [\n    1,\n    {"b" : true}\n  ]\n}', {"a": [1, {"b": True}]}),
    "escapes": ('{"a": "\\u00e9\\ud83d\\ude00\\n", "\\u0041": 1}', {"a": "é😀\n", "A": 1}),
    "32 levels": (_deep(31), json.loads(_deep(31))),
    "the same key in different objects": ('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}', None),
}


def _exact(value: Any) -> Any:
    """A comparable form that tells 1 from 1.0 and -0.0 from 0.0."""
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v) for v in value]
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


@pytest.mark.parametrize("scope", ["resource", "thread"])
@pytest.mark.parametrize("name", list(STORED_MERGEABLE))
def test_odd_but_valid_stored_memory_merges_alike(backend_url: str, scope: str, name: str) -> None:
    text, value = STORED_MERGEABLE[name]
    expected = {**(json.loads(text) if value is None else value), "new": 1}
    with workmem.connect(backend_url) as storage:
        storage.save_thread(Thread("t-stored", "r-stored", "stored"))
        storage.set_working_memory(text, scope=scope, resource_id="r-stored", thread_id="t-stored")  # type: ignore[arg-type]
        merged = _merge(storage, scope)
        assert _exact(merged) == _exact(expected)
        assert _exact(json.loads(_stored(storage, scope) or "")) == _exact(expected)


@pytest.mark.backend("postgres")
def test_postgres_merges_plain_memory_in_one_statement() -> None:
    """The exact check is for odd text only: plain JSON (what workmem and JSON.stringify write) merges in SQL."""
    import psycopg
    from postgres_schemas import fresh_schema_url

    with fresh_schema_url() as url, workmem.connect(url) as storage:
        merge = f"{storage.dialect._prefix}.workmem_merge_document"  # type: ignore[attr-defined]
        with psycopg.connect(storage._settings.conninfo, autocommit=True) as conn:  # type: ignore[attr-defined]

            def run(stored: str) -> str:
                return str(conn.execute(f"SELECT {merge}(%s, '{{\"n\":1}}')", [stored]).fetchone()[0])  # type: ignore[index]

            plain = '{"name":"Sam","born":"2001-02-03","tags":["a","b"],"n":{"x":1.5,"y":-3,"z":0}}'
            assert json.loads(run(plain)) == {**json.loads(plain), "n": 1}
            assert json.loads(run('{\n  "a": [\n    1,\n    2\n  ]\n}')) == {"a": [1, 2], "n": 1}
            for odd in ('{"a":1,"a":2}', '{"a":"\\u00e9"}', '{"a":1e5}', '{"a":-0.0}', '{"a":12345678901234567}'):
                with pytest.raises(psycopg.Error) as raised:
                    run(odd)
                assert raised.value.sqlstate == "WM004", odd


# -- item 15: pages far past the end ---------------------------------------------------------


def test_a_page_far_past_the_end_is_empty(backend_url: str) -> None:
    with workmem.connect(backend_url) as storage:
        storage.save_thread(Thread("t-page", "r-page"))
        for page, per_page in ((10**18, 100), (10**18, 10**18), (0, 10**30), (2**63, 1), (10**40, 10**40)):
            result = storage.list_threads("r-page", page=page, per_page=per_page)
            expected = ["t-page"] if page == 0 else []
            assert ([t.id for t in result.threads], result.total, result.has_more) == (expected, 1, False), (
                page,
                per_page,
            )


@contextlib.contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """The URL of a new random database on the test server, dropped (with anything in it) afterwards."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from servers import server_url

    server = server_url("postgres")
    name = f"wm_sys_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(server)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.backend("postgres")
@pytest.mark.parametrize("schema", ["information_schema", "pg_catalog", "pg_temp", "pg_toast", "PG_Catalog"])
def test_postgres_system_schemas_are_refused(schema: str) -> None:
    """Refused before anything is created (checked in a database of the test's own, dropped afterwards)."""
    import psycopg

    from workmem.errors import ValidationError

    with fresh_postgres_database() as url:
        with pytest.raises(ValidationError, match="system schema"):
            workmem.connect(f"{url}?schema={schema}").close()
        with pytest.raises(ValidationError, match="system schema"):
            from workmem.adapters.postgres.storage import PostgresStorage

            PostgresStorage(url, schema=schema).close()
        with psycopg.connect(url, autocommit=True) as conn:
            made = conn.execute(
                "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relname LIKE 'mastra%%' OR c.relname LIKE 'workmem%%' "
                "UNION ALL SELECT n.nspname, p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE p.proname LIKE 'workmem%%'"
            ).fetchall()
        assert made == []


# -- item 10: records written by other programs ----------------------------------------------

STAMP = "2025-01-02T03:04:05.678Z"


def _thread_doc(thread_id: str, owner: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": thread_id,
        "resourceId": owner,
        "title": "",
        "metadata": None,
        "createdAt": STAMP,
        "updatedAt": STAMP,
    } | fields


def _metadata(raw: Raw, value: Any) -> Any:
    """Metadata as each program stores it: JSON text in a column, a native value in an Upstash thread document."""
    return value if raw.backend == "upstash" else json.dumps(value)


def test_a_long_title_another_program_wrote_reads(backend_url: str) -> None:
    """Mastra has no title limit: a 2 000-byte title reads back, in get, list and reindex."""
    raw_only(backend_url)
    title = "é" * 1000 + "x" * 100
    with opened(backend_url) as (storage, raw):
        raw.thread(_thread_doc("t-long", "r-long", title=title))
        if raw.backend == "upstash":
            assert storage.reindex().threads == 1  # type: ignore[attr-defined]
        thread = storage.get_thread("t-long")
        assert thread is not None and thread.title == title
        page = storage.list_threads("r-long")
        assert [t.title for t in page.threads] == [title] and page.unreadable == ()


def _unreadable_threads(raw: Raw) -> dict[str, dict[str, Any]]:
    docs = {
        "t-meta-array": _thread_doc("t-meta-array", "r-odd", metadata=_metadata(raw, [1, 2])),
        "t-meta-number": _thread_doc("t-meta-number", "r-odd", metadata=_metadata(raw, 7)),
    }
    if raw.backend != "postgres":  # PostgreSQL's timestamp columns hold only dates
        docs["t-bad-stamp"] = _thread_doc("t-bad-stamp", "r-odd", createdAt="yesterday")
    return docs


def test_an_unreadable_thread_fails_alone(backend_url: str) -> None:
    """get_thread raises UnreadableRecordError for it; a list reports its id and returns every other thread."""
    raw_only(backend_url)
    from workmem.errors import UnreadableRecordError

    with opened(backend_url) as (storage, raw):
        docs = _unreadable_threads(raw)
        for thread_id in docs:  # written (and indexed) by workmem first, then rewritten by another program
            storage.save_thread(Thread(thread_id, "r-odd", "fine", None, datetime(2025, 1, 1, tzinfo=UTC)))
        storage.save_thread(Thread("t-fine-1", "r-odd", "one", None, datetime(2024, 1, 1, tzinfo=UTC)))
        storage.save_thread(Thread("t-fine-2", "r-odd", "two", None, datetime(2026, 1, 1, tzinfo=UTC)))
        for doc in docs.values():
            if raw.backend != "upstash":  # a row is rewritten whole; Upstash keeps workmem's index entry
                storage.delete_thread(doc["id"])
            raw.thread(doc)
        for thread_id in docs:
            with pytest.raises(UnreadableRecordError) as raised:
                storage.get_thread(thread_id)
            assert raised.value.record_id == thread_id and raised.value.kind == "thread"
            assert not PYTHON_TYPE_NAMES.search(str(raised.value)), str(raised.value)
        page = storage.list_threads("r-odd", direction="asc")
        assert [t.id for t in page.threads] == ["t-fine-1", "t-fine-2"]
        assert sorted(page.unreadable) == sorted(docs)
        assert page.total == 2 + len(docs) and not page.has_more
        first = storage.list_threads("r-odd", per_page=1, direction="asc")
        assert [t.id for t in first.threads] == ["t-fine-1"] and first.unreadable == () and first.has_more
        assert storage.get_thread("t-fine-2") is not None


def test_an_unreadable_resource_fails_alone(backend_url: str) -> None:
    raw_only(backend_url)
    from workmem.errors import UnreadableRecordError

    with opened(backend_url) as (storage, raw):
        bad = json.dumps([1, 2])  # resource metadata is JSON text on every backend (Upstash too, as Mastra writes it)
        raw.resource({"id": "r-bad", "workingMemory": "{}", "metadata": bad, "createdAt": STAMP, "updatedAt": STAMP})
        storage.update_resource("r-good", working_memory="ok")
        with pytest.raises(UnreadableRecordError) as raised:
            storage.get_resource("r-bad")
        assert raised.value.record_id == "r-bad" and raised.value.kind == "resource"
        if raw.backend == "postgres":  # the one-statement merge touches only the working memory column
            assert storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r-bad") == {"a": 1}
        else:  # a read-modify-write of the whole record: refused, nothing changed
            with pytest.raises(UnreadableRecordError):
                storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r-bad")
        assert storage.get_working_memory(scope="resource", resource_id="r-good") == "ok"


@pytest.mark.backend("upstash")
def test_reindex_skips_and_reports_what_it_cannot_read() -> None:
    from backends import fresh_url
    from upstash_fixtures import raw_client

    with fresh_url("upstash") as url, opened(url) as (storage, raw):
        raw.thread(_thread_doc("t-ok", "r-x"))
        raw.thread(_thread_doc("t-meta", "r-x", metadata=[1]))
        raw.thread(_thread_doc("t-stamp", "r-x", createdAt="yesterday"))
        raw.thread({"id": "t-no-owner", "title": "x"})
        client: Any = raw_client(shared_bridge())
        try:
            client.set(storage.keys.thread("t-not-json"), "{not json")  # type: ignore[attr-defined]
        finally:
            client.close()
        result = storage.reindex()  # type: ignore[attr-defined]
        assert result.threads == 1
        assert sorted(result.unreadable) == ["t-meta", "t-no-owner", "t-not-json", "t-stamp"]
        assert [t.id for t in storage.list_threads("r-x").threads] == ["t-ok"]


@pytest.mark.backend("libsql")
def test_libsql_metadata_that_is_not_json_fails_alone() -> None:
    """A TEXT metadata column holding text that is not JSON: that thread is unreadable, the list still reads."""
    from backends import fresh_url

    from workmem.errors import UnreadableRecordError

    with fresh_url("libsql") as url, opened(url) as (storage, raw):
        storage.save_thread(Thread("t-fine", "r-text", "fine", {"k": [1, {"v": "x"}]}))
        raw.thread(_thread_doc("t-text", "r-text", metadata="{not json"))
        raw.thread(_thread_doc("t-json5", "r-text", metadata="{k: 'json5', n: +1,}"))  # json() reads JSON5
        raw.resource({"id": "r-text", "metadata": "[[[", "createdAt": STAMP, "updatedAt": STAMP})
        page = storage.list_threads("r-text", direction="asc")
        assert sorted(t.id for t in page.threads) == ["t-fine", "t-json5"] and page.unreadable == ("t-text",)
        assert storage.get_thread("t-fine").metadata == {"k": [1, {"v": "x"}]}  # type: ignore[union-attr]
        assert storage.get_thread("t-json5").metadata == {"k": "json5", "n": 1}  # type: ignore[union-attr]
        for read in (lambda: storage.get_thread("t-text"), lambda: storage.get_resource("r-text")):
            with pytest.raises(UnreadableRecordError):
                read()


def test_mongodb_documents_of_other_programs_code_path() -> None:
    """FAKE (mongomock, code paths only): a long title reads, an unreadable document fails alone."""
    import uuid

    mongomock = pytest.importorskip("mongomock")
    from workmem.adapters.mongodb.storage import MongoStorage
    from workmem.errors import UnreadableRecordError

    client = mongomock.MongoClient(tz_aware=True)
    try:
        storage = MongoStorage(client, f"fake_{uuid.uuid4().hex}")
        threads = client[storage.database]["mastra_threads"]
        when = datetime(2025, 1, 2, tzinfo=UTC)
        title = "x" * 2000
        threads.insert_one({"id": "t-long", "resourceId": "r-m", "title": title, "createdAt": when, "updatedAt": when})
        threads.insert_one({"id": 42, "resourceId": "r-m", "title": "", "createdAt": when, "updatedAt": when})
        threads.insert_one({"id": "t-no-owner", "title": ""})
        assert storage.get_thread("t-long").title == title  # type: ignore[union-attr]
        with pytest.raises(UnreadableRecordError):
            storage.get_thread("t-no-owner")
        page = storage.list_threads("r-m")
        assert [t.id for t in page.threads] == ["t-long"] and page.unreadable == ("42",)
    finally:
        client.close()


def test_an_unreadable_thread_can_be_deleted(backend_url: str) -> None:
    """What cannot be read can still be removed through workmem: it leaves the list and its count."""
    raw_only(backend_url)
    with opened(backend_url) as (storage, raw):
        storage.save_thread(Thread("t-gone", "r-del", "fine"))
        storage.save_thread(Thread("t-stays", "r-del", "fine"))
        if raw.backend != "upstash":
            storage.delete_thread("t-gone")
        raw.thread(_thread_doc("t-gone", "r-del", metadata=_metadata(raw, [1])))
        assert storage.list_threads("r-del").unreadable == ("t-gone",)
        assert storage.delete_thread("t-gone") is True
        assert storage.get_thread("t-gone") is None and storage.delete_thread("t-gone") is False
        page = storage.list_threads("r-del")
        assert ([t.id for t in page.threads], page.unreadable, page.total) == (["t-stays"], (), 1)


@pytest.mark.backend("upstash")
def test_upstash_a_document_that_is_not_json_can_be_deleted() -> None:
    from backends import fresh_url
    from upstash_fixtures import raw_client

    with fresh_url("upstash") as url, opened(url) as (storage, _):
        client: Any = raw_client(shared_bridge())
        try:
            client.set(storage.keys.thread("t-garbage"), "{not json")  # type: ignore[attr-defined]
        finally:
            client.close()
        assert storage.delete_thread("t-garbage") is True
        assert storage.get_thread("t-garbage") is None


def test_messages_name_json_types(backend_url: str) -> None:
    """A wrong type is named as JSON names it (string, number, array, object, null), never dict/list/str/NoneType."""
    from workmem.errors import ValidationError

    with workmem.connect(backend_url) as storage:
        calls = [
            (lambda: storage.update_resource("r", working_memory=5), "must be a string, got number"),  # type: ignore[arg-type]
            (lambda: storage.update_resource("r", metadata=[1]), "must be a JSON object, got array"),  # type: ignore[arg-type]
            (lambda: storage.update_thread("t", metadata="x"), "must be a JSON object, got string"),  # type: ignore[arg-type]
            (lambda: storage.get_thread(None), "must be a string, got null"),  # type: ignore[arg-type]
            (lambda: storage.get_resource({"id": 1}), "must be a string, got object"),  # type: ignore[arg-type]
            (lambda: storage.merge_working_memory([], scope="resource", resource_id="r"), "got array"),  # type: ignore[arg-type]
        ]
        for call, message in calls:
            with pytest.raises(ValidationError) as raised:
                call()
            assert message in str(raised.value) and not PYTHON_TYPE_NAMES.search(str(raised.value)), str(raised.value)


def test_a_thread_with_a_long_title_from_another_program_can_be_updated(backend_url: str) -> None:
    """Metadata updates and thread-scope merges keep the stored title; only a new title must be within the limit."""
    from workmem.errors import ValidationError

    raw_only(backend_url)
    title = "t" * 1500
    with opened(backend_url) as (storage, raw):
        raw.thread(_thread_doc("t-long", "r-long", title=title))
        assert storage.update_thread("t-long", metadata={"k": 1}).title == title
        merged = storage.merge_working_memory({"a": 1}, scope="thread", thread_id="t-long", resource_id="r-long")
        assert merged == {"a": 1}
        storage.set_working_memory("notes", scope="thread", thread_id="t-long")
        thread = storage.get_thread("t-long")
        assert thread is not None and thread.title == title and thread.metadata == {"k": 1, "workingMemory": "notes"}
        with pytest.raises(ValidationError):
            storage.update_thread("t-long", title="x" * 1025)
        assert storage.update_thread("t-long", title="short").title == "short"


def test_writes_to_a_record_with_unreadable_metadata_change_nothing(backend_url: str) -> None:
    """update_thread, thread-scope memory writes, update_resource: UnreadableRecordError everywhere, nothing changed."""
    from workmem.errors import UnreadableRecordError

    raw_only(backend_url)
    with opened(backend_url) as (storage, raw):
        raw.thread(_thread_doc("t-arr", "r-arr", title="kept", metadata=_metadata(raw, [1, 2])))
        raw.resource({"id": "r-arr", "metadata": json.dumps([3]), "createdAt": STAMP, "updatedAt": STAMP})
        writes = {
            "update_thread": lambda: storage.update_thread("t-arr", metadata={"k": 1}),
            "set_working_memory": lambda: storage.set_working_memory("x", scope="thread", thread_id="t-arr"),
            "merge_working_memory": lambda: storage.merge_working_memory({"a": 1}, scope="thread", thread_id="t-arr"),
            "update_resource": lambda: storage.update_resource("r-arr", metadata={"k": 1}),
        }
        outcomes = {}
        for name, write in writes.items():
            try:
                write()
                outcomes[name] = "written"
            except UnreadableRecordError as exc:
                outcomes[name] = f"unreadable {exc.kind} {exc.record_id}"
            except Exception as exc:  # reported below
                outcomes[name] = f"{type(exc).__name__}: {exc}"
        assert outcomes == {
            "update_thread": "unreadable thread t-arr",
            "set_working_memory": "unreadable thread t-arr",
            "merge_working_memory": "unreadable thread t-arr",
            "update_resource": "unreadable resource r-arr",
        }
        for read in (lambda: storage.get_thread("t-arr"), lambda: storage.get_resource("r-arr")):
            with pytest.raises(UnreadableRecordError):  # still as the other program stored it
                read()
        if raw.backend != "upstash":  # (Upstash lists what its index holds; reindex() skips what it cannot read)
            assert storage.list_threads("r-arr").unreadable == ("t-arr",)


# -- a thread's workingMemory that is no string (written by another program) -------------------------------

NOT_A_STRING = {"an object": {"a": 1}, "a number": 7, "true": True, "an array": ["x"]}


@pytest.mark.parametrize("name", list(NOT_A_STRING))
def test_a_merge_into_thread_memory_that_is_no_string_changes_nothing(backend_url: str, name: str) -> None:
    """Reads see no memory; a thread-scope merge raises WorkingMemoryFormatError and keeps the stored value."""
    value = NOT_A_STRING[name]
    metadata = {"workingMemory": value, "k": "v"}
    with opened(backend_url) as (storage, raw):
        if raw.backend in RAW_BACKENDS:
            raw.thread(_thread_doc("t-odd", "r-odd", title="odd", metadata=_metadata(raw, metadata)))
        else:  # the in-memory store has no driver: its public API keeps such a value as metadata
            storage.save_thread(Thread("t-odd", "r-odd", "odd", metadata))
        assert storage.get_working_memory(scope="thread", thread_id="t-odd") is None
        for owner in ("r-odd", None):
            with pytest.raises(WorkingMemoryFormatError, match=r"stored thread working memory is a JSON \w+, not"):
                storage.merge_working_memory({"b": 2}, scope="thread", thread_id="t-odd", resource_id=owner)
        thread = storage.get_thread("t-odd")
        assert thread is not None and thread.metadata == metadata  # the stored value is unchanged
        # the other errors stay what they were: a missing thread, another owner
        with pytest.raises(workmem.ThreadNotFoundError):
            storage.merge_working_memory({"b": 2}, scope="thread", thread_id="t-missing")
        with pytest.raises(workmem.ThreadOwnershipError):
            storage.merge_working_memory({"b": 2}, scope="thread", thread_id="t-odd", resource_id="r-other")
        # replacing it is still a plain write
        storage.set_working_memory('{"c":3}', scope="thread", thread_id="t-odd")
        assert storage.merge_working_memory({"b": 2}, scope="thread", thread_id="t-odd") == {"c": 3, "b": 2}


def test_thread_memory_that_is_json_null_merges_from_empty(backend_url: str) -> None:
    """``"workingMemory": null`` is no memory: a merge starts from ``{}`` and keeps the other keys."""
    with opened(backend_url) as (storage, raw):
        if raw.backend in RAW_BACKENDS:
            raw.thread(_thread_doc("t-null", "r-null", metadata=_metadata(raw, {"workingMemory": None, "k": 1})))
        else:
            storage.save_thread(Thread("t-null", "r-null", "", {"workingMemory": None, "k": 1}))
        assert storage.merge_working_memory({"a": 1}, scope="thread", thread_id="t-null") == {"a": 1}
        thread = storage.get_thread("t-null")
        assert thread is not None and thread.metadata == {"workingMemory": '{"a":1}', "k": 1}


def test_mongodb_merge_into_thread_memory_that_is_no_string_code_path() -> None:
    """FAKE (mongomock, code paths only): a thread-scope merge into a non-string value raises, nothing changed."""
    import uuid

    mongomock = pytest.importorskip("mongomock")
    from workmem.adapters.mongodb.storage import MongoStorage

    client = mongomock.MongoClient(tz_aware=True)
    try:
        storage = MongoStorage(client, f"fake_{uuid.uuid4().hex}")
        threads = client[storage.database]["mastra_threads"]
        when = datetime(2025, 1, 2, tzinfo=UTC)
        metadata = {"workingMemory": {"a": 1}, "k": "v"}
        threads.insert_one(
            {
                "id": "t-odd",
                "resourceId": "r-m",
                "title": "",
                "metadata": metadata,
                "createdAt": when,
                "updatedAt": when,
            }
        )
        assert storage.get_working_memory(scope="thread", thread_id="t-odd") is None
        with pytest.raises(WorkingMemoryFormatError, match="stored thread working memory is a JSON object"):
            storage.merge_working_memory({"b": 2}, scope="thread", thread_id="t-odd")
        stored = threads.find_one({"id": "t-odd"})
        assert stored is not None and stored["metadata"] == metadata and stored["updatedAt"] == when
    finally:
        client.close()
