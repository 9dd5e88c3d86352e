"""A minimal RESP2 client: send commands to ``redis-server`` and read its raw replies.

Replies are kept as the protocol types them, so the bridge can render them the
way the Upstash REST API does: bulk strings as ``bytes``, status replies as
:class:`Status`, errors as :class:`ErrorReply`, integers as ``int``, nil as
``None`` and arrays as ``list`` (nested as deep as Redis sends them).
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, TypeAlias
from urllib.parse import unquote, urlsplit

__all__ = [
    "Connection",
    "ConnectionPool",
    "ErrorReply",
    "NotSentError",
    "RedisAddress",
    "Reply",
    "Status",
    "encode_command",
]


class Status(str):
    """A status reply (``+OK``, ``+PONG``, ``+QUEUED``)."""


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An error reply (``-ERR ...``); ``message`` is the text after the ``-``."""

    message: str


Reply: TypeAlias = bytes | Status | ErrorReply | int | list["Reply"] | None


class ProtocolError(ConnectionError):
    """The server sent something that is not RESP2, or closed the connection."""


class NotSentError(ConnectionError):
    """Sending failed before a single byte of the request left this process: Redis never saw it."""


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
        self._timeout = timeout
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
        """Write several commands at once (pipelining).

        Raises :class:`NotSentError` when the connection fails before the
        kernel took the first byte (nothing reached Redis), the error itself
        once part of the request went out (Redis may have run some of it).
        """
        data = memoryview(b"".join(encode_command(c) for c in commands))
        sent = 0
        while sent < len(data):
            try:
                sent += self._sock.send(data[sent:])
            except OSError as exc:
                if sent == 0 and isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
                    raise NotSentError(f"redis closed the connection: {exc}") from exc
                raise

    def stale(self) -> bool:
        """Whether this idle connection is unusable, seen without a round trip.

        Between requests Redis sends nothing, so an idle socket with anything to
        read was closed by the server (a restart, ``CLIENT KILL``, its
        ``timeout``: EOF or a reset) or is out of step with the protocol.
        """
        if self._sock.fileno() < 0:
            return True
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):
            return True
        if not readable:
            return False
        if not isinstance(self._sock, ssl.SSLSocket):
            return True
        # TLS 1.3 may send session tickets after the handshake: read what is there without blocking.
        self._sock.setblocking(False)
        try:
            self._sock.recv(1)  # application data (out of step) or b"" (closed)
            return True
        except ssl.SSLWantReadError:
            return False  # only TLS records, already consumed
        except OSError:
            return True
        finally:
            self._sock.settimeout(self._timeout)

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
    """Idle connections shared by the server's request threads; a broken connection is dropped, never reused.

    A request never fails because a pooled connection went stale while idle
    (Redis restarted, or closed it): before reuse, an idle connection with
    anything to read is dropped (:meth:`Connection.stale`, no round trip), and
    when sending on a reused connection fails before its first byte left (so
    Redis cannot have seen the request) the request is sent once more on a new
    connection. A request that failed after it was sent is never sent again:
    Redis may have run it (a write, a script), and the caller gets the error.
    """

    def __init__(self, address: RedisAddress, *, max_idle: int = 32, timeout: float | None = 30.0) -> None:
        self.address = address
        self._max_idle = max_idle
        self._timeout = timeout
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def _take(self) -> tuple[Connection, bool]:
        """A live idle connection (and ``True``), or a new one (and ``False``)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return Connection(self.address, timeout=self._timeout), False
            if not conn.stale():
                return conn, True
            conn.close()

    def _give(self, conn: Connection) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def execute(self, commands: Sequence[Sequence[bytes]]) -> list[Reply]:
        """Send ``commands`` at once (pipelined) on one connection and read one reply each."""
        conn, reused = self._take()
        try:
            try:
                conn.send(commands)
            except NotSentError:
                if not reused:
                    raise
                conn.close()  # it died while idle, unnoticed: the request never left, so send it again
                conn = Connection(self.address, timeout=self._timeout)
                conn.send(commands)
            replies = [conn.read_reply() for _ in commands]
        except BaseException:
            conn.close()
            raise
        self._give(conn)
        return replies

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection for one request (stale idle ones skipped); given back unless the request failed."""
        conn, _ = self._take()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        self._give(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
