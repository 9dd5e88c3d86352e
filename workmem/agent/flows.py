"""The former name of :mod:`workmem.agent.operations` (the agent layer's operations); it still imports."""

from __future__ import annotations

from workmem.agent import operations as _operations
from workmem.agent.operations import *  # noqa: F403

__all__ = list(_operations.__all__)
