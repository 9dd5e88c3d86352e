"""The SQLite/libSQL dialect: Mastra's libSQL tables, JSONB metadata, ``…Z`` text timestamps.

SQLite has no shallow JSON merge that keeps every key spelling and number
exactly, so metadata updates and merges run as ``BEGIN IMMEDIATE`` transactions:
the transaction holds the database's write lock from its first statement, which
makes the read-modify-write atomic between threads and processes alike. What
merges nothing is one statement: ``create_thread`` a conflict-ignoring insert
whose row count decides, replacing a resource's working memory one upsert.

A page's ``total`` is read from ``workmem_thread_counts`` (one row per
resource), which four triggers on ``mastra_threads`` keep exact whoever writes
the threads -- workmem or the TypeScript adapter. That adapter saves threads with
``INSERT OR REPLACE``, whose implicit delete fires no delete trigger (unless
``recursive_triggers`` is on), so the ``BEFORE INSERT`` trigger notes the owner
of a row about to be replaced in ``workmem_thread_replaced`` and the
``AFTER INSERT`` trigger takes that owner's count back. An insert that inserted
nothing (a conflict ignored, or an upsert that updated) leaves its note behind;
it is harmless (every insert of an existing id writes a fresh one first, every
delete removes it) and the update trigger, which also moves a thread's count
when its owner changes, removes it at the thread's next update.

The trigger set is compared, by name and text, with this version's on every
start (:meth:`SQLiteDialect.count_upgrade`): a new file, a trigger dropped or
changed, or an earlier version's set (five triggers, one retired) has every count
trigger dropped, the counts taken again from the rows, and this version's
triggers created, in the ``BEGIN IMMEDIATE`` transaction that creates the
tables, so no write falls between the count and the triggers. The ``libsql``
wheel keeps no prepared statements: each statement is compiled anew, triggers
included, so their bodies are kept few and short.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any, ClassVar

from workmem.adapters.sql.dialect import (
    COUNTS,
    HISTORY,
    PLACEHOLDER,
    RESOURCES,
    THREADS,
    Dialect,
    Statement,
    placeholder_names,
    sql_text_cache,
)
from workmem.timestamps import to_iso

from .remote import canonical_sql

__all__ = ["SQLiteDialect"]

_REPLACED = "workmem_thread_replaced"
_ADD = (
    f'INSERT INTO {COUNTS} ("resourceId", n) VALUES (NEW."resourceId", 1) '
    'ON CONFLICT ("resourceId") DO UPDATE SET n = n + 1'
)
_MOVED = 'NEW."resourceId" IS NOT OLD."resourceId"'
_ROW = f"FROM {THREADS} WHERE id = NEW.id"
"""The row an insert is about to replace (as its ``BEFORE`` trigger sees it), or the row updated."""
_NOTE = f"FROM {_REPLACED} WHERE id = NEW.id"
"""The note of the owner a row had before an insert of its id."""


def _trigger(name: str, event: str, *body: str) -> tuple[str, str]:
    """``(name, CREATE TRIGGER text)``, the text exactly as SQLite keeps it in ``sqlite_master.sql``."""
    statements = "".join(f"  {statement};\n" for statement in body)
    return name, f"CREATE TRIGGER {name} {event} BEGIN\n{statements}END"


_TRIGGERS = dict(
    (
        _trigger(
            "workmem_threads_count_before_insert",
            f"BEFORE INSERT ON {THREADS}\nWHEN EXISTS (SELECT 1 {_ROW})",
            f'INSERT OR REPLACE INTO {_REPLACED} (id, "resourceId") SELECT id, "resourceId" {_ROW}',
        ),
        _trigger(
            "workmem_threads_count_insert",
            f"AFTER INSERT ON {THREADS}",
            f'UPDATE {COUNTS} SET n = n - 1 WHERE "resourceId" = (SELECT "resourceId" {_NOTE})',
            f"DELETE {_NOTE}",
            _ADD,
        ),
        _trigger(
            "workmem_threads_count_delete",
            f"AFTER DELETE ON {THREADS}",
            f'UPDATE {COUNTS} SET n = n - 1 WHERE "resourceId" = OLD."resourceId"',
            f"DELETE FROM {_REPLACED} WHERE id = OLD.id",
        ),
        _trigger(
            "workmem_threads_count_update",
            f"AFTER UPDATE ON {THREADS}\nWHEN {_MOVED} OR EXISTS (SELECT 1 {_NOTE})",
            f'UPDATE {COUNTS} SET n = n - 1 WHERE "resourceId" = OLD."resourceId" AND {_MOVED}',
            f'INSERT INTO {COUNTS} ("resourceId", n) SELECT NEW."resourceId", 1 WHERE {_MOVED} '
            'ON CONFLICT ("resourceId") DO UPDATE SET n = n + 1',
            f"DELETE {_NOTE}",
        ),
    )
)
_CANONICAL_TRIGGERS = {name: canonical_sql(sql) for name, sql in _TRIGGERS.items()}
_RETIRED = ("workmem_threads_count_touch",)
"""Count triggers of earlier versions (the note-removing half of today's update trigger): dropped on upgrade."""
_COUNT_TABLES = (
    f'CREATE TABLE IF NOT EXISTS {COUNTS} ("resourceId" TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID',
    f'CREATE TABLE IF NOT EXISTS {_REPLACED} (id TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL) WITHOUT ROWID',
)
_RECOUNT = (
    f"DELETE FROM {COUNTS}",
    f"DELETE FROM {_REPLACED}",
    f'INSERT INTO {COUNTS} ("resourceId", n) SELECT "resourceId", count(*) FROM {THREADS} GROUP BY "resourceId"',
)
_PRESENT_TRIGGERS = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
    "AND name LIKE 'workmem\\_threads\\_count\\_%' ESCAPE '\\'"
)


@sql_text_cache
def _rendered(sql: str) -> tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]]]:
    """``sql`` with each ``:name`` written ``?N`` (N its order of first appearance), and what binds its values.

    Positional, because a libSQL server refuses named placeholders bound by position: the
    ``libsql`` wheel sends a tuple as positional arguments, and ``sqld`` answers
    ``ARGS_INVALID: value for parameter :id not found`` for ``:id``. ``?N`` means the
    same to the embedded engine, so files and servers run the same text.
    """
    names = placeholder_names(sql)
    number = {name: f"?{index}" for index, name in enumerate(names, 1)}
    text = PLACEHOLDER.sub(lambda match: number[match.group(1)], sql)
    if not names:
        return text, lambda params: ()
    if len(names) == 1:
        name = names[0]
        return text, lambda params: (params[name],)
    return text, itemgetter(*names)


_TABLES = (
    f'CREATE TABLE IF NOT EXISTS {THREADS} ("id" TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL, '
    '"title" TEXT NOT NULL, "metadata" TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
    f'CREATE TABLE IF NOT EXISTS {RESOURCES} ("id" TEXT NOT NULL PRIMARY KEY, "workingMemory" TEXT, '
    '"metadata" TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
    # Not in Mastra's schema: listing a resource's threads is an index range scan, in order.
    f'CREATE INDEX IF NOT EXISTS workmem_threads_resourceid_createdat_idx ON {THREADS} ("resourceId", "createdAt", id)',
    f'CREATE INDEX IF NOT EXISTS workmem_threads_resourceid_updatedat_idx ON {THREADS} ("resourceId", "updatedAt", id)',
    # workmem's history of working memory (connect(url, history=...)), beside Mastra's tables.
    f"CREATE TABLE IF NOT EXISTS {HISTORY} (resource_id TEXT NOT NULL, scope TEXT NOT NULL, memory_id TEXT NOT NULL, "
    "version INTEGER NOT NULL, content TEXT, changed_at TEXT NOT NULL, kind TEXT NOT NULL, source TEXT, "
    "PRIMARY KEY (resource_id, scope, memory_id, version))",
)


class SQLiteDialect(Dialect):
    """SQLite >= 3.45 (the engine inside the ``libsql`` wheel): ``jsonb()`` in, ``json()`` out."""

    name: ClassVar[str] = "libsql"
    row_locks: ClassVar[bool] = False
    begin_write: ClassVar[str] = "BEGIN IMMEDIATE"
    kept_counts: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__(None)

    def render(self, statement: Statement) -> tuple[str, Any]:
        # ?N placeholders bound by position: what both the embedded engine and a libSQL server take.
        sql, bind = _rendered(statement.sql)
        return sql, bind(statement.params)

    def json_param(self, name: str) -> str:
        return f"jsonb(:{name})"

    def json_select(self, column: str) -> str:
        # json() of text that is not JSON (another program's row) would fail the whole statement -- every
        # thread of a list; such a value comes back as stored, and that one record is unreadable. Flags 6:
        # JSON5 text (what json() takes), or a JSONB blob checked superficially (cheap: what workmem writes).
        return f"CASE WHEN json_valid({column}, 6) THEN json({column}) ELSE {column} END"

    def time_value(self, value: datetime) -> Any:
        return to_iso(value)

    def ddl(self) -> list[str]:
        """Tables, indexes and the count tables; the count triggers come from :meth:`count_upgrade`."""
        return [*_TABLES, *_COUNT_TABLES]

    present_triggers: ClassVar[str] = _PRESENT_TRIGGERS
    """The ``(name, sql)`` of every count trigger (``workmem_threads_count_*``) the database has."""

    def count_upgrade(self, present: Iterable[Sequence[Any]]) -> list[str]:
        """What makes the count triggers this version's, given the ``(name, sql)`` rows of :attr:`present_triggers`.

        Nothing when the file has exactly this version's triggers. Otherwise (a new file, a trigger
        dropped or changed, or an earlier version's set): every count trigger is dropped, the counts
        are taken again from the rows, and the triggers created -- run in one ``BEGIN IMMEDIATE``
        transaction, so no write falls between the count and the triggers.
        """
        found = {str(name): sql for name, sql in present}
        if {name: canonical_sql(str(sql)) for name, sql in found.items()} == _CANONICAL_TRIGGERS:
            return []  # sqld keeps a trigger's text as it re-serialized it: compared in that form (see .remote)
        drops = [f'DROP TRIGGER IF EXISTS "{name}"' for name in sorted({*found, *_TRIGGERS, *_RETIRED})]
        return [*drops, *_RECOUNT, *_TRIGGERS.values()]

    @functools.cached_property
    def _store_working_memory(self) -> dict[bool, str]:
        sql = (
            f"{self._insert(self.resources, self._resource_fields())} ON CONFLICT (id) DO UPDATE SET "
            '"workingMemory" = excluded."workingMemory", "updatedAt" = excluded."updatedAt"'
        )
        return {False: sql, True: f"{sql} RETURNING {self.resource_columns()}"}

    def store_working_memory(self, resource_id: str, text: str | None, now: datetime, *, returning: bool) -> Statement:
        """Set the resource's working memory and ``updatedAt`` in one upsert (creating it, without metadata).

        ``returning``: the row comes back (what ``update_resource`` without metadata returns).
        """
        stamp = to_iso(now)
        params = {"id": resource_id, "working_memory": text, "metadata": None, "created_at": stamp, "updated_at": stamp}
        return Statement(self._store_working_memory[returning], params)
