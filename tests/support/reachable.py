"""Everything reachable from an exception, searched for a secret: what error trackers, "show locals" and pickle see.

:func:`secret_paths` walks, from an exception:

* the chain: ``__cause__``, ``__context__`` and an exception group's members;
* every exception's ``args``, ``__notes__``, ``__dict__`` and slots, recursively
  through the objects hanging off them (containers, a driver's connection or
  request objects: their ``__dict__``, slots and the values of their properties
  and C-level attributes, such as psycopg's ``PGconn.info``), with ``str`` and
  ``repr`` of each;
* the ``repr()`` of every local variable of every frame of every traceback in
  the chain, as an error tracker's "show locals" records them (Sentry's
  ``include_local_variables``, ``traceback.TracebackException(capture_locals=True)``),
  except the frames of the test files that caught it: what a caller holds
  in its own variables is the caller's;
* the text ``traceback.format_exception`` prints;
* the pickle of every exception in the chain (a process pool sends it), taken last:
  a ``__reduce__`` may change the exception (psycopg's drops its ``PGconn``).

It returns where each spelling of the secret (as given, percent-encoded either
way) was found; :func:`assert_unreachable` fails with that list.
"""

from __future__ import annotations

import pickle
import traceback
import types
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

__all__ = ["assert_unreachable", "chain_of", "secret_forms", "secret_paths"]

_TESTS = str(Path(__file__).resolve().parent.parent)
_SKIPPED = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.CodeType, types.FrameType)
_SCALARS = (int, float, complex, bool, type(None))
_MAX_NODES = 20_000
_MAX_DEPTH = 12


def secret_forms(secret: str) -> set[str]:
    """``secret`` as given and percent-encoded the ways a URL or a driver spells it."""
    return {form for form in (secret, quote(secret, safe=""), quote(secret), quote_plus(secret)) if form}


def chain_of(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception its ``__cause__``/``__context__`` (and group members) reach, each once."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if any(current is done for done in seen):
            continue
        seen.append(current)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        if isinstance(current, BaseExceptionGroup):
            todo += list(current.exceptions)
    return seen


def _safe(render: object, value: object) -> str:
    try:
        return str(render(value))  # type: ignore[operator]
    except Exception as exc:  # a broken __repr__ must not stop the search
        return f"<unrenderable: {type(exc).__name__}>"


def _attributes(obj: object) -> Iterator[tuple[str, object]]:
    """``(name, value)`` of an object's ``__dict__``, slots, properties and C-level attributes (errors skipped)."""
    names: dict[str, None] = {}
    instance_dict = getattr(obj, "__dict__", None)
    if isinstance(instance_dict, dict):
        names.update(dict.fromkeys(k for k in instance_dict if isinstance(k, str)))
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update(dict.fromkeys([slots] if isinstance(slots, str) else slots))
        for name, attribute in klass.__dict__.items():
            descriptor = (property, types.GetSetDescriptorType, types.MemberDescriptorType)
            if isinstance(attribute, descriptor) and name not in ("__dict__", "__weakref__"):
                names[name] = None
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a deprecated property (httpx's URL.raw) is searched all the same
                value = getattr(obj, name)
        except Exception:  # a property that needs state the object lacks
            continue
        yield name, value


class _Search:
    def __init__(self, forms: set[str]) -> None:
        self.forms = forms
        self.byte_forms = {form.encode() for form in forms}
        self.found: list[str] = []
        self.seen: set[int] = set()
        self.keep: list[object] = []  # visited objects stay alive, so their ids stay theirs

    def text(self, where: str, text: str | bytes) -> None:
        forms: Iterable[str | bytes] = self.forms if isinstance(text, str) else self.byte_forms
        if any(form in text for form in forms):  # type: ignore[operator]
            self.found.append(f"{where}: {text[:300]!r}")

    def frames(self, where: str, tb: types.TracebackType | None) -> None:
        for frame, _ in traceback.walk_tb(tb):
            code = frame.f_code
            if code.co_filename.startswith(_TESTS):
                continue  # the caller's own variables
            for name, value in frame.f_locals.items():
                self.text(f"{where} frame {code.co_qualname} local {name}", _safe(repr, value))

    def walk(self, where: str, obj: object, depth: int = 0) -> None:
        if isinstance(obj, _SCALARS) or id(obj) in self.seen or len(self.seen) > _MAX_NODES or depth > _MAX_DEPTH:
            return
        self.seen.add(id(obj))
        self.keep.append(obj)
        if isinstance(obj, str | bytes | bytearray):
            self.text(where, bytes(obj) if isinstance(obj, bytearray) else obj)
            return
        if isinstance(obj, memoryview):
            self.text(where, obj.tobytes())
            return
        if isinstance(obj, types.TracebackType):
            self.frames(where, obj)
            return
        if isinstance(obj, _SKIPPED):
            return
        if isinstance(obj, types.MethodType):
            self.walk(f"{where}.__self__", obj.__self__, depth + 1)
            return
        self.text(f"repr({where})", _safe(repr, obj))
        self.text(f"str({where})", _safe(str, obj))
        if isinstance(obj, dict):
            for key, value in list(obj.items()):
                self.walk(f"{where} key", key, depth + 1)
                self.walk(f"{where}[{key!r}]", value, depth + 1)
            return
        if isinstance(obj, list | tuple | set | frozenset):
            for i, value in enumerate(list(obj)):
                self.walk(f"{where}[{i}]", value, depth + 1)
            return
        if isinstance(obj, BaseException):
            self.walk(f"{where}.args", obj.args, depth + 1)
            self.walk(f"{where}.__notes__", getattr(obj, "__notes__", None), depth + 1)
            self.frames(f"{where}.__traceback__", obj.__traceback__)
        for name, value in _attributes(obj):
            if name not in ("__cause__", "__context__", "__traceback__", "args", "__notes__"):
                self.walk(f"{where}.{name}", value, depth + 1)


def secret_paths(exc: BaseException, secret: str) -> list[str]:
    """Where any spelling of ``secret`` is reachable from ``exc`` (empty: nowhere)."""
    search = _Search(secret_forms(secret))
    for i, e in enumerate(chain_of(exc)):
        search.walk(f"chain[{i}] {type(e).__qualname__}", e)
    search.text("format_exception", "".join(traceback.format_exception(exc)))
    for i, e in enumerate(chain_of(exc)):  # last: a __reduce__ may change the exception (psycopg drops its pgconn)
        try:
            search.text(f"pickle(chain[{i}] {type(e).__qualname__})", pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # not picklable: nothing leaves the process that way
            continue
    return search.found


def assert_unreachable(exc: BaseException, secret: str) -> None:
    """Fail, naming every place, if ``secret`` is reachable from ``exc``."""
    found = secret_paths(exc, secret)
    assert not found, f"{len(found)} place(s) reachable from {type(exc).__name__} hold the secret:\n" + "\n".join(
        found[:25]
    )
