"""A small threaded TCP proxy for simulating outages between workmem and a real server.

The shared PostgreSQL and Redis of this machine must never be restarted by a
test, so an outage is made between the client and the server instead::

    with TcpProxy(("127.0.0.1", 5432)) as proxy:   # listens on 127.0.0.1:proxy.port
        ...                                       # clients connect to the proxy
        proxy.refuse()      # the port is closed: a connect gets "connection refused"
        proxy.blackhole()   # connects succeed, nothing is forwarded (a server that hangs)
        proxy.kill_all()    # every live connection is closed (FIN; kill_all(reset=True): RST)
        proxy.resume()      # accepting and forwarding again, on the same port
        proxy.delay = 0.05  # hold every chunk 50 ms before forwarding it

Each accepted connection gets its own connection to the target and one thread
pumping bytes both ways.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from types import TracebackType

__all__ = ["TcpProxy"]


class _Pair:
    """A client socket and its upstream socket; closed together."""

    def __init__(self, client: socket.socket, upstream: socket.socket | None) -> None:
        self.client = client
        self.upstream = upstream
        self._closed = False
        self._lock = threading.Lock()

    def close(self, *, reset: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                if reset:  # close with RST instead of FIN
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``target``; can refuse, blackhole, kill connections and resume."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._pairs: set[_Pair] = set()
        self._forwarding = True
        self._closed = False
        self._listener: socket.socket | None = None
        self._accepter: threading.Thread | None = None
        self.port = 0
        self.accepted = 0
        """How many client connections the proxy accepted so far."""
        self.delay = 0.0
        """Seconds to hold each chunk before forwarding it (a slow network, to make requests overlap)."""
        self._listen()

    # -- controls --------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def refuse(self, *, kill: bool = True) -> None:
        """Close the listening socket (connects are refused); ``kill``: also close every live connection."""
        self._stop_listening()
        if kill:
            self.kill_all()

    def blackhole(self) -> None:
        """Keep accepting, but forward nothing: new connections hang (live ones are left alone)."""
        with self._lock:
            self._forwarding = False
        if self._listener is None:
            self._listen()

    def kill_all(self, *, reset: bool = False) -> int:
        """Close every live connection (both sides; ``reset``: with RST); returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, set()
        for pair in pairs:
            pair.close(reset=reset)
        return len(pairs)

    def resume(self) -> None:
        """Accept and forward again, on the same port."""
        with self._lock:
            self._forwarding = True
        if self._listener is None:
            self._listen()

    def live(self) -> int:
        """Connections currently open through the proxy."""
        with self._lock:
            return len(self._pairs)

    def wait_live(self, count: int, timeout: float = 5.0) -> int:
        """Wait until at least ``count`` connections are open through the proxy; returns how many are."""
        deadline = time.monotonic() + timeout
        while self.live() < count and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.live()

    def close(self) -> None:
        self._closed = True
        self._stop_listening()
        self.kill_all()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # -- machinery -------------------------------------------------------------------

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accepter = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accepter.start()

    def _stop_listening(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the accepter thread
        listener.close()
        if self._accepter is not None:
            self._accepter.join(timeout=5)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed
            self.accepted += 1
            with self._lock:
                forwarding = self._forwarding and not self._closed
            upstream = None
            if forwarding:
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                    upstream.settimeout(None)
                except OSError:
                    client.close()  # the target is down: the client sees its connection closed
                    continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.add(pair)
            if upstream is not None:
                threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _pump(self, pair: _Pair) -> None:
        assert pair.upstream is not None
        other = {pair.client: pair.upstream, pair.upstream: pair.client}
        with selectors.DefaultSelector() as selector:
            for sock in other:
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        data = sock.recv(65536)
                        if not data:
                            raise ConnectionError("closed")
                        if self.delay:
                            time.sleep(self.delay)
                        other[sock].sendall(data)
            except (OSError, ValueError):
                pass
        with self._lock:
            self._pairs.discard(pair)
        pair.close()
