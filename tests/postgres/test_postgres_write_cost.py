"""What a thread write costs on PostgreSQL, and why the kept counts stay exact and deadlock-free under any writer.

The per-resource counts (``workmem_thread_counts``) are kept by triggers on
``mastra_threads`` (see :mod:`workmem.adapters.postgres.dialect`). Pinned here,
with plain SQL as the TypeScript Mastra adapter or a DBA would write it:

* the write cost: a one-row insert writes one count row; a statement of many
  rows (``INSERT … SELECT``, ``COPY``, a ``DELETE``) writes one count row per
  resource it touches, never one per thread (the statement-level triggers add
  up their transition tables);
* the lock order: a statement of many rows locks its count rows in
  ``resourceId`` order whatever the order of its rows, so concurrent bulk
  writes in opposite orders wait for each other instead of deadlocking;
* exactness after every kind of write, including statements that fail half
  way, savepoints rolled back, many-row moves and no-op updates, and after the
  writes through workmem that change nothing (an id taken, another owner);
* upgrade in place: the count functions are replaced on every start (under the
  DDL advisory lock), so a database whose functions an older version created
  runs the current ones from the next start on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import psycopg
import pytest
from psycopg import errors
from test_postgres import _MASTRA_SAVE, _counts, fresh_schema_url

import workmem
from workmem import Thread, ThreadExistsError, ThreadOwnershipError
from workmem.adapters.postgres import parse_postgres_url
from workmem.adapters.postgres.dialect import PostgresDialect

pytestmark = pytest.mark.backend("postgres")

_INSERT = 'INSERT INTO mastra_threads (id, "resourceId", title, "createdAt", "updatedAt") VALUES '
_ROW = "(%s, %s, '', now(), now())"


class Schema(NamedTuple):
    url: str
    """The workmem URL of a fresh schema, its tables created."""
    conninfo: str
    name: str

    def connect(self) -> psycopg.Connection[Any]:
        """A plain autocommit connection with the schema first on the search path (as Mastra's code sees it)."""
        conn = psycopg.connect(self.conninfo, autocommit=True)
        conn.execute(f'SET search_path TO "{self.name}"')
        return conn


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema_url() as url:
        workmem.connect(url).close()  # creates the tables, the count triggers and functions
        yield Schema(url, *parse_postgres_url(url))


@pytest.fixture
def sql(schema: Schema) -> Iterator[psycopg.Connection[Any]]:
    with schema.connect() as conn:
        yield conn


def _insert_many(conn: psycopg.Connection[Any], rows: list[tuple[str, str]]) -> None:
    """One multi-row ``INSERT … VALUES`` of ``(id, resourceId)`` pairs, in the order given."""
    conn.execute(_INSERT + ", ".join([_ROW] * len(rows)), [value for row in rows for value in row])


def _count_writes(conn: psycopg.Connection[Any]) -> int:
    """Rows inserted plus rows updated in the counts table so far in the current transaction."""
    row = conn.execute(
        "SELECT COALESCE(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_xact_user_tables "
        "WHERE relid = to_regclass('workmem_thread_counts')"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_statement_writes_one_count_row_per_resource_not_per_thread(
    schema: Schema, sql: psycopg.Connection[Any]
) -> None:
    dialect = PostgresDialect(schema.name)
    create, params = dialect.render(dialect.create_thread(Thread("w-1", "r0")))
    writes: list[int] = []
    with sql.transaction(force_rollback=True):  # pg_stat_xact_* counts what this transaction did

        def step(statement: str, args: Any = None) -> None:
            before = _count_writes(sql)
            sql.execute(statement, args)
            writes.append(_count_writes(sql) - before)

        step(_MASTRA_SAVE, ("m-1", "r0"))  # a new thread: one count row
        step(create, params)  # workmem's create_thread: one
        step(create, params)  # the id is taken: nothing inserted, no count written
        step(_MASTRA_SAVE, ("m-1", "r0"))  # a re-save by Mastra: an update, no count written
        step(_MASTRA_SAVE, ("m-1", "r1"))  # a move: the two resources' rows
        step(
            'INSERT INTO mastra_threads (id, "resourceId", title, "createdAt", "updatedAt") '
            "SELECT 'b-' || i, 'r' || (i % 7), '', now(), now() FROM generate_series(1, 300) AS i"
        )
        before = _count_writes(sql)  # (not inside the COPY: the connection is busy with it)
        with sql.cursor().copy(
            'COPY mastra_threads (id, "resourceId", title, "createdAt", "updatedAt") FROM STDIN'
        ) as c:
            for i in range(300):
                c.write_row((f"c-{i}", f"r{i % 5}", "", "2025-01-01", "2025-01-01"))
        writes.append(_count_writes(sql) - before)
        step("DELETE FROM mastra_threads WHERE id LIKE 'b-%'")
        kept, real = _counts(sql)
    assert writes == [1, 1, 0, 0, 2, 7, 5, 7]
    assert kept == real and real["r0"] == 1 + 60  # w-1 and the copied threads of r0


def test_a_many_row_insert_locks_its_count_rows_in_resource_order(schema: Schema, sql: psycopg.Connection[Any]) -> None:
    _insert_many(sql, [("t-a", "a"), ("t-b", "b")])  # both count rows exist
    with schema.connect() as holder, schema.connect() as writer, schema.connect() as probe:
        holder.autocommit = False
        holder.execute("SELECT n FROM workmem_thread_counts WHERE \"resourceId\" = 'b' FOR UPDATE")
        failure: list[BaseException] = []

        def write() -> None:
            try:  # rows in descending resource order: "b" first
                _insert_many(writer, [("u-b", "b"), ("u-a", "a")])
            except BaseException as exc:  # reported below
                failure.append(exc)

        worker = threading.Thread(target=write)
        worker.start()
        try:
            pid = writer.info.backend_pid
            deadline = time.monotonic() + 10
            while probe.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() != (
                "Lock",
            ):
                assert time.monotonic() < deadline, "the insert never waited for the held count row"
                time.sleep(0.01)
            # Waiting for "b", the insert already holds "a": it took the lower resource first.
            with pytest.raises(errors.LockNotAvailable):
                probe.execute("SELECT n FROM workmem_thread_counts WHERE \"resourceId\" = 'a' FOR UPDATE NOWAIT")
        finally:
            holder.rollback()
            worker.join(10)
        assert not worker.is_alive() and not failure, failure
    assert _counts(sql) == ({"a": 2, "b": 2}, {"a": 2, "b": 2})


def test_concurrent_many_row_inserts_in_opposite_orders_all_succeed(
    schema: Schema, sql: psycopg.Connection[Any]
) -> None:
    resources = [f"r{i}" for i in range(8)]
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def writer(number: int) -> None:
        order = resources if number % 2 else resources[::-1]
        try:
            with schema.connect() as conn:
                start.wait()
                for batch in range(15):
                    _insert_many(conn, [(f"w{number}-{batch}-{k}-{r}", r) for r in order for k in range(3)])
        except BaseException as exc:  # a deadlock would be errors.DeadlockDetected
            failures.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert not failures, failures
    assert _counts(sql) == ({r: 4 * 15 * 3 for r in resources},) * 2


def test_counts_stay_exact_after_failed_statements_savepoints_and_many_row_moves(
    schema: Schema, sql: psycopg.Connection[Any]
) -> None:
    def exact() -> dict[str, int]:
        kept, real = _counts(sql)
        assert kept == real
        return real

    _insert_many(sql, [(f"t{i}", f"r{i % 4}") for i in range(40)])
    with pytest.raises(errors.UniqueViolation):  # the last row's id is taken: the whole statement is undone
        _insert_many(sql, [("new-1", "r9"), ("new-2", "r0"), ("t3", "r1")])
    with pytest.raises(errors.NotNullViolation):
        sql.execute(_INSERT + "(%s, %s, '', now(), now()), (%s, NULL, '', now(), now())", ("new-3", "r9", "new-4"))
    assert exact() == {f"r{k}": 10 for k in range(4)}
    sql.execute(  # some present, some new: only the new ones count
        _INSERT + ", ".join([_ROW] * 3) + " ON CONFLICT (id) DO NOTHING", ("t0", "zz", "new-5", "r9", "new-6", "r0")
    )
    with sql.transaction():
        _insert_many(sql, [("s-1", "r5")])
        with pytest.raises(errors.UniqueViolation), sql.transaction():  # a savepoint, rolled back
            _insert_many(sql, [("s-2", "r5"), ("s-3", "r6")])
            sql.execute("DELETE FROM mastra_threads WHERE \"resourceId\" = 'r1'")
            _insert_many(sql, [("s-1", "r7")])
    assert exact() == {"r0": 11, "r1": 10, "r2": 10, "r3": 10, "r5": 1, "r9": 1}
    # Many rows moved by one statement, to several resources; and updates that move nothing.
    sql.execute(
        "UPDATE mastra_threads SET \"resourceId\" = 'm' || (length(id) % 3) WHERE \"resourceId\" IN ('r2', 'r3')"
    )
    sql.execute('UPDATE mastra_threads SET "resourceId" = "resourceId", title = \'x\'')
    sql.execute("UPDATE mastra_threads SET \"resourceId\" = 'r0' WHERE id = 'new-6'")  # its own resource already
    real = exact()
    assert sum(real.values()) == 43 and "r2" not in real and "r3" not in real and real["m0"] > 0
    with workmem.connect(schema.url) as storage:
        with pytest.raises(ThreadExistsError):
            storage.create_thread(Thread("t0", "r0"))
        with pytest.raises(ThreadOwnershipError):
            storage.save_thread(Thread("t1", "someone-else"))  # refused: never moved to another resource
        assert not storage.delete_thread("no-such-thread")
        assert exact() == real
        assert storage.list_threads("r1", per_page=1).total == real["r1"] == 10
        thread = storage.get_thread("t1")
        assert thread is not None and thread.resource_id == "r1"


def test_count_functions_an_older_version_created_are_replaced_on_the_next_start(
    schema: Schema, sql: psycopg.Connection[Any]
) -> None:
    # An older body (here: one counting every new thread twice) is what the next start must not keep.
    sql.execute(
        "CREATE OR REPLACE FUNCTION workmem_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN "
        'INSERT INTO workmem_thread_counts AS c ("resourceId", n) SELECT "resourceId", 2 * count(*) FROM added '
        'GROUP BY "resourceId" ON CONFLICT ("resourceId") DO UPDATE SET n = c.n + excluded.n; RETURN NULL; END $fn$'
    )
    workmem.connect(schema.url).close()  # the next start
    _insert_many(sql, [("t-b", "b"), ("t-a", "a"), ("t-a2", "a")])
    sql.execute(_MASTRA_SAVE, ("m-1", "c"))
    assert _counts(sql) == ({"a": 2, "b": 1, "c": 1}, {"a": 2, "b": 1, "c": 1})
