"""Oracle Database (``oracle://``, ``oracle+oracledb://``).

* :mod:`.storage` — :class:`OracleStorage`: the URL, the driver (python-oracledb, thin mode), statements run;
* :mod:`.dialect` — what Oracle's SQL does differently (``MERGE``, ``JSON``/``CLOB`` metadata, error codes).
"""

from __future__ import annotations

from .storage import OracleStorage, parse_oracle_url

__all__ = ["OracleStorage", "parse_oracle_url"]
