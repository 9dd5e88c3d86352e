"""PostgreSQL's bulk path (:mod:`workmem.adapters.postgres.bulk`): a batch as one JSON document, one statement.

What ``insert_threads`` / ``insert_resources`` store must be, column for
column, what the single-row writes store (``createdAt`` and its ``…Z`` twin,
jsonb metadata, NULLs, far timestamps, any Unicode), through the sync and the
async storage alike; a batch split into several statements (over
``MAX_CHUNK_CHARS``) answers as one; ids already present are named and left
alone whoever owns them; and the kept thread counts stay exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from postgres_schemas import fresh_schema_url

import workmem
from workmem import Resource, Thread
from workmem.adapters.postgres import bulk, parse_postgres_url

pytestmark = pytest.mark.backend("postgres")

T0 = datetime(2021, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)
OLD = datetime(1, 1, 1, tzinfo=UTC)
LATE = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)

THREADS = [
    Thread("t-plain", "r-1", "a title", {"workingMemory": "# wm", "n": 1, "x": None}, T0, T0),
    Thread("t-none", "r-1", "", None, OLD, LATE),
    Thread("t-deep", "r-2", "ünï ☕ \u2028", {"deep": {"b": [1, 2.5, {"c": "ü"}], "a": 0.1}, "k é": "😀"}, T0, LATE),
    Thread("t-😀", "r-2", 'quotes " and \\ and \t', {"big": 2**53 - 1, "tiny": 1e-7, "neg": -5, "t": True}, OLD, T0),
    Thread("t-empty-md", "r-3", "x", {}, T0, T0),
]
RESOURCES = [
    Resource("r-1", "# User\n- likes tea", {"plan": "pro", "n": 3}, T0, LATE),
    Resource("r-none", None, None, OLD, OLD),
    Resource("r-é", '{"name": "Ada", "x": [1, 2]}', {"emoji": "😀"}, T0, T0),
    Resource("r-empty", "", {}, LATE, LATE),
]


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema_url() as fresh:
        workmem.connect(fresh).close()
        yield fresh


def _renamed(record: Any, suffix: str) -> Any:
    fields = {name: getattr(record, name) for name in record.__dataclass_fields__}
    return type(record)(**{**fields, "id": record.id + suffix})


def _stored(url: str, table: str) -> dict[str, Any]:
    """Every row of ``table`` as jsonb (every column but the id), keyed by id."""
    conninfo, schema = parse_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(f"SELECT id, to_jsonb(t) - 'id' FROM \"{schema}\".{table} AS t").fetchall()
    return {row[0]: row[1] for row in rows}


def _same_as_single_writes(url: str, suffix: str) -> None:
    threads, resources = _stored(url, "mastra_threads"), _stored(url, "mastra_resources")
    for thread in THREADS:
        assert threads[thread.id + suffix] == threads[thread.id], thread.id
    for resource in RESOURCES:
        assert resources[resource.id + suffix] == resources[resource.id], resource.id


def test_bulk_rows_are_the_rows_single_writes_store(url: str) -> None:
    with workmem.connect(url) as storage:
        for thread in THREADS:
            storage.create_thread(thread)
        for resource in RESOURCES:
            storage.save_resource(resource)
        assert storage.insert_threads(_renamed(t, "-bulk") for t in reversed(THREADS)) == frozenset()
        assert storage.insert_resources(_renamed(r, "-bulk") for r in RESOURCES) == frozenset()
        assert [storage.get_thread(t.id + "-bulk") for t in THREADS] == [_renamed(t, "-bulk") for t in THREADS]
        assert [storage.get_resource(r.id + "-bulk") for r in RESOURCES] == [_renamed(r, "-bulk") for r in RESOURCES]
    _same_as_single_writes(url, "-bulk")


def test_the_async_storage_writes_the_same_rows(url: str) -> None:
    async def run() -> None:
        async with await workmem.connect_async(url) as storage:
            for thread in THREADS:
                await storage.create_thread(thread)
            for resource in RESOURCES:
                await storage.save_resource(resource)
            assert await storage.insert_threads(_renamed(t, "-async") for t in THREADS) == frozenset()
            assert await storage.insert_resources(_renamed(r, "-async") for r in RESOURCES) == frozenset()
            present = await storage.insert_threads([Thread("t-plain", "r-other"), _renamed(THREADS[0], "-new")])
            assert present == {"t-plain"}
            plain = await storage.get_thread("t-plain")
            assert plain is not None and plain.resource_id == "r-1"

    asyncio.run(run())
    _same_as_single_writes(url, "-async")


def test_a_batch_split_over_several_statements_answers_as_one(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    statements: list[int] = []
    documents = bulk._documents

    def counted(rows: Any) -> Iterator[str]:
        for text in documents(rows):
            statements.append(len(text))
            yield text

    monkeypatch.setattr(bulk, "MAX_CHUNK_CHARS", 400)
    monkeypatch.setattr(bulk, "_documents", counted)
    with workmem.connect(url) as storage:
        taken = [Thread(f"t{i:03d}", "r-first", "first", None, T0, T0) for i in range(0, 60, 7)]
        assert storage.insert_threads(taken) == frozenset()
        batch = [Thread(f"t{i:03d}", f"r-{i % 3}", f"thread {i}", {"i": i, "pad": "x" * 20}, T0, T0) for i in range(60)]
        statements.clear()
        present = storage.insert_threads(reversed(batch))
        assert len(statements) > 5 and max(statements) <= 400 + 200, statements  # split, each near the limit
        assert present == {t.id for t in taken}
        for thread in batch:
            stored = storage.get_thread(thread.id)
            assert stored == (taken[int(thread.id[1:]) // 7] if thread.id in present else thread)
        assert storage.list_threads("r-first").total == len(taken)  # never moved to another owner
        counts = {r: storage.list_threads(f"r-{r}").total for r in range(3)}
        assert counts == {
            r: sum(1 for t in batch if t.resource_id == f"r-{r}" and t.id not in present) for r in range(3)
        }


def test_one_record_over_the_limit_is_sent_alone(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "MAX_CHUNK_CHARS", 1000)
    big = Resource("r-big", "m" * 5000, {"k": "v" * 3000}, T0, T0)
    with workmem.connect(url) as storage:
        assert storage.insert_resources([Resource("r-a", "a", None, T0, T0), big]) == frozenset()
        assert storage.get_resource("r-big") == big
