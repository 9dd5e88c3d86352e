"""The PostgreSQL dialect: Mastra's tables in one schema, jsonb metadata, ``…Z`` timestamptz twins.

Everything that changes a row is one statement: ``||`` is jsonb's shallow
merge, and ``workmem_merge_document`` (plpgsql, created with the tables)
applies an RFC 7396 patch to stored working memory inside the ``UPDATE`` /
``INSERT … ON CONFLICT`` that writes it. Stored text that is not a JSON object
raises SQLSTATE ``WM001`` (a merged document, or merged metadata, over 4 MiB
``WM002``), which aborts the statement with nothing changed. Stored text that
PostgreSQL's ``json`` and Python could read differently (escapes, exponents,
long integers, negative zero, repeated keys, deep nesting) raises ``WM004``
instead, and the merge is redone as a row-locked read-modify-write in Python,
so it gets the same outcome as on every other backend. So is the merge of a large
memory nested deep (over 256 KiB, 4 levels or more; or such a patch holding a
null): the SQL merge walks the patch level by level, one statement for all the
objects of a level, but reads every object it walks in full once per level above
it, while Python reads the document once.

A page's ``total`` is read from ``workmem_thread_counts`` (one row per
resource), kept exact by triggers on ``mastra_threads`` whoever writes the
threads -- workmem or the TypeScript adapter: statement-level ``AFTER
INSERT``/``AFTER DELETE`` triggers add up their transition tables (so a
``COPY`` of many threads costs one update per resource, taken in
``resourceId`` order), a row trigger follows an ``UPDATE`` that moves a thread
to another resource, and ``TRUNCATE`` empties the counts. The counts are
created and filled from the rows already there in the transaction that creates
the triggers (under the DDL advisory lock; ``CREATE TRIGGER`` waits for
writers in flight and holds off new ones until the counts are in). A
thread insert locks its resource's count row until commit, after the thread's
own row, and a statement of many rows locks its count rows in ``resourceId``
order whatever the order of its rows: one-statement writes cannot deadlock on
them.

Why statement-level triggers, although a row-level one is a little cheaper
for a single-row insert: a row trigger writes one count row per thread of a
bulk statement (instead of one per resource), and locks them in row order, so
two bulk inserts listing the same resources in opposite orders deadlock
(``tests/postgres/test_postgres_write_cost.py`` pins both, and fails on that variant).
Most of what the count costs a write is the count row's own upsert, which any
trigger pays. The two indexes Mastra does not have are kept for the reads:
``workmem_threads_resourceid_updatedat_idx`` makes ``order_by="updated_at"``
pages an index range scan (it also makes every thread update, which sets
``updatedAt``, a non-HOT update: each index gets a new entry), and
``workmem_threads_id_c_idx`` serves the keyset pages in code point order (the
primary key sorts by the database's collation, which the planner cannot use
for ``COLLATE "C"``).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, ClassVar

from workmem.adapters.sql.dialect import COUNTS, HISTORY, PLACEHOLDER, RESOURCES, THREADS, Dialect, Statement
from workmem.errors import ValidationError
from workmem.history import HistoryKey, Recording
from workmem.hooks import ScopeTarget, patch_text
from workmem.validation import MAX_DEPTH, MAX_TEXT_BYTES

__all__ = [
    "EXACT_CHECK_ERROR",
    "FORMAT_ERROR",
    "NEAR_LIMIT_ERROR",
    "TOO_LARGE_ERROR",
    "UNREADABLE_METADATA_ERROR",
    "PostgresDialect",
]

FORMAT_ERROR = "WM001"
"""SQLSTATE raised when stored working memory is not a JSON object."""
NEAR_LIMIT_ERROR = "WM003"
"""SQLSTATE raised when merged metadata may be over the limit: the exact measure decides, under a row lock."""
TOO_LARGE_ERROR = "WM002"
"""SQLSTATE raised when a merged document is larger than the limit."""
UNREADABLE_METADATA_ERROR = "WM005"
"""SQLSTATE raised when stored metadata (another program's) is no JSON object to merge into; nothing changed."""
EXACT_CHECK_ERROR = "WM004"
"""SQLSTATE raised when stored working memory may read differently in Python: the exact check decides it."""

DDL_LOCK = 0x776F726B6D656D
"""Advisory lock key ("workmem") held while creating tables, so concurrent first starts do not race."""

# Python's str.isspace() characters: working memory made only of them counts as empty.
_BLANK = r"^[\s\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\u001c-\u001f]*$"

_TABLES = (
    """CREATE TABLE IF NOT EXISTS {s}.{threads} (
  id text NOT NULL PRIMARY KEY, "resourceId" text NOT NULL, title text NOT NULL, metadata jsonb,
  "createdAt" timestamp NOT NULL, "updatedAt" timestamp NOT NULL,
  "createdAtZ" timestamptz DEFAULT now(), "updatedAtZ" timestamptz DEFAULT now())""",
    """CREATE TABLE IF NOT EXISTS {s}.{resources} (
  id text NOT NULL PRIMARY KEY, "workingMemory" text, metadata jsonb,
  "createdAt" timestamp NOT NULL, "updatedAt" timestamp NOT NULL,
  "createdAtZ" timestamptz DEFAULT now(), "updatedAtZ" timestamptz DEFAULT now())""",
    """DO $do$ BEGIN
  -- CREATE INDEX IF NOT EXISTS would lock the table on every start; look first.
  IF to_regclass('{s}.mastra_threads_resourceid_createdat_idx') IS NULL THEN
    CREATE INDEX mastra_threads_resourceid_createdat_idx ON {s}.{threads} ("resourceId", "createdAt" DESC);
  END IF;
  IF to_regclass('{s}.workmem_threads_resourceid_updatedat_idx') IS NULL THEN
    CREATE INDEX workmem_threads_resourceid_updatedat_idx ON {s}.{threads} ("resourceId", "updatedAt" DESC);
  END IF;
  -- Keyset pages of every record (iter_threads, iter_resources) go by id in byte order.
  IF to_regclass('{s}.workmem_threads_id_c_idx') IS NULL THEN
    CREATE INDEX workmem_threads_id_c_idx ON {s}.{threads} (id COLLATE "C");
  END IF;
  IF to_regclass('{s}.workmem_resources_id_c_idx') IS NULL THEN
    CREATE INDEX workmem_resources_id_c_idx ON {s}.{resources} (id COLLATE "C");
  END IF;
END $do$""",
    # workmem's history of working memory (connect(url, history=...)): Mastra's tables are never changed.
    """CREATE TABLE IF NOT EXISTS {s}.{history} (
  resource_id text NOT NULL, scope text NOT NULL, memory_id text NOT NULL, version integer NOT NULL,
  content text, changed_at timestamptz NOT NULL, kind text NOT NULL, source text,
  PRIMARY KEY (resource_id, scope, memory_id, version))""",
)

_COUNT_FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION {s}.workmem_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO {s}.{counts} AS c ("resourceId", n)
    SELECT "resourceId", count(*) FROM added GROUP BY "resourceId" ORDER BY "resourceId"
    ON CONFLICT ("resourceId") DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END
$fn$""",
    """CREATE OR REPLACE FUNCTION {s}.workmem_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO {s}.{counts} AS c ("resourceId", n)
    SELECT "resourceId", -count(*) FROM removed GROUP BY "resourceId" ORDER BY "resourceId"
    ON CONFLICT ("resourceId") DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END
$fn$""",
    """CREATE OR REPLACE FUNCTION {s}.workmem_count_moved() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  -- two count rows, locked in "resourceId" order like the statement triggers do
  INSERT INTO {s}.{counts} AS c ("resourceId", n)
    SELECT moved.rid, moved.n FROM (VALUES (OLD."resourceId", -1), (NEW."resourceId", 1)) AS moved(rid, n)
    ORDER BY moved.rid
    ON CONFLICT ("resourceId") DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END
$fn$""",
    """CREATE OR REPLACE FUNCTION {s}.workmem_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  DELETE FROM {s}.{counts};
  RETURN NULL;
END
$fn$""",
)

_COUNT_TRIGGERS = """DO $do$ BEGIN
  -- First start (or a trigger was dropped): create the counts and triggers, then count what is there.
  IF to_regclass('{s}.{counts}') IS NULL OR (
    SELECT count(*) FROM pg_trigger WHERE tgrelid = '{s}.{threads}'::regclass AND tgname IN (
      'workmem_count_insert', 'workmem_count_delete', 'workmem_count_move', 'workmem_count_truncate')) < 4
  THEN
    CREATE TABLE IF NOT EXISTS {s}.{counts} ("resourceId" text NOT NULL PRIMARY KEY, n bigint NOT NULL);
    DROP TRIGGER IF EXISTS workmem_count_insert ON {s}.{threads};
    DROP TRIGGER IF EXISTS workmem_count_delete ON {s}.{threads};
    DROP TRIGGER IF EXISTS workmem_count_move ON {s}.{threads};
    DROP TRIGGER IF EXISTS workmem_count_truncate ON {s}.{threads};
    CREATE TRIGGER workmem_count_insert AFTER INSERT ON {s}.{threads}
      REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION {s}.workmem_count_inserted();
    CREATE TRIGGER workmem_count_delete AFTER DELETE ON {s}.{threads}
      REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION {s}.workmem_count_deleted();
    CREATE TRIGGER workmem_count_move AFTER UPDATE OF "resourceId" ON {s}.{threads} FOR EACH ROW
      WHEN (OLD."resourceId" IS DISTINCT FROM NEW."resourceId") EXECUTE FUNCTION {s}.workmem_count_moved();
    CREATE TRIGGER workmem_count_truncate AFTER TRUNCATE ON {s}.{threads}
      FOR EACH STATEMENT EXECUTE FUNCTION {s}.workmem_count_truncated();
    -- The triggers hold the table against writers until commit: nothing is missed or counted twice.
    DELETE FROM {s}.{counts};
    INSERT INTO {s}.{counts} ("resourceId", n) SELECT "resourceId", count(*) FROM {s}.{threads} GROUP BY "resourceId";
  END IF;
END $do$"""


def _pure_function(signature: str, body: str) -> str:
    """The DDL of the immutable PL/pgSQL function ``{s}.signature`` whose ``body`` runs up to its closing ``END``.

    A template like the rest of this schema: ``{s}`` and the limits are filled in by :meth:`PostgresDialect.ddl`.
    """
    head = f"\nCREATE OR REPLACE FUNCTION {{s}}.{signature}\nLANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$\n"
    return f"{head}{body}END\n$fn$\n"


_MERGE_PATCH = _pure_function(
    "workmem_merge_patch(target json, patch json) RETURNS json",
    """\
BEGIN
  -- RFC 7396, section 2: objects merge recursively, null deletes, anything else replaces.
  -- json, not jsonb: numbers stay as written and keys keep their order (kept keys, then new ones).
  -- Built as compact text (no spaces), the text Python's dump_json writes, so every backend stores the same.
  -- The patch is compact JSON (workmem sends dump_json): an object value with no null in it merges into
  -- anything that is not an object, and into its own copy, as itself, so it is copied as sent, not walked.
  IF json_typeof(patch) IS DISTINCT FROM 'object' THEN
    RETURN patch;
  END IF;
  IF strpos(patch::text, 'null') = 0 AND (json_typeof(target) IS DISTINCT FROM 'object'
      OR target::text ~ '^\\s*[{{]\\s*[}}]\\s*$' OR target::text = patch::text) THEN
    RETURN patch;
  END IF;
  -- One statement for the whole tree, level by level (no call per object, each object parsed once per
  -- level above it): a node is an object of the result that has to be walked, because the patch holds an
  -- object there that neither replaces the target's value as sent nor equals it. Each node's members are
  -- the target's (in order; a patched one takes the patch's value, a null deletes it), then the patch's
  -- new ones (in order), sorted by a path of fixed-width ordinals; the text is their tokens in that order.
  RETURN (
    WITH RECURSIVE node(path, first, key, tval, pval, walk) AS (
      SELECT ''::text, true, NULL::text, target, patch, true
      UNION ALL (
        WITH level AS (  -- the nodes found one level up: each level is joined as a whole, by hash
          SELECT path, CASE WHEN json_typeof(tval) = 'object' THEN tval ELSE '{{}}' END AS tval, pval
          FROM node WHERE walk
        ), t AS (
          SELECT level.path, e.key, e.value, e.ord
          FROM level, json_each(level.tval) WITH ORDINALITY AS e(key, value, ord)
        ), p AS (
          SELECT level.path, e.key, e.value, e.ord
          FROM level, json_each(level.pval) WITH ORDINALITY AS e(key, value, ord)
        ), member AS (
          SELECT COALESCE(t.path, p.path) AS parent, COALESCE(t.key, p.key) AS key, t.value AS tval, p.value AS pval,
                 COALESCE(t.ord, 1073741824 + p.ord) AS ord
          FROM t FULL JOIN p ON p.path = t.path AND p.key = t.key
          WHERE p.key IS NULL OR json_typeof(p.value) <> 'null'
        ), first AS (
          SELECT parent, min(ord) AS ord FROM member GROUP BY parent
        )
        SELECT m.parent || lpad(to_hex(m.ord), 8, '0'), m.ord = f.ord, m.key, m.tval, m.pval,
               COALESCE(json_typeof(m.pval) = 'object' AND (strpos(m.pval::text, 'null') > 0
                 OR (json_typeof(m.tval) = 'object' AND m.tval::text <> m.pval::text)), false)
        FROM member AS m JOIN first AS f ON f.parent = m.parent
      )
    )
    SELECT CAST(string_agg(token, '' ORDER BY sortkey COLLATE "C") AS json) FROM (
      SELECT path,
             CASE WHEN first THEN '' ELSE ',' END
             || CASE WHEN key IS NULL THEN '' ELSE to_json(key)::text || ':' END
             || CASE WHEN walk THEN '{{' WHEN pval IS NOT NULL THEN pval::text ELSE tval::text END
      FROM node
      UNION ALL
      SELECT path || 'z', '}}' FROM node WHERE walk  -- after every member: 'z' sorts after the hex digits
    ) AS tokens(sortkey, token)
  );
""",
)

_CHECK_SIZE = _pure_function(
    "workmem_checked_metadata(metadata jsonb) RETURNS jsonb",
    """\
BEGIN
  -- A shallow merge of two valid objects can exceed the limit. jsonb text has a space after each ':'
  -- and ',' and normalizes numbers, so it over-measures Python's compact JSON: under the limit here is
  -- under it everywhere; above it, the statement stops (nothing written) and workmem decides with the
  -- exact measure under a row lock.
  IF octet_length(metadata::text) > {limit} THEN
    RAISE EXCEPTION 'merged metadata may be larger than % bytes as JSON', {limit} USING ERRCODE = '{near_limit}';
  END IF;
  RETURN metadata;
""",
)

_METADATA_OBJECT = _pure_function(
    "workmem_mastra_metadata_object(stored jsonb) RETURNS jsonb",
    """\
DECLARE
  unwrapped jsonb;
BEGIN
  -- Stored metadata as the object a shallow merge starts from. @mastra/pg's saveResource keeps the
  -- object's JSON text as a jsonb *string*: that names the object. Anything else is no object to merge into.
  IF stored IS NULL OR jsonb_typeof(stored) = 'object' THEN
    RETURN stored;
  END IF;
  IF jsonb_typeof(stored) = 'string' THEN
    BEGIN
      unwrapped := CAST(stored #>> '{{}}' AS jsonb);
    EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
      unwrapped := NULL;
    END;
    IF jsonb_typeof(unwrapped) = 'object' THEN
      RETURN unwrapped;
    END IF;
  END IF;
  RAISE EXCEPTION 'stored metadata is a JSON %, not an object; a merge needs an object', jsonb_typeof(stored)
    USING ERRCODE = '{unreadable}';
""",
)

_METADATA_TEXT_OBJECT = _pure_function(
    "workmem_mastra_metadata_object(stored text) RETURNS jsonb",
    """\
DECLARE
  doc jsonb;
BEGIN
  -- The same for a metadata column of type text (databases created from table definitions declaring it so).
  IF stored IS NULL THEN
    RETURN NULL;
  END IF;
  BEGIN
    doc := CAST(stored AS jsonb);
  EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
    RAISE EXCEPTION 'stored metadata is not JSON; a merge needs a JSON object' USING ERRCODE = '{unreadable}';
  END;
  RETURN {s}.workmem_mastra_metadata_object(doc);
""",
)

_MERGE_DOCUMENT = _pure_function(
    "workmem_merge_document(stored text, patch json) RETURNS text",
    """\
DECLARE
  doc json;
  tree jsonb;
  jsonb_text text;
  merged text;
BEGIN
  IF stored IS NULL OR stored ~ '{blank}' THEN
    doc := '{{}}';
  ELSE
    BEGIN
      doc := stored::json;
    EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
      RAISE EXCEPTION 'stored working memory is not JSON; merge needs a JSON object' USING ERRCODE = '{format_error}';
    WHEN statement_too_complex OR program_limit_exceeded THEN  -- the parser ran out of stack
      RAISE EXCEPTION 'stored working memory is nested more than {depth} levels deep; merge needs a JSON object '
        'within the limits' USING ERRCODE = '{format_error}';
    END;
    IF json_typeof(doc) <> 'object' THEN
      RAISE EXCEPTION 'stored working memory is a JSON %, not an object; merge needs an object', json_typeof(doc)
        USING ERRCODE = '{format_error}';
    END IF;
    -- json keeps text as written; Python reads it as values. Where the two could differ -- escapes (NUL,
    -- lone surrogates), exponents and long integers (inf, > 2**53), negative zero, a key written twice, more
    -- than {depth} levels -- or a cheap test cannot rule that out, the exact check decides under a row lock.
    IF stored ~ '{needs_exact}' THEN
      RAISE EXCEPTION 'stored working memory needs the exact check' USING ERRCODE = '{exact}';
    END IF;
    tree := doc::jsonb;
    -- The merge reads each object it walks in full, once for every level above it: for a large memory
    -- nested deep that is many times its size, where the row-locked read-modify-write in Python reads it once.
    IF octet_length(stored) > {walk_bytes} AND jsonb_path_exists(tree, 'strict $.**{{{walk_depth}}}') THEN
      RAISE EXCEPTION 'stored working memory is large and nested deep: merged under a row lock'
        USING ERRCODE = '{exact}';
    END IF;
    -- jsonb keeps the last of repeated keys: fewer keys than '":' pairs means a repeat (or a ": in text).
    -- jsonb's text writes each key as "key": and nothing else unescaped as '": '. Without its escaped
    -- backslashes (\\\\, paired from the left as a JSON reader pairs them), an escaped quote is \\": so
    -- its keys are the '": ' minus the '\\": ' (cheap string counts, where a path query copies every value).
    jsonb_text := replace(tree::text, '\\\\', '');
    IF jsonb_path_exists(tree, 'strict $.**{{{depth}}}')
       OR (octet_length(jsonb_text) - octet_length(replace(jsonb_text, '": ', ''))) / 3
          - (octet_length(jsonb_text) - octet_length(replace(jsonb_text, '\\": ', ''))) / 4
          <> (octet_length(stored) - octet_length(replace(stored, '":', ''))) / 2 THEN
      RAISE EXCEPTION 'stored working memory needs the exact check' USING ERRCODE = '{exact}';
    END IF;
  END IF;
  -- The same for a large patch nested deep that must be walked whole (a null in it deletes something).
  IF octet_length(patch::text) > {walk_bytes} AND strpos(patch::text, 'null') > 0
     AND jsonb_path_exists(patch::jsonb, 'strict $.**{{{walk_depth}}}') THEN
    RAISE EXCEPTION 'the patch is large and nested deep: merged under a row lock' USING ERRCODE = '{exact}';
  END IF;
  merged := {s}.workmem_merge_patch(doc, patch)::text;
  IF octet_length(merged) > {limit} THEN
    RAISE EXCEPTION 'merged working memory is larger than % bytes', {limit} USING ERRCODE = '{too_large}';
  END IF;
  RETURN merged;
""",
)
_WALK_BYTES = 256 * 1024
_WALK_DEPTH = 4
"""Stored memory (or a patch with a null) over ``_WALK_BYTES`` that nests ``_WALK_DEPTH`` levels deep is merged
under a row lock in Python: walking it level by level in SQL would read it up to ``MAX_DEPTH`` times over
(``python -m bench --only big_merge`` measures both on 60,000-key documents)."""

# Stored text the one-statement merge leaves to the exact check (see _MERGE_DOCUMENT): any \u escape; a
# key with space before its ':'; a number of 16+ digits, with an exponent, or a negative zero.
_NEEDS_EXACT = r'\\u|"\s+:|(?<![0-9.])[0-9]{16,}\s*[],}]|[0-9][eE][-+]?[0-9]+\s*[],}]|-0(\.0+)?\s*[],}]'


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """``:name`` placeholders as psycopg's ``%(name)s`` (literal ``%`` doubled)."""
    return PLACEHOLDER.sub(r"%(\1)s", sql.replace("%", "%%"))


class PostgresDialect(Dialect):
    """PostgreSQL >= 13 through psycopg 3 (``%(name)s`` placeholders)."""

    name: ClassVar[str] = "postgres"
    native_shallow_merge: ClassVar[bool] = True
    kept_counts: ClassVar[bool] = True

    def __init__(self, schema: str = "public") -> None:
        if isinstance(schema, str) and (schema.lower() == "information_schema" or schema.lower().startswith("pg_")):
            # information_schema would take the tables; pg_temp would make them vanish with each connection.
            raise ValidationError(
                f"schema {schema!r} is a PostgreSQL system schema (information_schema, pg_*); "
                "name a schema of your own (the default is public)"
            )
        super().__init__(schema)
        self._prefix = self.resources.rpartition(".")[0]

    def render(self, statement: Statement) -> tuple[str, Any]:
        return _pyformat(statement.sql), statement.params

    def json_param(self, name: str) -> str:
        return f"CAST(:{name} AS jsonb)"

    def id_order(self, column: str = "id") -> str:
        # Byte order of UTF-8 (code point order), whatever the database's collation; indexed (see _TABLES).
        return f'{column} COLLATE "C"'

    def json_select(self, column: str) -> str:
        return f"CAST({column} AS text)"

    def time_select(self, column: str) -> str:
        return f'COALESCE("{column}Z", "{column}" AT TIME ZONE \'UTC\')'

    def time_assignments(self, column: str, name: str) -> list[tuple[str, str]]:
        stamp = f"CAST(:{name} AS timestamptz)"
        return [(f'"{column}"', f"({stamp} AT TIME ZONE 'UTC')"), (f'"{column}Z"', stamp)]

    def time_param(self, name: str) -> str:
        return f"CAST(:{name} AS timestamptz)"

    def record_version(
        self, key: HistoryKey, content: str | None, now: datetime, recording: Recording
    ) -> list[Statement]:
        """One statement: the version inserted, and (with retention) the ones below the bound dropped."""
        statements = super().record_version(key, content, now, recording)
        if len(statements) == 1:
            return statements
        insert, prune = statements
        sql = (
            f"WITH added AS ({insert.sql} RETURNING version) DELETE FROM {self.history} WHERE {self._KEY} "
            "AND version <= (SELECT version FROM added) - :keep"
        )
        return [Statement(sql, {**insert.params, **prune.params})]

    def stored_metadata(self, column: str) -> str:
        """``column`` (jsonb or text) as the jsonb object it holds; SQLSTATE ``WM005`` when it holds none."""
        return f"{self._prefix}.workmem_mastra_metadata_object({column})"

    def shallow_merge(self, old: str, new: str, *, thread: bool = False) -> str:
        # Both sides cast: a metadata column may be text, and then excluded.metadata is text too.
        stored = f"COALESCE({self.stored_metadata(old)}, CAST('{{}}' AS jsonb))"
        check = f"{self._prefix}.workmem_checked_metadata"
        if not thread:
            return f"{check}({stored} || CAST({new} AS jsonb))"
        # A thread's string workingMemory is working memory, not metadata: not counted against the metadata
        # limit (its own limit is checked before the statement, or by workmem_merge_document).
        return (
            "(SELECT CASE WHEN jsonb_typeof(m -> 'workingMemory') = 'string' "
            f"THEN {check}(m - 'workingMemory') || jsonb_build_object('workingMemory', m -> 'workingMemory') "
            f"ELSE {check}(m) END FROM (SELECT {stored} || CAST({new} AS jsonb) AS m) AS merged)"
        )

    def ddl(self) -> list[str]:
        names = {"s": self._prefix, "threads": THREADS, "resources": RESOURCES, "counts": COUNTS, "history": HISTORY}
        functions = [
            template.format(
                **names,
                blank=_BLANK,
                format_error=FORMAT_ERROR,
                unreadable=UNREADABLE_METADATA_ERROR,
                too_large=TOO_LARGE_ERROR,
                near_limit=NEAR_LIMIT_ERROR,
                exact=EXACT_CHECK_ERROR,
                needs_exact=_NEEDS_EXACT,
                depth=MAX_DEPTH,
                limit=MAX_TEXT_BYTES,
                walk_bytes=_WALK_BYTES,
                walk_depth=_WALK_DEPTH,
            )
            for template in (_MERGE_PATCH, _MERGE_DOCUMENT, _CHECK_SIZE, _METADATA_OBJECT, _METADATA_TEXT_OBJECT)
        ]
        return [
            f"SELECT pg_advisory_xact_lock({DDL_LOCK})",
            f"CREATE SCHEMA IF NOT EXISTS {self._prefix}",
            *(sql.format(**names) for sql in _TABLES),
            *functions,
            *(sql.format(**names) for sql in _COUNT_FUNCTIONS),
            _COUNT_TRIGGERS.format(**names),
        ]

    def merge_statement(self, target: ScopeTarget, patch: dict[str, Any], now: datetime) -> Statement:
        merge = f"{self._prefix}.workmem_merge_document"
        stamps = self._stamps(("updatedAt", "now"))
        params = {"patch": patch_text(patch), "now": now}
        if target.scope == "resource":
            fields = [
                ("id", ":id"),
                ('"workingMemory"', f"{merge}(NULL, CAST(:patch AS json))"),
                *self._stamps(("createdAt", "now"), ("updatedAt", "now")),
            ]
            sets = ", ".join(f"{column} = {value}" for column, value in stamps)
            sql = (
                f"{self._insert(self.resources, fields)} ON CONFLICT (id) DO UPDATE SET "
                f'"workingMemory" = {merge}(t."workingMemory", CAST(:patch AS json)), {sets} '
                'RETURNING "workingMemory"'
            )
            return Statement(sql, {**params, "id": target.resource_id})
        memory = f"{self.stored_metadata('metadata')} -> 'workingMemory'"
        stored = f"CASE WHEN jsonb_typeof({memory}) = 'string' THEN {memory} #>> '{{}}' END"
        sets = ", ".join(f"{column} = {value}" for column, value in stamps)
        sql = (
            f"UPDATE {self.threads} SET metadata = "
            + self.shallow_merge(
                "metadata",
                f"jsonb_build_object('workingMemory', {merge}({stored}, CAST(:patch AS json)))",
                thread=True,
            )
            + f", {sets} "
            'WHERE id = :id AND (CAST(:owner AS text) IS NULL OR "resourceId" = CAST(:owner AS text)) '
            # A non-string, non-null workingMemory (written by another program) changes no row here: the
            # locked path below the statement then raises WorkingMemoryFormatError instead of replacing it.
            f"AND COALESCE(jsonb_typeof({memory}), 'null') IN ('string', 'null') "
            "RETURNING CAST(metadata AS jsonb) ->> 'workingMemory', \"resourceId\""
        )
        return Statement(sql, {**params, "id": target.thread_id, "owner": target.resource_id})
