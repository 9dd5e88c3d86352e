"""Picking an adapter by URL scheme.

Lookup order: schemes registered with :func:`register`, then the built-in
adapters (imported on first use), then the ``workmem.adapters`` entry-point
group of installed distributions.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from workmem.aio import AsyncMemoryStorage, ThreadedAsyncStorage, opened_in_thread
from workmem.arguments import check_create
from workmem.errors import MissingDriverError, OperationNotSupportedError, UnknownSchemeError, ValidationError
from workmem.history import HistoryPolicy, check_history
from workmem.hooks import StorageHooks
from workmem.masking import Secret, forgets_locals, forgets_locals_async
from workmem.storage import MemoryStorage
from workmem.urls import mask_url, scheme_of

__all__ = [
    "ENTRY_POINT_GROUP",
    "AdapterSpec",
    "builtin_schemes",
    "connect",
    "connect_async",
    "known_schemes",
    "register",
    "resolve",
]

ENTRY_POINT_GROUP = "workmem.adapters"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


@dataclass(frozen=True, slots=True)
class AdapterSpec:
    """Where an adapter class lives and which extra installs its driver."""

    target: str
    """``"module:Class"``; the class has a ``from_url(url, **options)`` classmethod."""
    extra: str | None = None
    """The ``pip install 'workmem[extra]'`` that brings its driver, if any."""


_LIBSQL = AdapterSpec("workmem.adapters.libsql:LibSQLStorage", "libsql")
_POSTGRES = AdapterSpec("workmem.adapters.postgres:PostgresStorage", "postgres")
_ORACLE = AdapterSpec("workmem.adapters.oracle:OracleStorage", "oracle")
_UPSTASH = AdapterSpec("workmem.adapters.upstash:UpstashStorage", "upstash")
_MONGODB = AdapterSpec("workmem.adapters.mongodb:MongoStorage", "mongodb")

MASTRA_SCHEMES = (
    "mastra+pg",
    "mastra+postgres",
    "mastra+postgresql",
    "mastra+file",
    "mastra+libsql",
    "mastra+libsql+http",
    "mastra+libsql+https",
    "mastra+libsql+ws",
    "mastra+libsql+wss",
    "mastra+upstash+http",
    "mastra+upstash+https",
)
"""The published TypeScript Mastra stores, run through the wire protocol (:mod:`workmem.adapters.wire.mastra`)."""

_BUILTIN: Mapping[str, AdapterSpec] = MappingProxyType(
    {
        "memory": AdapterSpec("workmem.adapters.reference:ReferenceStorage"),
        "file": _LIBSQL,
        "libsql": _LIBSQL,
        "libsql+http": _LIBSQL,
        "libsql+https": _LIBSQL,
        "libsql+ws": _LIBSQL,
        "libsql+wss": _LIBSQL,
        "postgresql": _POSTGRES,
        "postgres": _POSTGRES,
        "postgresql+psycopg": _POSTGRES,
        "oracle": _ORACLE,
        "oracle+oracledb": _ORACLE,
        "upstash": _UPSTASH,
        "upstash+http": _UPSTASH,
        "upstash+https": _UPSTASH,
        "mongodb": _MONGODB,
        "mongodb+srv": _MONGODB,
        "wire": AdapterSpec("workmem.adapters.wire:WireStorage"),
        **dict.fromkeys(MASTRA_SCHEMES, AdapterSpec("workmem.adapters.wire.mastra:MastraStorage")),
    }
)

_registered: dict[str, AdapterSpec] = {}
_lock = threading.Lock()


def builtin_schemes() -> Mapping[str, AdapterSpec]:
    """The schemes workmem itself provides (read-only view)."""
    return _BUILTIN


def register(scheme: str, target: str, *, extra: str | None = None, clobber: bool = False) -> None:
    """Make ``connect()`` use the class at ``target`` (``"module:Class"``) for ``scheme``.

    Refuses to replace an existing registration or built-in scheme unless ``clobber=True``.
    Bad arguments raise :class:`~workmem.errors.ValidationError`; the target is imported by
    ``connect()``, which raises :class:`~workmem.errors.MissingDriverError` when it cannot be
    imported and :class:`~workmem.errors.UnknownSchemeError` when it is no ``MemoryStorage`` class.
    """
    if not isinstance(scheme, str) or not scheme:
        raise ValidationError(f"scheme must be a non-empty str, not {scheme!r}")
    if not _SCHEME.fullmatch(scheme):  # what a URL's scheme can be (RFC 3986), else connect() never finds it
        raise ValidationError(f"scheme must be a letter, then letters, digits, '+', '-' or '.', not {scheme!r}")
    module_name, colon, class_name = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not (colon and module_name and class_name):
        raise ValidationError(f"target must look like 'module:Class', not {target!r}")
    if extra is not None and not isinstance(extra, str):
        raise ValidationError(f"extra must be a str or None, not {type(extra).__name__}")
    if not isinstance(clobber, bool):
        raise ValidationError(f"clobber must be a bool, not {type(clobber).__name__}")
    scheme = scheme.lower()
    with _lock:
        if not clobber and (scheme in _registered or scheme in _BUILTIN):
            raise ValidationError(f"scheme {scheme!r} is already registered; pass clobber=True to replace it")
        _registered[scheme] = AdapterSpec(target, extra)


def _entry_point_specs() -> dict[str, AdapterSpec]:
    return {ep.name.lower(): AdapterSpec(ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_schemes() -> list[str]:
    """Every scheme ``connect()`` accepts right now, sorted."""
    with _lock:
        registered = set(_registered)
    return sorted(registered | set(_BUILTIN) | set(_entry_point_specs()))


def _spec_for(scheme: str) -> AdapterSpec:
    with _lock:
        spec = _registered.get(scheme)
    if spec is None:
        spec = _BUILTIN.get(scheme) or _entry_point_specs().get(scheme)
    if spec is None:
        raise UnknownSchemeError(f"no adapter for scheme {scheme!r}; known schemes: {', '.join(known_schemes())}")
    return spec


def resolve(url: str) -> type[MemoryStorage]:
    """The adapter class ``connect(url)`` would use, imported."""
    spec = _spec_for(scheme_of(url))
    module_name, _, class_name = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # not installed, or the module failed while importing
        if isinstance(exc, ImportError) and spec.extra is not None and module_name.startswith("workmem."):
            raise MissingDriverError(
                f"{mask_url(url)} needs the {spec.extra!r} extra: pip install 'workmem[{spec.extra}]' ({exc})"
            ) from exc
        raise MissingDriverError(
            f"the adapter {spec.target} for {mask_url(url)} cannot be imported: {type(exc).__name__}: {exc}"
        ) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, MemoryStorage)):
        found = "not there" if cls is None else f"a {type(cls).__name__}"
        raise UnknownSchemeError(f"the adapter {spec.target} for {mask_url(url)} is no MemoryStorage class ({found})")
    return cls


def _checked_url(url: str | os.PathLike[str] | Secret, create: bool, options: dict[str, Any]) -> str:
    """``url`` as a string ``connect`` can resolve (a path made a libSQL file name); ``create`` put into ``options``.

    A :class:`~workmem.masking.Secret` is revealed, here and in ``options``.
    """
    if isinstance(url, Secret):
        url = url.reveal()
    if isinstance(url, os.PathLike):  # a pathlib.Path: a libSQL database file, whatever its name looks like
        path = os.fspath(url)
        url = path if not isinstance(path, str) or os.path.isabs(path) else os.path.join(os.curdir, path)
    if not isinstance(url, str) or not url:
        raise UnknownSchemeError(
            "connect() needs a URL such as 'file:agent.db' or 'postgresql://host/db' (or a path of a libSQL file)"
        )
    if "\x00" in url:
        raise ValidationError("the URL contains a NUL character")
    if not check_create(create):
        options["create"] = False
    for name, value in options.items():
        if isinstance(value, Secret):
            options[name] = value.reveal()
    return url


@contextmanager
def _encodable(url: str) -> Iterator[None]:
    try:
        yield
    except UnicodeError as exc:  # a host name IDNA cannot encode (a label over 63 characters, ...)
        raise ValidationError(f"a host name in {mask_url(url)} cannot be encoded: {exc}") from None


def _history_refused(storage: StorageHooks, policy: HistoryPolicy | None) -> OperationNotSupportedError | None:
    """The error when ``policy`` asks for history and ``storage`` has none; else ``storage`` is set to record by it."""
    if policy is None:
        return None
    if not storage.capabilities.history:
        return OperationNotSupportedError(f"working memory history on {type(storage).__name__}")
    try:
        storage.history = policy
    except OperationNotSupportedError as refused:  # this server cannot (MongoDB without transactions)
        return refused
    return None


@forgets_locals
def connect(
    url: str | os.PathLike[str] | Secret,
    *,
    create: bool = True,
    history: bool | int | HistoryPolicy | None = None,
    **options: Any,
) -> MemoryStorage:
    """Open the adapter for ``url``, creating missing tables and indexes (unless ``create=False``).

    ``history``: record every change of working memory as a version (``True``: keep all;
    an ``int`` N: keep the newest N of each working memory; ``None``/``False``: off, the
    default). See :meth:`~workmem.storage.MemoryStorage.working_memory_history`; an
    adapter without history raises :class:`~workmem.errors.OperationNotSupportedError`.

    ``create=False`` creates and changes nothing, for read-only credentials or files; the
    tables must exist (else :class:`~workmem.errors.MissingTablesError`). It is passed to the
    adapter's ``from_url`` as the ``create`` option (every built-in adapter takes it).
    ``options`` go to the adapter's ``from_url`` (pool sizes, timeouts, ...). A
    ``pathlib.Path`` (any ``os.PathLike``) names a libSQL database file. The URL,
    and any option value, may be a :class:`~workmem.masking.Secret`.

    An exception leaving ``connect`` holds no secret, not even in the local
    variables of its traceback's frames (:func:`~workmem.masking.forgets_locals`).
    """
    policy = check_history(history)
    url = _checked_url(url, create, options)
    adapter = resolve(url)
    with _encodable(url):
        storage = adapter.from_url(url, **options)
    if refused := _history_refused(storage, policy):
        storage.close()
        raise refused
    return storage


@forgets_locals_async
async def connect_async(
    url: str | os.PathLike[str] | Secret,
    *,
    create: bool = True,
    history: bool | int | HistoryPolicy | None = None,
    **options: Any,
) -> AsyncMemoryStorage:
    """:func:`connect`, for the async API: an :class:`~workmem.aio.AsyncMemoryStorage` (an async context manager).

    The URL, ``create`` and ``options`` are those of :func:`connect`. An adapter
    with a native async twin (:attr:`MemoryStorage.async_adapter`) opens it; any
    other adapter is opened (on a worker thread) and run on worker threads by
    :class:`~workmem.aio.ThreadedAsyncStorage`, so the event loop never blocks.
    An exception leaving it holds no secret, as one leaving :func:`connect`.
    """
    policy = check_history(history)
    url = _checked_url(url, create, options)
    adapter = resolve(url)
    with _encodable(url):
        if adapter.async_adapter is None:
            opened = await opened_in_thread(functools.partial(adapter.from_url, url, **options))
            storage: AsyncMemoryStorage = ThreadedAsyncStorage(opened)
        else:
            storage = await _async_twin(adapter, url).open(url, **options)
    if refused := _history_refused(storage, policy):
        await storage.close()
        raise refused
    return storage


def _async_twin(adapter: type[MemoryStorage], url: str) -> type[AsyncMemoryStorage]:
    target = adapter.async_adapter
    assert target is not None
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingDriverError(f"the async adapter {target} for {mask_url(url)} cannot be imported: {exc}") from exc
    twin = getattr(module, class_name, None)
    if not (isinstance(twin, type) and issubclass(twin, AsyncMemoryStorage)):
        raise UnknownSchemeError(f"the async adapter {target} for {mask_url(url)} is no AsyncMemoryStorage class")
    return twin
