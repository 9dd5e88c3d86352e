"""Statements with parameters (the writes) run as prepared statements on libpq, as the key reads do.

``workmem/adapters/postgres/keyreads.py`` (:meth:`KeyReads.run`) runs every statement with named
parameters without psycopg's cursor: these check, through both APIs on the local server, that the
writes take that path and come back as the cursor's would, that psycopg's own prepared statements
(whose ``DEALLOCATE ALL`` after a ``ROLLBACK`` would drop ours inside a transaction) stay off, and
that a libpq layer failing before it sent anything hands the statement to the cursor, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import psycopg
import pytest

import workmem
from workmem import Thread, ThreadExistsError
from workmem.adapters.postgres import PostgresStorage, keyreads

pytestmark = pytest.mark.backend("postgres")

LOGGER = "workmem.adapters.postgres"


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first word of each statement :meth:`KeyReads.run` ran (it still runs as it is)."""
    seen: list[str] = []
    run = keyreads.KeyReads.run

    async def counted(
        self: keyreads.KeyReads, statement: keyreads.PreparedStatement, params: Mapping[str, Any]
    ) -> tuple[list[tuple[Any, ...]], int]:
        seen.append(statement.sql.split()[0].decode())
        return await run(self, statement, params)

    monkeypatch.setattr(keyreads.KeyReads, "run", counted)
    return seen


def _writes_sync(url: str) -> list[Any]:
    with workmem.connect(url) as storage:
        return [
            storage.create_thread(Thread("t-1", "user-1", "Trip", {"n": 1})).title,
            storage.update_resource("user-1", working_memory='{"a": 1}').working_memory,
            storage.merge_working_memory({"b": 2}, scope="resource", resource_id="user-1"),
            storage.update_thread("t-1", title="Trip 2").title,
        ]


def _writes_async(url: str) -> list[Any]:
    async def main() -> list[Any]:
        async with await workmem.connect_async(url) as storage:
            return [
                (await storage.create_thread(Thread("t-1", "user-1", "Trip", {"n": 1}))).title,
                (await storage.update_resource("user-1", working_memory='{"a": 1}')).working_memory,
                await storage.merge_working_memory({"b": 2}, scope="resource", resource_id="user-1"),
                (await storage.update_thread("t-1", title="Trip 2")).title,
            ]

    return asyncio.run(main())


WRITERS = [pytest.param(_writes_sync, id="sync"), pytest.param(_writes_async, id="async")]


@pytest.mark.parametrize("write", WRITERS)
def test_writes_run_as_prepared_statements_and_return_what_the_cursor_would(
    url: str, write: Any, prepared: list[str]
) -> None:
    assert write(url) == ["Trip", '{"a": 1}', {"a": 1, "b": 2}, "Trip 2"]
    assert prepared == ["INSERT", "INSERT", "INSERT", "UPDATE"]  # update_resource and merge are upserts
    with PostgresStorage.from_url(url) as storage, pytest.raises(ThreadExistsError):  # the prepared insert's count: 0
        storage.create_thread(Thread("t-1", "user-1"))


def test_psycopg_prepares_nothing_of_its_own_so_a_rollback_drops_none_of_ours_in_a_transaction(url: str) -> None:
    """Before: psycopg prepared BEGIN and COMMIT (used 5 times), then ran DEALLOCATE ALL after a ROLLBACK, before
    the next BEGIN: the prepared write inside that transaction failed (26000) and the call with it."""
    with workmem.connect(url, history=True, max_size=1) as storage:
        storage.create_thread(Thread("t-1", "user-1", "Trip"))
        for n in range(8):  # transactions: each records a version
            storage.update_resource("user-1", working_memory=f"v{n}")
        with pytest.raises(workmem.ThreadNotFoundError):  # a transaction rolled back (the thread is missing)
            storage.merge_working_memory({"a": 1}, scope="thread", thread_id="absent", max_chars=100)
        for n in range(3):
            assert storage.update_resource("user-1", working_memory=f"after {n}").working_memory == f"after {n}"
        history = storage.working_memory_history(scope="resource", resource_id="user-1")
        assert [version.content for version in history.versions[:2]] == ["after 2", "after 1"]


def test_a_statement_deallocated_outside_a_transaction_is_prepared_again(url: str) -> None:
    with PostgresStorage.from_url(url, max_size=1) as storage:
        storage.create_thread(Thread("t-1", "user-1"))
        conn = storage._pool.take()
        try:
            conn.execute("DEALLOCATE ALL")
        finally:
            storage._pool.give(conn)
        assert storage.create_thread(Thread("t-2", "user-1")).id == "t-2"
        assert storage.get_thread("t-2") is not None


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_libpq_layer_failing_before_it_sent_hands_the_statement_to_the_cursor_once(
    url: str, api: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    async def changed_api(self: keyreads.KeyReads, statement: Any, params: Any) -> Any:
        calls.append(1)
        raise keyreads.NotSent(TypeError("dump_sequence() takes 2 positional arguments but 3 were given"))

    monkeypatch.setattr(keyreads.KeyReads, "run", changed_api)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        titles = (_writes_sync if api == "sync" else _writes_async)(url)
    assert titles == ["Trip", '{"a": 1}', {"a": 1, "b": 2}, "Trip 2"]  # each write ran once, on the cursor
    assert calls == [1]  # tried once, then the cursor for every later statement
    (warning,) = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert "dump_sequence() takes" in warning and "cursor" in warning


def test_a_nul_in_a_parameter_fails_as_on_the_cursor(url: str) -> None:
    """psycopg's text dumper refuses a NUL (DataError) before anything is sent, on both paths alike."""
    with PostgresStorage.from_url(url) as storage:
        statement = "SELECT CAST(%(x)s AS text)"
        conn = storage._pool.take()
        try:
            with pytest.raises(psycopg.DataError) as hot:
                asyncio.run(storage._query(conn, statement, {"x": "a\x00b"}))
            with pytest.raises(psycopg.DataError) as cursor:  # the cursor path
                asyncio.run(storage._port.query(conn, statement, {"x": "a\x00b"}))
            assert str(hot.value) == str(cursor.value)
            assert asyncio.run(storage._query(conn, statement, {"x": "ab"})).rows == [("ab",)]
        finally:
            storage._pool.give(conn)
