"""Oracle Database (``oracle://``, ``oracle+oracledb://``).

* :mod:`.storage` — :class:`OracleStorage` (sync) and :class:`AsyncOracleStorage` (async): the URL, the driver
  (python-oracledb, thin mode, its blocking or its asyncio pool), statements run;
* :mod:`.dialect` — what Oracle's SQL does differently (``MERGE``, ``JSON``/``CLOB`` metadata, error codes).
"""

from __future__ import annotations

from .storage import AsyncOracleStorage, OracleStorage, parse_oracle_url

__all__ = ["AsyncOracleStorage", "OracleStorage", "parse_oracle_url"]
