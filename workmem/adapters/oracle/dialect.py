"""The Oracle dialect: Mastra's Oracle tables, ``MERGE`` upserts, UTC text timestamps, CLOB/JSON metadata.

Tables are those of ``@mastra/oracledb``: ``MASTRA_RESOURCES`` and
``MASTRA_THREADS`` (unquoted, so upper case), with unquoted ``id``/``title``/
``metadata`` and quoted camelCase ``"resourceId"``, ``"workingMemory"``,
``"createdAt"``, ``"updatedAt"``; ``metadata`` is Oracle's native ``JSON`` from
21c on and ``CLOB CHECK (metadata IS JSON)`` on 19c. Oracle has no
``CREATE TABLE IF NOT EXISTS`` before 23ai, so :meth:`OracleDialect.ddl` is
run with ORA-00955/ORA-01408 ("already exists") taken as success.

Where Oracle differs from the core's SQL:

* upserts are ``MERGE INTO … USING (SELECT … FROM dual)``; a ``MERGE`` returns
  no rows, so :meth:`OracleDialect.save_thread` is judged by its row count (0:
  the id exists under another owner, whom the update branch's ``WHERE`` refused);
* timestamps are bound as UTC text and converted with ``TO_TIMESTAMP_TZ``, and
  read back through ``SYS_EXTRACT_UTC`` (naive UTC), so neither the session time
  zone nor how the driver binds a ``datetime`` matters;
* pages are ``OFFSET … ROWS FETCH NEXT … ROWS ONLY`` (12c+);
* ``''`` is ``NULL`` in Oracle: like Mastra, an empty title or working memory is
  stored as :data:`EMPTY_STRING_SENTINEL` (:meth:`OracleDialect.render` encodes the
  ``title`` and ``working_memory`` parameters, :func:`decode_row` decodes the
  ``TITLE`` and ``workingMemory`` columns);
* merges lock the row (``SELECT … FOR UPDATE``) and run in Python: Oracle's
  ``JSON_MERGEPATCH`` would rewrite numbers, replace a stored non-object instead
  of refusing it, and cannot check the merged document's limits.

No I/O and no driver import here; every value is a bind, and the only text
spliced into SQL is a validated table prefix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Final

from workmem.adapters.sql.dialect import HISTORY, RESOURCES, THREADS, Dialect, Statement, placeholder_names
from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    BackendUnavailableError,
    ValidationError,
    WorkmemError,
)
from workmem.history import MemoryVersion
from workmem.hooks import ListQuery
from workmem.records import Resource, Thread
from workmem.timestamps import to_iso

__all__ = [
    "ALREADY_EXISTS",
    "ATTEMPTS",
    "CLOB_PARAMS",
    "EMPTY_STRING_SENTINEL",
    "ESCAPED_PREFIX",
    "INVALID_DATATYPE",
    "READ_ONLY",
    "RESOURCE_BUSY",
    "SESSION_SETUP",
    "TIMESTAMP_FORMAT",
    "OracleDialect",
    "decode_row",
    "decode_text",
    "encode_text",
    "encode_timestamp",
    "error_kind",
    "is_connection_error",
    "is_session_dead",
    "is_unique_violation",
    "oracle_error_code",
    "runs_again",
]

EMPTY_STRING_SENTINEL: Final = "__MASTRA_ORACLE_EMPTY_STRING__"
"""What Mastra stores for ``''`` (Oracle would store ``NULL``)."""
ESCAPED_PREFIX: Final = "__MASTRA_ORACLE_ESCAPED__"
"""What Mastra puts before a real value that starts with either marker."""
TIMESTAMP_FORMAT: Final = "YYYY-MM-DD HH24:MI:SS.FF3 TZH:TZM"
"""The ``TO_TIMESTAMP_TZ`` format of the timestamp text :meth:`OracleDialect.time_value` binds."""
CLOB_PARAMS: Final = frozenset({"working_memory", "metadata", "source"})
"""Parameters bound as CLOB: past 32 KiB a string bind is a LONG, which ``SELECT … FROM dual`` refuses (ORA-01461)."""
READ_ONLY: Final = "SET TRANSACTION READ ONLY"
"""Opens a transaction whose queries all read one snapshot."""
SESSION_SETUP: Final = "ALTER SESSION SET NLS_SORT = BINARY NLS_COMP = BINARY"
"""Run once per pooled session: ids compare and sort by code point, as on every backend."""
ALREADY_EXISTS: Final = frozenset({955, 1408})
"""ORA-00955 (name already used by an existing object), ORA-01408 (such column list already indexed)."""
INVALID_DATATYPE: Final = 902
"""ORA-00902: no ``JSON`` type (a 21c+ server whose ``COMPATIBLE`` is below 20)."""
RESOURCE_BUSY: Final = 54
"""ORA-00054: DDL met a lock held by another session (worth a short retry)."""
ATTEMPTS: Final = 3
"""How often one statement or transaction runs at most (see :func:`runs_again`)."""

_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,29}")
_TEXT_COLUMNS: Final = frozenset({"TITLE", "workingMemory"})


# -- values ------------------------------------------------------------------------


def encode_text(value: str | None) -> str | None:
    """A title or working memory as Mastra stores it: ``''`` becomes the sentinel."""
    if value is None:
        return None
    if value == "":
        return EMPTY_STRING_SENTINEL
    if value.startswith((EMPTY_STRING_SENTINEL, ESCAPED_PREFIX)):
        return ESCAPED_PREFIX + value
    return value


def decode_text(value: object) -> str | None:
    """Inverse of :func:`encode_text`."""
    if value is None:
        return None
    text = str(value)
    if text == EMPTY_STRING_SENTINEL:
        return ""
    if text.startswith(ESCAPED_PREFIX):
        return text[len(ESCAPED_PREFIX) :]
    return text


def decode_row(columns: Sequence[str], row: Sequence[Any]) -> tuple[Any, ...]:
    """``row`` with its ``TITLE``/``workingMemory`` columns decoded; a ``NULL`` title (older Mastra rows) is ``''``."""
    decoded = list(row)
    for index, name in enumerate(columns):
        if name in _TEXT_COLUMNS:
            text = decode_text(decoded[index])
            decoded[index] = "" if text is None and name == "TITLE" else text
    return tuple(decoded)


def encode_timestamp(value: datetime) -> str:
    """``2025-01-02 03:04:05.678 +00:00``: UTC text for ``TO_TIMESTAMP_TZ(:x, TIMESTAMP_FORMAT)``."""
    return to_iso(value)[:-1].replace("T", " ") + " +00:00"  # four year digits, as to_iso writes them


# -- statements --------------------------------------------------------------------


class OracleDialect(Dialect):
    """Oracle Database 19c and later, through python-oracledb (``:name`` binds)."""

    name: ClassVar[str] = "oracle"
    begin_write: ClassVar[str] = ""
    """Oracle starts a transaction with the first change; there is nothing to send."""

    def __init__(self, table_prefix: str = "", *, native_json: bool = True) -> None:
        super().__init__(None)
        if table_prefix and not _PREFIX.fullmatch(table_prefix):
            raise ValidationError(
                f"table_prefix must be a letter then at most 29 letters, digits or '_', not {table_prefix!r}"
            )
        self.table_prefix = table_prefix.upper()
        self.native_json = native_json
        """``metadata`` is the ``JSON`` type (21c+), not ``CLOB CHECK (metadata IS JSON)``."""
        self.resources = f"{self.table_prefix}{RESOURCES}".upper()
        self.threads = f"{self.table_prefix}{THREADS}".upper()
        self.history = f"{self.table_prefix}{HISTORY}".upper()
        self.index = f"{self.table_prefix}MASTRA_THREADS_RESOURCE_CREATED_IDX_IDX"
        """Named as Mastra names it, so whichever side comes second sees ORA-00955."""

    # hooks

    def render(self, statement: Statement) -> tuple[str, Any]:
        """``:name`` binds as a dict of the placeholders present, titles and working memory encoded."""
        params = {name: statement.params[name] for name in placeholder_names(statement.sql)}
        for name in ("title", "working_memory"):
            if name in params:
                params[name] = encode_text(params[name])
        return statement.sql, params

    def json_select(self, column: str) -> str:
        return f"JSON_SERIALIZE({column} RETURNING CLOB)" if self.native_json else column

    def time_value(self, value: datetime) -> Any:
        return encode_timestamp(value)

    def time_select(self, column: str) -> str:
        return f'SYS_EXTRACT_UTC("{column}")'

    def time_assignments(self, column: str, name: str) -> list[tuple[str, str]]:
        return [(f'"{column}"', f"TO_TIMESTAMP_TZ(:{name}, '{TIMESTAMP_FORMAT}')")]

    def time_param(self, name: str) -> str:
        return self._ts(name)

    def version_columns(self) -> str:
        # content is working memory: '' is stored as Mastra's sentinel (the parameter is working_memory), and
        # named "workingMemory" here so that decode_row decodes it back.
        return 'version, content AS "workingMemory", SYS_EXTRACT_UTC(changed_at), kind, source'

    def page_clause(self, query: ListQuery) -> str:
        return "" if query.per_page is None else " OFFSET :offset ROWS FETCH NEXT :limit ROWS ONLY"

    def limit_clause(self) -> str:
        # ids compare and sort BINARY: SESSION_SETUP sets NLS_SORT and NLS_COMP for every pooled session
        return " FETCH FIRST :limit ROWS ONLY"

    # DDL

    def ddl(self) -> list[str]:
        """The two tables and the index; run them taking :data:`ALREADY_EXISTS` as success."""
        metadata = "JSON" if self.native_json else "CLOB CHECK (metadata IS JSON)"
        stamps = '"createdAt" TIMESTAMP WITH TIME ZONE NOT NULL, "updatedAt" TIMESTAMP WITH TIME ZONE NOT NULL'
        return [
            f'CREATE TABLE {self.resources} (id VARCHAR2(512) PRIMARY KEY, "workingMemory" CLOB, '
            f"metadata {metadata}, {stamps})",
            f'CREATE TABLE {self.threads} (id VARCHAR2(512) PRIMARY KEY, "resourceId" VARCHAR2(512) NOT NULL, '
            f"title VARCHAR2(1024), metadata {metadata}, {stamps})",
            f'CREATE INDEX {self.index} ON {self.threads} ("resourceId", "createdAt")',
            # workmem's history of working memory (connect(url, history=...)), beside Mastra's tables
            f"CREATE TABLE {self.history} (resource_id VARCHAR2(512) NOT NULL, scope VARCHAR2(8) NOT NULL, "
            "memory_id VARCHAR2(512) NOT NULL, version NUMBER(10) NOT NULL, content CLOB, "
            "changed_at TIMESTAMP WITH TIME ZONE NOT NULL, kind VARCHAR2(16) NOT NULL, source CLOB, "
            "PRIMARY KEY (resource_id, scope, memory_id, version))",
        ]

    def metadata_types(self) -> Statement:
        """``(table, data type)`` of both ``metadata`` columns as they really are (tables may predate us)."""
        return Statement(
            "SELECT table_name, data_type FROM user_tab_columns "
            "WHERE table_name IN (:resources_table, :threads_table) AND column_name = 'METADATA'",
            {"resources_table": self.resources, "threads_table": self.threads},
        )

    def drop_tables(self) -> list[str]:
        """For tests that made prefixed tables (the index goes with its table)."""
        return [
            f"DROP TABLE {self.history} PURGE",
            f"DROP TABLE {self.threads} PURGE",
            f"DROP TABLE {self.resources} PURGE",
        ]

    # writes

    def _ts(self, name: str) -> str:
        return self.time_assignments("", name)[0][1]

    def upsert_resource(self, resource: Resource) -> Statement:
        """Create the resource or replace it whole."""
        sql = (
            f"MERGE INTO {self.resources} t USING (SELECT :id AS id, :working_memory AS wm, "
            f"{self.json_param('metadata')} AS md, {self._ts('created_at')} AS ca, {self._ts('updated_at')} AS ua "
            "FROM dual) s ON (t.id = s.id) "
            'WHEN MATCHED THEN UPDATE SET t."workingMemory" = s.wm, t.metadata = s.md, '
            't."createdAt" = s.ca, t."updatedAt" = s.ua '
            'WHEN NOT MATCHED THEN INSERT (id, "workingMemory", metadata, "createdAt", "updatedAt") '
            "VALUES (s.id, s.wm, s.md, s.ca, s.ua)"
        )
        return Statement(sql, {**self._params(resource), "working_memory": resource.working_memory})

    def insert_missing_resource(self, resource_id: str, now: datetime) -> Statement:
        """Create an empty resource unless it exists; a concurrent creator's row counts as existing.

        The ``MERGE`` of the session that loses a race to insert the same id
        waits for the winner and then raises ORA-00001 (``DUP_VAL_ON_INDEX``),
        which the block takes as done: the row exists and can be locked.
        """
        sql = (
            f"BEGIN MERGE INTO {self.resources} t USING (SELECT :id AS id, {self._ts('now')} AS now_ts FROM dual) s "
            'ON (t.id = s.id) WHEN NOT MATCHED THEN INSERT (id, "createdAt", "updatedAt") '
            "VALUES (s.id, s.now_ts, s.now_ts); EXCEPTION WHEN DUP_VAL_ON_INDEX THEN NULL; END;"
        )
        return Statement(sql, {"id": resource_id, "now": self.time_value(now)})

    def create_resource(self, resource: Resource) -> Statement:
        """Insert the resource as given unless the id exists; row count 1: inserted, 0: present (a ``MERGE``).

        Run with ``executemany`` over a batch (array DML): one round trip, one row count per resource.
        """
        sql = (
            f"MERGE INTO {self.resources} t USING (SELECT :id AS id, :working_memory AS wm, "
            f"{self.json_param('metadata')} AS md, {self._ts('created_at')} AS ca, {self._ts('updated_at')} AS ua "
            "FROM dual) s ON (t.id = s.id) "
            'WHEN NOT MATCHED THEN INSERT (id, "workingMemory", metadata, "createdAt", "updatedAt") '
            "VALUES (s.id, s.wm, s.md, s.ca, s.ua)"
        )
        return Statement(sql, {**self._params(resource), "working_memory": resource.working_memory})

    def create_version(self, version: MemoryVersion) -> Statement:
        """Insert the version unless its (key, number) is present; row count 1: inserted, 0: present (a ``MERGE``).

        Run with ``executemany`` over a batch (array DML), as :meth:`create_resource`.
        """
        sql = (
            f"MERGE INTO {self.history} t USING (SELECT :resource_id AS rid, :scope AS sc, :memory_id AS mid, "
            ":version AS v FROM dual) s "
            "ON (t.resource_id = s.rid AND t.scope = s.sc AND t.memory_id = s.mid AND t.version = s.v) "
            "WHEN NOT MATCHED THEN INSERT (resource_id, scope, memory_id, version, content, changed_at, kind, source) "
            f"VALUES (s.rid, s.sc, s.mid, s.v, :working_memory, {self._ts('changed_at')}, :kind, :source)"
        )
        return Statement(sql, self.version_params(version))

    def insert_versions(self, versions: Sequence[MemoryVersion]) -> Statement:
        raise NotImplementedError("Oracle inserts versions with create_version, one MERGE per version (array DML)")

    def create_thread(self, thread: Thread) -> Statement:
        """Insert unless the id exists; returns no rows (a ``MERGE`` with no update branch).

        Row count 1: inserted. Row count 0: the id exists. ORA-00001: a
        concurrent create of the same id won; running the statement again
        decides (row count 0).
        """
        sql = (
            f"MERGE INTO {self.threads} t USING (SELECT :id AS id, :resource_id AS rid, :title AS title, "
            f"{self.json_param('metadata')} AS md, {self._ts('created_at')} AS ca, {self._ts('updated_at')} AS ua "
            "FROM dual) s ON (t.id = s.id) "
            'WHEN NOT MATCHED THEN INSERT (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
            "VALUES (s.id, s.rid, s.title, s.md, s.ca, s.ua)"
        )
        return Statement(sql, self._thread_params(thread))

    def save_thread(self, thread: Thread, now: datetime) -> Statement:
        """Create, or replace title and metadata where the owner matches; returns no rows (a ``MERGE``).

        Row count 1: created or replaced. Row count 0: the id exists under
        another owner, refused by the update branch's ``WHERE`` (the owner
        never changes, so this is no stale read). ORA-00001: a concurrent
        create of the same id won; running the statement again decides.
        """
        sql = (
            f"MERGE INTO {self.threads} t USING (SELECT :id AS id, :resource_id AS rid, :title AS title, "
            f"{self.json_param('metadata')} AS md, {self._ts('created_at')} AS ca, {self._ts('updated_at')} AS ua, "
            f"{self._ts('now')} AS now_ts FROM dual) s ON (t.id = s.id) "
            'WHEN MATCHED THEN UPDATE SET t.title = s.title, t.metadata = s.md, t."updatedAt" = s.now_ts '
            'WHERE t."resourceId" = s.rid '
            'WHEN NOT MATCHED THEN INSERT (id, "resourceId", title, metadata, "createdAt", "updatedAt") '
            "VALUES (s.id, s.rid, s.title, s.md, s.ca, s.ua)"
        )
        return Statement(sql, {**self._thread_params(thread), "now": self.time_value(now)})


# -- errors ------------------------------------------------------------------------

_CONNECTION_ORA: Final = frozenset(
    {
        18,  # maximum number of sessions exceeded
        20,  # maximum number of processes exceeded
        1653,  # unable to extend a table (tablespace full)
        1654,  # unable to extend an index (tablespace full)
        4031,  # unable to allocate shared memory
        1033,  # initialization or shutdown in progress
        1034,  # database not available
        1089,  # immediate shutdown in progress
        3113,  # end-of-file on communication channel
        3114,  # not connected
        3135,  # connection lost contact
        12170,  # connect timeout
        12505,  # listener does not know the SID
        12514,  # listener does not know the service
        12516,  # no handler for the service
        12519,  # no appropriate service handler
        12520,  # no handler for the server type
        12528,  # all instances are blocking new connections
        12537,  # connection closed
        12541,  # no listener
        12547,  # lost contact
    }
)
_BUSY_ORA: Final = frozenset(
    {
        54,  # resource busy (NOWAIT)
        60,  # deadlock detected
        4020,  # deadlock while trying to lock an object
        8177,  # cannot serialize access
        30006,  # resource busy (WAIT timeout)
    }
)
_CONNECTION_DPY: Final = frozenset(
    {
        "DPY-1001",  # not connected
        "DPY-4005",  # timed out waiting for a pooled connection
        "DPY-4011",  # the database or network closed the connection
    }
)


def oracle_error_code(exc: BaseException) -> tuple[int, str]:
    """``(ORA number or 0, full code such as "ORA-00001" or "DPY-6005")`` of a python-oracledb error."""
    error = exc.args[0] if exc.args else None
    code = getattr(error, "code", 0)
    full_code = getattr(error, "full_code", "")
    return (code if isinstance(code, int) else 0, full_code if isinstance(full_code, str) else "")


def is_connection_error(code: int, full_code: str) -> bool:
    """Whether the database could not be reached, cannot serve now, or dropped the session (DPY-6xxx: connect).

    A login it refused (ORA-01017 invalid username or password, ORA-28000 account
    locked) is not: retrying it fails the same way.
    """
    return code in _CONNECTION_ORA or full_code in _CONNECTION_DPY or full_code.startswith("DPY-6")


def error_kind(code: int, full_code: str) -> type[WorkmemError]:
    """The workmem class of a python-oracledb error with ``(code, full_code)`` (see :func:`oracle_error_code`).

    :class:`BackendUnavailableError` for :func:`is_connection_error`, :class:`BackendBusyError` for
    a deadlock, a serialization failure or a busy resource, else :class:`BackendRefusedError`.
    """
    if is_connection_error(code, full_code):
        return BackendUnavailableError
    if code in _BUSY_ORA:
        return BackendBusyError
    return BackendRefusedError


def is_unique_violation(code: int, full_code: str) -> bool:
    """ORA-00001: a concurrent insert of the same primary key won."""
    return code == 1 or full_code == "ORA-00001"


def is_session_dead(exc: BaseException) -> bool:
    """python-oracledb's own verdict that the pooled session of ``exc`` can no longer be used."""
    return bool(getattr(exc.args[0] if exc.args else None, "is_session_dead", False))


def runs_again(exc: BaseException, attempt: int, *, read: bool) -> bool:
    """Whether the work that failed with ``exc`` on its ``attempt`` (1-based) runs again, on a new session.

    A write that lost an insert race (ORA-00001) runs again: the winner's row is
    committed by then, and the statement (a ``MERGE``) now decides. A read runs
    again once when its pooled session turned out dead. A write never runs
    again after anything else: it may have run before the session dropped.
    At most :data:`ATTEMPTS` in all.
    """
    if attempt >= ATTEMPTS:
        return False
    if not read:
        return is_unique_violation(*oracle_error_code(exc))
    return attempt == 1 and is_session_dead(exc)
