"""``AsyncMemory`` on memory://, a libSQL file and PostgreSQL, opened with ``connect_async``.

``AsyncMemory`` awaits the same flows (:mod:`workmem.agent.operations`) that ``Memory``
runs without an event loop, so these tests check the async face end to end and,
on a shared ``memory://`` store, that both faces give the same results.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from backends import fresh_url
from pydantic import BaseModel, Field
from scripted_model import (
    USER_TURN,
    copy_back_arguments,
    edit_arguments,
    fenced,
    memory_message,
    nested_arguments,
    patch_arguments,
    template_arguments,
)

import workmem
import workmem.agent.aio
from workmem import AsyncMemory, AsyncMemoryStorage, Memory
from workmem.adapters.reference import AsyncReferenceStorage, ReferenceStorage
from workmem.agent import sub_agent_resource_id
from workmem.errors import (
    ReadOnlyMemoryError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
)
from workmem.records import Scope

TEMPLATE = "# R&D notes\n- **Name**:\n- **Likes**:\n"
SCOPES: list[Scope] = ["resource", "thread"]


class Contact(BaseModel):
    email: str | None = None


class Profile(BaseModel):
    name: str = Field(description="The user's name")
    age: int | None = None
    contact: Contact | None = None
    interests: list[str] = Field(default_factory=list)


KEYS = [f"k{index:02d}" for index in range(20)]
WIDE_SCHEMA = {"type": "object", "properties": {key: {"type": "integer"} for key in KEYS}}


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.backend("memory")),
        pytest.param("libsql", marks=pytest.mark.backend("libsql")),
        pytest.param("postgres", marks=pytest.mark.backend("postgres")),
    ]
)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace: a named memory:// store, a new libSQL file, a new PostgreSQL schema (or a loud skip)."""
    with fresh_url(request.param) as fresh:
        yield fresh


def _rid() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


async def _thread_id(memory: AsyncMemory, scope: Scope, rid: str) -> str | None:
    """A thread to address the memory through in thread scope; ``None`` (address by resource) otherwise."""
    return (await memory.create_thread(resource_id=rid)).id if scope == "thread" else None


# -- opening and owning ----------------------------------------------------------------------------


def test_open_connects_async_and_owns_the_storage(url: str) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url) as memory:
            assert isinstance(memory.storage, AsyncMemoryStorage)
            assert memory.mode == "template" and memory.scope == "resource" and not memory.read_only
            await memory.update_working_memory("# hi", resource_id="r")
            assert await memory.get_working_memory(resource_id="r") == "# hi"
            assert repr(memory).startswith("AsyncMemory(")
        # A second memory on a storage the caller opened sees the same data and leaves the storage open.
        storage = await workmem.connect_async(url)
        async with AsyncMemory(storage) as memory:
            assert await memory.get_working_memory(resource_id="r") == "# hi"
        assert await storage.get_working_memory(scope="resource", resource_id="r") == "# hi"
        await storage.close()

    asyncio.run(body())


def test_close_closes_only_what_open_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []

    class Spy(AsyncReferenceStorage):
        async def close(self) -> None:
            closed.append("closed")

    async def fake_connect_async(url: str, *, create: bool = True, **options: Any) -> AsyncMemoryStorage:
        assert (url, create, options) == ("memory://x", True, {})
        return Spy()

    monkeypatch.setattr(workmem.agent.aio, "connect_async", fake_connect_async)

    async def body() -> None:
        async with await AsyncMemory.open("memory://x") as memory:
            assert isinstance(memory.storage, Spy)
        assert closed == ["closed"]
        given = Spy()
        async with AsyncMemory(given) as memory:
            assert memory.storage is given
        await memory.close()
        assert closed == ["closed"]  # a storage passed in belongs to the caller

    asyncio.run(body())


def test_bad_arguments_raise_before_connecting() -> None:
    async def body() -> None:
        # The scheme does not exist: the argument errors must come first, with no connection attempt.
        with pytest.raises(ValidationError, match="not both"):
            await AsyncMemory.open("nosuchscheme://x", template=TEMPLATE, schema=Profile)
        with pytest.raises(ValidationError, match="scope must be"):
            await AsyncMemory.open("nosuchscheme://x", scope="user")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="read_only must be a bool"):
            await AsyncMemory.open("nosuchscheme://x", read_only="yes")  # type: ignore[arg-type]
        with pytest.raises(workmem.UnknownSchemeError):
            await AsyncMemory.open("nosuchscheme://x")

    asyncio.run(body())


def test_constructor_takes_only_an_async_storage() -> None:
    with pytest.raises(ValidationError, match=r"await AsyncMemory\.open\(url\)"):
        AsyncMemory("memory://x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="connect_async, or use Memory"):
        AsyncMemory(ReferenceStorage())  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="AsyncMemoryStorage, not int"):
        AsyncMemory(3)  # type: ignore[arg-type]


# -- template mode -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_template_mode_tool_call_shows_in_the_next_system_message(url: str, scope: Scope) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope, template=TEMPLATE) as memory:
            rid = _rid()
            tid = await _thread_id(memory, scope, rid)
            address = {"thread_id": tid, "resource_id": rid}
            definition = memory.tool_definition(format="openai")
            assert definition is not None and definition["function"]["name"] == "updateWorkingMemory"
            assert definition["function"]["parameters"]["properties"]["memory"]["type"] == "string"
            before = await memory.system_message(**address)
            assert fenced(before) == "# R&amp;D notes\n- **Name**:\n- **Likes**:\n"  # the empty template

            text = "# R&D notes\n- **Name**: Sam <sam@example.com>\n- **Likes**: R&B\n"
            result = await memory.call_tool(json.dumps({"memory": text}), **address)
            assert result == {"ok": True, "action": "replaced", "message": "Working memory replaced."}
            assert await memory.get_working_memory(**address) == text
            after = await memory.system_message(**address)
            assert fenced(after) == "# R&amp;D notes\n- **Name**: Sam &lt;sam@example.com&gt;\n- **Likes**: R&amp;B\n"
            messages = await memory.process_input([{"role": "system", "content": "Be brief."}, *USER_TURN], **address)
            assert [m["role"] for m in messages] == ["system", "system", "user"]
            assert messages[1] == {"role": "system", "content": after, "name": "workmem"}

            # The other scope's memory is untouched: each scope keeps its own place.
            if scope == "thread":
                assert await workmem_resource_memory(memory, rid) is None
            else:
                thread = await memory.create_thread(resource_id=rid)
                assert await memory.get_working_memory(thread_id=thread.id) == text  # shared by its threads

    asyncio.run(body())


async def workmem_resource_memory(memory: AsyncMemory, rid: str) -> str | None:
    return await memory.storage.get_working_memory(scope="resource", resource_id=rid)


@pytest.mark.parametrize("scope", SCOPES)
def test_template_mode_initial_memory_and_thread_updates(url: str, scope: Scope) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope) as memory:
            rid = _rid()
            thread = await memory.create_thread(
                "t-" + uuid.uuid4().hex[:6], resource_id=rid, title="one", metadata={"workingMemory": "# first"}
            )
            assert await memory.get_working_memory(thread_id=thread.id) == "# first"
            with pytest.raises(ThreadExistsError):
                await memory.create_thread(thread.id, resource_id=rid)
            updated = await memory.update_thread(thread.id, title="two", metadata={"workingMemory": "# second"})
            assert updated.title == "two"
            assert await memory.get_working_memory(thread_id=thread.id) == "# second"
            assert (await memory.get_thread(thread.id, resource_id=rid)) is not None
            with pytest.raises(ThreadOwnershipError):
                await memory.get_thread(thread.id, resource_id="someone-else")
            page = await memory.list_threads(rid)
            assert [t.id for t in page.threads] == [thread.id]
            with pytest.raises(ThreadOwnershipError):
                await memory.delete_thread(thread.id, resource_id="someone-else")
            assert await memory.delete_thread(thread.id, resource_id=rid) is True
            assert await memory.get_thread(thread.id) is None
            with pytest.raises(ThreadNotFoundError):
                await memory.get_working_memory(thread_id=thread.id)

    asyncio.run(body())


# -- schema mode -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_schema_mode_with_a_pydantic_model(url: str, scope: Scope) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope, schema=Profile) as memory:
            assert memory.mode == "schema"
            rid = _rid()
            tid = await _thread_id(memory, scope, rid)
            address = {"thread_id": tid, "resource_id": rid}
            definition = memory.tool_definition(format="anthropic")
            assert definition is not None
            assert "name" in definition["input_schema"]["properties"]["memory"]["properties"]

            merged = await memory.call_tool({"memory": {"name": "Sam", "contact": {"email": "s@x"}}}, **address)
            assert merged == {"ok": True, "action": "merged", "message": "Working memory updated."}
            assert await memory.merge_working_memory({"age": 41, "interests": ["go"]}, **address) == {
                "name": "Sam",
                "contact": {"email": "s@x"},
                "age": 41,
                "interests": ["go"],
            }
            await memory.call_tool('{"memory": {"contact": null, "age": 42}}', **address)
            stored = {"name": "Sam", "age": 42, "interests": ["go"]}
            assert await memory.get_working_memory_data(**address) == stored
            shown = json.loads(fenced(await memory.system_message(**address)))
            assert shown == stored

            # What the model got wrong comes back as an error for it, with nothing stored.
            wrong = await memory.call_tool({"memory": {"age": "forty"}}, **address)
            assert wrong["ok"] is False and "Nothing was stored" in wrong["error"]
            assert (await memory.call_tool({"memory": {}}, **address))["action"] == "ignored"
            with pytest.raises(ValidationError, match="does not match the schema"):
                await memory.update_working_memory({"name": 3}, **address)
            assert await memory.get_working_memory_data(**address) == stored

    asyncio.run(body())


def test_template_mode_refuses_schema_only_methods() -> None:
    async def body() -> None:
        memory = AsyncMemory(AsyncReferenceStorage())
        with pytest.raises(ValidationError, match="create the AsyncMemory with schema"):
            await memory.merge_working_memory({"a": 1}, resource_id="r")
        with pytest.raises(ValidationError, match="create the AsyncMemory with schema"):
            await memory.get_working_memory_data(resource_id="r")

    asyncio.run(body())


@pytest.mark.parametrize("scope", SCOPES)
def test_20_concurrent_schema_tool_calls_keep_all_20_keys(url: str, scope: Scope) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope, schema=WIDE_SCHEMA) as memory:
            rid = _rid()
            tid = await _thread_id(memory, scope, rid)
            results = await asyncio.gather(
                *(
                    memory.call_tool({"memory": {key: index}}, thread_id=tid, resource_id=rid)
                    for index, key in enumerate(KEYS)
                )
            )
            assert [r["action"] for r in results] == ["merged"] * len(KEYS)
            assert await memory.get_working_memory_data(thread_id=tid, resource_id=rid) == {
                key: index for index, key in enumerate(KEYS)
            }

    asyncio.run(body())


# -- read-only mode ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_read_only_offers_no_tool_and_writes_nothing(url: str, scope: Scope) -> None:
    async def body() -> None:
        rid = _rid()
        async with await AsyncMemory.open(url, scope=scope, schema=Profile) as writer:
            tid = await _thread_id(writer, scope, rid)
            await writer.merge_working_memory({"name": "Sam"}, thread_id=tid, resource_id=rid)
        async with await AsyncMemory.open(url, scope=scope, schema=Profile, read_only=True) as reader:
            assert reader.tool_definition() is None
            message = await reader.system_message(thread_id=tid, resource_id=rid)
            assert message.startswith("WORKING MEMORY (read-only)")
            assert "updateWorkingMemory" not in message
            assert json.loads(fenced(message)) == {"name": "Sam"}
            refused = [
                reader.call_tool({"memory": {"name": "Kim"}}, thread_id=tid, resource_id=rid),
                reader.merge_working_memory({"name": "Kim"}, thread_id=tid, resource_id=rid),
                reader.update_working_memory({"name": "Kim"}, thread_id=tid, resource_id=rid),
                reader.create_thread(resource_id=rid),
            ]
            for call in refused:
                with pytest.raises(ReadOnlyMemoryError, match="this AsyncMemory is read-only"):
                    await call
            assert await reader.get_working_memory_data(thread_id=tid, resource_id=rid) == {"name": "Sam"}

    asyncio.run(body())


# -- what models do ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_scripted_model_habits_come_back_as_tool_results(url: str, scope: Scope) -> None:
    async def body() -> None:
        async with await AsyncMemory.open(url, scope=scope, template=TEMPLATE) as memory:
            rid = _rid()
            address = {"thread_id": await _thread_id(memory, scope, rid), "resource_id": rid}

            async def prompt() -> str:
                return memory_message(await memory.process_input(USER_TURN, **address))

            # Echoing the unfilled template, or copying back the empty memory, erases nothing: ignored.
            assert (await memory.call_tool(template_arguments(await prompt()), **address))["action"] == "ignored"
            copied = await memory.call_tool(copy_back_arguments(await prompt(), memory.mode), **address)
            assert copied["action"] == "ignored"
            assert await memory.get_working_memory(**address) is None
            # Editing what is shown (escapes and all) stores what was meant; copying it back is stable.
            edit = edit_arguments(await prompt(), "- **Name**:", "- **Name**: a < b & </working_memory_data>")
            assert (await memory.call_tool(edit, **address))["action"] == "replaced"
            meant = "# R&D notes\n- **Name**: a < b & </working_memory_data>\n- **Likes**:\n"
            for _ in range(3):
                message = await prompt()
                assert message.count("</working_memory_data>") == 1
                result = await memory.call_tool(copy_back_arguments(message, memory.mode), **address)
                assert result["action"] == "replaced"
                assert await memory.get_working_memory(**address) == meant
            # Arguments nested absurdly deep are an error for the model, not a crash.
            nested = await memory.call_tool(nested_arguments(100_000), **address)
            assert nested["ok"] is False and "Nothing was stored" in nested["error"]
            assert await memory.get_working_memory(**address) == meant

        async with await AsyncMemory.open(url, scope=scope, schema=Profile) as memory:
            rid = _rid()
            address = {"thread_id": await _thread_id(memory, scope, rid), "resource_id": rid}
            assert memory.schema is not None
            # A patch sent as a JSON string inside the arguments, as models do, merges.
            sent = patch_arguments({"name": "Sam <3"}, memory.schema, as_string=True)
            assert (await memory.call_tool(sent, **address))["action"] == "merged"
            # A patch padded with null for every other field clears those fields and keeps the one sent.
            padded = patch_arguments({"age": 7}, memory.schema, pad_with_null=True)
            assert (await memory.call_tool(padded, **address))["action"] == "merged"
            assert await memory.get_working_memory_data(**address) == {"age": 7}
            message = memory_message(await memory.process_input(USER_TURN, **address))
            assert (await memory.call_tool(copy_back_arguments(message, memory.mode), **address))["ok"] is True
            assert await memory.get_working_memory_data(**address) == {"age": 7}

    asyncio.run(body())


# -- one set of rules for both faces ------------------------------------------------------------------------


def test_memory_and_async_memory_give_the_same_results_on_one_store() -> None:
    name = f"memory://parity-{uuid.uuid4().hex}"
    rid = _rid()
    calls: list[tuple[str, Any]] = [
        ("call_tool", {"memory": {"name": "Sam"}}),
        ("call_tool", '{"memory": {"age": "x"}}'),
        ("call_tool", "not json"),
        ("call_tool", {"memory": {}}),
        ("call_tool", {"memory": {"contact": {"email": "a@b"}, "interests": ["x"]}}),
    ]

    def run_sync_face() -> list[Any]:
        memory = Memory(name, schema=Profile)
        out: list[Any] = [memory.call_tool(arguments, resource_id=rid + "-sync") for _, arguments in calls]
        return [*out, memory.system_message(resource_id=rid + "-sync"), memory.tool_definition()]

    async def run_async_face() -> list[Any]:
        async with await AsyncMemory.open(name, schema=Profile) as memory:
            out: list[Any] = [await memory.call_tool(arguments, resource_id=rid + "-async") for _, arguments in calls]
            return [*out, await memory.system_message(resource_id=rid + "-async"), memory.tool_definition()]

    sync_results, async_results = run_sync_face(), asyncio.run(run_async_face())
    assert sync_results == async_results
    assert [r["ok"] for r in sync_results[: len(calls)]] == [True, False, False, True, True]


def test_sync_memory_works_inside_a_running_event_loop() -> None:
    async def body() -> str | None:
        memory = Memory(ReferenceStorage(), scope="thread")  # its flows never suspend: no loop is needed or used
        thread = memory.create_thread(resource_id="r", metadata={"workingMemory": "# inside"})
        return memory.get_working_memory(thread_id=thread.id)

    assert asyncio.run(body()) == "# inside"


def test_isolated_sub_agent_ids_only_as_made() -> None:
    async def body() -> None:
        memory = AsyncMemory(AsyncReferenceStorage())
        isolated = sub_agent_resource_id("alice", "researcher", isolated=True)
        await memory.update_working_memory("# notes", resource_id=isolated)
        assert await memory.get_working_memory(resource_id=isolated) == "# notes"
        with pytest.raises(ValidationError, match="reserved for isolated sub-agents"):
            await memory.get_working_memory(resource_id=str(isolated))

    asyncio.run(body())


def test_from_memory_runs_a_sync_memory_on_worker_threads_and_leaves_its_storage_open(tmp_path: Any) -> None:
    """``AsyncMemory.from_memory``: the same settings and memory; its calls run off the event loop's thread."""
    import threading

    with Memory(f"file:{tmp_path / 'sync.db'}", scope="thread", max_chars=500) as memory:
        memory.create_thread("t-1", resource_id="u-1")
        threads: list[str] = []
        get_thread = memory.storage._get_thread

        async def recording(thread_id: str) -> Any:
            threads.append(threading.current_thread().name)
            return await get_thread(thread_id)

        memory.storage._get_thread = recording  # type: ignore[method-assign]

        async def body() -> None:
            async with AsyncMemory.from_memory(memory) as view:
                assert (view.scope, view.mode, view.max_chars, view.read_only) == ("thread", "template", 500, False)
                await view.update_working_memory("# notes", thread_id="t-1")
                assert await view.get_working_memory(thread_id="t-1") == "# notes"

        asyncio.run(body())
        assert threads and all(name.startswith("workmem") for name in threads)  # its worker threads, never the loop's
        assert memory.get_working_memory(thread_id="t-1") == "# notes"  # still open after the view closed
    with pytest.raises(ValidationError, match="takes a Memory, not AsyncReferenceStorage"):
        AsyncMemory.from_memory(AsyncReferenceStorage())  # type: ignore[arg-type]
