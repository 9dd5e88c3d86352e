"""Where and how the Upstash adapter connects, read from the URL, the options and the environment, without I/O.

The token is kept out of ``repr``; every message shows the URL masked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Self
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from workmem.errors import ValidationError
from workmem.kit import check_number, mask_url, query_pairs, split_userinfo

__all__ = ["ENV_TOKEN", "ENV_URL", "LISTINGS", "Listing", "UpstashSettings"]

Listing = Literal["index", "scan"]

ENV_URL: Final = "UPSTASH_REDIS_REST_URL"
ENV_TOKEN: Final = "UPSTASH_REDIS_REST_TOKEN"
_OPTIONS: Final = ("token", "prefix", "retries", "retry_interval", "timeout", "listing")
LISTINGS: Final = ("index", "scan")
"""The values of the ``listing`` option: how ``list_threads`` finds a resource's threads (see the package docstring)."""


@dataclass(frozen=True, slots=True)
class UpstashSettings:
    """Everything needed to open the REST client, parsed from a workmem URL (:meth:`from_url`)."""

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
    listing: Listing = "index"
    """How ``list_threads`` finds a resource's threads: ``"index"``, workmem's sorted sets (O(log n + page),
    complete when only workmem writes threads), or ``"scan"``, every thread document (complete whoever writes)."""

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> Self:
        """Read ``upstash+https://host?token=...``, ``upstash+http://...`` or bare ``upstash://`` (environment).

        ``options`` (``connect()``'s keyword arguments) win over the URL's query parameters.
        """
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
        listing = values.get("listing", "index")
        if listing not in LISTINGS:
            raise ValidationError(f"listing must be one of {list(LISTINGS)}, not {listing!r}")
        return cls(
            rest_url=rest_url.rstrip("/"),
            token=str(token),
            prefix=prefix,
            retries=int(_number(values, "retries", 1, integer=True)),
            retry_interval=_number(values, "retry_interval", 3.0),
            timeout=None if timeout in (None, "", "none") else _number(values, "timeout", 30.0, positive=True),
            listing=listing,
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
