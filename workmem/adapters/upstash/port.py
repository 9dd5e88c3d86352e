"""The Upstash adapter's port, the only code importing the driver: the REST clients that map its errors.

:class:`~.storage.UpstashHooks` is written once over :class:`BaseRestClient`; the URL is read in
:mod:`.settings`, and :mod:`.transport` holds the HTTP clients under the driver.
The ``upstash-redis`` driver is imported here, on first use: its blocking
``upstash_redis.Redis`` for :class:`RestClient` and ``upstash_redis.asyncio.Redis``
for :class:`AsyncRestClient`. Both share everything but the transport
(:class:`BaseRestClient`: error mapping, ``EVALSHA`` fallback, script loading).
The token is not in any ``repr`` and is masked out of every error message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    MissingDriverError,
    StorageClosedError,
)
from workmem.kit import detach, import_driver, mask_secrets, raise_unchained, run_sync

from .scripts import SCRIPTS, Script
from .settings import UpstashSettings
from .transport import ClientClosed, LoopTransports, SyncTransport, httpx_clients, install, share_context

__all__ = [
    "AsyncRestClient",
    "BaseRestClient",
    "RestClient",
    "ready",
]

C = TypeVar("C", bound="BaseRestClient")

_UNAVAILABLE = ("LOADING", "MASTERDOWN")
"""Replies of a server that cannot serve now (loading, no primary); also workmem's bridge without its Redis."""
_BUSY = ("BUSY", "TRYAGAIN")
"""Replies of a server busy running a script, or asking to try again."""


class _NoScript(Exception):
    """The server does not have the script cached (``NOSCRIPT``)."""


def _driver_options(settings: UpstashSettings) -> dict[str, Any]:
    """The keyword arguments of both ``upstash_redis`` clients (sync and async take the same)."""
    return {
        "url": settings.rest_url,
        "token": settings.token,
        "rest_retries": settings.retries,
        "rest_retry_interval": settings.retry_interval,
        "allow_telemetry": False,
    }


def _import_driver(module: str) -> Any:
    """The driver module ``module``; every HTTP client the driver makes shares one TLS context (:mod:`.transport`)."""
    share_context(import_driver("upstash_redis.http", "upstash"))
    return import_driver(module, "upstash")


def _with_transport(redis: Any, make: Callable[[Any], SyncTransport | LoopTransports]) -> Any:
    """``redis`` sending through ``make(its httpx client)`` (see :mod:`.transport`)."""
    if not install(redis, make):
        raise MissingDriverError(
            "this upstash-redis keeps no HTTP client at Redis._http._client, where workmem sets its timeout and "
            "per-event-loop clients (tested with upstash-redis 1.8.0)"
        )
    return redis


class BaseRestClient(ABC):
    """One ``upstash_redis`` client, its errors mapped to workmem's and ``EVALSHA`` falling back to ``EVAL``.

    Everything but the transport is here, once, as coroutines; :class:`RestClient`
    sends with the blocking driver (its coroutines never suspend) and
    :class:`AsyncRestClient` with the driver's ``asyncio`` client.
    """

    def __init__(self, settings: UpstashSettings, redis: Any) -> None:
        errors = import_driver("upstash_redis.errors", "upstash")
        self._upstash_error: type[Exception] = errors.UpstashError
        self._token = settings.token
        self._where = settings.rest_url
        self._closed = False
        self._redis = redis

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._where!r})"

    # -- the transport (one request each) --------------------------------------------------

    @abstractmethod
    async def _send(self, command: list[str | int]) -> Any:
        """Send one command; the driver's reply or exception."""

    @abstractmethod
    async def _send_batch(self, commands: Sequence[list[str | int]]) -> list[Any]:
        """Send commands as one pipeline request; the driver's replies or exception."""

    @abstractmethod
    async def _release(self) -> None:
        """Close the driver's HTTP client."""

    # -- the shared logic ------------------------------------------------------------------

    async def execute(self, *command: str | int) -> Any:
        """Run one command.

        Redis error replies become :class:`BackendRefusedError` (a wrong token,
        ``WRONGTYPE``, any ``ERR``), except :class:`BackendUnavailableError` for a
        server that cannot serve now (``LOADING``, ``MASTERDOWN``, the bridge
        without its Redis) and :class:`BackendBusyError` for ``BUSY`` and
        ``TRYAGAIN``; transport failures are :class:`BackendUnavailableError`.
        """
        self._check_open()
        try:
            return await self._send(list(command))
        except ClientClosed:
            raise_unchained(self._closed_error())  # nothing of the cut request (its headers hold the token)
        except Exception as exc:
            error, cause = self._failure(exc, str(command[0]))
            error.__cause__ = cause
            raise_unchained(error)

    async def execute_batch(self, commands: Sequence[list[str | int]]) -> list[Any]:
        """Run commands in one pipeline request (not atomic); errors as :meth:`execute`."""
        self._check_open()
        try:
            return await self._send_batch(commands)
        except ClientClosed:
            raise_unchained(self._closed_error())  # nothing of the cut request (its headers hold the token)
        except Exception as exc:
            error, cause = self._failure(exc, str(commands[0][0]) if commands else "a pipeline")
            error.__cause__ = cause
            raise_unchained(error)

    async def evaluate(self, script: Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """Run a script by SHA-1, sending its source only when the server does not have it cached."""
        try:
            return await self.execute("EVALSHA", script.sha1, len(keys), *keys, *args)
        except _NoScript:
            return await self.execute("EVAL", script.source, len(keys), *keys, *args)

    async def preload(self, scripts: Sequence[Script]) -> None:
        """Cache the scripts on the server (also checks the URL and token)."""
        first, *rest = scripts
        await self.execute("SCRIPT", "LOAD", first.source)  # alone: a refused token is reported clearly
        if rest:
            await self.execute_batch([["SCRIPT", "LOAD", script.source] for script in rest])

    async def shutdown(self) -> None:
        """Close the client; idempotent."""
        if not self._closed:
            self._closed = True
            await self._release()

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> StorageClosedError:
        """The error of a call made after ``close()`` began, or cut by it (a write it sent ran whole or not at all)."""
        return StorageClosedError(f"this Upstash storage is closed ({self._where})")

    def _failure(self, exc: Exception, what: str) -> tuple[Exception, BaseException | None]:
        """The workmem error for the driver's ``exc``, and the cause to chain (the driver's exception detached)."""
        if self._closed:  # the call failed because close() ran under it
            return self._closed_error(), None
        if isinstance(exc, self._upstash_error):
            message = mask_secrets(str(exc), self._token)
            if message.startswith("NOSCRIPT"):
                return _NoScript(message), None
            cause = detach(exc, self._token)  # a server may echo the token; httpx keeps it in the request
            reply = message.upper()
            if reply.startswith(_UNAVAILABLE) or "could not reach redis" in message:
                return BackendUnavailableError(f"Upstash at {self._where}: {message}"), cause
            if reply.startswith(_BUSY):
                return BackendBusyError(f"Upstash at {self._where} is busy: {message}"), cause
            return BackendRefusedError(f"Upstash at {self._where} refused {what}: {message}"), cause
        # httpx transport errors, a body that is not JSON, ...
        detail = mask_secrets(f"{type(exc).__name__}: {exc}", self._token)
        cause = detach(exc, self._token)
        return BackendUnavailableError(f"cannot reach Upstash at {self._where}: {detail}"), cause


async def ready(client: C) -> C:
    """``client`` with the scripts cached on the server; closed again if that fails."""
    try:
        await client.preload(SCRIPTS)
    except BaseException:
        await client.shutdown()
        raise
    return client


class RestClient(BaseRestClient):
    """The blocking ``upstash_redis.Redis`` client (its coroutines never suspend: run them with ``run_sync``)."""

    def __init__(self, settings: UpstashSettings) -> None:
        driver = _import_driver("upstash_redis")

        def transport(http: Any) -> SyncTransport:
            http.timeout = settings.timeout  # the driver makes its httpx client without one
            return SyncTransport(http)

        super().__init__(settings, _with_transport(driver.Redis(**_driver_options(settings)), transport))

    async def _send(self, command: list[str | int]) -> Any:
        return self._redis.execute(command)

    async def _send_batch(self, commands: Sequence[list[str | int]]) -> list[Any]:
        pipeline = self._redis.pipeline()
        for command in commands:
            pipeline.execute(command)
        return pipeline.exec()  # type: ignore[no-any-return]

    async def _release(self) -> None:
        self._redis.close()

    def call(self, *command: str | int) -> Any:
        """:meth:`execute`, blocking."""
        return run_sync(self.execute(*command))

    def run(self, script: Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """:meth:`evaluate`, blocking."""
        return run_sync(self.evaluate(script, keys, args))


class AsyncRestClient(BaseRestClient):
    """The ``upstash_redis.asyncio.Redis`` client, sending through one ``httpx.AsyncClient`` per event loop.

    Usable from any event loop (:class:`~.transport.LoopTransports`); the driver,
    its read-your-writes token and the scripts are shared.
    """

    def __init__(self, settings: UpstashSettings) -> None:
        driver = _import_driver("upstash_redis.asyncio")
        httpx = import_driver("httpx", "upstash")

        def transport(http: Any) -> LoopTransports:
            http.timeout = settings.timeout  # the driver makes its httpx client without one
            return LoopTransports(http, httpx_clients(httpx, settings.timeout))

        super().__init__(settings, _with_transport(driver.Redis(**_driver_options(settings)), transport))

    async def _send(self, command: list[str | int]) -> Any:
        return await self._redis.execute(command)

    async def _send_batch(self, commands: Sequence[list[str | int]]) -> list[Any]:
        pipeline = self._redis.pipeline()
        for command in commands:
            pipeline.execute(command)
        return await pipeline.exec()  # type: ignore[no-any-return]

    async def _release(self) -> None:
        await self._redis.close()
