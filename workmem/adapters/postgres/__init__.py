"""PostgreSQL (``postgresql://``, ``postgres://``, ``postgresql+psycopg://``).

* :mod:`.storage` — :class:`PostgresStorage` and :class:`AsyncPostgresStorage` (``connect_async``): the URL,
  the driver (psycopg 3, sync and async), statements run;
* :mod:`.dialect` — what PostgreSQL's SQL does differently (jsonb, triggers, plpgsql merge);
* :mod:`.pool` — the connection pools, sync and async (connections opened by the caller that needs one),
  outage logging;
* :mod:`.keyreads` — the hot path, sync and async: reads by key as prepared statements on libpq directly;
* :mod:`.connections` — psycopg connections as the pools keep them, and whether the hot path is on (it is
  off, reads by key taking the cursor, with a psycopg it was not written for);
* :mod:`.sqlstate` — which workmem error a PostgreSQL error means.

Logs go to the ``workmem.adapters.postgres`` logger.
"""

from __future__ import annotations

from .storage import AsyncPostgresStorage, PostgresStorage, parse_postgres_url

__all__ = ["AsyncPostgresStorage", "PostgresStorage", "parse_postgres_url"]
