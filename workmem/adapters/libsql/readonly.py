"""What :meth:`~workmem.adapters.libsql.storage.LibSQLStorage.query` refuses, so that nothing outlives the call.

``query()`` runs each statement on a connection workmem keeps: a file's read-only connection
of its own (``mode=ro``), or ``:memory:``'s one connection, under ``PRAGMA query_only``. Those
stop every write to the database, but not three kinds of statement that would leave something
behind after the call:

* one that opens or ends a transaction (``BEGIN``, ``SAVEPOINT``, ``COMMIT``, ``RELEASE``,
  ``ROLLBACK``): a transaction left open keeps its snapshot, so every later ``query()`` would
  read old data and SQLite could never checkpoint the WAL past it;
* one that creates or writes another file (``ATTACH``, ``DETACH``, ``VACUUM INTO``);
* a ``PRAGMA`` that sets a value: it would stay set on the kept connection (``busy_timeout``,
  ``query_only``, ``cache_size``, ``journal_mode`` ...) or bind every SQLite connection of the
  process (``hard_heap_limit``, which can only be lowered).

The first two are judged from the compiled program (``EXPLAIN``), not the text. A pragma is
judged from the text, before SQLite sees it: SQLite applies many settings while it merely
compiles the statement, ``EXPLAIN`` included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["refused_pragma", "refused_program"]

_READING_WITH_ARGUMENT = frozenset(
    {
        "foreign_key_check",
        "foreign_key_list",
        "index_info",
        "index_list",
        "index_xinfo",
        "integrity_check",
        "quick_check",
        "table_info",
        "table_list",
        "table_xinfo",
    }
)
"""Pragmas whose argument names what to read (``PRAGMA table_info(t)``), not a value to set."""
_SPACE = " \t\n\f\r"
"""SQLite's white space (any other character, U+00A0 included, belongs to a word)."""
_QUOTES = {'"': '"', "[": "]", "`": "`", "'": "'"}


def refused_pragma(sql: str) -> str | None:
    """Why ``sql`` is refused, if it is a ``PRAGMA`` (or ``EXPLAIN`` of one) that may set a value.

    Allowed: a pragma without a value (``PRAGMA journal_mode``) and those of
    :data:`_READING_WITH_ARGUMENT`. A ``PRAGMA`` statement this reading cannot follow is refused.
    """
    words = _Words(sql)
    first = words.word()
    if first == "explain":
        first = words.word()
        if first == "query" and words.word() == "plan":
            first = words.word()
    if first != "pragma":
        return None
    name = words.name()
    if name is not None and words.peek() == ".":  # schema.name
        words.skip(1)
        name = words.name()
    if name is None:
        return "query() could not read this PRAGMA statement; it only reads a pragma's value"
    if words.peek() in ("", ";") or name in _READING_WITH_ARGUMENT:
        return None
    return (
        f"PRAGMA {name} with a value would stay set after the call, on the connection query() keeps "
        "(or on every SQLite connection of the process); query() only reads a pragma: PRAGMA name, no value"
    )


def refused_program(program: Sequence[Sequence[Any]]) -> str | None:
    """Why the statement whose ``EXPLAIN`` rows are ``program`` is refused, or ``None``."""
    for row in program:  # addr, opcode, p1, p2, p3, p4, p5, comment
        opcode, p4 = row[1], str(row[5])
        if opcode in ("AutoCommit", "Savepoint"):
            return (
                "each statement runs in a read transaction of its own: BEGIN, SAVEPOINT, COMMIT, RELEASE "
                "and ROLLBACK are refused (a transaction left open would keep query() on an old snapshot)"
            )
        into = opcode == "Vacuum" and row[3] != 0  # P2: the register of the INTO file name (0: this file)
        if into or p4.startswith(("sqlite_attach(", "sqlite_detach(")):
            return "ATTACH, DETACH and VACUUM INTO touch other database files; query() only reads"
    return None


class _Words:
    """Reads SQL a word at a time, as SQLite's tokenizer splits it, skipping white space and comments."""

    def __init__(self, sql: str) -> None:
        self._sql = sql
        self._at = 0

    def _skip_space(self) -> None:
        sql, at = self._sql, self._at
        while at < len(sql):
            if sql[at] in _SPACE:
                at += 1
            elif sql.startswith("--", at):
                end = sql.find("\n", at)
                at = len(sql) if end < 0 else end + 1
            elif sql.startswith("/*", at):
                end = sql.find("*/", at + 2)
                at = len(sql) if end < 0 else end + 2
            else:
                break
        self._at = at

    def peek(self) -> str:
        """The next character after white space and comments (``""`` at the end)."""
        self._skip_space()
        return self._sql[self._at : self._at + 1]

    def skip(self, count: int) -> None:
        self._at += count

    def word(self) -> str:
        """The next bare word, lower-cased (``""`` if a word does not come next)."""
        self._skip_space()
        sql, start = self._sql, self._at
        at = start
        while at < len(sql) and (sql[at].isalnum() or sql[at] in "_$" or ord(sql[at]) >= 0x80):
            at += 1
        self._at = at
        return sql[start:at].lower()

    def name(self) -> str | None:
        """The next name, bare or quoted (``"x"``, ``[x]``, ```x```, ``'x'``), lower-cased; ``None`` if none."""
        opening = self.peek()
        if opening not in _QUOTES:
            return self.word() or None
        closing = self._quoted_end(_QUOTES[opening])
        if closing is None:
            return None
        text = self._sql[self._at + 1 : closing]
        if opening != "[":
            text = text.replace(opening * 2, opening)
        self._at = closing + 1
        return text.lower()

    def _quoted_end(self, closing: str) -> int | None:
        at = self._at + 1
        while True:
            end = self._sql.find(closing, at)
            if end < 0:
                return None
            if closing != "]" and self._sql.startswith(closing * 2, end):
                at = end + 2  # a doubled quote stands for itself
                continue
            return end
