"""Working memory for sub-agents: one resource id per (parent resource, agent name).

Two forms, because one resource-id namespace holds users and sub-agents alike:

* Mastra's, ``"{parent}-{agent_name}"`` (the default): the id a TypeScript Mastra
  agent derives when it delegates to a sub-agent (``@mastra/core`` 1.71:
  ``${resourceId}-${agentName}``), so both sides find the same memory. It is an
  ordinary resource id, so it **collides with a user whose id is that string**:
  ``sub_agent_resource_id("alice", "researcher")`` is
  ``"alice-researcher"``, and a user of that name reads and writes alice's
  researcher memory. Safe only when no user id can have the form
  ``"<another user id>-<agent name>"`` (ids you generate, such as UUIDs, rather
  than ids users choose).
* isolated, ``sub_agent_resource_id(parent, agent_name, isolated=True)``: a
  :class:`SubAgentResourceId` in a namespace reserved by workmem
  (``"workmem-sub-agent:{agent_name}:{parent}"``). :class:`~workmem.agent.Memory`
  refuses every plain string in that namespace as a resource id, so no id a
  caller passes in for a user can ever equal it; only the value made here is
  accepted. Use it unless a TypeScript Mastra agent must share the sub-agent's memory.
"""

from __future__ import annotations

import re
from typing import Any

from workmem.errors import ValidationError
from workmem.validation import validate_id

__all__ = [
    "AGENT_NAME_PATTERN",
    "SUB_AGENT_PREFIX",
    "SubAgentResourceId",
    "check_resource_id",
    "sub_agent_resource_id",
]

AGENT_NAME_PATTERN = re.compile(r"[A-Za-z0-9_]{1,64}")
"""Allowed agent names: 1 to 64 ASCII letters, digits or underscores."""

SUB_AGENT_PREFIX = "workmem-sub-agent:"
"""The start of every isolated sub-agent resource id; ``Memory`` refuses plain strings that start with it."""


def _check_agent_name(agent_name: object) -> str:
    if not isinstance(agent_name, str) or not AGENT_NAME_PATTERN.fullmatch(agent_name):
        raise ValidationError(
            f"agent name must be 1 to 64 ASCII letters, digits or underscores (no '-'), not {agent_name!r}"
        )
    return agent_name


def check_resource_id(value: object, what: str = "resource id") -> str:
    """Check a resource id given to ``Memory`` and return it as a plain ``str``.

    As :func:`~workmem.validation.validate_id`, and a plain string starting with
    :data:`SUB_AGENT_PREFIX` is refused: that namespace belongs to isolated
    sub-agents, and only a :class:`SubAgentResourceId` may name one.
    """
    validate_id(value, what)
    assert isinstance(value, str)
    if value.startswith(SUB_AGENT_PREFIX) and not isinstance(value, SubAgentResourceId):
        raise ValidationError(
            f"{what}s starting with {SUB_AGENT_PREFIX!r} are reserved for isolated sub-agents; make one with "
            "sub_agent_resource_id(parent, agent_name, isolated=True), never from a string"
        )
    return str(value)  # a plain str for the storage (str() of a str subclass is an exact str)


class SubAgentResourceId(str):
    """The isolated resource id of ``agent_name`` working for ``parent_resource_id``.

    Made from its parts, never from a string: ``SubAgentResourceId(parent,
    agent_name)`` is ``"workmem-sub-agent:{agent_name}:{parent}"``. ``Memory``
    accepts ids in that namespace only as instances of this class, so a caller
    cannot reach this memory with an id typed or chosen by a user. The parent may
    itself be a ``SubAgentResourceId`` (nested sub-agents); a plain string in the
    reserved namespace is refused as a parent too. The agent name has no ``:``, so
    the id splits back into agent and parent unambiguously.
    """

    parent_resource_id: str
    """The parent's resource id (a ``SubAgentResourceId`` for a nested sub-agent)."""
    agent_name: str
    """The sub-agent's name."""

    def __new__(cls, parent_resource_id: str, agent_name: str) -> SubAgentResourceId:
        check_resource_id(parent_resource_id, "parent resource id")
        _check_agent_name(agent_name)
        text = validate_id(f"{SUB_AGENT_PREFIX}{agent_name}:{parent_resource_id}", "sub-agent resource id")
        made = super().__new__(cls, text)
        made.parent_resource_id = parent_resource_id
        made.agent_name = agent_name
        return made

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle rebuild it from its parts
        return (SubAgentResourceId, (self.parent_resource_id, self.agent_name))

    def __repr__(self) -> str:
        return f"SubAgentResourceId({self.parent_resource_id!r}, {self.agent_name!r})"


def sub_agent_resource_id(parent_resource_id: str, agent_name: str, *, isolated: bool = False) -> str:
    """The resource id of ``agent_name`` working for ``parent_resource_id``.

    Use it as the ``resource_id`` of the sub-agent's resource-scoped memory: the
    same parent and agent always give the same id, so the sub-agent's memory
    persists across delegations, apart from the parent's and from other
    sub-agents'.

    By default the id is Mastra's, ``"{parent}-{agent_name}"``, the one a
    TypeScript Mastra agent derives, so both share the sub-agent's memory. **It is
    an ordinary resource id**: ``sub_agent_resource_id("alice", "researcher")`` is
    the id of a user named ``alice-researcher``, who would read and write alice's
    researcher memory. It is safe only when no user id can be
    ``"<another user id>-<agent name>"`` (ids you generate, not ids users pick).
    Agent names contain no ``-``, so the id splits back into parent and agent at
    its last ``-`` (also for nested sub-agents).

    ``isolated=True`` returns a :class:`SubAgentResourceId` instead, in a
    namespace :class:`~workmem.agent.Memory` refuses for every plain string, so
    it can never be the id of a user; it is not Mastra's format, so a TypeScript
    agent will not find that memory. Prefer it unless you need that sharing.
    """
    if not isinstance(isolated, bool):
        raise ValidationError(f"isolated must be a bool, not {type(isolated).__name__}")
    if isolated:
        return SubAgentResourceId(parent_resource_id, agent_name)
    validate_id(parent_resource_id, "parent resource id")
    _check_agent_name(agent_name)
    if isinstance(parent_resource_id, SubAgentResourceId):
        raise ValidationError("an isolated sub-agent's own sub-agents are isolated too: pass isolated=True")
    return validate_id(f"{parent_resource_id}-{agent_name}", "sub-agent resource id")
