"""PostgreSQL (``postgresql://``, ``postgres://``, ``postgresql+psycopg://``).

* :mod:`.settings` — :class:`PostgresSettings`: where and how to connect, from the URL and options (no I/O);
* :mod:`.dialect` — what PostgreSQL's SQL does differently (jsonb, triggers, plpgsql merge);
* :mod:`.port` — psycopg's connections and statements, blocking and awaited side by side;
* :mod:`.storage` — :class:`PostgresHooks`, the SQL core's hooks over that port with PostgreSQL's policies
  (SQLSTATE, one retry of a read), and :class:`PostgresStorage` and :class:`AsyncPostgresStorage`
  (``connect_async``), which only choose their port;
* :mod:`.pool` — the connection pools, sync and async (connections opened by the caller that needs one),
  outage logging;
* :mod:`.keyreads` — the hot path, sync and async: reads by key as prepared statements on libpq directly;
* :mod:`.connections` — psycopg connections as the pools keep them, and whether the hot path is on (it is
  off, reads by key taking the cursor, with a psycopg it was not written for);
* :mod:`.sqlstate` — which workmem error a PostgreSQL error means.

Logs go to the ``workmem.adapters.postgres`` logger.
"""

from __future__ import annotations

from .settings import PostgresSettings, parse_postgres_url
from .storage import AsyncPostgresStorage, PostgresStorage

__all__ = ["AsyncPostgresStorage", "PostgresSettings", "PostgresStorage", "parse_postgres_url"]
