"""Working memory's history at the door: the ``history`` option, ``source``, versions, and what refuses.

The semantics every adapter keeps are the conformance checks'; these are the rules written once in
:mod:`workmem.history` and :mod:`workmem.operations`, on the reference adapter.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

import workmem
from workmem import HistoryPolicy, MemoryVersion, Thread
from workmem.adapters.reference import ReferenceStorage
from workmem.aio import ThreadedAsyncStorage
from workmem.errors import OperationNotSupportedError, ThreadOwnershipError, ValidationError, VersionNotFoundError
from workmem.history import MAX_SOURCE_BYTES, HistoryKey, check_history, check_source, history_page, kept_versions
from workmem.hooks import OPTIONAL_HOOK_NAMES, Capabilities, ForwardingHooks


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, None), (False, None), (True, HistoryPolicy()), (5, HistoryPolicy(5)), (HistoryPolicy(2), HistoryPolicy(2))],
)
def test_history_option_reads_as_a_policy(given: object, expected: HistoryPolicy | None) -> None:
    assert check_history(given) == expected


@pytest.mark.parametrize("given", [0, -1, 1.5, "50", [], HistoryPolicy(0), 10**7])
def test_history_option_refuses_what_is_no_retention(given: object) -> None:
    with pytest.raises(ValidationError, match="history"):
        check_history(given)


def test_source_is_a_json_object_within_its_size() -> None:
    assert check_source({"agent": "a", "n": 1}) == ({"agent": "a", "n": 1}, '{"agent":"a","n":1}')
    assert check_source(None) == (None, None)
    for bad in ("agent", ["a"], {"x": float("nan")}, {"x": "y" * 20_000}):
        with pytest.raises(ValidationError):
            check_source(bad)


def test_retention_bound_and_pages() -> None:
    assert [kept_versions(n, 3) for n in (1, 3, 4, 10)] == [1, 1, 2, 8]
    assert kept_versions(10, None) == 1
    at = datetime(2026, 1, 1, tzinfo=UTC)
    versions = [MemoryVersion("r", None, n, str(n), at, "set") for n in (5, 4, 3)]
    assert history_page(versions, 3).next_before == 3
    assert history_page(versions, 4).next_before is None  # fewer than asked: the last page
    assert history_page(versions[:1], 1).next_before == 5
    assert history_page([MemoryVersion("r", None, 1, "1", at, "set")], 1).next_before is None


def test_a_version_checks_its_fields() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for bad in (
        {"version": 0},
        {"kind": "delete"},
        {"resource_id": ""},
        {"source": ["x"]},
        {"content": 3},
    ):
        fields: dict[str, Any] = {
            "resource_id": "r",
            "thread_id": None,
            "version": 1,
            "content": "x",
            "changed_at": at,
            "kind": "set",
        }
        with pytest.raises(ValidationError):
            MemoryVersion(**{**fields, **bad})
    assert MemoryVersion("r", "t", 1, None, at, "merge").key == HistoryKey("r", "t")


def test_history_is_off_unless_asked_and_writes_then_record_nothing() -> None:
    with workmem.connect("memory://") as storage:
        assert storage.history is None
        storage.set_working_memory("a", scope="resource", resource_id="r", source={"agent": "x"})
        assert storage.working_memory_history(scope="resource", resource_id="r").versions == ()
        with pytest.raises(OperationNotSupportedError, match="history"):
            storage.restore_working_memory(1, scope="resource", resource_id="r")


def test_every_write_of_working_memory_records_one_version_with_its_source() -> None:
    with workmem.connect("memory://", history=True) as storage:
        storage.update_resource("r", working_memory="one")
        storage.set_working_memory("two", scope="resource", resource_id="r", source={"agent": "a"})
        storage.update_resource("r", metadata={"k": 1})  # no working memory: nothing to record
        storage.create_thread(Thread("t", "r"))
        storage.update_thread("t", metadata={"workingMemory": "{}"})
        storage.merge_working_memory({"x": 1}, scope="thread", thread_id="t", source={"toolCallId": "c1"})
        resource = storage.working_memory_history(scope="resource", resource_id="r").versions
        thread = storage.working_memory_history(scope="thread", resource_id="r", thread_id="t").versions
    assert [(v.version, v.kind, v.content, v.source) for v in resource] == [
        (2, "set", "two", {"agent": "a"}),
        (1, "set", "one", None),
    ]
    assert [(v.version, v.kind, v.content, v.source) for v in thread] == [
        (2, "merge", '{"x":1}', {"toolCallId": "c1"}),
        (1, "set", "{}", None),
    ]
    assert {v.thread_id for v in thread} == {"t"} and {v.thread_id for v in resource} == {None}


def test_restore_writes_a_new_version_and_refuses_an_unknown_one() -> None:
    with workmem.connect("memory://", history=2) as storage:
        for text in ("v1", "v2", "v3"):
            storage.set_working_memory(text, scope="resource", resource_id="r")
        with pytest.raises(VersionNotFoundError):
            storage.restore_working_memory(1, scope="resource", resource_id="r")  # dropped by retention
        with pytest.raises(VersionNotFoundError):
            storage.restore_working_memory(9, scope="resource", resource_id="r")
        assert storage.restore_working_memory(2, scope="resource", resource_id="r", source={"by": "ops"}) == "v2"
        assert storage.get_working_memory(scope="resource", resource_id="r") == "v2"
        versions = storage.working_memory_history(scope="resource", resource_id="r").versions
    assert [(v.version, v.kind, v.source) for v in versions] == [
        (4, "restore", {"by": "ops", "restoredFrom": 2}),
        (3, "set", None),
    ]


def test_restore_checks_the_source_it_records_once_before_reading_history() -> None:
    """The source a restore records is the caller's plus ``restoredFrom``: checked whole before any read."""
    filler = "y" * (MAX_SOURCE_BYTES - len('{"s":""}'))  # at the limit alone, over it with restoredFrom
    assert check_source({"s": filler})[0] is not None
    with workmem.connect("memory://", history=True) as storage:
        storage.set_working_memory("v1", scope="resource", resource_id="r")
        for version in (1, 9):  # a version kept, and one never written: refused alike, before the lookup
            with pytest.raises(ValidationError, match="source"):
                storage.restore_working_memory(version, scope="resource", resource_id="r", source={"s": filler})
        with pytest.raises(ValidationError, match="source"):
            storage.restore_working_memory(1, scope="resource", resource_id="r", source=[])  # type: ignore[arg-type]
        assert [v.version for v in storage.working_memory_history(scope="resource", resource_id="r").versions] == [1]


def test_thread_history_is_its_owners_alone() -> None:
    with workmem.connect("memory://", history=True) as storage:
        storage.create_thread(Thread("t", "r"))
        storage.set_working_memory("x", scope="thread", thread_id="t")
        with pytest.raises(ThreadOwnershipError):
            storage.working_memory_history(scope="thread", resource_id="other", thread_id="t")
        assert storage.working_memory_history(scope="thread", thread_id="missing").versions == ()
        storage.delete_thread("t")
        storage.create_thread(Thread("t", "other"))  # the same id, another user: none of the old history
        assert storage.working_memory_history(scope="thread", thread_id="t").versions == ()


def test_delete_resource_returns_what_it_removed_and_is_idempotent() -> None:
    with workmem.connect("memory://", history=True) as storage:
        storage.set_working_memory("x", scope="resource", resource_id="r")
        for thread_id in ("t2", "t1"):
            storage.create_thread(Thread(thread_id, "r"))
            storage.set_working_memory("y", scope="thread", thread_id=thread_id)
        storage.create_thread(Thread("keep", "s"))
        erased = storage.delete_resource("r")
        assert (erased.resource, erased.threads, erased.versions) == (True, ("t1", "t2"), 3)
        again = storage.delete_resource("r")
        assert not again.removed_anything
        assert storage.get_thread("keep") is not None
        with pytest.raises(ValidationError):
            storage.delete_resource("")


class _NoHistory(ReferenceStorage):
    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=False, persistent=False)
    async_adapter = None  # connect_async runs it on worker threads


def test_an_adapter_without_history_refuses_it_at_connect_and_its_calls() -> None:
    scheme = f"nohistory-{uuid.uuid4().hex[:8]}"
    workmem.register(scheme, f"{__name__}:_NoHistory")
    with pytest.raises(OperationNotSupportedError, match="history"):
        workmem.connect(f"{scheme}://", history=True)
    with workmem.connect(f"{scheme}://") as storage:
        storage.set_working_memory("x", scope="resource", resource_id="r", source={"a": 1})
        with pytest.raises(OperationNotSupportedError):
            storage.working_memory_history(scope="resource", resource_id="r")
        with pytest.raises(OperationNotSupportedError):
            storage.delete_resource("r")

    async def main() -> None:
        with pytest.raises(OperationNotSupportedError, match="history"):
            await workmem.connect_async(f"{scheme}://", history=5)

    asyncio.run(main())


def test_the_threaded_async_face_forwards_history_and_its_policy() -> None:
    assert set(OPTIONAL_HOOK_NAMES) <= set(vars(ForwardingHooks))

    async def main() -> None:
        inner = ReferenceStorage()
        inner.history = HistoryPolicy(1)
        async with ThreadedAsyncStorage(inner) as storage:
            assert storage.history == HistoryPolicy(1)
            await storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r", source={"s": 1})
            await storage.merge_working_memory({"b": 2}, scope="resource", resource_id="r")
            page = await storage.working_memory_history(scope="resource", resource_id="r")
            assert [(v.version, v.content) for v in page.versions] == [(2, '{"a":1,"b":2}')]
            assert (await storage.delete_resource("r")).versions == 1

    asyncio.run(main())
