"""The framework integrations' shared fixture: ``url``, each test once per backend it runs on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_schemas import fresh_schema_url


@pytest.fixture(
    params=[
        pytest.param("libsql", marks=pytest.mark.backend("libsql")),
        pytest.param("postgres", marks=pytest.mark.backend("postgres")),
    ]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The embedded libSQL default (a file in tmp_path) or a fresh PostgreSQL schema."""
    if request.param == "libsql":
        yield f"file:{tmp_path / 'workmem.db'}"
    else:
        with fresh_schema_url() as fresh:
            yield fresh
