"""Reads by key fall back to psycopg's cursor when the libpq fast path meets a psycopg it was not written for.

``workmem/adapters/postgres/keyreads.py`` reads ``get_thread`` / ``get_resource``
on psycopg's libpq layer (``psycopg.pq``, ``psycopg.adapt.Transformer``,
``psycopg.errors.error_from_result``), which psycopg does not promise to keep.
An unexpected psycopg (another major version, a missing attribute, an API that
changed under the fast path) must cost speed, never the reads: here each case is
forced on the local server, through both APIs, and the reads must still return
the stored records, through the cursor, with one warning saying why.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest

import workmem
from workmem import Resource, Thread
from workmem.adapters.postgres import AsyncPostgresStorage, PostgresStorage, keyreads

pytestmark = pytest.mark.backend("postgres")

LOGGER = "workmem.adapters.postgres"


@pytest.fixture
def fast_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys the fast path read (``KeyReads.fetch`` still runs as it is)."""
    seen: list[str] = []
    fetch = keyreads.KeyReads.fetch

    async def counted(self: keyreads.KeyReads, read: keyreads.PreparedRead, key: str) -> list[tuple[Any, ...]]:
        seen.append(key)
        return await fetch(self, read, key)

    monkeypatch.setattr(keyreads.KeyReads, "fetch", counted)
    return seen


def _stored(url: str) -> tuple[Thread, Resource]:
    with workmem.connect(url) as storage:
        thread = storage.save_thread(Thread("t-1", resource_id="user-1", title="Trip", metadata={"n": 1}))
        resource = storage.update_resource("user-1", working_memory="# Sam", metadata={"city": "Oslo"})
    return thread, resource


def _read_sync(url: str) -> tuple[Thread | None, Resource | None, Thread | None]:
    with PostgresStorage.from_url(url) as storage:
        return storage.get_thread("t-1"), storage.get_resource("user-1"), storage.get_thread("absent")


def _read_async(url: str) -> tuple[Thread | None, Resource | None, Thread | None]:
    async def main() -> tuple[Thread | None, Resource | None, Thread | None]:
        async with await AsyncPostgresStorage.open(url) as storage:
            return (
                await storage.get_thread("t-1"),
                await storage.get_resource("user-1"),
                await storage.get_thread("absent"),
            )

    return asyncio.run(main())


READERS = [pytest.param(_read_sync, id="sync"), pytest.param(_read_async, id="async")]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.mark.parametrize("read", READERS)
def test_the_fast_path_reads_by_key_with_the_psycopg_it_was_written_for(
    url: str, read: Any, fast_reads: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    thread, resource = _stored(url)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert read(url) == (thread, resource, None)
    assert fast_reads == ["t-1", "user-1", "absent"]
    assert not any("cursor" in message for message in _warnings(caplog))


@pytest.mark.parametrize("read", READERS)
def test_another_psycopg_major_reads_through_the_cursor(
    url: str, read: Any, fast_reads: list[str], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread, resource = _stored(url)
    monkeypatch.setattr(psycopg, "__version__", "4.0.0")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert read(url) == (thread, resource, None)
    assert fast_reads == []
    (warning,) = _warnings(caplog)
    assert "psycopg 4.0.0" in warning and "cursor" in warning


@pytest.mark.parametrize("read", READERS)
def test_a_libpq_layer_without_what_the_fast_path_uses_reads_through_the_cursor(
    url: str, read: Any, fast_reads: list[str], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread, resource = _stored(url)

    class OlderTransformer:  # psycopg's Transformer as if it had no load_rows
        def __init__(self, context: Any) -> None:
            pass

        def set_pgresult(self, result: Any) -> None:
            pass

    monkeypatch.setattr(keyreads, "Transformer", OlderTransformer)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert read(url) == (thread, resource, None)
    assert fast_reads == []
    (warning,) = _warnings(caplog)
    assert "load_rows" in warning and "cursor" in warning


@pytest.mark.parametrize("read", READERS)
def test_a_fast_path_that_breaks_on_its_first_read_falls_back_for_good(
    url: str, read: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread, resource = _stored(url)
    calls: list[str] = []

    async def changed_api(self: keyreads.KeyReads, read: keyreads.PreparedRead, key: str) -> list[tuple[Any, ...]]:
        calls.append(key)
        raise TypeError("load_rows() takes 3 positional arguments but 4 were given")  # as a changed API would

    monkeypatch.setattr(keyreads.KeyReads, "fetch", changed_api)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert read(url) == (thread, resource, None)
    assert calls == ["t-1"]  # tried once, then the cursor path for every later read
    (warning,) = _warnings(caplog)
    assert "load_rows() takes" in warning and "cursor" in warning


def test_an_error_of_the_database_is_not_taken_for_an_unexpected_psycopg(
    url: str, fast_reads: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A missing table is the database's answer: it raises as always, and the fast path stays on."""
    _stored(url)
    with PostgresStorage.from_url(url) as storage:
        with psycopg.connect(storage._settings.conninfo, autocommit=True) as admin:
            admin.execute(f"DROP TABLE {storage.dialect.threads} CASCADE")
        with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(workmem.BackendRefusedError):
            storage.get_thread("t-1")
        assert storage.get_resource("user-1") is not None
    assert fast_reads == ["t-1", "user-1"]
    assert not any("cursor" in message for message in _warnings(caplog))
