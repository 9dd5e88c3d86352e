"""The former name of :mod:`workmem.arguments` (the contract's argument checks); it still imports.

New code imports from :mod:`workmem.arguments`, or, in an adapter, from :mod:`workmem.kit`.
"""

from __future__ import annotations

from workmem import arguments as _arguments
from workmem.arguments import *  # noqa: F403
from workmem.hooks import ListQuery, ScopeTarget

__all__ = [*_arguments.__all__, "ListQuery", "ScopeTarget"]
