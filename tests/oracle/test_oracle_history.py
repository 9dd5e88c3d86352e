"""Oracle's history and erasure without a server: the statements as text, and the order the hooks run them in.

The SQL core (``tests/contract/test_sql_history.py``) runs the same flow on libSQL and PostgreSQL against
real databases; here the Oracle dialect's statements are checked for what Oracle needs (``MERGE`` where the
others say ``ON CONFLICT``, ``TO_TIMESTAMP_TZ``, ``FETCH FIRST``, the ``''`` sentinel, CLOB binds), and the
fake pool of ``test_oracle.py`` shows each version written before the one ``COMMIT`` of its write.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import test_oracle
from test_oracle import NAIVE, FakePool

from workmem.adapters.oracle import OracleStorage
from workmem.adapters.oracle.dialect import CLOB_PARAMS, EMPTY_STRING_SENTINEL, OracleDialect, decode_row
from workmem.history import HistoryKey, HistoryPolicy, MemoryVersion, Recording

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
DIALECT = OracleDialect("wm_ab12_")
pool = test_oracle.pool  # the fake pool and the storage over it, as test_oracle's own tests use them
store = test_oracle.store
KEY = HistoryKey("u1", "t1")


def test_the_history_table_is_created_beside_mastras_and_dropped_with_them() -> None:
    ddl = DIALECT.ddl()
    assert ddl[-1].startswith("CREATE TABLE WM_AB12_WORKMEM_MEMORY_HISTORY (resource_id VARCHAR2(512) NOT NULL,")
    assert "content CLOB" in ddl[-1] and "source CLOB" in ddl[-1]
    assert "changed_at TIMESTAMP WITH TIME ZONE NOT NULL" in ddl[-1]
    assert ddl[-1].endswith("PRIMARY KEY (resource_id, scope, memory_id, version))")
    assert DIALECT.drop_tables()[0] == "DROP TABLE WM_AB12_WORKMEM_MEMORY_HISTORY PURGE"
    assert "source" in CLOB_PARAMS  # a source of up to 16 KiB is bound as CLOB


def test_a_version_is_numbered_in_its_insert_and_retention_prunes_below_the_bound() -> None:
    insert, prune = DIALECT.record_version(KEY, "", T0, Recording("merge", T0, {"a": 1}, '{"a":1}', keep=5))
    sql, params = DIALECT.render(insert)
    assert sql.startswith("INSERT INTO WM_AB12_WORKMEM_MEMORY_HISTORY (resource_id, scope, memory_id, version,")
    assert "(SELECT COALESCE(MAX(version), 0) + 1 FROM WM_AB12_WORKMEM_MEMORY_HISTORY WHERE resource_id = " in sql
    assert "TO_TIMESTAMP_TZ(:changed_at, 'YYYY-MM-DD HH24:MI:SS.FF3 TZH:TZM')" in sql
    assert params == {
        "resource_id": "u1",
        "scope": "thread",
        "memory_id": "t1",
        "working_memory": EMPTY_STRING_SENTINEL,  # '' is NULL in Oracle: stored as Mastra stores it
        "changed_at": "2025-01-02 03:04:05.678 +00:00",
        "kind": "merge",
        "source": '{"a":1}',
    }
    sql, params = DIALECT.render(prune)
    assert sql.startswith("DELETE FROM WM_AB12_WORKMEM_MEMORY_HISTORY WHERE resource_id = :resource_id AND ")
    assert "AND version <= (SELECT MAX(version) FROM WM_AB12_WORKMEM_MEMORY_HISTORY WHERE " in sql
    assert params == {"resource_id": "u1", "scope": "thread", "memory_id": "t1", "keep": 5}
    assert len(DIALECT.record_version(HistoryKey("u1"), None, T0, Recording("set", T0))) == 1  # keep all: no prune


def test_versions_read_newest_first_with_fetch_first_and_decode_the_sentinel() -> None:
    sql, params = DIALECT.render(DIALECT.select_versions(HistoryKey("u1"), 20, 7))
    assert 'SELECT version, content AS "workingMemory", SYS_EXTRACT_UTC(changed_at), kind, source FROM ' in sql
    assert sql.endswith("AND version < :before ORDER BY version DESC FETCH FIRST :limit ROWS ONLY")
    assert params == {"resource_id": "u1", "scope": "resource", "memory_id": "u1", "before": 7, "limit": 20}
    row = decode_row(["VERSION", "workingMemory", "CHANGED", "KIND", "SOURCE"], (3, EMPTY_STRING_SENTINEL, NAIVE))
    assert row[1] == ""


def test_import_is_one_insert_only_merge_per_version() -> None:
    version = MemoryVersion("u1", None, 4, "text", T0, "import", {"from": "copy"})
    sql, params = DIALECT.render(DIALECT.create_version(version))
    assert sql.startswith("MERGE INTO WM_AB12_WORKMEM_MEMORY_HISTORY t USING (SELECT :resource_id AS rid,")
    assert "ON (t.resource_id = s.rid AND t.scope = s.sc AND t.memory_id = s.mid AND t.version = s.v)" in sql
    assert "WHEN MATCHED" not in sql
    assert params["version"] == 4 and params["source"] == '{"from":"copy"}' and params["scope"] == "resource"
    with pytest.raises(NotImplementedError):
        DIALECT.insert_versions([version])  # ON CONFLICT is not Oracle's


def test_erasing_deletes_the_locked_threads_then_the_versions_not_of_survivors() -> None:
    sql, _ = DIALECT.render(DIALECT.lock_threads_of("u1"))
    assert sql == 'SELECT id FROM WM_AB12_MASTRA_THREADS WHERE "resourceId" = :resource_id ORDER BY id FOR UPDATE'
    sql, params = DIALECT.render(DIALECT.delete_threads_of("u1", ["a", "b"]))
    assert sql.endswith('WHERE "resourceId" = :resource_id AND id IN (:t0, :t1)')
    assert params == {"resource_id": "u1", "t0": "a", "t1": "b"}
    sql, _ = DIALECT.render(DIALECT.delete_resource_versions("u1"))
    assert "(scope = 'resource' OR memory_id NOT IN (SELECT id FROM WM_AB12_MASTRA_THREADS WHERE" in sql


def test_a_thread_merge_writes_its_version_before_the_one_commit(store: OracleStorage, pool: FakePool) -> None:
    store.history = HistoryPolicy(3)
    row = ("t1", "u1", "t", '{"workingMemory":"{\\"a\\":1}"}', NAIVE, NAIVE)
    pool.script = [("SELECT", (1, [row])), ("UPDATE", (1, [])), ("INSERT INTO", (1, [])), ("DELETE", (0, []))]
    store.merge_working_memory({"b": 2}, scope="thread", thread_id="t1", source={"agent": "a"})
    assert [entry.split(" ")[0] for entry in pool.log] == ["SELECT", "UPDATE", "INSERT", "DELETE", "COMMIT"]
    assert pool.params[2]["working_memory"] == '{"a":1,"b":2}' and pool.params[2]["resource_id"] == "u1"
    assert pool.params[2]["source"] == '{"agent":"a"}' and pool.params[3]["keep"] == 3


def test_a_refused_version_rolls_the_write_back(store: OracleStorage, pool: FakePool) -> None:
    import oracledb

    store.history = HistoryPolicy()
    row = ("t1", "u1", "t", None, NAIVE, NAIVE)
    refused = oracledb.DatabaseError("ORA-01653: unable to extend table")
    pool.script = [("SELECT", (1, [row])), ("UPDATE", (1, [])), ("INSERT INTO", refused)]
    with pytest.raises(Exception, match="ORA-01653"):
        store.update_thread("t1", metadata={"workingMemory": "x"})
    assert "COMMIT" not in pool.log and pool.log[-1] == "ROLLBACK"


def test_delete_resource_is_one_transaction(store: OracleStorage, pool: FakePool) -> None:
    resource = ("u1", "memory", None, NAIVE, NAIVE)
    pool.script = [
        ("SELECT", (1, [resource])),
        ("SELECT id", (2, [("b",), ("a",)])),
        ("DELETE FROM MASTRA_THREADS", (2, [])),
        ("DELETE FROM MASTRA_RESOURCES", (1, [])),
        ("DELETE FROM WORKMEM_MEMORY_HISTORY", (5, [])),
    ]
    erased = store.delete_resource("u1")
    assert (erased.resource, erased.threads, erased.versions) == (True, ("a", "b"), 5)
    assert pool.log[0].endswith("FOR UPDATE") and pool.log[-1] == "COMMIT" and pool.log.count("COMMIT") == 1


def test_delete_thread_with_history_takes_its_versions(store: OracleStorage, pool: FakePool) -> None:
    store.history = HistoryPolicy()
    pool.script = [
        ("SELECT", (1, [("t1", "u1", "t", None, NAIVE, NAIVE)])),
        ("DELETE FROM MASTRA_THREADS", (1, [])),
        ("DELETE FROM WORKMEM_MEMORY_HISTORY", (2, [])),
    ]
    assert store.delete_thread("t1", resource_id="u1") is True
    assert pool.params[2] == {"resource_id": "u1", "scope": "thread", "memory_id": "t1"}
    assert pool.log[-1] == "COMMIT" and pool.log.count("COMMIT") == 1
