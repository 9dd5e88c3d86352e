"""The conformance suite against a REAL MongoDB server; skipped, loudly, when there is none.

The server comes from ``tests/support/servers.py`` (``WORKMEM_MONGODB_URL``, else
testcontainers ``mongo:8.0`` when a Docker engine answers, else a local server
on 27017). Each check gets a fresh random database, named in the URL so the
cross-process checks can open it too, and dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from backends import fresh_mongodb_url

from workmem.conformance import ConformanceTests

pytestmark = pytest.mark.backend("mongodb")


class TestMongoDBConformance(ConformanceTests):
    """Every conformance check against MongoDB (``workmem.adapters.mongodb.storage:MongoStorage``)."""

    @pytest.fixture
    def workmem_target(self) -> Iterator[str]:
        with fresh_mongodb_url() as url:
            yield url


class TestMongoDBConformanceAsync(TestMongoDBConformance):
    """The same checks through the async API (``workmem.connect_async``), each call awaited on the suite's loop."""

    workmem_api = "async"
