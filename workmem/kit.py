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
  :func:`mask_secrets` hide them in a URL and in text (defined in
  :mod:`workmem.urls`, the ground floor the core uses too).
* **Option checks** -- :func:`check_options` refuses unknown options (a typo must
  not be ignored), :func:`check_number` a timeout or size of the wrong type or range.
* **Driver-error mapping** -- :func:`driver_error` turns a driver's exception into
  the workmem error class the caller picked, secrets masked in the message, its
  cause a :class:`~workmem.errors.DriverError` (:func:`detach`) instead of the
  driver's live exception; :func:`raise_unchained` raises it without the
  driver's exception as its implicit ``__context__`` (defined in
  :mod:`workmem.masking`). Nothing reachable from the error -- chain,
  attributes, traceback, pickle -- holds a secret.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

from workmem.errors import DriverError, MissingDriverError, ValidationError, WorkmemError
from workmem.masking import Secret, detach, raise_unchained
from workmem.urls import (
    SECRET_QUERY_KEYS,
    UserInfo,
    encode_userinfo,
    mask_secrets,
    mask_url,
    query_pairs,
    scheme_of,
    split_userinfo,
    url_secrets,
)

__all__ = [
    "SECRET_QUERY_KEYS",
    "DriverError",
    "Secret",
    "UserInfo",
    "check_number",
    "check_options",
    "detach",
    "driver_error",
    "encode_userinfo",
    "import_driver",
    "mask_secrets",
    "mask_url",
    "query_pairs",
    "raise_unchained",
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
    kind: Callable[[str], WorkmemError],
    context: str,
    exc: BaseException,
    *secrets: str | None,
    code: int | str | None = None,
) -> WorkmemError:
    """A workmem error of class ``kind`` for a driver's ``exc``, to raise with :func:`raise_unchained`.

    The message is ``<context>: <exc>``, the secrets masked in the driver's
    text (``context`` is the adapter's own, a URL in it already masked by
    :func:`mask_url`). The cause is :func:`detach` of ``exc`` (``code``
    overriding the driver's), never ``exc`` itself.
    """
    cause = detach(exc, *secrets, code=code)
    error = kind(f"{context}: {cause.message}")
    error.__cause__ = cause
    return error
