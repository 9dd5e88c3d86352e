"""The HTTP side of the bridge: the Upstash REST contract in front of a real ``redis-server``.

Endpoints (all ``POST``, body ``application/json``, ``Authorization: Bearer TOKEN``
or ``?_token=TOKEN``):

* ``/`` -- one command as a JSON array, e.g. ``["SET", "k", "v"]``; replies
  ``{"result": ...}`` (HTTP 200) or ``{"error": "..."}`` (HTTP 400 for a Redis error);
* ``/pipeline`` -- a JSON array of commands; replies a JSON array with one
  ``{"result": ...}`` or ``{"error": ...}`` per command (HTTP 200);
* ``/multi-exec`` -- the same inside ``MULTI``/``EXEC``; a transaction discarded
  as a whole (a command refused while queueing) is one ``{"error": ...}`` (HTTP 400).

With ``Upstash-Encoding: base64`` every string in a result is base64 of its
raw bytes, recursively, except the status reply ``OK``; integers and nil stay
as they are and error messages are never encoded. Without it, bulk strings are
decoded as UTF-8 (invalid bytes become U+FFFD), as Upstash does. Replies are
passed through as Redis sends them (RESP2): arrays stay arrays.
"""

from __future__ import annotations

import base64
import hmac
import json
import socket
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from workmem.testing.upstash_bridge.resp import ConnectionPool, ErrorReply, RedisAddress, Reply, Status

__all__ = ["UNSUPPORTED_COMMANDS", "BridgeServer", "render"]

UNSUPPORTED_COMMANDS = frozenset(
    {
        # Connection state the pool would leak to the next request.
        "AUTH", "HELLO", "SELECT", "QUIT", "RESET", "CLIENT", "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH",
        # Streaming and blocking commands (Upstash serves these elsewhere or not at all).
        "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR",
        "SYNC", "PSYNC", "BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP",
    }
)  # fmt: skip
MAX_BODY_BYTES = 64 * 1024 * 1024


class _RequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def render(reply: Reply, *, base64_encoding: bool) -> Any:
    """One RESP2 reply as the JSON value Upstash puts under ``"result"``."""
    if isinstance(reply, ErrorReply):
        return reply.message  # only reachable nested inside an array; errors are never encoded
    if isinstance(reply, Status):
        if base64_encoding and reply != "OK":
            return base64.b64encode(reply.encode("utf-8")).decode("ascii")
        return str(reply)
    if isinstance(reply, bytes):
        if base64_encoding:
            return base64.b64encode(reply).decode("ascii")
        return reply.decode("utf-8", "replace")
    if isinstance(reply, list):
        return [render(item, base64_encoding=base64_encoding) for item in reply]
    return reply  # int or None


def _entry(reply: Reply, base64_encoding: bool) -> dict[str, Any]:
    if isinstance(reply, ErrorReply):
        return {"error": reply.message}
    return {"result": render(reply, base64_encoding=base64_encoding)}


def _command(value: Any) -> list[bytes]:
    """Validate one JSON command and encode its arguments as Redis bulk strings."""
    if not isinstance(value, list) or not value or not isinstance(value[0], str):
        raise _RequestError(400, "ERR a command must be a non-empty JSON array starting with the command name")
    args: list[bytes] = []
    for item in value:
        if isinstance(item, str):
            args.append(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, int) and not isinstance(item, bool):
            args.append(str(item).encode("ascii"))
        elif isinstance(item, float):
            args.append(repr(item).encode("ascii"))
        else:
            raise _RequestError(400, f"ERR command arguments must be strings or numbers, got {json.dumps(item)}")
    name = value[0].upper()
    if name in UNSUPPORTED_COMMANDS:
        raise _RequestError(400, f"ERR Command is not available over the REST bridge: '{value[0]}'")
    return args


def _commands(value: Any) -> list[list[bytes]]:
    if not isinstance(value, list) or not value:
        raise _RequestError(400, "ERR the body must be a non-empty JSON array of commands")
    return [_command(item) for item in value]


class BridgeServer(ThreadingHTTPServer):
    """A threading HTTP server that forwards Upstash REST requests to one redis-server."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = socket.SOMAXCONN  # the listen backlog: a burst of clients waits, none is refused

    def __init__(self, address: tuple[str, int], *, redis_url: str, token: str, verbose: bool = False) -> None:
        if not token:
            raise ValueError("the bridge needs a token")
        self.pool = ConnectionPool(RedisAddress.parse(redis_url))
        self.token = token
        self.verbose = verbose
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        """``http://host:port`` of this server (without the token)."""
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}"

    def server_close(self) -> None:
        super().server_close()
        self.pool.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: BridgeServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            sys.stderr.write(f"{self.address_string()} {format % args}".replace(self.server.token, "***") + "\n")

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refuse_method(self) -> None:
        self._drain()
        self._send(405, {"error": "ERR only POST is supported by the REST bridge"})

    do_GET = do_PUT = do_DELETE = do_PATCH = _refuse_method

    def _drain(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise _RequestError(413, "ERR request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _authorized(self, query: str) -> bool:
        auth = self.headers.get("Authorization") or ""
        given = auth[7:].strip() if auth[:7].lower() == "bearer " else dict(parse_qsl(query)).get("_token", "")
        return hmac.compare_digest(given.encode("utf-8"), self.server.token.encode("utf-8"))

    def do_POST(self) -> None:
        try:
            body = self._drain()
            status, payload = self._handle(body)
        except _RequestError as exc:
            status, payload = exc.status, {"error": exc.message}
        except OSError as exc:
            status, payload = 502, {"error": f"ERR the bridge could not reach redis: {exc}"}
        self._send(status, payload)

    def _handle(self, body: bytes) -> tuple[int, Any]:
        parts = urlsplit(self.path)
        if not self._authorized(parts.query):
            return 401, {"error": "WRONGPASS invalid or missing auth token"}
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            return 415, {"error": "ERR Content-Type must be application/json"}
        try:
            value = json.loads(body)
        except ValueError:
            raise _RequestError(400, "ERR the body is not valid JSON") from None
        b64 = (self.headers.get("Upstash-Encoding") or "").lower() == "base64"
        path = parts.path.rstrip("/")
        if path == "":
            reply = self._run_one(_command(value))
            if isinstance(reply, ErrorReply):
                return 400, {"error": reply.message}
            return 200, {"result": render(reply, base64_encoding=b64)}
        if path == "/pipeline":
            return 200, [_entry(r, b64) for r in self._run_many(_commands(value))]
        if path == "/multi-exec":
            return self._multi_exec(_commands(value), b64)
        raise _RequestError(404, f"ERR unknown endpoint {parts.path!r}: use /, /pipeline or /multi-exec")

    def _run_one(self, command: Sequence[bytes]) -> Reply:
        return self.server.pool.execute([command])[0]

    def _run_many(self, commands: Sequence[Sequence[bytes]]) -> list[Reply]:
        return self.server.pool.execute(commands)

    def _multi_exec(self, commands: list[list[bytes]], b64: bool) -> tuple[int, Any]:
        replies = self._run_many([[b"MULTI"], *commands, [b"EXEC"]])
        queued, result = replies[1:-1], replies[-1]
        if isinstance(result, ErrorReply):
            first = next((r.message for r in queued if isinstance(r, ErrorReply)), result.message)
            return 400, {"error": first}
        if not isinstance(result, list):
            return 400, {"error": "ERR the transaction was aborted"}
        return 200, [_entry(r, b64) for r in result]
