"""pytest plugin of the conformance suite (registered through the ``pytest11`` entry point).

* ``pytest --workmem-url URL`` (or ``WORKMEM_URL=URL pytest``) runs the suite
  against ``URL``: with no paths on the command line only the suite is
  collected, otherwise it is collected next to the given paths.
* ``--workmem-profile quick|ci|thorough`` picks the profile (default ``ci``).
* Any collected :class:`~workmem.conformance.ConformanceTests` subclass whose
  standard check was swapped for another function fails the collection.

With neither option nor variable the plugin adds nothing to the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
        help="run the workmem conformance suite against this backend URL (or set WORKMEM_URL)",
    )
    group.addoption(
        "--workmem-profile",
        dest="workmem_profile",
        default=None,
        choices=["quick", "ci", "thorough"],
        help="conformance profile: quick, ci (default) or thorough",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not (config.getoption("workmem_url") or os.environ.get("WORKMEM_URL")):
        return
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(str(SUITE_MODULE))
    else:
        config.args[:] = [str(SUITE_MODULE)]


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
