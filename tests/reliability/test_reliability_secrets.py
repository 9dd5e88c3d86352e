"""Passwords and tokens never leak: not in exceptions, tracebacks, ``repr`` of a storage, logs or output.

Each case opens a backend with a distinctive secret (``S3cr3t-<random>``, and
one full of URL-special characters, given URL-encoded) and drives a failure:
a closed local port, a wrong host, a wrong user or token on the local server,
a server that echoes the credentials back in its error, a malformed URL. The
error must be a workmem error, and the secret (raw or URL-encoded) must appear
in none of: ``str``/``repr``/``args`` of every exception in the
``__cause__``/``__context__`` chain, ``traceback.format_exception`` of it,
anything else reachable from it (``reachable.assert_unreachable``), any
log record (root and the drivers' loggers at DEBUG), stdout/stderr (also at
the file-descriptor level, where native drivers write), and ``repr`` of a
storage that did open. No MongoDB or Oracle server is needed: a refused
connection is exactly the scenario. Everything stays on 127.0.0.x.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from backends import shared_bridge
from reachable import assert_unreachable, chain_of
from servers import server_url

import workmem
from workmem.errors import WorkmemError

DRIVER_LOGGERS = (
    "psycopg",
    "psycopg.pool",
    "pymongo",
    "oracledb",
    "httpx",
    "httpcore",
    "upstash_redis",
    "urllib3",
    "libsql",
)


def closed_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def new_secrets() -> list[str]:
    plain = f"S3cr3t-{secrets.token_hex(8)}"
    special = f"S3cr3t/{secrets.token_hex(4)}@:?#&=%+ {secrets.token_hex(4)}"
    return [plain, special]


def forms(secret: str) -> set[str]:
    """Every spelling of ``secret`` that would give it away."""
    spelled = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
    return {s for s in spelled if len(s) >= 8}


def texts_of(exc: BaseException) -> list[str]:
    found = ["".join(traceback.format_exception(exc))]
    for e in chain_of(exc):
        found += [str(e), repr(e), repr(e.args), *map(str, getattr(e, "__notes__", []))]
    return found


@pytest.fixture
def leaks(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> Iterator[Callable[..., None]]:
    """``check(secret, exc=..., storage=...)``: fails if the secret shows anywhere it was seen."""
    caplog.set_level(logging.DEBUG)
    for name in DRIVER_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def check(secret: str, *, exc: BaseException | None = None, storage: object = None) -> None:
            out, err = capfd.readouterr()
            seen = [out, err, caplog.text]
            seen += [f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records]
            seen += [str(w.message) for w in caught]
            if exc is not None:
                seen += texts_of(exc)
            if storage is not None:
                seen += [repr(storage), str(storage)]
            for form in forms(secret):
                leaked = [text for text in seen if form in text]
                assert not leaked, f"{form!r} leaked: {leaked[0][:1500]}"
            if exc is not None and len(secret) >= 8:
                assert_unreachable(exc, secret)  # nor anywhere reachable from it (see reachable.py)

        yield check


def failure_of(url: str, **options: Any) -> BaseException:
    """The exception ``workmem.connect`` raises (or the first call on what it opened); it must be a workmem error."""
    try:
        with workmem.connect(url, **options) as storage:
            storage.get_resource("r")
    except Exception as exc:
        assert isinstance(exc, WorkmemError), f"not a workmem error: {type(exc).__module__}.{type(exc).__name__}"
        return exc
    pytest.fail(f"expected a failure for {url!r}")


_ECHO = """
import http.server, json, sys

class Echo(http.server.BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        text = f"bad credentials {self.headers.get('Authorization')} for {self.path} {body[:200]}"
        data = json.dumps({"error": text, "message": text}).encode()
        self.send_response(int(sys.argv[1]))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextlib.contextmanager
def echo_server(status: int = 401) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 answering every request with ``status`` and the credentials it was sent.

    A separate process: the libsql driver holds the GIL while it waits for a remote answer.
    """
    process = subprocess.Popen([sys.executable, "-c", _ECHO, str(status)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


# -- PostgreSQL -------------------------------------------------------------------------


def _pg_cases(secret: str) -> dict[str, tuple[str, dict[str, Any]]]:
    enc, port = quote(secret, safe=""), closed_port()
    nobody = f"wm_nobody_{secrets.token_hex(4)}"
    return {
        "closed port": (f"postgresql://u:{enc}@127.0.0.1:{port}/postgres", {"connect_timeout": 2}),
        "wrong host": (f"postgresql://u:{enc}@127.0.0.2:{port}/postgres", {"connect_timeout": 2}),
        "no such user on the local server": (f"postgresql://{nobody}:{enc}@127.0.0.1:5432/postgres", {}),
        "password as a query parameter": (f"postgresql://u@127.0.0.1:{port}/db?password={enc}", {"connect_timeout": 2}),
        "sslpassword (libpq's client key passphrase)": (
            f"postgresql://u@127.0.0.1:{port}/db?sslpassword={enc}",
            {"connect_timeout": 2},
        ),
        "port not a number": (f"postgresql://u:{enc}@127.0.0.1:notaport/postgres", {}),
        "port out of range": (f"postgresql://u:{enc}@127.0.0.1:99999/postgres", {}),
        "bad percent-encoding next to it": (f"postgresql://u:{enc}%zz@127.0.0.1:{port}/postgres", {}),
        "unknown parameter": (f"postgresql://u:{enc}@127.0.0.1:{port}/postgres?bogus=1", {}),
        "bad schema": (f"postgresql://u:{enc}@127.0.0.1:{port}/postgres?schema=x-y", {}),
    }


PG_CASES = list(_pg_cases("x"))


@pytest.mark.parametrize("case", PG_CASES)
@pytest.mark.parametrize("which", ["plain", "special"])
def test_postgres_failures_hide_the_password(case: str, which: str, leaks: Callable[..., None]) -> None:
    secret = new_secrets()[which == "special"]
    url, options = _pg_cases(secret)[case]
    if "local server" in case:
        server_url("postgres")  # skips (or fails in CI) without the local server
    leaks(secret, exc=failure_of(url, **options))


@pytest.mark.backend("postgres")
def test_postgres_storage_repr_hides_the_password(leaks: Callable[..., None]) -> None:
    from postgres_schemas import fresh_schema_url

    secret = new_secrets()[1]
    with fresh_schema_url() as url:  # the local server trusts; the password is sent to no one but must not show
        with_password = url.replace("postgres@", f"postgres:{quote(secret, safe='')}@", 1)
        assert with_password != url
        with workmem.connect(with_password) as storage:
            storage.save_resource(workmem.Resource("r", "wm"))
            leaks(secret, storage=storage)
        # libpq's sslpassword (the client key's passphrase) is a secret too; without SSL libpq ignores it
        with workmem.connect(f"{url}&sslmode=disable&sslpassword={quote(secret, safe='')}") as storage:
            storage.get_resource("r")
            leaks(secret, storage=storage)


# -- libSQL (remote) ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["closed port", "echoing server", "port not a number", "option"])
@pytest.mark.parametrize("scheme", ["libsql+http", "libsql+ws", "libsql"])
def test_libsql_remote_failures_hide_the_token(where: str, scheme: str, leaks: Callable[..., None]) -> None:
    secret = new_secrets()[0]
    with echo_server() as echo:
        port = echo if where == "echoing server" else closed_port()
        host = f"127.0.0.1:{'notaport' if where == 'port not a number' else port}"
        if where == "option":
            exc = failure_of(f"{scheme}://{host}", auth_token=secret)
        else:
            exc = failure_of(f"{scheme}://{host}?authToken={quote(secret, safe='')}")
    leaks(secret, exc=exc)


# -- Upstash ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where", ["wrong token on the bridge", "closed port", "echoing server", "port not a number", "token as password"]
)
@pytest.mark.parametrize("which", ["plain", "special"])
def test_upstash_failures_hide_the_token(where: str, which: str, leaks: Callable[..., None]) -> None:
    secret = new_secrets()[which == "special"]
    enc = quote(secret, safe="")
    with echo_server() as echo:
        if where == "wrong token on the bridge":
            base = shared_bridge().url.replace("http://", "upstash+http://")
            url = f"{base}?token={enc}&retries=0"
        elif where == "echoing server":
            url = f"upstash+http://127.0.0.1:{echo}?token={enc}&retries=0"
        elif where == "port not a number":
            url = f"upstash+http://127.0.0.1:notaport?token={enc}"
        elif where == "token as password":
            url = f"upstash+http://:{enc}@127.0.0.1:{closed_port()}?retries=0"
        else:
            url = f"upstash+http://127.0.0.1:{closed_port()}?token={enc}&retries=0"
        exc = failure_of(url)
    if where == "wrong token on the bridge":
        assert "WRONGPASS" in str(exc), str(exc)  # the bridge answers 401 as Upstash does
    leaks(secret, exc=exc)


@pytest.mark.backend("upstash")
def test_upstash_storage_repr_hides_the_token(leaks: Callable[..., None]) -> None:
    bridge = shared_bridge()
    with workmem.connect(bridge.storage_url(f"wm_test_{secrets.token_hex(6)}:")) as storage:
        leaks(bridge.token, storage=storage)


# -- MongoDB ------------------------------------------------------------------------------


def _mongo_cases(secret: str) -> dict[str, str]:
    enc, port = quote(secret, safe=""), closed_port()
    fast = "serverSelectionTimeoutMS=300&connectTimeoutMS=300"
    return {
        "closed port": f"mongodb://u:{enc}@127.0.0.1:{port}/db?{fast}",
        "wrong host": f"mongodb://u:{enc}@127.0.0.2:{port}/db?{fast}",
        "port not a number": f"mongodb://u:{enc}@127.0.0.1:notaport/db?{fast}",
        "unescaped @ in the password": f"mongodb://u:{secret.split('/')[0]}@x@127.0.0.1:{port}/db?{fast}",
        "bad option": f"mongodb://u:{enc}@127.0.0.1:{port}/db?{fast}&tls=maybe",
        "empty host": f"mongodb://u:{enc}@/db",
        "an AWS session token in authMechanismProperties": (
            f"mongodb://127.0.0.1:{port}/db?{fast}&authMechanism=MONGODB-AWS"
            f"&authMechanismProperties=AWS_SESSION_TOKEN:{enc}"
        ),
        "the TLS client key's password": f"mongodb://127.0.0.1:{port}/db?{fast}&tlsCertificateKeyFilePassword={enc}",
    }


@pytest.mark.parametrize("case", list(_mongo_cases("x")))
@pytest.mark.parametrize("which", ["plain", "special"])
def test_mongodb_failures_hide_the_password(case: str, which: str, leaks: Callable[..., None]) -> None:
    secret = new_secrets()[which == "special"]
    url = _mongo_cases(secret)[case]
    if case == "unescaped @ in the password":
        secret = secret.split("/")[0]
    leaks(secret, exc=failure_of(url))


# -- Oracle -------------------------------------------------------------------------------


def _oracle_cases(secret: str) -> dict[str, tuple[str, dict[str, Any]]]:
    enc, port = quote(secret, safe=""), closed_port()
    return {
        "closed port": (f"oracle://u:{enc}@127.0.0.1:{port}/FREEPDB1", {"connect_timeout": 2}),
        "wrong host": (f"oracle://u:{enc}@127.0.0.2:{port}/?service_name=FREEPDB1", {"connect_timeout": 2}),
        "port not a number": (f"oracle://u:{enc}@127.0.0.1:notaport/FREEPDB1", {}),
        "no service": (f"oracle://u:{enc}@127.0.0.1:{port}/", {}),
        "unknown parameter": (f"oracle://u:{enc}@127.0.0.1:{port}/FREEPDB1?bogus=1", {}),
    }


@pytest.mark.parametrize("case", list(_oracle_cases("x")))
@pytest.mark.parametrize("which", ["plain", "special"])
def test_oracle_failures_hide_the_password(case: str, which: str, leaks: Callable[..., None]) -> None:
    secret = new_secrets()[which == "special"]
    url, options = _oracle_cases(secret)[case]
    leaks(secret, exc=failure_of(url, **options))


def test_the_leak_check_itself_catches_leaks(leaks: Callable[..., None], caplog: pytest.LogCaptureFixture) -> None:
    """The checker is not vacuous: a secret in a cause, a log record, output or a repr is found."""
    secret = new_secrets()[1]
    try:
        try:
            raise ValueError(f"driver said {quote(secret, safe='')}")
        except ValueError as inner:
            raise WorkmemError("masked") from inner
    except WorkmemError as exc:
        with pytest.raises(AssertionError, match="leaked"):
            leaks(secret, exc=exc)
    logging.getLogger("psycopg").debug("conninfo password=%s", secret)
    with pytest.raises(AssertionError, match="leaked"):
        leaks(secret)
    caplog.clear()
    leaks(secret)  # nothing left
    print(quote_plus(secret))
    with pytest.raises(AssertionError, match="leaked"):
        leaks(secret)

    class Shows:
        def __repr__(self) -> str:
            return f"Storage(token={secret})"

    with pytest.raises(AssertionError, match="leaked"):
        leaks(secret, storage=Shows())


# -- passwords typed raw, as users paste them (not percent-encoded) ----------------------------

RAW_PASSWORDS = {
    "hash": "Tr0ub#dor3-{}",
    "slash": "Tr0ub/dor3-{}",
    "question": "Tr0ub?dor3-{}",
    "at": "Tr0ub@dor3-{}",
    "all": "p@ss/w?rd#1:{}@x",
}


def raw_password(kind: str) -> str:
    return RAW_PASSWORDS[kind].format(secrets.token_hex(6))


def _fragments(secret: str) -> list[str]:
    """The pieces a wrong split would show: what is on each side of every special character."""
    import re

    return [piece for piece in re.split(r"[#/?@:]", secret) if len(piece) >= 8]


@pytest.mark.parametrize("kind", list(RAW_PASSWORDS))
def test_raw_passwords_reach_each_driver_as_written(kind: str) -> None:
    """The password each driver is handed (libpq's own parser, pymongo's, Oracle's, Upstash's) is the one typed."""
    import pymongo.uri_parser
    from psycopg.conninfo import conninfo_to_dict

    from workmem.adapters.mongodb.client import driver_url
    from workmem.adapters.oracle import OracleSettings
    from workmem.adapters.postgres import parse_postgres_url
    from workmem.adapters.upstash.settings import UpstashSettings

    secret = raw_password(kind)
    conninfo, schema = parse_postgres_url(f"postgresql://u:{secret}@db.example.com:5433/app?schema=s1&sslmode=disable")
    assert conninfo_to_dict(conninfo) == {
        "user": "u",
        "password": secret,
        "host": "db.example.com",
        "port": "5433",
        "dbname": "app",
        "sslmode": "disable",
    }
    assert schema == "s1"
    parsed = pymongo.uri_parser.parse_uri(driver_url(f"mongodb://u:{secret}@db.example.com:27018/app"))
    assert (parsed["username"], parsed["password"], parsed["nodelist"], parsed["database"]) == (
        "u",
        secret,
        [("db.example.com", 27018)],
        "app",
    )
    config = OracleSettings.from_url(f"oracle://u:{secret}@db.example.com:1522/FREEPDB1")
    assert (config.user, config.password, config.host, config.port, config.service_name) == (
        "u",
        secret,
        "db.example.com",
        1522,
        "FREEPDB1",
    )
    settings = UpstashSettings.from_url(f"upstash+https://default:{secret}@db.example.com")
    assert (settings.token, settings.rest_url) == (secret, "https://db.example.com")


def test_an_upstash_token_with_an_ampersand_is_one_token() -> None:
    from workmem.adapters.upstash.settings import UpstashSettings

    settings = UpstashSettings.from_url("upstash+https://h.example.com?token=AbC&dEf+1=&prefix=p:")
    assert (settings.token, settings.prefix) == ("AbC&dEf+1=", "p:")


@pytest.mark.parametrize("kind", list(RAW_PASSWORDS))
def test_raw_postgres_password_hidden_in_failures(kind: str, leaks: Callable[..., None]) -> None:
    secret = raw_password(kind)
    for url in (
        f"postgresql://u:{secret}@127.0.0.1:{closed_port()}/postgres",
        f"postgresql://u:{secret}@127.0.0.2:{closed_port()}/postgres?sslmode=disable",
    ):
        exc = failure_of(url, connect_timeout=2)
        assert isinstance(exc, workmem.BackendUnavailableError), repr(exc)
        leaks(secret, exc=exc)
        for fragment in _fragments(secret):
            leaks(fragment, exc=exc)


@pytest.mark.backend("postgres")
@pytest.mark.parametrize("kind", list(RAW_PASSWORDS))
def test_raw_postgres_password_opens_the_right_database_and_never_shows(kind: str, leaks: Callable[..., None]) -> None:
    """On the (trusting) local server: host, database and ``?schema=`` after a raw password are read right."""
    from postgres_schemas import fresh_schema_url

    secret = raw_password(kind)
    with fresh_schema_url() as url:
        with_password = url.replace("postgres@", f"postgres:{secret}@", 1)
        assert with_password != url and "?schema=" in with_password
        with workmem.connect(with_password) as storage, workmem.Memory(storage) as memory:
            storage.save_resource(workmem.Resource("r", "wm"))
            with workmem.connect(url) as plain:  # the same schema: the parameter after the password was read
                assert plain.get_resource("r") is not None
            for shown in (storage, memory):
                leaks(secret, storage=shown)
                for fragment in _fragments(secret):
                    leaks(fragment, storage=shown)


@pytest.mark.parametrize("kind", list(RAW_PASSWORDS))
def test_raw_mongodb_and_oracle_passwords_hidden(
    kind: str, leaks: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    from workmem.adapters.mongodb.storage import MongoStorage

    secret = raw_password(kind)
    fast = "serverSelectionTimeoutMS=300&connectTimeoutMS=300"
    mongo = f"mongodb://u:{secret}@127.0.0.1:{closed_port()}/db?{fast}"
    oracle = f"oracle://u:{secret}@127.0.0.1:{closed_port()}/FREEPDB1"
    for exc in (failure_of(mongo), failure_of(oracle, connect_timeout=2)):
        assert isinstance(exc, workmem.BackendUnavailableError), repr(exc)
        leaks(secret, exc=exc)
        for fragment in _fragments(secret):
            leaks(fragment, exc=exc)
    monkeypatch.setattr(MongoStorage, "create_indexes", lambda self: None)  # repr of an opened one, no I/O
    with workmem.connect(mongo) as storage:
        assert "u:***@127.0.0.1" in repr(storage)
        leaks(secret, storage=storage)
        for fragment in _fragments(secret):
            leaks(fragment, storage=storage)


@pytest.mark.parametrize("where", ["closed port", "echoing server"])
def test_upstash_token_after_an_ampersand_is_hidden(where: str, leaks: Callable[..., None]) -> None:
    head, tail = f"S3cr3t{secrets.token_hex(6)}", f"T41l{secrets.token_hex(6)}"
    with echo_server() as echo:
        port = echo if where == "echoing server" else closed_port()
        exc = failure_of(f"upstash+http://127.0.0.1:{port}?token={head}&{tail}&retries=0")
    leaks(tail, exc=exc)
    leaks(head, exc=exc)


@pytest.mark.backend("upstash")
def test_upstash_storage_with_an_ampersand_token_works_and_hides_it(leaks: Callable[..., None]) -> None:
    from servers import server_url
    from upstash_fixtures import start_bridge, stop_bridge

    token = f"S3cr3t{secrets.token_hex(6)}&T41l{secrets.token_hex(6)}"
    running = start_bridge(server_url("redis"), token=token)
    prefix = f"wm_test_{secrets.token_hex(6)}:"
    try:
        url = f"upstash+http://127.0.0.1:{running.url.rsplit(':', 1)[1]}?token={token}&prefix={prefix}"
        with workmem.connect(url) as storage, workmem.Memory(storage) as memory:
            storage.save_resource(workmem.Resource("r", "wm"))
            assert storage.get_resource("r") is not None
            for shown in (storage, memory):
                leaks(token.split("&")[1], storage=shown)
                leaks(token, storage=shown)
    finally:
        from upstash_fixtures import delete_prefix

        delete_prefix(running, prefix)
        stop_bridge(running)
