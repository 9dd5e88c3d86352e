"""The one id rule of the four framework integrations (workmem.integrations.IdsRule), asserted on each of them.

The ids come from the framework's natural place, or from ``ids=`` (sync or async) instead;
a fixed ``thread_id=`` / ``resource_id=`` may be combined with either and wins; ``ids=``
returning anything but ``MemoryIds`` raises ``MissingIdsError`` naming the type; bad
constructor arguments raise ``ValidationError`` at once. Each integration is driven through
its own public resolution method (no model, no run): the end-to-end files cover the runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from workmem import AsyncMemory, ValidationError
from workmem.integrations import MemoryIds, MissingIdsError


@dataclass(frozen=True)
class Framework:
    name: str
    """The prefix of the framework's messages."""
    module: str
    cls: str
    resolve: Callable[[Any, object], Awaitable[MemoryIds]]
    """The integration's public method finding a run's ids in a context."""
    natural: Callable[[str, str], object]
    """A context carrying (thread_id, resource_id) where that framework reads them by default."""

    def build(self, memory: AsyncMemory, **options: Any) -> Any:
        module = pytest.importorskip(self.module)
        return getattr(module, self.cls)(memory, **options)


FRAMEWORKS = [
    Framework(
        "pydantic-ai",
        "workmem.integrations.pydantic_ai",
        "WorkingMemoryToolset",
        lambda integration, context: integration.memory_ids(context),
        lambda thread, resource: SimpleNamespace(deps={"thread_id": thread, "resource_id": resource}),
    ),
    Framework(
        "OpenAI Agents SDK",
        "workmem.integrations.openai_agents",
        "WorkingMemory",
        lambda integration, context: integration.ids_of(context),
        lambda thread, resource: SimpleNamespace(thread_id=thread, resource_id=resource),
    ),
    Framework(
        "LangGraph",
        "workmem.integrations.langgraph",
        "LangGraphMemory",
        lambda integration, context: integration.ids(context),
        lambda thread, resource: {"configurable": {"thread_id": thread, "resource_id": resource}},
    ),
    Framework(
        "Google ADK",
        "workmem.integrations.adk",
        "WorkingMemoryToolset",
        lambda integration, context: integration.ids(context),
        lambda thread, resource: SimpleNamespace(session=SimpleNamespace(id=thread), user_id=resource),
    ),
]


@pytest.fixture(params=FRAMEWORKS, ids=[framework.module.rsplit(".", 1)[1] for framework in FRAMEWORKS])
def framework(request: pytest.FixtureRequest) -> Framework:
    return request.param  # type: ignore[no-any-return]


def test_the_shared_id_rule(framework: Framework) -> None:
    async def body() -> None:
        async with await AsyncMemory.open("memory://") as memory:
            context = framework.natural("ctx-thread", "ctx-user")
            seen: list[object] = []

            def sync_ids(given: object) -> MemoryIds:
                seen.append(given)
                return MemoryIds("ids-thread", "ids-user")

            async def async_ids(given: object) -> MemoryIds:
                seen.append(given)
                return MemoryIds("ids-thread", "ids-user")

            # the natural place, and a fixed id winning over it
            assert await framework.resolve(framework.build(memory), context) == MemoryIds("ctx-thread", "ctx-user")
            fixed = framework.build(memory, thread_id="fixed-thread")
            assert await framework.resolve(fixed, context) == MemoryIds("fixed-thread", "ctx-user")

            # ids= (sync or async) replaces the natural place; fixed ids combine with it and win
            for ids in (sync_ids, async_ids):
                seen.clear()
                assert await framework.resolve(framework.build(memory, ids=ids), context) == MemoryIds(
                    "ids-thread", "ids-user"
                )
                both = framework.build(memory, ids=ids, resource_id="fixed-user")
                assert await framework.resolve(both, context) == MemoryIds("ids-thread", "fixed-user")
                all_fixed = framework.build(memory, ids=ids, thread_id="fixed-thread", resource_id="fixed-user")
                assert await framework.resolve(all_fixed, context) == MemoryIds("fixed-thread", "fixed-user")
                assert seen == [context] * 3  # the framework's own context, as it came

            # ids= returning anything but MemoryIds: MissingIdsError naming the type (a fixed id does not excuse it)
            async def async_tuple(given: object) -> object:
                return ("t", "u")

            for wrong, type_name in (
                (lambda given: ("t", "u"), "tuple"),
                (lambda given: None, "NoneType"),
                (lambda given: {"thread_id": "t", "resource_id": "u"}, "dict"),
                (async_tuple, "tuple"),
            ):
                for options in ({}, {"thread_id": "fixed-thread", "resource_id": "fixed-user"}):
                    integration = framework.build(memory, ids=wrong, **options)
                    with pytest.raises(MissingIdsError) as raised:
                        await framework.resolve(integration, context)
                    assert str(raised.value).startswith(
                        f"{framework.name}: ids= must return MemoryIds, not {type_name};"
                    )

            # the constructor check, the same everywhere
            with pytest.raises(ValidationError, match=f"^{framework.name}: ids must be a callable taking "):
                framework.build(memory, ids="user-1")
            for name, value in (("thread_id", ""), ("resource_id", 7)):
                with pytest.raises(ValidationError) as refused:
                    framework.build(memory, ids=sync_ids, **{name: value})
                assert not isinstance(refused.value, MissingIdsError)
                assert (
                    str(refused.value) == f"{framework.name}: a fixed {name} must be a non-empty string, not {value!r}"
                )

    asyncio.run(body())
