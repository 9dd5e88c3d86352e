"""Where and how the MongoDB adapter connects, read from the URL and options without I/O.

:class:`MongoSettings` holds workmem's own options (``database``, ``create``) and
passes the rest to pymongo's client (:func:`client_options`); :class:`Secrets` is
what every message leaving the adapter masks. The URL's password is never in a ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Final, Self
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from workmem.errors import DriverError, ValidationError
from workmem.kit import check_create, detach, encode_userinfo, mask_secrets, mask_url, split_userinfo, url_secrets

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_SERVER_SELECTION_TIMEOUT_MS",
    "MongoSettings",
    "Secrets",
    "checked_database",
    "client_options",
    "driver_url",
]

DEFAULT_SERVER_SELECTION_TIMEOUT_MS: Final = 5000
"""How long an operation waits for a usable server before :class:`BackendUnavailableError` (pymongo: 30 s)."""
DEFAULT_CONNECT_TIMEOUT_MS: Final = 5000
"""TCP connect (and ``+srv`` DNS) timeout (pymongo's own default is 20 s)."""

_DEFAULTS: Final[Mapping[str, Any]] = {
    "serverSelectionTimeoutMS": DEFAULT_SERVER_SELECTION_TIMEOUT_MS,
    "connectTimeoutMS": DEFAULT_CONNECT_TIMEOUT_MS,
    "appname": "workmem",
}


class Secrets:
    """What must never appear in a message: the URL's password (whatever it contains), raw and URL-decoded."""

    __slots__ = ("masked_url", "passwords")

    def __init__(self, url: str) -> None:
        self.masked_url = mask_url(url)
        self.passwords: tuple[str, ...] = tuple(url_secrets(url))

    def mask(self, text: str) -> str:
        return mask_secrets(text, *self.passwords)

    def detach(self, exc: BaseException) -> DriverError:
        """The stand-in for the driver's ``exc`` to chain as a cause: text and codes only, the password masked."""
        return detach(exc, *self.passwords)

    def __repr__(self) -> str:
        return "Secrets(***)"


def checked_database(database: object) -> str:
    """``database`` if it is a non-empty ``str``; else :class:`ValidationError`."""
    if not isinstance(database, str) or not database:
        raise ValidationError(f"database must be a non-empty str, not {database!r}")
    return database


@dataclass(frozen=True, slots=True)
class MongoSettings:
    """Where to connect and how (:meth:`from_url`); the URL and the client options kept out of ``repr``.

    ``database`` ``None``: the URL's path names it (``mastra`` when it names none).
    ``options`` go to ``pymongo.MongoClient`` / ``AsyncMongoClient`` as given.
    """

    url: str = field(repr=False)
    database: str | None = None
    create: bool = True
    options: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)

    def __post_init__(self) -> None:
        """Refuse a ``database`` that is not a non-empty ``str`` and a ``create`` that is not a bool."""
        if self.database is not None:
            checked_database(self.database)
        check_create(self.create)

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> Self:
        """Read ``mongodb://`` / ``mongodb+srv://`` and ``connect()``'s options: workmem's own taken out,
        the rest kept for the client (pymongo reads the URL itself when the client is made)."""
        database = options.pop("database", None)
        create = options.pop("create", True)
        return cls(url, database, create, options)

    @property
    def secrets(self) -> Secrets:
        """What a message must never show (the URL's password)."""
        return Secrets(self.url)


def client_options(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``MongoClient(url, ...)``: workmem's defaults, then the URL's, then ``options``.

    Timeouts default to 5 s unless the URL or ``options`` set them; dates always
    decode as timezone-aware UTC.
    """
    in_url = {key.lower() for key, _ in parse_qsl(urlsplit(driver_url(url)).query, keep_blank_values=True)}
    given = in_url | {key.lower() for key in options}
    kwargs: dict[str, Any] = {key: value for key, value in _DEFAULTS.items() if key.lower() not in given}
    kwargs.update(options)
    kwargs["tz_aware"] = True
    kwargs["tzinfo"] = UTC
    kwargs["document_class"] = dict
    return kwargs


def driver_url(url: str) -> str:
    """``url`` with its user name and password percent-encoded, decoded first as pymongo decodes them.

    pymongo splits ``user:password@`` at the last ``@`` before the first ``/``
    and refuses a raw ``@``; a password with a raw ``/``, ``?``, ``#`` or ``@``
    (:func:`workmem.kit.split_userinfo`) reaches it as written.
    """
    info = split_userinfo(url)
    return url if info.user is None else info.head + encode_userinfo(info, unquote_plus) + info.rest
