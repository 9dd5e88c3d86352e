"""Error classes: worth retrying (``RETRYABLE_ERRORS``) or not, and never a bare exception.

``BackendUnavailableError`` means only that the database could not be reached,
dropped the connection or is shutting down; ``BackendBusyError`` that concurrent
work got in the way. Both are in ``workmem.RETRYABLE_ERRORS``. A database that
was reached and refused the operation (permission denied, a read-only file, a
server error for the statement) raises ``BackendRefusedError``, which a retry
loop must not retry. No bare ``WorkmemError``, ``ValueError`` or ``TypeError``
leaves the public API. Run on the real servers; each test makes its own
database, file or key prefix.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from backends import backend_url
from servers import server_url
from test_reliability_secrets import closed_port, echo_server
from upstash_fixtures import Bridge, bridge, raw_client, start_bridge, stop_bridge, upstash_prefix, upstash_url

import workmem
import workmem.errors
from workmem import (
    RETRYABLE_ERRORS,
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    Memory,
    Resource,
    StorageClosedError,
    Thread,
    ValidationError,
    WorkmemError,
)

__all__ = ["backend_url", "bridge", "upstash_prefix", "upstash_url"]  # fixtures


def _refused(call: Callable[[], object]) -> BackendRefusedError:
    """The :class:`BackendRefusedError` ``call`` raises; it must not be worth retrying."""
    with pytest.raises(WorkmemError) as info:
        call()
    error = info.value
    assert type(error) is BackendRefusedError, f"{type(error).__name__}: {error}"
    assert not isinstance(error, RETRYABLE_ERRORS)
    return error


def _sqlstate(error: BaseException) -> str | None:
    return getattr(error.__cause__, "sqlstate", None)


# -- the classes ----------------------------------------------------------------------------


def test_retryable_errors_are_unavailable_and_busy_only() -> None:
    assert (BackendUnavailableError, BackendBusyError) == workmem.RETRYABLE_ERRORS
    assert workmem.errors.RETRYABLE_ERRORS is workmem.RETRYABLE_ERRORS
    for cls in (BackendRefusedError, BackendBusyError):
        assert issubclass(cls, WorkmemError) and not issubclass(cls, BackendUnavailableError)
    assert not issubclass(BackendRefusedError, RETRYABLE_ERRORS)
    public = {name for name in workmem.errors.__all__ if name != "RETRYABLE_ERRORS"}
    assert public <= set(workmem.__all__)
    assert {"RETRYABLE_ERRORS", "BackendRefusedError", "BackendBusyError"} <= set(workmem.__all__)


def test_a_closed_storage_says_so_and_is_not_worth_retrying(backend_url: str) -> None:
    storage = workmem.connect(backend_url)
    storage.update_resource("user-1", working_memory="kept")
    storage.close()
    for call in (
        lambda: storage.get_resource("user-1"),
        lambda: storage.update_resource("user-1", working_memory="late"),
        lambda: storage.list_threads("user-1"),
    ):
        with pytest.raises(WorkmemError) as info:
            call()
        assert type(info.value) is StorageClosedError, repr(info.value)
        assert not isinstance(info.value, RETRYABLE_ERRORS)
    with workmem.connect(backend_url) as reopened:
        assert reopened.get_working_memory(scope="resource", resource_id="user-1") == "kept"


def test_mongodb_errors_are_classified_by_class_code_and_label() -> None:
    """Unit (no server): pymongo's exceptions as the MongoDB adapter maps them."""
    from pymongo import errors

    from workmem.adapters.mongodb.client import error_kind

    labelled = errors.OperationFailure("stepped down", code=999, details={"errorLabels": ["RetryableWriteError"]})
    cases: list[tuple[Exception, type[WorkmemError]]] = [
        (errors.ServerSelectionTimeoutError("no servers"), BackendUnavailableError),
        (errors.NetworkTimeout("timed out"), BackendUnavailableError),
        (errors.NotPrimaryError("not primary"), BackendUnavailableError),
        (errors.OperationFailure("not writable primary", code=10107), BackendUnavailableError),
        (errors.OperationFailure("shutdown in progress", code=91), BackendUnavailableError),
        (labelled, BackendUnavailableError),
        (errors.OperationFailure("write conflict", code=112), BackendBusyError),
        (errors.ExecutionTimeout("time limit", code=50), BackendBusyError),
        (errors.OperationFailure("not authorized", code=13), BackendRefusedError),
        (errors.OperationFailure("auth failed", code=18), BackendRefusedError),
        (errors.WriteError("document too large", code=10334), BackendRefusedError),
    ]
    for exc, kind in cases:
        assert error_kind(errors, exc) is kind, (exc, kind)


def test_postgres_sqlstates_and_login_failures_are_classified() -> None:
    """Unit: the SQLSTATE table (the server cases above run for real)."""
    from workmem.adapters.postgres.sqlstate import error_kind

    cases: list[tuple[str | None, str, bool, type[WorkmemError]]] = [
        ("08006", "connection failure", True, BackendUnavailableError),
        ("57P01", "terminating connection due to administrator command", True, BackendUnavailableError),
        ("57P03", "the database system is starting up", True, BackendUnavailableError),
        ("53300", "sorry, too many clients already", True, BackendUnavailableError),
        ("40001", "could not serialize access", False, BackendBusyError),
        ("40P01", "deadlock detected", False, BackendBusyError),
        ("55P03", "canceling statement due to lock timeout", True, BackendBusyError),
        ("57014", "canceling statement due to statement timeout", True, BackendBusyError),
        ("42501", "permission denied for table mastra_threads", False, BackendRefusedError),
        ("54001", "stack depth limit exceeded", False, BackendRefusedError),
        ("3F000", "schema does not exist", False, BackendRefusedError),
        ("22P02", "invalid input syntax for type integer", False, BackendRefusedError),
        ("25006", "cannot execute UPDATE in a read-only transaction", False, BackendRefusedError),
        (None, "connection failed: ... failed: Connection refused", True, BackendUnavailableError),
        (
            None,
            'connection failed: ... failed: FATAL:  password authentication failed for user "u"',
            True,
            BackendRefusedError,
        ),
        (None, 'connection failed: ... failed: FATAL:  database "x" does not exist', True, BackendRefusedError),
        (
            None,
            "connection failed: ... failed: FATAL:  the database system is shutting down",
            True,
            BackendUnavailableError,
        ),
        (None, "connection failed: ... failed: FATAL:  sorry, too many clients already", True, BackendUnavailableError),
        (None, "server closed the connection unexpectedly", True, BackendUnavailableError),
        (None, "query parameter missing", False, BackendRefusedError),
    ]
    for state, message, connection_error, kind in cases:
        assert error_kind(state, message, connection_error=connection_error) is kind, (state, message)


def test_libsql_driver_messages_are_classified() -> None:
    """Unit: the libsql driver's messages (the read-only, trigger, busy and HTTP cases run for real)."""
    from workmem.adapters.libsql.storage import _error_kind

    cases: list[tuple[str, type[WorkmemError]]] = [
        ("database is locked", BackendBusyError),
        ("attempt to write a readonly database", BackendRefusedError),
        ("no such table: mastra_threads", BackendRefusedError),
        ("database disk image is malformed", BackendRefusedError),
        ("database or disk is full", BackendUnavailableError),
        ("disk I/O error", BackendUnavailableError),
        (
            "Hrana: `http error: `error trying to connect: tcp connect error: Connection refused``",
            BackendUnavailableError,
        ),
        ("Hrana: `api error: `status=401 Unauthorized, body=connection refused``", BackendRefusedError),
        ("Hrana: `api error: `status=503 Service Unavailable, body=``", BackendUnavailableError),
    ]
    for message, kind in cases:
        assert _error_kind(ValueError(message)) is kind, message


# -- PostgreSQL -----------------------------------------------------------------------------


@contextlib.contextmanager
def _pg_database() -> Iterator[tuple[str, str, str]]:
    """``(owner_url, reader_url, role)``: a new database and a new login role with no privileges; dropped after."""
    server = server_url("postgres")
    suffix = uuid.uuid4().hex[:12]
    database, role = f"wm_err_db_{suffix}", f"wm_err_role_{suffix}"
    parts = urlsplit(server)
    owner_url = urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))
    reader_netloc = f"{role}@{parts.hostname or '127.0.0.1'}" + (f":{parts.port}" if parts.port else "")
    reader_url = urlunsplit((parts.scheme, reader_netloc, f"/{database}", parts.query, ""))
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        yield owner_url, reader_url, role
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def _fill(url: str) -> None:
    with workmem.connect(url) as storage:
        storage.save_thread(Thread("t-1", "user-1", "Trip"))
        storage.update_resource("user-1", working_memory='{"name":"Sam"}')


@pytest.mark.backend("postgres")
def test_postgres_select_only_role_is_refused_not_unavailable() -> None:
    with _pg_database() as (owner_url, reader_url, role):
        _fill(owner_url)
        with psycopg.connect(owner_url, autocommit=True) as owner:
            owner.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        with workmem.connect(reader_url, create=False) as storage:
            assert storage.get_thread("t-1") is not None  # reading works: the server is there
            writes: list[Callable[[], object]] = [
                lambda: storage.update_resource("user-1", working_memory="changed"),
                lambda: storage.merge_working_memory({"a": 1}, scope="resource", resource_id="user-1"),
                lambda: storage.save_thread(Thread("t-2", "user-1")),
                lambda: storage.update_thread("t-1", title="New"),
                lambda: storage.delete_thread("t-1"),
            ]
            for write in writes:
                assert _sqlstate(_refused(write)) == "42501"  # insufficient_privilege
            assert storage.get_working_memory(scope="resource", resource_id="user-1") == '{"name":"Sam"}'
        with Memory(reader_url, read_only=True) as memory:
            assert memory.get_working_memory(resource_id="user-1") == '{"name":"Sam"}'
        # the default connect() creates what is missing: refused for this role, as is a schema of its own
        assert _sqlstate(_refused(lambda: workmem.connect(reader_url))) == "42501"
        assert _sqlstate(_refused(lambda: workmem.connect(f"{reader_url}?schema=wm_mine"))) == "42501"


@pytest.mark.backend("postgres")
def test_postgres_url_parameters_libpq_refuses_are_validation_errors() -> None:
    """A URL libpq will not use (a bad port, an option value or name it does not know) is refused as the caller's input.

    Never BackendUnavailableError: retrying such a URL can only fail the same way, forever.
    """
    with _pg_database() as (owner_url, _, _):
        parts = urlsplit(owner_url)
        password = "Tr0ub#dor3"
        host, port = parts.hostname or "127.0.0.1", parts.port or 5432
        base = f"{parts.scheme}://{parts.username or 'postgres'}:{password}@{host}"
        cases = {
            f"{base}:{port}{parts.path}?sslmode=bogus": "sslmode",
            f"{base}:{port}{parts.path}?target_session_attrs=bogus": "target_session_attrs",
            f"{base}:{port}{parts.path}?keepalives=x": "keepalives",
            f"{base}:{port}{parts.path}?bogus_option=1": "bogus_option",
            f"{base}:{port}{parts.path}?connect_timeout=abc": "connect_timeout",
            f"{base}:99999{parts.path}": "port",
        }
        for url, name in cases.items():
            with pytest.raises(ValidationError, match=name) as info:
                workmem.connect(url)
            assert not isinstance(info.value, workmem.RETRYABLE_ERRORS), url
            assert password not in str(info.value) and password not in repr(info.value.__cause__), url
        with workmem.connect(f"{base}:{port}{parts.path}?sslmode=disable&keepalives=1") as storage:
            assert storage.get_thread("t-1") is None  # the same URL with good values connects


@pytest.mark.backend("postgres")
def test_postgres_server_errors_for_a_statement_are_refused() -> None:
    with _pg_database() as (owner_url, _, _):
        _fill(owner_url)
        with workmem.connect(owner_url) as storage, psycopg.connect(owner_url, autocommit=True) as sql:
            # stack depth: a trigger that recurses without end
            sql.execute(
                "CREATE FUNCTION wm_deep(n int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN wm_deep(n + 1); END $$"
            )
            sql.execute(
                "CREATE FUNCTION wm_deep_trigger() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM wm_deep(0); RETURN NEW; END $$"
            )
            sql.execute(
                "CREATE TRIGGER wm_deep BEFORE UPDATE ON mastra_threads FOR EACH ROW EXECUTE FUNCTION wm_deep_trigger()"
            )
            assert _sqlstate(_refused(lambda: storage.update_thread("t-1", title="Deep"))) == "54001"
            # a check another program added
            sql.execute("ALTER TABLE mastra_threads ADD CONSTRAINT wm_short CHECK (length(title) < 10)")
            assert _sqlstate(_refused(lambda: storage.save_thread(Thread("t-2", "user-1", "A long title")))) == "23514"
            # a type mismatch: a column another program changed to integer
            sql.execute('ALTER TABLE mastra_resources ALTER COLUMN "workingMemory" TYPE integer USING NULL')
            state = _sqlstate(_refused(lambda: storage.update_resource("user-2", working_memory="text")))
            assert state is not None and state[:2] in ("22", "42"), state
            assert storage.get_thread("t-1") is not None and storage.get_thread("t-1").title == "Trip"  # type: ignore[union-attr]
            assert storage.get_thread("t-2") is None


@pytest.mark.backend("postgres")
def test_postgres_schema_that_went_away_is_refused() -> None:
    with _pg_database() as (owner_url, _, _):
        url = f"{owner_url}?schema=wm_gone"
        with workmem.connect(url) as storage:
            storage.update_resource("user-1", working_memory="x")
            with psycopg.connect(owner_url, autocommit=True) as sql:
                sql.execute("DROP SCHEMA wm_gone CASCADE")
            assert _sqlstate(_refused(lambda: storage.get_resource("user-1"))) == "42P01"  # undefined_table
            state = _sqlstate(
                _refused(lambda: storage.merge_working_memory({"a": 1}, scope="resource", resource_id="u"))
            )
            assert state in ("3F000", "42P01", "42883"), state  # invalid schema, undefined table or function


@contextlib.contextmanager
def _row_locked(url: str, resource_id: str) -> Iterator[psycopg.Connection[Any]]:
    """A transaction of another client holding the row lock of ``resource_id``, until the block ends."""
    with psycopg.connect(url) as other:
        other.execute("SELECT id FROM mastra_resources WHERE id = %s FOR UPDATE", (resource_id,))
        try:
            yield other
        finally:
            other.rollback()


@pytest.mark.backend("postgres")
def test_postgres_lock_timeout_is_busy_and_worth_retrying() -> None:
    with _pg_database() as (owner_url, _, _):
        _fill(owner_url)
        database = urlsplit(owner_url).path.lstrip("/")
        with psycopg.connect(owner_url, autocommit=True) as sql:
            sql.execute(f"ALTER DATABASE \"{database}\" SET lock_timeout = '300ms'")
        with workmem.connect(owner_url) as storage:
            with _row_locked(owner_url, "user-1"), pytest.raises(RETRYABLE_ERRORS) as info:
                storage.update_resource("user-1", working_memory="late")
            assert type(info.value) is BackendBusyError and _sqlstate(info.value) == "55P03"
            assert storage.get_working_memory(scope="resource", resource_id="user-1") == '{"name":"Sam"}'
            storage.update_resource("user-1", working_memory="late")  # the retry, once the lock is gone
            assert storage.get_working_memory(scope="resource", resource_id="user-1") == "late"


@pytest.mark.backend("postgres")
def test_postgres_connection_terminated_mid_write_is_unavailable() -> None:
    with _pg_database() as (owner_url, _, _):
        _fill(owner_url)
        database = urlsplit(owner_url).path.lstrip("/")
        with workmem.connect(owner_url) as storage, psycopg.connect(owner_url, autocommit=True) as sql:
            failures: list[BaseException] = []

            def write() -> None:
                try:
                    storage.update_resource("user-1", working_memory="lost")
                except BaseException as exc:
                    failures.append(exc)

            with _row_locked(owner_url, "user-1"):
                writer = threading.Thread(target=write)
                writer.start()
                deadline = time.monotonic() + 20
                while True:  # the writer waits for the row lock: end its session
                    rows = sql.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
                        (database,),
                    ).fetchall()
                    if rows or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                assert rows, "the write never waited for the lock"
                sql.execute("SELECT pg_terminate_backend(%s)", (rows[0][0],))
                writer.join(20)
            assert len(failures) == 1 and type(failures[0]) is BackendUnavailableError, failures
            assert isinstance(failures[0], RETRYABLE_ERRORS)
            assert storage.get_working_memory(scope="resource", resource_id="user-1") == '{"name":"Sam"}'


# -- libSQL ---------------------------------------------------------------------------------


@pytest.mark.backend("libsql")
def test_libsql_write_to_a_read_only_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    _fill(f"file:{path}")
    with workmem.connect(f"file:{path}?mode=ro") as storage:
        error = _refused(lambda: storage.update_resource("user-1", working_memory="changed"))
        assert "readonly" in str(error)
        _refused(lambda: storage.merge_working_memory({"a": 1}, scope="resource", resource_id="user-1"))
        _refused(lambda: storage.save_thread(Thread("t-2", "user-1")))
        assert storage.get_working_memory(scope="resource", resource_id="user-1") == '{"name":"Sam"}'


@pytest.mark.backend("libsql")
def test_libsql_an_error_the_database_raises_is_refused(tmp_path: Path) -> None:
    from raw_sqlite import raw

    path = tmp_path / "agent.db"
    _fill(f"file:{path}")
    conn = raw(path)  # the engine workmem uses on a file: the same SQLite, its locks shared
    conn.execute(
        "CREATE TRIGGER wm_no_new_threads BEFORE INSERT ON mastra_threads "
        "BEGIN SELECT RAISE(ABORT, 'no new threads here'); END"
    )
    conn.close()
    with workmem.connect(f"file:{path}") as storage:
        error = _refused(lambda: storage.save_thread(Thread("t-2", "user-1")))
        assert "no new threads here" in str(error)
        assert storage.get_thread("t-2") is None


@pytest.mark.backend("libsql")
@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, BackendRefusedError),
        (403, BackendRefusedError),
        (404, BackendRefusedError),
        (502, BackendUnavailableError),
        (503, BackendUnavailableError),
        (429, BackendUnavailableError),
    ],
)
def test_libsql_remote_server_answers_are_classified_by_status(status: int, kind: type[WorkmemError]) -> None:
    with echo_server(status) as port, pytest.raises(WorkmemError) as info:
        workmem.connect(f"libsql+http://127.0.0.1:{port}")
    assert type(info.value) is kind, repr(info.value)
    assert isinstance(info.value, RETRYABLE_ERRORS) == (kind is BackendUnavailableError)


@pytest.mark.backend("libsql")
def test_libsql_remote_server_that_is_not_there_is_unavailable() -> None:
    with pytest.raises(BackendUnavailableError):
        workmem.connect(f"libsql+http://127.0.0.1:{closed_port()}")


# -- Upstash, through workmem's REST bridge in front of a real Redis ------------------------


@pytest.mark.backend("upstash")
def test_upstash_wrong_token_is_refused(bridge: Bridge) -> None:
    wrong = f"wrong-{secrets.token_hex(8)}"
    error = _refused(lambda: workmem.connect(f"upstash+{bridge.url}?token={wrong}&retries=0"))
    assert "WRONGPASS" in str(error) and wrong not in str(error)


@pytest.mark.backend("upstash")
def test_upstash_wrongtype_reply_is_refused_and_changes_nothing(
    bridge: Bridge, upstash_url: str, upstash_prefix: str
) -> None:
    with workmem.connect(upstash_url) as storage:
        storage.save_thread(Thread("t-1", "user-1", "Trip"))
        client = raw_client(bridge)
        try:
            index_keys = client.keys(f"{upstash_prefix}workmem:thread_index:*")  # type: ignore[attr-defined]
            assert index_keys, "no thread index of user-1"
            for key in index_keys:  # another program replaced the index (a sorted set) with a string
                client.set(key, "not a sorted set")  # type: ignore[attr-defined]
        finally:
            client.close()  # type: ignore[attr-defined]
        error = _refused(lambda: storage.save_thread(Thread("t-2", "user-1", "Second")))
        assert "WRONGTYPE" in str(error)
        assert storage.get_thread("t-2") is None  # the script checked before writing: nothing half-done
        _refused(lambda: storage.delete_thread("t-1"))
        assert storage.get_thread("t-1") is not None


@pytest.mark.backend("upstash")
def test_upstash_bridge_without_redis_is_unavailable() -> None:
    dead = start_bridge(f"redis://127.0.0.1:{closed_port()}")
    try:
        with pytest.raises(RETRYABLE_ERRORS) as info:
            workmem.connect(dead.storage_url("wm_err:") + "&retries=0")
        assert type(info.value) is BackendUnavailableError
        assert "could not reach redis" in str(info.value)
    finally:
        stop_bridge(dead)


# -- no bare exception leaves the public API ------------------------------------------------


class _NotAStorage:
    pass


def _public_api_error_paths(tmp_path: Path) -> dict[str, Callable[[], object]]:
    """Calls of the public API with bad input or a broken configuration, none of which may succeed."""
    suffix = secrets.token_hex(4)
    workmem.register(f"wm-err-nomodule-{suffix}", "wm_no_such_module_anywhere:Storage")
    workmem.register(f"wm-err-noclass-{suffix}", f"{__name__}:NoSuchClass")
    workmem.register(f"wm-err-notstorage-{suffix}", f"{__name__}:_NotAStorage")
    workmem.register(f"wm-err-notclass-{suffix}", f"{__name__}:_public_api_error_paths")
    pg = "postgresql://127.0.0.1:1/db"
    file = f"file:{tmp_path / 'x.db'}"
    storage = workmem.connect(f"memory://wm_err_{suffix}")
    memory = Memory(storage)
    return {
        # the registry and connect()
        "connect(None)": lambda: workmem.connect(None),  # type: ignore[arg-type]
        "connect(3)": lambda: workmem.connect(3),  # type: ignore[arg-type]
        "connect('')": lambda: workmem.connect(""),
        "unknown scheme": lambda: workmem.connect("nosuchscheme://x"),
        "entry point: no module": lambda: workmem.connect(f"wm-err-nomodule-{suffix}://x"),
        "entry point: no class": lambda: workmem.connect(f"wm-err-noclass-{suffix}://x"),
        "entry point: not a storage": lambda: workmem.connect(f"wm-err-notstorage-{suffix}://x"),
        "entry point: a function": lambda: workmem.connect(f"wm-err-notclass-{suffix}://x"),
        "register: no colon": lambda: workmem.register(f"wm-err-{suffix}", "no_colon"),
        "register: empty class": lambda: workmem.register(f"wm-err-{suffix}", "module:"),
        "register: scheme not a str": lambda: workmem.register(3, "a:B"),  # type: ignore[arg-type]
        "register: target not a str": lambda: workmem.register(f"wm-err-{suffix}", None),  # type: ignore[arg-type]
        "register: built-in": lambda: workmem.register("memory", "a:B"),
        "register: clobber not a bool": lambda: workmem.register(f"wm-err-{suffix}", "a:B", clobber="yes"),  # type: ignore[arg-type]
        # options of each adapter, before any server is contacted
        "memory: option": lambda: workmem.connect("memory://", pool_size=2),
        "libsql: pool_size str": lambda: workmem.connect(file, pool_size="2"),
        "libsql: busy_timeout str": lambda: workmem.connect(file, busy_timeout="x"),
        "libsql: unknown option": lambda: workmem.connect(file, min_size=1),
        "libsql: bad URL parameter": lambda: workmem.connect("libsql://h:8080?cache=private"),
        "postgres: min_size str": lambda: workmem.connect(pg, min_size="a"),
        "postgres: max_size 0": lambda: workmem.connect(pg, max_size=0),
        "postgres: max_size < min_size": lambda: workmem.connect(pg, min_size=5, max_size=2),
        "postgres: timeout str": lambda: workmem.connect(pg, timeout="x"),
        "postgres: connect_timeout str": lambda: workmem.connect(pg, connect_timeout="x"),
        "postgres: schema int": lambda: workmem.connect(pg, schema=3),
        "postgres: system schema": lambda: workmem.connect(f"{pg}?schema=information_schema"),
        "postgres: unknown option": lambda: workmem.connect(pg, pool_size=2),
        "upstash: bad port": lambda: workmem.connect("upstash+http://h:abc?token=t"),
        "upstash: retries str": lambda: workmem.connect("upstash+http://127.0.0.1:1?token=t", retries="x"),
        "create not a bool": lambda: workmem.connect(file, create="no"),
        "URL with NUL": lambda: workmem.connect(f"file:{tmp_path}/a\x00.db"),
        "libsql: unclosed IPv6 bracket": lambda: workmem.connect("libsql://[::1"),
        "libsql: file name too long": lambda: workmem.connect(f"file:{tmp_path}/{'a' * 5000}.db"),
        "postgres: host label too long": lambda: workmem.connect(f"postgresql://{'h' * 100}/db", connect_timeout=1),
        # Memory and the storage contract
        "Memory(3)": lambda: Memory(3),  # type: ignore[arg-type]
        "Memory scope": lambda: Memory(storage, scope="x"),  # type: ignore[arg-type]
        "tool format": lambda: memory.tool_definition(format="x"),  # type: ignore[arg-type]
        "get_thread(3)": lambda: storage.get_thread(3),  # type: ignore[arg-type]
        "list_threads page": lambda: storage.list_threads("r", page="x"),  # type: ignore[arg-type]
        "merge a str": lambda: storage.merge_working_memory("x", scope="resource", resource_id="r"),  # type: ignore[arg-type]
        "save_thread a str": lambda: storage.save_thread("x"),  # type: ignore[arg-type]
        "Thread(3)": lambda: Thread(3, "r"),  # type: ignore[arg-type]
        "Resource(3)": lambda: Resource(3),  # type: ignore[arg-type]
        "sub_agent_resource_id": lambda: workmem.sub_agent_resource_id(3, None),  # type: ignore[arg-type]
        "WorkingMemorySchema(3)": lambda: workmem.WorkingMemorySchema(3),  # type: ignore[arg-type]
    }


def test_no_bare_exception_leaves_the_public_api(tmp_path: Path) -> None:
    exported = {getattr(workmem, name) for name in workmem.__all__ if name.endswith("Error")}
    bare: list[str] = []
    for label, call in _public_api_error_paths(tmp_path).items():
        try:
            call()
        except Exception as exc:
            if not isinstance(exc, WorkmemError) or type(exc) is WorkmemError or type(exc) not in exported:
                bare.append(f"{label}: {type(exc).__module__}.{type(exc).__name__}: {exc}")
            elif isinstance(exc, RETRYABLE_ERRORS):
                bare.append(f"{label}: a deterministic failure raised a retryable {type(exc).__name__}: {exc}")
        else:
            bare.append(f"{label}: no error")
    assert not bare, "\n".join(bare)


def test_broken_entry_points_raise_workmem_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution's ``workmem.adapters`` entry point that cannot be used."""
    suffix = secrets.token_hex(4)
    info = tmp_path / f"wm_err_plugin_{suffix}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: wm-err-plugin-{suffix}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[workmem.adapters]\n"
        f"wm-ep-nomodule-{suffix} = wm_no_such_module_anywhere:Storage\n"
        f"wm-ep-function-{suffix} = json:dumps\n"
        f"wm-ep-noclass-{suffix} = json\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert f"wm-ep-nomodule-{suffix}" in workmem.known_schemes()
    expected = {"nomodule": workmem.MissingDriverError, "function": workmem.UnknownSchemeError}
    expected["noclass"] = workmem.UnknownSchemeError
    for name, kind in expected.items():
        with pytest.raises(WorkmemError) as raised:
            workmem.connect(f"wm-ep-{name}-{suffix}://x")
        assert type(raised.value) is kind, repr(raised.value)


def test_no_module_raises_the_bare_root_class() -> None:
    """``raise WorkmemError(...)`` says nothing a caller can act on: every raise names a subclass."""
    root = Path(workmem.__file__).parent
    offenders = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "raise WorkmemError(" in line
    ]
    assert not offenders, offenders


def _one_of_each() -> list[workmem.errors.WorkmemError]:
    """An instance of every error class in ``workmem.errors``, built as workmem builds it."""
    made: list[workmem.errors.WorkmemError] = [
        workmem.errors.WorkingMemoryTooLargeError(size=250, limit=200, current=120),
        workmem.errors.ThreadNotFoundError("t-1"),
        workmem.errors.ThreadExistsError("t-1"),
        workmem.errors.ThreadOwnershipError("t-1", "user-2"),
        workmem.errors.UnreadableRecordError("thread", "t-1", "metadata is no JSON object"),
    ]
    built = {type(error) for error in made}
    for name in workmem.errors.__all__:
        cls = getattr(workmem.errors, name)
        if isinstance(cls, type) and issubclass(cls, workmem.errors.WorkmemError) and cls not in built:
            made.append(cls(f"a {name}"))
    return made


@pytest.mark.parametrize("error", _one_of_each(), ids=lambda error: type(error).__name__)
def test_every_error_pickles_as_itself(error: workmem.errors.WorkmemError) -> None:
    """A process pool sends exceptions back pickled: each class comes back whole, attributes and notes included."""
    import pickle

    error.add_note("a note")
    error.__dict__["extra"] = 1  # what code (workmem's or the caller's) may hang on an error
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.args == error.args
    assert vars(again) == vars(error)
