"""The SQL core shared by the libSQL, PostgreSQL and Oracle adapters.

* :mod:`.dialect` — the Mastra tables and every statement, built without I/O
  from a few per-database hooks (:class:`Dialect`);
* the dialects (what each database does differently) live in each backend's package:
  :mod:`workmem.adapters.libsql.dialect`, :mod:`workmem.adapters.postgres.dialect`,
  :mod:`workmem.adapters.oracle.dialect`;
* :mod:`.rows` — rows to records (records after an update or merge: :mod:`workmem.changes`);
* :mod:`.storage` — :class:`SqlStorage`, the contract's flow over ``_execute`` and ``_transaction``.

No module here imports a database driver.
"""

from __future__ import annotations

from .dialect import Dialect, KeyRead, Statement, identifier
from .storage import Result, Session, SqlStorage

__all__ = ["Dialect", "KeyRead", "Result", "Session", "SqlStorage", "Statement", "identifier"]
