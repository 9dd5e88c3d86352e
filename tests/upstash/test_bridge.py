"""The Upstash REST bridge, driven by the real ``upstash-redis`` client and by raw HTTP."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from upstash_fixtures import Bridge, bridge, delete_prefix, raw_client
from upstash_redis import Redis
from upstash_redis.errors import UpstashError

from workmem.testing.upstash_bridge.resp import ErrorReply, RedisAddress, Status, encode_command
from workmem.testing.upstash_bridge.server import render

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge"]


@pytest.fixture
def prefix(bridge: Bridge) -> Iterator[str]:
    value = f"wm_bridge_{secrets.token_hex(6)}:"
    yield value
    delete_prefix(bridge, value)


@pytest.fixture(params=["base64", None], ids=["base64", "plain"])
def client(bridge: Bridge, request: pytest.FixtureRequest) -> Iterator[Redis]:
    redis = raw_client(bridge, rest_encoding=request.param, rest_retries=0)
    assert isinstance(redis, Redis)
    yield redis
    redis.close()


def post(bridge: Bridge, path: str, body: Any, *, token: str | None = None, **headers: str) -> httpx.Response:
    return httpx.post(
        bridge.url + path,
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {token or bridge.token}", "Content-Type": "application/json", **headers},
    )


# -- pure rendering -----------------------------------------------------------------


def test_render_follows_the_upstash_encoding_rules() -> None:
    reply = [b"caf\xc3\xa9", Status("OK"), Status("PONG"), 7, None, [b"\xff", ErrorReply("ERR nested")]]
    assert render(reply, base64_encoding=False) == ["café", "OK", "PONG", 7, None, ["\ufffd", "ERR nested"]]
    assert render(reply, base64_encoding=True) == [
        base64.b64encode("café".encode()).decode(),
        "OK",  # the one string Upstash never encodes
        base64.b64encode(b"PONG").decode(),
        7,
        None,
        ["/w==", "ERR nested"],
    ]


def test_resp_encoding_and_redis_urls() -> None:
    assert encode_command([b"SET", b"k", b"\xe2\x82\xac"]) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\n\xe2\x82\xac\r\n"
    address = RedisAddress.parse("redis://user:p%40ss@redis.example:6380/3")
    assert (address.host, address.port, address.db, address.username, address.password) == (
        "redis.example",
        6380,
        3,
        "user",
        "p@ss",
    )
    assert RedisAddress.parse("redis://127.0.0.1").port == 6379
    with pytest.raises(ValueError):
        RedisAddress.parse("http://127.0.0.1:6379")


# -- through the upstash-redis client (both encodings) ---------------------------------


def test_strings_and_unicode(client: Redis, prefix: str) -> None:
    key = prefix + "s"
    assert client.set(key, 'héllo 😀 "quoted" {json}') is True
    assert client.get(key) == 'héllo 😀 "quoted" {json}'
    assert client.append(key, "!") == len('héllo 😀 "quoted" {json}!'.encode())
    assert client.incr(prefix + "n") == 1
    assert client.incrbyfloat(prefix + "n", 0.5) == 1.5
    assert client.get(prefix + "missing") is None
    assert client.mget(key, prefix + "missing") == ['héllo 😀 "quoted" {json}!', None]
    assert client.set(key, "OK") is True
    assert client.get(key) == "OK"
    assert client.execute(["PING"]) == "PONG"
    assert client.execute(["ECHO", "ünï"]) == "ünï"


def test_lists_hashes_sets(client: Redis, prefix: str) -> None:
    assert client.rpush(prefix + "l", "a", "b", "ç") == 3
    assert client.lrange(prefix + "l", 0, -1) == ["a", "b", "ç"]
    assert client.hset(prefix + "h", values={"f1": "1", "f2": "två"}) == 2
    assert client.hgetall(prefix + "h") == {"f1": "1", "f2": "två"}
    assert client.hget(prefix + "h", "nope") is None
    assert client.sadd(prefix + "set", "x", "y") == 2
    assert sorted(client.smembers(prefix + "set")) == ["x", "y"]


def test_sorted_sets_order_equal_scores_by_member(client: Redis, prefix: str) -> None:
    key = prefix + "z"
    assert client.zadd(key, {"b": 1, "a": 1, "c": 0.5}) == 3
    assert client.zrange(key, 0, -1) == ["c", "a", "b"]
    assert client.zrange(key, 0, -1, rev=True) == ["b", "a", "c"]
    assert client.zrange(key, 0, -1, withscores=True) == [("c", 0.5), ("a", 1.0), ("b", 1.0)]
    assert client.zcard(key) == 3


def test_eval_returns_nested_arrays(client: Redis, prefix: str) -> None:
    script = "return {1, {KEYS[1], false, {ARGV[1], 2}}, 'tail'}"
    assert client.eval(script, keys=[prefix + "k"], args=["ü"]) == [1, [prefix + "k", None, ["ü", 2]], "tail"]
    sha = client.script_load("return ARGV[1]")
    assert client.evalsha(sha, args=["x"]) == "x"
    with pytest.raises(UpstashError, match="NOSCRIPT"):
        client.evalsha("0" * 40)
    with pytest.raises(UpstashError, match="boom"):
        client.eval("return redis.error_reply('boom')")


def test_redis_errors_are_reported_not_encoded(client: Redis, prefix: str) -> None:
    client.set(prefix + "str", "v")
    with pytest.raises(UpstashError, match=r"^WRONGTYPE"):
        client.lpush(prefix + "str", "x")
    with pytest.raises(UpstashError, match="unknown command"):
        client.execute(["NOSUCHCOMMAND", "x"])


def test_pipeline_reports_each_command(client: Redis, prefix: str) -> None:
    pipe = client.pipeline()
    pipe.set(prefix + "a", "1")
    pipe.incr(prefix + "a")
    pipe.get(prefix + "a")
    pipe.zadd(prefix + "z", {"m": 3})
    assert pipe.exec() == [True, 2, "2", 1]


def test_multi_exec_runs_atomically(client: Redis, prefix: str) -> None:
    tx = client.multi()
    tx.set(prefix + "a", "x")
    tx.rpush(prefix + "l", "1", "2")
    tx.lrange(prefix + "l", 0, -1)
    assert tx.exec() == [True, 2, ["1", "2"]]


# -- raw HTTP: the wire contract itself --------------------------------------------------


def test_single_command_bodies_and_status_codes(bridge: Bridge, prefix: str) -> None:
    ok = post(bridge, "/", ["SET", prefix + "k", "bar"])
    assert (ok.status_code, ok.json()) == (200, {"result": "OK"})
    got = post(bridge, "/", ["GET", prefix + "k"], **{"Upstash-Encoding": "base64"})
    assert got.json() == {"result": "YmFy"}
    assert post(bridge, "/", ["GET", prefix + "k"]).json() == {"result": "bar"}
    assert post(bridge, "/", ["INCR", prefix + "n"]).json() == {"result": 1}
    assert post(bridge, "/", ["GET", prefix + "none"]).json() == {"result": None}
    err = post(bridge, "/", ["INCR", prefix + "k"], **{"Upstash-Encoding": "base64"})
    assert (err.status_code, err.json()) == (400, {"error": "ERR value is not an integer or out of range"})
    numbers = post(bridge, "/", ["ZADD", prefix + "z", 1.5, "m", 2, "n"])
    assert numbers.json() == {"result": 2}


def test_invalid_utf8_is_replaced_or_base64(bridge: Bridge, prefix: str) -> None:
    post(bridge, "/", ["EVAL", "redis.call('SET', KEYS[1], '\\255ok') return 1", 1, prefix + "bin"])
    assert post(bridge, "/", ["GET", prefix + "bin"]).json() == {"result": "\ufffdok"}
    encoded = post(bridge, "/", ["GET", prefix + "bin"], **{"Upstash-Encoding": "base64"}).json()["result"]
    assert base64.b64decode(encoded) == b"\xffok"


def test_pipeline_and_transaction_shapes(bridge: Bridge, prefix: str) -> None:
    body = [["SET", prefix + "a", "x"], ["INCR", prefix + "a"], ["GET", prefix + "a"]]
    piped = post(bridge, "/pipeline", body)
    assert piped.status_code == 200
    assert piped.json() == [{"result": "OK"}, {"error": "ERR value is not an integer or out of range"}, {"result": "x"}]
    tx = post(bridge, "/multi-exec", body, **{"Upstash-Encoding": "base64"})
    assert tx.status_code == 200
    assert tx.json() == [{"result": "OK"}, {"error": "ERR value is not an integer or out of range"}, {"result": "eA=="}]
    discarded = post(bridge, "/multi-exec", [["SET", prefix + "b", "1"], ["GET"]])
    assert discarded.status_code == 400
    assert "wrong number of arguments" in discarded.json()["error"]
    assert post(bridge, "/", ["EXISTS", prefix + "b"]).json() == {"result": 0}  # nothing of it ran


def test_auth_is_required(bridge: Bridge) -> None:
    wrong = post(bridge, "/", ["PING"], token="not-the-token")
    assert wrong.status_code == 401
    assert "error" in wrong.json()
    missing = httpx.post(bridge.url, content=b'["PING"]', headers={"Content-Type": "application/json"})
    assert missing.status_code == 401
    via_query = httpx.post(
        bridge.url, params={"_token": bridge.token}, content=b'["PING"]', headers={"Content-Type": "application/json"}
    )
    assert via_query.json() == {"result": "PONG"}
    client = Redis(url=bridge.url, token="not-the-token", allow_telemetry=False, rest_retries=0)
    with pytest.raises(UpstashError, match="WRONGPASS"):
        client.get("anything")
    client.close()


def test_requests_the_bridge_refuses(bridge: Bridge) -> None:
    text = httpx.post(
        bridge.url,
        content=b'["PING"]',
        headers={"Authorization": f"Bearer {bridge.token}", "Content-Type": "text/plain"},
    )
    assert text.status_code == 415
    assert "application/json" in text.json()["error"]
    assert post(bridge, "/", {"not": "a command"}).status_code == 400
    assert post(bridge, "/", ["SET", "k", {"nested": 1}]).status_code == 400
    assert post(bridge, "/pipeline", []).status_code == 400
    assert post(bridge, "/nowhere", ["PING"]).status_code == 404
    for command in (["MULTI"], ["SELECT", "1"], ["SUBSCRIBE", "c"], ["BLPOP", "k", 0]):
        refused = post(bridge, "/", command)
        assert refused.status_code == 400, command
        assert "not available" in refused.json()["error"]
    bad_json = httpx.post(
        bridge.url,
        content=b"[",
        headers={"Authorization": f"Bearer {bridge.token}", "Content-Type": "application/json"},
    )
    assert bad_json.status_code == 400
    get = httpx.get(bridge.url, headers={"Authorization": f"Bearer {bridge.token}"})
    assert get.status_code == 405


def test_connections_are_reused_and_state_does_not_leak(bridge: Bridge, prefix: str) -> None:
    # Many keep-alive requests in a row; each must see only its own command's reply.
    with httpx.Client(headers={"Authorization": f"Bearer {bridge.token}"}) as http:
        for i in range(50):
            reply = http.post(bridge.url, json=["INCR", prefix + "c"]).json()
            assert reply == {"result": i + 1}


def test_an_unreachable_redis_is_a_json_error() -> None:
    import socket

    from upstash_fixtures import start_bridge, stop_bridge

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    dead = start_bridge(f"redis://127.0.0.1:{closed_port}")
    try:
        reply = post(dead, "/", ["PING"])
        assert reply.status_code == 502
        assert "could not reach redis" in reply.json()["error"]
    finally:
        stop_bridge(dead)


def test_the_command_line_needs_a_token(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from workmem.testing.upstash_bridge.__main__ import main

    monkeypatch.delenv("WORKMEM_BRIDGE_TOKEN", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["--port", "0"])
    assert info.value.code == 2
    assert "token is required" in capsys.readouterr().err
