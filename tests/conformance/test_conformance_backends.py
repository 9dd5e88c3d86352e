"""The conformance suite against every backend that ships with workmem, through both APIs.

One class, parametrized by target: each parameter is a backend URL form, marked with its backend, so a
backend without a server is skipped loudly (and fails CI when ``WORKMEM_REQUIRE_BACKENDS`` names it). Each
check gets a namespace of its own, removed afterwards:

* ``libsql``: a fresh database file (not ``:memory:``: the suite opens several connections and hands the
  URL to other processes, while every ``:memory:`` connection is a database of its own; ``:memory:`` is
  covered by ``tests/libsql/test_libsql.py``);
* ``sqld`` / ``sqld-http``: the session's real sqld (``tests/support/sqld.py``) as
  ``libsql://127.0.0.1:PORT?tls=0`` and as ``libsql+http://127.0.0.1:PORT``, emptied after each check;
* ``postgres``: a random schema (``?schema=wm_…``); ``oracle``: tables under a random ``table_prefix``;
  ``mongodb``: a random database; ``upstash`` / ``upstash-scan``: a random key prefix through the
  project's Upstash-REST bridge to the local redis-server, the second with ``listing=scan``.

The in-memory reference adapter has its own module (``test_conformance_memory.py``), with the checks that
pin the suite's own behaviour.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from backends import fresh_mongodb_url
from postgres_schemas import fresh_schema_url
from sqld import fresh_sqld_url
from test_oracle_server import fresh_tables_url
from upstash_fixtures import bridge, upstash_prefix, upstash_url

from workmem.conformance import ConformanceTests

__all__ = ["bridge", "upstash_prefix", "upstash_url"]


def _file(request: pytest.FixtureRequest) -> AbstractContextManager[str]:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    return contextlib.nullcontext(f"file:{tmp_path / 'conformance.db'}")


@contextlib.contextmanager
def _sqld_http() -> Iterator[str]:
    with fresh_sqld_url() as url:
        yield url.replace("libsql://", "libsql+http://").removesuffix("?tls=0")


def _upstash(suffix: str = "") -> Callable[[pytest.FixtureRequest], AbstractContextManager[str]]:
    def target(request: pytest.FixtureRequest) -> AbstractContextManager[str]:
        return contextlib.nullcontext(request.getfixturevalue("upstash_url") + suffix)

    return target


TARGETS: dict[str, tuple[str, Callable[[pytest.FixtureRequest], AbstractContextManager[str]]]] = {
    "libsql": ("libsql", _file),
    "sqld": ("sqld", lambda _: fresh_sqld_url()),
    "sqld-http": ("sqld", lambda _: _sqld_http()),
    "postgres": ("postgres", lambda _: fresh_schema_url()),
    "upstash": ("upstash", _upstash()),
    "upstash-scan": ("upstash", _upstash("&listing=scan")),
    "mongodb": ("mongodb", lambda _: fresh_mongodb_url()),
    "oracle": ("oracle", lambda _: fresh_tables_url()),
}
"""Parameter → (the backend it is marked with, how a check gets a fresh namespace's URL)."""


class TestConformance(ConformanceTests):
    """Every conformance check against each shipped backend, through the sync API."""

    @pytest.fixture(
        params=[pytest.param(name, marks=pytest.mark.backend(backend)) for name, (backend, _) in TARGETS.items()]
    )
    def workmem_target(self, request: pytest.FixtureRequest) -> Iterator[str]:
        with TARGETS[request.param][1](request) as url:
            yield url


class TestConformanceAsync(TestConformance):
    """The same checks through the async API (``workmem.connect_async``), each call awaited on the suite's loop."""

    workmem_api = "async"


@pytest.mark.backend("sqld")
@pytest.mark.parametrize("api", ["sync", "async"])
def test_the_cli_passes_on_sqld_as_a_user_runs_it(api: str) -> None:
    """``workmem conformance 'libsql://127.0.0.1:PORT?tls=0' [--api async]``, the command the README gives."""
    with fresh_sqld_url() as url:
        command = [sys.executable, "-m", "workmem", "conformance", url, "--profile", "quick", "--api", api]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "PASSED:" in done.stdout and f"{api} API" in done.stdout
