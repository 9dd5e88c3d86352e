"""The exceptions workmem raises: one root, a few flat classes.

Every adapter maps its driver's failures onto these. The cause
(``__cause__``) of such an error is a :class:`DriverError`: a detached copy of
the driver's exception (its class name, its message with any password or token
masked, its SQLSTATE or error code), never the driver's live exception, whose
connection objects, request headers and traceback may hold the credentials.
A failure of the database is one of three:
:class:`BackendUnavailableError` (it could not be reached, dropped the
connection or is shutting down) and :class:`BackendBusyError` (concurrent work
got in the way) are worth retrying, :data:`RETRYABLE_ERRORS`;
:class:`BackendRefusedError` (it was reached and refused the operation) is not.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RETRYABLE_ERRORS",
    "BackendBusyError",
    "BackendRefusedError",
    "BackendUnavailableError",
    "DriverError",
    "HarnessError",
    "MissingDriverError",
    "MissingTablesError",
    "OperationNotSupportedError",
    "QueryTimeoutError",
    "ReadOnlyMemoryError",
    "StorageClosedError",
    "ThreadExistsError",
    "ThreadNotFoundError",
    "ThreadOwnershipError",
    "UnknownSchemeError",
    "UnreadableRecordError",
    "ValidationError",
    "VersionNotFoundError",
    "WorkingMemoryFormatError",
    "WorkingMemoryTooLargeError",
    "WorkmemError",
    "WrongEventLoopError",
]


class WorkmemError(Exception):
    """Root of every error workmem raises on purpose.

    Every workmem error pickles and unpickles as itself (its class, message and
    attributes), whatever its constructor takes, so it crosses a process pool.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # BaseException pickles as cls(*args): wrong for a constructor that takes other arguments.
        return _rebuilt, (type(self), self.args, dict(self.__dict__))


def _rebuilt(cls: type[WorkmemError], args: tuple[Any, ...], state: dict[str, Any]) -> WorkmemError:
    """The error that :meth:`WorkmemError.__reduce__` pickled, rebuilt without calling its constructor."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ValidationError(WorkmemError, ValueError):
    """Input was rejected before anything was written (bad id, NUL, non-JSON metadata, ...)."""


class WorkingMemoryFormatError(WorkmemError, ValueError):
    """A JSON merge was asked of stored working memory that is not a JSON object within the input rules.

    Raised the same on every backend: the stored text, not the caller's input, is wrong. Nothing changed.
    """


class WorkingMemoryTooLargeError(ValidationError):
    """An update would make the working memory larger than its ``max_chars`` limit. Nothing changed.

    The limit of a ``Memory``, or one given to a storage write (``max_chars=`` of
    ``set_working_memory``, ``merge_working_memory``, ``update_resource``,
    ``update_thread``), decided in the write's atomic step. ``size`` is the
    length (``len()`` of the text, as stored: the compact JSON text of a merged
    document) the update would have stored, ``limit`` the limit and ``current``
    the length stored now (a merge counts the stored document as compact JSON). An
    update that does not make the memory larger is never refused, so memory
    already above the limit can be condensed step by step.
    """

    def __init__(self, *, size: int, limit: int, current: int) -> None:
        over = f"; it holds {current:,} now, also over the limit, and may only shrink" if current > limit else ""
        super().__init__(
            f"working memory not updated: the result would be {size:,} characters, "
            f"over the {limit:,}-character limit{over}"
        )
        self.size = size
        """The length the update would have stored."""
        self.limit = limit
        """The ``max_chars`` limit."""
        self.current = current
        """The length stored now (0 when nothing is stored)."""


class ThreadNotFoundError(WorkmemError, LookupError):
    """The thread does not exist."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id!r} not found")
        self.thread_id = thread_id


class ThreadExistsError(WorkmemError):
    """``create_thread`` found the id taken, by this resource or another. Nothing changed.

    Not a :class:`ValidationError`: the input was valid and retrying it can never
    succeed. Catch it to use the existing thread (``get_thread``) or pick another id.
    The message does not say who owns the thread.
    """

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id!r} already exists")
        self.thread_id = thread_id


class ThreadOwnershipError(WorkmemError, PermissionError):
    """The thread belongs to another resource; its owner can never change. Nothing changed."""

    def __init__(self, thread_id: str, resource_id: str) -> None:
        super().__init__(f"thread {thread_id!r} is not owned by resource {resource_id!r}")
        self.thread_id = thread_id
        self.resource_id = resource_id


class UnreadableRecordError(WorkmemError):
    """A stored record cannot be read as a workmem record; only that record is affected.

    Another program wrote what the contract has no value for: metadata that is
    not a JSON object, a timestamp that is no date, a document that is not
    JSON. Reading it by id raises this error; a list returns every other record
    and names it in ``ThreadPage.unreadable``. A write that must read the whole
    record first raises it too, and changes nothing.
    """

    def __init__(self, kind: str, record_id: str, reason: str) -> None:
        super().__init__(f"stored {kind} {record_id!r} cannot be read: {reason}")
        self.kind = kind
        """``"thread"`` or ``"resource"``."""
        self.record_id = record_id
        """The record's id (or its key, when even the id cannot be read)."""
        self.reason = reason


class UnknownSchemeError(WorkmemError, ValueError):
    """No usable adapter is registered for the URL's scheme (none, or its target is not a ``MemoryStorage`` class)."""


class MissingDriverError(WorkmemError, ImportError):
    """The adapter's database driver (or a registered adapter's module) cannot be imported; the message says why.

    For a built-in adapter it names the extra to install.
    """


class MissingTablesError(WorkmemError, LookupError):
    """``connect(url, create=False)`` found the tables workmem needs missing; nothing was created.

    Connect once without ``create=False`` (as a user that may create tables) to create them.
    ``tables``: the names found missing (empty when not known).
    """

    tables: tuple[str, ...] = ()


class BackendUnavailableError(WorkmemError, ConnectionError):
    """The database could not be reached, dropped the connection, or is starting or shutting down.

    Also: it has no connection or resource to spare right now (too many clients,
    out of memory or disk). Worth retrying later (:data:`RETRYABLE_ERRORS`). A
    write whose connection was lost after it was sent may have been applied.
    """


class BackendBusyError(WorkmemError):
    """Concurrent work got in the way; nothing changed. Worth retrying (:data:`RETRYABLE_ERRORS`).

    The database stayed locked longer than the busy timeout, it cancelled the
    statement as a deadlock or serialization failure or for its statement
    timeout, or concurrent writers kept winning a compare-and-swap.
    """


class BackendRefusedError(WorkmemError):
    """The database was reached and refused the operation; retrying the same call fails the same way.

    Permission denied (a SELECT-only role, a read-only file or server, a wrong
    password or token), a database, schema or table that is not there, or an
    error the server raised for this statement (a type mismatch, its stack
    depth or another limit, a corrupt file). The server's message is kept, and
    the driver's exception (as a :class:`DriverError`) is the ``__cause__``.
    """


class StorageClosedError(WorkmemError):
    """The storage object was closed (``close()``, or the end of its ``with`` block). Not worth retrying.

    Open a new one with ``connect()``. Every adapter raises it, the in-memory one included.
    """


class QueryTimeoutError(WorkmemError, TimeoutError):
    """A read-only ``query()`` ran longer than its ``timeout`` and was stopped; nothing changed.

    Not retried for you: the same statement on the same data takes as long again.
    Give it more time, or ask for less (a ``LIMIT``, an index).
    """


class WrongEventLoopError(WorkmemError, RuntimeError):
    """An async storage bound to the event loop it first ran on was called from another loop. Nothing changed.

    Not worth retrying from that loop: open one storage per event loop. Only adapters whose driver binds
    itself to a loop raise it (MongoDB's ``AsyncMongoClient``); which adapters work from any loop is in
    the async page of the docs.
    """


class ReadOnlyMemoryError(WorkmemError):
    """A write was attempted through a read-only ``Memory``."""


class HarnessError(WorkmemError):
    """The store under test broke the harness's protocol, so no outcome of the contract can be read from it.

    Raised by the wire adapter (:mod:`workmem.adapters.wire`) when the store's
    process crashed or exited, wrote a line that is not a well-formed response,
    did not answer in time, or named an error class workmem does not have. The
    conformance suite reports a check that met one as ``harness_error``: never
    as passed, never as failed. ``kind`` is ``"crash"``, ``"malformed"``,
    ``"timeout"`` or ``"unknown_error_class"``.
    """

    def __init__(self, message: str, *, kind: str = "malformed") -> None:
        super().__init__(f"harness error ({kind}): {message}")
        self.kind = kind


class OperationNotSupportedError(WorkmemError):
    """The store declared that it has no way to do this operation (``Capabilities.unsupported``). Nothing changed.

    The conformance suite reports a check that needed it as ``unsupported``,
    neither passed nor failed.
    """

    def __init__(self, operation: str) -> None:
        super().__init__(f"the store does not support {operation}")
        self.operation = operation


class VersionNotFoundError(WorkmemError, LookupError):
    """``restore_working_memory`` named a version that working memory's history does not hold (never written, or
    dropped by retention). Nothing changed."""

    def __init__(self, version: int) -> None:
        super().__init__(f"no version {version} in this working memory's history")
        self.version = version


class DriverError(Exception):
    """A driver's exception, detached: the ``__cause__`` of the workmem error raised for it. Never raised itself.

    It holds text and codes only: ``driver`` names the driver's exception class
    (``"psycopg.errors.UndefinedTable"``), ``message`` is its message with every
    password and token masked, ``sqlstate`` (PostgreSQL) and ``code`` (an Oracle
    ``ORA-``/``DPY-`` code, a MongoDB error code) are kept when the driver gave
    them, and its own ``__cause__``/``__context__`` are the driver exception's,
    detached the same way. It has no traceback, and pickles as what it shows.
    ``str()`` reads ``<driver>: <message>``.
    """

    def __init__(
        self, driver: str, message: str, *, sqlstate: str | None = None, code: int | str | None = None
    ) -> None:
        super().__init__(driver, message)
        self.driver = driver
        """The driver's exception class, ``module.QualifiedName``."""
        self.message = message
        """Its message, secrets masked."""
        self.sqlstate = sqlstate
        """The SQLSTATE the server sent (PostgreSQL), if any."""
        self.code = code
        """The driver's or server's error code (``"ORA-00001"``, ``"DPY-6005"``, MongoDB's ``11000``), if any."""

    def __str__(self) -> str:
        return f"{self.driver}: {self.message}"


RETRYABLE_ERRORS: tuple[type[WorkmemError], ...] = (BackendUnavailableError, BackendBusyError)
"""The errors worth retrying (later, with backoff): ``except workmem.RETRYABLE_ERRORS:``.

Every other workmem error is deterministic: the same call fails the same way.
"""
