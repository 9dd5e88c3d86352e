"""Interim: what libSQL's storage imports until it moves onto the port of :class:`~.hooks.SqlHooks`.

libSQL keeps its own ``_execute`` and ``_transaction`` here for now (issue 27 moves it onto the
shared attempt loop); nothing else uses this module, and it goes with that move.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

from workmem.errors import WorkmemError

from .dialect import Statement
from .hooks import Attempt, Result, SqlHooks, Transaction

__all__ = ["Run", "Session", "SqlStorage", "blocking_transaction"]

Session = Transaction

Run = Callable[[Statement], Result]
"""One statement run on a connection of an open transaction, by a blocking driver."""


class _BlockingSession(Transaction):
    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    async def execute(self, statement: Statement) -> Result:
        return self._run(statement)


@asynccontextmanager
async def blocking_transaction(transaction: AbstractContextManager[Run]) -> AsyncIterator[Transaction]:
    """A sync adapter's transaction (a context manager yielding its :data:`Run`) as ``_transaction``."""
    with transaction as run:
        yield _BlockingSession(run)


class SqlStorage(SqlHooks):
    """libSQL's base until it implements the port: it overrides ``_execute``, ``_transaction`` and ``_error``."""

    async def _checkout(self) -> Any:
        raise NotImplementedError

    async def _give(self, conn: Any, failure: BaseException | None = None) -> None:
        raise NotImplementedError

    async def _query(self, conn: Any, sql: str, params: Any = None) -> Result:
        raise NotImplementedError

    async def _rollback(self, conn: Any, cause: BaseException) -> None:
        raise NotImplementedError

    def _error(self, exc: Exception) -> WorkmemError | None:
        raise NotImplementedError

    def _again(self, exc: Exception, attempt: Attempt) -> float | None:
        raise NotImplementedError
