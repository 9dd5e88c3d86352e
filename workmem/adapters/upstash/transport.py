"""The HTTP clients under the ``upstash_redis`` driver: stopped at once by ``close()``, and one per event loop.

Both ``upstash_redis`` clients send every request with ``self._http._client.post(...)``
(an ``httpx.Client`` or ``httpx.AsyncClient``) and close with
``self._http._client.close()`` / ``aclose()``; nothing else of httpx is used.
:func:`install` puts one of the transports below in that place:

* :class:`SyncTransport` wraps the blocking client. Once ``close()`` began, a
  request raises :class:`ClientClosed`, and so does a request that fails after it
  (cut by the close).
* :class:`LoopTransports` keeps one ``httpx.AsyncClient`` per event loop that
  sends through it, made on first use on that loop. An httpx async client, like
  every asyncio connection pool, belongs to the loop its connections were opened
  on: from another loop a request waits forever or fails with "Event loop is
  closed". A loop's client is closed before that loop ends: it is registered as
  an async generator of the loop, which ``asyncio.run()`` (``loop.shutdown_asyncgens()``)
  finalizes before closing the loop. The clients of loops closed without that
  are dropped when the next loop's client is made, or at ``close()``.
* Every client (the driver's own, through :func:`share_context`, and each loop's)
  uses one TLS context per process (:func:`shared_context`): httpx would read the
  whole CA bundle for each, about 30 ms of every open.

Read-your-writes (the driver's ``Upstash-Sync-Token``) stays one token per
storage, whatever the loop: the driver keeps it, and only the transport is per loop.

:class:`ClientClosed` is a ``BaseException``: the driver retries a failed request
after ``retry_interval`` on any ``Exception``, which would delay the closed
storage's error by seconds and send again into a closed client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import suppress
from typing import Any

__all__ = [
    "ClientClosed",
    "LoopTransports",
    "SyncTransport",
    "httpx_clients",
    "install",
    "share_context",
    "shared_context",
]


class ClientClosed(BaseException):
    """The storage was closed before or while this request ran (mapped to ``StorageClosedError``)."""


class SyncTransport:
    """The driver's blocking ``httpx.Client``, failing with :class:`ClientClosed` once closed."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._closed = False

    def post(self, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise ClientClosed
        try:
            return self._client.post(*args, **kwargs)
        except Exception:
            if self._closed:
                raise ClientClosed from None
            raise

    def close(self) -> None:
        self._closed = True
        self._client.close()


class LoopTransports:
    """One ``httpx.AsyncClient`` per event loop (``first``, then made by ``make``), failing with
    :class:`ClientClosed` once closed."""

    def __init__(self, first: Any, make: Callable[[], Any]) -> None:
        self._first: Any = first
        """The driver's own client: the first loop to send uses it (the one that opened the storage, mostly)."""
        self._make = make
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, tuple[Any, AsyncGenerator[None, None]]] = {}
        self._closed = False

    async def post(self, *args: Any, **kwargs: Any) -> Any:
        client = await self._client_here()
        try:
            return await client.post(*args, **kwargs)
        except Exception:
            if self._closed:
                raise ClientClosed from None
            raise

    async def aclose(self) -> None:
        """Close every loop's client: this loop's now, a running loop's on that loop (scheduled)."""
        with self._lock:
            self._closed = True
            entries = list(self._clients.items())
            self._clients.clear()
        here = asyncio.get_running_loop()
        for loop, (_client, closer) in entries:
            if loop is here:
                await closer.aclose()
            elif not loop.is_closed():
                with suppress(RuntimeError):  # that loop closed meanwhile: its connections went with it
                    loop.call_soon_threadsafe(loop.create_task, closer.aclose())

    @property
    def loops(self) -> int:
        """How many loops have a client now."""
        with self._lock:
            return len(self._clients)

    async def _client_here(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise ClientClosed
            entry = self._clients.get(loop)
            if entry is not None:
                return entry[0]
            for gone in [other for other in self._clients if other.is_closed()]:
                del self._clients[gone]  # closed without shutdown_asyncgens(): nothing can run on it now
            first, self._first = self._first, None
        # Nothing below awaits before the entry is in: no other task of this loop can make a second client.
        client = first if first is not None else self._make()  # outside the lock: the first may read the CA bundle
        closer = self._close_with_loop(loop, client)
        with self._lock:
            if self._closed:
                raise ClientClosed
            self._clients[loop] = (client, closer)  # the loop itself keeps only a weak reference to closer
        await closer.__anext__()  # first iteration: the loop registers the generator, to finalize it at shutdown
        return client

    async def _close_with_loop(self, loop: asyncio.AbstractEventLoop, client: Any) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                if self._clients.get(loop, (None,))[0] is client:
                    del self._clients[loop]
            await client.aclose()


_context_lock = threading.Lock()
_contexts: dict[Any, Any] = {}
"""The one TLS context of this process, per httpx module (made on first use by :func:`shared_context`)."""


def shared_context(httpx: Any) -> Any:
    """The process's TLS context for every HTTP client of the Upstash adapter: made once, on first use.

    ``httpx`` builds a context per client otherwise (``verify=True``), reading the whole CA bundle:
    about 30 ms of every storage's open, and of each new event loop's first call, blocking that loop.
    An ``ssl.SSLContext`` is safe to share between clients and threads; it is made as httpx makes its
    default one (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` as set when the first client is made, else certifi's).
    """
    with _context_lock:
        context = _contexts.get(httpx)
        if context is None:
            context = _contexts[httpx] = httpx.create_ssl_context()
        return context


class _SharedContextHttpx:
    """The ``httpx`` module as the driver sees it: its clients made without ``verify`` get :func:`shared_context`.

    The driver makes its client with ``httpx.Client(timeout=None)`` (``AsyncClient`` likewise) in its
    constructor; everything else is httpx itself.
    """

    def __init__(self, httpx: Any) -> None:
        self._httpx = httpx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._httpx, name)

    def Client(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("verify", shared_context(self._httpx))
        return self._httpx.Client(*args, **kwargs)

    def AsyncClient(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("verify", shared_context(self._httpx))
        return self._httpx.AsyncClient(*args, **kwargs)


def share_context(driver_http: Any) -> None:
    """Have the driver's module ``upstash_redis.http`` make its clients with the shared TLS context (once).

    Without a ``create_ssl_context`` (another httpx) or an ``httpx`` global, the driver is left as it is.
    """
    httpx = getattr(driver_http, "httpx", None)
    if isinstance(httpx, _SharedContextHttpx) or not hasattr(httpx, "create_ssl_context"):
        return
    with _context_lock:
        if not isinstance(driver_http.httpx, _SharedContextHttpx):
            driver_http.httpx = _SharedContextHttpx(httpx)


def httpx_clients(httpx: Any, timeout: float | None) -> Callable[[], Any]:
    """A maker of ``httpx.AsyncClient`` s with ``timeout``, sharing the process's TLS context."""

    def make() -> Any:
        if not hasattr(httpx, "create_ssl_context"):
            return httpx.AsyncClient(timeout=timeout)
        return httpx.AsyncClient(timeout=timeout, verify=shared_context(httpx))

    return make


def install(redis: Any, make: Callable[[Any], SyncTransport | LoopTransports]) -> bool:
    """Put ``make(the driver's httpx client)`` where the driver ``redis`` sends its requests; ``False`` if this
    driver has no such place."""
    http = getattr(redis, "_http", None)
    inner = getattr(http, "_client", None)
    if inner is None:
        return False
    http._client = make(inner)  # type: ignore[union-attr]
    return True
