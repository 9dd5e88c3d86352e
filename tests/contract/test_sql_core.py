"""The SQL core without a database: identifiers, placeholders, bound values, row mapping."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workmem import UNSET, Resource, Thread, UnreadableRecordError, ValidationError
from workmem.adapters.libsql.dialect import SQLiteDialect
from workmem.adapters.postgres.dialect import PostgresDialect
from workmem.adapters.sql import Statement, identifier
from workmem.adapters.sql.dialect import LONG_SQL, placeholder_names, sql_text_cache
from workmem.adapters.sql.rows import decode_time, load_object, resource_from_row, thread_from_row
from workmem.arguments import check_list_args
from workmem.changes import ResourceChange, merge_document, updated_resource
from workmem.hooks import ScopeTarget

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
NASTY = "x'); DROP TABLE mastra_threads; --:id %s %(id)s"


def test_identifiers_are_checked_and_quoted() -> None:
    assert identifier("wm_1") == '"wm_1"'
    for bad in ('a"b', "1a", "a b", "", "a" * 64, "é"):
        with pytest.raises(ValidationError):
            identifier(bad)
    with pytest.raises(ValidationError):
        PostgresDialect('public"; DROP SCHEMA x; --')


def test_long_statement_texts_are_cached_a_few_at_a_time() -> None:
    # A bulk insert's text grows with its rows (up to some 600 KB): 512 of them kept for the process's life
    # would be hundreds of megabytes, so long texts get a cache of their own, of 8.
    computed: list[str] = []

    @sql_text_cache
    def length(sql: str) -> int:
        computed.append(sql)
        return len(sql)

    short = [f"SELECT :a{i}" for i in range(300)]
    long = [f"INSERT {i} " + "(:a, :b), " * (LONG_SQL // 10) for i in range(9)]
    assert all(len(text) > LONG_SQL for text in long)
    for text in short + long + short:
        length(text)
    assert len(computed) == 300 + 9  # each short text once: the long ones pushed none of them out
    length(long[-1])
    assert len(computed) == 309  # the last long ones kept
    length(long[0])
    assert computed[-1] == long[0]  # the oldest of nine long ones was let go: only eight are kept
    assert length(long[0]) == len(long[0]) and len(computed) == 310


def test_placeholders_skip_casts_and_render_per_driver() -> None:
    sql = "SELECT CAST(:b AS jsonb), '{}'::jsonb, :a, :b, 5 % 2"
    assert placeholder_names(sql) == ("b", "a")
    statement = Statement(sql, {"a": 1, "b": 2})
    # ?N by first appearance, one value per name: a libSQL server refuses :name bound by position
    assert SQLiteDialect().render(statement) == ("SELECT CAST(?1 AS jsonb), '{}'::jsonb, ?2, ?1, 5 % 2", (2, 1))
    assert PostgresDialect().render(statement) == (
        "SELECT CAST(%(b)s AS jsonb), '{}'::jsonb, %(a)s, %(b)s, 5 %% 2",
        {"a": 1, "b": 2},
    )


@pytest.mark.parametrize("dialect", [SQLiteDialect(), PostgresDialect("wm_x")], ids=["sqlite", "postgres"])
def test_every_value_is_bound(dialect: SQLiteDialect | PostgresDialect) -> None:
    resource = Resource(NASTY, NASTY, {NASTY: NASTY}, T0, T0)
    thread = Thread(NASTY, NASTY, NASTY, {NASTY: NASTY}, T0, T0)
    statements = [
        dialect.select_resource(NASTY),
        dialect.upsert_resource(resource),
        dialect.insert_missing_resource(NASTY, T0),
        dialect.select_thread(NASTY, lock=True),
        dialect.save_thread(thread, T0),
        dialect.write_thread(thread),
        dialect.delete_thread(NASTY),
        dialect.list_threads(check_list_args(NASTY, 3, 7, "updated_at", "asc")),
        dialect.count_threads(NASTY),
    ]
    if dialect.native_shallow_merge:
        statements += [
            dialect.update_resource(NASTY, NASTY, {NASTY: 1}, T0),
            dialect.update_thread(NASTY, NASTY, None, T0),
        ]
    merge = dialect.merge_statement(ScopeTarget("thread", NASTY, NASTY), {NASTY: 1}, T0)
    statements += [] if merge is None else [merge]
    for statement in statements:
        assert "DROP" not in statement.sql and "2025" not in statement.sql
        assert set(placeholder_names(statement.sql)) == set(statement.params), statement.sql
        dialect.render(statement)  # every placeholder has a value


def test_sqlite_statements_bind_mastra_shapes() -> None:
    dialect = SQLiteDialect()
    statement = dialect.upsert_resource(Resource("r", None, {"a": 1}, T0, T0))
    assert "jsonb(:metadata)" in statement.sql
    assert statement.params["metadata"] == '{"a":1}' and statement.params["created_at"] == "2025-01-02T03:04:05.678Z"
    page = dialect.list_threads(check_list_args("r", 2**62, 2**62, "created_at", "desc"))
    assert page.params["limit"] == 2**62 and page.params["offset"] == 2**62  # clamped to a 64-bit count


def test_rows_decode_every_stored_form() -> None:
    assert load_object(None) is None
    assert load_object({"a": 1}) == {"a": 1}
    assert load_object(b'{"a": 1}') == {"a": 1}
    # jsonb prints 1.5e300 without an exponent: integers beyond 2**53 can only have been floats.
    big = load_object('{"f": 15' + "0" * 299 + ', "i": 9007199254740991}')
    assert big == {"f": 1.5e300, "i": 2**53 - 1} and isinstance(big["f"], float)  # type: ignore[index]
    edges = load_object(
        '{"a": -999999999999999, "b": -9007199254740991, "c": 9007199254740992, "d": -10000000000000000}'
    )
    assert edges == {"a": -999999999999999, "b": -(2**53 - 1), "c": 2.0**53, "d": -1e16}
    assert [type(v) for v in edges.values()] == [int, int, float, float]  # type: ignore[union-attr]
    assert decode_time("2025-01-02T03:04:05.678Z") == T0
    assert decode_time(datetime(2025, 1, 2, 3, 4, 5, 678901)) == T0  # naive is UTC, truncated to ms
    row = ("r", None, '{"k": true}', "2025-01-02T03:04:05.678Z", T0)
    assert resource_from_row(row) == Resource("r", None, {"k": True}, T0, T0)


STAMP = "2025-01-02T03:04:05.678Z"


@pytest.mark.parametrize(
    ("row", "want"),
    [
        # the hot path: the shape workmem and Mastra write
        (("t", "r", "x", '{"a": [1, 2.5]}', STAMP, STAMP), Thread("t", "r", "x", {"a": [1, 2.5]}, T0, T0)),
        (("t", "r", "", None, STAMP, STAMP), Thread("t", "r", "", None, T0, T0)),
        (("t", "r", "", {"a": 1}, STAMP, STAMP), Thread("t", "r", "", {"a": 1}, T0, T0)),  # decoded by the driver
        # everything else takes the general path, to the same records
        (("t", "r", "", ' {"a": 1} ', STAMP, STAMP), Thread("t", "r", "", {"a": 1}, T0, T0)),
        (("t", "r", "", b'{"a": 1}', STAMP, STAMP), Thread("t", "r", "", {"a": 1}, T0, T0)),
        (("t", "r", "", None, "2025-01-02 03:04:05.678", T0), Thread("t", "r", "", None, T0, T0)),
        (("t", "r", "", None, "2025-01-02T04:04:05.678+01:00", STAMP), Thread("t", "r", "", None, T0, T0)),
        (("t", "r", "", None, "2025-01-02T03:04:05.678901Z", STAMP), Thread("t", "r", "", None, T0, T0)),
        (("t", "r", "", '{"n": 100000000000000000000}', STAMP, STAMP), Thread("t", "r", "", {"n": 1e20}, T0, T0)),
    ],
)  # fmt: skip
def test_thread_rows_map_every_stored_form(row: tuple[object, ...], want: Thread) -> None:
    got = thread_from_row(row)
    assert got == want
    assert type(got.metadata) is type(want.metadata)
    if want.metadata and "n" in want.metadata:
        assert isinstance(got.metadata["n"], float)  # type: ignore[index]  # beyond 2**53: a float


def test_rows_that_cannot_be_records_are_refused() -> None:
    """Each is UnreadableRecordError naming the record: a list leaves that row out and names it."""
    for row, mapper, record_id in (
        (("t", "r", "", "[1]", STAMP, STAMP), thread_from_row, "t"),  # metadata not an object
        ((7, "r", "", None, STAMP, STAMP), thread_from_row, "7"),  # another program stored a number as the id
        (("r", 7, None, STAMP, STAMP), resource_from_row, "r"),  # ... or as the working memory
        (("t", "r", "", None, "2025-13-02T03:04:05.678Z", STAMP), thread_from_row, "t"),  # looks like a stamp
    ):
        with pytest.raises(UnreadableRecordError) as raised:
            mapper(row)  # type: ignore[operator]
        assert raised.value.record_id == record_id


@pytest.mark.parametrize("dialect", [SQLiteDialect(), PostgresDialect("wm_x")], ids=["sqlite", "postgres"])
def test_key_reads_are_the_select_by_id_rendered_once(dialect: SQLiteDialect | PostgresDialect) -> None:
    assert dialect.thread_by_id is dialect.thread_by_id and dialect.resource_by_id is dialect.resource_by_id
    for read, plain, record in (
        (dialect.thread_by_id, dialect.select_thread(NASTY), thread_from_row),
        (dialect.resource_by_id, dialect.select_resource(NASTY), resource_from_row),
    ):
        assert read.statement(NASTY) == plain and read.record is record
        assert (read.rendered, dialect.render(plain)[1]) == dialect.render(plain)  # the key bound, not in the text


def test_changes_follow_the_contract() -> None:
    old = Resource("r", "keep", {"a": 1, "b": 2}, T0, T0)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert updated_resource(old, "r", ResourceChange(UNSET, {"b": None, "c": 3}, now)) == Resource(
        "r", "keep", {"a": 1, "b": None, "c": 3}, T0, now
    )
    assert updated_resource(None, "r", ResourceChange(None, None, now)) == Resource("r", None, None, now, now)
    assert merge_document("  ", {"a": {"b": None}}) == ({"a": {}}, '{"a":{}}')
