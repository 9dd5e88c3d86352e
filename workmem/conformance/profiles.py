"""How hard the conformance suite tries: the ``quick``, ``standard`` and ``thorough`` profiles.

A profile sets the Hypothesis example and step counts, how many rounds the
concurrency checks race, how many calls the linearizability check's workers
make and how long failures are shrunk. ``standard`` (the default; CI runs it) is derandomized so a
run is reproducible and sized so the whole suite stays under a minute against an in-process backend.
``ci`` is its former name, still accepted (:data:`ALIASES`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hypothesis import settings

__all__ = ["ALIASES", "DEFAULT_PROFILE", "PROFILES", "Profile", "get_profile", "shrink_budget"]


@dataclass(frozen=True, slots=True)
class Profile:
    """Sizes for one run of the suite."""

    name: str
    """``quick``, ``standard`` or ``thorough``."""
    max_examples: int
    """Hypothesis examples per property check."""
    stateful_examples: int
    """Hypothesis examples (random operation sequences) of the state machine."""
    stateful_steps: int
    """Operations per state-machine example."""
    race_rounds: int
    """Repetitions of each concurrency race."""
    derandomize: bool
    """Whether Hypothesis runs a fixed, reproducible sequence of examples."""
    shrink_seconds: int = 5
    """How long Hypothesis may shrink one failure (a remote backend makes each try slow); 0: not at all."""
    shrink_total_seconds: int | None = None
    """How long a whole ``run()`` may spend on failing checks before later failures go unshrunk; ``None``: no cap."""
    history_calls: int = 40
    """Calls each worker of the linearizability check makes per round (``race_rounds`` rounds)."""
    history_seconds: float | None = None
    """How long a worker of that check may go on making them (a slow backend makes fewer); ``None``: no limit."""

    def settings(self, *, max_examples: int | None = None, steps: int | None = None) -> settings:
        """Hypothesis settings of this profile; no example database, no deadline (remote backends are slow)."""
        from hypothesis import HealthCheck, Phase, settings

        return settings(
            max_examples=self.max_examples if max_examples is None else max_examples,
            stateful_step_count=self.stateful_steps if steps is None else steps,
            derandomize=self.derandomize,
            deadline=None,
            database=None,
            print_blob=False,
            phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
            + ((Phase.shrink,) if self.shrink_seconds > 0 else ()),
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
            report_multiple_bugs=False,
        )


PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", 8, 10, 15, race_rounds=1, derandomize=False, shrink_total_seconds=15, history_seconds=1),
    "standard": Profile(
        "standard",
        25,
        40,
        30,
        race_rounds=3,
        derandomize=True,
        shrink_total_seconds=20,
        history_calls=120,
        history_seconds=2,
    ),
    "thorough": Profile(
        "thorough", 200, 300, 60, race_rounds=10, derandomize=False, shrink_seconds=120, history_calls=400
    ),
}
"""name -> profile; the positional numbers are max_examples, stateful_examples, stateful_steps.

``standard`` shrinks each failure for at most 5 s and a whole run for about 20 s, so
that a run against a failing adapter still ends within a minute; ``thorough``
shrinks each failure for up to two minutes.
"""


_SLOW_SHRINK_WARNING = "WARNING: Hypothesis has spent more than five minutes working to shrink"


@contextmanager
def shrink_budget(seconds: int) -> Iterator[None]:
    """Limit Hypothesis's shrinking time (a module constant Hypothesis documents as monkeypatchable).

    When the budget runs out Hypothesis prints that it spent "more than five
    minutes" shrinking and asks for a bug report; that is our own limit, not
    slow shrinking, so the warning is dropped (the failure is reported as usual).
    """
    from hypothesis.internal.conjecture import engine
    from hypothesis.reporting import current_reporter, with_reporter

    outer = current_reporter()

    def reporter(value: object) -> None:
        if not (isinstance(value, str) and value.startswith(_SLOW_SHRINK_WARNING)):
            outer(value)

    saved = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = seconds
    try:
        with with_reporter(reporter):
            yield
    finally:
        engine.MAX_SHRINKING_SECONDS = saved


DEFAULT_PROFILE = "standard"
"""The profile a run uses when none is named."""
ALIASES: dict[str, str] = {"ci": "standard"}
"""Former profile names, still accepted: ``ci`` named a place, not a size."""


def get_profile(name: str | Profile) -> Profile:
    """The profile called ``name`` (or a former name of it, :data:`ALIASES`); ``ValueError`` naming the choices."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[ALIASES.get(name, name)]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}") from None
