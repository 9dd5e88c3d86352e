"""The conformance suite against the Upstash adapter: the REST bridge in front of a real redis-server."""

from __future__ import annotations

import pytest
from upstash_fixtures import bridge, upstash_prefix, upstash_url

from workmem.conformance import ConformanceTests

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge", "upstash_prefix", "upstash_url"]


class TestUpstashConformance(ConformanceTests):
    """Each test gets a fresh random key prefix, deleted afterwards."""

    @pytest.fixture
    def workmem_target(self, upstash_url: str) -> str:
        return upstash_url


class TestUpstashConformanceAsync(TestUpstashConformance):
    """The same checks through the async API (``workmem.connect_async``), each call awaited on the suite's loop."""

    workmem_api = "async"


class TestUpstashConformanceScanListing(TestUpstashConformance):
    """The same checks with ``listing=scan`` (``list_threads`` reads every thread document, not the indexes)."""

    @pytest.fixture
    def workmem_target(self, upstash_url: str) -> str:
        return upstash_url + "&listing=scan"
