"""PostgreSQL adapter against a REAL server: contract, Mastra interop, failures, plans.

The server comes from ``tests/support/servers.py``; every test works in a fresh random
schema (``?schema=wm_…``) that is dropped afterwards.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

import psycopg
import pytest
from postgres_schemas import fresh_schema_url
from servers import server_url
from test_sql_contract import T0, T1, MakeStorage, SqlContract

import workmem
from workmem import BackendUnavailableError, Resource, Thread, ValidationError
from workmem.adapters.postgres import PostgresStorage, parse_postgres_url
from workmem.adapters.postgres.dialect import PostgresDialect
from workmem.arguments import check_list_args

pytestmark = pytest.mark.backend("postgres")


@pytest.fixture
def sql(url: str) -> Iterator[psycopg.Connection[Any]]:
    """A plain connection with the test schema first on the search path (as Mastra's code would see it)."""
    conninfo, schema = parse_postgres_url(url)
    workmem.connect(url).close()  # creates the schema and tables
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        yield conn


class TestPostgresContract(SqlContract):
    @pytest.fixture
    def make_storage(self, url: str) -> Iterator[MakeStorage]:
        opened: list[workmem.MemoryStorage] = []

        def make(**options: Any) -> workmem.MemoryStorage:
            opened.append(workmem.connect(url, max_size=16, **options))
            return opened[-1]

        yield make
        for storage in opened:
            storage.close()


class _LockingDialect(PostgresDialect):
    """PostgreSQL driven like Oracle will be: updates and merges as SELECT … FOR UPDATE transactions."""

    native_shallow_merge: ClassVar[bool] = False

    def merge_statement(self, *args: Any) -> None:  # type: ignore[override]
        return None


class TestLockedFlowContract(SqlContract):
    """The core's row-locking read-modify-write path (the one Oracle uses), proven on PostgreSQL."""

    @pytest.fixture
    def make_storage(self, url: str) -> Iterator[MakeStorage]:
        opened: list[PostgresStorage] = []

        def make(**options: Any) -> workmem.MemoryStorage:
            storage = PostgresStorage.from_url(url, max_size=16, **options)
            storage.dialect = _LockingDialect(storage.dialect.schema or "public")
            opened.append(storage)
            return storage

        yield make
        for storage in opened:
            storage.close()


@pytest.mark.parametrize(
    ("given", "conninfo", "schema"),
    [
        ("postgresql://u:p@h:5432/db?schema=s1", "postgresql://u:p@h:5432/db", "s1"),
        ("postgres://h/db", "postgresql://h/db", "public"),
        (
            "postgresql+psycopg://h/db?sslmode=disable&schema=x&application_name=a",
            "postgresql://h/db?sslmode=disable&application_name=a",
            "x",
        ),
    ],
)
def test_url_forms(given: str, conninfo: str, schema: str) -> None:
    assert parse_postgres_url(given) == (conninfo, schema)


@pytest.mark.parametrize("schema", ['bad"name', "1abc", "a-b", "", "x" * 64])
def test_unsafe_schema_names_are_refused(schema: str) -> None:
    with pytest.raises(ValidationError):
        PostgresStorage.from_url(f"postgresql://127.0.0.1:1/db?schema={schema}")


def test_connection_failure_masks_the_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BackendUnavailableError) as info:
        workmem.connect("postgresql://postgres:Sup3rS3cret@127.0.0.1:1/postgres", connect_timeout=2)
    error = info.value
    shown = [str(error), repr(error), caplog.text, *(str(e) for e in (error.__cause__, error.__context__) if e)]
    assert "127.0.0.1:1" in str(error) and "***" in str(error)
    assert not any("Sup3rS3cret" in text for text in shown)


def test_tables_are_mastras(url: str, sql: psycopg.Connection[Any]) -> None:
    columns = sql.execute(
        "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name LIKE 'mastra%%' ORDER BY table_name, ordinal_position"
    ).fetchall()
    stamps = [
        ("createdAt", "timestamp without time zone", "NO", None),
        ("updatedAt", "timestamp without time zone", "NO", None),
        ("createdAtZ", "timestamp with time zone", "YES", "now()"),
        ("updatedAtZ", "timestamp with time zone", "YES", "now()"),
    ]
    assert columns == [
        ("mastra_resources", "id", "text", "NO", None),
        ("mastra_resources", "workingMemory", "text", "YES", None),
        ("mastra_resources", "metadata", "jsonb", "YES", None),
        *(("mastra_resources", *s) for s in stamps),
        ("mastra_threads", "id", "text", "NO", None),
        ("mastra_threads", "resourceId", "text", "NO", None),
        ("mastra_threads", "title", "text", "NO", None),
        ("mastra_threads", "metadata", "jsonb", "YES", None),
        *(("mastra_threads", *s) for s in stamps),
    ]
    (index,) = sql.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'mastra_threads_resourceid_createdat_idx' "
        "AND schemaname = current_schema()"
    ).fetchone()  # type: ignore[misc]
    assert index.endswith('USING btree ("resourceId", "createdAt" DESC)')
    workmem.connect(url).close()  # idempotent


def _counts(sql: psycopg.Connection[Any]) -> tuple[dict[str, int], dict[str, int]]:
    """(workmem's kept counts without zeros, the counts of the rows) of every resource."""
    kept = dict(sql.execute('SELECT "resourceId", n FROM workmem_thread_counts WHERE n <> 0').fetchall())
    real = dict(sql.execute('SELECT "resourceId", count(*) FROM mastra_threads GROUP BY 1').fetchall())
    return kept, real


_MASTRA_SAVE = (  # how @mastra/pg saves a thread: an upsert that also moves it to the given resource
    'INSERT INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
    "VALUES (%s, %s, '', NULL, now(), now()) ON CONFLICT (id) DO UPDATE SET "
    '"resourceId" = EXCLUDED."resourceId", title = EXCLUDED.title, "updatedAt" = EXCLUDED."updatedAt"'
)


def test_thread_counts_follow_writes_by_plain_sql(url: str, sql: psycopg.Connection[Any]) -> None:
    with workmem.connect(url) as storage:
        storage.save_thread(Thread("w1", "a"))
        for tid, owner in (("m1", "a"), ("m2", "a"), ("m1", "a"), ("m2", "b")):  # insert, insert, re-save, move
            sql.execute(_MASTRA_SAVE, (tid, owner))
        assert _counts(sql) == ({"a": 2, "b": 1}, {"a": 2, "b": 1})
        assert storage.list_threads("a").total == 2 and storage.list_threads("b", page=3, per_page=5).total == 1
        sql.execute('UPDATE mastra_threads SET "resourceId" = %s WHERE id = %s', ("c", "w1"))
        sql.execute("UPDATE mastra_threads SET title = 'x'")  # no move: no count changes
        sql.execute("DELETE FROM mastra_threads WHERE id = %s", ("m1",))
        assert _counts(sql) == ({"b": 1, "c": 1}, {"b": 1, "c": 1})
        with (
            sql.cursor() as cursor,
            cursor.copy(  # a bulk load of many resources: one statement
                'COPY mastra_threads (id, "resourceId", title, "createdAt", "updatedAt") FROM STDIN'
            ) as copy,
        ):
            for i in range(300):
                copy.write_row((f"bulk-{i}", f"r{i % 7}", "", "2025-01-01 00:00:00", "2025-01-01 00:00:00"))
        sql.execute("DELETE FROM mastra_threads WHERE id LIKE 'bulk-1%%'")
        kept, real = _counts(sql)
        assert kept == real and sum(real.values()) == 2 + 300 - 111
        assert storage.list_threads("r3", per_page=1).total == real["r3"]
        sql.execute("TRUNCATE mastra_threads")
        assert _counts(sql) == ({}, {}) and storage.list_threads("r3").total == 0


def test_thread_counts_of_an_existing_database_are_filled_when_first_opened(url: str) -> None:
    conninfo, schema = parse_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:  # Mastra's tables and rows, before workmem
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute(
            'CREATE TABLE mastra_threads (id text NOT NULL PRIMARY KEY, "resourceId" text NOT NULL, title text NOT '
            'NULL, metadata jsonb, "createdAt" timestamp NOT NULL, "updatedAt" timestamp NOT NULL, '
            '"createdAtZ" timestamptz DEFAULT now(), "updatedAtZ" timestamptz DEFAULT now())'
        )
        conn.execute(
            'INSERT INTO mastra_threads (id, "resourceId", title, "createdAt", "updatedAt") '
            "SELECT 't' || i, 'r' || (i % 3), '', now(), now() FROM generate_series(1, 50) AS i"
        )
        with workmem.connect(url) as storage:
            assert [storage.list_threads(f"r{i}", per_page=5).total for i in range(3)] == [16, 17, 17]
            assert _counts(conn) == ({"r0": 16, "r1": 17, "r2": 17}, {"r0": 16, "r1": 17, "r2": 17})
            conn.execute("DROP TRIGGER workmem_count_delete ON mastra_threads")  # counts can no longer be trusted
            conn.execute("DELETE FROM mastra_threads WHERE id = 't3'")
        with workmem.connect(url) as storage:  # a missing trigger: recreated, and everything counted again
            assert storage.list_threads("r0").total == 15
            assert _counts(conn)[0] == _counts(conn)[1]


def test_reads_rows_written_by_mastra(url: str, sql: psycopg.Connection[Any]) -> None:
    # What @mastra/pg writes: UTC wall time in "createdAt", the same instant in "createdAtZ", jsonb metadata.
    sql.execute(
        'INSERT INTO mastra_resources (id, "workingMemory", metadata, "createdAt", "updatedAt", "createdAtZ", '
        '"updatedAtZ") VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s)',
        ("user-1", '{"name":"Ada"}', json.dumps({"plan": "pro"}), "2025-01-02 03:04:05.678", "2025-01-02 03:04:05.678",
         "2025-01-02T03:04:05.678Z", "2025-01-02T03:04:05.678Z"),
    )  # fmt: skip
    for tid, created, z in (("a", "2025-01-02 03:04:05.678", True), ("b", "2025-01-03 00:00:00", False)):
        sql.execute(
            'INSERT INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt", "createdAtZ", '
            f'"updatedAtZ") VALUES (%s, %s, %s, %s::jsonb, %s, %s, {"%s, %s" if z else "NULL, NULL"})',
            (tid, "user-1", f"chat {tid}", json.dumps({"workingMemory": "# notes"}), created, created)
            + ((created + "Z", created + "Z") if z else ()),
        )
    with workmem.connect(url) as storage:
        assert storage.get_resource("user-1") == Resource("user-1", '{"name":"Ada"}', {"plan": "pro"}, T0, T0)
        page = storage.list_threads("user-1")
        assert [t.id for t in page.threads] == ["b", "a"]
        assert page.threads[0].created_at == datetime(2025, 1, 3, tzinfo=UTC)  # no …Z: the naive column is UTC
        assert page.threads[1] == Thread("a", "user-1", "chat a", {"workingMemory": "# notes"}, T0, T0)
        assert storage.merge_working_memory({"age": 36}, scope="resource", resource_id="user-1") == {
            "name": "Ada",
            "age": 36,
        }


def test_rows_we_write_are_what_mastra_reads(url: str, sql: psycopg.Connection[Any]) -> None:
    sql.execute("SET TIME ZONE 'America/New_York'")  # the session zone must not matter
    with workmem.connect(url) as storage:
        storage.save_resource(Resource("r", "# wm", {"a": [1, 2.5]}, T0, T1))
        storage.save_thread(Thread("t", "r", "", {"b": None}, T0, T0))
        storage.merge_working_memory({"x": {"y": 1}}, scope="thread", thread_id="t")
    row = sql.execute(
        'SELECT "workingMemory", metadata, "createdAt", "updatedAt", "createdAtZ", "updatedAtZ" FROM mastra_resources'
    ).fetchone()
    assert row is not None
    assert row[:4] == ("# wm", {"a": [1, 2.5]}, T0.replace(tzinfo=None), T1.replace(tzinfo=None))
    assert (row[4], row[5]) == (T0, T1)
    (metadata, kind) = sql.execute("SELECT metadata, jsonb_typeof(metadata) FROM mastra_threads").fetchone()  # type: ignore[misc]
    assert kind == "object" and metadata["b"] is None and json.loads(metadata["workingMemory"]) == {"x": {"y": 1}}


def test_listing_is_an_index_range_scan(url: str, sql: psycopg.Connection[Any]) -> None:
    sql.execute(
        'INSERT INTO mastra_threads (id, "resourceId", title, "createdAt", "updatedAt") '
        "SELECT 't' || i, 'r' || (i % 20), '', now() - i * interval '1 s', now() - i * interval '1 s' "
        "FROM generate_series(1, 20000) AS i"
    )
    sql.execute("ANALYZE mastra_threads")
    dialect = PostgresDialect(parse_postgres_url(url)[1])
    for order_by, index in (("created_at", "mastra_threads_resourceid_createdat_idx"),
                            ("updated_at", "workmem_threads_resourceid_updatedat_idx")):  # fmt: skip
        query, params = dialect.render(dialect.list_threads(check_list_args("r7", 1, 20, order_by, "desc")))
        plan = "\n".join(row[0] for row in sql.execute("EXPLAIN " + query, params).fetchall())
        # The index gives the order; only ties of the timestamp are sorted by id (Incremental Sort).
        assert f"Index Scan using {index}" in plan and "Seq Scan" not in plan and "\n  ->  Sort" not in plan, plan


def test_a_terminated_connection_is_replaced(url: str) -> None:
    with fresh_schema_url(application_name="workmem-terminate") as url, workmem.connect(url, max_size=2) as storage:
        storage.update_resource("r", working_memory="before")
        with psycopg.connect(server_url("postgres"), autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'workmem-terminate' AND pid <> pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        assert storage.get_working_memory(scope="resource", resource_id="r") == "before"  # read after the kill
        storage.update_resource("r", working_memory="after")  # and a write
        assert storage.get_working_memory(scope="resource", resource_id="r") == "after"


def test_resource_metadata_stored_as_a_json_string_reads_and_merges(url: str, sql: psycopg.Connection[Any]) -> None:
    # @mastra/pg 1.27.1 saveResource: the object's JSON text, encoded again as a jsonb *string*.
    sql.execute(
        'INSERT INTO mastra_resources (id, "workingMemory", metadata, "createdAt", "updatedAt", "createdAtZ", '
        '"updatedAtZ") VALUES (%s, %s, to_jsonb(%s::text), %s, %s, %s, %s)',
        ("r", '{"name":"Ada"}', json.dumps({"plan": "pro", "n": [1]}), "2025-01-02 03:04:05.678",
         "2025-01-02 03:04:05.678", "2025-01-02T03:04:05.678Z", "2025-01-02T03:04:05.678Z"),
    )  # fmt: skip
    assert sql.execute("SELECT jsonb_typeof(metadata) FROM mastra_resources").fetchone() == ("string",)
    with workmem.connect(url) as storage:
        assert storage.get_resource("r") == Resource("r", '{"name":"Ada"}', {"plan": "pro", "n": [1]}, T0, T0)
        assert storage.merge_working_memory({"age": 36}, scope="resource", resource_id="r") == {
            "name": "Ada",
            "age": 36,
        }
        assert storage.get_resource("r").metadata == {"plan": "pro", "n": [1]}  # type: ignore[union-attr]
        changed = storage.update_resource("r", metadata={"plan": "team"})
        assert changed.metadata == {"plan": "team", "n": [1]}
        assert storage.get_resource("r") == changed
    assert sql.execute("SELECT jsonb_typeof(metadata) FROM mastra_resources").fetchone() == ("object",)


def test_metadata_that_is_no_object_is_not_merged_into(url: str, sql: psycopg.Connection[Any]) -> None:
    sql.execute(
        'INSERT INTO mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
        "VALUES ('s', 'r', '', to_jsonb('not json'::text), now(), now()), ('a', 'r', '', '[1]', now(), now())"
    )
    with workmem.connect(url) as storage:
        for tid in ("s", "a"):
            # as on every backend: that record is unreadable (UnreadableRecordError names it), nothing changed
            with pytest.raises(workmem.UnreadableRecordError, match=r"stored metadata is a JSON (string|array)"):
                storage.update_thread(tid, metadata={"x": 1})
            with pytest.raises(workmem.UnreadableRecordError, match=r"stored metadata is a JSON (string|array)"):
                storage.merge_working_memory({"x": 1}, scope="thread", thread_id=tid)
    rows = sql.execute("SELECT id, metadata FROM mastra_threads ORDER BY id").fetchall()
    assert rows == [("a", [1]), ("s", "not json")]  # nothing changed


@pytest.fixture
def text_metadata_url() -> Iterator[str]:
    """A schema whose tables (made before workmem connects) have ``metadata`` of type ``text``."""
    with fresh_schema_url() as url:
        conninfo, schema = parse_postgres_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(
                f'CREATE TABLE "{schema}".mastra_threads (id text NOT NULL PRIMARY KEY, "resourceId" text NOT NULL, '
                'title text NOT NULL, metadata text, "createdAt" timestamp NOT NULL, "updatedAt" timestamp NOT NULL, '
                '"createdAtZ" timestamptz DEFAULT now(), "updatedAtZ" timestamptz DEFAULT now())'
            )
            conn.execute(
                f'CREATE TABLE "{schema}".mastra_resources (id text NOT NULL PRIMARY KEY, "workingMemory" text, '
                'metadata text, "createdAt" timestamp NOT NULL, "updatedAt" timestamp NOT NULL, '
                '"createdAtZ" timestamptz DEFAULT now(), "updatedAtZ" timestamptz DEFAULT now())'
            )
            conn.execute(
                f'INSERT INTO "{schema}".mastra_threads (id, "resourceId", title, metadata, "createdAt", "updatedAt", '
                '"createdAtZ", "updatedAtZ") '
                """VALUES ('ts', 'u', 'from TS', '{"workingMemory":"{\\"a\\":1}","k":"v"}', %s, %s, %s, %s)""",
                (T0.replace(tzinfo=None), T0.replace(tzinfo=None), T0, T0),
            )
        yield url


def test_a_merge_into_non_string_memory_in_a_text_metadata_column_changes_nothing(text_metadata_url: str) -> None:
    """A text column holding ``{"workingMemory": {...}}``: WorkingMemoryFormatError, the text unchanged."""
    stored = '{"workingMemory": {"a": 1}, "k": "v"}'
    conninfo, schema = parse_postgres_url(text_metadata_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'UPDATE "{schema}".mastra_threads SET metadata = %s WHERE id = %s', (stored, "ts"))
    with workmem.connect(text_metadata_url) as storage:
        assert storage.get_working_memory(scope="thread", thread_id="ts") is None
        with pytest.raises(workmem.WorkingMemoryFormatError, match="stored thread working memory is a JSON object"):
            storage.merge_working_memory({"b": 2}, scope="thread", thread_id="ts", resource_id="u")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(f'SELECT metadata FROM "{schema}".mastra_threads WHERE id = %s', ("ts",)).fetchone()
    assert row == (stored,)


def test_every_operation_on_a_text_metadata_column(text_metadata_url: str) -> None:
    with workmem.connect(text_metadata_url) as storage:
        assert storage.get_thread("ts") == Thread("ts", "u", "from TS", {"workingMemory": '{"a":1}', "k": "v"}, T0, T0)
        assert storage.merge_working_memory({"b": 2}, scope="thread", thread_id="ts") == {"a": 1, "b": 2}
        assert storage.update_thread("ts", title="renamed").metadata == {"workingMemory": '{"a":1,"b":2}', "k": "v"}
        updated = storage.update_thread("ts", metadata={"k": None, "n": 1.5})
        assert updated.title == "renamed" and updated.metadata == {
            "workingMemory": '{"a":1,"b":2}',
            "k": None,
            "n": 1.5,
        }
        storage.save_thread(Thread("t2", "u", "", {"x": [1]}, T1, T1))
        storage.set_working_memory("# notes", scope="thread", thread_id="t2")
        assert storage.get_working_memory(scope="thread", thread_id="t2") == "# notes"
        assert storage.update_thread("t2", metadata={"y": True}).metadata == {
            "x": [1],
            "workingMemory": "# notes",
            "y": True,
        }
        assert [t.id for t in storage.list_threads("u").threads] == ["t2", "ts"]
        storage.save_resource(Resource("u", None, {"p": 1}, T0, T0))
        assert storage.update_resource("u", metadata={"q": 2}).metadata == {"p": 1, "q": 2}
        assert storage.update_resource("u", working_memory="wm").metadata == {"p": 1, "q": 2}
        assert storage.merge_working_memory({"z": 0}, scope="resource", resource_id="new") == {"z": 0}
        assert storage.update_resource("new", metadata={"m": "n"}).metadata == {"m": "n"}
        new = storage.get_resource("new")
        assert new is not None and (new.working_memory, new.metadata) == ('{"z":0}', {"m": "n"})
        assert storage.delete_thread("ts") and storage.list_threads("u").total == 1


def test_bulk_inserts_keep_the_thread_counts_exact_with_some_ids_present(
    url: str, sql: psycopg.Connection[Any]
) -> None:
    with workmem.connect(url) as storage:
        storage.insert_threads(Thread(f"t{i:04}", f"r{i % 5}") for i in range(0, 900, 3))
        sql.execute(_MASTRA_SAVE, ("t0001", "mastra"))
        present = storage.insert_threads(Thread(f"t{i:04}", f"other{i % 4}") for i in range(900))
        assert present == {f"t{i:04}" for i in range(0, 900, 3)} | {"t0001"}
        kept, real = _counts(sql)
        assert kept == real and sum(real.values()) == 900 and real["mastra"] == 1
        assert sum(real[f"r{k}"] for k in range(5)) == 300
        assert storage.list_threads("other2").total == real["other2"]


def test_keyset_pages_go_by_byte_order_on_an_index_whatever_the_collation(
    url: str, sql: psycopg.Connection[Any]
) -> None:
    with workmem.connect(url) as storage:
        storage.insert_threads(Thread(i, "r") for i in ("b", "a", "B", "\u00e9", "e\u0301", "_", "Z"))
        assert [t.id for t in storage.iter_threads(page_size=2)] == ["B", "Z", "_", "a", "b", "e\u0301", "\u00e9"]
        statement = storage.dialect.thread_page("a", 2)  # type: ignore[attr-defined]
        text, params = storage.dialect.render(statement)  # type: ignore[attr-defined]
    sql.execute("SET enable_seqscan = off")
    plan = "\n".join(row[0] for row in sql.execute("EXPLAIN " + text, params).fetchall())
    assert "workmem_threads_id_c_idx" in plan and "Sort" not in plan, plan
