"""Nothing reachable from a workmem exception holds a password or token: not its chain, attributes, locals or pickle.

Masking the message is not enough: psycopg's exception keeps the connection
(``pgconn.info`` lists the password), httpx's keeps the request with its
``Authorization`` header, and the frames of a traceback keep the connection
string in local variables, where error trackers ("show locals"), debuggers and
a process pool's pickling find them. ``reachable.secret_paths`` walks all of it
(see its docstring); every case here drives a real failure through the public
API, sync and async, and finds the secret nowhere.

Servers: PostgreSQL and Redis (behind workmem's Upstash bridge) are the local
ones (PostgreSQL trusts 127.0.0.1, so a role's password is accepted, and still
carried in the connection info). libSQL fails against a closed port (remote)
and on a file that is no database (local). MongoDB and Oracle fail against a
closed port: their drivers raise their own exceptions without a server, which
is what is tested for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import pickle
import secrets
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from reachable import assert_unreachable, secret_paths
from servers import server_url
from tcp_proxy import TcpProxy
from test_reliability_secrets import closed_port, echo_server

import workmem
from workmem import DriverError, Resource, Secret, WorkmemError

APIS = ["sync", "async"]

Action = Callable[[Any], Any]
"""What to do with the opened storage (its result awaited under the async API)."""


def _get(storage: Any) -> Any:
    return storage.get_resource("r")


def new_secret() -> str:
    return f"S3cr3t-{secrets.token_hex(8)}"


def failure(api: str, url: str | Secret, action: Action = _get, **options: Any) -> WorkmemError:
    """The exception of opening ``url`` with ``connect``/``connect_async`` and running ``action`` on it."""

    async def run_async() -> None:
        async with await workmem.connect_async(url, **options) as storage:
            result = action(storage)
            if asyncio.iscoroutine(result):
                await result

    try:
        if api == "sync":
            with workmem.connect(url, **options) as storage:
                action(storage)
        else:
            asyncio.run(run_async())
    except Exception as exc:
        assert isinstance(exc, WorkmemError), f"not a workmem error: {type(exc).__module__}.{type(exc).__name__}"
        return exc
    pytest.fail(f"expected a failure ({api})")


def check(error: WorkmemError, secret: str, driver: str | None = None) -> None:
    """The secret is reachable from nowhere; the cause, if ``driver`` names one, is its detached stand-in."""
    assert_unreachable(error, secret)
    if driver is not None:
        assert isinstance(error.__cause__, DriverError), repr(error.__cause__)
        assert error.__cause__.driver.startswith(driver), error.__cause__.driver
    assert error.__context__ is None or isinstance(error.__context__, WorkmemError | DriverError), error.__context__
    copy = pickle.loads(pickle.dumps(error))  # a process pool sends it: it arrives, and says the same
    assert type(copy) is type(error) and str(copy) == str(error)


# -- the walker finds what it looks for -------------------------------------------------------------


@pytest.mark.backend("postgres")
def test_the_walker_finds_a_password_in_a_driver_exception_a_header_and_a_local() -> None:
    """Not vacuous: psycopg's ``pgconn.info``, httpx's request header and a frame's local variable are found."""
    import httpx
    import psycopg

    secret = new_secret()
    host, port = urlsplit(server_url("postgres")).hostname, urlsplit(server_url("postgres")).port or 5432
    with pytest.raises(psycopg.OperationalError) as raised:
        psycopg.connect(f"postgresql://postgres:{secret}@{host}:{port}/wm_no_such_db_{secrets.token_hex(4)}")
    found = secret_paths(raised.value, secret)
    assert any("pgconn" in place for place in found), found

    with pytest.raises(httpx.ConnectError) as refused:
        httpx.post(f"http://127.0.0.1:{closed_port()}", headers={"Authorization": f"Bearer {secret}"})
    assert any("headers" in place for place in secret_paths(refused.value, secret))

    elsewhere: dict[str, Any] = {}  # a function of no test file: the walker skips only the tests' own frames
    source = "def keeps_it_in_a_local(password):\n    raise WorkmemError('masked')\n"
    exec(compile(source, "<not a test file>", "exec"), {"WorkmemError": WorkmemError}, elsewhere)
    with pytest.raises(WorkmemError) as local:
        elsewhere["keeps_it_in_a_local"](secret)
    assert any("local password" in place for place in secret_paths(local.value, secret))


# -- PostgreSQL -------------------------------------------------------------------------------------


def _pg(user: str, password: str, *, port: int | None = None, path: str | None = None, query: str = "") -> str:
    server = urlsplit(server_url("postgres"))
    where = f"{server.hostname}:{port or server.port or 5432}"
    return f"postgresql://{user}:{quote(password, safe='')}@{where}{path or server.path or '/postgres'}?{query}"


@contextlib.contextmanager
def select_only_role() -> Iterator[tuple[str, str, str]]:
    """``(url, password, schema)``: a new role with a password that may read the tables of a fresh schema, not write."""
    import psycopg
    from postgres_schemas import fresh_schema_url

    password, role = new_secret(), f"wm_reader_{secrets.token_hex(4)}"
    with fresh_schema_url() as admin_url:
        workmem.connect(admin_url).close()  # the tables, created by the trusted admin
        schema = admin_url.rsplit("schema=", 1)[1]
        with psycopg.connect(server_url("postgres"), autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
            try:
                admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
                admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {role}')
                yield _pg(role, password, query=f"schema={schema}"), password, schema
            finally:
                admin.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
                admin.execute(f"DROP OWNED BY {role}")
                admin.execute(f"DROP ROLE {role}")


@pytest.mark.backend("postgres")
@pytest.mark.parametrize("api", APIS)
def test_postgres_wrong_database(api: str) -> None:
    secret = new_secret()
    error = failure(api, _pg("postgres", secret, path=f"/wm_no_such_db_{secrets.token_hex(4)}"))
    assert isinstance(error, workmem.BackendRefusedError), repr(error)
    check(error, secret, "psycopg.")


@pytest.mark.backend("postgres")
@pytest.mark.parametrize("api", APIS)
def test_postgres_refused_statements_of_a_role_with_a_password(api: str) -> None:
    with select_only_role() as (url, secret, _):
        write = failure(api, url, lambda storage: storage.save_resource(Resource("r", "wm")), create=False)
        assert isinstance(write, workmem.BackendRefusedError), repr(write)
        check(write, secret, "psycopg.")
        assert write.__cause__.sqlstate == "42501"  # type: ignore[union-attr]  # kept on the stand-in
        setup = failure(api, url)  # create=True: may not create tables in the schema
        assert isinstance(setup, workmem.BackendRefusedError) and "create=False" in str(setup), repr(setup)
        check(setup, secret, "psycopg.")


@pytest.mark.backend("postgres")
@pytest.mark.parametrize("api", APIS)
def test_postgres_dropped_connection(api: str) -> None:
    """The server goes away under an open storage: its connections drop, reconnecting is refused."""
    secret = new_secret()
    server = urlsplit(server_url("postgres"))
    with TcpProxy((server.hostname or "127.0.0.1", server.port or 5432)) as proxy:

        def drop_then_write(storage: Any) -> Any:
            proxy.refuse()
            return storage.save_resource(Resource("r", "wm"))

        def drop_then_read(storage: Any) -> Any:
            proxy.refuse()
            return storage.get_resource("r")

        for action in (drop_then_write, drop_then_read):
            proxy.resume()
            error = failure(api, _pg("postgres", secret, port=proxy.port), action, connect_timeout=3)
            assert isinstance(error, workmem.BackendUnavailableError), repr(error)
            check(error, secret, "psycopg.")


# -- libSQL -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("how", ["url", "option"])
def test_libsql_remote_token_against_a_closed_port(api: str, how: str) -> None:
    secret = new_secret()
    where = f"libsql+http://127.0.0.1:{closed_port()}"
    error = failure(api, f"{where}?authToken={secret}") if how == "url" else failure(api, where, auth_token=secret)
    assert isinstance(error, workmem.BackendUnavailableError), repr(error)
    check(error, secret, "")


@pytest.mark.backend("libsql")
@pytest.mark.parametrize("api", APIS)
def test_libsql_local_file_errors_with_a_token_given(api: str, tmp_path: Path) -> None:
    """A token handed to a local file's driver never shows either: a file that is no database, a refused query()."""
    secret = new_secret()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is no SQLite database " * 200)
    error = failure(api, f"file:{garbage}", auth_token=secret)
    check(error, secret, "")

    def refused_query(storage: Any) -> Any:
        return storage.query("SELEKT 1")

    refused = failure(api, f"file:{tmp_path / 'agent.db'}", refused_query, auth_token=secret)
    assert isinstance(refused, workmem.ValidationError), repr(refused)
    check(refused, secret, "")


# -- Upstash (through workmem's bridge to the local Redis) -----------------------------------------


@pytest.mark.backend("upstash")
@pytest.mark.parametrize("api", APIS)
def test_upstash_wrong_token(api: str) -> None:
    from backends import shared_bridge

    secret = new_secret()
    base = shared_bridge().url.replace("http://", "upstash+http://")
    error = failure(api, f"{base}?token={secret}&retries=0")
    assert isinstance(error, workmem.BackendRefusedError) and "WRONGPASS" in str(error), repr(error)
    check(error, secret)


@pytest.mark.parametrize("api", APIS)
def test_upstash_token_echoed_by_a_server(api: str) -> None:
    secret = new_secret()
    with echo_server() as port:
        error = failure(api, f"upstash+http://127.0.0.1:{port}?token={secret}&retries=0")
    check(error, secret, "upstash_redis.")


@pytest.mark.backend("upstash")
@pytest.mark.parametrize("api", APIS)
def test_upstash_bridge_down(api: str) -> None:
    """The REST server goes away under an open storage: the request (its Authorization header) is not kept."""
    from backends import shared_bridge
    from upstash_fixtures import delete_prefix, start_bridge, stop_bridge

    bridge = start_bridge(server_url("redis"))
    prefix = f"wm_test_{secrets.token_hex(6)}:"

    def bridge_gone(storage: Any) -> Any:
        bridge.stop()
        return storage.save_resource(Resource("r", "wm"))

    try:
        error = failure(api, f"{bridge.storage_url(prefix)}&retries=0", bridge_gone)
    finally:
        stop_bridge(bridge)
        delete_prefix(shared_bridge(), prefix)  # the same Redis
    assert isinstance(error, workmem.BackendUnavailableError), repr(error)
    check(error, bridge.token, "httpx.")


# -- MongoDB and Oracle: the drivers' own exceptions, without a server ------------------------------


@pytest.mark.parametrize("api", APIS)
def test_mongodb_unreachable(api: str) -> None:
    secret = new_secret()
    fast = "serverSelectionTimeoutMS=300&connectTimeoutMS=300"
    unreachable = failure(api, f"mongodb://u:{secret}@127.0.0.1:{closed_port()}/db?{fast}")
    assert isinstance(unreachable, workmem.BackendUnavailableError), repr(unreachable)
    check(unreachable, secret, "pymongo.")
    unparsable = failure(api, f"mongodb://u:{secret}@127.0.0.1:notaport/db?{fast}")  # pymongo's URL parser
    assert isinstance(unparsable, workmem.ValidationError), repr(unparsable)
    check(unparsable, secret, "ValueError")


@pytest.mark.parametrize("api", APIS)
def test_oracle_unreachable(api: str) -> None:
    secret = new_secret()
    error = failure(api, f"oracle://u:{secret}@127.0.0.1:{closed_port()}/FREEPDB1", connect_timeout=2)
    assert isinstance(error, workmem.BackendUnavailableError), repr(error)
    check(error, secret, "oracledb.")
    assert error.__cause__.code == "DPY-6005"  # type: ignore[union-attr]


# -- the URL held as a Secret, and the other public doors that take a URL ---------------------------


def test_a_secret_shows_masked_and_is_not_pickled() -> None:
    secret = new_secret()
    held = Secret(f"postgresql://app:{secret}@db.example.com/agents")
    assert repr(held) == str(held) == "Secret('postgresql://app:***@db.example.com/agents')"
    assert repr(Secret(secret)) == "Secret('***')" and f"{Secret(secret)}" == "Secret('***')"
    assert held.reveal().endswith("@db.example.com/agents") and held == Secret(held.reveal())
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(held)


@pytest.mark.parametrize("api", APIS)
def test_connect_takes_a_secret_url_and_options(api: str) -> None:
    secret = new_secret()
    fast = "serverSelectionTimeoutMS=300&connectTimeoutMS=300"
    error = failure(api, Secret(f"mongodb://u:{secret}@127.0.0.1:{closed_port()}/db?{fast}"))
    check(error, secret, "pymongo.")
    token = failure(api, f"libsql+http://127.0.0.1:{closed_port()}", auth_token=Secret(secret))
    assert isinstance(token, workmem.BackendUnavailableError), repr(token)
    check(token, secret)


def test_memory_from_a_url() -> None:
    secret = new_secret()
    url = f"oracle://u:{secret}@127.0.0.1:{closed_port()}/FREEPDB1"
    for given in (url, Secret(url)):
        with pytest.raises(WorkmemError) as sync:
            workmem.Memory(given)
        check(sync.value, secret, "oracledb.")

        async def main(given: str | Secret = given) -> None:
            await workmem.AsyncMemory.open(given, connect_timeout=2)

        with pytest.raises(WorkmemError) as opened:
            asyncio.run(main())
        check(opened.value, secret, "oracledb.")


def test_copy_export_import_and_verify_from_a_url() -> None:
    """The transfer functions take URLs too: an exception leaving them keeps none in its frames."""
    from workmem.transfer import copy, copy_async, export_records, import_records, verify

    secret = new_secret()
    url = f"oracle://u:{secret}@127.0.0.1:{closed_port()}/FREEPDB1"
    exported = io.BytesIO()
    with workmem.connect("memory://") as source:
        source.save_resource(Resource("r", "wm"))
        export_records(source, exported)
    calls: list[Callable[[], object]] = [
        lambda: copy(url, "memory://"),
        lambda: copy("memory://", url),
        lambda: asyncio.run(copy_async(url, "memory://")),
        lambda: export_records(url, io.BytesIO()),
        lambda: import_records(url, exported.getvalue().splitlines(keepends=True)),
        lambda: verify(url, "memory://"),
    ]
    for call in calls:
        with pytest.raises(WorkmemError) as raised:
            call()
        check(raised.value, secret, "oracledb.")


def test_only_the_frames_below_connect_forget_their_locals() -> None:
    """What the caller keeps in its own variables stays there for its own debugging; workmem's frames are cleared."""
    secret = new_secret()
    url = f"oracle://u:{secret}@127.0.0.1:{closed_port()}/FREEPDB1"

    def open_it(given: str) -> None:
        workmem.connect(given, connect_timeout=2)

    with pytest.raises(WorkmemError) as raised:
        open_it(url)
    frames = {frame.f_code.co_qualname: frame.f_locals for frame, _ in traceback.walk_tb(raised.value.__traceback__)}
    assert frames[open_it.__qualname__]["given"] == url  # the caller's frame: untouched
    below = [name for name in frames if name.startswith(("OracleStorage", "OracleHooks", "SqlHooks", "OracleSettings"))]
    assert below and all(frames[name] == {} for name in below), {name: frames[name] for name in below}


def test_settings_objects_show_no_secret() -> None:
    """What a frame of an adapter holds besides the storage (whose repr is tested in test_reliability_secrets)."""
    from workmem.adapters.mongodb.client import Secrets
    from workmem.adapters.oracle import OracleSettings
    from workmem.adapters.postgres import PostgresSettings
    from workmem.adapters.upstash.settings import UpstashSettings

    secret = new_secret()
    shown = [
        OracleSettings.from_url(f"oracle://u:{secret}@db.example.com:1521/FREEPDB1"),
        PostgresSettings.from_url(f"postgresql://u:{secret}@db.example.com/app?schema=s1"),
        UpstashSettings.from_url(f"upstash+https://db.example.com?token={secret}"),
        UpstashSettings.from_url(f"upstash+https://default:{secret}@db.example.com"),
        Secrets(f"mongodb://u:{secret}@db.example.com/agents"),
        Secret(secret),
    ]
    for settings in shown:
        assert secret not in repr(settings) and secret not in str(settings), repr(settings)
