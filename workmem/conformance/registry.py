"""The registry of conformance checks, defined once and run by ``run()``, the CLI and pytest.

A check is a function taking a :class:`CheckContext`; it passes by returning
and fails by raising. Checks register themselves with :func:`check`; the
modules that define them import Hypothesis, so :func:`all_checks` imports them
only when the suite runs.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from workmem.errors import MissingDriverError
from workmem.hooks import Capabilities
from workmem.storage import MemoryStorage

from .profiles import Profile
from .target import History, Target

__all__ = ["CHECK_MODULES", "Check", "CheckContext", "CheckSkipped", "all_checks", "check", "get_check"]

CapabilityName = Literal["cross_process_atomic", "persistent", "history", "erase"]

CHECK_MODULES = (
    "workmem.conformance.stateful",
    "workmem.conformance.properties",
    "workmem.conformance.corners",
    "workmem.conformance.limits",
    "workmem.conformance.bad_input",
    "workmem.conformance.concurrency",
    "workmem.conformance.creation",
    "workmem.conformance.processes",
    "workmem.conformance.linearizable",
    "workmem.conformance.churn",
    "workmem.conformance.aliasing",
    "workmem.conformance.edges",
    "workmem.conformance.bulk",
    "workmem.conformance.closing",
    "workmem.conformance.versions",
    "workmem.conformance.erasure",
)
"""The modules whose import registers the checks, in the order they run."""


class CheckSkipped(Exception):
    """Raised by an optional check that cannot run here; the message is the reason."""


@dataclass
class CheckContext:
    """What a check gets: the target, the profile and a primary connection."""

    target: Target
    profile: Profile
    _storage: MemoryStorage | None = field(default=None, repr=False)

    @property
    def storage(self) -> MemoryStorage:
        """The check's primary connection, opened on first use."""
        if self._storage is None:
            self._storage = self.target.open()
        return self._storage

    @property
    def capabilities(self) -> Capabilities:
        return self.storage.capabilities

    def open(self, *, history: History = None) -> MemoryStorage:
        """One more connection to the same namespace; ``history`` as ``connect``'s (the checks of history)."""
        return self.target.open(history=history)

    @staticmethod
    def prefix() -> str:
        """A fresh id prefix: every example works in its own namespace of ids."""
        return f"cf{uuid.uuid4().hex[:12]}-"


@dataclass(frozen=True, slots=True)
class Check:
    """One named, documented conformance check."""

    name: str
    """Stable snake_case name (used in reports, pytest test names and ``xfail``)."""
    title: str
    """One line saying what the check establishes."""
    func: Callable[[CheckContext], None] = field(repr=False)
    """The check itself."""
    capability: CapabilityName | None = None
    """The capability flag the check is gated on; ``None`` for a required check."""

    @property
    def required(self) -> bool:
        """Required checks apply to every adapter and can never be skipped."""
        return self.capability is None


_CHECKS: dict[str, Check] = {}


def check(
    name: str, title: str, *, capability: CapabilityName | None = None
) -> Callable[[Callable[[CheckContext], None]], Callable[[CheckContext], None]]:
    """Register the decorated function as the check ``name``."""

    def register(func: Callable[[CheckContext], None]) -> Callable[[CheckContext], None]:
        if name in _CHECKS:
            raise ValueError(f"conformance check {name!r} is defined twice")
        _CHECKS[name] = Check(name, title, func, capability)
        return func

    return register


def all_checks() -> list[Check]:
    """Every check, in run order (imports Hypothesis; names the ``conformance`` extra when it is missing)."""
    try:
        import hypothesis  # noqa: F401
    except ImportError as exc:
        raise MissingDriverError("the conformance suite needs Hypothesis: pip install 'workmem[conformance]'") from exc
    for module in CHECK_MODULES:
        importlib.import_module(module)
    return list(_CHECKS.values())


def get_check(name: str) -> Check:
    """The check called ``name``."""
    checks = {c.name: c for c in all_checks()}
    try:
        return checks[name]
    except KeyError:
        raise ValueError(f"no conformance check {name!r}; known: {', '.join(checks)}") from None
