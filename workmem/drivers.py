"""Importing a database driver on first use, with the install hint when it is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from workmem.errors import MissingDriverError

__all__ = ["import_driver"]


def import_driver(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDriverError` naming ``workmem[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDriverError(f"the {module!r} driver is not installed: pip install 'workmem[{extra}]'") from exc
