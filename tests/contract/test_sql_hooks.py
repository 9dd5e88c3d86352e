"""The SQL core's attempt loop and transactions over a scripted port: what every SQL backend gets from SqlHooks.

A backend implements the port (checkout, give, query, begin, commit, rollback) and two policies (which
workmem error a driver error means; whether work runs again). These hold the loop to its promises: work
runs again only as the policy says, on a connection taken anew; every connection goes back, with the
failure that ended its work; a transaction's block is rolled back when it raises; the error raised is
the mapped one, with no live driver exception chained to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from workmem import BackendUnavailableError, DriverError, ThreadNotFoundError
from workmem.adapters.libsql.dialect import SQLiteDialect
from workmem.adapters.sql import Attempt, Result, SqlHooks, Statement
from workmem.errors import WorkmemError
from workmem.kit import driver_error, run_sync


class Lost(Exception):
    """The fake driver's error: the connection was lost."""


class ScriptedHooks(SqlHooks):
    """SqlHooks over a port that answers from ``script`` and logs every port call."""

    def __init__(self, *script: Result | Exception) -> None:
        super().__init__(SQLiteDialect())
        self.script = list(script)
        self.log: list[str] = []
        self.opened = 0

    async def _checkout(self) -> int:
        self.opened += 1
        self.log.append(f"checkout {self.opened}")
        return self.opened

    async def _give(self, conn: int, failure: BaseException | None = None) -> None:
        self.log.append(f"give {conn} {type(failure).__name__ if failure else 'ok'}")

    async def _query(self, conn: int, sql: str, params: Any = None) -> Result:
        self.log.append(f"{sql.split()[0]} on {conn}")
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def _rollback(self, conn: int, cause: BaseException) -> None:
        self.log.append(f"ROLLBACK on {conn} after {type(cause).__name__}")

    def _error(self, exc: Exception) -> WorkmemError | None:
        return driver_error(BackendUnavailableError, "fake", exc) if isinstance(exc, Lost) else None

    def _again(self, exc: Exception, attempt: Attempt) -> float | None:
        return 0.0 if attempt.read and attempt.number < 2 else None

    async def _close(self) -> None:
        pass


OK = Result([("row",)], 1)
SELECT = Statement("SELECT 1", {})
UPDATE = Statement("UPDATE t SET x = 1", {})


def test_a_read_runs_again_on_a_new_connection_as_the_policy_says() -> None:
    hooks = ScriptedHooks(Lost("gone"), OK)
    assert run_sync(hooks._execute(SELECT, read=True)) == OK
    assert hooks.log == ["checkout 1", "SELECT on 1", "give 1 Lost", "checkout 2", "SELECT on 2", "give 2 ok"]
    hooks = ScriptedHooks(Lost("gone"), Lost("still gone"))
    with pytest.raises(BackendUnavailableError, match="still gone"):
        run_sync(hooks._execute(SELECT, read=True))
    assert hooks.opened == 2  # the policy allows one more run, not two


def test_a_write_the_policy_does_not_repeat_raises_the_mapped_error_unchained() -> None:
    hooks = ScriptedHooks(Lost("gone"), OK)
    with pytest.raises(BackendUnavailableError, match="gone") as info:
        run_sync(hooks._execute(UPDATE))
    assert hooks.log == ["checkout 1", "UPDATE on 1", "give 1 Lost"] and len(hooks.script) == 1
    assert isinstance(info.value.__cause__, DriverError) and info.value.__context__ is None


def test_a_transaction_commits_its_block_or_rolls_it_back() -> None:
    async def write(hooks: ScriptedHooks, fail: bool) -> None:
        async with hooks._transaction() as tx:
            await tx.execute(UPDATE)
            if fail:
                raise ThreadNotFoundError("t")

    hooks = ScriptedHooks(OK, OK, OK)
    run_sync(write(hooks, fail=False))
    assert hooks.log == ["checkout 1", "BEGIN on 1", "UPDATE on 1", "COMMIT on 1", "give 1 ok"]
    hooks = ScriptedHooks(OK, OK)
    with pytest.raises(ThreadNotFoundError):
        run_sync(write(hooks, fail=True))
    assert hooks.log[-2:] == ["ROLLBACK on 1 after ThreadNotFoundError", "give 1 ThreadNotFoundError"]


def test_opening_a_transaction_runs_again_as_a_read_its_block_never() -> None:
    async def write(hooks: ScriptedHooks) -> None:
        async with hooks._transaction() as tx:
            await tx.execute(UPDATE)

    hooks = ScriptedHooks(Lost("gone"), OK, OK, OK)  # BEGIN lost: nothing ran yet
    run_sync(write(hooks))
    assert hooks.log[:3] == ["checkout 1", "BEGIN on 1", "give 1 Lost"] and hooks.log[-1] == "give 2 ok"
    hooks = ScriptedHooks(OK, Lost("gone"), OK)  # the block's statement lost: raised, never run again
    with pytest.raises(BackendUnavailableError) as info:
        run_sync(write(hooks))
    assert hooks.log[-2:] == ["ROLLBACK on 1 after Lost", "give 1 Lost"] and hooks.opened == 1
    assert info.value.__context__ is None
