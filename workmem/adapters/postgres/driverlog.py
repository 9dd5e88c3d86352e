"""psycopg's warnings about cancelling workmem's own statements, as debug records of workmem's logger.

When a statement is interrupted (a cancelled task, Ctrl-C), psycopg asks the
server to cancel it and waits for the answer. If it cannot finish that -- the
call is cancelled again meanwhile ("query cancellation interrupted
(CancelledError): closing connection"), the server does not end the statement,
or the cancel request fails -- it logs a warning on its ``psycopg`` logger, which
an application that configured no logging sees on stderr (Python's last-resort
handler). The connection concerned is workmem's, and workmem already deals with
it: a connection left closed or busy is dropped, never pooled again, which
:mod:`workmem.adapters.postgres.pool` reports as a debug record of the
``workmem.adapters.postgres`` logger.

So while a workmem statement runs (:class:`statement`, a context marker), a
filter on the ``psycopg`` logger turns these warnings into debug records of that
logger instead. psycopg's records about any other connection of the process,
and all its other records, are left as they are.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar, Token

from .pool import log

__all__ = ["statement"]

_RUNNING: ContextVar[bool] = ContextVar("workmem_postgres_statement", default=False)

_CANCELLATION = ("query cancellation ", "query not terminated after cancellation")
"""How psycopg's messages about a cancellation it could not complete begin (psycopg 3.2, 3.3)."""


class statement:  # lower case: used as ``with statement():``, like a function
    """Marks the ``with`` block as running a workmem statement (in this thread or task only)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token: Token[bool] = _RUNNING.set(True)

    def __exit__(self, *exc: object) -> None:
        _RUNNING.reset(self._token)


class _Cancellations(logging.Filter):
    """On the ``psycopg`` logger: a cancellation warning raised inside :class:`statement` goes to workmem's logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _RUNNING.get() or not isinstance(record.msg, str) or not record.msg.startswith(_CANCELLATION):
            return True
        log.debug("psycopg, on a cancelled workmem statement: %s", record.getMessage())
        return False


_FILTER = _Cancellations()
logging.getLogger("psycopg").addFilter(_FILTER)  # the same instance twice is added once
