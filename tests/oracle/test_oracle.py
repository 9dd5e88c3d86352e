"""Oracle adapter checks that need no server: URL parsing, the SQL the dialect renders, value and row
mapping, error mapping, and the adapter's transaction logic driven through a scripted fake driver.

None of this is conformance: the fake answers what its script says, not what Oracle would. The
server-backed tests are ``test_oracle_server.py`` and ``test_conformance_backends.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import oracledb
import pytest

import workmem
from workmem.adapters.oracle import AsyncOracleStorage, OracleSettings, OracleStorage
from workmem.adapters.oracle.dialect import (
    EMPTY_STRING_SENTINEL,
    ESCAPED_PREFIX,
    OracleDialect,
    decode_row,
    decode_text,
    encode_text,
    encode_timestamp,
    error_kind,
    is_connection_error,
    is_unique_violation,
    oracle_error_code,
)
from workmem.adapters.sql import Statement
from workmem.adapters.sql.rows import resource_from_row, thread_from_row
from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    StorageClosedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
    WorkingMemoryFormatError,
)
from workmem.hooks import ListQuery
from workmem.records import Resource, Thread

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

# -- URLs ------------------------------------------------------------------------------------


def test_url_with_service_name_query() -> None:
    config = OracleSettings.from_url("oracle://scott:tiger@db.example:1522/?service_name=FREEPDB1")
    assert (config.user, config.password, config.host, config.port, config.service_name) == (
        "scott",
        "tiger",
        "db.example",
        1522,
        "FREEPDB1",
    )
    assert config.table_prefix == ""
    assert (config.min_size, config.max_size, config.timeout, config.connect_timeout) == (0, 8, 10.0, 5.0)


def test_url_with_service_in_path_default_port_and_driver_scheme() -> None:
    config = OracleSettings.from_url("oracle+oracledb://scott:tiger@db.example/ORCLPDB1")
    assert (config.port, config.service_name) == (1521, "ORCLPDB1")
    assert OracleSettings.from_url("oracle://u:p@h/S?service_name=S").service_name == "S"


def test_url_decodes_user_and_password() -> None:
    config = OracleSettings.from_url("oracle://app%40x:p%40ss%2Fw%3Ard@h:1521/S")
    assert (config.user, config.password) == ("app@x", "p@ss/w:rd")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("oracle://scott:tiger@h:1521/", "service name"),
        ("oracle://scott:tiger@h:1521/A?service_name=B", "two different services"),
        ("oracle://scott@h:1521/S", "user:password"),
        ("oracle://:tiger@h:1521/S", "user:password"),
        ("oracle:///S", "host"),
        ("oracle://scott:tiger@h:1521/S?sid=X", "unknown Oracle URL parameters: sid"),
        ("oracle://scott:tiger@h:notaport/S", "not a valid"),
        ("postgresql://scott:tiger@h/S", "not an Oracle URL scheme"),
    ],
)
def test_bad_urls_are_validation_errors_without_the_password(url: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        OracleSettings.from_url(url)
    assert "tiger" not in str(info.value)


def test_options_and_their_validation() -> None:
    config = OracleSettings.from_url(
        "oracle://u:p@h/S", min_size=1, max_size=3, timeout=2, connect_timeout=0.5, table_prefix="wm_x1_"
    )
    assert (config.min_size, config.max_size, config.timeout, config.connect_timeout) == (1, 3, 2.0, 0.5)
    assert config.table_prefix == "WM_X1_"
    assert OracleSettings.from_url("oracle://u:p@h/S?table_prefix=t_").table_prefix == "T_"
    with pytest.raises(ValidationError, match="unknown Oracle options: poolsize"):
        OracleSettings.from_url("oracle://u:p@h/S", poolsize=3)
    with pytest.raises(ValidationError, match="min_size"):
        OracleSettings.from_url("oracle://u:p@h/S", min_size=5, max_size=2)
    with pytest.raises(ValidationError, match="max_size"):
        OracleSettings.from_url("oracle://u:p@h/S", max_size=0)
    with pytest.raises(ValidationError, match="number"):
        OracleSettings.from_url("oracle://u:p@h/S", connect_timeout=True)


def test_config_repr_hides_the_password() -> None:
    config = OracleSettings.from_url("oracle://scott:s3cr3t-pw@h/S")
    assert "s3cr3t-pw" not in repr(config)
    assert config.masked_url == "oracle://scott:***@h/S"


@pytest.mark.parametrize("prefix", ["1abc", "a-b", "a b", 'x"; DROP TABLE t; --', "a" * 31])
def test_table_prefix_must_be_a_plain_identifier(prefix: str) -> None:
    with pytest.raises(ValidationError, match="table_prefix"):
        OracleSettings.from_url("oracle://u:p@h/S", table_prefix=prefix)


# -- the SQL the dialect renders -------------------------------------------------------------------

RESOURCE = Resource("r-1", "# notes", {"k": 1}, T0, T0 + timedelta(seconds=1))
THREAD = Thread("t-1", "r-1", "A title", {"workingMemory": "{}"}, T0, T0)
NATIVE = OracleDialect()
CLOB_19C = OracleDialect("wm_ab12_", native_json=False)


def _statements(dialect: OracleDialect) -> dict[str, Statement]:
    return {
        "select_resource": dialect.select_resource("r-1"),
        "select_resource_locked": dialect.select_resource("r-1", lock=True),
        "select_thread": dialect.select_thread("t-1"),
        "select_thread_locked": dialect.select_thread("t-1", lock=True),
        "count_threads": dialect.count_threads("r-1"),
        "list_page": dialect.list_threads(ListQuery("r-1", 2, 10, "created_at", "desc")),
        "list_all": dialect.list_threads(ListQuery("r-1", 0, None, "updated_at", "asc")),
        "upsert_resource": dialect.upsert_resource(RESOURCE),
        "insert_missing_resource": dialect.insert_missing_resource("r-1", T0),
        "save_thread": dialect.save_thread(THREAD, T0),
        "write_thread": dialect.write_thread(THREAD),
        "delete_thread": dialect.delete_thread("t-1"),
        "metadata_types": dialect.metadata_types(),
    }


_BIND = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_RESERVED = {"resource", "level", "date", "number", "size", "mode", "uid", "user", "comment", "rows", "row", "session"}


def _without_literals(sql: str) -> str:
    return re.sub(r"'[^']*'", "''", sql)


@pytest.mark.parametrize("dialect", [NATIVE, CLOB_19C], ids=["21c", "19c-prefixed"])
def test_rendered_binds_are_named_complete_and_not_reserved_words(dialect: OracleDialect) -> None:
    for name, statement in _statements(dialect).items():
        sql, params = dialect.render(statement)
        placeholders = set(_BIND.findall(_without_literals(sql)))
        assert placeholders == set(params), name  # python-oracledb refuses a bind the SQL does not name
        assert not placeholders & _RESERVED, name  # ORA-01745


@pytest.mark.parametrize("dialect", [NATIVE, CLOB_19C], ids=["21c", "19c-prefixed"])
def test_rendered_sql_uses_only_oracle_syntax(dialect: OracleDialect) -> None:
    for name, statement in _statements(dialect).items():
        sql = _without_literals(dialect.render(statement)[0]).replace("RETURNING CLOB)", ")")  # JSON_SERIALIZE's
        for construct in ("ON CONFLICT", "RETURNING", " LIMIT ", "excluded.", "CAST(", "::", "jsonb", "now()"):
            assert construct not in sql, (name, construct)
        assert not re.search(r"\b(?:INTO|FROM|UPDATE)\s+\S+\s+AS\s+\w+", sql), name  # no AS before a table alias


def test_no_value_is_ever_spliced_into_sql() -> None:
    evil = "x'); DROP TABLE users; --"
    resource = Resource(evil, evil, {evil: evil}, T0, T0)
    thread = Thread(evil, evil + "2", evil, {evil: evil}, T0, T0)
    statements = [
        NATIVE.select_resource(evil, lock=True),
        NATIVE.select_thread(evil, lock=True),
        NATIVE.list_threads(ListQuery(evil, 1, 5, "created_at", "asc")),
        NATIVE.upsert_resource(resource),
        NATIVE.insert_missing_resource(evil, T0),
        NATIVE.save_thread(thread, T0),
        NATIVE.write_thread(thread),
        NATIVE.delete_thread(evil),
        NATIVE.count_threads(evil),
    ]
    for statement in statements:
        sql, params = NATIVE.render(statement)
        assert "DROP" not in sql and "2025" not in sql  # timestamps are binds too
        assert evil in params.values() or any(evil in str(value) for value in params.values())


def test_camelcase_columns_are_quoted_and_tables_named_like_mastra() -> None:
    for name, statement in _statements(NATIVE).items():
        bare = re.sub(r'"[^"]*"', '""', statement.sql)
        for column in ("resourceId", "workingMemory", "createdAt", "updatedAt"):
            assert column not in bare, (name, column)
    assert " FROM MASTRA_THREADS " in NATIVE.select_thread("t").sql + " "
    assert " FROM MASTRA_RESOURCES " in NATIVE.select_resource("r").sql + " "
    assert " FROM WM_AB12_MASTRA_THREADS " in CLOB_19C.select_thread("t").sql + " "
    assert NATIVE.ddl()[2] == (
        'CREATE INDEX MASTRA_THREADS_RESOURCE_CREATED_IDX_IDX ON MASTRA_THREADS ("resourceId", "createdAt")'
    )


def test_save_thread_is_a_merge_whose_update_branch_checks_the_owner() -> None:
    sql, params = NATIVE.render(NATIVE.save_thread(THREAD, T0 + timedelta(hours=1)))
    sql = " ".join(sql.split())
    match = re.fullmatch(
        r"MERGE INTO MASTRA_THREADS t USING \(SELECT (?P<source>.*) FROM dual\) s ON \(t\.id = s\.id\) "
        r"WHEN MATCHED THEN UPDATE SET (?P<set>.*) WHERE (?P<where>.*) "
        r"WHEN NOT MATCHED THEN INSERT \((?P<cols>.*)\) VALUES \((?P<vals>.*)\)",
        sql,
    )
    assert match, sql
    assert match["where"] == 't."resourceId" = s.rid'
    assert match["set"] == 't.title = s.title, t.metadata = s.md, t."updatedAt" = s.now_ts'  # never owner/createdAt
    assert match["cols"] == 'id, "resourceId", title, metadata, "createdAt", "updatedAt"'
    assert match["vals"] == "s.id, s.rid, s.title, s.md, s.ca, s.ua"
    assert (params["now"], params["created_at"]) == ("2025-01-02 04:04:05.678 +00:00", "2025-01-02 03:04:05.678 +00:00")
    assert params["metadata"] == '{"workingMemory":"{}"}'


def test_upsert_resource_replaces_the_record_whole() -> None:
    sql = " ".join(NATIVE.upsert_resource(RESOURCE).sql.split())
    matched = sql.split("WHEN MATCHED THEN UPDATE SET ")[1].split(" WHEN NOT MATCHED")[0]
    assert matched == 't."workingMemory" = s.wm, t.metadata = s.md, t."createdAt" = s.ca, t."updatedAt" = s.ua'


def test_insert_missing_resource_takes_a_lost_race_as_done() -> None:
    sql, params = NATIVE.render(NATIVE.insert_missing_resource("r", T0))
    assert sql.startswith("BEGIN MERGE INTO MASTRA_RESOURCES t USING (SELECT :id AS id")
    assert "WHEN MATCHED" not in sql
    assert sql.endswith("; EXCEPTION WHEN DUP_VAL_ON_INDEX THEN NULL; END;")
    assert params == {"id": "r", "now": "2025-01-02 03:04:05.678 +00:00"}


def test_reads_convert_to_utc_and_serialize_native_json() -> None:
    assert 'SYS_EXTRACT_UTC("createdAt")' in NATIVE.select_thread("t").sql
    assert "JSON_SERIALIZE(metadata RETURNING CLOB)" in NATIVE.select_thread("t").sql
    assert "JSON_SERIALIZE" not in CLOB_19C.select_thread("t").sql
    assert NATIVE.select_thread("t", lock=True).sql.endswith(" FOR UPDATE")
    assert "FOR UPDATE" not in NATIVE.select_thread("t").sql


def test_list_threads_pages_with_offset_fetch() -> None:
    sql, params = NATIVE.render(NATIVE.list_threads(ListQuery("r", 2, 20, "updated_at", "asc")))
    assert 'ORDER BY "updatedAt" ASC, id ASC OFFSET :offset ROWS FETCH NEXT :limit ROWS ONLY' in sql
    assert (params["offset"], params["limit"]) == (40, 20)
    everything, _ = NATIVE.render(NATIVE.list_threads(ListQuery("r", 0, None, "created_at", "desc")))
    assert "FETCH" not in everything and everything.endswith('ORDER BY "createdAt" DESC, id DESC')


def test_ddl_per_server_version() -> None:
    native, clob = NATIVE.ddl(), CLOB_19C.ddl()
    assert "metadata JSON," in native[1] and "metadata JSON," in native[0]
    assert "metadata CLOB CHECK (metadata IS JSON)," in clob[1]
    for ddl in native[:2]:
        assert "id VARCHAR2(512) PRIMARY KEY" in ddl
        assert '"createdAt" TIMESTAMP WITH TIME ZONE NOT NULL' in ddl
    assert native[0].startswith('CREATE TABLE MASTRA_RESOURCES (id VARCHAR2(512) PRIMARY KEY, "workingMemory" CLOB,')
    assert '"resourceId" VARCHAR2(512) NOT NULL, title VARCHAR2(1024),' in native[1]
    assert CLOB_19C.drop_tables() == [
        "DROP TABLE WM_AB12_WORKMEM_MEMORY_HISTORY PURGE",
        "DROP TABLE WM_AB12_MASTRA_THREADS PURGE",
        "DROP TABLE WM_AB12_MASTRA_RESOURCES PURGE",
    ]


def test_render_encodes_empty_titles_and_working_memory() -> None:
    _, params = NATIVE.render(NATIVE.write_thread(Thread("t", "r", "", None, T0, T0)))
    assert params["title"] == EMPTY_STRING_SENTINEL and params["metadata"] is None
    _, params = NATIVE.render(NATIVE.upsert_resource(Resource("r", "", None, T0, T0)))
    assert params["working_memory"] == EMPTY_STRING_SENTINEL


# -- values and rows ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["", "plain", EMPTY_STRING_SENTINEL, EMPTY_STRING_SENTINEL + "x", ESCAPED_PREFIX, ESCAPED_PREFIX + "y", " "],
)
def test_text_encoding_round_trips_like_mastra(text: str) -> None:
    encoded = encode_text(text)
    assert encoded  # never '' (Oracle would store NULL)
    assert decode_text(encoded) == text


def test_text_encoding_matches_mastra() -> None:
    assert encode_text("") == "__MASTRA_ORACLE_EMPTY_STRING__"
    assert encode_text(None) is None and decode_text(None) is None
    assert encode_text("hi") == "hi"


def test_timestamps_are_bound_as_utc_text() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert encode_timestamp(datetime(2025, 1, 2, 5, 4, 5, 678999, tzinfo=plus2)) == "2025-01-02 03:04:05.678 +00:00"


def test_rows_decode_like_mastra_wrote_them() -> None:
    naive = datetime(2025, 1, 2, 3, 4, 5, 678123)  # SYS_EXTRACT_UTC gives naive UTC
    row = decode_row(["ID", "workingMemory", "x", "y", "z"], ("r", EMPTY_STRING_SENTINEL, '{"a":1}', naive, naive))
    assert resource_from_row(row) == Resource("r", "", {"a": 1}, T0, T0)
    row = decode_row(["ID", "resourceId", "TITLE", "m", "c", "u"], ("t", "r", None, None, naive, naive))
    assert thread_from_row(row) == Thread("t", "r", "", None, T0, T0)  # NULL title (older Mastra rows) is ''
    # only the text columns are decoded: an id that happens to equal the sentinel stays as it is
    row = decode_row(["ID", "resourceId", "TITLE"], (EMPTY_STRING_SENTINEL, "r", ESCAPED_PREFIX + "x"))
    assert row == (EMPTY_STRING_SENTINEL, "r", "x")


# -- errors ------------------------------------------------------------------------------------------


def _error(cls: type[Exception], code: int, full_code: str, *, dead: bool = False) -> Exception:
    return cls(SimpleNamespace(code=code, full_code=full_code, is_session_dead=dead, message=f"{full_code}: boom"))


def test_error_classification() -> None:
    assert oracle_error_code(_error(oracledb.IntegrityError, 1, "ORA-00001")) == (1, "ORA-00001")
    assert oracle_error_code(ValueError()) == (0, "")
    assert is_unique_violation(1, "ORA-00001") and not is_unique_violation(2290, "ORA-02290")
    for code, full in [(0, "DPY-6005"), (0, "DPY-4011"), (0, "DPY-4005"), (12514, "ORA-12514"), (3113, "ORA-03113")]:
        assert is_connection_error(code, full), full
        assert error_kind(code, full) is BackendUnavailableError, full
    for code, full in [(60, "ORA-00060"), (8177, "ORA-08177"), (54, "ORA-00054")]:
        assert error_kind(code, full) is BackendBusyError, full
    # a refused login, a missing table, a privilege, a constraint: retrying fails the same way
    for code, full in [(1017, "ORA-01017"), (28000, "ORA-28000"), (942, "ORA-00942"), (1031, "ORA-01031")]:
        assert not is_connection_error(code, full), full
        assert error_kind(code, full) is BackendRefusedError, full


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server_fails_fast_with_the_password_masked(caplog: pytest.LogCaptureFixture) -> None:
    password = "Sup3r-Secret_pw"
    url = f"oracle://scott:{password}@127.0.0.1:{_closed_port()}/?service_name=FREEPDB1"
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as info:
        workmem.connect(url, connect_timeout=2)
    assert time.monotonic() - started < 5
    exc = info.value
    assert isinstance(exc.__cause__, workmem.DriverError) and exc.__cause__.driver.startswith("oracledb.")
    assert exc.__cause__.code == "DPY-6005"  # the driver's code, kept on the detached cause
    with caplog.at_level(logging.ERROR):
        logging.getLogger("test_oracle").error("connect failed: %s", exc, exc_info=exc)
    for text in (str(exc), repr(exc), caplog.text):
        assert password not in text
    assert "scott:***@127.0.0.1" in str(exc) and "DPY-6005" in str(exc)


# -- the adapter's logic through a scripted fake driver (exercises code paths; not conformance) -------------

NAIVE = datetime(2025, 1, 2, 3, 4, 5, 678000)
THREAD_COLUMNS = ("ID", "resourceId", "TITLE", "METADATA", "CREATED", "UPDATED")
THREAD_ROW = ("t-1", "r-1", "A title", '{"workingMemory":"{}"}', NAIVE, NAIVE)


class FakeCursor:
    def __init__(self, pool: FakePool) -> None:
        self.pool = pool
        self.rowcount = 0
        self.arraysize = 100
        self.outputtypehandler: Any = None
        self.description: list[tuple[str]] | None = None
        self._rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.cursors_closed += 1

    def setinputsizes(self, **sizes: Any) -> None:
        self.pool.input_sizes.append(sizes)

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> FakeCursor:
        self.pool.log.append(sql)
        self.pool.params.append(dict(params or {}))
        if sql.startswith(("CREATE", "DROP", "ALTER SESSION")):
            answer = self.pool.ddl_errors.pop(0) if sql.startswith("CREATE") and self.pool.ddl_errors else (0, [])
        elif "user_tab_columns" in sql:
            answer = (2, [(params["resources_table"], "JSON"), (params["threads_table"], "JSON")])  # type: ignore[index]
        else:
            prefix, answer = self.pool.script.pop(0)
            assert sql.startswith(prefix), (prefix, sql)
        if isinstance(answer, BaseException):
            raise answer
        self.rowcount, self._rows = answer
        self.description = [(name,) for name in THREAD_COLUMNS[: len(self._rows[0])]] if self._rows else None
        return self

    def executemany(self, sql: str, rows: list[dict[str, Any]], **options: Any) -> None:
        assert options == {"batcherrors": True, "arraydmlrowcounts": True}
        self.pool.log.append(sql)
        self.pool.params.extend(dict(row) for row in rows)
        prefix, answer = self.pool.script.pop(0)
        assert sql.startswith(prefix), (prefix, sql)
        self._counts, self._batch_errors = answer

    def getarraydmlrowcounts(self) -> list[int]:
        return list(self._counts)

    def getbatcherrors(self) -> list[Any]:
        return list(self._batch_errors)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self._rows)


class FakeConnection:
    def __init__(self, pool: FakePool) -> None:
        self.pool = pool
        self.version = pool.version

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.pool)

    def commit(self) -> None:
        self.pool.log.append("COMMIT")

    def rollback(self) -> None:
        self.pool.log.append("ROLLBACK")


class FakePool:
    """Answers statements from ``script``: ``(SQL prefix, (rowcount, rows) or an exception)``, in order."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.version = "23.5.0.24.7"
        self.log: list[str] = []
        self.params: list[dict[str, Any]] = []
        self.input_sizes: list[dict[str, Any]] = []
        self.script: list[tuple[str, Any]] = []
        self.ddl_errors: list[Any] = []
        self.cursors_closed = 0
        self.closed = False

    def acquire(self) -> FakeConnection:
        return FakeConnection(self)

    def release(self, connection: FakeConnection) -> None:
        pass

    def close(self, force: bool = False) -> None:
        self.closed = True


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> FakePool:
    fake = FakePool()

    def create_pool(**kwargs: Any) -> FakePool:
        fake.kwargs = kwargs
        return fake

    monkeypatch.setattr(oracledb, "create_pool", create_pool)
    return fake


@pytest.fixture
def store(pool: FakePool) -> Iterator[OracleStorage]:
    storage = OracleStorage.from_url("oracle://scott:tiger@h:1521/S", max_size=3, timeout=2.5)
    pool.log.clear()
    pool.params.clear()
    yield storage
    storage.close()
    assert pool.closed


def test_pool_settings(store: OracleStorage, pool: FakePool) -> None:
    kwargs = pool.kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["service_name"], kwargs["user"]) == ("h", 1521, "S", "scott")
    assert (kwargs["min"], kwargs["max"], kwargs["wait_timeout"], kwargs["tcp_connect_timeout"]) == (0, 3, 2500, 5.0)
    assert kwargs["getmode"] == oracledb.POOL_GETMODE_TIMEDWAIT
    assert "tiger" not in repr(store)


def test_save_thread_of_another_owner_is_refused(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("MERGE INTO", (0, []))]
    with pytest.raises(ThreadOwnershipError):
        store.save_thread(Thread("t-1", "r-2", "x"))
    assert pool.log[-1] == "ROLLBACK"


def test_save_thread_runs_again_after_losing_an_insert_race(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [
        ("MERGE INTO", _error(oracledb.IntegrityError, 1, "ORA-00001")),
        ("MERGE INTO", (0, [])),  # the winner's row is visible now, with another owner
    ]
    with pytest.raises(ThreadOwnershipError):
        store.save_thread(Thread("t-1", "r-2", "x"))
    assert [entry for entry in pool.log if not entry.startswith("MERGE")] == ["ROLLBACK", "ROLLBACK"]


def test_save_thread_same_owner_returns_the_stored_row(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("MERGE INTO", (1, [])), ("SELECT", (1, [THREAD_ROW]))]
    stored = store.save_thread(Thread("t-1", "r-1", "A title"))
    assert stored.created_at == T0 and stored.metadata == {"workingMemory": "{}"}
    assert pool.log[-1] == "COMMIT"
    assert {"metadata": oracledb.DB_TYPE_CLOB} in pool.input_sizes


def test_other_integrity_errors_are_not_retried(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("MERGE INTO", _error(oracledb.IntegrityError, 2290, "ORA-02290"))]
    with pytest.raises(BackendRefusedError, match="ORA-02290") as info:
        store.save_thread(Thread("t-1", "r-1"))
    assert not isinstance(info.value, BackendUnavailableError)
    assert pool.script == []


def test_save_resource_runs_again_after_losing_an_insert_race(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("MERGE INTO", _error(oracledb.IntegrityError, 1, "ORA-00001")), ("MERGE INTO", (1, []))]
    resource = Resource("r", "x" * 100_000, None, T0, T0)
    assert store.save_resource(resource) == resource
    assert pool.log[-1] == "COMMIT"
    assert {"working_memory": oracledb.DB_TYPE_CLOB, "metadata": oracledb.DB_TYPE_CLOB} in pool.input_sizes


def test_update_resource_creates_then_locks_then_writes(store: OracleStorage, pool: FakePool) -> None:
    row = ("r", None, '{"a":1}', NAIVE, NAIVE)
    pool.script = [("BEGIN MERGE", (1, [])), ("SELECT", (1, [row])), ("MERGE INTO", (1, []))]
    updated = store.update_resource("r", metadata={"b": 2})
    assert updated.metadata == {"a": 1, "b": 2} and updated.created_at == T0
    assert pool.log[1].endswith(" FOR UPDATE") and pool.log[-1] == "COMMIT"


def test_merge_refuses_non_object_text_and_changes_nothing(store: OracleStorage, pool: FakePool) -> None:
    row = ("t-1", "r-1", "t", '{"workingMemory":"[1,2]"}', NAIVE, NAIVE)
    pool.script = [("SELECT", (1, [row]))]
    with pytest.raises(WorkingMemoryFormatError):
        store.merge_working_memory({"a": 1}, scope="thread", thread_id="t-1")
    assert not any(entry.startswith(("UPDATE", "MERGE")) for entry in pool.log)
    assert pool.log[0].endswith("FOR UPDATE") and pool.log[-1] == "ROLLBACK"


def test_merge_thread_scope_writes_the_merged_text(store: OracleStorage, pool: FakePool) -> None:
    row = ("t-1", "r-1", "", '{"workingMemory":"{\\"a\\":{\\"b\\":1,\\"c\\":2}}","x":1}', NAIVE, NAIVE)
    pool.script = [("SELECT", (1, [row])), ("UPDATE", (1, []))]
    merged = store.merge_working_memory({"a": {"c": None, "d": [1]}}, scope="thread", thread_id="t-1")
    assert merged == {"a": {"b": 1, "d": [1]}}
    written = pool.params[1]
    assert written["metadata"] == '{"workingMemory":"{\\"a\\":{\\"b\\":1,\\"d\\":[1]}}","x":1}'
    assert written["title"] == EMPTY_STRING_SENTINEL and pool.log[-1] == "COMMIT"


def test_update_thread_of_a_missing_thread(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("SELECT", (0, []))]
    with pytest.raises(ThreadNotFoundError):
        store.update_thread("nope", title="x")


def test_list_threads_is_one_statement_with_its_count(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("SELECT", (2, [(*THREAD_ROW, 3), (*THREAD_ROW, 3)]))]
    page = store.list_threads("r-1", page=0, per_page=2)
    assert (page.total, len(page.threads), page.has_more) == (3, 2, True)
    assert "COMMIT" not in pool.log  # a read commits nothing


def test_a_read_runs_again_once_on_a_dead_session(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("SELECT", _error(oracledb.DatabaseError, 0, "DPY-4011", dead=True)), ("SELECT", (0, []))]
    assert store.get_resource("r-1") is None
    pool.script = [("SELECT", _error(oracledb.DatabaseError, 0, "DPY-4011", dead=True))] * 2
    with pytest.raises(BackendUnavailableError, match="DPY-4011"):
        store.get_resource("r-1")


def test_a_write_never_runs_again_on_a_dead_session(store: OracleStorage, pool: FakePool) -> None:
    # delete_thread is a write transaction (the row locked, then it and its history deleted): its first statement
    # lost on a dead session is never run again
    pool.script = [("SELECT", _error(oracledb.DatabaseError, 0, "DPY-4011", dead=True)), ("SELECT", (1, []))]
    with pytest.raises(BackendUnavailableError):
        store.delete_thread("t-1")
    assert len(pool.script) == 1


def test_schema_setup_tolerates_existing_objects_and_retries_busy_ddl(pool: FakePool) -> None:
    pool.ddl_errors = [
        _error(oracledb.DatabaseError, 955, "ORA-00955"),  # resources table exists
        _error(oracledb.DatabaseError, 54, "ORA-00054"),  # threads: busy once, then created
        (0, []),
        _error(oracledb.DatabaseError, 1408, "ORA-01408"),  # an index on those columns exists
    ]
    with OracleStorage.from_url("oracle://u:p@h/S") as storage:
        assert storage.dialect.native_json
    assert pool.ddl_errors == []


def test_schema_setup_on_19c_uses_clob_json(pool: FakePool) -> None:
    pool.version = "19.3.0.0.0"
    with OracleStorage.from_url("oracle://u:p@h/S") as storage:
        assert any("metadata CLOB CHECK (metadata IS JSON)" in entry for entry in pool.log)
        assert storage.dialect.native_json  # the fake's dictionary says JSON: what is there wins


def test_schema_setup_falls_back_when_the_json_type_is_missing(pool: FakePool) -> None:
    pool.ddl_errors = [_error(oracledb.DatabaseError, 902, "ORA-00902")]
    with OracleStorage.from_url("oracle://u:p@h/S"):
        creates = [entry for entry in pool.log if entry.startswith("CREATE TABLE")]
    mastra = [entry for entry in creates if "MASTRA_" in entry]  # (the history table has no metadata column)
    assert "metadata JSON" in mastra[0] and all("CLOB CHECK" in entry for entry in mastra[1:])


def test_schema_setup_fails_on_other_ddl_errors_and_closes_the_pool(pool: FakePool) -> None:
    pool.ddl_errors = [_error(oracledb.DatabaseError, 1031, "ORA-01031")]  # insufficient privileges
    with pytest.raises(BackendRefusedError, match="ORA-01031"):
        OracleStorage.from_url("oracle://u:p@h/S")
    assert pool.closed


def test_closed_storage_refuses_work(store: OracleStorage) -> None:
    store.close()
    store.close()
    with pytest.raises(StorageClosedError, match="closed"):
        store.get_thread("t")


def test_the_sync_class_names_its_async_twin() -> None:
    assert OracleStorage.async_adapter == "workmem.adapters.oracle:AsyncOracleStorage"
    assert workmem.adapters.oracle.AsyncOracleStorage is AsyncOracleStorage  # type: ignore[attr-defined]


def test_runs_again_decides_per_attempt() -> None:
    from workmem.adapters.oracle.dialect import ATTEMPTS, runs_again

    race = _error(oracledb.IntegrityError, 1, "ORA-00001")
    dead = _error(oracledb.DatabaseError, 0, "DPY-4011", dead=True)
    assert runs_again(race, 1, read=False) and runs_again(race, ATTEMPTS - 1, read=False)
    assert not runs_again(race, ATTEMPTS, read=False) and not runs_again(race, 1, read=True)
    assert runs_again(dead, 1, read=True) and not runs_again(dead, 2, read=True)
    assert not runs_again(dead, 1, read=False)  # a write may have run before the session dropped
    assert not runs_again(_error(oracledb.DatabaseError, 942, "ORA-00942"), 1, read=True)


# -- the async class through a scripted fake asyncio driver (exercises code paths; not conformance) -----
#
# The fakes answer from the same script as the sync fakes above; every call that is a coroutine in
# python-oracledb's AsyncConnectionPool / AsyncConnection / AsyncCursor is one here, and suspends
# (``asyncio.sleep(0)``) as a network round trip would, so a path that forgot to await fails.


class FakeAsyncCursor(FakeCursor):
    async def execute(self, sql: str, params: dict[str, Any] | None = None) -> FakeAsyncCursor:  # type: ignore[override]
        await asyncio.sleep(0)
        super().execute(sql, params)
        return self

    async def fetchall(self) -> list[tuple[Any, ...]]:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().fetchall()


class FakeAsyncConnection(FakeConnection):
    def cursor(self) -> FakeAsyncCursor:
        return FakeAsyncCursor(self.pool)

    async def commit(self) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().commit()

    async def rollback(self) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().rollback()


class FakeAsyncPool(FakePool):
    """:class:`FakePool` with python-oracledb's asyncio pool shape; one pooled session, set up on first use."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.set_up = False
        self.released = 0
        self.dropped = 0
        self.hold: asyncio.Event | None = None
        """When set, the next statement waits on it (to cancel a call in flight)."""

    def acquire(self) -> Awaitable[FakeAsyncConnection]:  # type: ignore[override]
        return self._acquire()  # like AsyncConnectionPool.acquire: a plain call returning an awaitable

    async def _acquire(self) -> FakeAsyncConnection:
        await asyncio.sleep(0)
        connection = FakeAsyncConnection(self)
        if not self.set_up:
            self.set_up = True
            await self.kwargs["session_callback"](connection, None)
        if self.hold is not None:
            hold, self.hold = self.hold, None
            await hold.wait()
        return connection

    async def release(self, connection: FakeConnection) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        self.released += 1

    async def drop(self, connection: FakeConnection) -> None:
        await asyncio.sleep(0)
        self.dropped += 1

    async def close(self, force: bool = False) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        self.closed = True


@pytest.fixture
def async_pool(monkeypatch: pytest.MonkeyPatch) -> FakeAsyncPool:
    fake = FakeAsyncPool()

    def create_pool_async(**kwargs: Any) -> FakeAsyncPool:  # a plain function in python-oracledb too
        fake.kwargs = kwargs
        return fake

    def no_blocking_sleep(seconds: float) -> None:
        raise AssertionError("the async adapter called time.sleep")

    monkeypatch.setattr(oracledb, "create_pool_async", create_pool_async)
    monkeypatch.setattr(oracledb, "create_pool", lambda **kwargs: pytest.fail("the async adapter made a sync pool"))
    monkeypatch.setattr(time, "sleep", no_blocking_sleep)
    return fake


URL = "oracle://scott:tiger@h:1521/S"


def run_async(pool: FakeAsyncPool, work: Callable[[AsyncOracleStorage], Coroutine[Any, Any, None]]) -> None:
    """Open an AsyncOracleStorage on the fake pool, clear the setup from the log, run ``work``, close it."""

    async def main() -> None:
        storage = await workmem.connect_async(URL, max_size=3, timeout=2.5)
        assert isinstance(storage, AsyncOracleStorage)
        pool.log.clear()
        pool.params.clear()
        async with storage:
            await work(storage)
        assert pool.closed

    asyncio.run(main())


def test_async_open_builds_the_pool_and_the_schema(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        assert "tiger" not in repr(storage) and repr(storage).startswith("AsyncOracleStorage(")
        assert storage.dialect.native_json

    async def main() -> None:
        storage = await AsyncOracleStorage.open(URL, max_size=3, timeout=2.5)
        creates = [entry for entry in async_pool.log if entry.startswith("CREATE")]
        assert len(creates) == 5 and creates[0] == creates[1]  # the first probes whether the JSON type exists
        assert async_pool.log[0].startswith("ALTER SESSION SET NLS_SORT")  # awaited by the pool, once
        assert async_pool.log[-1] == "COMMIT"  # the schema setup's transaction
        statements = [entry for entry in async_pool.log if entry not in ("COMMIT", "ROLLBACK")]
        assert async_pool.cursors_closed == len(statements)
        await work(storage)
        await storage.close()
        await storage.close()

    asyncio.run(main())
    kwargs = async_pool.kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["service_name"], kwargs["user"]) == ("h", 1521, "S", "scott")
    assert (kwargs["min"], kwargs["max"], kwargs["wait_timeout"], kwargs["tcp_connect_timeout"]) == (0, 3, 2500, 5.0)
    assert kwargs["getmode"] == oracledb.POOL_GETMODE_TIMEDWAIT and kwargs["retry_count"] == 0
    assert inspect.iscoroutinefunction(kwargs["session_callback"])  # the asyncio pool awaits it
    assert async_pool.closed and async_pool.released == 1  # the setup's session went back to the pool


def test_async_save_thread_of_another_owner_is_refused(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        async_pool.script = [("MERGE INTO", (0, []))]
        with pytest.raises(ThreadOwnershipError):
            await storage.save_thread(Thread("t-1", "r-2", "x"))
        assert async_pool.log[-1] == "ROLLBACK"

    run_async(async_pool, work)


def test_async_create_thread_of_an_existing_id_is_refused(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        async_pool.script = [("MERGE INTO", (0, []))]
        with pytest.raises(ThreadExistsError):
            await storage.create_thread(Thread("t-1", "r-1", "x"))
        assert "WHEN MATCHED" not in async_pool.log[0] and async_pool.log[-1] == "ROLLBACK"

    run_async(async_pool, work)


def test_async_save_thread_runs_again_after_losing_an_insert_race(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        async_pool.script = [
            ("MERGE INTO", _error(oracledb.IntegrityError, 1, "ORA-00001")),
            ("MERGE INTO", (1, [])),
            ("SELECT", (1, [THREAD_ROW])),
        ]
        stored = await storage.save_thread(Thread("t-1", "r-1", "A title"))
        assert stored.created_at == T0 and stored.metadata == {"workingMemory": "{}"}
        ends = [entry for entry in async_pool.log if not entry.startswith(("MERGE", "SELECT"))]
        assert ends == ["ROLLBACK", "COMMIT"]
        assert {"metadata": oracledb.DB_TYPE_CLOB} in async_pool.input_sizes

    run_async(async_pool, work)


def test_async_update_resource_creates_then_locks_then_writes(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        row = ("r", None, '{"a":1}', NAIVE, NAIVE)
        async_pool.script = [("BEGIN MERGE", (1, [])), ("SELECT", (1, [row])), ("MERGE INTO", (1, []))]
        updated = await storage.update_resource("r", metadata={"b": 2})
        assert updated.metadata == {"a": 1, "b": 2} and updated.created_at == T0
        assert async_pool.log[1].endswith(" FOR UPDATE") and async_pool.log[-1] == "COMMIT"

    run_async(async_pool, work)


def test_async_merge_refuses_non_object_text_and_rolls_back(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        row = ("t-1", "r-1", "t", '{"workingMemory":"[1,2]"}', NAIVE, NAIVE)
        async_pool.script = [("SELECT", (1, [row]))]
        with pytest.raises(WorkingMemoryFormatError):
            await storage.merge_working_memory({"a": 1}, scope="thread", thread_id="t-1")
        assert async_pool.log == [async_pool.log[0], "ROLLBACK"] and async_pool.log[0].endswith("FOR UPDATE")

    run_async(async_pool, work)


def test_async_read_runs_again_once_on_a_dead_session_and_a_write_never(async_pool: FakeAsyncPool) -> None:
    dead = _error(oracledb.DatabaseError, 0, "DPY-4011", dead=True)

    async def work(storage: AsyncOracleStorage) -> None:
        async_pool.script = [("SELECT", dead), ("SELECT", (2, [(*THREAD_ROW, 2), (*THREAD_ROW, 2)]))]
        page = await storage.list_threads("r-1", per_page=5)
        assert page.total == 2 and "COMMIT" not in async_pool.log
        async_pool.script = [("SELECT", dead)] * 2
        with pytest.raises(BackendUnavailableError, match="DPY-4011") as info:
            await storage.get_thread("t-1")
        cause = info.value.__cause__
        assert "tiger" not in str(info.value) and isinstance(cause, workmem.DriverError)
        assert cause.driver == "oracledb.exceptions.DatabaseError" and cause.code == "DPY-4011"
        async_pool.script = [("SELECT", dead), ("SELECT", (1, []))]  # delete_thread's transaction begins with a lock
        with pytest.raises(BackendUnavailableError):
            await storage.delete_thread("t-1")
        assert len(async_pool.script) == 1

    run_async(async_pool, work)


def test_async_schema_setup_retries_busy_ddl_without_blocking(async_pool: FakeAsyncPool) -> None:
    async_pool.ddl_errors = [
        _error(oracledb.DatabaseError, 955, "ORA-00955"),
        _error(oracledb.DatabaseError, 54, "ORA-00054"),  # busy once: waits with asyncio.sleep (time.sleep fails)
        (0, []),
        _error(oracledb.DatabaseError, 1408, "ORA-01408"),
    ]

    async def main() -> None:
        async with await AsyncOracleStorage.open(URL) as storage:
            assert storage.dialect.native_json

    asyncio.run(main())
    assert async_pool.ddl_errors == [] and async_pool.closed


def test_async_schema_setup_on_19c_and_without_create(async_pool: FakeAsyncPool) -> None:
    async_pool.version = "19.3.0.0.0"

    async def main() -> None:
        async with await AsyncOracleStorage.open(URL):
            assert any("metadata CLOB CHECK (metadata IS JSON)" in entry for entry in async_pool.log)
        async_pool.log.clear()
        async with await workmem.connect_async(URL, create=False):
            assert not any(entry.startswith("CREATE") for entry in async_pool.log)

    asyncio.run(main())


def test_async_schema_setup_failure_closes_the_pool(async_pool: FakeAsyncPool) -> None:
    async_pool.ddl_errors = [_error(oracledb.DatabaseError, 1031, "ORA-01031")]

    async def main() -> None:
        with pytest.raises(BackendRefusedError, match="ORA-01031"):
            await AsyncOracleStorage.open(URL)

    asyncio.run(main())
    assert async_pool.closed


def test_async_cancelled_call_drops_its_session_and_the_next_call_works(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        gate = asyncio.Event()
        async_pool.hold = gate  # the next acquire waits: the call is cancelled with no statement sent
        task = asyncio.create_task(storage.get_resource("r-1"))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        released = async_pool.released
        async_pool.script = [("SELECT", (1, [("t-1", "r-1", "t", None, NAIVE, NAIVE)]))]
        cancelled_mid_statement = asyncio.create_task(storage.get_thread("t-1"))
        await asyncio.sleep(0)  # acquired, statement in flight (the fake execute suspends)
        await asyncio.sleep(0)
        cancelled_mid_statement.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled_mid_statement
        assert async_pool.dropped == 1 and async_pool.released == released  # dropped, not given back
        async_pool.script = [("SELECT", (1, [("t-1", "r-1", "t", None, NAIVE, NAIVE)]))]
        thread = await storage.get_thread("t-1")
        assert thread is not None and thread.id == "t-1"

    run_async(async_pool, work)


def test_async_closed_storage_refuses_work(async_pool: FakeAsyncPool) -> None:
    async def work(storage: AsyncOracleStorage) -> None:
        await storage.close()
        with pytest.raises(StorageClosedError, match="AsyncOracleStorage is closed"):
            await storage.get_thread("t")

    run_async(async_pool, work)


def test_async_unreachable_server_fails_fast_with_the_password_masked() -> None:
    """The real asyncio driver (no fake): a closed port fails within connect_timeout, DPY-6005, password masked."""
    password = "Sup3r-Secret_pw"
    url = f"oracle://scott:{password}@127.0.0.1:{_closed_port()}/?service_name=FREEPDB1"

    async def main() -> None:
        await workmem.connect_async(url, connect_timeout=2)

    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as info:
        asyncio.run(main())
    assert time.monotonic() - started < 5
    assert isinstance(info.value.__cause__, workmem.DriverError) and info.value.__cause__.code == "DPY-6005"
    assert password not in str(info.value) and "DPY-6005" in str(info.value)


def test_the_async_driver_calls_used_exist_in_the_installed_oracledb() -> None:
    """Every python-oracledb asyncio call AsyncOracleStorage makes, as the installed package defines it."""
    coroutine = inspect.iscoroutinefunction
    assert callable(oracledb.create_pool_async) and not coroutine(oracledb.create_pool_async)  # returns the pool
    pool, connection, cursor = oracledb.AsyncConnectionPool, oracledb.AsyncConnection, oracledb.AsyncCursor
    assert not coroutine(pool.acquire)  # returns an awaitable AsyncConnection
    assert all(coroutine(getattr(pool, name)) for name in ("release", "drop", "close"))
    assert all(coroutine(getattr(connection, name)) for name in ("commit", "rollback"))
    assert not coroutine(connection.cursor) and isinstance(connection.version, property)
    assert all(coroutine(getattr(cursor, name)) for name in ("execute", "fetchall"))
    assert not any(coroutine(getattr(cursor, name)) for name in ("setinputsizes", "var", "close", "__enter__"))
    assert all(isinstance(getattr(cursor, name), property) for name in ("description", "rowcount", "outputtypehandler"))
    assert "force" in inspect.signature(pool.close).parameters
    assert {"session_callback", "wait_timeout", "tcp_connect_timeout", "retry_count", "getmode"} <= set(
        inspect.signature(oracledb.create_pool_async).parameters
    )


# -- issue 17: array DML bulk inserts, keyset pages, replace_thread (on the fakes: no server here) ----------


class _BatchError:
    def __init__(self, offset: int, code: int, full_code: str) -> None:
        self.offset, self.code, self.full_code, self.message = offset, code, full_code, full_code

    def __str__(self) -> str:  # as python-oracledb's _Error prints
        return self.message


def test_bulk_insert_is_one_array_dml_merge_whose_zero_counts_are_the_present_ids(
    store: OracleStorage, pool: FakePool
) -> None:
    threads = [Thread(f"t-{i}", "r-1", "", {"k": i}, T0, T0) for i in range(4)]
    # t-1 exists (row count 0); t-3 lost an insert race to a concurrent writer (ORA-00001): present too
    pool.script = [("MERGE INTO", ([1, 0, 1, 0], [_BatchError(3, 1, "ORA-00001")]))]
    assert store.insert_threads(threads) == {"t-1", "t-3"}
    merge = pool.log[0]
    assert "WHEN NOT MATCHED THEN INSERT" in merge and "WHEN MATCHED" not in merge  # never moves a thread
    assert [p["id"] for p in pool.params] == ["t-0", "t-1", "t-2", "t-3"] and pool.params[0]["title"] != ""
    assert pool.log[-1] == "COMMIT" and {"metadata": oracledb.DB_TYPE_CLOB} in pool.input_sizes


def test_bulk_insert_raises_other_row_errors_and_commits_nothing(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("MERGE INTO", ([1, 0], [_BatchError(1, 2290, "ORA-02290")]))]
    with pytest.raises(BackendRefusedError, match="ORA-02290"):
        store.insert_resources([Resource("r-1"), Resource("r-2")])
    assert "COMMIT" not in pool.log and pool.log[-1] == "ROLLBACK"


def test_keyset_pages_fetch_first_after_the_last_id(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("SELECT", (2, [THREAD_ROW, ("t-2", *THREAD_ROW[1:])]))]
    page = store.threads_after("t-0", limit=2)
    assert [t.id for t in page.records] == ["t-1", "t-2"] and page.next_after == "t-2"
    sql = pool.log[0]
    assert sql.endswith("WHERE id > :after ORDER BY id FETCH FIRST :limit ROWS ONLY") and "OFFSET" not in sql
    assert pool.params[0] == {"after": "t-0", "limit": 2}


def test_replace_thread_is_one_update_checking_id_and_owner(store: OracleStorage, pool: FakePool) -> None:
    pool.script = [("UPDATE", (0, [])), ("UPDATE", (1, []))]
    assert store.restore_thread(Thread("t-1", "r-2", "")) is False
    assert store.restore_thread(Thread("t-1", "r-1", "", None, T0, T0)) is True
    assert pool.log[0].endswith('WHERE id = :id AND "resourceId" = :resource_id')
    assert pool.params[1]["title"] == EMPTY_STRING_SENTINEL and pool.params[1]["created_at"].startswith("20")
