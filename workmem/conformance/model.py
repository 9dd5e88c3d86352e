"""A deliberately simple reference model of the storage contract, for the state machine.

Plain dicts and the contract's rules written out one by one, sharing no code
with any adapter. The model cannot know the clock, so a timestamp that an
operation sets to "now" is a :class:`Window` (the clock before and after the
call) until the state machine reads the backend's value, checks that it falls
in the window and :meth:`Model.observe` s it.

Working memory written by a merge is held as :class:`MergedJson`: adapters may
serialize the merged object with any key order or spacing, so it is compared
as JSON, while text written by ``set`` must come back byte for byte.

The linearizability check (:mod:`workmem.conformance.linearizability`) runs
the same model on copies (:meth:`Model.clone`), compares states by
:meth:`Model.key`, and asks :meth:`Model.page_explained` whether a page of
threads fits a state whose stamps may still be windows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

from workmem.errors import (
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
    WorkingMemoryFormatError,
    WorkingMemoryTooLargeError,
)
from workmem.records import UNSET, Unset

__all__ = ["MResource", "MThread", "MergedJson", "Model", "Window", "model_merge_patch"]

WM_KEY = "workingMemory"


@dataclass(frozen=True, slots=True)
class Window:
    """A timestamp set to "now" by a call made between ``lo`` and ``hi``."""

    lo: datetime
    hi: datetime


Stamp = datetime | Window


@dataclass(frozen=True, slots=True)
class MergedJson:
    """Working memory text that a merge produced: equal when it parses to ``doc``."""

    doc: dict[str, Any]


@dataclass
class MResource:
    id: str
    working_memory: str | MergedJson | None
    metadata: dict[str, Any] | None
    created_at: Stamp
    updated_at: Stamp


@dataclass
class MThread:
    id: str
    resource_id: str
    title: str
    metadata: dict[str, Any] | None
    created_at: Stamp
    updated_at: Stamp


def model_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396, section 2, transcribed."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = model_merge_patch(result.get(name), value)
    return result


def _text_ok(value: object) -> bool:
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_ok(value: object, depth: int = 1) -> bool:
    if depth > 32:
        return False
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) <= 2**53 - 1
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return _text_ok(value)
    if isinstance(value, list):
        return all(_json_ok(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(_text_ok(k) and _json_ok(v, depth + 1) for k, v in value.items())
    return False


def _need(condition: bool, what: str) -> None:
    if not condition:
        raise ValidationError(f"model: invalid {what}")


def _need_id(value: object) -> str:
    _need(_text_ok(value) and 0 < len(str(value).encode("utf-8")) <= 512, "id")
    return str(value)


def _check_scope(scope: object, resource_id: object, thread_id: object) -> tuple[str, str | None, str | None]:
    if scope == "resource":
        _need(resource_id is not None, "scope args")
        return "resource", _need_id(resource_id), None
    if scope == "thread":
        _need(thread_id is not None, "scope args")
        return "thread", None if resource_id is None else _need_id(resource_id), _need_id(thread_id)
    raise ValidationError("model: invalid scope")


def _parse_object(stored: str | MergedJson | None) -> dict[str, Any]:
    if isinstance(stored, MergedJson):
        return stored.doc
    if stored is None or stored.strip() == "":
        return {}
    try:
        value = json.loads(stored)
    except ValueError:
        raise WorkingMemoryFormatError("model: not JSON") from None
    if not isinstance(value, dict):
        raise WorkingMemoryFormatError("model: not a JSON object")
    return value


def _thread_wm(metadata: dict[str, Any] | None) -> str | MergedJson | None:
    value = (metadata or {}).get(WM_KEY)
    return value if isinstance(value, str | MergedJson) else None


def _thread_wm_to_merge(metadata: dict[str, Any] | None) -> str | MergedJson | None:
    """What a merge reads: a string (or a merged document), or none for an absent key or ``null``."""
    value = (metadata or {}).get(WM_KEY)
    if value is None or isinstance(value, str | MergedJson):
        return value
    raise WorkingMemoryFormatError("model: stored thread working memory is not a string")


def _compact(document: dict[str, Any]) -> str:
    """The JSON text a merge stores, written out: no spaces, non-ASCII as is."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _blank(stored: str | MergedJson | None) -> bool:
    return stored is None or (isinstance(stored, str) and stored.strip() == "")


def _within(size: int, current: int, max_chars: int) -> None:
    """``max_chars``: a result over the limit that is also larger than what it replaces is refused."""
    if size > max_chars and size > current:
        raise WorkingMemoryTooLargeError(size=size, limit=max_chars, current=current)


class Model:
    """The state of one namespace, changed only by the contract's rules."""

    def __init__(self) -> None:
        self.resources: dict[str, MResource] = {}
        self.threads: dict[str, MThread] = {}

    def clone(self) -> Model:
        """A copy whose changes leave this one as it is (the records are shared: the rules replace, never edit)."""
        copy = Model()
        copy.resources = dict(self.resources)
        copy.threads = dict(self.threads)
        return copy

    def key(self) -> str:
        """Equal for equal states (a state with a window is not equal to one with the stamp observed in it)."""
        state = [sorted((k, _record_key(v)) for k, v in table.items()) for table in (self.resources, self.threads)]
        return json.dumps(state, sort_keys=True, default=_key_default)

    # -- resources -----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> MResource | None:
        return self.resources.get(_need_id(resource_id))

    def save_resource(
        self, rid: str, wm: str | None, metadata: dict[str, Any] | None, c: datetime, u: datetime
    ) -> None:
        self.resources[rid] = MResource(rid, wm, metadata, c, u)

    def update_resource(
        self,
        resource_id: str,
        now: Window,
        working_memory: str | MergedJson | Unset | None = UNSET,
        metadata: dict[str, Any] | Unset | None = UNSET,
    ) -> MResource:
        _need_id(resource_id)
        _need(
            working_memory is UNSET
            or working_memory is None
            or isinstance(working_memory, MergedJson)
            or _text_ok(working_memory),
            "working memory",
        )
        _need(metadata is UNSET or metadata is None or (isinstance(metadata, dict) and _json_ok(metadata)), "metadata")
        old = self.resources.get(resource_id)
        if old is None:
            new = MResource(
                resource_id,
                None if isinstance(working_memory, Unset) else working_memory,
                None if isinstance(metadata, Unset) else metadata,
                now,
                now,
            )
        else:
            new = MResource(
                resource_id,
                old.working_memory if isinstance(working_memory, Unset) else working_memory,
                old.metadata
                if metadata is None or isinstance(metadata, Unset)
                else {**(old.metadata or {}), **metadata},
                old.created_at,
                now,
            )
        self.resources[resource_id] = new
        return new

    # -- threads -------------------------------------------------------------------

    def get_thread(self, thread_id: str, resource_id: str | None) -> MThread | None:
        _need_id(thread_id)
        if resource_id is not None:
            _need_id(resource_id)
        thread = self.threads.get(thread_id)
        if thread is None or (resource_id is not None and thread.resource_id != resource_id):
            return None
        return thread

    def create_thread(self, thread: MThread) -> MThread:
        if thread.id in self.threads:
            raise ThreadExistsError(thread.id)
        self.threads[thread.id] = thread
        return thread

    def save_thread(self, thread: MThread, now: Window) -> MThread:
        old = self.threads.get(thread.id)
        if old is None:
            new = thread
        elif old.resource_id != thread.resource_id:
            raise ThreadOwnershipError(thread.id, thread.resource_id)
        else:
            new = MThread(old.id, old.resource_id, thread.title, thread.metadata, old.created_at, now)
        self.threads[thread.id] = new
        return new

    def update_thread(
        self,
        thread_id: str,
        now: Window,
        title: str | Unset = UNSET,
        metadata: dict[str, Any] | Unset | None = UNSET,
        resource_id: str | None = None,
    ) -> MThread:
        _need_id(thread_id)
        _need(isinstance(title, Unset) or (_text_ok(title) and len(title.encode("utf-8")) <= 1024), "title")
        _need(metadata is UNSET or metadata is None or (isinstance(metadata, dict) and _json_ok(metadata)), "metadata")
        if resource_id is not None:
            self._owned_thread(thread_id, _need_id(resource_id))
        return self._update_thread(thread_id, now, title, metadata)

    def _update_thread(
        self, thread_id: str, now: Window, title: str | Unset, metadata: dict[str, Any] | Unset | None
    ) -> MThread:
        old = self.threads.get(thread_id)
        if old is None:
            raise ThreadNotFoundError(thread_id)
        new = MThread(
            old.id,
            old.resource_id,
            old.title if isinstance(title, Unset) else title,
            old.metadata if metadata is None or isinstance(metadata, Unset) else {**(old.metadata or {}), **metadata},
            old.created_at,
            now,
        )
        self.threads[thread_id] = new
        return new

    def delete_thread(self, thread_id: str, resource_id: str | None = None) -> bool:
        _need_id(thread_id)
        thread = self.threads.get(thread_id)
        if thread is not None and resource_id is not None and thread.resource_id != _need_id(resource_id):
            raise ThreadOwnershipError(thread_id, resource_id)
        return self.threads.pop(thread_id, None) is not None

    def list_threads(
        self, resource_id: str, page: object, per_page: object, order_by: object, direction: object
    ) -> tuple[list[MThread], int, bool]:
        """``(threads of the page, total, has_more)``; every stamp must have been observed."""
        _need_id(resource_id)
        _need(type(page) is int and page >= 0, "page")
        _need(per_page is None or (type(per_page) is int and per_page >= 1), "per_page")
        _need(per_page is not None or page == 0, "page for per_page=None")
        _need(order_by in ("created_at", "updated_at"), "order_by")
        _need(direction in ("asc", "desc"), "direction")
        owned = [t for t in self.threads.values() if t.resource_id == resource_id]

        def key(thread: MThread) -> tuple[datetime, str]:
            stamp = thread.created_at if order_by == "created_at" else thread.updated_at
            assert isinstance(stamp, datetime), "list_threads before the stamps were observed"
            return stamp, thread.id

        owned.sort(key=key, reverse=direction == "desc")
        if per_page is None:
            return owned, len(owned), False
        assert isinstance(page, int) and isinstance(per_page, int)
        chunk = owned[page * per_page : (page + 1) * per_page]
        return chunk, len(owned), (page + 1) * per_page < len(owned)

    def page_explained(
        self,
        resource_id: str,
        page: int,
        per_page: int | None,
        order_by: str,
        direction: str,
        listed: list[tuple[str, datetime]],
        total: int,
        has_more: bool,
    ) -> bool:
        """Whether ``list_threads`` could return this page at one instant of this state.

        ``listed`` is the page as returned: each thread's id and its ``order_by``
        stamp (the caller compares the rest of each record). A stamp the model
        knows only as a :class:`Window` may take any value in it, each thread's
        independently: the threads off the page must fit before or after it, and
        exactly ``page * per_page`` of them before.
        """
        owned = {t.id: t for t in self.threads.values() if t.resource_id == resource_id}
        offset = 0 if per_page is None else page * per_page
        size = len(owned) if per_page is None else max(0, min(per_page, len(owned) - offset))
        more = per_page is not None and offset + per_page < len(owned)
        ids = [thread_id for thread_id, _ in listed]
        if (total, len(listed), has_more) != (len(owned), size, more) or len(set(ids)) != size:
            return False
        if any(i not in owned or not _stamp_within(getattr(owned[i], order_by), stamp) for i, stamp in listed):
            return False
        desc = direction == "desc"
        keys = [(stamp, thread_id) for thread_id, stamp in listed]
        if keys != sorted(keys, reverse=desc):
            return False
        if not keys:
            return True
        first, last = keys[0], keys[-1]
        must_before = either = 0
        for thread in owned.values():
            if thread.id in ids:
                continue
            lo, hi = _bounds(getattr(thread, order_by))
            if desc:
                before, after = (hi, thread.id) > first, (lo, thread.id) < last
            else:
                before, after = (lo, thread.id) < first, (hi, thread.id) > last
            if before and after:
                either += 1
            elif before:
                must_before += 1
            elif not after:
                return False
        return must_before <= offset <= must_before + either

    # -- working memory ------------------------------------------------------------

    def get_working_memory(
        self, scope: object, resource_id: str | None, thread_id: str | None
    ) -> str | MergedJson | None:
        kind, rid, tid = _check_scope(scope, resource_id, thread_id)
        if kind == "resource":
            assert rid is not None
            resource = self.resources.get(rid)
            return None if resource is None else resource.working_memory
        assert tid is not None
        thread = self.threads.get(tid)
        if thread is None:
            return None
        if rid is not None and thread.resource_id != rid:
            raise ThreadOwnershipError(tid, rid)
        return _thread_wm(thread.metadata)

    def _owned_thread(self, tid: str, rid: str | None) -> MThread:
        thread = self.threads.get(tid)
        if thread is None:
            raise ThreadNotFoundError(tid)
        if rid is not None and thread.resource_id != rid:
            raise ThreadOwnershipError(tid, rid)
        return thread

    def set_working_memory(
        self, content: str, scope: object, resource_id: str | None, thread_id: str | None, now: Window
    ) -> None:
        kind, rid, tid = _check_scope(scope, resource_id, thread_id)
        _need(_text_ok(content), "content")
        if kind == "resource":
            assert rid is not None
            self.update_resource(rid, now, working_memory=content)
            return
        assert tid is not None
        self._owned_thread(tid, rid)
        self.update_thread(tid, now, metadata={WM_KEY: content})

    def merge_working_memory(
        self,
        patch: dict[str, Any],
        scope: object,
        resource_id: str | None,
        thread_id: str | None,
        now: Window,
        max_chars: int | None = None,
    ) -> dict[str, Any]:
        kind, rid, tid = _check_scope(scope, resource_id, thread_id)
        _need(isinstance(patch, dict) and _json_ok(patch), "patch")
        _need(max_chars is None or (type(max_chars) is int and max_chars >= 1), "max_chars")
        if kind == "resource":
            assert rid is not None
            resource = self.resources.get(rid)
            stored = resource.working_memory if resource else None
        else:
            assert tid is not None
            stored = _thread_wm_to_merge(self._owned_thread(tid, rid).metadata)
        before = _parse_object(stored)
        merged: dict[str, Any] = model_merge_patch(before, patch)
        if max_chars is not None:
            _within(len(_compact(merged)), 0 if _blank(stored) else len(_compact(before)), max_chars)
        if kind == "resource":
            assert rid is not None
            self.update_resource(rid, now, working_memory=MergedJson(merged))
        else:
            assert tid is not None
            self._update_thread(tid, now, UNSET, {WM_KEY: MergedJson(merged)})
        return merged

    # -- timestamps ----------------------------------------------------------------

    def observed(self, record: MResource | MThread, created_at: datetime, updated_at: datetime) -> None:
        """Replace ``record`` by a copy with the backend's stamps (a clone's change, unlike :meth:`observe`)."""
        if record.created_at == created_at and record.updated_at == updated_at:
            return
        new = replace(record, created_at=created_at, updated_at=updated_at)
        if isinstance(new, MResource):
            self.resources[new.id] = new
        else:
            self.threads[new.id] = new

    @staticmethod
    def observe(record: MResource | MThread, created_at: datetime, updated_at: datetime) -> None:
        """Adopt the backend's values for stamps the model only knew as windows (checked by the caller)."""
        record.created_at = created_at
        record.updated_at = updated_at


def _bounds(stamp: Stamp) -> tuple[datetime, datetime]:
    return (stamp.lo, stamp.hi) if isinstance(stamp, Window) else (stamp, stamp)


def _stamp_within(stamp: Stamp, value: datetime) -> bool:
    lo, hi = _bounds(stamp)
    return lo <= value <= hi


def _record_key(record: MResource | MThread) -> list[Any]:
    return [getattr(record, f.name) for f in fields(record)]


def _key_default(value: object) -> object:
    """Tagged with a NUL, which no valid text holds, so no stored JSON value looks the same."""
    if isinstance(value, datetime):
        return ["\x00at", value.isoformat()]
    if isinstance(value, Window):
        return ["\x00window", value.lo.isoformat(), value.hi.isoformat()]
    if isinstance(value, MergedJson):
        return ["\x00merged", value.doc]
    raise TypeError(f"not part of a model state: {value!r}")
