"""PostgreSQL bulk inserts: a batch of records as one JSON document, inserted by one statement.

``insert_resources`` / ``insert_threads`` (what ``workmem copy`` and ``workmem
import`` write through) send each batch as a single ``jsonb`` parameter, an
array of one array per record, which the server turns back into rows::

    INSERT INTO mastra_threads AS t (id, "resourceId", ...)
    SELECT x.id, x.resource_id, ... FROM (SELECT r.v ->> 0 AS id, ...
        FROM jsonb_array_elements(CAST(%(rows)s AS jsonb)) AS r(v)) AS x
    ON CONFLICT (id) DO NOTHING RETURNING id

Why this and not the SQL default, a multi-row ``INSERT … VALUES``
(:meth:`~workmem.adapters.sql.dialect.Dialect.insert_threads`): that text
grows with the batch (six placeholders a row), so Python spent longer building
it and psycopg parsing it than the server spent inserting (profiled: about two
thirds of a copy's time). Here the text is fixed (built once, prepared by
psycopg) and the rows travel as compact JSON, encoded by one C call per batch.
``jsonb`` arrays measured faster than ``json_to_recordset`` objects, on both
sides (one parse of the document, no keys).

Why not ``COPY``: a ``COPY`` fails whole on the first id already present, so it
needs a temporary table and ``INSERT … SELECT … ON CONFLICT`` in a transaction
(five round trips and a table created and dropped per batch), and it is a
driver call of its own, one for the blocking and one for the async psycopg
API. This is one ordinary statement on an autocommit connection, run through
the storage's ``_execute`` port like every other, so the sync and the async
storage share it whole, and it is atomic by itself. Measured per batch of 500
threads: the same wall time as a ``COPY`` of those 500 rows, about 1.3 times its
server CPU (the conflict check, ``RETURNING`` and the JSON parse).

The rules are the contract's (:meth:`~workmem.flows.StorageHooks._insert_threads`):
``ON CONFLICT (id) DO NOTHING`` leaves a present record as it is, whoever owns
it (a bulk write never moves a thread), and ``RETURNING id`` names the ids
inserted, so the ids already present are the others. Rows go in id order, so
two racing batches sharing ids wait for each other in one order and never
deadlock. The column expressions are the dialect's own
(:meth:`Dialect._thread_fields`: ``CAST(… AS jsonb)``, the naive ``createdAt``
twin of ``createdAtZ``), each ``:name`` read from the row's element of that
name instead: a record is stored exactly as a single-row write stores it. A
batch whose JSON would exceed :data:`MAX_CHUNK_CHARS` is sent as several
statements (records can hold megabytes of working memory each).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any, Final

from workmem.adapters.sql import Result, Statement
from workmem.adapters.sql.dialect import PLACEHOLDER, placeholder_names
from workmem.errors import ValidationError
from workmem.records import Resource, Thread

from .dialect import PostgresDialect

__all__ = ["MAX_CHUNK_CHARS", "insert_resources", "insert_threads"]

MAX_CHUNK_CHARS: Final = 16 * 1024 * 1024
"""The JSON text of one statement stops growing past this many characters (a ``jsonb`` value holds 256 MB at most)."""

_CAST: Final = re.compile(r"CAST\(:([A-Za-z_]\w*) AS (\w+)\)")
"""A dialect value casting its parameter (``CAST(:metadata AS jsonb)``): the row's element is read as that type."""

_encode: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
""":func:`workmem.validation.dump_json`'s settings, so nested metadata reads as the single-row write stores it."""

Execute = Callable[[Statement], Awaitable[Result]]
"""The storage's ``_execute``: one statement on an autocommit connection."""

RESOURCE_ELEMENTS: Final = ("id", "working_memory", "metadata", "created_at", "updated_at")
"""What each array of a resource batch holds, in order: the dialect's parameter names (checked by the SQL)."""
THREAD_ELEMENTS: Final = ("id", "resource_id", "title", "metadata", "created_at", "updated_at")
"""What each array of a thread batch holds, in order."""


def _element(index: int, kind: str) -> str:
    """SQL reading element ``index`` of the row array ``r.v`` as ``kind`` (JSON ``null``: SQL ``NULL``)."""
    if kind == "jsonb":  # a nested object stays jsonb (no text round trip); ->> already maps null to NULL
        return f"NULLIF(r.v -> {index}, CAST('null' AS jsonb))"
    if kind == "text":
        return f"r.v ->> {index}"
    return f"CAST(r.v ->> {index} AS {kind})"


@functools.lru_cache(maxsize=64)
def _bulk_sql(table: str, fields: tuple[tuple[str, str], ...], elements: tuple[str, ...]) -> str:
    """``INSERT … SELECT … FROM jsonb_array_elements(:rows) … ON CONFLICT (id) DO NOTHING RETURNING id``.

    ``fields`` are the dialect's ``(quoted column, SQL value)`` pairs. Each row is a JSON array of
    ``elements``, the values' ``:name`` parameters in order; the inner select reads them as columns
    of those names, typed as the values cast them (a timestamp parsed once for both of its columns,
    metadata as a nested object) or ``text``, and each ``:name`` of a value becomes ``x.name``.
    """
    every = " ".join(value for _, value in fields)
    if placeholder_names(every) != elements:  # the dialect's statement changed: these rows no longer fit it
        raise AssertionError(f"bulk rows hold {elements}, the dialect binds {placeholder_names(every)}")
    types = dict(_CAST.findall(every))
    inner = ", ".join(f"{_element(i, types.get(name, 'text'))} AS {name}" for i, name in enumerate(elements))
    columns = ", ".join(column for column, _ in fields)
    values = ", ".join(PLACEHOLDER.sub(r"x.\1", value) for _, value in fields)
    return (
        f"INSERT INTO {table} AS t ({columns}) SELECT {values} "
        f"FROM (SELECT {inner} FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r(v)) AS x "
        "ON CONFLICT (id) DO NOTHING RETURNING id"
    )


def _resource_row(resource: Resource) -> list[Any]:
    return [
        resource.id,
        resource.working_memory,
        resource.metadata,
        resource.created_at.isoformat(),
        resource.updated_at.isoformat(),
    ]


def _thread_row(thread: Thread) -> list[Any]:
    return [
        thread.id,
        thread.resource_id,
        thread.title,
        thread.metadata,
        thread.created_at.isoformat(),
        thread.updated_at.isoformat(),
    ]


def _documents(rows: Sequence[list[Any]]) -> Iterator[str]:
    """The rows as one JSON array, or halves (and so on) while one is over :data:`MAX_CHUNK_CHARS`.

    One encoder call per batch: the C encoder's setup costs more than a small row.
    """
    try:
        text = _encode(rows)
    except (TypeError, ValueError) as exc:  # records validate their metadata: not expected
        raise ValidationError(f"not serializable as JSON: {exc}") from None
    if len(text) <= MAX_CHUNK_CHARS or len(rows) == 1:
        yield text
        return
    half = len(rows) // 2
    yield from _documents(rows[:half])
    yield from _documents(rows[half:])


async def _insert(execute: Execute, sql: str, ids: Sequence[str], rows: list[list[Any]]) -> frozenset[str]:
    # In id order: two racing batches with ids in common then wait for each other's rows in one order,
    # never each for the other (given in opposite orders, they would deadlock). A copy's pages already are.
    rows.sort(key=itemgetter(0))
    inserted: set[str] = set()
    for chunk in _documents(rows):
        inserted.update(row[0] for row in (await execute(Statement(sql, {"rows": chunk}))).rows)
    return frozenset(record_id for record_id in ids if record_id not in inserted)


async def insert_resources(execute: Execute, dialect: PostgresDialect, resources: Sequence[Resource]) -> frozenset[str]:
    """Insert the absent ``resources`` (distinct ids) as given; the ids that were already present."""
    if not resources:
        return frozenset()
    sql = _bulk_sql(dialect.resources, tuple(dialect._resource_fields()), RESOURCE_ELEMENTS)
    return await _insert(execute, sql, [r.id for r in resources], [_resource_row(r) for r in resources])


async def insert_threads(execute: Execute, dialect: PostgresDialect, threads: Sequence[Thread]) -> frozenset[str]:
    """Insert the absent ``threads`` (distinct ids) as given, none moved to another owner; the ids already present."""
    if not threads:
        return frozenset()
    sql = _bulk_sql(dialect.threads, tuple(dialect._thread_fields()), THREAD_ELEMENTS)
    return await _insert(execute, sql, [t.id for t in threads], [_thread_row(t) for t in threads])
