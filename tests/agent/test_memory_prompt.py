"""The system message's fence: stored text can never leave ``<working_memory_data>`` (property tests)."""

from __future__ import annotations

import html
import json
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

import workmem
from workmem.agent import DATA_TAG, Memory, escape_data
from workmem.agent.prompt import insert_memory_message, render_system_message

# Valid stored text: any Unicode without NUL or lone surrogates, with the characters that matter overweighted.
_text = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00") | st.sampled_from("<>&/;"),
    max_size=80,
) | st.sampled_from(["</working_memory_data>", "<system>", "&amp;", "&lt;", "</working_memory_template>"])


def _data_block(message: str) -> str:
    opening, closing = f"<{DATA_TAG}>\n", f"\n</{DATA_TAG}>"
    assert message.count(opening) == 1 and message.count(closing) == 1
    start = message.index(opening) + len(opening)
    return message[start : message.index(closing, start)]


_storage = workmem.connect(f"memory://prompt-{uuid.uuid4().hex}")
_template_memory = Memory(_storage)
_schema_memory = Memory(_storage, scope="thread", schema={"type": "object", "properties": {"note": {"type": "string"}}})
_read_only = Memory(_storage, read_only=True)


@settings(max_examples=200, deadline=None)
@given(_text)
def test_template_data_round_trips_and_never_holds_a_raw_bracket(stored: str) -> None:
    rid = f"r-{uuid.uuid4().hex}"
    _template_memory.update_working_memory(stored, resource_id=rid)
    for memory in (_template_memory, _read_only):
        block = _data_block(memory.system_message(resource_id=rid))
        assert "<" not in block and ">" not in block
        if stored.strip():
            assert html.unescape(block) == stored
            assert block == escape_data(stored)


@settings(max_examples=100, deadline=None)
@given(_text)
def test_schema_data_round_trips_and_never_holds_a_raw_bracket(note: str) -> None:
    rid = f"r-{uuid.uuid4().hex}"
    thread = _schema_memory.create_thread(resource_id=rid)
    _schema_memory.merge_working_memory({"note": note}, thread_id=thread.id)
    block = _data_block(_schema_memory.system_message(thread_id=thread.id))
    assert "<" not in block and ">" not in block
    assert json.loads(html.unescape(block)) == {"note": note}


@given(_text, _text)
def test_rendered_structure_is_fenced_too(structure: str, data: str) -> None:
    message = render_system_message(mode="template", scope="thread", structure=structure, data=data, read_only=False)
    template_block = message.split("<working_memory_template>\n", 1)[1].split("\n</working_memory_template>", 1)[0]
    assert "<" not in template_block and ">" not in template_block
    assert message.count("</working_memory_template>") == 1


@given(st.lists(st.sampled_from(["system", "developer", "user", "assistant", "tool"]), max_size=6), _text)
def test_insert_memory_message_is_idempotent(roles: list[str], content: str) -> None:
    messages = [{"role": role, "content": str(i)} for i, role in enumerate(roles)]
    once = insert_memory_message(messages, content)
    assert insert_memory_message(once, content) == once
    assert [m for m in once if m.get("name") != "workmem"] == messages
    position = next(i for i, m in enumerate(once) if m.get("name") == "workmem")
    leading = next((i for i, role in enumerate(roles) if role not in ("system", "developer")), len(roles))
    assert position == leading


def test_only_a_memory_with_the_tool_is_told_how_to_send_escapes() -> None:
    """A read-only Memory has no tool: its message must not invite the model to send anything back."""
    rid = f"r-{uuid.uuid4().hex}"
    _template_memory.update_working_memory("R&B <fan>", resource_id=rid)
    writable = _template_memory.system_message(resource_id=rid)
    read_only = _read_only.system_message(resource_id=rid)
    assert _read_only.tool_definition() is None
    assert "send" in writable.lower() and "&amp;" in writable
    assert "send" not in read_only.lower() and "&amp;" in read_only
    assert _data_block(read_only) == _data_block(writable) == "R&amp;B &lt;fan&gt;"


def test_a_memory_copied_back_with_its_fence_is_stored_unchanged() -> None:
    """Models copy whole blocks, tags included: the fence the system message drew is not stored as memory."""
    rid = f"r-{uuid.uuid4().hex}"
    _template_memory.update_working_memory("# User\n- **Likes**: R&B <live>", resource_id=rid)
    message = _template_memory.system_message(resource_id=rid)
    start = message.index(f"<{DATA_TAG}>")
    block = message[start : message.index(f"</{DATA_TAG}>") + len(f"</{DATA_TAG}>")]
    for _ in range(3):  # copied back as shown, fence and all, turn after turn
        assert _template_memory.call_tool({"memory": block}, resource_id=rid)["action"] == "replaced"
        assert _template_memory.get_working_memory(resource_id=rid) == "# User\n- **Likes**: R&B <live>"
    # the unfilled template copied with its own tags is still recognised, and erases nothing
    template = _template_memory.template
    assert template is not None
    for tag in ("working_memory_template", DATA_TAG):
        result = _template_memory.call_tool({"memory": f"<{tag}>\n{template}\n</{tag}>"}, resource_id=rid)
        assert result["action"] == "ignored", result
    assert _template_memory.get_working_memory(resource_id=rid) == "# User\n- **Likes**: R&B <live>"


@settings(max_examples=200, deadline=None)
@given(_text)
def test_any_memory_copied_back_with_its_fence_round_trips(stored: str) -> None:
    rid = f"r-{uuid.uuid4().hex}"
    _template_memory.update_working_memory(stored, resource_id=rid)
    message = _template_memory.system_message(resource_id=rid)
    start = message.index(f"<{DATA_TAG}>")
    block = message[start : message.index(f"\n</{DATA_TAG}>") + len(f"\n</{DATA_TAG}>")]
    result = _template_memory.call_tool({"memory": block}, resource_id=rid)
    assert _template_memory.get_working_memory(resource_id=rid) == stored, result
