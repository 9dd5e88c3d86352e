"""Which workmem error a PostgreSQL error means: by SQLSTATE, or by libpq's message when there is none.

Worth retrying (:data:`workmem.errors.RETRYABLE_ERRORS`):

* :class:`BackendUnavailableError`: class ``08`` (connection exception), ``57P01``
  / ``57P02`` / ``57P03`` / ``57P05`` (administrator or crash shutdown, cannot
  connect now, idle session timeout), class ``53`` (insufficient resources: too
  many connections, out of memory, disk full), ``58030`` (I/O error), and a
  connection that failed or was lost before the server said anything;
* :class:`BackendBusyError`: ``40001`` (serialization failure), ``40P01``
  (deadlock), ``55P03`` (lock not available), ``57014`` (statement cancelled,
  as by ``statement_timeout``).

Every other SQLSTATE is :class:`BackendRefusedError`: ``42501`` insufficient
privilege, the rest of class ``42``, class ``22`` data exceptions, ``54001``
stack depth, ``3F000`` invalid schema, ``25006`` read-only transaction, ...
A connection the server closed at login with a ``FATAL`` message (a role or
database that does not exist, a wrong password, no ``pg_hba.conf`` entry) is
refused too, unless the message says the server is starting, shutting down,
recovering or out of connection slots.

A connection libpq will not even try because the URL is wrong (a port out of
range, an option value or name it does not know: ``sslmode=bogus``,
``keepalives=x``, ``?bogus=1``, ``connect_timeout=abc``) is the caller's input:
:class:`ValidationError`.
"""

from __future__ import annotations

import re
from typing import Final

from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    ValidationError,
    WorkmemError,
)

__all__ = ["error_kind"]

_UNAVAILABLE_STATES: Final = frozenset({"57P01", "57P02", "57P03", "57P05", "58030"})
_BUSY_STATES: Final = frozenset({"40001", "40P01", "55P03", "57014"})
_TRANSIENT_FATAL: Final = (
    "starting up",
    "shutting down",
    "in recovery mode",
    "not yet accepting connections",
    "too many clients",
    "connection slots are reserved",
    "remaining connection slots",
    "terminating connection",
    "out of memory",
)
# libpq's (and psycopg's) words for a connection parameter it refuses before connecting
_BAD_PARAMETER: Final = re.compile(
    r'invalid (?:port number|integer value "[^"]*" for connection option|\w+ value: |URI query parameter'
    r"|connection option)|bad value for connect_timeout"
)


def error_kind(sqlstate: str | None, message: str, *, connection_error: bool) -> type[WorkmemError]:
    """The class of a PostgreSQL error with ``sqlstate`` (``None`` when the server sent none).

    ``connection_error``: the driver raised it as an operational or interface
    error (psycopg's ``OperationalError`` / ``InterfaceError``), which without a
    SQLSTATE means the server could not be reached or the connection was lost.
    """
    if sqlstate is None:
        if _BAD_PARAMETER.search(message.partition("FATAL:")[0]):
            return ValidationError  # the URL: libpq did not try to connect, and never will
        if not connection_error:
            return BackendRefusedError  # the driver refused the statement before sending it
        fatal = message.partition("FATAL:")[2].lower()
        if fatal and not any(text in fatal for text in _TRANSIENT_FATAL):
            return BackendRefusedError  # the server answered the login, and said no
        return BackendUnavailableError
    if sqlstate.startswith(("08", "53")) or sqlstate in _UNAVAILABLE_STATES:
        return BackendUnavailableError
    if sqlstate in _BUSY_STATES:
        return BackendBusyError
    return BackendRefusedError
