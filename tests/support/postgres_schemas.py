"""A fresh PostgreSQL schema per test on the test server, dropped afterwards (every area's PostgreSQL tests)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
from servers import server_url

__all__ = ["fresh_schema_url"]


@contextlib.contextmanager
def fresh_schema_url(**query: str) -> Iterator[str]:
    """A URL naming a new random schema on the test server; the schema is dropped afterwards."""
    server = server_url("postgres")
    schema = f"wm_{uuid.uuid4().hex[:12]}"
    parts = urlsplit(server)
    extra = "&".join(f"{k}={v}" for k, v in {**query, "schema": schema}.items())
    try:
        yield urlunsplit((parts.scheme, parts.netloc, parts.path, f"{parts.query}&{extra}".lstrip("&"), ""))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
