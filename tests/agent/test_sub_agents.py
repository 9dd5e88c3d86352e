"""Sub-agent resource ids: Mastra's form shares the user-id namespace; the isolated form cannot.

``sub_agent_resource_id("alice", "researcher")`` is ``"alice-researcher"``, the id a
TypeScript Mastra agent derives, and also the id of a user of that name.
``sub_agent_resource_id(..., isolated=True)`` lives in a namespace ``Memory`` refuses
for every plain string, so no user id can ever equal it.
"""

from __future__ import annotations

import copy
import pickle
import uuid
from collections.abc import Callable, Iterator

import pytest
from backends import backend_url
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workmem
from workmem import Memory, SubAgentResourceId, ValidationError, sub_agent_resource_id
from workmem.agent import SUB_AGENT_PREFIX
from workmem.storage import MemoryStorage

__all__ = ["backend_url"]


@pytest.fixture
def storage(backend_url: str) -> Iterator[MemoryStorage]:
    with workmem.connect(backend_url) as opened:
        yield opened


def _parent() -> str:
    return f"alice-{uuid.uuid4().hex[:8]}"


# -- the two forms --------------------------------------------------------------------------------


def test_mastra_form_is_an_ordinary_id_that_a_user_can_have(storage: MemoryStorage) -> None:
    """What the docs warn about: the default form collides with a user of that name."""
    memory = Memory(storage)
    alice = _parent()
    researcher = sub_agent_resource_id(alice, "researcher")
    assert researcher == f"{alice}-researcher" and type(researcher) is str
    memory.update_working_memory("# alice's research notes", resource_id=researcher)
    user_named_so = f"{alice}-researcher"  # a real user who picked this name
    assert memory.get_working_memory(resource_id=user_named_so) == "# alice's research notes"


def test_isolated_form_is_unreachable_for_every_user_id(storage: MemoryStorage) -> None:
    memory = Memory(storage)
    alice = _parent()
    researcher = sub_agent_resource_id(alice, "researcher", isolated=True)
    assert isinstance(researcher, SubAgentResourceId)
    assert researcher == f"{SUB_AGENT_PREFIX}researcher:{alice}"
    memory.update_working_memory("# alice's research notes", resource_id=researcher)
    thread = memory.create_thread(resource_id=researcher)
    assert memory.get_working_memory(thread_id=thread.id) == "# alice's research notes"
    assert memory.list_threads(researcher).total == 1
    # Persists across delegations: the same parts give the same id.
    again = sub_agent_resource_id(alice, "researcher", isolated=True)
    assert memory.get_working_memory(resource_id=again) == "# alice's research notes"

    # A user named like the Mastra form reads nothing of it.
    assert memory.get_working_memory(resource_id=f"{alice}-researcher") is None
    # A user whose id is the isolated id's very text is refused by every entry point, and changes nothing.
    before = (storage.get_resource(str(researcher)), storage.get_thread(thread.id))
    typed = str(researcher)
    entry_points: list[Callable[[], object]] = [
        lambda: memory.get_working_memory(resource_id=typed),
        lambda: memory.update_working_memory("# stolen", resource_id=typed),
        lambda: memory.call_tool({"memory": "# stolen"}, resource_id=typed),
        lambda: memory.system_message(resource_id=typed),
        lambda: memory.process_input([], resource_id=typed),
        lambda: memory.create_thread(resource_id=typed),
        lambda: memory.get_thread(thread.id, resource_id=typed),
        lambda: memory.update_thread(thread.id, title="stolen", resource_id=typed),
        lambda: memory.delete_thread(thread.id, resource_id=typed),
        lambda: memory.list_threads(typed),
        lambda: memory.get_working_memory(thread_id=thread.id, resource_id=typed),
        lambda: Memory(storage, scope="thread").get_working_memory(thread_id=thread.id, resource_id=typed),
    ]
    for call in entry_points:
        with pytest.raises(ValidationError, match="reserved for isolated sub-agents"):
            call()
    assert (storage.get_resource(str(researcher)), storage.get_thread(thread.id)) == before


def test_isolated_ids_nest_and_survive_copy_and_pickle() -> None:
    researcher = sub_agent_resource_id("alice", "researcher", isolated=True)
    checker = sub_agent_resource_id(researcher, "fact_checker", isolated=True)
    assert isinstance(checker, SubAgentResourceId)
    assert checker == f"{SUB_AGENT_PREFIX}fact_checker:{SUB_AGENT_PREFIX}researcher:alice"
    assert (checker.parent_resource_id, checker.agent_name) == (researcher, "fact_checker")
    for clone in (copy.copy(checker), copy.deepcopy(checker), pickle.loads(pickle.dumps(checker))):
        assert isinstance(clone, SubAgentResourceId) and clone == checker
        assert clone.parent_resource_id == researcher
    assert repr(researcher) == "SubAgentResourceId('alice', 'researcher')"


def test_isolated_ids_cannot_be_made_from_a_string() -> None:
    typed = f"{SUB_AGENT_PREFIX}researcher:alice"
    with pytest.raises(TypeError):
        SubAgentResourceId(typed)  # type: ignore[call-arg]
    for parent, name in [(typed, "writer"), ("", "a"), ("p\x00", "a"), ("p", "has-dash"), ("p", "a:b"), ("p", "")]:
        with pytest.raises(ValidationError):
            sub_agent_resource_id(parent, name, isolated=True)
    with pytest.raises(ValidationError, match="isolated=True"):
        sub_agent_resource_id(sub_agent_resource_id("alice", "researcher", isolated=True), "writer")
    with pytest.raises(ValidationError, match="isolated must be a bool"):
        sub_agent_resource_id("alice", "researcher", isolated="yes")  # type: ignore[arg-type]


# -- no user id can collide, whatever the ids --------------------------------------------------------

_AGENT_NAMES = st.from_regex(r"[A-Za-z0-9_]{1,64}", fullmatch=True)
_IDS = st.text(min_size=1, max_size=60).filter(lambda text: "\x00" not in text)


def _accepted_as_user_id(memory: Memory, user_id: str) -> bool:
    try:
        memory.get_working_memory(resource_id=user_id)
    except ValidationError:
        return False
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parents=st.lists(_IDS, min_size=1, max_size=3),
    agents=st.lists(_AGENT_NAMES, min_size=1, max_size=3),
    user_id=st.one_of(
        _IDS,
        st.builds(lambda rest: SUB_AGENT_PREFIX + rest, st.text(max_size=60)),
        st.just(SUB_AGENT_PREFIX),
    ),
    copy_a_sub_agent=st.booleans(),
)
def test_no_user_id_equals_an_isolated_sub_agent_id(
    parents: list[str], agents: list[str], user_id: str, copy_a_sub_agent: bool
) -> None:
    memory = Memory("memory://")
    try:
        made: list[SubAgentResourceId] = []
        for parent in parents:
            if not _accepted_as_user_id(memory, parent):
                continue  # not a user id either
            nested: str = parent
            for agent in agents:  # a chain of nested sub-agents under this user
                nested = sub_agent_resource_id(nested, agent, isolated=True)
                assert isinstance(nested, SubAgentResourceId)
                made.append(nested)
        if copy_a_sub_agent and made:
            user_id = str(made[-1])  # a user who picked exactly that id as a name
        if _accepted_as_user_id(memory, user_id):
            assert all(user_id != sub_agent for sub_agent in made)
        # Every isolated id stays usable as itself, never as its text.
        for sub_agent in made:
            assert _accepted_as_user_id(memory, sub_agent)
            assert not _accepted_as_user_id(memory, str(sub_agent))
    finally:
        memory.close()
