"""PostgreSQL (``postgresql://``, ``postgres://``, ``postgresql+psycopg://``).

* :mod:`.storage` — :class:`PostgresStorage` and :class:`AsyncPostgresStorage` (``connect_async``): the URL,
  the driver (psycopg 3; the async one with ``psycopg_pool``), statements run;
* :mod:`.dialect` — what PostgreSQL's SQL does differently (jsonb, triggers, plpgsql merge);
* :mod:`.pool` — the sync connection pool (connections opened in the caller's thread), outage logging;
* :mod:`.sqlstate` — which workmem error a PostgreSQL error means.

Logs go to the ``workmem.adapters.postgres`` logger.
"""

from __future__ import annotations

from .storage import AsyncPostgresStorage, PostgresStorage, parse_postgres_url

__all__ = ["AsyncPostgresStorage", "PostgresStorage", "parse_postgres_url"]
