"""The contract's hooks as wire requests: one mixin, two faces (sync and async).

:class:`WireHooks` turns each hook into one request (see
``docs/wire-protocol.md``) and each response back into workmem values; it is
written once over the I/O primitive :meth:`WireHooks._request`, which
:class:`WireStorage` answers blocking (:meth:`StoreProcess.call`) and
:class:`AsyncWireStorage` by awaiting (:meth:`StoreProcess.call_async`). An
operation the store declared unsupported (``capabilities.unsupported`` of its
handshake) raises :class:`~workmem.errors.OperationNotSupportedError` without
a request, and is noted for the conformance suite.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Self

from workmem import incidents
from workmem.aio import AsyncMemoryStorage
from workmem.errors import OperationNotSupportedError, ValidationError
from workmem.hooks import Capabilities, ListQuery, ScopeTarget, StorageHooks
from workmem.kit import (
    MemoryStorage,
    MergeChange,
    Recording,
    ResourceChange,
    ThreadChange,
    check_create,
    check_number,
    check_options,
)
from workmem.records import RecordPage, Resource, Thread, ThreadPage

from .codec import (
    decode_page,
    decode_resource,
    decode_thread,
    encode_resource,
    encode_thread,
    ids,
    malformed,
    optional,
    stamp,
)
from .process import StoreProcess

__all__ = ["PROTOCOL", "AsyncWireStorage", "WireHooks", "WireStorage", "command_of"]

PROTOCOL = 1
"""The protocol version this adapter speaks (the handshake's ``protocol``)."""
DEFAULT_TIMEOUT = 60.0
TIMEOUT_ENV = "WORKMEM_WIRE_TIMEOUT"
OPERATIONS = frozenset(
    {
        "get_resource",
        "save_resource",
        "update_resource",
        "get_thread",
        "create_thread",
        "save_thread",
        "update_thread",
        "delete_thread",
        "list_threads",
        "merge_working_memory",
        "resource_page",
        "thread_page",
        "insert_resources",
        "insert_threads",
        "replace_thread",
    }
)
"""Every request a store answers (besides the ``hello`` handshake)."""


def command_of(url: str) -> list[str]:
    """The command line of ``wire:COMMAND`` (shell words, as ``shlex.split`` reads them)."""
    text = url.split(":", 1)[1]
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise ValidationError(f"wire: cannot read the command {text!r}: {exc}") from None
    if not argv:
        raise ValidationError("wire: needs a command after 'wire:' (e.g. 'wire:node store.mjs agent.db')")
    return argv


class Launch:
    """How to start a store and what to tell it in the handshake (the wire adapter's parsed URL and options)."""

    def __init__(self, argv: list[str], *, timeout: float, hello: dict[str, Any], secrets: Sequence[str] = ()) -> None:
        self.argv, self.timeout, self.hello, self.secrets = argv, timeout, hello, tuple(secrets)
        self.cwd: str | None = None
        self.env: dict[str, str] | None = None

    def start(self) -> StoreProcess:
        return StoreProcess(self.argv, timeout=self.timeout, secrets=self.secrets, cwd=self.cwd, env=self.env)


def timeout_of(options: dict[str, Any]) -> float:
    value = options.pop("timeout", None)
    if value is None:
        try:
            value = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT))
        except ValueError:
            raise ValidationError(f"{TIMEOUT_ENV} must be a number of seconds") from None
    check_number("timeout", value, positive=True)
    return float(value)


def _capabilities(value: Any) -> Capabilities:
    if not isinstance(value, dict):
        raise malformed(f"the handshake's 'capabilities' is not an object: {str(value)[:300]}")
    flags = {}
    for name, default in (("cross_process_atomic", False), ("persistent", False), ("snapshot_listing", True)):
        flag = value.get(name, default)
        if not isinstance(flag, bool):
            raise malformed(f"the handshake's capabilities.{name} is not a boolean")
        flags[name] = flag
    unsupported = frozenset(ids(value.get("unsupported", []), "the handshake's capabilities.unsupported"))
    unknown = unsupported - OPERATIONS
    if unknown:
        raise malformed(f"the handshake declares unknown operations unsupported: {sorted(unknown)}")
    return Capabilities(
        flags["cross_process_atomic"], flags["persistent"], unsupported, snapshot_listing=flags["snapshot_listing"]
    )


class WireHooks(StorageHooks):
    """Every hook as a request to a store process."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=False, persistent=False)
    """The class's default; each connection's are the ones its store declared in the handshake."""
    store: str
    """What the store called itself in the handshake (``name`` and ``version``)."""

    def _accept(self, process: StoreProcess, hello: Any) -> None:
        """Take the handshake's answer: the protocol version, the store's name and its capabilities."""
        self._process = process
        if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL:
            got = hello.get("protocol") if isinstance(hello, dict) else hello
            raise malformed(f"the store speaks protocol {got!r}, not {PROTOCOL}")
        vars(self)["capabilities"] = _capabilities(hello.get("capabilities"))  # this connection's own
        self.store = str(hello.get("store", "?"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(store={getattr(self, 'store', '?')!r})"

    async def _request(self, op: str, args: dict[str, Any]) -> Any:
        raise NotImplementedError  # pragma: no cover - each face answers it

    async def _do(self, op: str, args: dict[str, Any]) -> Any:
        if op in self.capabilities.unsupported:
            incidents.note("unsupported", f"the store does not support {op}")
            raise OperationNotSupportedError(op)
        return await self._request(op, args)

    async def _resource_or_none(self, op: str, args: dict[str, Any]) -> Resource | None:
        value = await self._do(op, args)
        return None if value is None else decode_resource(value)

    async def _thread_or_none(self, op: str, args: dict[str, Any]) -> Thread | None:
        value = await self._do(op, args)
        return None if value is None else decode_thread(value)

    async def _flag(self, op: str, args: dict[str, Any]) -> bool:
        value = await self._do(op, args)
        if not isinstance(value, bool):
            raise malformed(f"{op} answered {str(value)[:100]}, not a boolean")
        return value

    # -- resources -----------------------------------------------------------------------

    async def _get_resource(self, resource_id: str) -> Resource | None:
        return await self._resource_or_none("get_resource", {"id": resource_id})

    # The record arguments of the whole-record writes are never given: a store over the wire keeps no history.

    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        return decode_resource(await self._do("save_resource", {"resource": encode_resource(resource)}))

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        args = {"id": resource_id, "now": stamp(change.now), "maxChars": change.max_chars}
        optional(optional(args, "workingMemory", change.working_memory), "metadata", change.metadata)
        return decode_resource(await self._do("update_resource", args))

    # -- threads -------------------------------------------------------------------------

    async def _get_thread(self, thread_id: str) -> Thread | None:
        return await self._thread_or_none("get_thread", {"id": thread_id})

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        return decode_thread(await self._do("create_thread", {"thread": encode_thread(thread)}))

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        return decode_thread(await self._do("save_thread", {"thread": encode_thread(thread), "now": stamp(now)}))

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        args = {"id": thread_id, "now": stamp(change.now), "owner": change.owner, "maxChars": change.max_chars}
        optional(optional(args, "title", change.title), "metadata", change.metadata)
        return decode_thread(await self._do("update_thread", args))

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        return await self._flag("delete_thread", {"id": thread_id, "owner": owner})

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        value = await self._do(
            "list_threads",
            {
                "resourceId": query.resource_id,
                "page": query.page,
                "perPage": query.per_page,
                "orderBy": query.order_by,
                "direction": query.direction,
            },
        )
        if not isinstance(value, dict) or not isinstance(value.get("threads"), list):
            raise malformed(f"list_threads answered no {{threads: [...], total}}: {str(value)[:300]}")
        total = value.get("total")
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            raise malformed("list_threads answered no integer 'total'")
        threads = [decode_thread(t, "a thread of a list") for t in value["threads"]]
        return query.page_of(threads, total, ids(value.get("unreadable", []), "list_threads' 'unreadable'"))

    # -- working memory ------------------------------------------------------------------

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        args = {
            "scope": target.scope,
            "resourceId": target.resource_id,
            "threadId": target.thread_id,
            "patch": patch,
            "now": stamp(now),
            "maxChars": max_chars,
        }
        merged = await self._do("merge_working_memory", args)
        if not isinstance(merged, dict):
            raise malformed(f"merge_working_memory answered {str(merged)[:100]}, not the merged object")
        return merged

    # -- every record --------------------------------------------------------------------

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        return decode_page(await self._do("resource_page", {"after": after, "limit": limit}), thread=False)

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        return decode_page(await self._do("thread_page", {"after": after, "limit": limit}), thread=True)

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        value = await self._do("insert_resources", {"resources": [encode_resource(r) for r in resources]})
        return frozenset(ids(value, "insert_resources' answer"))

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        value = await self._do("insert_threads", {"threads": [encode_thread(t) for t in threads]})
        return frozenset(ids(value, "insert_threads' answer"))

    async def _replace_thread(self, thread: Thread) -> bool:
        return await self._flag("replace_thread", {"thread": encode_thread(thread)})


def launch_of(url: str, options: dict[str, Any]) -> Launch:
    """``wire:COMMAND`` and the options ``timeout`` (seconds per request) and ``create`` (passed to the store)."""
    create = check_create(options.pop("create", True))
    timeout = timeout_of(options)
    check_options(options, (), "wire")
    return Launch(command_of(url), timeout=timeout, hello={"protocol": PROTOCOL, "create": create})


class WireStorage(WireHooks, MemoryStorage):
    """A store in another program, run as a child process (sync API): ``wire:COMMAND``."""

    async_adapter = "workmem.adapters.wire.hooks:AsyncWireStorage"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        return cls.launched(launch_of(url, options))

    @classmethod
    def launched(cls, launch: Launch) -> Self:
        """Start the store and shake hands with it (a :class:`HarnessError` when it does not answer as it must)."""
        self = cls()
        process = launch.start()
        try:
            self._accept(process, process.call("hello", launch.hello))
        except BaseException:
            process.close(wait=1)
            raise
        return self

    async def _request(self, op: str, args: dict[str, Any]) -> Any:
        return self._process.call(op, args)

    async def _close(self) -> None:
        self._process.close()


class AsyncWireStorage(WireHooks, AsyncMemoryStorage):
    """A store in another program, run as a child process (async API): the same requests, awaited."""

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        return await cls.launched(launch_of(url, options))

    @classmethod
    async def launched(cls, launch: Launch) -> Self:
        self = cls()
        process = await asyncio.to_thread(launch.start)
        try:
            self._accept(process, await process.call_async("hello", launch.hello))
        except BaseException:
            await asyncio.to_thread(process.close, 1)
            raise
        return self

    async def _request(self, op: str, args: dict[str, Any]) -> Any:
        return await self._process.call_async(op, args)

    async def _close(self) -> None:
        await asyncio.to_thread(self._process.close)

    async def _pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
