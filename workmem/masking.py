"""Keeping secrets out of all an exception reaches: its chain, its attributes, its traceback's locals, its pickle.

A driver's exception cannot be shown safely: psycopg's keeps the connection
(``pgconn``) whose ``info`` holds the password, httpx's keeps the request with
its ``Authorization`` header, and its traceback's frames hold the connection
string in local variables. So no workmem error keeps one:

* :func:`detach` copies a driver's exception into a :class:`~workmem.errors.DriverError`
  (class name, message with the secrets masked, SQLSTATE or error code, its own
  chain detached the same way; no traceback), the ``__cause__`` the adapters give
  their errors;
* :func:`raise_unchained` raises a workmem error without the implicit
  ``__context__`` Python would give it (the driver's exception being handled);
* :func:`forget_locals` clears the local variables of the finished frames of a
  traceback; :func:`forgets_locals` wraps a public function that takes a URL
  (``connect()``, ``Memory()``, ...) so that an exception leaving it has them
  cleared in every frame below the caller's: they hold the URL or its password;
* :class:`Secret` holds a password, token or URL whose ``repr`` and ``str`` are
  masked, so a variable holding one shows nothing in an error tracker's
  "show locals"; ``connect()`` takes one.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, NoReturn, ParamSpec, TypeVar

from workmem.errors import DriverError
from workmem.urls import MASK, mask_secrets, mask_url

__all__ = ["Secret", "detach", "forget_locals", "forgets_locals", "forgets_locals_async", "raise_unchained"]

P = ParamSpec("P")
R = TypeVar("R")

_MAX_CHAIN = 8
"""How many exceptions of a driver's own chain :func:`detach` follows."""


def _class_name(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a driver's broken __str__: the class name says enough
        return "(no message)"


def _code(exc: BaseException) -> int | str | None:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int | str) and not isinstance(code, bool) else None


def detach(exc: BaseException, *secrets: str | None, code: int | str | None = None) -> DriverError:
    """A :class:`~workmem.errors.DriverError` standing in for ``exc``: text and codes only, ``secrets`` masked.

    ``code`` overrides the driver's own ``exc.code`` (Oracle keeps it in its
    first argument). The cause and context of ``exc`` are detached too, up to
    a few deep; the stand-in has no traceback.
    """
    return _detached(exc, secrets, code, _MAX_CHAIN)


def _detached(exc: BaseException, secrets: tuple[str | None, ...], code: int | str | None, depth: int) -> DriverError:
    if isinstance(exc, DriverError):
        stand_in = DriverError(exc.driver, exc.message, sqlstate=exc.sqlstate, code=exc.code)
    else:
        sqlstate = getattr(exc, "sqlstate", None)
        stand_in = DriverError(
            _class_name(exc),
            mask_secrets(_text(exc), *secrets),
            sqlstate=sqlstate if isinstance(sqlstate, str) else None,
            code=_code(exc) if code is None else code,
        )
    if depth > 1:
        if exc.__cause__ is not None:
            stand_in.__cause__ = _detached(exc.__cause__, secrets, None, depth - 1)
        if exc.__context__ is not None and exc.__context__ is not exc.__cause__:
            stand_in.__context__ = _detached(exc.__context__, secrets, None, depth - 1)
    stand_in.__suppress_context__ = exc.__suppress_context__
    return stand_in


def raise_unchained(error: BaseException) -> NoReturn:
    """Raise ``error`` with no implicit ``__context__`` (its ``__cause__``, if any, stays).

    Raised inside an ``except`` block, an exception gets the one being handled
    as its ``__context__``: a driver's live exception, which must not be
    reachable from a workmem error. Re-raising with a bare ``raise`` sets no
    new context.
    """
    try:
        raise error
    except BaseException:
        error.__context__ = None
        raise


def forget_locals(tb: TracebackType | None) -> None:
    """Clear the local variables of every finished frame of ``tb`` (the running ones are left as they are).

    The traceback still shows every file, line and function; only the values
    an error tracker's "show locals" would record are gone. Only the error's
    own traceback: an exception it chains may come from the caller's frames.
    """
    for frame, _ in traceback.walk_tb(tb):
        with contextlib.suppress(RuntimeError):  # a frame still running (the caller's own) cannot be cleared
            frame.clear()


def forgets_locals(function: Callable[P, R]) -> Callable[P, R]:
    """``function``, clearing on the way out of an exception the local variables of every frame it ran.

    The wrapped function's arguments (a URL, a password option) are what the
    caller passed, and the frames below it copy them into their variables;
    none of them shows in the traceback's "show locals" afterwards. The
    caller's own frames are left alone.
    """

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except BaseException as error:
            forget_locals(error.__traceback__)
            del args, kwargs
            raise

    return call


def forgets_locals_async(function: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """:func:`forgets_locals` for a coroutine function."""

    @functools.wraps(function)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await function(*args, **kwargs)
        except BaseException as error:
            forget_locals(error.__traceback__)
            del args, kwargs
            raise

    return call


class Secret:
    """A password, token or URL holding one, whose ``repr`` and ``str`` never show it: ``reveal()`` does.

    ``Secret("postgresql://app:pw@db/agents")`` shows as
    ``Secret('postgresql://app:***@db/agents')``, a bare token as
    ``Secret('***')``; a variable holding one shows only that wherever a
    traceback's local variables are recorded. It refuses to be pickled.
    ``workmem.connect()`` and ``connect_async()`` take one as the URL.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"a Secret holds a str, not {type(value).__name__}")
        self._value = value

    def reveal(self) -> str:
        """The secret itself."""
        return self._value

    def __repr__(self) -> str:
        shown = mask_url(self._value) if "://" in self._value else MASK
        return f"Secret({shown if shown != self._value else MASK!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret is not pickled: it would carry the secret in the clear")
