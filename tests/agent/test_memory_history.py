"""History through the agent layer: every change says who made it; read, restore and erase on Memory/AsyncMemory.

A model is played by :mod:`scripted_model` (it copies what it is shown, edits a
line, pads a patch with ``null``, sends the arguments as a JSON string), on the
reference adapter (``memory://``) with history on.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from pydantic import BaseModel
from scripted_model import ScriptedModel

from workmem import AsyncMemory, Memory, connect
from workmem.agent import sub_agent_resource_id
from workmem.errors import (
    OperationNotSupportedError,
    ReadOnlyMemoryError,
    ValidationError,
    VersionNotFoundError,
)

TEMPLATE = "# User\n- **Name**:\n- **City**:\n"
TOOL = {"tool": "updateWorkingMemory"}


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None


def url() -> str:
    return f"memory://history-{uuid.uuid4().hex}"


def test_each_change_records_the_thread_and_the_callers_source_in_resource_scope() -> None:
    with Memory(url(), template=TEMPLATE, history=True) as memory:
        memory.create_thread("t-1", resource_id="u-1")
        model = ScriptedModel(memory, thread_id="t-1")
        assert model.edit("- **Name**:", "- **Name**: Sam")["action"] == "replaced"
        framework = {"framework": "test", "agent": "assistant", "toolCallId": "call-2"}
        assert memory.call_tool(
            '{"memory": "# User\\n- **Name**: Sam\\n- **City**: Oslo\\n"}', thread_id="t-1", source=framework
        )["ok"]
        memory.update_working_memory(TEMPLATE, resource_id="u-1", source={"by": "admin"})

        newest, second, first = memory.working_memory_history(thread_id="t-1").versions
        assert [v.version for v in (newest, second, first)] == [3, 2, 1]
        assert (first.kind, first.source) == ("set", {**TOOL, "threadId": "t-1"})
        assert first.content == "# User\n- **Name**: Sam\n- **City**:\n"
        assert second.source == {**TOOL, "threadId": "t-1", **framework}
        assert second.content == "# User\n- **Name**: Sam\n- **City**: Oslo\n"
        assert (newest.source, newest.content) == ({"by": "admin"}, TEMPLATE)  # no thread given: none recorded
        # The memory is the resource's: read by resource id too, and the thread's own history is empty.
        assert memory.working_memory_history(resource_id="u-1").versions == (newest, second, first)
        assert memory.storage.working_memory_history(scope="thread", thread_id="t-1").versions == ()


def test_thread_scope_merges_record_the_tool_call_and_restore_puts_back_what_a_null_padded_patch_erased() -> None:
    with Memory(url(), schema=Profile, scope="thread", history=True) as memory:
        memory.create_thread("t-1", resource_id="u-1")
        model = ScriptedModel(memory, thread_id="t-1")
        assert model.send_patch({"name": "Sam", "city": "Oslo"}, as_string=True)["action"] == "merged"
        assert model.send_patch({"name": "Samuel"}, pad_with_null=True)["action"] == "merged"  # city: null erases
        assert memory.get_working_memory_data(thread_id="t-1") == {"name": "Samuel"}

        page = memory.working_memory_history(thread_id="t-1", limit=1)
        (erasing,) = page.versions
        assert (erasing.version, erasing.kind, erasing.thread_id, erasing.resource_id) == (2, "merge", "t-1", "u-1")
        assert erasing.source == {**TOOL, "threadId": "t-1"}
        (before,) = memory.working_memory_history(thread_id="t-1", before=page.next_before).versions
        assert before.content is not None and '"city":"Oslo"' in before.content

        restored = memory.restore_working_memory(1, thread_id="t-1", source={"by": "support"})
        assert restored == before.content
        assert memory.get_working_memory_data(thread_id="t-1") == {"name": "Sam", "city": "Oslo"}
        newest = memory.working_memory_history(thread_id="t-1").versions[0]
        assert (newest.version, newest.kind, newest.content) == (3, "restore", before.content)
        assert newest.source == {"threadId": "t-1", "by": "support", "restoredFrom": 1}
        with pytest.raises(VersionNotFoundError):
            memory.restore_working_memory(9, thread_id="t-1")


def test_working_memory_given_in_thread_metadata_records_the_thread() -> None:
    with Memory(url(), template=TEMPLATE, history=True) as memory:  # resource scope: the owner's memory
        memory.create_thread("t-1", resource_id="u-1", metadata={"workingMemory": "# Sam"})
        memory.update_thread("t-1", metadata={"workingMemory": "# Sam, Oslo", "topic": "moving"})
        newest, first = memory.working_memory_history(resource_id="u-1").versions
        assert (first.content, first.source) == ("# Sam", {"threadId": "t-1"})
        assert (newest.content, newest.source) == ("# Sam, Oslo", {"threadId": "t-1"})
    with Memory(url(), template=TEMPLATE, scope="thread", history=True) as memory:
        memory.create_thread("t-1", resource_id="u-1")
        memory.update_thread("t-1", metadata={"workingMemory": "# Kim"})
        (version,) = memory.working_memory_history(thread_id="t-1").versions
        assert (version.kind, version.content, version.source) == ("set", "# Kim", {"threadId": "t-1"})


def test_a_bad_source_is_the_callers_mistake_it_raises_and_nothing_is_written() -> None:
    with Memory(url(), template=TEMPLATE, history=True) as memory:
        memory.create_thread("t-1", resource_id="u-1")
        for bad in (["call-1"], {"id": float("nan")}, {"big": "x" * 20_000}):
            with pytest.raises(ValidationError, match="source"):
                memory.call_tool({"memory": "# User\n- **Name**: Sam\n"}, thread_id="t-1", source=bad)  # type: ignore[arg-type]
            with pytest.raises(ValidationError, match="source"):
                memory.update_working_memory("# Sam", resource_id="u-1", source=bad)  # type: ignore[arg-type]
        assert memory.get_working_memory(resource_id="u-1") is None
        assert memory.working_memory_history(resource_id="u-1").versions == ()


def test_delete_resource_forgets_the_user_and_read_only_refuses_it_and_restore() -> None:
    address = url()
    with Memory(address, template=TEMPLATE, history=True) as memory:
        memory.create_thread("t-1", resource_id="u-1")
        memory.create_thread("t-2", resource_id="u-2")
        memory.update_working_memory("# Sam", thread_id="t-1")
        memory.update_working_memory("# Kim", thread_id="t-2")
        with Memory(address, template=TEMPLATE, read_only=True, history=True) as reader:
            assert [v.content for v in reader.working_memory_history(resource_id="u-1").versions] == ["# Sam"]
            assert reader.working_memory_history(thread_id="t-new").versions == ()  # no thread, no memory yet
            with pytest.raises(ReadOnlyMemoryError):
                reader.restore_working_memory(1, resource_id="u-1")
            with pytest.raises(ReadOnlyMemoryError):
                reader.delete_resource("u-1")
        erased = memory.delete_resource("u-1")
        assert (erased.resource, erased.threads, erased.versions) == (True, ("t-1",), 1)
        assert memory.get_thread("t-1") is None and memory.get_working_memory(resource_id="u-1") is None
        assert memory.working_memory_history(resource_id="u-1").versions == ()
        assert memory.delete_resource("u-1").removed_anything is False
        assert memory.get_working_memory(resource_id="u-2") == "# Kim"  # another user is untouched
        with pytest.raises(ValidationError, match="reserved for isolated sub-agents"):
            memory.delete_resource("workmem-sub-agent:u-2")
        assert memory.delete_resource(sub_agent_resource_id("u-2", "helper", isolated=True)).removed_anything is False


def test_history_is_a_connect_option_and_refused_where_it_cannot_apply() -> None:
    with Memory(url(), template=TEMPLATE) as memory:  # off by default
        memory.update_working_memory("# Sam", resource_id="u-1", source={"by": "x"})
        assert memory.storage.history is None
        with pytest.raises(OperationNotSupportedError):
            memory.restore_working_memory(1, resource_id="u-1")
    with connect(url()) as storage, pytest.raises(ValidationError, match="history= goes with a URL"):
        Memory(storage, history=True)
    with Memory(url(), history=2) as memory:
        for n in range(4):
            memory.update_working_memory(f"# v{n}", resource_id="u-1")
        assert [v.version for v in memory.working_memory_history(resource_id="u-1").versions] == [4, 3]


def test_async_memory_records_and_reads_the_same() -> None:
    async def scenario() -> None:
        async with await AsyncMemory.open(url(), schema=Profile, history=True) as memory:
            await memory.create_thread("t-1", resource_id="u-1")
            result = await memory.call_tool(
                '{"memory": "{\\"name\\": \\"Sam\\", \\"city\\": null}"}', thread_id="t-1", source={"agent": "a"}
            )
            assert result["action"] == "merged"
            await memory.merge_working_memory({"city": "Oslo"}, resource_id="u-1", source={"by": "app"})
            newest, first = (await memory.working_memory_history(resource_id="u-1")).versions
            assert first.source == {**TOOL, "threadId": "t-1", "agent": "a"}
            assert (newest.kind, newest.source) == ("merge", {"by": "app"})
            assert await memory.restore_working_memory(1, thread_id="t-1") == '{"name":"Sam"}'
            assert (await memory.working_memory_history(thread_id="t-1", limit=1)).versions[0].source == {
                "threadId": "t-1",
                "restoredFrom": 1,
            }
            assert (await memory.delete_resource("u-1")).threads == ("t-1",)

    asyncio.run(scenario())
