"""The PostgreSQL adapter's connection pool: connections opened in the caller's thread, no background loop.

A pool that connects in the background (``psycopg_pool``) makes a caller wait
out its whole ``timeout`` while the server is down and then says only that no
connection came, retries on a backoff that delays recovery by up to half a
minute after the server is back, and logs every failed attempt. This one
opens a connection when a caller needs one and none is idle, in that caller's
thread: the caller gets the driver's own error (``Connection refused``,
``timeout expired``) within ``connect_timeout``, and the first call after the
server is back connects at once. Unreachable and reachable again are each
logged once per outage, on the ``workmem.adapters.postgres`` logger.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from workmem.errors import BackendBusyError, StorageClosedError

__all__ = ["ConnectionPool", "OutageLog", "busy_error", "closed_by_server"]

log = logging.getLogger("workmem.adapters.postgres")


def closed_by_server(conn: Any) -> bool:
    """An idle connection with something to read was closed by the server (it sends FATAL, then EOF)."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def busy_error(max_size: int, timeout: float, where: str) -> BackendBusyError:
    """No connection came within ``timeout`` because all ``max_size`` were in use."""
    return BackendBusyError(
        f"all {max_size} connections to {where} stayed in use for {timeout:g} s (the max_size and timeout options)"
    )


class OutageLog:
    """Says once per outage that the server is unreachable (a warning), and once that it is reachable again.

    ``is_outage`` tells a failed connect that means the server cannot be reached
    from one the server (or libpq) refused, which is no outage; ``describe``
    gives an error's text with the secrets masked.
    """

    def __init__(
        self, where: str, describe: Callable[[BaseException], str], is_outage: Callable[[BaseException], bool]
    ) -> None:
        self._where = where
        self._describe = describe
        self._is_outage = is_outage
        self._down = False  # the last connect failed (logged once, until one succeeds)

    def failed(self, exc: BaseException) -> None:
        """A connect failed with ``exc``."""
        if self._is_outage(exc) and not self._down:
            self._down = True
            log.warning("PostgreSQL at %s is unreachable: %s", self._where, self._describe(exc))

    def succeeded(self) -> None:
        """A connect succeeded."""
        if self._down:
            self._down = False
            log.info("PostgreSQL at %s is reachable again", self._where)


class ConnectionPool:
    """Up to ``max_size`` connections, each lent to one caller at a time.

    :meth:`take` returns an idle connection the server has not closed (checked
    without a round trip; closed ones are dropped), or opens a new one while
    fewer than ``max_size`` are open, or waits up to ``timeout`` seconds for
    one to be given back. ``connect`` opens one connection and raises the
    driver's error; ``where`` (the masked URL) names the server in messages;
    ``is_outage`` tells a failed connect that is worth logging as an outage
    (server unreachable) from one the server or libpq refused.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        max_size: int,
        timeout: float,
        where: str,
        describe: Callable[[BaseException], str] = str,
        is_outage: Callable[[BaseException], bool] = lambda exc: True,
    ) -> None:
        self._connect = connect
        self._outages = OutageLog(where, describe, is_outage)
        self._max_size = max_size
        self._timeout = timeout
        self._where = where
        self._idle: list[Any] = []
        self._open = 0  # connections lent out or idle
        self._changed = threading.Condition(threading.Lock())
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def take(self) -> Any:
        """A live connection for this caller alone, until :meth:`give`; the driver's error if none can be opened."""
        deadline = time.monotonic() + self._timeout
        while True:
            with self._changed:
                while True:
                    if self._closed:
                        raise StorageClosedError(f"this PostgresStorage is closed ({self._where})")
                    if self._idle:
                        conn = self._idle.pop()
                        break
                    if self._open < self._max_size:
                        self._open += 1
                        conn = None
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise busy_error(self._max_size, self._timeout, self._where)
                    self._changed.wait(remaining)
            if conn is None:
                return self._open_one()
            if not closed_by_server(conn):
                return conn
            log.debug("dropping a connection to %s that the server closed", self._where)
            self._discard(conn)

    def _open_one(self) -> Any:
        try:
            conn = self._connect()
        except BaseException as exc:
            self._forget()
            self._outages.failed(exc)
            raise
        self._outages.succeeded()
        return conn

    def give(self, conn: Any) -> None:
        """Return ``conn``: kept when it is open and idle (no transaction left open), else closed."""
        if self._closed or conn.closed or conn.broken or conn.info.transaction_status != 0:  # 0: IDLE
            self._discard(conn)
            return
        with self._changed:
            self._idle.append(conn)
            self._changed.notify()

    def _discard(self, conn: Any) -> None:
        try:
            conn.close()
        except Exception:  # closing a dead connection must not hide the error being raised
            log.debug("error ignored closing a connection to %s", self._where, exc_info=True)
        self._forget()

    def _forget(self) -> None:
        with self._changed:
            self._open -= 1
            self._changed.notify()

    def close(self) -> None:
        """Close the idle connections; those lent out are closed when given back."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._changed.notify_all()
        for conn in idle:
            self._discard(conn)
