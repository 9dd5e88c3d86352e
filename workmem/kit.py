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
* **Retries** -- :func:`backoff` gives the jittered exponential pause before a
  retry of a write that lost a race (a compare-and-set that matched nothing).

And the contract itself, so that an adapter imports this module and
:mod:`workmem.errors` only (``from workmem.kit import ...``):

* **The storage and its hooks** -- :class:`~workmem.storage.MemoryStorage` and
  :class:`~workmem.aio.AsyncMemoryStorage` (subclass one, or both over one set of
  hooks), :class:`~workmem.hooks.StorageHooks` (the hooks it implements; every
  argument arrives checked), :class:`~workmem.hooks.Capabilities`;
  :func:`~workmem._drive.run_sync` (a sync storage's coroutine, run without a loop);
  :class:`~workmem.aio.ThreadedAsyncStorage` and :func:`~workmem.aio.opened_in_thread` (the
  async face of a sync-only driver, on worker threads).
* **What the hooks receive** -- :class:`~workmem.hooks.ListQuery` (a list's
  owner, page, order), :class:`~workmem.hooks.ScopeTarget` (a working memory's
  scope and ids), :class:`~workmem.hooks.CheckedPatch` (a merge's patch, with its JSON text:
  :func:`~workmem.hooks.patch_text`); :func:`~workmem.hooks.read_record_page` builds a keyset page.
* **Creating the tables** -- :func:`~workmem.arguments.check_create` (the ``create``
  option), :func:`~workmem.arguments.missing_tables` (the error for a database
  without them, with ``create=False``), :data:`~workmem.arguments.CREATE_FALSE_ADVICE`.
* **Records** -- :class:`~workmem.records.Resource`, :class:`~workmem.records.Thread`,
  :class:`~workmem.records.ThreadPage`, :class:`~workmem.records.RecordPage`,
  ``UNSET``/:class:`~workmem.records.Unset`; :func:`~workmem.records.private_copy`
  (what a hook returns shares nothing with what it stores);
  :func:`~workmem.records.trusted_thread`/:func:`~workmem.records.trusted_resource`
  (a record from a row the adapter wrote, without re-validating it); ``WORKING_MEMORY_KEY``,
  ``OrderBy``, ``Direction``.
* **JSON and time as workmem writes them** -- :func:`~workmem.validation.dump_json` (compact JSON),
  :func:`~workmem.validation.json_type`, the input limits (``MAX_DEPTH``, ``MAX_SAFE_INT``,
  ``MAX_TEXT_BYTES``); :func:`~workmem.timestamps.to_iso`, :func:`~workmem.timestamps.from_iso`,
  :func:`~workmem.timestamps.normalize`, :func:`~workmem.timestamps.utc_now`.
* **The rules of a change, written once** -- :func:`check_owner` (the one owner
  rule: call it on the stored thread inside the atomic step; the change rules
  below call it too), the hooks' change arguments :class:`~workmem.changes.ThreadChange`,
  :class:`~workmem.changes.ResourceChange` and :class:`~workmem.changes.MergeChange`,
  :func:`~workmem.changes.updated_thread`,
  :func:`~workmem.changes.updated_resource`, :func:`~workmem.changes.replaced_thread`,
  :func:`~workmem.changes.merge_document`, :func:`~workmem.changes.with_thread_memory`,
  :func:`~workmem.changes.memory_given`, :func:`~workmem.changes.shallow`,
  :func:`~workmem.arguments.thread_working_memory_to_merge`, :func:`~workmem.arguments.thread_working_memory`.
* **History and erasure** (``Capabilities.history``/``erase``) -- :class:`~workmem.history.Recording` (what a
  write records, in its atomic step), :class:`~workmem.history.HistoryKey`, :class:`~workmem.history.MemoryVersion`,
  :func:`~workmem.history.kept_versions` (retention), :func:`~workmem.history.with_version` (a version appended
  in Python), :class:`~workmem.history.ErasedResource`, :class:`~workmem.history.HistoryPolicy`,
  :data:`~workmem.history.HISTORY_TABLE`.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

from workmem._drive import run_sync
from workmem.aio import AsyncMemoryStorage, ThreadedAsyncStorage, opened_in_thread
from workmem.arguments import (
    CREATE_FALSE_ADVICE,
    check_create,
    check_owner,
    missing_tables,
    thread_working_memory,
    thread_working_memory_to_merge,
)
from workmem.changes import (
    MergeChange,
    ResourceChange,
    ThreadChange,
    memory_given,
    merge_document,
    replaced_thread,
    shallow,
    updated_resource,
    updated_thread,
    with_thread_memory,
)
from workmem.errors import DriverError, MissingDriverError, ValidationError, WorkmemError
from workmem.history import (
    HISTORY_TABLE,
    ErasedResource,
    HistoryKey,
    HistoryPolicy,
    MemoryVersion,
    Recording,
    kept_versions,
    with_version,
)
from workmem.hooks import Capabilities, CheckedPatch, ListQuery, ScopeTarget, StorageHooks, patch_text, read_record_page
from workmem.masking import Secret, detach, raise_unchained
from workmem.records import (
    UNSET,
    WORKING_MEMORY_KEY,
    Direction,
    OrderBy,
    RecordPage,
    Resource,
    Thread,
    ThreadPage,
    Unset,
    private_copy,
    thread_fields,
    trusted_resource,
    trusted_thread,
)
from workmem.storage import MemoryStorage
from workmem.timestamps import from_iso, normalize, to_iso, utc_now
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
from workmem.validation import MAX_DEPTH, MAX_SAFE_INT, MAX_TEXT_BYTES, dump_json, json_type

__all__ = [
    "CREATE_FALSE_ADVICE",
    "HISTORY_TABLE",
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "MAX_TEXT_BYTES",
    "SECRET_QUERY_KEYS",
    "UNSET",
    "WORKING_MEMORY_KEY",
    "AsyncMemoryStorage",
    "Capabilities",
    "CheckedPatch",
    "Direction",
    "DriverError",
    "ErasedResource",
    "HistoryKey",
    "HistoryPolicy",
    "ListQuery",
    "MemoryStorage",
    "MemoryVersion",
    "MergeChange",
    "OrderBy",
    "RecordPage",
    "Recording",
    "Resource",
    "ResourceChange",
    "ScopeTarget",
    "Secret",
    "StorageHooks",
    "Thread",
    "ThreadChange",
    "ThreadPage",
    "ThreadedAsyncStorage",
    "Unset",
    "UserInfo",
    "backoff",
    "check_create",
    "check_number",
    "check_options",
    "check_owner",
    "detach",
    "driver_error",
    "dump_json",
    "encode_userinfo",
    "from_iso",
    "import_driver",
    "json_type",
    "kept_versions",
    "mask_secrets",
    "mask_url",
    "memory_given",
    "merge_document",
    "missing_tables",
    "normalize",
    "opened_in_thread",
    "patch_text",
    "private_copy",
    "query_pairs",
    "raise_unchained",
    "read_record_page",
    "replaced_thread",
    "run_sync",
    "scheme_of",
    "shallow",
    "split_userinfo",
    "thread_fields",
    "thread_working_memory",
    "thread_working_memory_to_merge",
    "to_iso",
    "trusted_resource",
    "trusted_thread",
    "updated_resource",
    "updated_thread",
    "url_secrets",
    "utc_now",
    "with_thread_memory",
    "with_version",
]

_INF = float("inf")


def import_driver(module: str, extra: str | None = None, *, install: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDriverError` saying what to install.

    The hint is ``pip install 'workmem[extra]'`` for workmem's own adapters; a
    third-party adapter names its own requirement with ``install`` (e.g.
    ``install="redis>=5"`` gives ``pip install 'redis>=5'``).
    """
    if (extra is None) == (install is None):
        raise TypeError("import_driver() takes one of extra= (a workmem extra) or install= (a requirement)")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        requirement = f"workmem[{extra}]" if install is None else install
        raise MissingDriverError(f"the {module!r} driver is not installed: pip install '{requirement}'") from exc


def backoff(attempt: int, *, first: float = 0.001, cap: float = 0.05) -> float:
    """Seconds to pause before retry number ``attempt`` (>= 0): jittered, exponential, at most ``cap``.

    For a write that lost a race (a compare-and-set that matched nothing, a busy
    database): a uniform draw in ``[0, min(cap, first * 2**attempt)]``, so racing
    writers spread out instead of colliding again in step.
    """
    return random.uniform(0, min(cap, first * 2 ** min(attempt, 32)))


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
