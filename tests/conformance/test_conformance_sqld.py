"""The conformance suite against a REAL libSQL server (``sqld`` 0.24.32), through both APIs and both URL forms.

The server is the test session's own ``sqld`` (``tests/support/sqld.py``, installed by
``python ci/install_sqld.py``); each check gets its database emptied afterwards.
Without the binary the checks skip loudly as backend ``sqld`` (a failure when
``WORKMEM_REQUIRE_BACKENDS`` names it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqld import fresh_sqld_url

from workmem.conformance import ConformanceTests

pytestmark = pytest.mark.backend("sqld")


class TestSqldConformance(ConformanceTests):
    """Every conformance check against ``libsql://127.0.0.1:PORT?tls=0`` (a local server over plain HTTP)."""

    @pytest.fixture
    def workmem_target(self) -> Iterator[str]:
        with fresh_sqld_url() as url:
            yield url


class TestSqldConformanceAsync(TestSqldConformance):
    """The same checks through the async API (``workmem.connect_async``)."""

    workmem_api = "async"


class TestSqldConformanceHttpScheme(ConformanceTests):
    """Every conformance check against the same server as ``libsql+http://127.0.0.1:PORT``."""

    @pytest.fixture
    def workmem_target(self) -> Iterator[str]:
        with fresh_sqld_url() as url:
            yield url.replace("libsql://", "libsql+http://").removesuffix("?tls=0")


@pytest.mark.parametrize("api", ["sync", "async"])
def test_the_cli_passes_on_sqld_as_a_user_runs_it(api: str) -> None:
    """``workmem conformance 'libsql://127.0.0.1:PORT?tls=0' [--api async]``, the command the README gives."""
    import subprocess
    import sys

    with fresh_sqld_url() as url:
        command = [sys.executable, "-m", "workmem", "conformance", url, "--profile", "quick", "--api", api]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "PASSED:" in done.stdout and f"{api} API" in done.stdout
