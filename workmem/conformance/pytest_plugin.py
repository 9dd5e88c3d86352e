"""pytest plugin of the conformance suite (registered through the ``pytest11`` entry point).

* ``pytest --workmem-url URL`` runs the suite against ``URL``: with no paths
  on the command line only the suite is collected, otherwise it is collected
  next to the given paths.
* ``WORKMEM_CONFORMANCE_URL=URL pytest`` collects the suite next to whatever
  pytest collects anyway: a variable in the environment never takes a
  project's own tests out of its run. (``WORKMEM_URL``, which applications
  use for their own storage, means nothing to the plugin.)
* Either way the run's header names the URL (masked), the profile and the API.
* After collection, one line per collected ``ConformanceTests`` subclass names
  its profile and API (``workmem conformance: tests/test_x.py::TestMine, profile
  ci, sync API``): what a class runs shows in the output, whoever set it.
* ``--workmem-profile quick|ci|thorough`` picks the profile (default ``ci``).
* ``--workmem-api sync|async`` (or ``WORKMEM_CONFORMANCE_API``) picks the API the
  checks drive, for the URL's suite and every ``ConformanceTests`` subclass that
  does not pin its own ``workmem_api`` (default ``sync``); the header names it.
* Any collected :class:`~workmem.conformance.ConformanceTests` subclass whose
  standard check was swapped for another function fails the collection.

With neither option nor variable the plugin adds nothing to the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .profiles import DEFAULT_PROFILE
from .suite import API_ENV, STATUS_PROPERTY, URL_ENV, configured_api, configured_url
from .target import masked

__all__ = ["SUITE_MODULE"]

SUITE_MODULE = Path(__file__).with_name("url_suite.py")
"""The module collected for ``--workmem-url``: one ``ConformanceTests`` subclass using that URL."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("workmem", "workmem conformance suite")
    group.addoption(
        "--workmem-url",
        dest="workmem_url",
        default=None,
        metavar="URL",
        help="run the workmem conformance suite against this backend URL (or set WORKMEM_CONFORMANCE_URL)",
    )
    group.addoption(
        "--workmem-profile",
        dest="workmem_profile",
        default=None,
        choices=["quick", "standard", "thorough", "ci"],
        help="conformance profile: quick, standard (default) or thorough (ci: the former name of standard)",
    )
    group.addoption(
        "--workmem-api",
        dest="workmem_api",
        default=None,
        choices=["sync", "async"],
        help=f"the API the conformance checks drive: sync (default) or async (or set {API_ENV})",
    )


def pytest_configure(config: pytest.Config) -> None:
    configured_api(config)  # a wrong WORKMEM_CONFORMANCE_API is a usage error before anything runs
    if configured_url(config) is None:
        return
    explicit_paths = config.args_source == pytest.Config.ArgsSource.ARGS
    if config.getoption("workmem_url") and not explicit_paths:
        config.args[:] = [str(SUITE_MODULE)]  # `pytest --workmem-url URL` alone: the suite only
    else:
        config.args.append(str(SUITE_MODULE))


def pytest_report_header(config: pytest.Config) -> str | None:
    url, api = configured_url(config), configured_api(config)
    if url is None:  # the API alone, when one was asked for: it applies to every ConformanceTests class
        option = config.getoption("workmem_api", default=None)
        if not (option or os.environ.get(API_ENV)):
            return None
        return f"workmem conformance suite: {api} API (from {'--workmem-api' if option else API_ENV})"
    source = "--workmem-url" if config.getoption("workmem_url") else URL_ENV
    profile = config.getoption("workmem_profile") or DEFAULT_PROFILE
    return f"workmem conformance suite: {masked(url)} (from {source}), profile {profile}, {api} API"


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path, items: list[pytest.Item]) -> list[str]:
    """One line per collected ``ConformanceTests`` subclass: its profile and API, as its checks will run."""
    lines: dict[str, str] = {}
    for item in items:
        cls = getattr(item, "cls", None)
        if not (isinstance(cls, type) and getattr(cls, "__workmem_conformance__", False)):
            continue
        where = item.nodeid.rsplit("::", 1)[0]
        if where not in lines:
            profile = (
                getattr(cls, "workmem_profile", None)
                or config.getoption("workmem_profile", default=None)
                or DEFAULT_PROFILE
            )
            api = getattr(cls, "workmem_api", None) or configured_api(config)
            lines[where] = f"workmem conformance: {where}, profile {profile}, {api} API"
    return list(lines.values())


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A check that met a harness error or an unsupported operation is counted as such, not as failed or skipped."""
    if report.when != "call":
        return None
    status = dict(report.user_properties).get(STATUS_PROPERTY)
    if status == "harness_error":
        return "harness error", "H", "HARNESS ERROR"
    if status == "unsupported":
        return "unsupported", "U", "UNSUPPORTED"
    return None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    classes: set[type] = {cls for cls in (getattr(item, "cls", None) for item in items) if isinstance(cls, type)}
    suites = [cls for cls in classes if getattr(cls, "__workmem_conformance__", False)]
    if not suites:
        return
    from .suite import overridden_checks

    for cls in suites:
        bad = overridden_checks(cls)
        if bad:
            raise pytest.UsageError(
                f"{cls.__qualname__} replaces the standard conformance check(s) {', '.join(bad)}; "
                "only an explicit xfail = {'check_name': 'reason'} is allowed"
            )
