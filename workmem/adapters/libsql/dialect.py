"""The SQLite/libSQL dialect: Mastra's libSQL tables, JSONB metadata, ``…Z`` text timestamps.

SQLite has no shallow JSON merge that keeps every key spelling and number
exactly, so updates and merges run as ``BEGIN IMMEDIATE`` transactions: the
transaction holds the database's write lock from its first statement, which
makes the read-modify-write atomic between threads and processes alike.

A page's ``total`` is read from ``workmem_thread_counts`` (one row per
resource), which triggers on ``mastra_threads`` keep exact whoever writes the
threads -- workmem or the TypeScript adapter. That adapter saves threads with
``INSERT OR REPLACE``, whose implicit delete fires no delete trigger (unless
``recursive_triggers`` is on), so a ``BEFORE INSERT`` trigger notes the owner
of a row about to be replaced in ``workmem_thread_replaced`` and the
``AFTER INSERT`` trigger takes that owner's count back; an insert that turned
into an upsert's update (no ``AFTER INSERT``) leaves a note the next update,
insert or delete of that thread removes. The counts are created, and filled
from the rows already there, in the ``BEGIN IMMEDIATE`` transaction that
creates the triggers, so no write falls between the two.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from operator import itemgetter
from typing import Any, ClassVar

from workmem.adapters.sql.dialect import COUNTS, RESOURCES, THREADS, Dialect, Statement, placeholder_names
from workmem.timestamps import to_iso

__all__ = ["SQLiteDialect"]

_REPLACED = "workmem_thread_replaced"
_TRIGGERS = (
    "workmem_threads_count_before_insert",
    "workmem_threads_count_insert",
    "workmem_threads_count_delete",
    "workmem_threads_count_update",
    "workmem_threads_count_touch",
)
_NAMES = ", ".join(f"'{name}'" for name in _TRIGGERS)
_MISSING = f"(SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ({_NAMES})) < {len(_TRIGGERS)}"
_ADD = (
    f'INSERT INTO {COUNTS} ("resourceId", n) VALUES (NEW."resourceId", 1) '
    'ON CONFLICT ("resourceId") DO UPDATE SET n = n + 1'
)
_COUNTS = (
    f'CREATE TABLE IF NOT EXISTS {COUNTS} ("resourceId" TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID',
    f'CREATE TABLE IF NOT EXISTS {_REPLACED} (id TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL) WITHOUT ROWID',
    # A trigger is missing (first start, or someone dropped one): count again, then create what is missing.
    f"DELETE FROM {COUNTS} WHERE {_MISSING}",
    f"DELETE FROM {_REPLACED} WHERE {_MISSING}",
    f'INSERT INTO {COUNTS} ("resourceId", n) SELECT "resourceId", count(*) FROM {THREADS} WHERE {_MISSING} '
    'GROUP BY "resourceId"',
    f"""CREATE TRIGGER IF NOT EXISTS {_TRIGGERS[0]} BEFORE INSERT ON {THREADS}
WHEN EXISTS (SELECT 1 FROM {THREADS} WHERE id = NEW.id) BEGIN
  INSERT OR REPLACE INTO {_REPLACED} (id, "resourceId") SELECT id, "resourceId" FROM {THREADS} WHERE id = NEW.id;
END""",
    f"""CREATE TRIGGER IF NOT EXISTS {_TRIGGERS[1]} AFTER INSERT ON {THREADS} BEGIN
  UPDATE {COUNTS} SET n = n - 1 WHERE "resourceId" = (SELECT "resourceId" FROM {_REPLACED} WHERE id = NEW.id);
  DELETE FROM {_REPLACED} WHERE id = NEW.id;
  {_ADD};
END""",
    f"""CREATE TRIGGER IF NOT EXISTS {_TRIGGERS[2]} AFTER DELETE ON {THREADS} BEGIN
  UPDATE {COUNTS} SET n = n - 1 WHERE "resourceId" = OLD."resourceId";
  DELETE FROM {_REPLACED} WHERE id = OLD.id;
END""",
    f"""CREATE TRIGGER IF NOT EXISTS {_TRIGGERS[3]} AFTER UPDATE OF "resourceId" ON {THREADS}
WHEN OLD."resourceId" IS NOT NEW."resourceId" BEGIN
  UPDATE {COUNTS} SET n = n - 1 WHERE "resourceId" = OLD."resourceId";
  {_ADD};
END""",
    f"""CREATE TRIGGER IF NOT EXISTS {_TRIGGERS[4]} AFTER UPDATE ON {THREADS}
WHEN EXISTS (SELECT 1 FROM {_REPLACED} WHERE id = NEW.id) BEGIN
  DELETE FROM {_REPLACED} WHERE id = NEW.id;
END""",
)


@functools.lru_cache(maxsize=512)
def _binder(sql: str) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The parameters of ``sql`` as a tuple, in the order SQLite numbers its ``:name`` placeholders."""
    names = placeholder_names(sql)
    if not names:
        return lambda params: ()
    if len(names) == 1:
        name = names[0]
        return lambda params: (params[name],)
    return itemgetter(*names)


_TABLES = (
    f'CREATE TABLE IF NOT EXISTS {THREADS} ("id" TEXT NOT NULL PRIMARY KEY, "resourceId" TEXT NOT NULL, '
    '"title" TEXT NOT NULL, "metadata" TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
    f'CREATE TABLE IF NOT EXISTS {RESOURCES} ("id" TEXT NOT NULL PRIMARY KEY, "workingMemory" TEXT, '
    '"metadata" TEXT, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)',
    # Not in Mastra's schema: listing a resource's threads is an index range scan, in order.
    f'CREATE INDEX IF NOT EXISTS workmem_threads_resourceid_createdat_idx ON {THREADS} ("resourceId", "createdAt", id)',
    f'CREATE INDEX IF NOT EXISTS workmem_threads_resourceid_updatedat_idx ON {THREADS} ("resourceId", "updatedAt", id)',
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
        # SQLite numbers :name placeholders by first appearance, so they bind positionally.
        sql = statement.sql
        return sql, _binder(sql)(statement.params)

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
        return [*_TABLES, *_COUNTS]
