"""Collected by the pytest plugin for ``--workmem-url``: the suite against that URL."""

from __future__ import annotations

from workmem.conformance.suite import ConformanceTests

__all__ = ["TestWorkmemConformance"]


class TestWorkmemConformance(ConformanceTests):
    """Every conformance check against ``--workmem-url`` / ``WORKMEM_CONFORMANCE_URL``."""
