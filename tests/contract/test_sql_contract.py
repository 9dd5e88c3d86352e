"""Contract tests shared by the SQL adapters, each compared with the reference ``ReferenceStorage``.

``SqlContract`` is not collected itself (no ``Test`` prefix): ``test_libsql.py``
and ``test_postgres.py`` subclass it and provide ``make_storage(**options)``,
which opens a new connection to one fresh namespace.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from operator import methodcaller
from typing import Any

import pytest

from workmem import (
    UNSET,
    MemoryStorage,
    Resource,
    Thread,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
    WorkingMemoryFormatError,
)
from workmem.adapters.reference import ReferenceStorage

MakeStorage = Callable[..., MemoryStorage]
T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
T1 = datetime(2025, 1, 2, 3, 4, 5, 679000, tzinfo=UTC)


def _plain(value: Any) -> Any:
    """A result without the clock (stamps other than T0/T1 read "now"); JSON text compared parsed."""
    if isinstance(value, Resource | Thread):
        fields = {k: _plain(getattr(value, k)) for k in value.__slots__}
        return (type(value).__name__, fields)
    if isinstance(value, datetime):
        return value if value in (T0, T1) else "now"
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, str) and value[:1] == "{":
        try:
            return ("json", json.loads(value))
        except ValueError:
            return value
    if hasattr(value, "threads"):
        return (_plain(value.threads), value.total, value.page, value.per_page, value.has_more)
    return value


class Differ:
    """Runs each call on the adapter and on the reference, and checks they agree."""

    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage
        self.reference = ReferenceStorage()

    def __call__(self, call: Callable[[MemoryStorage], Any]) -> Any:
        outcomes = []
        for target in (self.reference, self.storage):
            try:
                outcomes.append(("ok", _plain(call(target))))
            except Exception as exc:
                outcomes.append(("error", type(exc).__name__))
        assert outcomes[1] == outcomes[0], f"adapter {outcomes[1]!r} != reference {outcomes[0]!r}"
        return outcomes[1]


class SqlContract:
    """The contract's semantics, checked on a real database against the reference adapter."""

    @pytest.fixture
    def make_storage(self) -> MakeStorage:
        raise NotImplementedError

    @pytest.fixture
    def storage(self, make_storage: MakeStorage) -> MemoryStorage:
        return make_storage()

    def test_resources_agree_with_reference(self, storage: MemoryStorage) -> None:
        same = Differ(storage)
        same(lambda s: s.get_resource("r"))
        same(lambda s: s.save_resource(Resource("r", "# wm", {"a": 1, "n": {"x": [1, 2.5]}}, T0, T1)))
        same(lambda s: s.get_resource("r"))
        same(lambda s: s.update_resource("r", metadata={"b": None, "n": {"y": 1}}))
        same(lambda s: s.update_resource("r", working_memory=None))
        same(lambda s: s.update_resource("r", working_memory="", metadata=None))
        same(lambda s: s.update_resource("new", metadata={}))
        same(lambda s: s.update_resource("new2"))
        same(lambda s: s.update_resource("r", metadata={"x": "\x00"}))
        same(lambda s: s.get_resource("r"))
        same(lambda s: s.get_resource("new2"))
        same(lambda s: s.save_resource(Resource("r", None, None, T0, T0)))
        same(lambda s: s.get_resource("r"))

    def test_threads_agree_with_reference(self, storage: MemoryStorage) -> None:
        same = Differ(storage)
        same(lambda s: s.save_thread(Thread("t", "r", "", {"k": [True, None]}, T0, T0)))
        same(lambda s: s.save_thread(Thread("t", "other", "stolen")))
        same(lambda s: s.get_thread("t"))
        same(lambda s: s.get_thread("t", resource_id="other"))
        same(lambda s: s.save_thread(Thread("t", "r", "renamed", None, T1, T1)))
        same(lambda s: s.update_thread("t", metadata={"a": {"b": None}}))
        same(lambda s: s.update_thread("t", title="t2", metadata=None))
        same(lambda s: s.update_thread("missing", title="x"))
        same(lambda s: s.delete_thread("t"))
        same(lambda s: s.delete_thread("t"))
        same(lambda s: s.get_thread("t"))

    def test_listing_agrees_with_reference(self, storage: MemoryStorage) -> None:
        same = Differ(storage)
        for i, stamp in enumerate([T0, T1, T0, T1, T0]):
            same(methodcaller("save_thread", Thread(f"t{i}", "r", f"#{i}", None, stamp, T1)))
        same(lambda s: s.save_thread(Thread("elsewhere", "r2")))
        for order_by in ("created_at", "updated_at"):
            for direction in ("asc", "desc"):
                for page, per_page in ((0, 2), (1, 2), (2, 2), (3, 2), (0, None), (0, 100)):
                    args = {"page": page, "per_page": per_page, "order_by": order_by, "direction": direction}
                    same(methodcaller("list_threads", "r", **args))
        same(lambda s: s.list_threads("nobody"))
        same(lambda s: s.list_threads("r", page=1, per_page=None))
        same(lambda s: s.list_threads("r", per_page=2**70))

    def test_working_memory_agrees_with_reference(self, storage: MemoryStorage) -> None:
        same = Differ(storage)
        same(lambda s: s.merge_working_memory({"a": 1}, scope="thread", thread_id="t"))
        thread = Thread("t", "r", "x", {"keep": 1, "workingMemory": {"not": "text"}}, T0, T0)
        same(lambda s: s.save_thread(thread))
        same(lambda s: s.merge_working_memory({"a": {"b": 1, "c": None}}, scope="thread", thread_id="t"))
        same(lambda s: s.merge_working_memory({"a": {"c": 2}}, scope="thread", thread_id="t", resource_id="r"))
        same(lambda s: s.merge_working_memory({"a": 1}, scope="thread", thread_id="t", resource_id="other"))
        same(lambda s: s.get_thread("t"))
        same(lambda s: s.get_working_memory(scope="thread", thread_id="t", resource_id="other"))
        same(lambda s: s.set_working_memory("# notes", scope="thread", thread_id="t", resource_id="r"))
        same(lambda s: s.merge_working_memory({"a": 1}, scope="thread", thread_id="t"))
        same(lambda s: s.get_working_memory(scope="thread", thread_id="t"))
        for stored in (
            "",
            " \n\u3000",
            "[1]",
            "null",
            '"x"',
            "3",
            '{"k": [1, {"z": 1.5e300}], "big": 9007199254740991}',
        ):
            same(methodcaller("set_working_memory", stored, scope="resource", resource_id="r"))
            same(
                lambda s: s.merge_working_memory(
                    {"k": None, "n": {"m": None, "o": [None]}}, scope="resource", resource_id="r"
                )
            )
            same(lambda s: s.get_working_memory(scope="resource", resource_id="r"))
        same(lambda s: s.merge_working_memory({"x": "\ud800"}, scope="resource", resource_id="r"))
        same(lambda s: s.merge_working_memory({}, scope="resource", resource_id="fresh"))
        same(lambda s: s.get_working_memory(scope="resource", resource_id="fresh"))

    def test_a_refused_merge_changes_nothing(self, storage: MemoryStorage) -> None:
        storage.save_resource(Resource("r", "# Markdown", {"m": 1}, T0, T0))
        storage.save_thread(Thread("t", "r", "x", {"workingMemory": "[1, 2]"}, T0, T0))
        with pytest.raises(WorkingMemoryFormatError):
            storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
        with pytest.raises(WorkingMemoryFormatError):
            storage.merge_working_memory({"a": 1}, scope="thread", thread_id="t")
        assert storage.get_resource("r") == Resource("r", "# Markdown", {"m": 1}, T0, T0)
        assert storage.get_thread("t") == Thread("t", "r", "x", {"workingMemory": "[1, 2]"}, T0, T0)
        storage.merge_working_memory({"one": "x" * (3 * 1024 * 1024)}, scope="resource", resource_id="r2")
        stored = storage.get_resource("r2")
        with pytest.raises(ValidationError):  # the merged document would be over 4 MiB
            storage.merge_working_memory({"two": "y" * (3 * 1024 * 1024)}, scope="resource", resource_id="r2")
        assert storage.get_resource("r2") == stored
        with pytest.raises(ThreadNotFoundError):
            storage.update_thread("missing")
        with pytest.raises(ThreadOwnershipError):
            storage.save_thread(Thread("t", "r2"))
        assert storage.get_thread("t") == Thread("t", "r", "x", {"workingMemory": "[1, 2]"}, T0, T0)

    def test_updates_stamp_now_and_keep_created_at(self, storage: MemoryStorage) -> None:
        storage.save_thread(Thread("t", "r", "x", None, T0, T0))
        before = datetime.now(UTC)
        thread = storage.update_thread("t", title="y")
        assert thread.created_at == T0 and thread.updated_at >= before.replace(
            microsecond=before.microsecond // 1000 * 1000
        )
        assert storage.get_thread("t") == thread
        resource = storage.update_resource("r", working_memory=UNSET, metadata={"a": 1})
        assert resource.created_at == resource.updated_at and resource.updated_at.tzinfo == UTC
        assert storage.get_resource("r") == resource

    @pytest.mark.parametrize("scope", ["resource", "thread"])
    def test_sixteen_concurrent_merges_keep_every_key(self, make_storage: MakeStorage, scope: str) -> None:
        storage = make_storage()
        storage.save_thread(Thread("t", "r"))
        ids = {"resource_id": "r"} if scope == "resource" else {"thread_id": "t"}
        barrier = threading.Barrier(16)

        def merge(i: int) -> None:
            barrier.wait()
            for j in range(3):
                storage.merge_working_memory({f"k{i}-{j}": i, "shared": {f"k{i}-{j}": True}}, scope=scope, **ids)  # type: ignore[arg-type]

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(merge, range(16)))
        doc = json.loads(storage.get_working_memory(scope=scope, **ids) or "{}")  # type: ignore[arg-type]
        want = {f"k{i}-{j}" for i in range(16) for j in range(3)}
        assert set(doc) - {"shared"} == want and set(doc["shared"]) == want

    def test_racing_creates_with_different_owners_one_wins(self, make_storage: MakeStorage) -> None:
        storage = make_storage()
        barrier = threading.Barrier(8)

        def create(i: int) -> str:
            barrier.wait()
            try:
                storage.save_thread(Thread("raced", f"owner{i}", f"by {i}"))
                return f"owner{i}"
            except ThreadOwnershipError:
                return ""

        with ThreadPoolExecutor(8) as pool:
            winners = [w for w in pool.map(create, range(8)) if w]
        assert len(winners) == 1
        stored = storage.get_thread("raced")
        assert stored is not None and stored.resource_id == winners[0]
