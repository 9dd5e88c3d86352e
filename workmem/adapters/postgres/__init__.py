"""PostgreSQL (``postgresql://``, ``postgres://``, ``postgresql+psycopg://``).

* :mod:`.settings` — :class:`PostgresSettings`: where and how to connect, from the URL and options (no I/O);
* :mod:`.storage` — :class:`PostgresStorage` and :class:`AsyncPostgresStorage` (``connect_async``): the SQL
  core's hooks with PostgreSQL's port (psycopg 3, sync and async) and policies (SQLSTATE, one retry of a read);
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

from .settings import PostgresSettings, parse_postgres_url
from .storage import AsyncPostgresStorage, PostgresStorage

__all__ = ["AsyncPostgresStorage", "PostgresSettings", "PostgresStorage", "parse_postgres_url"]
