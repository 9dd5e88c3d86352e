"""``max_chars``: the working-memory size limit, through ``Memory`` and ``AsyncMemory`` on every backend here.

The four framework-neutral paths (the tool call, ``update_working_memory``,
``merge_working_memory``, the system message) are each written once as an async
scenario and run through both faces: ``Memory`` (its sync calls inside the
scenario) and ``AsyncMemory`` (awaited), on memory://, a libSQL file, PostgreSQL
and Upstash (server backends skip loudly). Memory that another writer stored
above the limit is written straight through a storage of the same namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from backends import fresh_url
from scripted_model import USER_TURN, ScriptedModel, copy_back_arguments, edit_arguments, fenced, memory_message

import workmem
from workmem import AsyncMemory, Memory, WorkingMemoryTooLargeError
from workmem.adapters.reference import ReferenceStorage
from workmem.agent.prompt import too_large_message
from workmem.errors import ValidationError
from workmem.kit import MergeChange, ScopeTarget
from workmem.records import Scope
from workmem.validation import dump_json

TEMPLATE = "# Notes\n- **Name**:\n- **Facts**:\n"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "notes": {"type": "string"}, "tags": {"type": "array"}},
}
LIMIT = 1000
SCOPES: list[Scope] = ["resource", "thread"]
REFUSED_TEMPLATE = "Rewrite it shorter: condense or drop what matters least"
REFUSED_SCHEMA = "set the fields that matter least to null"


@pytest.fixture(
    params=[pytest.param(name, marks=pytest.mark.backend(name)) for name in ("memory", "libsql", "postgres", "upstash")]
)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace on each backend that runs here (server backends skip loudly)."""
    with fresh_url(request.param) as fresh:
        yield fresh


@pytest.fixture(params=["Memory", "AsyncMemory"])
def face(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Either:
    """A ``Memory`` or an ``AsyncMemory`` behind one face whose methods are awaited, so a scenario is written once."""

    def __init__(self, memory: Memory | AsyncMemory) -> None:
        self.memory = memory

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.memory, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        return call


@contextlib.asynccontextmanager
async def opened(url: str, face: str, **settings: Any) -> AsyncIterator[Either]:
    if face == "Memory":
        memory = Memory(url, **settings)
        try:
            yield Either(memory)
        finally:
            memory.close()
    else:
        async_memory = await AsyncMemory.open(url, **settings)
        try:
            yield Either(async_memory)
        finally:
            await async_memory.close()


async def _address(memory: Either, scope: Scope) -> dict[str, Any]:
    """Where the memory lives: a new thread (thread scope) or a new resource (resource scope)."""
    resource_id = f"user-{uuid.uuid4().hex[:8]}"
    thread = await memory.create_thread(resource_id=resource_id)
    return {"thread_id": thread.id} if scope == "thread" else {"resource_id": resource_id}


def _store_directly(url: str, text: str, scope: Scope, address: dict[str, Any]) -> None:
    """Another writer (a program with no limit) stores ``text`` straight through the storage."""
    storage = workmem.connect(url)
    try:
        storage.set_working_memory(text, scope=scope, **address)
    finally:
        storage.close()


def _text(size: int, fill: str = "x") -> str:
    """A template-mode memory of exactly ``size`` characters."""
    head = "# Notes\n- **Name**: Ann\n- **Facts**: "
    return head + fill * (size - len(head))


def _notes(size: int) -> dict[str, Any]:
    """A schema-mode document whose compact JSON text is exactly ``size`` characters."""
    empty = len(dump_json({"name": "Ann", "notes": ""}))
    document = {"name": "Ann", "notes": "n" * (size - empty)}
    assert len(dump_json(document)) == size
    return document


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


# -- the tool call -----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_tool_call_over_the_limit_is_refused_with_a_message_the_model_can_act_on(
    url: str, face: str, scope: Scope
) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, template=TEMPLATE, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            result = await memory.call_tool({"memory": _text(LIMIT)}, **at)  # exactly the limit: stored
            assert result == {
                "ok": True,
                "action": "replaced",
                "message": "Working memory replaced. It holds 1,000 of 1,000 characters.",
            }
            result = await memory.call_tool({"memory": _text(LIMIT + 1, "y")}, **at)
            assert result == {
                "ok": False,
                "error": "Working memory not updated: the result would be 1,001 characters, over the "
                "1,000-character limit. Rewrite it shorter: condense or drop what matters least, then call "
                "updateWorkingMemory again with the whole condensed memory.",
            }
            assert await memory.get_working_memory(**at) == _text(LIMIT)  # nothing was written

    run(scenario)


@pytest.mark.parametrize("scope", SCOPES)
def test_schema_tool_call_counts_the_merged_json_and_a_patch_that_makes_room_is_stored(
    url: str, face: str, scope: Scope
) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, schema=SCHEMA, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            assert (await memory.call_tool({"memory": _notes(990)}, **at))["message"].endswith(
                "It holds 990 of 1,000 characters."
            )
            # The patch alone is small; the merged document is what counts.
            grow = {"tags": ["a-long-tag"]}
            merged_size = len(dump_json({**_notes(990), **grow}))
            assert merged_size > LIMIT
            result = await memory.call_tool({"memory": grow}, **at)
            assert result["ok"] is False
            assert result["error"].startswith(
                f"Working memory not updated: the result would be {merged_size:,} characters, over the "
                "1,000-character limit."
            )
            assert REFUSED_SCHEMA in result["error"] and "updateWorkingMemory" in result["error"]
            assert await memory.get_working_memory_data(**at) == _notes(990)
            # Following the advice: one patch removing a field and recording the new one.
            result = await memory.call_tool({"memory": {"notes": None, **grow}}, **at)
            assert result["ok"] is True and result["action"] == "merged"
            assert await memory.get_working_memory_data(**at) == {"name": "Ann", "tags": ["a-long-tag"]}

    run(scenario)


# -- update and merge (direct calls raise) -------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_update_over_the_limit_raises_with_limit_and_size(url: str, face: str, scope: Scope) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, template=TEMPLATE, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            await memory.update_working_memory(_text(400), **at)
            with pytest.raises(WorkingMemoryTooLargeError) as info:
                await memory.update_working_memory(_text(1500), **at)
            error = info.value
            assert isinstance(error, ValidationError)
            assert (error.limit, error.size, error.current) == (LIMIT, 1500, 400)
            assert "1,500 characters, over the 1,000-character limit" in str(error)
            assert await memory.get_working_memory(**at) == _text(400)
            await memory.update_working_memory(_text(LIMIT), **at)
            assert await memory.get_working_memory(**at) == _text(LIMIT)

        async with opened(url, face, scope=scope, schema=SCHEMA, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            with pytest.raises(WorkingMemoryTooLargeError) as info:
                await memory.update_working_memory(_notes(LIMIT + 1), **at)
            assert (info.value.size, info.value.current) == (LIMIT + 1, 0)
            assert await memory.get_working_memory(**at) is None
            await memory.update_working_memory(json.dumps(_notes(LIMIT), indent=4), **at)  # stored compact: fits
            assert await memory.get_working_memory(**at) == dump_json(_notes(LIMIT))

    run(scenario)


@pytest.mark.parametrize("scope", SCOPES)
def test_merge_over_the_limit_raises_and_writes_nothing(url: str, face: str, scope: Scope) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, schema=SCHEMA, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            await memory.merge_working_memory({"name": "Ann"}, **at)
            stored = await memory.get_working_memory(**at)
            patch = {"notes": "n" * LIMIT}
            with pytest.raises(WorkingMemoryTooLargeError) as info:
                await memory.merge_working_memory(patch, **at)
            assert info.value.size == len(dump_json({"name": "Ann", **patch}))
            assert (info.value.limit, info.value.current) == (LIMIT, len(dump_json({"name": "Ann"})))
            assert await memory.get_working_memory(**at) == stored
            merged = await memory.merge_working_memory(_notes(LIMIT), **at)  # exactly the limit
            assert merged == _notes(LIMIT)
            assert len(dump_json(await memory.get_working_memory_data(**at))) == LIMIT

    run(scenario)


# -- the system message --------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_system_message_shows_the_use(url: str, face: str, scope: Scope) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, template=TEMPLATE, max_chars=4000) as memory:
            at = await _address(memory, scope)
            message = await memory.system_message(**at)
            assert "The current working memory (0 of 4,000 characters)." in message
            assert "Keep the working memory within 4,000 characters" in message
            await memory.update_working_memory(_text(1840), **at)
            message = await memory.system_message(**at)
            assert "(1,840 of 4,000 characters)" in message and "over the limit" not in message
            messages = await memory.process_input(USER_TURN, **at)
            assert memory_message(messages) == message

        async with opened(url, face, scope=scope, schema=SCHEMA, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            await memory.merge_working_memory(_notes(321), **at)
            message = await memory.system_message(**at)
            assert "(321 of 1,000 characters)" in message
            assert "within 1,000 characters (counted as compact JSON)" in message

        async with opened(url, face, scope=scope, template=TEMPLATE) as memory:  # no limit: no use shown
            at = await _address(memory, scope)
            await memory.update_working_memory(_text(1840), **at)
            assert "characters" not in await memory.system_message(**at)

    run(scenario)


# -- memory already above the limit ----------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_memory_stored_above_the_limit_is_read_shown_and_may_only_shrink(url: str, face: str, scope: Scope) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, template=TEMPLATE, max_chars=4000) as memory:
            at = await _address(memory, scope)
            _store_directly(url, _text(4512), scope, at)
            assert await memory.get_working_memory(**at) == _text(4512)
            message = await memory.system_message(**at)
            assert "(4,512 of 4,000 characters \u2014 over the limit: condense it)" in message
            assert "The working memory is over its 4,000-character limit" in message
            assert fenced(message) == _text(4512)  # shown whole
            # Growing it further is refused, on every path.
            result = await memory.call_tool({"memory": _text(4513)}, **at)
            assert result["ok"] is False
            assert "the result would be 4,513 characters; the memory already holds 4,512 characters" in result["error"]
            with pytest.raises(WorkingMemoryTooLargeError) as info:
                await memory.update_working_memory(_text(4600), **at)
            assert (info.value.size, info.value.current) == (4600, 4512)
            assert await memory.get_working_memory(**at) == _text(4512)
            # An update that does not grow it is stored, and the model is told to keep condensing.
            result = await memory.call_tool({"memory": _text(4300)}, **at)
            assert result["ok"] is True
            assert result["message"] == (
                "Working memory replaced. It holds 4,300 of 4,000 characters \u2014 still over the limit: "
                "condense it in your next update."
            )
            await memory.update_working_memory(_text(4300, "z"), **at)  # the same size: not larger
            assert await memory.get_working_memory(**at) == _text(4300, "z")
            assert (await memory.call_tool({"memory": _text(3999)}, **at))["message"].endswith(
                "It holds 3,999 of 4,000 characters."
            )

    run(scenario)


@pytest.mark.parametrize("scope", SCOPES)
def test_schema_memory_stored_above_the_limit_is_counted_compact_and_may_only_shrink(
    url: str, face: str, scope: Scope
) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, schema=SCHEMA, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            # Another program stores it indented: counted as workmem stores it (compact), and shown.
            _store_directly(url, json.dumps(_notes(1200), indent=2), scope, at)
            assert await memory.get_working_memory_data(**at) == _notes(1200)
            assert "(1,200 of 1,000 characters \u2014 over the limit: condense it)" in await memory.system_message(**at)
            with pytest.raises(WorkingMemoryTooLargeError) as info:
                await memory.merge_working_memory({"tags": ["x"]}, **at)
            assert info.value.current == 1200
            result = await memory.call_tool({"memory": {"tags": ["x"]}}, **at)
            assert result["ok"] is False and "already holds 1,200 characters" in result["error"]
            # A patch that shrinks it is merged, though it is still over the limit.
            shorter = _notes(1100)
            merged = await memory.merge_working_memory({"notes": shorter["notes"]}, **at)
            assert merged == shorter
            result = await memory.call_tool({"memory": {"notes": "short"}}, **at)
            assert result["ok"] is True and "over the limit" not in result["message"]

    run(scenario)


# -- working memory set through thread metadata -----------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_thread_metadata_working_memory_obeys_the_limit(url: str, face: str, scope: Scope) -> None:
    async def scenario() -> None:
        async with opened(url, face, scope=scope, template=TEMPLATE, max_chars=LIMIT) as memory:
            with pytest.raises(WorkingMemoryTooLargeError):
                await memory.create_thread("t-big", resource_id="user-1", metadata={"workingMemory": _text(1001)})
            assert await memory.get_thread("t-big") is None  # nothing was created
            thread = await memory.create_thread("t-1", resource_id="user-1", metadata={"workingMemory": _text(900)})
            with pytest.raises(WorkingMemoryTooLargeError):
                await memory.update_thread(thread.id, title="new", metadata={"workingMemory": _text(1001)})
            assert (await memory.get_thread(thread.id)).title == ""  # nothing was changed
            assert await memory.get_working_memory(thread_id=thread.id) == _text(900)

    run(scenario)


# -- scripted-model habits ---------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
def test_model_copying_back_escaped_memory_near_the_limit_is_not_refused(url: str, face: str, scope: Scope) -> None:
    """Shown escaped (``&amp;``) the memory is longer than the limit; what counts is what is stored."""

    async def scenario() -> None:
        async with opened(url, face, scope=scope, template=TEMPLATE, max_chars=LIMIT) as memory:
            at = await _address(memory, scope)
            stored = _text(LIMIT, "&")
            await memory.update_working_memory(stored, **at)
            prompt = memory_message(await memory.process_input(USER_TURN, **at))
            assert len(fenced(prompt)) > LIMIT
            result = await memory.call_tool(copy_back_arguments(prompt, "template"), **at)
            assert result["ok"] is True and "1,000 of 1,000 characters" in result["message"]
            assert await memory.get_working_memory(**at) == stored
            # A model appending a fact to a full memory is refused, then condenses and succeeds.
            result = await memory.call_tool(edit_arguments(prompt, "Ann", "Ann (likes tea)"), **at)
            assert result["ok"] is False and REFUSED_TEMPLATE in result["error"]
            assert await memory.get_working_memory(**at) == stored
            result = await memory.call_tool(
                {"memory": "# Notes\n- **Name**: Ann (likes tea)\n- **Facts**: &&&\n"}, **at
            )
            assert result["ok"] is True

    run(scenario)


def test_scripted_model_follows_the_refusal_over_many_turns() -> None:
    """The sync scripted model: it keeps appending; each refusal makes it condense; the memory stays in bounds."""
    with Memory(ReferenceStorage(), template=TEMPLATE, max_chars=300) as memory:
        memory.create_thread("t", resource_id="u")
        model = ScriptedModel(memory, thread_id="t")
        refusals = 0
        for turn in range(80):
            shown = model.sees()
            result = model.call(edit_arguments(model.prompt(), "**Facts**:", f"**Facts**: fact {turn:02d};"))
            if not result["ok"]:
                refusals += 1
                assert "300-character limit" in result["error"] and REFUSED_TEMPLATE in result["error"]
                assert model.sees() == shown  # nothing written
                condensed = "# Notes\n- **Name**: Ann\n- **Facts**: (earlier facts condensed)\n"
                assert model.send(condensed)["ok"] is True
            stored = memory.get_working_memory(thread_id="t")
            assert stored is not None and len(stored) <= 300
            assert f"({len(stored):,} of 300 characters)" in model.prompt()
        assert refusals >= 2


# -- a writer between the read and the merge -------------------------------------------------------


def test_a_merge_racing_another_writer_is_decided_on_what_is_stored_when_it_merges() -> None:
    """Between the agent layer's read and the storage's atomic merge another writer merges: the limit is
    decided on the memory as it is at the merge (the storage's atomic step), not as it was read, so the
    update that would now grow the memory over the limit is refused and the other writer's change is kept.
    (Before, the check ran on the read and the stored result ended over the limit.)"""

    class Racing(ReferenceStorage):
        async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
            now = change.now
            await super()._merge_working_memory(target, MergeChange({"tags": ["from-another-writer"]}, now))  # another
            return await super()._merge_working_memory(target, change)

    storage = Racing()
    with Memory(storage, schema=SCHEMA, max_chars=LIMIT) as memory:
        ReferenceStorage.merge_working_memory(storage, _notes(980), scope="resource", resource_id="u")
        result = memory.call_tool({"memory": {"name": "Annabel"}}, resource_id="u")  # 984 as read: fits
        now = len(dump_json({**_notes(980), "tags": ["from-another-writer"]}))
        assert now > LIMIT
        assert result == {"ok": False, "error": too_large_message("schema", now + 4, LIMIT, now)}
        assert result["error"].startswith(
            f"Working memory not updated: the result would be {now + 4:,} characters; the memory already holds "
            f"{now:,} characters"
        )
        data = memory.get_working_memory_data(resource_id="u")
        assert data == {**_notes(980), "tags": ["from-another-writer"]}  # the other writer's change is kept
        # An update that shrinks it is still stored.
        result = memory.call_tool({"memory": {"tags": None, "name": "Annabel"}}, resource_id="u")
        assert result["ok"] is True and len(dump_json(memory.get_working_memory_data(resource_id="u"))) == 984


# -- the setting ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "100"])
def test_max_chars_must_be_a_positive_int_or_none(bad: object) -> None:
    with pytest.raises(ValidationError, match="max_chars must be an int >= 1 or None"):
        Memory(ReferenceStorage(), max_chars=bad)  # type: ignore[arg-type]

    async def scenario() -> None:
        with pytest.raises(ValidationError, match="max_chars must be"):  # before any connection
            await AsyncMemory.open("nosuchscheme://x", max_chars=bad)  # type: ignore[arg-type]

    run(scenario)


def test_max_chars_smaller_than_the_template_is_refused() -> None:
    with pytest.raises(ValidationError, match="smaller than the template"):
        Memory(ReferenceStorage(), template=TEMPLATE, max_chars=len(TEMPLATE) - 1)
    assert Memory(ReferenceStorage(), template=TEMPLATE, max_chars=len(TEMPLATE)).max_chars == len(TEMPLATE)
    memory = Memory(ReferenceStorage(), schema=SCHEMA, max_chars=1)
    assert memory.max_chars == 1 and "max_chars=1" in repr(memory)
    assert Memory(ReferenceStorage()).max_chars is None


def test_without_a_limit_nothing_changes() -> None:
    with Memory(ReferenceStorage(), template=TEMPLATE) as memory:
        assert memory.call_tool({"memory": _text(100_000)}, resource_id="u") == {
            "ok": True,
            "action": "replaced",
            "message": "Working memory replaced.",
        }
        assert "characters)" not in memory.system_message(resource_id="u")


def test_read_only_memory_shows_no_budget() -> None:
    storage = ReferenceStorage()
    storage.set_working_memory(_text(1200), scope="resource", resource_id="u")
    with Memory(storage, template=TEMPLATE, read_only=True, max_chars=LIMIT) as memory:
        message = memory.system_message(resource_id="u")
        assert fenced(message) == _text(1200) and "characters" not in message
