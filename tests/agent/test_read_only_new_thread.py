"""A read-only memory of a thread that does not exist yet reads as empty: ``Memory`` and ``AsyncMemory``.

A read-only memory cannot create the thread, and an agent framework's new
session has none yet: its reads (``get_working_memory``, ``get_working_memory_data``,
``system_message``, ``process_input``) show the empty memory instead of raising
``ThreadNotFoundError``, in both scopes, and create nothing. A writable memory
still raises, and a thread of another owner still raises ``ThreadOwnershipError``.
The integrations' own tests run the same through the real frameworks.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from backends import backend_url
from pydantic import BaseModel

from workmem import AsyncMemory, Memory, ThreadNotFoundError, ThreadOwnershipError
from workmem.records import Scope

__all__ = ["backend_url"]  # the fixture: every backend


class Profile(BaseModel):
    name: str | None = None


async def _done(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _open(url: str, api: str, **settings: Any) -> Memory | AsyncMemory:
    if api == "sync":
        return Memory(url, **settings)
    return await AsyncMemory.open(url, **settings)


async def _close(memory: Memory | AsyncMemory) -> None:
    await _done(memory.close())


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("scope", ["thread", "resource"])
def test_a_read_only_memory_of_a_thread_not_there_yet_reads_as_empty(backend_url: str, api: str, scope: Scope) -> None:
    async def body() -> None:
        writer = await _open(backend_url, api, scope=scope, schema=Profile)  # creates the tables
        await _done(writer.create_thread("t-old", resource_id="u-1"))  # an empty memory, for comparison
        reader = await _open(backend_url, api, scope=scope, schema=Profile, read_only=True)
        try:
            empty = await _done(reader.system_message(thread_id="t-old", resource_id="u-1"))
            assert await _done(reader.get_working_memory(thread_id="t-new")) is None
            assert await _done(reader.get_working_memory_data(thread_id="t-new", resource_id="u-1")) == {}
            assert await _done(reader.system_message(thread_id="t-new", resource_id="u-1")) == empty
            assert await _done(reader.system_message(thread_id="t-new")) == empty
            messages = await _done(reader.process_input([{"role": "user", "content": "hi"}], thread_id="t-new"))
            assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == empty
            assert await _done(reader.get_thread("t-new")) is None  # nothing was created
            # the rules around it stay: a writable memory raises, another owner's thread raises
            with pytest.raises(ThreadNotFoundError):
                await _done(writer.get_working_memory(thread_id="t-new"))
            with pytest.raises(ThreadNotFoundError):
                await _done(writer.system_message(thread_id="t-new"))
            with pytest.raises(ThreadOwnershipError):
                await _done(reader.system_message(thread_id="t-old", resource_id="u-2"))
        finally:
            await _close(reader)
            await _close(writer)

    asyncio.run(body())
