"""The two ``listing`` modes of the Upstash adapter against a real redis-server behind the REST bridge.

``listing="scan"`` must give exactly the pages of the default ``listing="index"`` where only workmem
writes (ties, both orders, every page size), and find a resource's documents however their JSON spells
the owner (the owner filter in Redis skips a document without decoding it only where it provably cannot
hold the id). The default logs once when its index shows another program's write. The real
``@mastra/upstash`` side is in ``test_upstash_mixed_writers.py``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from upstash_fixtures import Bridge, bridge, raw_client, upstash_prefix, upstash_url

import workmem
from workmem import Thread, ValidationError
from workmem.storage import MemoryStorage

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge", "upstash_prefix", "upstash_url"]

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


@pytest.fixture
def both(upstash_url: str) -> Iterator[tuple[MemoryStorage, MemoryStorage]]:
    """``(indexed, scanning)`` on one fresh keyspace."""
    with workmem.connect(upstash_url) as indexed, workmem.connect(upstash_url, listing="scan") as scanning:
        yield indexed, scanning


@pytest.fixture
def raw(bridge: Bridge) -> Iterator[Any]:
    client: Any = raw_client(bridge)
    try:
        yield client
    finally:
        client.close()


def test_scan_pages_equal_index_pages_where_only_workmem_writes(both: tuple[MemoryStorage, MemoryStorage]) -> None:
    indexed, scanning = both
    owners = ["ada", 'qu"ote', "sl/ash", "é-ünï", "glob*?[x]\\"]
    threads = [
        # timestamps from a few values: many ties, broken by the id in the same direction
        Thread(
            f"t{i:02d}-{'éa'[i % 2]}",
            owners[i % 5],
            f"n{i}",
            {"i": i},
            T0 + timedelta(hours=i % 3),
            T0 + timedelta(minutes=i % 4),
        )
        for i in range(40)
    ]
    indexed.insert_threads(threads)
    scanning.update_thread(threads[0].id, title="moved up")  # updated now: first by updated_at desc
    for owner in [*owners, "nobody"]:
        for order_by in ("created_at", "updated_at"):
            for direction in ("asc", "desc"):
                for per_page in (None, 1, 3, 8):
                    for page in range(1 if per_page is None else 10 // per_page + 2):
                        query: dict[str, Any] = {"order_by": order_by, "direction": direction, "per_page": per_page}
                        expected = indexed.list_threads(owner, page=page, **query)
                        assert scanning.list_threads(owner, page=page, **query) == expected, (owner, query, page)
                full = indexed.list_threads(owner, order_by=order_by, per_page=None)
                assert full.total == sum(t.resource_id == owner for t in threads)


def _doc(thread_id: str, owner: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": thread_id,
        "resourceId": owner,
        "title": thread_id,
        "metadata": {},
        "createdAt": "2025-01-02T03:04:05.678Z",
        "updatedAt": "2025-01-02T03:04:05.678Z",
        **extra,
    }


def test_scan_finds_a_resources_documents_however_their_json_spells_the_owner(
    both: tuple[MemoryStorage, MemoryStorage], raw: Any, upstash_prefix: str
) -> None:
    _, scanning = both
    key = f"{upstash_prefix}mastra_threads:id:"
    texts = {
        # as JSON.stringify writes (compact, non-ASCII as is)
        "compact": json.dumps(_doc("compact", "ré/1"), ensure_ascii=False, separators=(",", ":")),
        # spaces, the owner last, every non-ASCII character escaped (Python's default)
        "spaced": json.dumps(
            {**{k: v for k, v in _doc("spaced", "x").items() if k != "resourceId"}, "resourceId": "ré/1"}
        ),
        # a slash escaped as \/ and a plain letter as \u0072: still the same owner
        "escaped": json.dumps(_doc("escaped", "OWNER"), separators=(",", ":")).replace(
            '"OWNER"', '"\\u0072\\u00e9\\/1"'
        ),
        # only the slash escaped (no \u anywhere): found by the \/ the id's '/' may be spelled with
        "slashed": json.dumps(_doc("slashed", "OWNER"), ensure_ascii=False).replace('"OWNER"', '"ré\\/1"'),
        # the owner's id only inside the metadata, or as a title: another resource's thread
        "nested": json.dumps(_doc("nested", "someone", metadata={"resourceId": "ré/1"}, title="ré/1")),
        # an id that JSON must escape
        "quoted": json.dumps(_doc("quoted", 'a"b\\c')),
        # the owner's, but not a readable thread (no createdAt that parses): listed as unreadable
        "broken": json.dumps(_doc("broken", "ré/1", createdAt="yesterday")),
        # not JSON at all: nobody's
        "garbage": "{not json",
    }
    for thread_id, text in texts.items():
        raw.set(key + thread_id, text)
    raw.rpush(key + "a-list", "not a string key")  # skipped, as a list is no document

    page = scanning.list_threads("ré/1")
    assert sorted(t.id for t in page.threads) == ["compact", "escaped", "slashed", "spaced"]
    assert (page.total, page.unreadable) == (5, ("broken",))
    assert [t.id for t in scanning.list_threads('a"b\\c').threads] == ["quoted"]
    assert [t.id for t in scanning.list_threads("someone").threads] == ["nested"]
    assert scanning.list_threads("ré").total == 0
    # a page holding only the unreadable one: counted, named, and has_more right around it
    first, last = scanning.list_threads("ré/1", per_page=4), scanning.list_threads("ré/1", per_page=4, page=1)
    assert (len(first.threads), first.has_more) == (4, True)
    assert (last.threads, last.unreadable, last.has_more) == ((), ("broken",), False)


def test_listing_option_is_checked(upstash_url: str) -> None:
    for bad in ("full", "", "SCAN"):
        with pytest.raises(ValidationError, match="listing must be one of"):
            workmem.connect(upstash_url, listing=bad)
    with pytest.raises(ValidationError, match="listing must be one of"):
        workmem.connect(upstash_url + "&listing=everything")
    with workmem.connect(upstash_url + "&listing=scan") as storage:
        assert storage.list_threads("nobody").total == 0


def test_index_listing_logs_once_when_another_program_deleted_or_moved_a_thread(
    both: tuple[MemoryStorage, MemoryStorage], raw: Any, upstash_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    indexed, scanning = both
    for i in range(3):
        indexed.save_thread(Thread(f"t{i}", "ada", f"t{i}", None, T0 + timedelta(hours=i), T0))
    with caplog.at_level(logging.WARNING, logger="workmem.adapters.upstash"):
        assert indexed.list_threads("ada").total == 3
        assert not caplog.records  # only workmem wrote: nothing to say
        raw.delete(f"{upstash_prefix}mastra_threads:id:t1")  # as @mastra/upstash deletes: no index kept
        moved = json.dumps(_doc("t2", "bob"))
        raw.set(f"{upstash_prefix}mastra_threads:id:t2", moved)  # as its saveThread moves a thread
        stale = indexed.list_threads("ada")
        assert ([t.id for t in stale.threads], stale.total) == (["t0"], 3)  # the index's known limit
        indexed.list_threads("ada")
    warnings = [r for r in caplog.records if r.name == "workmem.adapters.upstash"]
    assert len(warnings) == 1 and "listing='scan'" in warnings[0].getMessage()
    assert "t2" in warnings[0].getMessage() or "t1" in warnings[0].getMessage()
    exact = scanning.list_threads("ada")
    assert ([t.id for t in exact.threads], exact.total) == (["t0"], 1)
    assert [t.id for t in scanning.list_threads("bob").threads] == ["t2"]


def test_a_scan_listing_is_no_snapshot_and_says_so(both: tuple[MemoryStorage, MemoryStorage]) -> None:
    """Between the SCAN and the read of what it found, t0 is created and then t1 deleted: ada always had two
    or three threads, yet the page holds one. The thread there throughout is listed; the flag tells the suite."""
    indexed, scanning = both
    assert indexed.capabilities.snapshot_listing and not scanning.capabilities.snapshot_listing
    steady = indexed.create_thread(Thread("s", "ada", "steady", None, T0, T0))
    indexed.create_thread(Thread("t1", "ada", "one", None, T0, T0))
    hooks: Any = scanning
    scan = hooks._client.execute
    changed: list[str] = []

    async def execute(*args: Any) -> Any:
        reply = await scan(*args)
        if args[0] == "SCAN" and not changed:
            indexed.create_thread(Thread("t0", "ada", "zero", None, T0, T0))
            indexed.delete_thread("t1")
            changed.append("t0 created, t1 deleted")
        return reply

    hooks._client.execute = execute
    page = scanning.list_threads("ada")
    assert changed and ([t.id for t in page.threads], page.total) == (["s"], 1)
    assert page.threads[0] == steady
    assert [t.id for t in indexed.list_threads("ada").threads] == ["t0", "s"]  # the index: one moment
