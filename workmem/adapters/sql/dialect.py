"""What SQL databases share: the Mastra tables, and every statement built from a few dialect hooks.

Statements are written once, with ``:name`` placeholders, and returned as
:class:`Statement` ``(sql, params)`` without doing any I/O. A dialect overrides
only what its database does differently: how JSON and timestamps go in and
come out, how a page is cut, which upsert syntax it has, and which
read-modify-write operations it can do in one statement
(:attr:`Dialect.native_shallow_merge`, :meth:`Dialect.merge_statement`).
:meth:`Dialect.render` turns a statement into its driver's paramstyle.

Every value is a bound parameter; identifiers (a schema name) are validated
by :func:`identifier` and double-quoted, never taken from data.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final, Generic, NamedTuple, TypeVar

from workmem.errors import ValidationError
from workmem.history import HISTORY_TABLE, HistoryKey, MemoryVersion, Recording
from workmem.hooks import ListQuery, ScopeTarget
from workmem.records import Resource, Thread, Unset
from workmem.validation import dump_json

from .rows import resource_from_row, thread_from_row

__all__ = [
    "COUNTS",
    "HISTORY",
    "MAX_ROWS",
    "PLACEHOLDER",
    "RESOURCES",
    "THREADS",
    "Dialect",
    "KeyRead",
    "Statement",
    "identifier",
    "placeholder_names",
    "sql_text_cache",
]

RESOURCES = "mastra_resources"
THREADS = "mastra_threads"
HISTORY = HISTORY_TABLE
"""workmem's table of working memory's versions (``connect(url, history=...)``), beside Mastra's tables."""
COUNTS = "workmem_thread_counts"
"""workmem's table of threads per resource, kept by triggers on ``mastra_threads`` (see :attr:`Dialect.kept_counts`)."""
MAX_ROWS = 2**62
"""LIMIT/OFFSET are clamped to this (every engine takes a signed 64-bit count)."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
"""A ``:name`` placeholder (not the second colon of a ``::type`` cast)."""
R = TypeVar("R")
_ORDER_COLUMNS = {"created_at": '"createdAt"', "updated_at": '"updatedAt"'}


class Statement(NamedTuple):
    """One SQL statement with ``:name`` placeholders and its parameters."""

    sql: str
    params: Mapping[str, Any]


class KeyRead(NamedTuple, Generic[R]):
    """A read of one record by primary key, built once: the hot path of ``get_thread`` and ``get_resource``.

    An adapter may run ``rendered`` straight on its driver, the key bound to its
    one placeholder; :meth:`statement` is the same read as a :class:`Statement`.
    Either way ``record`` maps the row fetched.
    """

    sql: str
    """The statement, its one placeholder ``:id``."""
    rendered: str
    """``sql`` in the driver's paramstyle."""
    record: Callable[[Sequence[Any]], R]
    """The record of a fetched row."""

    def statement(self, key: str) -> Statement:
        return Statement(self.sql, {"id": key})


def identifier(name: str, what: str = "schema") -> str:
    """``name`` double-quoted, after checking it is a plain SQL identifier (letters, digits, ``_``)."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValidationError(f"{what} must be letters, digits and '_' (at most 63, not starting with a digit)")
    return f'"{name}"'


LONG_SQL: Final = 4096
"""Statement texts longer than this (a bulk insert's many rows, up to some 600 KB) are kept by
:func:`sql_text_cache` a few at a time, not among the 512 short ones."""
T = TypeVar("T")


def sql_text_cache(function: Callable[[str], T]) -> Callable[[str], T]:
    """``function`` of a statement's text, cached: the last 512 short texts, and the last 8 long ones.

    The statements of the contract are a few hundred short texts, computed once each; a bulk
    insert's text grows with its rows, and a copy's batches come in few sizes, so a few are kept:
    512 of them would hold hundreds of megabytes for the process's life.
    """
    short, long = functools.lru_cache(maxsize=512)(function), functools.lru_cache(maxsize=8)(function)

    @functools.wraps(function)
    def cached(sql: str) -> T:
        return short(sql) if len(sql) <= LONG_SQL else long(sql)

    return cached


@sql_text_cache
def placeholder_names(sql: str) -> tuple[str, ...]:
    """The ``:name`` placeholders of ``sql`` in order of first appearance (``::type`` casts are skipped)."""
    return tuple(dict.fromkeys(PLACEHOLDER.findall(sql)))


@functools.lru_cache(maxsize=16)
def _values_rows(values: tuple[str, ...], count: int) -> str:
    """``count`` rows of ``values`` (SQL with ``:name`` placeholders), each row's placeholders ``:name_INDEX``.

    Built once per row shape and count (a copy's batches are mostly one size), not per batch; a few kept,
    as a text of 10,000 rows is large.
    """
    row = "(" + ", ".join(PLACEHOLDER.sub(":\\1_\0", value) for value in values) + ")"
    return ", ".join(row.replace("\0", str(index)) for index in range(count))


class Dialect:
    """The statements of the storage contract for one SQL database; subclasses override the hooks."""

    name: ClassVar[str] = "sql"
    native_shallow_merge: ClassVar[bool] = False
    """Whether :meth:`shallow_merge` exists, so updates are single statements."""
    row_locks: ClassVar[bool] = True
    """Whether a read-modify-write locks rows (``FOR UPDATE``); ``False`` when the transaction locks the database."""
    begin_write: ClassVar[str] = "BEGIN"
    """The statement opening a read-modify-write transaction."""
    kept_counts: ClassVar[bool] = False
    """Whether the dialect's DDL keeps per-resource thread counts in :attr:`counts`, read instead of counting."""

    def __init__(self, schema: str | None = None) -> None:
        self.schema = schema
        prefix = "" if schema is None else identifier(schema) + "."
        self.resources = prefix + RESOURCES
        self.threads = prefix + THREADS
        self.counts = prefix + COUNTS
        self.history = prefix + HISTORY
        self.counts_present = self.kept_counts
        """Whether :attr:`counts` is there to read (see :meth:`without_counts`); when not, threads are counted."""
        self.history_present = True
        """Whether :attr:`history` is there (see :meth:`without_counts`); when not, nothing has history here."""
        self._sql: dict[tuple[str, ...], str] = {}
        """Statement texts that depend only on the dialect, built on first use (reads run per call)."""

    def required_tables(self) -> list[str]:
        """The tables (unqualified names) the statements use, which ``connect(url, create=False)`` checks for."""
        return [THREADS, RESOURCES, *([COUNTS] if self.kept_counts else []), HISTORY]

    def without_counts(self, missing: Sequence[str]) -> list[str]:
        """The tables of ``missing`` (of :meth:`required_tables`, absent) that ``create=False`` cannot do without.

        workmem's counts and history tables are not: a database that only the TypeScript adapters
        wrote has Mastra's tables alone, and opened without creating anything (a copy's source, a
        read-only role) it is read as it is; this dialect then counts a resource's threads instead of
        reading the kept count, and holds no history (reads none, refuses to record: see
        :attr:`history_present`). Call before the first statement is built.
        """
        if COUNTS in missing:
            self.counts_present = False
        if HISTORY in missing:
            self.history_present = False
        return [name for name in missing if name not in (COUNTS, HISTORY)]

    # -- hooks: values and fragments ---------------------------------------------------

    def render(self, statement: Statement) -> tuple[str, Any]:
        """``(sql, params)`` in the driver's paramstyle (here unchanged: ``:name`` and a mapping)."""
        return statement.sql, statement.params

    def key_read(self, columns: str, table: str, record: Callable[[Sequence[Any]], R]) -> KeyRead[R]:
        """``SELECT columns FROM table WHERE id = :id`` as a :class:`KeyRead` mapping rows with ``record``."""
        sql = self._by_id(columns, table, lock=False)
        return KeyRead(sql, self.render(Statement(sql, {"id": ""}))[0], record)

    @functools.cached_property
    def thread_by_id(self) -> KeyRead[Thread]:
        """``select_thread`` as a :class:`KeyRead`."""
        return self.key_read(self.thread_columns(), self.threads, thread_from_row)

    @functools.cached_property
    def resource_by_id(self) -> KeyRead[Resource]:
        """``select_resource`` as a :class:`KeyRead`."""
        return self.key_read(self.resource_columns(), self.resources, resource_from_row)

    def json_param(self, name: str) -> str:
        """SQL that stores the JSON text bound as ``:name``."""
        return f":{name}"

    def json_select(self, column: str) -> str:
        """SQL that reads ``column`` back as JSON text."""
        return column

    def time_value(self, value: datetime) -> Any:
        """A timestamp as bound to the driver."""
        return value

    def time_select(self, column: str) -> str:
        """SQL that reads the timestamp ``column`` (``createdAt`` or ``updatedAt``)."""
        return f'"{column}"'

    def time_assignments(self, column: str, name: str) -> list[tuple[str, str]]:
        """``(quoted column, SQL)`` pairs that store the timestamp bound as ``:name`` in ``column``."""
        return [(f'"{column}"', f":{name}")]

    def shallow_merge(self, old: str, new: str, *, thread: bool = False) -> str:
        """SQL for ``{**old, **new}`` of two JSON objects (only if :attr:`native_shallow_merge`).

        ``thread``: the objects are thread metadata, whose ``workingMemory`` string is
        working memory and not counted against the metadata limit.
        """
        raise NotImplementedError

    def page_clause(self, query: ListQuery) -> str:
        return "" if query.per_page is None else " LIMIT :limit OFFSET :offset"

    def limit_clause(self) -> str:
        """The clause keeping the first ``:limit`` rows of an ordered select."""
        return " LIMIT :limit"

    def id_order(self, column: str = "id") -> str:
        """``column`` (an id) compared and sorted by code point, the byte order of its UTF-8, on every backend.

        SQLite's default ``BINARY`` collation already is; PostgreSQL says ``COLLATE "C"``; Oracle
        sets ``NLS_SORT``/``NLS_COMP`` to ``BINARY`` for each session.
        """
        return column

    def lock_clause(self, lock: bool) -> str:
        return " FOR UPDATE" if lock and self.row_locks else ""

    def merge_statement(self, target: ScopeTarget, patch: dict[str, Any], now: datetime) -> Statement | None:
        """One statement merging ``patch`` into working memory and returning the stored text, if the database can.

        A thread merge that changes no row (no such thread, another owner, or stored working memory that is
        not text) is decided again under a row lock, which raises the error.
        """
        return None

    def ddl(self) -> list[str]:
        """Statements creating the tables, indexes (and functions) when missing; idempotent."""
        raise NotImplementedError

    # -- column lists --------------------------------------------------------------------

    def resource_columns(self) -> str:
        times = ", ".join(self.time_select(c) for c in ("createdAt", "updatedAt"))
        return f'id, "workingMemory", {self.json_select("metadata")}, {times}'

    def thread_columns(self) -> str:
        times = ", ".join(self.time_select(c) for c in ("createdAt", "updatedAt"))
        return f'id, "resourceId", title, {self.json_select("metadata")}, {times}'

    def _insert(self, table: str, fields: Sequence[tuple[str, str]]) -> str:
        columns = ", ".join(column for column, _ in fields)
        values = ", ".join(value for _, value in fields)
        return f"INSERT INTO {table} AS t ({columns}) VALUES ({values})"

    def _stamps(self, *pairs: tuple[str, str]) -> list[tuple[str, str]]:
        return [item for column, name in pairs for item in self.time_assignments(column, name)]

    def _params(self, record: Resource | Thread) -> dict[str, Any]:
        return {
            "id": record.id,
            "metadata": None if record.metadata is None else dump_json(record.metadata),
            "created_at": self.time_value(record.created_at),
            "updated_at": self.time_value(record.updated_at),
        }

    # -- resources -----------------------------------------------------------------------

    def _by_id(self, columns: str, table: str, *, lock: bool) -> str:
        return f"SELECT {columns} FROM {table} WHERE id = :id{self.lock_clause(lock)}"

    def _select_by_id(self, name: str, columns: Callable[[], str], table: str, record_id: str, lock: bool) -> Statement:
        """``SELECT columns() FROM table WHERE id = :id`` (row-locked if ``lock``), its SQL built once per ``name``."""
        key = (name, "lock" if lock else "")
        try:
            sql = self._sql[key]
        except KeyError:
            sql = self._by_id(columns(), table, lock=lock)
            self._sql[key] = sql
        return Statement(sql, {"id": record_id})

    def select_resource(self, resource_id: str, *, lock: bool = False) -> Statement:
        return self._select_by_id("select_resource", self.resource_columns, self.resources, resource_id, lock)

    def _resource_fields(self) -> list[tuple[str, str]]:
        base = [("id", ":id"), ('"workingMemory"', ":working_memory"), ("metadata", self.json_param("metadata"))]
        return base + self._stamps(("createdAt", "created_at"), ("updatedAt", "updated_at"))

    def upsert_resource(self, resource: Resource) -> Statement:
        """Create the resource or replace it whole."""
        fields = self._resource_fields()
        sets = ", ".join(f"{column} = excluded.{column}" for column, _ in fields[1:])
        sql = f"{self._insert(self.resources, fields)} ON CONFLICT (id) DO UPDATE SET {sets}"
        return Statement(sql, {**self._params(resource), "working_memory": resource.working_memory})

    def insert_missing_resource(self, resource_id: str, now: datetime) -> Statement:
        """Create an empty resource unless it exists (so a row lock can be taken on it)."""
        sql = f"{self._insert(self.resources, self._resource_fields())} ON CONFLICT (id) DO NOTHING"
        stamp = self.time_value(now)
        return Statement(
            sql, {"id": resource_id, "working_memory": None, "metadata": None, "created_at": stamp, "updated_at": stamp}
        )

    def update_resource(
        self,
        resource_id: str,
        working_memory: str | Unset | None,
        metadata: dict[str, Any] | Unset | None,
        now: datetime,
    ) -> Statement:
        """One statement for ``update_resource`` (only if :attr:`native_shallow_merge`); returns the row."""
        fields = self._resource_fields()
        new_metadata = None if isinstance(metadata, Unset) or metadata is None else dump_json(metadata)
        # No metadata: the column is not assigned (a CASE keeping it would mix its type with the merge's).
        merged = "" if new_metadata is None else f"metadata = {self.shallow_merge('t.metadata', 'excluded.metadata')}, "
        stamps = ", ".join(f"{c} = excluded.{c}" for c, _ in self._stamps(("updatedAt", "updated_at")))
        sql = (
            f"{self._insert(self.resources, fields)} ON CONFLICT (id) DO UPDATE SET "
            '"workingMemory" = CASE WHEN :set_working_memory THEN excluded."workingMemory" '
            f'ELSE t."workingMemory" END, {merged}{stamps} '
            f"RETURNING {self.resource_columns()}"
        )
        stamp = self.time_value(now)
        return Statement(
            sql,
            {
                "id": resource_id,
                "working_memory": None if isinstance(working_memory, Unset) else working_memory,
                "set_working_memory": not isinstance(working_memory, Unset),
                "metadata": new_metadata,
                "created_at": stamp,
                "updated_at": stamp,
            },
        )

    # -- threads -------------------------------------------------------------------------

    def select_thread(self, thread_id: str, *, lock: bool = False) -> Statement:
        return self._select_by_id("select_thread", self.thread_columns, self.threads, thread_id, lock)

    def _thread_fields(self) -> list[tuple[str, str]]:
        return [
            ("id", ":id"),
            ('"resourceId"', ":resource_id"),
            ("title", ":title"),
            ("metadata", self.json_param("metadata")),
            *self._stamps(("createdAt", "created_at"), ("updatedAt", "updated_at")),
        ]

    def _thread_params(self, thread: Thread) -> dict[str, Any]:
        return {**self._params(thread), "resource_id": thread.resource_id, "title": thread.title}

    def create_thread(self, thread: Thread) -> Statement:
        """Insert the thread unless the id exists, in one statement; its row count (1 or 0) says which.

        No ``RETURNING``: the row stored is the thread as given, so that is what
        ``create_thread`` returns. (SQLite's row count leaves out what the count
        triggers change; PostgreSQL's counts the statement's own rows.)
        """
        return Statement(self._create_thread_sql, self._thread_params(thread))

    @functools.cached_property
    def _create_thread_sql(self) -> str:
        return f"{self._insert(self.threads, self._thread_fields())} ON CONFLICT (id) DO NOTHING"

    def save_thread(self, thread: Thread, now: datetime) -> Statement:
        """Create, or replace title and metadata when the owner matches; no row comes back for another owner."""
        stamps = ", ".join(f"{c} = {v}" for c, v in self._stamps(("updatedAt", "now")))
        sql = (
            f"{self._insert(self.threads, self._thread_fields())} ON CONFLICT (id) DO UPDATE SET "
            f"title = excluded.title, metadata = excluded.metadata, {stamps} "
            f'WHERE t."resourceId" = excluded."resourceId" RETURNING {self.thread_columns()}'
        )
        return Statement(sql, {**self._thread_params(thread), "now": self.time_value(now)})

    def write_thread(self, thread: Thread) -> Statement:
        """Store the title, metadata and ``updated_at`` of an existing thread."""
        stamps = ", ".join(f"{c} = {v}" for c, v in self._stamps(("updatedAt", "updated_at")))
        metadata = self.json_param("metadata")
        sql = f"UPDATE {self.threads} SET title = :title, metadata = {metadata}, {stamps} WHERE id = :id"
        params = {**self._params(thread), "title": thread.title}
        del params["created_at"]
        return Statement(sql, params)

    def update_thread(
        self,
        thread_id: str,
        title: str | Unset,
        metadata: dict[str, Any] | Unset | None,
        now: datetime,
        owner: str | None = None,
    ) -> Statement:
        """One statement for ``update_thread`` (only if :attr:`native_shallow_merge`); returns the row.

        With ``owner``, only that resource's thread matches (no row: missing, or another's).
        """
        new_metadata = None if isinstance(metadata, Unset) or metadata is None else dump_json(metadata)
        # No metadata: the column is not assigned (a CASE keeping it would mix its type with the merge's).
        merged = (
            ""
            if new_metadata is None
            else f"metadata = {self.shallow_merge('metadata', self.json_param('metadata'), thread=True)}, "
        )
        stamps = ", ".join(f"{c} = {v}" for c, v in self._stamps(("updatedAt", "now")))
        sql = (
            f"UPDATE {self.threads} SET title = CASE WHEN :set_title THEN :title ELSE title END, "
            f"{merged}{stamps} WHERE id = :id{self._owner_clause(owner)} RETURNING {self.thread_columns()}"
        )
        params = {
            **self._owner_param(owner),
            "id": thread_id,
            "set_title": not isinstance(title, Unset),
            "title": None if isinstance(title, Unset) else title,
            "now": self.time_value(now),
        }
        return Statement(sql, params if new_metadata is None else {**params, "metadata": new_metadata})

    def replace_thread(self, thread: Thread) -> Statement:
        """Title, metadata and both timestamps as given, of the thread with this id and this owner (row count)."""
        stamps = ", ".join(
            f"{c} = {v}" for c, v in self._stamps(("createdAt", "created_at"), ("updatedAt", "updated_at"))
        )
        metadata = self.json_param("metadata")
        sql = (
            f"UPDATE {self.threads} SET title = :title, metadata = {metadata}, {stamps} "
            'WHERE id = :id AND "resourceId" = :resource_id'
        )
        return Statement(sql, self._thread_params(thread))

    # -- every record: pages and bulk inserts ---------------------------------------------

    def _record_page(self, kind: str, columns: str, table: str, after: str | None, limit: int) -> Statement:
        key = (kind, "first" if after is None else "after")
        try:
            sql = self._sql[key]
        except KeyError:
            where = "" if after is None else f" WHERE {self.id_order()} > :after"
            sql = f"SELECT {columns} FROM {table}{where} ORDER BY {self.id_order()}{self.limit_clause()}"
            self._sql[key] = sql
        return Statement(sql, {"limit": limit} if after is None else {"after": after, "limit": limit})

    def resource_page(self, after: str | None, limit: int) -> Statement:
        """At most ``limit`` resources with ids after ``after`` (keyset), ascending by :meth:`id_order`."""
        return self._record_page("resource_page", self.resource_columns(), self.resources, after, limit)

    def thread_page(self, after: str | None, limit: int) -> Statement:
        """At most ``limit`` threads with ids after ``after`` (keyset), ascending by :meth:`id_order`."""
        return self._record_page("thread_page", self.thread_columns(), self.threads, after, limit)

    @staticmethod
    def _rows_of_values(fields: Sequence[tuple[str, str]], count: int) -> tuple[str, str]:
        """``(columns, VALUES rows)`` for ``count`` rows of ``fields``, each row's placeholders ``:name_INDEX``."""
        return ", ".join(column for column, _ in fields), _values_rows(tuple(value for _, value in fields), count)

    @staticmethod
    def _numbered(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """The parameters of :meth:`_rows_of_values`: each row's values named ``name_INDEX``."""
        return {f"{name}_{index}": value for index, row in enumerate(rows) for name, value in row.items()}

    def _insert_many(
        self, table: str, fields: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]
    ) -> Statement:
        """One multi-row ``INSERT … ON CONFLICT (id) DO NOTHING RETURNING id``: the ids it inserted come back."""
        columns, values = self._rows_of_values(fields, len(rows))
        sql = f"INSERT INTO {table} AS t ({columns}) VALUES {values} ON CONFLICT (id) DO NOTHING RETURNING id"
        return Statement(sql, self._numbered(rows))

    def insert_resources(self, resources: Sequence[Resource]) -> Statement:
        """Insert the absent resources in one statement; the inserted ids come back."""
        rows = [{**self._params(r), "working_memory": r.working_memory} for r in resources]
        return self._insert_many(self.resources, self._resource_fields(), rows)

    def insert_threads(self, threads: Sequence[Thread]) -> Statement:
        """Insert the absent threads in one statement (a present id is left alone); the inserted ids come back."""
        return self._insert_many(self.threads, self._thread_fields(), [self._thread_params(t) for t in threads])

    def delete_thread(self, thread_id: str, owner: str | None = None) -> Statement:
        """Delete the thread (with ``owner``: only while that resource owns it); the row count tells."""
        sql = f"DELETE FROM {self.threads} WHERE id = :id{self._owner_clause(owner)}"
        return Statement(sql, {"id": thread_id, **self._owner_param(owner)})

    @staticmethod
    def _owner_clause(owner: str | None) -> str:
        return "" if owner is None else ' AND "resourceId" = :owner'

    @staticmethod
    def _owner_param(owner: str | None) -> dict[str, Any]:
        return {} if owner is None else {"owner": owner}

    def list_threads(self, query: ListQuery) -> Statement:
        """One page, each row ending with the resource's thread count (:meth:`thread_count`)."""
        key = ("list_threads", query.order_by, query.direction, "all" if query.per_page is None else "page")
        try:
            sql = self._sql[key]
        except KeyError:
            order = _ORDER_COLUMNS[query.order_by]
            direction = "DESC" if query.direction == "desc" else "ASC"
            sql = (
                f"SELECT {self.thread_columns()}, {self.thread_count(':resource_id')} AS total "
                f'FROM {self.threads} WHERE "resourceId" = :resource_id '
                f"ORDER BY {order} {direction}, id {direction}{self.page_clause(query)}"
            )
            self._sql[key] = sql
        if query.per_page is None:
            return Statement(sql, {"resource_id": query.resource_id})
        offset = query.page * query.per_page
        return Statement(
            sql,
            {"resource_id": query.resource_id, "limit": min(query.per_page, MAX_ROWS), "offset": min(offset, MAX_ROWS)},
        )

    def thread_count(self, resource_id: str) -> str:
        """SQL for how many threads the resource bound as ``resource_id`` (a ``:name``) has, exactly.

        The kept count where the dialect keeps them (:attr:`kept_counts`), else
        a scalar ``count(*)`` subquery (a range scan of the resource's threads).
        """
        if self.kept_counts and self.counts_present:
            return f'COALESCE((SELECT n FROM {self.counts} WHERE "resourceId" = {resource_id}), 0)'
        return f'(SELECT count(*) FROM {self.threads} WHERE "resourceId" = {resource_id})'

    def count_threads(self, resource_id: str) -> Statement:
        if self.kept_counts and self.counts_present:
            sql = f"SELECT {self.thread_count(':resource_id')}"
        else:  # (a FROM-less SELECT is not everywhere: Oracle before 23ai)
            sql = f'SELECT count(*) FROM {self.threads} WHERE "resourceId" = :resource_id'
        return Statement(sql, {"resource_id": resource_id})

    # -- history: versions of working memory, and erasing a user ----------------------------
    # Keyed (resource_id, scope, memory_id, version), the primary key: the newest number of a working memory,
    # a page of its versions and every version of a resource are index range scans.

    def time_param(self, name: str) -> str:
        """SQL that stores the timestamp bound as ``:name`` (:meth:`time_value`) in ``changed_at``."""
        return f":{name}"

    def version_columns(self) -> str:
        """The columns of a version row, for :func:`~workmem.adapters.sql.rows.version_from_row`."""
        return "version, content, changed_at, kind, source"

    @staticmethod
    def _key_params(key: HistoryKey) -> dict[str, Any]:
        return {"resource_id": key.resource_id, "scope": key.scope, "memory_id": key.memory_id}

    _KEY = "resource_id = :resource_id AND scope = :scope AND memory_id = :memory_id"

    def record_version(
        self, key: HistoryKey, content: str | None, now: datetime, recording: Recording
    ) -> list[Statement]:
        """What writes the version ``recording`` makes of ``key``, in the transaction holding the row's lock.

        The version is numbered one above the newest stored (the lock makes that read exact), then the
        versions under the retention bound are dropped (see :func:`~workmem.history.kept_versions`).
        """
        params = {
            **self._key_params(key),
            "working_memory": content,
            "changed_at": self.time_value(now),
            "kind": recording.kind,
            "source": recording.source_text,
        }
        insert = (
            f"INSERT INTO {self.history} (resource_id, scope, memory_id, version, content, changed_at, kind, source) "
            f"VALUES (:resource_id, :scope, :memory_id, (SELECT COALESCE(MAX(version), 0) + 1 FROM {self.history} "
            f"WHERE {self._KEY}), :working_memory, {self.time_param('changed_at')}, :kind, :source)"
        )
        if recording.keep is None:
            return [Statement(insert, params)]
        prune = (
            f"DELETE FROM {self.history} WHERE {self._KEY} AND version <= "
            f"(SELECT MAX(version) FROM {self.history} WHERE {self._KEY}) - :keep"
        )
        return [Statement(insert, params), Statement(prune, {**self._key_params(key), "keep": recording.keep})]

    def select_versions(self, key: HistoryKey, limit: int, before: int | None) -> Statement:
        """At most ``limit`` versions of ``key`` numbered below ``before`` (``None``: all), newest first."""
        below = "" if before is None else " AND version < :before"
        sql = (
            f"SELECT {self.version_columns()} FROM {self.history} WHERE {self._KEY}{below} "
            f"ORDER BY version DESC{self.limit_clause()}"
        )
        params = {**self._key_params(key), "limit": min(limit, MAX_ROWS)}
        return Statement(sql, params if before is None else {**params, "before": before})

    def select_versioned_keys(self, after: HistoryKey | None, limit: int) -> Statement:
        """At most ``limit`` keys of working memories that have versions, after ``after`` (``None``: from the first).

        In the primary key's order (resource, scope, memory) as the database sorts it, so that a
        copy walks the versions page by page on that index, without reading every record.
        """
        params: dict[str, Any] = {"limit": min(limit, MAX_ROWS)}
        where = ""
        if after is not None:
            where = (
                " WHERE resource_id > :resource_id OR (resource_id = :resource_id AND "
                "(scope > :scope OR (scope = :scope AND memory_id > :memory_id)))"
            )
            params.update(self._key_params(after))
        sql = (
            f"SELECT DISTINCT resource_id, scope, memory_id FROM {self.history}{where} "
            f"ORDER BY resource_id, scope, memory_id{self.limit_clause()}"
        )
        return Statement(sql, params)

    def _version_fields(self) -> list[tuple[str, str]]:
        return [
            ("resource_id", ":resource_id"),
            ("scope", ":scope"),
            ("memory_id", ":memory_id"),
            ("version", ":version"),
            ("content", ":working_memory"),
            ("changed_at", self.time_param("changed_at")),
            ("kind", ":kind"),
            ("source", ":source"),
        ]

    def version_params(self, version: MemoryVersion) -> dict[str, Any]:
        return {
            **self._key_params(version.key),
            "version": version.version,
            "working_memory": version.content,
            "changed_at": self.time_value(version.changed_at),
            "kind": version.kind,
            "source": None if version.source is None else dump_json(version.source),
        }

    def insert_versions(self, versions: Sequence[MemoryVersion]) -> Statement:
        """Insert the versions whose (key, number) is absent, in one statement; its row count is how many."""
        columns, values = self._rows_of_values(self._version_fields(), len(versions))
        sql = (
            f"INSERT INTO {self.history} ({columns}) VALUES {values} "
            "ON CONFLICT (resource_id, scope, memory_id, version) DO NOTHING"
        )
        return Statement(sql, self._numbered(self.version_params(version) for version in versions))

    def delete_versions(self, key: HistoryKey) -> Statement:
        """Every version of ``key`` (a deleted thread's)."""
        return Statement(f"DELETE FROM {self.history} WHERE {self._KEY}", self._key_params(key))

    def lock_threads_of(self, resource_id: str) -> Statement:
        """The ids of the resource's threads, each row locked (``FOR UPDATE``; SQLite's transaction locks all)."""
        sql = f'SELECT id FROM {self.threads} WHERE "resourceId" = :resource_id ORDER BY id{self.lock_clause(True)}'
        return Statement(sql, {"resource_id": resource_id})

    def delete_threads_of(self, resource_id: str, thread_ids: Sequence[str]) -> Statement:
        """Delete those threads of the resource (at most 500 ids: Oracle takes 1000 in a list)."""
        marks = ", ".join(f":t{index}" for index in range(len(thread_ids)))
        sql = f'DELETE FROM {self.threads} WHERE "resourceId" = :resource_id AND id IN ({marks})'
        return Statement(sql, {"resource_id": resource_id, **{f"t{i}": t for i, t in enumerate(thread_ids)}})

    def delete_resource_row(self, resource_id: str) -> Statement:
        return Statement(f"DELETE FROM {self.resources} WHERE id = :id", {"id": resource_id})

    def delete_resource_versions(self, resource_id: str) -> Statement:
        """Every version of the resource, both scopes, but those of threads it owns now (created during the erase).

        Run after the resource's threads are deleted: a thread created meanwhile survives whole, with its history.
        """
        sql = (
            f"DELETE FROM {self.history} WHERE resource_id = :resource_id AND (scope = 'resource' OR memory_id "
            f'NOT IN (SELECT id FROM {self.threads} WHERE "resourceId" = :resource_id))'
        )
        return Statement(sql, {"resource_id": resource_id})
