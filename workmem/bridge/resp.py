"""A minimal RESP2 client: send commands to ``redis-server`` and read its raw replies.

Replies are kept as the protocol types them, so the bridge can render them the
way the Upstash REST API does: bulk strings as ``bytes``, status replies as
:class:`Status`, errors as :class:`ErrorReply`, integers as ``int``, nil as
``None`` and arrays as ``list`` (nested as deep as Redis sends them).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, TypeAlias
from urllib.parse import unquote, urlsplit

__all__ = ["Connection", "ConnectionPool", "ErrorReply", "RedisAddress", "Reply", "Status", "encode_command"]


class Status(str):
    """A status reply (``+OK``, ``+PONG``, ``+QUEUED``)."""


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An error reply (``-ERR ...``); ``message`` is the text after the ``-``."""

    message: str


Reply: TypeAlias = bytes | Status | ErrorReply | int | list["Reply"] | None


class ProtocolError(ConnectionError):
    """The server sent something that is not RESP2, or closed the connection."""


@dataclass(frozen=True, slots=True)
class RedisAddress:
    """Where redis-server listens and how to log in, parsed from ``redis://[user:password@]host[:port][/db]``."""

    host: str
    port: int
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False

    @classmethod
    def parse(cls, url: str) -> RedisAddress:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError("the Redis URL must look like redis://[user:password@]host[:port][/db]")
        path = parts.path.strip("/")
        return cls(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 6379,
            db=int(path) if path else 0,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password is not None else None,
            tls=parts.scheme == "rediss",
        )


def encode_command(args: Sequence[bytes]) -> bytes:
    """One command as a RESP2 array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n" % len(arg))
        out.append(arg)
        out.append(b"\r\n")
    return b"".join(out)


class Connection:
    """One socket to redis-server; not thread-safe (the pool hands it to one request at a time)."""

    def __init__(self, address: RedisAddress, *, timeout: float | None = 30.0) -> None:
        sock = socket.create_connection((address.host, address.port), timeout=timeout)
        if address.tls:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=address.host)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._file: BinaryIO = sock.makefile("rb")
        try:
            if address.password is not None:
                user = [address.username.encode()] if address.username else []
                self._expect_ok(self.call([b"AUTH", *user, address.password.encode()]))
            if address.db:
                self._expect_ok(self.call([b"SELECT", str(address.db).encode()]))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _expect_ok(reply: Reply) -> None:
        if isinstance(reply, ErrorReply):
            raise ConnectionError(f"redis refused the login: {reply.message}")

    def send(self, commands: Sequence[Sequence[bytes]]) -> None:
        """Write several commands at once (pipelining)."""
        self._sock.sendall(b"".join(encode_command(c) for c in commands))

    def call(self, command: Sequence[bytes]) -> Reply:
        """Send one command and read its reply."""
        self.send([command])
        return self.read_reply()

    def read_reply(self) -> Reply:
        line = self._file.readline()
        if not line.endswith(b"\r\n"):
            raise ProtocolError("redis closed the connection")
        kind, body = line[:1], line[1:-2]
        if kind == b"+":
            return Status(body.decode("utf-8", "replace"))
        if kind == b"-":
            return ErrorReply(body.decode("utf-8", "replace"))
        if kind == b":":
            return int(body)
        if kind == b"$":
            size = int(body)
            if size < 0:
                return None
            data = self._file.read(size + 2)
            if len(data) != size + 2:
                raise ProtocolError("redis closed the connection in a bulk string")
            return data[:-2]
        if kind == b"*":
            count = int(body)
            if count < 0:
                return None
            return [self.read_reply() for _ in range(count)]
        raise ProtocolError(f"unexpected RESP2 reply type {kind!r}")

    def close(self) -> None:
        try:
            self._file.close()
        finally:
            self._sock.close()


class ConnectionPool:
    """Idle connections shared by the server's request threads; a broken connection is dropped, never reused."""

    def __init__(self, address: RedisAddress, *, max_idle: int = 32, timeout: float | None = 30.0) -> None:
        self.address = address
        self._max_idle = max_idle
        self._timeout = timeout
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = Connection(self.address, timeout=self._timeout)
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
