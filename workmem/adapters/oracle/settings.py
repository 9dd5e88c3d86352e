"""Where and how the Oracle adapter connects, read from the URL and options without I/O."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from workmem.errors import ValidationError
from workmem.kit import check_create, check_options, mask_url, split_userinfo

from .dialect import OracleDialect

__all__ = ["OracleSettings"]

_SCHEMES: Final = frozenset({"oracle", "oracle+oracledb"})
_QUERY_KEYS: Final = frozenset({"service_name", "table_prefix"})
_OPTIONS: Final = frozenset({"min_size", "max_size", "timeout", "connect_timeout", "table_prefix", "create"})


@dataclass(frozen=True, slots=True)
class OracleSettings:
    """Where to connect and how (the password kept out of ``repr``): :meth:`from_url`."""

    user: str
    password: str = dataclasses.field(repr=False)
    host: str = "localhost"
    port: int = 1521
    service_name: str = ""
    table_prefix: str = ""
    min_size: int = 0
    max_size: int = 8
    timeout: float = 10.0
    connect_timeout: float = 5.0
    create: bool = True
    masked_url: str = ""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """Read an ``oracle://`` URL and the adapter's options (no I/O; messages never show the password)."""
        masked = mask_url(url)
        info = split_userinfo(url)  # a raw '#', '?', '/' or '@' in the password is the password's
        try:
            parts = urlsplit(info.head + info.rest)
            port = parts.port or 1521
        except ValueError:
            raise ValidationError(f"not a valid Oracle URL: {masked}") from None
        if parts.scheme.lower() not in _SCHEMES:
            raise ValidationError(f"not an Oracle URL scheme: {parts.scheme!r} (use oracle:// or oracle+oracledb://)")
        if not parts.hostname:
            raise ValidationError(f"the Oracle URL needs a host: {masked}")
        if not info.user or info.password is None:
            raise ValidationError(f"the Oracle URL needs user:password@: {masked}")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        check_options(query, _QUERY_KEYS, "Oracle", "URL parameters")
        check_options(options, _OPTIONS, "Oracle")
        in_path = unquote(parts.path.strip("/"))
        service = query.get("service_name") or in_path
        if not service:
            raise ValidationError(f"the Oracle URL needs a service name (/SERVICE or ?service_name=): {masked}")
        if query.get("service_name") and in_path and in_path != query["service_name"]:
            raise ValidationError(f"the Oracle URL names two different services: {masked}")
        prefix = str(options.get("table_prefix") or query.get("table_prefix", ""))
        settings = cls(
            user=unquote(info.user),
            password=unquote(info.password),
            host=parts.hostname,
            port=port,
            service_name=service,
            table_prefix=OracleDialect(prefix).table_prefix,
            min_size=_number("min_size", options.get("min_size", 0), 0, int),
            max_size=_number("max_size", options.get("max_size", 8), 1, int),
            timeout=_number("timeout", options.get("timeout", 10.0), 0, float),
            connect_timeout=_number("connect_timeout", options.get("connect_timeout", 5.0), 0, float),
            create=check_create(options.get("create", True)),
            masked_url=masked,
        )
        if settings.min_size > settings.max_size:
            raise ValidationError("Oracle option min_size must not exceed max_size")
        return settings

    def pool_options(self, oracledb: ModuleType) -> dict[str, Any]:
        """The keyword arguments of ``oracledb.create_pool`` and ``oracledb.create_pool_async`` alike.

        A full pool waits ``timeout`` for a session (then DPY-4005), one TCP connect
        waits ``connect_timeout``, and the driver never retries a connect by itself.
        """
        return {
            "user": self.user,
            "password": self.password,
            "host": self.host,
            "port": self.port,
            "service_name": self.service_name,
            "min": self.min_size,
            "max": self.max_size,
            "increment": 1,
            "getmode": oracledb.POOL_GETMODE_TIMEDWAIT,
            "wait_timeout": int(self.timeout * 1000),
            "tcp_connect_timeout": self.connect_timeout,
            "retry_count": 0,
        }


def _number(name: str, value: object, minimum: float, kind: type[int] | type[float]) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError(f"Oracle option {name} must be a number, not {value!r}")
    try:
        number = kind(value)
    except ValueError:
        raise ValidationError(f"Oracle option {name} must be a number, not {value!r}") from None
    if number < minimum:
        raise ValidationError(f"Oracle option {name} must be at least {minimum}, not {value!r}")
    return number
