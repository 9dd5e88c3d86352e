"""The adapter kit: what every adapter needs, in the one module an adapter imports for it.

* **Lazy driver import** -- :func:`import_driver` imports a database driver on
  first use, or raises :class:`~workmem.errors.MissingDriverError` naming the
  ``pip install 'workmem[extra]'`` that fixes it, so ``import workmem`` never
  needs a driver.
* **URL secrets** -- :func:`split_userinfo` finds the user info whatever the
  password contains, :func:`encode_userinfo` rebuilds it for a driver,
  :func:`query_pairs` reads a query string without splitting a token, :func:`scheme_of`
  names the scheme,
  :func:`url_secrets` lists what must never be shown, :func:`mask_url` and
  :func:`mask_secrets` hide them in text, :func:`mask_exception` in a driver's
  exception (defined in :mod:`workmem.urls`, the ground floor the core uses too).
* **Option checks** -- :func:`check_options` refuses unknown options (a typo must
  not be ignored), :func:`check_number` a timeout or size of the wrong type or range.
* **Driver-error mapping** -- :func:`driver_error` turns a driver's exception into
  the workmem error class the caller picked, secrets masked in the message and
  in the chained cause.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

from workmem.errors import MissingDriverError, ValidationError, WorkmemError
from workmem.urls import (
    SECRET_QUERY_KEYS,
    UserInfo,
    encode_userinfo,
    mask_exception,
    mask_secrets,
    mask_url,
    query_pairs,
    scheme_of,
    split_userinfo,
    url_secrets,
)

__all__ = [
    "SECRET_QUERY_KEYS",
    "UserInfo",
    "check_number",
    "check_options",
    "driver_error",
    "encode_userinfo",
    "import_driver",
    "mask_exception",
    "mask_secrets",
    "mask_url",
    "query_pairs",
    "scheme_of",
    "split_userinfo",
    "url_secrets",
]

_INF = float("inf")


def import_driver(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDriverError` naming ``workmem[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDriverError(f"the {module!r} driver is not installed: pip install 'workmem[{extra}]'") from exc


def check_options(options: Collection[str], known: Collection[str], backend: str, what: str = "options") -> None:
    """Refuse names in ``options`` that are not ``known`` (a typo must not be ignored).

    The :class:`ValidationError` reads ``unknown <backend> <what>: a, b``.
    """
    unknown = set(options) - set(known)
    if unknown:
        raise ValidationError(f"unknown {backend} {what}: {', '.join(sorted(unknown))}")


def check_number(name: str, value: object, *, integer: bool = False, positive: bool = False, note: str = "") -> Any:
    """``value`` if a finite number (an int if ``integer``) >= 0 (> 0 if ``positive``), else :class:`ValidationError`.

    ``bool`` is refused; the message reads ``<name> must be a finite number of
    seconds >= 0<note>, not <value!r>`` (``an int`` when ``integer``).
    """
    kinds = int if integer else int | float
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not ((value > 0 if positive else value >= 0) and value < _INF)
    ):
        what = "an int" if integer else "a finite number of seconds"
        raise ValidationError(f"{name} must be {what} {'>' if positive else '>='} 0{note}, not {value!r}")
    return value


def driver_error(
    kind: Callable[[str], WorkmemError], context: str, exc: BaseException, *secrets: str | None
) -> WorkmemError:
    """A workmem error for a driver's ``exc``, secrets masked, to ``raise error from error.__cause__``.

    The message is ``<context>: <exc>``. The cause is ``exc`` with any secret
    masked in place (it is also the ``__context__`` of the raise), or ``None``
    when it cannot be masked.
    """
    masked = mask_secrets(str(exc), *secrets)
    error = kind(f"{context}: {masked}")
    error.__cause__ = exc if mask_exception(exc, *secrets) else None
    error.__suppress_context__ = True
    return error
