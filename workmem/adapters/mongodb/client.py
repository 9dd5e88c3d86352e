"""Opening a pymongo client for ``mongodb://`` / ``mongodb+srv://`` URLs, and translating its errors.

Shared by the sync (``MongoClient``) and async (``AsyncMongoClient``) adapters:
the same client options, secret masking and error mapping (the URL and options
are read in :mod:`.settings`). No I/O except :func:`open_client` (which may
resolve a ``+srv`` DNS record).
Every message that leaves this module has the URL's password masked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    StorageClosedError,
    ValidationError,
    WorkmemError,
    WrongEventLoopError,
)
from workmem.kit import import_driver, raise_unchained

from .settings import Secrets, client_options, driver_url  # their home is .settings; importable from here as before

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient, MongoClient

__all__ = [
    "Secrets",
    "client_options",
    "driver_errors",
    "driver_url",
    "error_kind",
    "is_duplicate_key",
    "open_async_client",
    "open_client",
]


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
