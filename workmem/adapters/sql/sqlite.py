"""The SQLite/libSQL dialect: Mastra's libSQL tables, JSONB metadata, ``…Z`` text timestamps.

SQLite has no shallow JSON merge that keeps every key spelling and number
exactly, so updates and merges run as ``BEGIN IMMEDIATE`` transactions: the
transaction holds the database's write lock from its first statement, which
makes the read-modify-write atomic between threads and processes alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from workmem.timestamps import to_iso

from .dialect import RESOURCES, THREADS, Dialect, Statement, placeholder_names

__all__ = ["SQLiteDialect"]

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

    def __init__(self) -> None:
        super().__init__(None)

    def render(self, statement: Statement) -> tuple[str, Any]:
        # SQLite numbers :name placeholders by first appearance, so they bind positionally.
        return statement.sql, tuple(statement.params[name] for name in placeholder_names(statement.sql))

    def json_param(self, name: str) -> str:
        return f"jsonb(:{name})"

    def json_select(self, column: str) -> str:
        return f"json({column})"

    def time_value(self, value: datetime) -> Any:
        return to_iso(value)

    def ddl(self) -> list[str]:
        return list(_TABLES)
