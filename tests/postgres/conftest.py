"""The PostgreSQL tests' shared fixture: ``url``, a new random schema on the test server for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from postgres_schemas import fresh_schema_url


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema_url() as fresh:
        yield fresh
