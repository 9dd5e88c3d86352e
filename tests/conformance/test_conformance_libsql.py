"""The conformance suite against libSQL: a fresh database file per check (the default backend).

A file, not ``:memory:``: the suite opens several connections to one namespace
(and, for the cross-process checks, hands the URL to other processes), while
every ``:memory:`` connection is a database of its own. ``:memory:`` is covered
by ``tests/libsql/test_libsql.py`` (one storage shared by threads).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workmem.conformance import ConformanceTests

pytestmark = pytest.mark.backend("libsql")


class TestLibSQLConformance(ConformanceTests):
    """Every conformance check against ``workmem.adapters.libsql.storage:LibSQLStorage`` on a file."""

    @pytest.fixture
    def workmem_target(self, tmp_path: Path) -> str:
        return f"file:{tmp_path / 'conformance.db'}"


class TestLibSQLConformanceAsync(TestLibSQLConformance):
    """The same checks through the async API (``workmem.connect_async``), each call awaited on the suite's loop."""

    workmem_api = "async"
