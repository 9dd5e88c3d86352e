"""Every sync face and its async twin offer the same methods with the same parameters.

The faces: :class:`MemoryStorage` / :class:`AsyncMemoryStorage` (the storage contract),
:class:`Memory` / :class:`AsyncMemory` (the agent layer). The conformance suite's
:class:`AsyncStorageView` is the async storage seen through the sync face: it must
forward every public method, so a check never runs the sync code by mistake.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest

from workmem import AsyncMemory, AsyncMemoryStorage, Memory, MemoryStorage, Thread
from workmem.adapters.reference import ReferenceStorage
from workmem.conformance.apis import FORWARDED, AsyncStorageView
from workmem.hooks import HOOK_NAMES, ForwardingHooks, StorageHooks

ITERATORS = {"iter_resources", "iter_threads"}
RENAMED = {"resource_page": "resources_after", "thread_page": "threads_after", "replace_thread": "restore_thread"}
"""The former names of three storage methods, kept as deprecated aliases."""
FACES = [
    pytest.param(MemoryStorage, AsyncMemoryStorage, {"from_url"}, {"open"}, id="storage"),
    pytest.param(Memory, AsyncMemory, set(), {"open", "from_memory"}, id="agent"),
]


def public(face: type, own: set[str]) -> list[str]:
    return sorted(
        name
        for name, member in vars(face).items()
        if not name.startswith("_") and callable(member) and name not in own and name not in RENAMED
    )


@pytest.mark.parametrize(("sync_face", "async_face", "sync_own", "async_own"), FACES)
def test_both_faces_have_the_same_public_methods_with_the_same_parameters(
    sync_face: type, async_face: type, sync_own: set[str], async_own: set[str]
) -> None:
    names = public(sync_face, sync_own)
    assert names == public(async_face, async_own)
    assert len(names) >= 10
    for name in names:
        sync, coro = getattr(sync_face, name), getattr(async_face, name)
        if name in ITERATORS:  # async iterators (``async for``), not coroutines
            assert inspect.get_annotations(coro)["return"].startswith("AsyncIterator["), name
            assert inspect.get_annotations(sync)["return"].startswith("Iterator["), name
        else:
            assert inspect.iscoroutinefunction(coro), name
        assert not inspect.iscoroutinefunction(sync), name
        sync_parameters, async_parameters = inspect.signature(sync).parameters, inspect.signature(coro).parameters
        assert list(sync_parameters) == list(async_parameters), name
        for parameter in sync_parameters.values():
            twin = async_parameters[parameter.name]
            assert (twin.kind, twin.default) == (parameter.kind, parameter.default), (name, parameter)


def test_the_conformance_view_forwards_every_public_method_of_the_storage() -> None:
    assert sorted([*FORWARDED, *ITERATORS]) == public(MemoryStorage, {"from_url"})
    for name in public(MemoryStorage, {"from_url"}):
        assert vars(AsyncStorageView)[name] is not vars(MemoryStorage)[name], name


def test_forwarding_hooks_forward_every_hook_and_leave_only_forward_to_implement() -> None:
    assert ForwardingHooks.__abstractmethods__ == frozenset({"_forward"})
    assert set(HOOK_NAMES) == StorageHooks.__abstractmethods__
    assert all(name in vars(ForwardingHooks) for name in HOOK_NAMES)


def test_the_former_method_names_warn_and_do_what_the_new_names_do() -> None:
    storage = ReferenceStorage()
    storage.save_thread(Thread("t", "alice", "first"))
    for old, new in RENAMED.items():
        assert hasattr(MemoryStorage, old) and hasattr(AsyncMemoryStorage, old), old
        assert new in getattr(MemoryStorage, old).__doc__
    with pytest.warns(DeprecationWarning, match=r"thread_page\(\) is renamed threads_after\(\)"):
        page = storage.thread_page(None, limit=10)  # type: ignore[attr-defined]
    assert page == storage.threads_after(None, limit=10)
    with pytest.warns(DeprecationWarning, match="replace_thread"):
        assert storage.replace_thread(Thread("t", "alice", "restored")) is True  # type: ignore[attr-defined]
    assert storage.get_thread("t").title == "restored"  # type: ignore[union-attr]
    with pytest.warns(DeprecationWarning, match="resource_page"):
        assert storage.resource_page().records == ()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "name", ["Capabilities", "StorageHooks", "ListQuery", "ScopeTarget", "check_owner", "missing_tables"]
)
def test_names_workmem_storage_no_longer_exports_still_import_with_a_warning(name: str) -> None:
    import workmem.kit
    import workmem.storage

    with pytest.warns(DeprecationWarning, match=f"workmem.storage.{name} moved"):
        moved: Any = getattr(workmem.storage, name)
    assert moved is getattr(workmem.kit, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert workmem.storage.__all__ == ["MemoryStorage"]
    with pytest.raises(AttributeError):
        workmem.storage.nothing_here  # type: ignore[attr-defined]  # noqa: B018


def test_a_moved_name_kit_does_not_export_is_sent_to_its_own_module() -> None:
    import workmem.arguments
    import workmem.storage

    with pytest.warns(DeprecationWarning, match=r"check_list_args moved: import it from workmem\.arguments$"):
        moved: Any = workmem.storage.check_list_args  # type: ignore[attr-defined]
    assert moved is workmem.arguments.check_list_args


@pytest.mark.parametrize(
    ("former", "now", "names"),
    [
        ("workmem.flows", "workmem.operations", ["get_thread", "restore_thread", "MAX_PAGE_SIZE"]),
        ("workmem.flows", "workmem._drive", ["run_sync", "iterate_sync", "SuspendedInSyncFlow"]),
        ("workmem.flows", "workmem.hooks", ["StorageHooks", "Capabilities", "read_record_page"]),
        ("workmem.checks", "workmem.arguments", ["check_owner", "check_scope", "missing_tables"]),
        ("workmem.checks", "workmem.hooks", ["ListQuery", "ScopeTarget"]),
        ("workmem.agent.flows", "workmem.agent.operations", ["MemoryBase", "ToolResult", "call_tool"]),
        ("workmem.conformance.checks", "workmem.conformance.registry", ["check", "all_checks", "CheckContext"]),
    ],
)
def test_the_former_modules_still_import_the_same_objects(former: str, now: str, names: list[str]) -> None:
    import importlib

    old, new = importlib.import_module(former), importlib.import_module(now)
    for name in names:
        assert getattr(old, name) is getattr(new, name), name
        assert name in old.__all__, name
    flows = importlib.import_module("workmem.flows")
    assert flows.thread_page is flows.threads_after and flows.replace_thread is flows.restore_thread
