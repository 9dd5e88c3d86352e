"""Writes that name an owner are conditioned on it by the write itself, on every face.

A thread deleted and re-created under another resource must not take a write
that names its former owner -- through ``MemoryStorage``, ``AsyncMemoryStorage``
and the agent layer (``Memory`` / ``AsyncMemory``), which used to read the owner
first and write by id after. The race itself is the conformance check
``owner_race`` (and its mutant ``CheckThenWrite`` in ``test_mutants.py``);
here each entry point is driven once, sequentially, on every local backend.
"""

from __future__ import annotations

import asyncio

import pytest

import workmem
from workmem import AsyncMemory, Memory, Thread, ThreadNotFoundError, ThreadOwnershipError

URLS = ["memory://owner-writes", "file"]


@pytest.fixture(params=URLS)
def url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    if request.param == "file":
        return f"file:{tmp_path}/owner.db"  # type: ignore[str-bytes-safe]
    return f"{request.param}-{id(request)}"


def _recreated_under_b(storage: workmem.MemoryStorage) -> Thread:
    storage.create_thread(Thread("t", "a", "a's"))
    storage.delete_thread("t")
    return storage.create_thread(Thread("t", "b", "b's", {"workingMemory": "b's memory"}))


def test_storage_writes_naming_the_former_owner_are_refused(url: str) -> None:
    with workmem.connect(url) as storage:
        theirs = _recreated_under_b(storage)
        with pytest.raises(ThreadOwnershipError):
            storage.update_thread("t", title="mine", resource_id="a")
        with pytest.raises(ThreadOwnershipError):
            storage.delete_thread("t", resource_id="a")
        with pytest.raises(ThreadOwnershipError):
            storage.set_working_memory("mine", scope="thread", thread_id="t", resource_id="a")
        assert storage.get_thread("t") == theirs
        assert storage.update_thread("t", title="still b's", resource_id="b").title == "still b's"
        assert storage.delete_thread("t", resource_id="b") is True
        assert storage.delete_thread("t", resource_id="b") is False
        with pytest.raises(ThreadNotFoundError):
            storage.update_thread("t", title="x", resource_id="b")


def test_memory_update_and_delete_naming_the_former_owner_are_refused(url: str) -> None:
    with workmem.connect(url) as storage:
        theirs = _recreated_under_b(storage)
        memory = Memory(storage, scope="thread")
        with pytest.raises(ThreadOwnershipError):
            memory.update_thread("t", title="mine", resource_id="a")
        with pytest.raises(ThreadOwnershipError):
            memory.delete_thread("t", resource_id="a")
        assert storage.get_thread("t") == theirs
        assert memory.delete_thread("t", resource_id="b") is True


def test_async_faces_condition_on_the_owner(url: str) -> None:
    async def scenario() -> None:
        async with await workmem.connect_async(url) as storage:
            await storage.create_thread(Thread("t", "a", "a's"))
            await storage.delete_thread("t")
            theirs = await storage.create_thread(Thread("t", "b", "b's"))
            with pytest.raises(ThreadOwnershipError):
                await storage.update_thread("t", metadata={"k": 1}, resource_id="a")
            with pytest.raises(ThreadOwnershipError):
                await storage.delete_thread("t", resource_id="a")
            memory = AsyncMemory(storage)
            with pytest.raises(ThreadOwnershipError):
                await memory.delete_thread("t", resource_id="a")
            assert await storage.get_thread("t") == theirs

    asyncio.run(scenario())
