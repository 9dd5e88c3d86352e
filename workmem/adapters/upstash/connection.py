"""Reaching Upstash: URL parsing and the REST client wrapper that maps its errors.

The ``upstash-redis`` driver is imported here, on first use. Its token never
leaves this module: it is not in any ``repr`` and is masked out of every
error message.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    StorageClosedError,
    ValidationError,
)
from workmem.kit import check_number, import_driver, mask_exception, mask_secrets, mask_url, query_pairs, split_userinfo

from .scripts import Script

__all__ = ["ENV_TOKEN", "ENV_URL", "RestClient", "UpstashSettings"]

ENV_URL = "UPSTASH_REDIS_REST_URL"
ENV_TOKEN = "UPSTASH_REDIS_REST_TOKEN"
_OPTIONS = ("token", "prefix", "retries", "retry_interval", "timeout")
_UNAVAILABLE = ("LOADING", "MASTERDOWN")
"""Replies of a server that cannot serve now (loading, no primary); also workmem's bridge without its Redis."""
_BUSY = ("BUSY", "TRYAGAIN")
"""Replies of a server busy running a script, or asking to try again."""


@dataclass(frozen=True, slots=True)
class UpstashSettings:
    """Everything needed to open the REST client, parsed from a workmem URL."""

    rest_url: str
    """The REST endpoint (``https://...upstash.io``), without the token."""
    token: str = field(repr=False)
    """The REST token (never shown)."""
    prefix: str = ""
    """Put before every key; empty means exactly Mastra's keys."""
    retries: int = 1
    """How often the client re-sends a request that failed (the driver's ``rest_retries``)."""
    retry_interval: float = 3.0
    """Seconds between those attempts."""
    timeout: float | None = 30.0
    """HTTP timeout in seconds (``None``: wait forever, the driver's default)."""

    @classmethod
    def from_url(cls, url: str, options: Mapping[str, Any]) -> UpstashSettings:
        """Read ``upstash+https://host?token=...``, ``upstash+http://...`` or bare ``upstash://`` (environment)."""
        info = split_userinfo(url)  # a token in the user info may contain any character
        where, _, query_text = info.rest.partition("?")
        try:
            parts = urlsplit(info.head + where)
            port = parts.port
        except ValueError:
            raise ValidationError(f"not a valid Upstash URL: {mask_url(url)}") from None
        # A token never holds a space: '+' is its own (base64); '&' not followed by an option is part of it.
        query = {k: unquote(v) if k == "token" else unquote_plus(v) for k, v in query_pairs(query_text, _OPTIONS)}
        values: dict[str, Any] = {**query, **options}
        unknown = sorted(set(values) - set(_OPTIONS))
        if unknown:
            raise ValidationError(f"unknown Upstash option(s) {unknown}; known: {list(_OPTIONS)}")
        scheme = parts.scheme.lower()
        token = values.get("token") or (unquote(info.password) if info.password else None)
        if scheme == "upstash" and not parts.hostname:
            rest_url = os.environ.get(ENV_URL, "")
            if not rest_url:
                raise ValidationError(f"upstash:// without a host reads {ENV_URL}, which is not set")
        elif scheme in ("upstash", "upstash+https", "upstash+http"):
            if not parts.hostname:
                raise ValidationError(f"{mask_url(url)} has no host")
            host = parts.hostname if port is None else f"{parts.hostname}:{port}"
            http = "http" if scheme == "upstash+http" else "https"
            rest_url = urlunsplit((http, host, parts.path.rstrip("/"), "", ""))
        else:
            raise ValidationError(f"not an Upstash URL: {mask_url(url)}")
        token = token or os.environ.get(ENV_TOKEN)
        if not token:
            raise ValidationError(f"{mask_url(url)} needs a token: ?token=... or {ENV_TOKEN}")
        prefix = values.get("prefix", "")
        if not isinstance(prefix, str):
            raise ValidationError(f"prefix must be a string, not {type(prefix).__name__}")
        timeout = values.get("timeout", 30.0)
        return cls(
            rest_url=rest_url.rstrip("/"),
            token=str(token),
            prefix=prefix,
            retries=int(_number(values, "retries", 1, integer=True)),
            retry_interval=_number(values, "retry_interval", 3.0),
            timeout=None if timeout in (None, "", "none") else _number(values, "timeout", 30.0, positive=True),
        )


def _number(
    values: Mapping[str, Any], name: str, default: float, *, integer: bool = False, positive: bool = False
) -> float:
    """The option ``name``: a finite number (an int if ``integer``) >= 0 (> 0 if ``positive``), or text of one."""
    value = values.get(name, default)
    if isinstance(value, str):
        with suppress(ValueError):  # else refused below, named
            value = int(value) if integer else float(value)
    return check_number(name, value, integer=integer, positive=positive)  # type: ignore[no-any-return]


class _NoScript(Exception):
    """The server does not have the script cached (``NOSCRIPT``)."""


class RestClient:
    """The ``upstash_redis.Redis`` client, with errors mapped to workmem's and ``EVALSHA`` falling back to ``EVAL``."""

    def __init__(self, settings: UpstashSettings) -> None:
        driver = import_driver("upstash_redis", "upstash")
        errors = import_driver("upstash_redis.errors", "upstash")
        self._upstash_error: type[Exception] = errors.UpstashError
        self._token = settings.token
        self._where = settings.rest_url
        self._closed = False
        self._redis = driver.Redis(
            url=settings.rest_url,
            token=settings.token,
            rest_retries=settings.retries,
            rest_retry_interval=settings.retry_interval,
            allow_telemetry=False,
        )
        http = getattr(getattr(self._redis, "_http", None), "_client", None)
        if http is not None and hasattr(http, "timeout"):
            http.timeout = settings.timeout  # the driver creates its httpx client without a timeout

    def __repr__(self) -> str:
        return f"RestClient({self._where!r})"

    def _mask(self, text: str) -> str:
        return mask_secrets(text, self._token)

    def call(self, *command: str | int) -> Any:
        """Run one command.

        Redis error replies become :class:`BackendRefusedError` (a wrong token,
        ``WRONGTYPE``, any ``ERR``), except :class:`BackendUnavailableError` for a
        server that cannot serve now (``LOADING``, ``MASTERDOWN``, the bridge
        without its Redis) and :class:`BackendBusyError` for ``BUSY`` and
        ``TRYAGAIN``; transport failures are :class:`BackendUnavailableError`.
        """
        return self._guard(str(command[0]), lambda: self._redis.execute(list(command)))

    def _guard(self, what: str, request: Callable[[], Any]) -> Any:
        if self._closed:
            raise StorageClosedError(f"this UpstashStorage is closed ({self._where})")
        try:
            return request()
        except self._upstash_error as exc:
            message = self._mask(str(exc))
            if message.startswith("NOSCRIPT"):
                raise _NoScript(message) from None
            cause = exc if mask_exception(exc, self._token) else None  # a server may echo the token
            reply = message.upper()
            if reply.startswith(_UNAVAILABLE) or "could not reach redis" in message:
                raise BackendUnavailableError(f"Upstash at {self._where}: {message}") from cause
            if reply.startswith(_BUSY):
                raise BackendBusyError(f"Upstash at {self._where} is busy: {message}") from cause
            raise BackendRefusedError(f"Upstash at {self._where} refused {what}: {message}") from cause
        except Exception as exc:  # httpx transport errors, a body that is not JSON, ...
            detail = self._mask(f"{type(exc).__name__}: {exc}")
            cause = exc if mask_exception(exc, self._token) else None
            raise BackendUnavailableError(f"cannot reach Upstash at {self._where}: {detail}") from cause

    def run(self, script: Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """Run a script by SHA-1, sending its source only when the server does not have it cached."""
        try:
            return self.call("EVALSHA", script.sha1, len(keys), *keys, *args)
        except _NoScript:
            return self.call("EVAL", script.source, len(keys), *keys, *args)

    def load(self, scripts: Sequence[Script]) -> None:
        """Cache the scripts on the server (also checks the URL and token)."""
        first, *rest = scripts
        self.call("SCRIPT", "LOAD", first.source)  # alone: a refused token is reported clearly
        if rest:
            pipeline = self._redis.pipeline()
            for script in rest:
                pipeline.execute(["SCRIPT", "LOAD", script.source])
            self._guard("SCRIPT LOAD", pipeline.exec)

    def close(self) -> None:
        self._closed = True
        self._redis.close()
