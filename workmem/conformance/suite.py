"""``ConformanceTests``: the pytest face of the suite, one collected test per check.

Subclass it in a test module and override the ``workmem_target`` fixture to
return a URL or a factory of connections to a fresh namespace::

    class TestMyBackend(ConformanceTests):
        xfail = {"cross_process_atomic": "the demo server runs one process"}
        workmem_api = "async"  # optional: else --workmem-api / WORKMEM_CONFORMANCE_API, else sync

        @pytest.fixture
        def workmem_target(self) -> str:
            return "mybackend://localhost/test"

A subclass may not replace a standard check: the only way to deviate is an
entry in ``xfail`` naming the check and the reason. Defining a method with a
check's test name raises ``TypeError`` when the class is created, and the
pytest plugin fails collection if one is swapped in afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pytest

from .apis import Api, check_api
from .profiles import DEFAULT_PROFILE
from .registry import Check, all_checks
from .runner import run_check
from .target import TargetLike

__all__ = ["ConformanceTests", "configured_api", "configured_url", "method_name", "overridden_checks"]

URL_OPTION = "--workmem-url"
PROFILE_OPTION = "--workmem-profile"
URL_ENV = "WORKMEM_CONFORMANCE_URL"  # not WORKMEM_URL: applications use that one for their own storage
API_OPTION = "--workmem-api"
API_ENV = "WORKMEM_CONFORMANCE_API"
CHECK_ATTR = "__workmem_check__"


def method_name(check: Check) -> str:
    return f"test_{check.name}"


def configured_url(config: pytest.Config) -> str | None:
    """The URL given with ``--workmem-url`` or ``WORKMEM_CONFORMANCE_URL``, if any."""
    url = config.getoption("workmem_url", default=None) or os.environ.get(URL_ENV)
    return url or None


def configured_api(config: pytest.Config) -> Api:
    """The API given with ``--workmem-api`` or ``WORKMEM_CONFORMANCE_API``; else ``sync``."""
    api = config.getoption("workmem_api", default=None) or os.environ.get(API_ENV) or "sync"
    try:
        return check_api(api)
    except ValueError as exc:
        raise pytest.UsageError(f"{API_ENV}: {exc}") from None


STATUS_PROPERTY = "workmem_status"
"""The user property each check's test records its status under (the plugin names harness errors by it)."""


def _make_test(check: Check) -> Callable[..., None]:
    def test(self: ConformanceTests, workmem_target: TargetLike, request: pytest.FixtureRequest) -> None:
        cls = type(self)
        profile = cls.workmem_profile or request.config.getoption("workmem_profile", default=None) or DEFAULT_PROFILE
        api = cls.workmem_api or configured_api(request.config)
        result = run_check(check, workmem_target, profile=profile, xfail=cls.xfail.get(check.name), api=api)
        request.node.user_properties.append((STATUS_PROPERTY, result.status))  # the plugin shows the last two
        if result.status == "harness_error":
            pytest.fail(f"harness error, no verdict: {result.reason}", pytrace=False)
        elif result.status == "unsupported":
            pytest.skip(f"not supported: {result.reason}")
        elif result.status == "failed":
            pytest.fail(result.reason or "failed", pytrace=False)
        elif result.status == "skipped":
            pytest.skip(result.reason or "skipped")
        elif result.status == "xfailed":
            pytest.xfail(result.reason or "xfailed")

    test.__name__ = test.__qualname__ = method_name(check)
    test.__doc__ = check.title
    setattr(test, CHECK_ATTR, check.name)
    return test


class ConformanceTests:
    """Base class of a backend's conformance test class (not collected itself: no ``Test`` prefix)."""

    __workmem_conformance__: ClassVar[bool] = True

    xfail: ClassVar[Mapping[str, str]] = {}
    """Checks this backend is expected to fail, each with the reason; the only allowed deviation."""

    workmem_profile: ClassVar[str | None] = None
    """Profile for this class; else ``--workmem-profile``; else ``ci``."""

    workmem_api: ClassVar[Api | None] = None
    """API for this class (``sync`` or ``async``); else ``--workmem-api`` / ``WORKMEM_CONFORMANCE_API``; else sync.
    With ``async`` the ``workmem_target`` fixture may also return an async factory."""

    @pytest.fixture
    def workmem_target(self, request: pytest.FixtureRequest) -> TargetLike:
        """Override: return a URL or a factory of connections to a fresh namespace."""
        url = configured_url(request.config)
        if url is None:
            pytest.fail(
                f"override the workmem_target fixture of {type(self).__name__} or pass {URL_OPTION}", pytrace=False
            )
        return url

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        standard = {method_name(c): c.name for c in all_checks()}
        overridden = sorted(name for name in vars(cls) if name in standard)
        if overridden:
            raise TypeError(
                f"{cls.__qualname__} overrides the standard conformance check(s) {', '.join(overridden)}; "
                "standard checks cannot be replaced: declare them in xfail = {'check_name': 'reason'} instead"
            )
        if cls.workmem_api is not None:
            try:
                check_api(cls.workmem_api)
            except ValueError as exc:
                raise TypeError(f"{cls.__qualname__}.workmem_api: {exc}") from None
        names = set(standard.values())
        for name, reason in dict(cls.xfail).items():
            if name not in names:
                raise TypeError(f"{cls.__qualname__}.xfail names an unknown check {name!r}")
            if not isinstance(reason, str) or not reason.strip():
                raise TypeError(f"{cls.__qualname__}.xfail[{name!r}] needs a reason")


def overridden_checks(cls: type) -> list[str]:
    """Standard check tests of ``cls`` that are not the suite's own functions (for the plugin)."""
    bad = []
    for check in all_checks():
        func = getattr(cls, method_name(check), None)
        if getattr(func, CHECK_ATTR, None) != check.name:
            bad.append(method_name(check))
    return bad


for _check in all_checks():
    setattr(ConformanceTests, method_name(_check), _make_test(_check))
del _check
