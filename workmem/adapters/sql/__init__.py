"""The SQL core shared by the libSQL, PostgreSQL and Oracle adapters.

* :mod:`.dialect` — the Mastra tables and every statement, built without I/O
  from a few per-database hooks (:class:`Dialect`);
* the dialects (what each database does differently) live in each backend's package:
  :mod:`workmem.adapters.libsql.dialect`, :mod:`workmem.adapters.postgres.dialect`,
  :mod:`workmem.adapters.oracle.dialect`;
* :mod:`.rows` — rows to records (records after an update or merge: :mod:`workmem.changes`);
* :mod:`.hooks` — :class:`SqlHooks`, the contract's flow, the attempt loop and the :class:`Transaction`,
  over a small connection port and two policies (error, retry) that each backend implements.

No module here imports a database driver.
"""

from __future__ import annotations

from .dialect import Dialect, KeyRead, Statement, identifier
from .hooks import Attempt, Result, SqlHooks, Transaction

__all__ = [
    "Attempt",
    "Dialect",
    "KeyRead",
    "Result",
    "SqlHooks",
    "Statement",
    "Transaction",
    "identifier",
]
