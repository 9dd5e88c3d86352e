"""Oracle Database (``oracle://``, ``oracle+oracledb://``).

* :mod:`.settings` — :class:`OracleSettings`: where and how to connect, from the URL and options (no I/O);
* :mod:`.dialect` — what Oracle's SQL does differently (``MERGE``, ``JSON``/``CLOB`` metadata, error codes);
* :mod:`.port` — the port, the only code touching the driver: python-oracledb's pool and connections,
  blocking and asyncio side by side;
* :mod:`.storage` — :class:`OracleHooks` (the SQL core's hooks with Oracle's port and policies), and
  :class:`OracleStorage` (sync) and :class:`AsyncOracleStorage` (async), which only open the pool.
"""

from __future__ import annotations

from .settings import OracleSettings
from .storage import AsyncOracleStorage, OracleStorage

__all__ = ["AsyncOracleStorage", "OracleSettings", "OracleStorage"]
