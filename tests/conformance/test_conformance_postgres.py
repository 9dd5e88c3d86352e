"""The conformance suite against a REAL PostgreSQL server; skipped, loudly, when there is none.

The server comes from ``tests/support/servers.py``; each check gets a fresh random
schema (``?schema=wm_…`` in the URL, so the cross-process checks can open it
too), dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_postgres import fresh_schema_url

from workmem.conformance import ConformanceTests

pytestmark = pytest.mark.backend("postgres")


class TestPostgresConformance(ConformanceTests):
    """Every conformance check against ``workmem.adapters.postgres.storage:PostgresStorage``."""

    @pytest.fixture
    def workmem_target(self) -> Iterator[str]:
        with fresh_schema_url() as url:
            yield url


class TestPostgresConformanceAsync(TestPostgresConformance):
    """The same checks through the async API (``workmem.connect_async``), each call awaited on the suite's loop."""

    workmem_api = "async"
