"""Finding a real server for each backend's tests — one way, used by every backend fixture.

Order: an explicit URL (``WORKMEM_<BACKEND>_URL``), then testcontainers when a
Docker engine answers (unless ``WORKMEM_TESTCONTAINERS=0``), then a server this
machine already runs on the default port, else a skip whose reason says exactly
what to set. Backends named in ``WORKMEM_REQUIRE_BACKENDS`` (comma-separated;
CI sets it) fail instead of skipping, so a CI job can never pass by not testing
its backend.

Each function returns a *server* URL; the backend's own fixtures make a fresh
namespace on it (schema, database, key prefix, file) and clean it up.

Names: ``postgres``, ``redis``, ``mongodb``, ``oracle`` are servers;
``postgresql``, ``mongo`` and ``upstash`` (whose server is Redis) are aliases;
``libsql`` has no server but may be required, which :class:`RequiredBackendsGuard`
enforces through the ``backend(name)`` marker.
"""

from __future__ import annotations

import atexit
import functools
import os
import socket
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import pytest

__all__ = [
    "BACKENDS",
    "RequiredBackendsGuard",
    "canonical",
    "docker_available",
    "install_guard",
    "port_open",
    "required_backends",
    "server_url",
    "skip_or_fail",
    "testcontainers_enabled",
]

BACKENDS = ("postgres", "redis", "mongodb", "oracle")
"""Backends with a server that :func:`server_url` can find."""

_ALIASES = {"postgresql": "postgres", "mongo": "mongodb", "upstash": "redis"}


def canonical(backend: str) -> str:
    """``backend`` lower-cased, with aliases resolved (``upstash`` → ``redis``, ``postgresql`` → ``postgres``)."""
    name = backend.strip().lower()
    return _ALIASES.get(name, name)


def required_backends() -> set[str]:
    """The (canonical) backends named in ``WORKMEM_REQUIRE_BACKENDS``: their skips are failures."""
    return {canonical(b) for b in os.environ.get("WORKMEM_REQUIRE_BACKENDS", "").split(",") if b.strip()}


def skip_or_fail(backend: str, reason: str) -> NoReturn:
    """Skip the test, or fail it when ``backend`` is required (``WORKMEM_REQUIRE_BACKENDS``)."""
    name = canonical(backend)
    if name in required_backends():
        pytest.fail(f"SKIP NOT ALLOWED ({name} is in WORKMEM_REQUIRE_BACKENDS): {reason}", pytrace=False)
    pytest.skip(f"SKIPPED {name}: {reason}")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def testcontainers_enabled() -> bool:
    """False when ``WORKMEM_TESTCONTAINERS`` is ``0``, ``false``, ``no`` or ``off`` (CI: services are the servers)."""
    return os.environ.get("WORKMEM_TESTCONTAINERS", "1").strip().lower() not in {"0", "false", "no", "off"}


@functools.cache
def docker_available() -> bool:
    """Whether a Docker *engine* answers (the client alone is not enough)."""
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:
        return False


def _container_class(name: str, cls: str) -> Any:
    """``testcontainers.community.<name>.<cls>`` (testcontainers >= 4.14), else the older ``testcontainers.<name>``."""
    import importlib

    try:
        module = importlib.import_module(f"testcontainers.community.{name}")
    except ImportError:
        module = importlib.import_module(f"testcontainers.{name}")
    return getattr(module, cls)


def _start_container(container: Any, url_of: Callable[[Any], str]) -> str:
    container.start()
    atexit.register(container.stop)
    return url_of(container)


def _postgres_container() -> str:
    return _start_container(
        _container_class("postgres", "PostgresContainer")("postgres:17", driver=None),
        lambda c: c.get_connection_url(),
    )


def _mongodb_container() -> str:
    return _start_container(
        _container_class("mongodb", "MongoDbContainer")("mongo:8.0"), lambda c: c.get_connection_url()
    )


def _oracle_container() -> str:
    def url(c: Any) -> str:
        host, port = c.get_container_host_ip(), c.get_exposed_port(1521)
        return f"oracle://system:{c.oracle_password}@{host}:{port}/?service_name=FREEPDB1"

    return _start_container(
        _container_class("oracle", "OracleDbContainer")("gvenzl/oracle-free:23-slim-faststart"), url
    )


def _redis_container() -> str:
    return _start_container(
        _container_class("redis", "RedisContainer")("redis:7"),
        lambda c: f"redis://{c.get_container_host_ip()}:{c.get_exposed_port(6379)}",
    )


_CONTAINERS: dict[str, Callable[[], str]] = {
    "postgres": _postgres_container,
    "mongodb": _mongodb_container,
    "oracle": _oracle_container,
    "redis": _redis_container,
}

_LOCAL: dict[str, tuple[str, int, str]] = {
    "postgres": ("127.0.0.1", 5432, "postgresql://postgres@127.0.0.1:5432/postgres"),
    "redis": ("127.0.0.1", 6379, "redis://127.0.0.1:6379"),
    "mongodb": ("127.0.0.1", 27017, "mongodb://127.0.0.1:27017"),
    "oracle": ("127.0.0.1", 1521, "oracle://system:oracle@127.0.0.1:1521/?service_name=FREEPDB1"),
}

_EXAMPLES = {
    "postgres": "postgresql://user:pass@host:5432/postgres",
    "redis": "redis://host:6379",
    "mongodb": "mongodb://user:pass@host:27017",
    "oracle": "oracle://system:pass@host:1521/?service_name=FREEPDB1",
}


@functools.cache
def _find(backend: str) -> tuple[str | None, str]:
    """``(url, how it was found)`` or ``(None, what to set)``; cached, so a container starts once per session."""
    env = f"WORKMEM_{backend.upper()}_URL"
    if os.environ.get(env):
        return os.environ[env], env
    if testcontainers_enabled() and docker_available():
        return _CONTAINERS[backend](), "testcontainers"
    host, port, url = _LOCAL[backend]
    if port_open(host, port):
        return url, f"local server {host}:{port}"
    docker = (
        "start a Docker engine for testcontainers"
        if testcontainers_enabled()
        else "unset WORKMEM_TESTCONTAINERS=0 and start a Docker engine"
    )
    return None, f"no {backend} server: set {env}={_EXAMPLES[backend]}, {docker}, or run a server on {host}:{port}"


def server_url(backend: str) -> str:
    """The URL of a real ``backend`` server (``postgres``, ``redis``, ``mongodb``, ``oracle``), or skip/fail."""
    name = canonical(backend)
    if name not in _LOCAL:
        raise ValueError(f"no server for backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    url, how = _find(name)
    if url is None:
        skip_or_fail(name, how)
    return url


class RequiredBackendsGuard:
    """pytest plugin: fail the run when a required backend had no passing test marked ``backend(name)``.

    :func:`server_url` turns a required backend's skip into a failure; this
    catches the rest: a module skipped before it asked for a server (a missing
    driver, ``importorskip``), tests deselected, or none written.
    """

    def __init__(self, required: Iterable[str]) -> None:
        self.required = {canonical(b) for b in required}
        self.backends_of: dict[str, set[str]] = {}
        self.passed: Counter[str] = Counter()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            names = {canonical(str(m.args[0])) for m in item.iter_markers("backend") if m.args}
            if names:
                self.backends_of[item.nodeid] = names

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.passed.update(self.backends_of.get(report.nodeid, ()))

    def missing(self) -> list[str]:
        """Required backends without a single passing test, sorted."""
        return sorted(b for b in self.required if not self.passed[b])

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.missing() and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        missing = self.missing()
        if missing:
            terminalreporter.write_sep("=", "required backends not tested", red=True)
            for name in missing:
                terminalreporter.write_line(
                    f"{name}: WORKMEM_REQUIRE_BACKENDS names it, but no test marked backend({name!r}) passed"
                )


def install_guard(config: pytest.Config) -> RequiredBackendsGuard | None:
    """Register :class:`RequiredBackendsGuard` when ``WORKMEM_REQUIRE_BACKENDS`` is set (call from ``conftest.py``)."""
    required = required_backends()
    if not required:
        return None
    guard = RequiredBackendsGuard(required)
    config.pluginmanager.register(guard, "workmem-required-backends")
    return guard
