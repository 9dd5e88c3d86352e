"""Outages between workmem and a real server, made with a TCP proxy (``tests/support/tcp_proxy.py``).

The shared PostgreSQL and Redis of this machine are never restarted: the proxy
sits between the client and the real server and refuses connections, hangs
them, or kills every live one. The bounds on time asserted here are what users
are promised (fail within the connect timeout, recover within a second), with
generous margins: they are correctness bounds, not benchmarks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from servers import server_url
from tcp_proxy import TcpProxy
from upstash_fixtures import Bridge, delete_prefix

import workmem
from workmem.errors import BackendRefusedError, BackendUnavailableError, ValidationError
from workmem.kit import run_sync
from workmem.records import Thread
from workmem.testing.upstash_bridge import BridgeServer, spawn_bridge
from workmem.testing.upstash_bridge.resp import Connection, ConnectionPool, RedisAddress, Status, encode_command


def _target(backend: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(server_url(backend))
    return parts.hostname or "127.0.0.1", parts.port or default_port


# -- the proxy itself -------------------------------------------------------------------


def test_the_proxy_forwards_refuses_blackholes_and_kills() -> None:
    """The proxy does what the outage tests rely on (against a tiny echo server)."""
    with socket.socket() as echo:
        echo.bind(("127.0.0.1", 0))
        echo.listen(16)

        def serve() -> None:
            while True:
                try:
                    conn, _ = echo.accept()
                except OSError:
                    return

                def pump(c: socket.socket = conn) -> None:
                    with c:
                        while data := c.recv(100):
                            c.sendall(data)

                threading.Thread(target=pump, daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        with TcpProxy(echo.getsockname()) as proxy:
            with socket.create_connection(proxy.address, timeout=2) as client:
                client.sendall(b"ping")
                assert client.recv(100) == b"ping"
                assert proxy.kill_all() == 1
                assert client.recv(100) == b""  # closed by the proxy
            proxy.refuse()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(proxy.address, timeout=2)
            proxy.blackhole()
            with socket.create_connection(proxy.address, timeout=2) as client:
                client.settimeout(0.3)
                client.sendall(b"ping")
                with pytest.raises(TimeoutError):
                    client.recv(100)
            proxy.resume()
            with socket.create_connection(proxy.address, timeout=2) as client:
                client.sendall(b"pong")
                assert client.recv(100) == b"pong"


# -- the Upstash REST bridge in front of Redis ----------------------------------------


@contextlib.contextmanager
def bridge_behind_proxy() -> Iterator[tuple[Bridge, TcpProxy]]:
    """A bridge of this test whose Redis connections all go through a proxy to the real Redis."""
    with TcpProxy(_target("redis", 6379)) as proxy:
        running = spawn_bridge(f"redis://127.0.0.1:{proxy.port}")
        try:
            yield running, proxy
        finally:
            running.stop()


_http = httpx.Client(timeout=10)  # one client (its connection pool) for every request of this module


@pytest.fixture(autouse=True, scope="module")
def _close_http() -> Iterator[None]:
    yield
    _http.close()


def command(bridge: Bridge, body: list[object]) -> httpx.Response:
    """One command through the bridge's REST API, as raw HTTP."""
    return _http.post(
        bridge.url,
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {bridge.token}", "Content-Type": "application/json"},
    )


def fill_the_pool(bridge: Bridge, proxy: TcpProxy, wanted: int = 8) -> None:
    """Make the bridge open several Redis connections (overlapping requests), all then idle in its pool."""
    proxy.delay = 0.05  # each request holds its connection a while, so concurrent ones need their own
    try:
        for _ in range(5):
            threads = [threading.Thread(target=lambda: command(bridge, ["PING"])) for _ in range(24)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
            if proxy.live() >= wanted:
                return
    finally:
        proxy.delay = 0.0
    raise AssertionError(f"the bridge opened only {proxy.live()} connections to Redis")


@pytest.mark.backend("upstash")
@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_bridge_requests_survive_redis_dropping_every_pooled_connection(reset: bool) -> None:
    """After Redis closed every connection (a restart does that), no request fails on a dead pooled socket."""
    with bridge_behind_proxy() as (bridge, proxy):
        fill_the_pool(bridge, proxy)
        killed = proxy.kill_all(reset=reset)
        time.sleep(0.05)  # let the closes reach the bridge's sockets, as they do before a restarted Redis is back
        key = f"wm_outage_{secrets.token_hex(6)}"
        try:
            replies = [command(bridge, ["INCR", key]) for _ in range(killed + 8)]
            assert [r.status_code for r in replies] == [200] * len(replies), [r.text for r in replies]
            assert [r.json()["result"] for r in replies] == list(range(1, len(replies) + 1))  # each ran once
        finally:
            command(bridge, ["DEL", key])


@pytest.mark.backend("upstash")
def test_bridge_while_redis_is_down_fails_with_the_reason_and_recovers_at_once() -> None:
    with bridge_behind_proxy() as (bridge, proxy):
        fill_the_pool(bridge, proxy, wanted=2)
        proxy.refuse()
        down = command(bridge, ["PING"])
        assert down.status_code == 502
        assert "could not reach redis" in down.json()["error"] and "refused" in down.json()["error"].lower()
        proxy.resume()
        started = time.monotonic()
        assert command(bridge, ["PING"]).json() == {"result": "PONG"}
        assert time.monotonic() - started < 1.0


@pytest.mark.backend("upstash")
def test_upstash_storage_survives_redis_dropping_every_bridge_connection() -> None:
    """Through the public API: every call after Redis dropped the bridge's connections succeeds."""
    with bridge_behind_proxy() as (bridge, proxy):
        prefix = f"wm_outage_{secrets.token_hex(6)}:"
        url = bridge.storage_url(prefix) + "&retries=0&timeout=10"
        try:
            with workmem.connect(url) as storage:
                storage.save_thread(Thread("t", "owner-a", "before"))
                fill_the_pool(bridge, proxy)
                proxy.kill_all()
                time.sleep(0.05)
                for n in range(40):
                    assert storage.get_thread("t").title == "before"  # type: ignore[union-attr]
                    storage.merge_working_memory({f"n{n}": n}, scope="resource", resource_id="r")
                text = storage.get_working_memory(scope="resource", resource_id="r")
                assert json.loads(text or "{}") == {f"n{n}": n for n in range(40)}
        finally:
            delete_prefix(bridge, prefix)


def test_bridge_listen_backlog_takes_a_burst_of_clients() -> None:
    """Clients connecting while the bridge is busy wait in the backlog; none is dropped or refused."""
    server = BridgeServer(("127.0.0.1", 0), redis_url="redis://127.0.0.1:1", token="t")  # not serving yet: busy
    try:
        clients = []
        try:
            for _ in range(64):
                clients.append(socket.create_connection(server.server_address[:2], timeout=0.5))  # type: ignore[arg-type]
        finally:
            for client in clients:
                client.close()
        assert len(clients) == 64
    finally:
        server.server_close()


# -- the bridge's rule for sending a request again --------------------------------------


@pytest.mark.backend("upstash")
def test_bridge_pool_resends_a_request_only_when_none_of_it_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reused connection reset by Redis unnoticed (stale check raced) fails on send: sent again, once each."""
    with TcpProxy(_target("redis", 6379)) as proxy:
        pool = ConnectionPool(RedisAddress("127.0.0.1", proxy.port))
        try:
            for conn in [Connection(pool.address) for _ in range(4)]:
                pool._give(conn)
            assert proxy.wait_live(4) == 4
            proxy.kill_all(reset=True)
            time.sleep(0.05)
            monkeypatch.setattr(Connection, "stale", lambda self: False)  # as if the reset came after the check
            key = f"wm_outage_{secrets.token_hex(6)}"
            try:
                assert [pool.execute([[b"INCR", key.encode()]]) for _ in range(6)] == [[n] for n in range(1, 7)]
            finally:
                pool.execute([[b"DEL", key.encode()]])
        finally:
            pool.close()


def test_bridge_pool_never_resends_a_request_redis_received() -> None:
    """Redis read the command (and may have run it), then the connection died: the error is returned, no resend."""
    received: list[bytes] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                received.append(conn.recv(1000))
                conn.sendall(b"+PONG\r\n")
                received.append(conn.recv(1000))  # the write arrives ... and the server dies before replying
            with contextlib.suppress(OSError):
                server.settimeout(1)
                again, _ = server.accept()
                received.append(again.recv(1000))
                again.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        pool = ConnectionPool(RedisAddress("127.0.0.1", server.getsockname()[1]))
        try:
            assert pool.execute([[b"PING"]]) == [Status("PONG")]
            with pytest.raises(ConnectionError, match="closed the connection"):
                pool.execute([[b"INCR", b"k"]])
        finally:
            pool.close()
        thread.join(timeout=5)
    assert received == [encode_command([b"PING"]), encode_command([b"INCR", b"k"])]


# -- PostgreSQL ----------------------------------------------------------------------

PASSWORD = f"S3cr3t-{secrets.token_hex(6)}"  # the test server trusts 127.0.0.1, so any password is accepted


@contextlib.contextmanager
def postgres_url_behind_proxy(query: dict[str, str] | None = None) -> Iterator[tuple[str, TcpProxy]]:
    """A URL (with :data:`PASSWORD`, a fresh schema) whose connections all go through a proxy to the real PostgreSQL."""
    from postgres_schemas import fresh_schema_url

    with fresh_schema_url(**(query or {})) as direct, TcpProxy(_target("postgres", 5432)) as proxy:
        parts = urlsplit(direct)
        user = parts.username or "postgres"
        yield f"postgresql://{user}:{PASSWORD}@127.0.0.1:{proxy.port}{parts.path}?{parts.query}", proxy


@contextlib.contextmanager
def postgres_behind_proxy(
    query: dict[str, str] | None = None, **options: object
) -> Iterator[tuple[workmem.MemoryStorage, TcpProxy]]:
    """A storage whose connections all go through a proxy to the real PostgreSQL (a fresh schema)."""
    with postgres_url_behind_proxy(query) as (url, proxy), workmem.connect(url, **options) as storage:
        yield storage, proxy


def _fails_fast(call: object, within: float) -> BackendUnavailableError:
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as caught:
        call()  # type: ignore[operator]
    took = time.monotonic() - started
    assert took < within, f"the call took {took:.1f} s to fail"
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value.__cause__)
    return caught.value


@pytest.mark.backend("postgres")
def test_postgres_refused_login_is_no_outage_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """The server answered and said no: the caller gets BackendRefusedError, the log says nothing of an outage."""
    caplog.set_level(logging.DEBUG)
    role = f"no_such_role_{secrets.token_hex(4)}"
    host, port = _target("postgres", 5432)
    for url in (
        f"postgresql://{role}:{PASSWORD}@{host}:{port}/postgres",
        f"postgresql://{host}:{port}/postgres?sslmode=bogus",
    ):
        with pytest.raises((BackendRefusedError, ValidationError)):
            workmem.connect(url)
    outage = [r.getMessage() for r in caplog.records if "reachable" in r.getMessage()]
    assert outage == []


@pytest.mark.backend("postgres")
def test_postgres_down_fails_at_once_with_the_reason_and_recovers_at_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with postgres_behind_proxy(connect_timeout=3, max_size=4) as (storage, proxy):
        storage.save_thread(Thread("t", "owner-a", "before"))
        proxy.refuse()  # the server goes away: live connections die, new ones are refused
        for call in (
            lambda: storage.get_thread("t"),
            lambda: storage.save_thread(Thread("t2", "owner-a", "x")),
            lambda: storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r"),  # a transaction
            lambda: storage.list_threads("owner-a"),
        ):
            error = _fails_fast(call, within=3 + 2)
            assert "Connection refused" in str(error), str(error)
        proxy.resume()
        started = time.monotonic()
        assert storage.get_thread("t").title == "before"  # type: ignore[union-attr]
        assert time.monotonic() - started < 1.0
        storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert all(r.name.startswith("workmem.") for r in warnings), [(r.name, r.getMessage()) for r in warnings]
    unreachable = [r.getMessage() for r in warnings if "unreachable" in r.getMessage()]
    assert len(unreachable) == 1 and "Connection refused" in unreachable[0], unreachable  # once per outage
    assert any("reachable again" in r.getMessage() for r in caplog.records)
    assert not any(PASSWORD in r.getMessage() for r in caplog.records)


@pytest.mark.backend("postgres")
@pytest.mark.parametrize("where", ["option", "url"])
def test_postgres_hanging_server_fails_within_connect_timeout(where: str) -> None:
    """A server that accepts but never answers: the call fails after ``connect_timeout``, saying so."""
    query, options = ({"connect_timeout": "2"}, {}) if where == "url" else ({}, {"connect_timeout": 2})
    with postgres_behind_proxy(query, **options) as (storage, proxy):
        proxy.kill_all()
        proxy.blackhole()
        error = _fails_fast(lambda: storage.get_thread("t"), within=2 + 2)
        assert "timeout" in str(error).lower(), str(error)
        proxy.resume()
        started = time.monotonic()
        assert storage.get_thread("t") is None
        assert time.monotonic() - started < 1.0


@pytest.mark.backend("postgres")
@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_postgres_every_idle_connection_dropped_no_call_fails(reset: bool) -> None:
    """Connections the server closed while idle are replaced before use: reads and writes all succeed."""
    with postgres_behind_proxy(min_size=4, max_size=4) as (storage, proxy):
        storage.save_thread(Thread("t", "owner-a", "before"))
        assert proxy.wait_live(4) == 4
        assert proxy.kill_all(reset=reset) == 4
        time.sleep(0.05)
        for n in range(8):
            storage.update_thread("t", metadata={"n": n})  # a write first: writes are never retried
            assert storage.get_thread("t").metadata == {"n": n}  # type: ignore[union-attr]


@pytest.mark.backend("postgres")
def test_postgres_pool_exhausted_is_busy_and_closed_storage_is_closed() -> None:
    """All ``max_size`` connections lent out past ``timeout``: BackendBusyError; after close(): StorageClosedError."""
    from workmem.errors import BackendBusyError, StorageClosedError

    with postgres_behind_proxy(max_size=1, timeout=0.3) as (storage, _):
        held = storage._transaction()  # type: ignore[attr-defined]  # the only connection, in a transaction
        run_sync(held.__aenter__())
        try:
            started = time.monotonic()
            with pytest.raises(BackendBusyError, match="max_size"):
                storage.get_thread("t")
            assert 0.25 < time.monotonic() - started < 2.3
        finally:
            run_sync(held.__aexit__(None, None, None))
        assert storage.get_thread("t") is None  # the connection came back
    with pytest.raises(StorageClosedError):
        storage.get_thread("t")


@pytest.mark.backend("postgres")
def test_postgres_connection_lost_unnoticed_reads_retried_writes_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-use check raced (simulated): a read and a transaction's BEGIN go again on a new connection;
    a write does not (it may have run), and fails with BackendUnavailableError."""
    import workmem.adapters.postgres.pool as pool_module

    with postgres_behind_proxy(min_size=1, max_size=1) as (storage, proxy):
        storage.save_thread(Thread("t", "owner-a", "before"))
        monkeypatch.setattr(pool_module, "closed_by_server", lambda conn: False)
        proxy.kill_all()
        time.sleep(0.05)
        assert storage.get_thread("t").title == "before"  # type: ignore[union-attr]
        proxy.kill_all()
        time.sleep(0.05)

        async def transaction() -> None:  # what row-locked merges run in
            async with storage._transaction() as tx:  # type: ignore[attr-defined]
                assert tx is not None

        run_sync(transaction())
        proxy.kill_all()
        time.sleep(0.05)
        with pytest.raises(BackendUnavailableError):
            storage.update_thread("t", title="after")
        assert storage.get_thread("t").title == "before"  # type: ignore[union-attr]
