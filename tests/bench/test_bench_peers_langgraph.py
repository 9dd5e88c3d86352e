"""The LangGraph peer of ``bench --peers`` (:mod:`bench.peers.langgraph`) on a small fixture.

Each operation runs a few times against the real ``SqliteStore`` (a temporary
file) and ``PostgresStore`` (a fresh schema on the test server); the checks are
that the calls did their work (the item written can be read back, the list is
the newest first) and that the namespace is gone afterwards. Nothing here
asserts performance.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.sqlite", reason="pip install 'workmem[bench]'")

from servers import server_url

from bench.peers.base import CONCURRENT_CLIENTS, MERGES_PER_CLIENT, OPERATIONS, Unavailable
from bench.peers.langgraph import LIST_RESOURCE, RESOURCES_NS, LangGraphPeer, merge_field, open_langgraph, threads_ns
from bench.peers.workmem import replacement

SIZES = {"resources": 4, "threads_per_resource": 3, "list_threads": 30}
BACKENDS = ["file", pytest.param("postgres", marks=pytest.mark.backend("postgres"))]


def _postgres_url(backend: str) -> str:
    return server_url("postgres") if backend == "postgres" else ""


def _namespace_exists(backend: str, namespace: str) -> bool:
    if backend == "file":
        return Path(namespace).exists()
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (namespace,)).fetchone()
    return bool(row and row[0])


@pytest.fixture(params=BACKENDS)
def peer(request: pytest.FixtureRequest) -> Iterator[LangGraphPeer]:
    backend = str(request.param)
    opened = LangGraphPeer(backend, postgres_url=_postgres_url(backend), **SIZES)
    opened.prepare()
    namespace = opened.namespace
    assert namespace and _namespace_exists(backend, namespace)
    try:
        yield opened
    finally:
        opened.close()
    assert not _namespace_exists(backend, namespace), f"{namespace} left behind"


def test_every_operation_times_each_call(peer: LangGraphPeer) -> None:
    for operation in OPERATIONS:
        for start in (0, 500):
            measured = peer.measure(operation, start, 7)
            assert len(measured.latencies) == 7, operation
            assert all(x > 0 for x in measured.latencies), operation
            assert measured.seconds > 0, operation
    with pytest.raises(ValueError, match="unknown operation"):
        peer.measure("drop_everything", 0, 1)


def test_reads_find_the_fixture(peer: LangGraphPeer) -> None:
    store = peer._require()
    for i in range(SIZES["resources"] * SIZES["threads_per_resource"]):
        namespace, key = peer.thread_key(i)
        item = store.get(namespace, key)
        assert item is not None and item.value["title"].startswith("thread "), (namespace, key)
    resource = store.get(RESOURCES_NS, peer.resource_id(3))
    assert resource is not None and json.loads(resource.value["workingMemory"])["name"] == "Ada"


def test_writes_can_be_read_back(peer: LangGraphPeer) -> None:
    store = peer._require()
    peer.measure("create_thread", 1000, 3)
    for i in range(1000, 1003):
        created = store.get(threads_ns(peer.resource_id(i)), f"bench-new-{i}")
        assert created is not None and created.value == {"title": "new", "metadata": {}}
    peer.measure("replace_working_memory", 2001, 1)
    replaced = store.get(RESOURCES_NS, peer.resource_id(2001))
    assert replaced is not None and replaced.value["workingMemory"] == replacement(2001)
    peer.measure("merge_field", 2001, 1)  # into the memory just replaced: its note stays
    merged = store.get(RESOURCES_NS, peer.resource_id(2001))
    assert merged is not None
    memory = json.loads(merged.value["workingMemory"])
    assert memory["f1"] == 2001 and memory["note"] == json.loads(replacement(2001))["note"]


def test_list_is_twenty_newest_of_the_list_resource(peer: LangGraphPeer) -> None:
    store = peer._require()
    if peer.backend == "file":  # SQLite's CURRENT_TIMESTAMP has whole seconds: wait for the next one, or it ties
        time.sleep(1.02 - time.time() % 1)
    store.put(threads_ns(LIST_RESOURCE), "bench-l-latest", {"title": "latest", "metadata": {}})
    page = store.search(threads_ns(LIST_RESOURCE), limit=20)
    assert len(page) == 20
    assert all(tuple(item.namespace) == threads_ns(LIST_RESOURCE) for item in page)
    stamps = [item.updated_at for item in page]
    assert stamps == sorted(stamps, reverse=True)
    assert page[0].key == "bench-l-latest"


def test_merge_field_keeps_every_key_without_contention(peer: LangGraphPeer) -> None:
    store = peer._require()
    for k in range(MERGES_PER_CLIENT):
        merge_field(store, "solo", f"k{k}", k)
    item = store.get(RESOURCES_NS, "solo")
    assert item is not None
    assert json.loads(item.value["workingMemory"]) == {f"k{k}": k for k in range(MERGES_PER_CLIENT)}


def test_merges_kept_counts_what_survives_the_race(peer: LangGraphPeer) -> None:
    kept = peer.merges_kept()
    assert 1 <= kept <= CONCURRENT_CLIENTS * MERGES_PER_CLIENT


@pytest.mark.parametrize(("synchronous", "level"), [(None, 2), ("full", 2), ("normal", 1)])
def test_file_durability_is_applied_and_reported(synchronous: str | None, level: int) -> None:
    opened = LangGraphPeer("file", synchronous=synchronous, resources=1, threads_per_resource=1, list_threads=1)
    try:
        opened.prepare()
        assert f"journal_mode=delete, synchronous={level} " in " ".join(opened.notes)
        client_conn = opened._require().conn
        assert client_conn.execute("PRAGMA synchronous").fetchone()[0] == level
    finally:
        opened.close()


def test_unusable_settings_are_refused() -> None:
    with pytest.raises(Unavailable, match="no PostgreSQL server URL"):
        open_langgraph("postgres", postgres_url="")
    with pytest.raises(ValueError, match="synchronous"):
        LangGraphPeer("file", synchronous="off")
    with pytest.raises(ValueError, match="synchronous"):
        LangGraphPeer("postgres", postgres_url="postgresql://x@127.0.0.1/db", synchronous="normal")
    with pytest.raises(ValueError, match="unknown backend"):
        LangGraphPeer("redis")


def test_a_missing_store_package_makes_the_peer_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.sqlite", None)  # import now raises ImportError
    with pytest.raises(Unavailable, match=r"langgraph-checkpoint-sqlite is not installed"):
        open_langgraph("file", postgres_url="")
