"""PostgreSQL (``postgresql://``, ``postgres://``, ``postgresql+psycopg://``).

* :mod:`.storage` — :class:`PostgresStorage`: the URL, the driver (psycopg 3), statements run;
* :mod:`.dialect` — what PostgreSQL's SQL does differently (jsonb, triggers, plpgsql merge);
* :mod:`.pool` — the connection pool (connections opened in the caller's thread);
* :mod:`.sqlstate` — which workmem error a PostgreSQL error means.

Logs go to the ``workmem.adapters.postgres`` logger.
"""

from __future__ import annotations

from .storage import PostgresStorage, parse_postgres_url

__all__ = ["PostgresStorage", "parse_postgres_url"]
