"""TypeScript and Python on one Upstash database: ``listing="scan"`` lists what the real ``@mastra/upstash`` wrote.

The published ``@mastra/upstash`` (Node 22, ``interop/driver.mjs``) creates, moves (``saveThread`` with
another ``resourceId``, which Mastra allows) and deletes threads between workmem's calls, on the shared
test Redis behind the REST bridge, with no key prefix (Mastra has none). After each batch of Mastra writes,
workmem's pages are set field by field against Mastra's own ``listThreads`` of the same moment: threads,
order (both fields, both directions), ``total`` and ``has_more``, page by page; with no ``reindex()``.
Every id carries a random suffix, and every key naming it is deleted afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mastra_node import Step, require_mastra, run_mastra, step
from test_mastra_interop import Ids, as_mastra_thread, mastra_view

import workmem
from workmem import Thread, ThreadPage

pytestmark = [pytest.mark.backend("upstash"), pytest.mark.backend("mastra")]

T0 = datetime(2025, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)


def _at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


class Storage:
    """One workmem storage through the sync or the async API (awaited on one loop for the whole test)."""

    def __init__(self, api: str, url: str) -> None:
        self._runner = asyncio.Runner() if api == "async" else None
        self._storage: Any = (
            workmem.connect(url) if self._runner is None else self._runner.run(workmem.connect_async(url))
        )

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._storage, method)(*args, **kwargs)
        return result if self._runner is None else self._runner.run(result)

    def close(self) -> None:
        self("close")
        if self._runner is not None:
            self._runner.close()


@pytest.fixture(params=["sync", "async"])
def mixed(request: pytest.FixtureRequest) -> Iterator[tuple[Storage, Storage, dict[str, Any], Ids]]:
    """``(scanning, indexed, Mastra's store, ids)``: workmem with ``listing=scan`` and with the default."""
    from upstash_fixtures import mastra_keyspace

    require_mastra()
    ids = Ids()
    with mastra_keyspace(ids.suffix) as (url, store):
        scanning, indexed = Storage(request.param, url + "&listing=scan"), Storage(request.param, url)
        try:
            yield scanning, indexed, store, ids
        finally:
            scanning.close()
            indexed.close()


# The queries set against each other: Mastra's listThreads arguments and workmem's list_threads keywords.
_QUERIES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({}, {}),
    ({"perPage": 2, "page": 0}, {"per_page": 2, "page": 0}),
    ({"perPage": 2, "page": 1}, {"per_page": 2, "page": 1}),
    ({"perPage": 2, "page": 2}, {"per_page": 2, "page": 2}),
    ({"orderBy": {"field": "createdAt", "direction": "ASC"}}, {"direction": "asc"}),
    ({"orderBy": {"field": "updatedAt", "direction": "DESC"}}, {"order_by": "updated_at"}),
    (
        {"orderBy": {"field": "updatedAt", "direction": "ASC"}, "perPage": 3, "page": 1},
        {"order_by": "updated_at", "direction": "asc", "per_page": 3, "page": 1},
    ),
]


def _lists(resources: list[str]) -> list[Step]:
    return [
        step("listThreads", filter={"resourceId": resource}, **mastra)
        for resource in resources
        for mastra, _ in _QUERIES
    ]


def _same_lists(storage: Storage, resources: list[str], mastra_pages: list[Any]) -> None:
    """Every query of :data:`_QUERIES` on every resource gives the page Mastra gave."""
    pages = iter(mastra_pages)
    for resource in resources:
        for mastra, ours in _QUERIES:
            expected = next(pages).value
            page: ThreadPage = storage("list_threads", resource, **ours)
            assert [as_mastra_thread(t) for t in page.threads] == [mastra_view(t) for t in expected["threads"]], (
                resource,
                mastra,
            )
            assert (page.total, page.has_more, page.unreadable) == (expected["total"], expected["hasMore"], ())


def _thread(thread_id: str, resource_id: str, title: str, created: float, updated: float) -> dict[str, Any]:
    return {
        "id": thread_id,
        "resourceId": resource_id,
        "title": title,
        "metadata": {"by": "mastra"},
        "createdAt": _at(created),
        "updatedAt": _at(updated),
    }


def test_lists_follow_what_mastra_creates_moves_and_deletes(
    mixed: tuple[Storage, Storage, dict[str, Any], Ids],
) -> None:
    scanning, indexed, store, ids = mixed
    ada, bob = ids("ada"), ids("bob")
    w1, w2, w3, w4 = ids("w1"), ids("w2"), ids("w3"), ids("w4")
    m1, m2, m3 = ids("m1"), ids("m2"), ids("m3")
    scanning("save_thread", Thread(w1, ada, "w1", {"by": "workmem"}, _at(1), _at(1)))
    scanning("save_thread", Thread(w2, ada, "w2", None, _at(2), _at(2.5)))
    indexed("save_thread", Thread(w3, bob, "w3", None, _at(3), _at(3)))

    # 1. Mastra creates threads of both resources.
    created = run_mastra(
        store,
        [
            step("saveThread", thread=_thread(m1, ada, "m1", 4, 4)),
            step("saveThread", thread=_thread(m2, ada, "m2", 0.5, 5)),
            step("saveThread", thread=_thread(m3, bob, "m3", 6, 6)),
            *_lists([ada, bob]),
        ],
    )
    assert [t["id"] for t in created[3].value["threads"]] == [m1, w2, w1, m2]
    _same_lists(scanning, [ada, bob], created[3:])
    assert scanning("list_threads", ada).total == 4
    assert indexed("list_threads", ada).total == 2  # the default listing knows only workmem's writes

    # 2. Mastra moves a workmem thread out and its own in, deletes one of each, renames one (updatedAt: now).
    w1_doc = next(t for t in created[3].value["threads"] if t["id"] == w1)
    m3_doc = next(t for t in created[3 + len(_QUERIES)].value["threads"] if t["id"] == m3)
    changed = run_mastra(
        store,
        [
            step("saveThread", thread={**w1_doc, "resourceId": bob}),
            step("saveThread", thread={**m3_doc, "resourceId": ada}),
            step("deleteThread", threadId=m1),
            step("deleteThread", threadId=w2),
            step("updateThread", id=m2, title="m2 renamed", metadata={"n": 1}),
            *_lists([ada, bob]),
        ],
    )
    assert [t["id"] for t in changed[5].value["threads"]] == [m3, m2]
    assert [t["id"] for t in changed[5 + len(_QUERIES)].value["threads"]] == [w3, w1]
    _same_lists(scanning, [ada, bob], changed[5:])

    # 3. workmem writes again on top (its indexes kept as always): both programs still see the same lists.
    scanning("save_thread", Thread(w4, ada, "w4", None, _at(7), _at(7)))
    scanning("update_thread", m3, title="m3 renamed by workmem")
    time.sleep(0.01)  # distinct updatedAt milliseconds: Mastra orders ties as its scan found them
    scanning("merge_working_memory", {"k": 1}, scope="thread", thread_id=m2)
    after = run_mastra(store, _lists([ada, bob]))
    assert [t["id"] for t in after[0].value["threads"]] == [w4, m3, m2]
    _same_lists(scanning, [ada, bob], after)
