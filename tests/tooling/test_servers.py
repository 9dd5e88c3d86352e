"""tests/support/servers.py: the one way tests find a server, and how CI turns a skip into a failure."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import servers

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parents[1] / "support"
CACHED = (servers._find, servers.docker_available)
"""The cached functions, kept here because tests monkeypatch the module's names."""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _forbidden(*_: object) -> bool:
    raise AssertionError("must not be consulted")


def outcome(call: Callable[[], object]) -> tuple[str, str]:
    """``("url", url)``, ``("skip", reason)`` or ``("fail", message)``: a skip must not pass for a failure."""
    try:
        return "url", str(call())
    except pytest.skip.Exception as exc:
        return "skip", str(exc)
    except pytest.fail.Exception as exc:
        return "fail", str(exc)


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No WORKMEM_* variable from the caller, and empty caches before and after."""
    for name in ("WORKMEM_REQUIRE_BACKENDS", "WORKMEM_TESTCONTAINERS"):
        monkeypatch.delenv(name, raising=False)
    for backend in servers.BACKENDS:
        monkeypatch.delenv(f"WORKMEM_{backend.upper()}_URL", raising=False)
    for cached in CACHED:
        cached.cache_clear()
    yield
    for cached in CACHED:
        cached.cache_clear()


@pytest.fixture
def nothing_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Docker engine and no local server on any default port."""
    monkeypatch.setattr(servers, "docker_available", lambda: False)
    monkeypatch.setattr(servers, "port_open", lambda host, port, timeout=0.5: False)


def test_env_url_wins_over_docker_and_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "docker_available", _forbidden)
    monkeypatch.setattr(servers, "port_open", _forbidden)
    monkeypatch.setenv("WORKMEM_POSTGRES_URL", "postgresql://ci:secret@db.example:6543/x")
    assert servers.server_url("postgres") == "postgresql://ci:secret@db.example:6543/x"


def test_aliases_resolve_to_the_server_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKMEM_REDIS_URL", "redis://cache.example:6380")
    monkeypatch.setenv("WORKMEM_POSTGRES_URL", "postgresql://pg.example/db")
    assert servers.server_url("upstash") == "redis://cache.example:6380"
    assert servers.server_url("PostgreSQL") == "postgresql://pg.example/db"


def test_unknown_backend_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="choose one of postgres, redis, mongodb, oracle"):
        servers.server_url("libsql")


def test_testcontainers_come_second_and_start_once(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    def fake_container() -> str:
        started.append("mongodb")
        return "mongodb://test:test@127.0.0.1:49153"

    monkeypatch.setattr(servers, "docker_available", lambda: True)
    monkeypatch.setattr(servers, "port_open", _forbidden)
    monkeypatch.setitem(servers._CONTAINERS, "mongodb", fake_container)
    assert servers.server_url("mongodb") == "mongodb://test:test@127.0.0.1:49153"
    assert servers.server_url("mongo") == "mongodb://test:test@127.0.0.1:49153"
    assert started == ["mongodb"]


def test_testcontainers_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKMEM_TESTCONTAINERS", "0")
    monkeypatch.setattr(servers, "docker_available", _forbidden)
    monkeypatch.setattr(servers, "port_open", lambda host, port, timeout=0.5: False)
    kind, reason = outcome(lambda: servers.server_url("oracle"))
    assert kind == "skip"
    assert "unset WORKMEM_TESTCONTAINERS=0" in reason


def test_a_server_listening_on_the_default_port_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "docker_available", lambda: False)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        monkeypatch.setitem(servers._LOCAL, "redis", ("127.0.0.1", port, f"redis://127.0.0.1:{port}"))
        assert servers.server_url("redis") == f"redis://127.0.0.1:{port}"


def test_no_server_skips_with_what_to_set(nothing_found: None) -> None:
    kind, reason = outcome(lambda: servers.server_url("mongodb"))
    assert kind == "skip"
    assert reason.startswith("SKIPPED mongodb: no mongodb server")
    assert "set WORKMEM_MONGODB_URL=mongodb://user:pass@host:27017" in reason
    assert "127.0.0.1:27017" in reason


def test_a_required_backend_fails_instead_of_skipping(nothing_found: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKMEM_REQUIRE_BACKENDS", "redis, mongodb")
    kind, message = outcome(lambda: servers.server_url("mongodb"))
    assert kind == "fail"
    assert message.startswith("SKIP NOT ALLOWED (mongodb is in WORKMEM_REQUIRE_BACKENDS): no mongodb server")
    # A backend the job is not about still skips.
    assert outcome(lambda: servers.server_url("oracle"))[0] == "skip"


def test_required_backends_parses_and_resolves_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKMEM_REQUIRE_BACKENDS", " Upstash,postgresql,,libsql ")
    assert servers.required_backends() == {"redis", "postgres", "libsql"}
    assert outcome(lambda: servers.skip_or_fail("libsql", "driver missing"))[0] == "fail"
    monkeypatch.delenv("WORKMEM_REQUIRE_BACKENDS")
    assert servers.required_backends() == set()
    assert outcome(lambda: servers.skip_or_fail("libsql", "gone")) == ("skip", "SKIPPED libsql: gone")


# The guard and the skip-to-failure rule, as a real pytest run sees them.

CONFTEST = f"""
import servers

servers._LOCAL["mongodb"] = ("127.0.0.1", {_closed_port()}, "mongodb://127.0.0.1:1")


def pytest_configure(config):
    servers.install_guard(config)
"""

TESTS = """
import pytest
import servers

@pytest.mark.backend("mongodb")
def test_mongodb_roundtrip():
    servers.server_url("mongodb")

@pytest.mark.backend("libsql")
def test_libsql_roundtrip():
    pytest.importorskip("a_driver_that_is_not_installed")

@pytest.mark.backend("upstash")
def test_upstash_roundtrip():
    pass

def test_unit():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    monkeypatch.setenv("WORKMEM_TESTCONTAINERS", "0")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_backends=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    backend(name): talks to a real server\n")
    return pytester


def test_run_without_requirements_skips(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED mongodb: no mongodb server: set WORKMEM_MONGODB_URL=*"])
    assert result.ret == pytest.ExitCode.OK


def test_required_server_backend_skip_fails_the_run(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKMEM_REQUIRE_BACKENDS", "mongodb")
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIP NOT ALLOWED (mongodb is in WORKMEM_REQUIRE_BACKENDS)*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_required_backend_without_a_passing_test_fails_the_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKMEM_REQUIRE_BACKENDS", "libsql")
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    # Every test outcome is a pass or an allowed skip, yet the run fails: libsql was never tested.
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(["*required backends not tested*", "libsql: WORKMEM_REQUIRE_BACKENDS names it*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_required_backend_with_a_passing_test_passes(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # upstash tests count for redis, the server behind them.
    monkeypatch.setenv("WORKMEM_REQUIRE_BACKENDS", "redis")
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=2)
    assert "required backends not tested" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.OK
