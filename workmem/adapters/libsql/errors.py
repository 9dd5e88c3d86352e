"""The libSQL drivers' errors classified: busy, unavailable (unreachable, dropped, disk or memory), or refused."""

from __future__ import annotations

import re

from workmem.errors import BackendBusyError, BackendRefusedError, BackendUnavailableError, WorkmemError

_BUSY_MESSAGES = (
    "database is locked",
    "database is busy",
    "sqlite_busy",
    "database table is locked",
    "transaction_timeout",  # sqld took the write lock back from a transaction held 5 s while others waited
)
_UNAVAILABLE_MESSAGES = (
    "http error",
    "error trying to connect",
    "connection refused",
    "connection reset",
    "connection closed",
    "broken pipe",
    "timed out",
    "stream closed",
    "error reading a body from connection",  # sqld killed mid-answer (unexpected EOF during chunk size line)
    "unexpected eof",
    "disk i/o error",
    "database or disk is full",
    "out of memory",
)
"""A server that could not be reached or dropped the connection, or a disk or memory that failed or is full."""
_UNAVAILABLE_STATUSES = frozenset({"408", "429", "502", "503", "504"})
"""HTTP answers of a server (or its proxy) that cannot serve now."""


def _is_busy(exc: BaseException) -> bool:
    message = str(exc).lower()
    return any(text in message for text in _BUSY_MESSAGES)


_REFUSALS = {
    "401": "authentication failed on {url}: the server refused the authToken (wrong, expired or missing)",
    "403": "permission denied on {url}: the authToken does not allow this (a read-only token?)",
}
"""What a libSQL server's 401 and 403 mean, as sqld 0.24 sends them (``The JWT is invalid``, ``Auth string
does not conform to '<scheme> <token>' form``, ``Authorization forbidden``): refused, not worth retrying."""


def _status(exc: BaseException) -> str | None:
    """The HTTP status of a server's answer in a driver error (``api error: `status=401 ...``), if one came."""
    answered = re.search(r"api error: `status=(\d+)", str(exc).lower())
    return answered.group(1) if answered else None


def _error_kind(exc: BaseException) -> type[WorkmemError]:
    """Busy past ``busy_timeout``, unreachable or dropped, or else refused (read-only, SQL error, HTTP 401, ...)."""
    if _is_busy(exc):
        return BackendBusyError
    message = str(exc).lower()
    status = _status(exc)
    if status is not None:  # the server answered: judged by its HTTP status, not by its body
        unavailable = status in _UNAVAILABLE_STATUSES
    else:
        unavailable = any(text in message for text in _UNAVAILABLE_MESSAGES)
    return BackendUnavailableError if unavailable else BackendRefusedError
