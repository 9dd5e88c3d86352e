"""Working-memory rules that hold the same on every backend, through the public API.

* ``update_resource(working_memory=None)`` clears the working memory and keeps the rest;
* the 4 MiB working-memory limit is the same in resource and thread scope, and its
  message names working memory (in thread scope the text lives in thread metadata,
  whose own limit does not count it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from backends import backend_url

import workmem
from workmem.agent import Memory
from workmem.storage import MemoryStorage

__all__ = ["backend_url"]


@pytest.fixture
def storage(backend_url: str) -> Iterator[MemoryStorage]:
    with workmem.connect(backend_url) as opened:
        yield opened


def _rid() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


# -- update_resource(working_memory=None) ------------------------------------------------------------


def test_update_resource_with_working_memory_none_clears_it(storage: MemoryStorage) -> None:
    rid = _rid()
    created = storage.update_resource(rid, working_memory='{"name":"Sam"}', metadata={"plan": "pro"})
    cleared = storage.update_resource(rid, working_memory=None)
    assert (cleared.working_memory, cleared.metadata, cleared.created_at) == (None, {"plan": "pro"}, created.created_at)
    assert cleared.updated_at >= created.updated_at
    assert storage.get_resource(rid) == cleared
    assert storage.get_working_memory(scope="resource", resource_id=rid) is None
    # Omitting it keeps it; a merge after clearing starts from {}.
    assert storage.update_resource(rid, metadata={"seen": 1}).working_memory is None
    assert storage.merge_working_memory({"age": 3}, scope="resource", resource_id=rid) == {"age": 3}
    assert storage.update_resource(rid, metadata={"seen": 2}).working_memory == '{"age":3}'
    # On a missing resource it creates one without working memory.
    fresh = _rid()
    made = storage.update_resource(fresh, working_memory=None)
    assert (made.id, made.working_memory, made.metadata) == (fresh, None, None)
    assert storage.get_resource(fresh) == made
    # What Memory shows then: the empty template.
    memory = Memory(storage)
    assert memory.get_working_memory(resource_id=rid) == '{"age":3}'
    storage.update_resource(rid, working_memory=None)
    assert memory.get_working_memory(resource_id=rid) is None
    assert "- **First Name**: \n" in memory.system_message(resource_id=rid)


# -- one 4 MiB limit for both scopes ------------------------------------------------------------------

LIMIT = workmem.validation.MAX_TEXT_BYTES


def _texts_at_the_limit() -> dict[str, str]:
    """Working memories of exactly 4 MiB of UTF-8, some of which JSON escaping makes much longer."""
    return {
        "ascii": "x" * LIMIT,
        "quotes": '"' * LIMIT,  # twice as long as a JSON string
        "controls": "\x01" * LIMIT,  # six times as long (\u0001)
        "multibyte": "é" * (LIMIT // 2),
    }


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_a_4_mib_working_memory_is_accepted_in_both_scopes(storage: MemoryStorage, scope: str) -> None:
    memory = Memory(storage, scope=scope)  # type: ignore[arg-type]
    rid = _rid()
    thread = memory.create_thread(resource_id=rid, metadata={"topic": "limits"})
    for text in _texts_at_the_limit().values():
        memory.update_working_memory(text, thread_id=thread.id)
        assert memory.get_working_memory(thread_id=thread.id) == text
    # Set through thread metadata too (Memory.update_thread and the storage's own update_thread).
    memory.update_thread(thread.id, metadata={"workingMemory": "y" * LIMIT})
    assert memory.get_working_memory(thread_id=thread.id) == "y" * LIMIT
    if scope == "thread":
        stored = storage.update_thread(thread.id, metadata={"workingMemory": '"' * LIMIT, "more": "z"})
        assert stored.metadata == {"topic": "limits", "workingMemory": '"' * LIMIT, "more": "z"}
        assert storage.get_thread(thread.id) == stored


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_over_4_mib_is_refused_in_both_scopes_naming_working_memory(storage: MemoryStorage, scope: str) -> None:
    memory = Memory(storage, scope=scope)  # type: ignore[arg-type]
    rid = _rid()
    thread = memory.create_thread(resource_id=rid, metadata={"topic": "limits"})
    memory.update_working_memory("# kept", thread_id=thread.id)
    before = (storage.get_resource(rid), storage.get_thread(thread.id))
    for text in ("x" * (LIMIT + 1), "é" * (LIMIT // 2) + "x"):
        with pytest.raises(workmem.ValidationError, match=f"^working memory is larger than {LIMIT} bytes$"):
            memory.update_working_memory(text, thread_id=thread.id)
        with pytest.raises(workmem.ValidationError, match=r"^working memory is larger than"):
            memory.update_thread(thread.id, metadata={"workingMemory": text})
        with pytest.raises(workmem.ValidationError, match=r"^working memory is larger than"):
            storage.set_working_memory(text, scope=scope, resource_id=rid, thread_id=thread.id)  # type: ignore[arg-type]
    assert (storage.get_resource(rid), storage.get_thread(thread.id)) == before


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_schema_merges_up_to_4_mib_in_both_scopes(storage: MemoryStorage, scope: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    memory = Memory(storage, scope=scope, schema=schema)  # type: ignore[arg-type]
    thread = memory.create_thread(resource_id=_rid())
    overhead = len('{"a":"","b":""}')
    half = (LIMIT - overhead) // 2
    memory.merge_working_memory({"a": "q" * half}, thread_id=thread.id)
    merged = memory.merge_working_memory({"b": "q" * (LIMIT - overhead - half)}, thread_id=thread.id)
    assert len(workmem.validation.dump_json(merged)) == LIMIT
    assert memory.get_working_memory_data(thread_id=thread.id) == merged
    before = memory.get_working_memory(thread_id=thread.id)
    with pytest.raises(workmem.ValidationError, match="larger than"):
        memory.merge_working_memory({"b": "q" * (LIMIT - overhead - half + 1)}, thread_id=thread.id)
    assert memory.get_working_memory(thread_id=thread.id) == before


def test_thread_metadata_besides_working_memory_keeps_its_own_limit(storage: MemoryStorage) -> None:
    memory = Memory(storage, scope="thread")
    thread = memory.create_thread(resource_id=_rid())
    memory.update_working_memory("w" * LIMIT, thread_id=thread.id)
    with pytest.raises(workmem.ValidationError, match=r"^metadata is larger than"):
        storage.update_thread(thread.id, metadata={"other": "m" * LIMIT})
    storage.update_thread(thread.id, metadata={"other": "m" * (LIMIT - 100)})  # 4 MiB of each fits
    stored = storage.get_thread(thread.id)
    assert stored is not None and stored.metadata == {"workingMemory": "w" * LIMIT, "other": "m" * (LIMIT - 100)}
