"""Working memory for sub-agents: one resource id per (parent resource, agent name)."""

from __future__ import annotations

import re

from workmem.errors import ValidationError
from workmem.validation import validate_id

__all__ = ["AGENT_NAME_PATTERN", "sub_agent_resource_id"]

AGENT_NAME_PATTERN = re.compile(r"[A-Za-z0-9_]{1,64}")
"""Allowed agent names: 1 to 64 ASCII letters, digits or underscores."""


def sub_agent_resource_id(parent_resource_id: str, agent_name: str) -> str:
    """The resource id of ``agent_name`` working for ``parent_resource_id``: ``"{parent}-{agent_name}"``.

    Use it as the ``resource_id`` of the sub-agent's resource-scoped memory: the
    same parent and agent always give the same id, so the sub-agent's memory
    persists across delegations, apart from the parent's and from other
    sub-agents'. Agent names contain no ``-``, so the id splits back into parent
    and agent unambiguously at its last ``-`` (also for nested sub-agents).
    """
    validate_id(parent_resource_id, "parent resource id")
    if not isinstance(agent_name, str) or not AGENT_NAME_PATTERN.fullmatch(agent_name):
        raise ValidationError(
            f"agent name must be 1 to 64 ASCII letters, digits or underscores (no '-'), not {agent_name!r}"
        )
    return validate_id(f"{parent_resource_id}-{agent_name}", "sub-agent resource id")
