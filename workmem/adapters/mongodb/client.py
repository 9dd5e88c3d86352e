"""Opening a pymongo client for ``mongodb://`` / ``mongodb+srv://`` URLs, and translating its errors.

Shared by the sync (``MongoClient``) and async (``AsyncMongoClient``) adapters:
the same URL handling, options, secret masking and error mapping. No I/O
except :func:`open_client` (which may resolve a ``+srv`` DNS record).
Every message that leaves this module has the URL's password masked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    DriverError,
    StorageClosedError,
    ValidationError,
    WorkmemError,
    WrongEventLoopError,
)
from workmem.kit import (
    detach,
    encode_userinfo,
    import_driver,
    mask_secrets,
    mask_url,
    raise_unchained,
    split_userinfo,
    url_secrets,
)

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient, MongoClient

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_SERVER_SELECTION_TIMEOUT_MS",
    "Secrets",
    "client_options",
    "driver_errors",
    "driver_url",
    "error_kind",
    "is_duplicate_key",
    "open_async_client",
    "open_client",
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


def open_client(url: str, options: Mapping[str, Any], secrets: Secrets) -> MongoClient[dict[str, Any]]:
    """A new ``pymongo.MongoClient`` for ``url`` (connects lazily; a ``+srv`` URL resolves its DNS records now)."""
    client: MongoClient[dict[str, Any]] = _new_client("MongoClient", url, options, secrets)
    return client


def open_async_client(url: str, options: Mapping[str, Any], secrets: Secrets) -> AsyncMongoClient[dict[str, Any]]:
    """A new ``pymongo.AsyncMongoClient`` for ``url`` (no I/O: it connects, and resolves ``+srv``, when awaited)."""
    client: AsyncMongoClient[dict[str, Any]] = _new_client("AsyncMongoClient", url, options, secrets)
    return client


def _new_client(kind: str, url: str, options: Mapping[str, Any], secrets: Secrets) -> Any:
    """``pymongo.<kind>(url, **client_options(...))``, its URL errors as :class:`ValidationError`, masked."""
    url = driver_url(url)
    pymongo = import_driver("pymongo", "mongodb")
    errors = import_driver("pymongo.errors", "mongodb")
    with driver_errors(errors, secrets, "connect"):
        try:
            return getattr(pymongo, kind)(url, **client_options(url, options))
        except (ValueError, TypeError) as exc:  # pymongo's URL parser: a port that is not a number, ...
            cause = secrets.detach(exc)
            error = ValidationError(f"invalid MongoDB URL {secrets.masked_url}: {cause.message}")
            error.__cause__ = cause
            raise_unchained(error)


_UNAVAILABLE_CODES: Final = frozenset({6, 7, 89, 91, 189, 9001, 10107, 11600, 11602, 13435, 13436})
"""Server error codes of a server that cannot serve now: host unreachable or not found, network timeout,
shutdown in progress, primary stepped down, socket exception, not (or no longer) the writable primary, and
interrupted at shutdown or by a replica-set state change (the codes of pymongo's retryable writes)."""
_BUSY_CODES: Final = frozenset({24, 50, 112, 262})
"""Lock timeout, time limit (``maxTimeMS``) exceeded, write conflict, exceeded time limit."""


def error_kind(errors: ModuleType, exc: BaseException) -> type[WorkmemError]:
    """The workmem class of a pymongo error (``errors`` is ``pymongo.errors``).

    Worth retrying: no server could be reached or the connection was lost
    (``ConnectionFailure``: ``ServerSelectionTimeoutError``, ``NetworkTimeout``,
    ``AutoReconnect``, ``NotPrimaryError``), or the server answered with a code
    or label saying it cannot serve now; a write conflict, lock or time-limit
    error is :class:`BackendBusyError`. Any other server answer (``OperationFailure``:
    unauthorized, authentication failed, a document too large, ...) is
    :class:`BackendRefusedError`.
    """
    if isinstance(exc, errors.ConnectionFailure):
        return BackendUnavailableError
    code = getattr(exc, "code", None)
    labelled = getattr(exc, "has_error_label", None)
    if code in _UNAVAILABLE_CODES or (callable(labelled) and labelled("RetryableWriteError")):
        return BackendUnavailableError
    if code in _BUSY_CODES or (callable(labelled) and labelled("TransientTransactionError")):
        return BackendBusyError
    return BackendRefusedError


def is_duplicate_key(errors: ModuleType, exc: BaseException) -> bool:
    """Whether ``exc`` is MongoDB's E11000 duplicate-key error (alone or inside a bulk write)."""
    if isinstance(exc, errors.DuplicateKeyError):
        return True
    return isinstance(exc, errors.OperationFailure) and exc.code in (11000, 11001)


@contextmanager
def driver_errors(errors: ModuleType, secrets: Secrets, action: str) -> Iterator[None]:
    """Turn pymongo exceptions raised inside the block into workmem errors, password masked."""
    try:
        yield
    except errors.PyMongoError as exc:
        cause = secrets.detach(exc)
        message = f"mongodb {action} failed ({secrets.masked_url}): {type(exc).__name__}: {cause.message}"
        kind: type[WorkmemError] = error_kind(errors, exc)
        if isinstance(exc, errors.InvalidOperation) and "after close" in str(exc):
            kind = StorageClosedError
        elif isinstance(exc, errors.ConfigurationError):
            kind = BackendUnavailableError if "DNS" in str(exc) else ValidationError
        error = kind(message)
        error.__cause__ = cause
        raise_unchained(error)
    except RuntimeError as exc:
        if "different event loop" not in str(exc):
            raise
        # pymongo binds an AsyncMongoClient to the loop of its first operation and raises a bare RuntimeError
        # from any other loop, at once and before any I/O
        error = WrongEventLoopError(
            f"mongodb {action} ({secrets.masked_url}): this storage's AsyncMongoClient is bound to the event loop"
            " it first ran on, and pymongo refuses every other loop; open one storage per event loop"
        )
        error.__cause__ = secrets.detach(exc)
        raise_unchained(error)
