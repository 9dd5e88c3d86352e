"""``Memory.create_thread`` is insert-only and atomic in the database, on every backend."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from backends import backend_url

import workmem
from workmem import ThreadExistsError, ValidationError
from workmem.agent import Memory
from workmem.records import Thread
from workmem.storage import MemoryStorage

__all__ = ["backend_url"]

RACERS = 8
ROUNDS = 5


def _slow_reads(storage: MemoryStorage) -> MemoryStorage:
    """``storage`` with ``get_thread`` pausing before it answers: a read-then-write create loses every race."""
    read = storage.get_thread

    def get_thread(thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        found = read(thread_id, resource_id=resource_id)
        time.sleep(0.02)
        return found

    storage.get_thread = get_thread  # type: ignore[method-assign]
    return storage


@pytest.fixture
def storages(backend_url: str) -> Iterator[list[MemoryStorage]]:
    """One connection per racer, all to the same fresh namespace, with slow reads."""
    opened = [_slow_reads(workmem.connect(backend_url)) for _ in range(RACERS)]
    try:
        yield opened
    finally:
        for storage in opened:
            storage.close()


def _race(storages: list[MemoryStorage], thread_id: str, owner: str) -> list[Thread | BaseException]:
    barrier = threading.Barrier(len(storages))
    results: list[Thread | BaseException] = [RuntimeError("did not finish")] * len(storages)

    def create(index: int) -> None:
        memory = Memory(storages[index], scope="thread")
        try:
            barrier.wait(timeout=30)
            results[index] = memory.create_thread(
                thread_id, resource_id=owner, title=f"by {index}", metadata={"workingMemory": f"# racer {index}"}
            )
        except BaseException as exc:
            results[index] = exc

    workers = [threading.Thread(target=create, args=(i,)) for i in range(len(storages))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    return results


def test_racing_creates_of_one_id_by_one_owner_leave_exactly_one(storages: list[MemoryStorage]) -> None:
    owner = f"user-{uuid.uuid4().hex[:8]}"
    for _ in range(ROUNDS):
        thread_id = f"t-{uuid.uuid4().hex[:8]}"
        results = _race(storages, thread_id, owner)
        winners = [i for i, r in enumerate(results) if isinstance(r, Thread)]
        losers = [r for r in results if isinstance(r, ThreadExistsError)]
        assert len(winners) == 1, results
        assert len(losers) == RACERS - 1, results
        stored = storages[0].get_thread(thread_id)
        assert stored is not None and stored.title == f"by {winners[0]}"
        memory = Memory(storages[0], scope="thread")
        assert memory.get_working_memory(thread_id=thread_id) == f"# racer {winners[0]}"


def test_an_existing_id_raises_thread_exists_whoever_owns_it(storages: list[MemoryStorage]) -> None:
    memory = Memory(storages[0])
    owner, other = f"user-{uuid.uuid4().hex[:8]}", f"user-{uuid.uuid4().hex[:8]}"
    first = memory.create_thread("t-dup", resource_id=owner, title="first", metadata={"workingMemory": "# first"})
    for resource_id in (owner, other):
        with pytest.raises(ThreadExistsError, match="'t-dup' already exists") as raised:
            memory.create_thread("t-dup", resource_id=resource_id, metadata={"workingMemory": "# second"})
        assert not isinstance(raised.value, ValidationError)  # valid input: not something to fix and resend
        assert raised.value.thread_id == "t-dup"
        assert other not in str(raised.value) and owner not in str(raised.value)
    assert memory.get_thread("t-dup") == first
    assert memory.get_working_memory(resource_id=owner) == "# first"  # the refused create wrote nothing
    assert memory.get_working_memory(resource_id=other) is None
