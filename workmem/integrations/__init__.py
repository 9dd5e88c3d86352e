"""Working memory inside agent frameworks: one small module per framework, each on the agent layer.

* :mod:`workmem.integrations.pydantic_ai` — a pydantic-ai toolset (``workmem[pydantic-ai]``);
* :mod:`workmem.integrations.openai_agents` — the OpenAI Agents SDK (``workmem[openai-agents]``);
* :mod:`workmem.integrations.langgraph` — LangGraph / LangChain (``workmem[langgraph]``);
* :mod:`workmem.integrations.adk` — Google ADK (``workmem[adk]``).

Each takes an :class:`~workmem.agent.AsyncMemory` (the frameworks run tools and
prompts in coroutines) or a sync :class:`~workmem.agent.Memory`, which it runs on
worker threads (:func:`async_memory`), and finds the thread and resource ids the same way, by
:class:`IdsRule`: from the framework's natural place, or from the ``ids=``
callable given instead (sync or async, returning :class:`MemoryIds`), with a
fixed ``thread_id=`` / ``resource_id=`` winning over either; :func:`memory_ids`
is the one rule for what a run must carry. :class:`MemoryIntegration` is what the
LangGraph, OpenAI Agents SDK and ADK classes are built on: their one constructor, the
ids, the memory message and the update, written once. Each passes the model's update to
:meth:`~workmem.agent.AsyncMemory.call_tool` with the :func:`change_source` of that
call (the framework, the agent's name and the tool-call id, where the framework
gives them), which the version records when the storage has history on. Importing
this package imports no framework.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from workmem.agent import AsyncMemory, Memory
from workmem.agent.operations import ToolResult
from workmem.errors import ValidationError
from workmem.records import Scope

__all__ = [
    "Framework",
    "IdsRule",
    "MemoryIds",
    "MemoryIntegration",
    "MissingIdsError",
    "async_memory",
    "change_source",
    "memory_ids",
    "named_ids",
]

_C = TypeVar("_C")
_Tool = TypeVar("_Tool")
_T = TypeVar("_T")


class MissingIdsError(ValidationError):
    """A framework run reached working memory without the ids it needs: a wiring mistake, raised at once.

    The message says where that framework takes the ids from and how to pass them.
    """


@dataclass(frozen=True, slots=True)
class MemoryIds:
    """Which working memory a run reads and updates."""

    thread_id: str | None
    """The conversation (needed in thread scope)."""
    resource_id: str | None
    """The user or entity owning it (needed in resource scope; checked as the owner in thread scope)."""


def async_memory(memory: object, integration: str) -> AsyncMemory:
    """The memory an integration runs on: an ``AsyncMemory`` as given, a sync ``Memory`` on worker threads.

    A :class:`~workmem.agent.Memory` becomes :meth:`AsyncMemory.from_memory(memory)
    <workmem.agent.AsyncMemory.from_memory>`: the same settings and storage, its calls
    on worker threads so the framework's event loop never waits on them (the
    ``Memory`` keeps owning the storage). Anything else raises
    :class:`~workmem.errors.ValidationError` naming ``integration``.
    """
    if isinstance(memory, AsyncMemory):
        return memory
    if isinstance(memory, Memory):
        return AsyncMemory.from_memory(memory)
    raise ValidationError(f"{integration} takes a Memory or an AsyncMemory, not {type(memory).__name__}")


def change_source(framework: str, *, agent: object = None, tool_call_id: object = None) -> dict[str, Any]:
    """The ``source`` of a change an integration makes for the model: who wrote it, as the framework says.

    ``{"framework": ..., "agent": ..., "toolCallId": ...}``, each of the last two only when
    the framework gives it as a non-empty string. The agent layer adds ``tool`` and the
    ``threadId`` (see :meth:`~workmem.agent.Memory.call_tool`); with history on, the
    version records it all (:meth:`~workmem.agent.Memory.working_memory_history`).
    """
    source: dict[str, Any] = {"framework": framework}
    for key, value in (("agent", agent), ("toolCallId", tool_call_id)):
        if isinstance(value, str) and value:
            source[key] = value
    return source


def memory_ids(scope: Scope, thread_id: object, resource_id: object, *, framework: str, how: str) -> MemoryIds:
    """The ids of one run, checked for ``scope``; :class:`MissingIdsError` naming ``how`` to pass them.

    Resource scope needs a ``resource_id``; thread scope needs a ``thread_id``. An id
    that is given but is not a non-empty string is refused the same way (a framework
    may hand over ``None``, an int, or an empty string from an unset config key).
    """
    for name, value in (("thread_id", thread_id), ("resource_id", resource_id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise MissingIdsError(f"{framework}: {name} must be a non-empty string, not {value!r}; {how}")
    if scope == "resource" and resource_id is None:
        raise MissingIdsError(f"{framework}: resource-scoped working memory needs a resource_id; {how}")
    if scope == "thread" and thread_id is None:
        raise MissingIdsError(f"{framework}: thread-scoped working memory needs a thread_id; {how}")
    return MemoryIds(thread_id, resource_id)  # type: ignore[arg-type]


def named_ids(source: object) -> tuple[object, object]:
    """``source``'s ``thread_id`` and ``resource_id``: attributes, or keys of a mapping; ``None`` where absent.

    The natural place of the ids in pydantic-ai (the deps) and the Agents SDK (the run context).
    """
    if isinstance(source, Mapping):
        return source.get("thread_id"), source.get("resource_id")
    return getattr(source, "thread_id", None), getattr(source, "resource_id", None)


@dataclass(frozen=True, slots=True)
class IdsRule(Generic[_C]):
    """How an integration finds the ids of a run, the same in every framework; built from its constructor arguments.

    Construction checks those arguments (:class:`~workmem.errors.ValidationError`):
    ``ids`` is ``None`` or a callable, a fixed id is ``None`` or a non-empty string.
    ``ids`` and fixed ids may be combined. :meth:`resolve` then finds a run's ids.
    """

    framework: str
    """The framework's name, first in every message."""
    how: str
    """How to pass the ids in this framework, the end of every :class:`MissingIdsError`."""
    default: Callable[[_C], tuple[object, object]]
    """The framework's natural place: its context to ``(thread_id, resource_id)`` as found, unchecked."""
    takes: str
    """What ``ids`` is called with, for the messages (e.g. ``"the RunnableConfig"``)."""
    ids: Callable[[_C], object] | None = None
    """The user's ``ids=``: the context to :class:`MemoryIds`, or to an awaitable of one; replaces ``default``."""
    thread_id: str | None = None
    """A fixed thread id: wins over what ``default`` or ``ids`` found."""
    resource_id: str | None = None
    """A fixed resource id: wins over what ``default`` or ``ids`` found."""

    def __post_init__(self) -> None:
        if self.ids is not None and not callable(self.ids):
            raise ValidationError(
                f"{self.framework}: ids must be a callable taking {self.takes} and returning MemoryIds, "
                f"not {type(self.ids).__name__}"
            )
        for name, value in (("thread_id", self.thread_id), ("resource_id", self.resource_id)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValidationError(f"{self.framework}: a fixed {name} must be a non-empty string, not {value!r}")

    async def resolve(self, context: _C, scope: Scope) -> MemoryIds:
        """The ids of the run ``context`` belongs to, checked for ``scope`` by :func:`memory_ids`.

        ``ids(context)`` (awaited when it returns an awaitable) or else ``default(context)``;
        then each fixed id replaces the one found. ``ids`` returning anything but a
        :class:`MemoryIds` raises :class:`MissingIdsError` naming the type it returned.
        """
        if self.ids is None:
            thread_id, resource_id = self.default(context)
        else:
            found = self.ids(context)
            if inspect.isawaitable(found):
                found = await found
            if not isinstance(found, MemoryIds):
                raise MissingIdsError(
                    f"{self.framework}: ids= must return MemoryIds, not {type(found).__name__}; {self.how}"
                )
            thread_id, resource_id = found.thread_id, found.resource_id
        if self.thread_id is not None:
            thread_id = self.thread_id
        if self.resource_id is not None:
            resource_id = self.resource_id
        return memory_ids(scope, thread_id, resource_id, framework=self.framework, how=self.how)


@dataclass(frozen=True, slots=True)
class Framework:
    """What an integration says about its framework, in messages and in the changes it records."""

    name: str
    """The framework's name, first in every message."""
    how: str
    """How to pass the ids in this framework, the end of every :class:`MissingIdsError`."""
    takes: str
    """What ``ids=`` is called with, for the messages (e.g. ``"the RunnableConfig"``)."""
    source: str
    """The ``framework`` of the source a change records (see :func:`change_source`)."""


class MemoryIntegration(Generic[_C, _Tool]):
    """What a framework's integration is built on: the memory, the rule finding a run's ids, the update tool.

    ``_C`` is the framework's context a run's ids are found in, ``_Tool`` its update
    tool. A subclass describes its :attr:`framework` and writes :meth:`found_ids` (the
    ids' natural place) and :meth:`make_tool`. The constructor, the same for each:
    ``memory`` is an :class:`~workmem.agent.AsyncMemory` or a sync
    :class:`~workmem.agent.Memory` (run on worker threads, :func:`async_memory`);
    ``ids`` replaces :meth:`found_ids` (a callable taking the context and returning
    :class:`MemoryIds` or an awaitable of one); a fixed ``thread_id`` /
    ``resource_id`` wins over either (:class:`IdsRule`).
    """

    framework: ClassVar[Framework]
    """The framework this integration is for."""

    def __init__(
        self,
        memory: AsyncMemory | Memory,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        ids: Callable[[_C], MemoryIds | Awaitable[MemoryIds]] | None = None,
    ) -> None:
        self.memory = async_memory(memory, type(self).__name__)
        """The working memory (a sync ``Memory`` given: one on its storage, run on worker threads)."""
        self._ids: IdsRule[_C] = IdsRule(
            self.framework.name, self.framework.how, self.found_ids, self.framework.takes, ids, thread_id, resource_id
        )
        super().__init__()
        self.tool: _Tool | None = None if self.memory.read_only else self.make_tool()
        """The ``updateWorkingMemory`` tool, or ``None`` in read-only mode."""

    def found_ids(self, context: _C) -> tuple[object, object]:
        """The framework's natural place of the ids: ``(thread_id, resource_id)`` as found in ``context``, unchecked."""
        raise NotImplementedError

    def make_tool(self) -> _Tool:
        """The framework's ``updateWorkingMemory`` tool (not called in read-only mode)."""
        raise NotImplementedError

    async def ids(self, context: _C) -> MemoryIds:
        """The ids of the run ``context`` belongs to, checked for the memory's scope (:class:`MissingIdsError`)."""
        return await self._ids.resolve(context, self.memory.scope)

    async def memory_message(self, context: _C) -> str:
        """The text of the memory system message for the run ``context`` belongs to, rendered from storage now."""
        found = await self.ids(context)
        return await self._run(found, lambda: self.memory.system_message(**_id_arguments(found)))

    async def update(
        self,
        arguments: str | Mapping[str, Any],
        context: _C,
        *,
        agent: object = None,
        tool_call_id: object = None,
    ) -> ToolResult:
        """The model's update with its raw ``arguments``, for the run ``context`` belongs to; its result dict.

        The change records the :func:`change_source` of this integration's framework,
        ``agent`` and ``tool_call_id`` (each kept when a non-empty string).
        """
        found = await self.ids(context)
        source = change_source(self.framework.source, agent=agent, tool_call_id=tool_call_id)
        return await self._run(found, lambda: self.memory.call_tool(arguments, **_id_arguments(found), source=source))

    async def _run(self, ids: MemoryIds, operation: Callable[[], Awaitable[_T]]) -> _T:
        """Run one memory ``operation`` for ``ids``; a framework may add a step around it."""
        return await operation()


def _id_arguments(ids: MemoryIds) -> dict[str, str | None]:
    return {"thread_id": ids.thread_id, "resource_id": ids.resource_id}
