"""The former name of :mod:`workmem.conformance.registry` (the registry of conformance checks); it still imports.

(``workmem.arguments`` holds the storage contract's argument checks.)
"""

from __future__ import annotations

from . import registry as _registry
from .registry import *  # noqa: F403

__all__ = list(_registry.__all__)
