"""The SQL core shared by the libSQL, PostgreSQL and Oracle adapters.

* :mod:`.dialect` — the Mastra tables and every statement, built without I/O
  from a few per-database hooks (:class:`Dialect`);
* :mod:`.sqlite` — the SQLite dialect (what its database does differently); PostgreSQL's and
  Oracle's are ``dialect.py`` in their own packages (:mod:`workmem.adapters.postgres.dialect`, ...);
* :mod:`.rows` — rows to records (records after an update or merge: :mod:`workmem.changes`);
* :mod:`.storage` — :class:`SqlStorage`, the contract's flow over ``_execute`` and ``_transaction``.

No module here imports a database driver.
"""

from __future__ import annotations

from .dialect import Dialect, KeyRead, Statement, identifier
from .storage import Result, Session, SqlStorage

__all__ = ["Dialect", "KeyRead", "Result", "Session", "SqlStorage", "Statement", "identifier"]
