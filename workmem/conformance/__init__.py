"""The conformance suite: an executable specification of the storage contract.

Run it against any adapter, three ways, all on the same checks:

* ``workmem.conformance.run(url_or_factory, profile="standard") -> Report``;
* ``workmem conformance URL [--profile quick|standard|thorough] [--json FILE]``;
* pytest: ``pytest --workmem-url URL``, or subclass :class:`ConformanceTests`
  and override the ``workmem_target`` fixture.

Each way drives the sync API by default and the async one on request
(``run(..., api="async")``, ``--api async``, ``--workmem-api async``): the same
checks, each call awaited on an event loop of the suite's own
(:mod:`workmem.conformance.apis`).

Running it needs the ``conformance`` extra (Hypothesis, pytest); importing
this package does not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .profiles import PROFILES, Profile
    from .registry import Check, CheckContext, CheckSkipped, all_checks, check
    from .report import CheckResult, Report
    from .runner import run, run_check
    from .suite import ConformanceTests

__all__ = [
    "PROFILES",
    "Check",
    "CheckContext",
    "CheckResult",
    "CheckSkipped",
    "ConformanceTests",
    "Profile",
    "Report",
    "all_checks",
    "check",
    "run",
    "run_check",
]

# Imported on first use, so that the pytest plugin (which pytest loads in every run) costs nothing.
_HOMES = {
    "PROFILES": "profiles",
    "Profile": "profiles",
    "Check": "registry",
    "CheckContext": "registry",
    "CheckSkipped": "registry",
    "all_checks": "registry",
    "check": "registry",
    "CheckResult": "report",
    "Report": "report",
    "run": "runner",
    "run_check": "runner",
    "ConformanceTests": "suite",  # needs pytest
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
