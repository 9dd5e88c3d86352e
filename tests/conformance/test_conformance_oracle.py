"""The conformance suite against a REAL Oracle server; skipped, loudly, when there is none.

The server comes from ``tests/support/servers.py`` (``WORKMEM_ORACLE_URL``, or testcontainers'
``gvenzl/oracle-free`` when a Docker engine answers); each check gets fresh tables under a
random ``table_prefix`` in the URL (so the cross-process checks can open them too), dropped
afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_oracle_server import fresh_tables_url

from workmem.conformance import ConformanceTests

pytestmark = pytest.mark.backend("oracle")


class TestOracleConformance(ConformanceTests):
    """Every conformance check against ``workmem.adapters.oracle.storage:OracleStorage``."""

    @pytest.fixture
    def workmem_target(self) -> Iterator[str]:
        with fresh_tables_url() as url:
            yield url


class TestOracleConformanceAsync(TestOracleConformance):
    """The same checks through the async API (``workmem.connect_async``), each call awaited on the suite's loop."""

    workmem_api = "async"


class TestAsyncOracleConformance(TestOracleConformance):
    """Every conformance check against the async API: ``AsyncOracleStorage`` on python-oracledb's asyncio pool."""

    workmem_api = "async"
