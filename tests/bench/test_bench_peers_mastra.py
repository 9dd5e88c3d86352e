"""The Mastra peer of ``bench --peers`` (``bench/peers/mastra.py`` + ``interop/bench.mjs``) on the real packages.

Small fixtures, a few calls per operation: the peer's answers are checked, not
its speed -- every operation's samples, that the threads ``create_thread``
made are read back by Mastra (and fresh ids are not), that sequential merges
through Memory's tool all stick, that a Mastra error comes back with Mastra's
message and kills Node, and that close removes the schema or file. Skips
loudly without Node or the packages (``tests/support/mastra_node.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from mastra_node import require_mastra
from servers import server_url

from bench.peers import mastra
from bench.peers.base import CONCURRENT_CLIENTS, MERGES_PER_CLIENT, OPERATIONS, Unavailable
from bench.peers.mastra import MastraError, MastraPeer, open_mastra

SIZES = {"resources": 6, "threads_per_resource": 3, "list_threads": 30}
CALLS = 8


def _schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        query = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s"
        row = conn.execute(query, [schema]).fetchone()
    return row is not None and row[0] == 1


@pytest.fixture(
    params=[
        pytest.param("file", id="file", marks=[pytest.mark.backend("mastra"), pytest.mark.backend("libsql")]),
        pytest.param("postgres", id="postgres", marks=[pytest.mark.backend("mastra"), pytest.mark.backend("postgres")]),
    ]
)
def peer_and_url(request: pytest.FixtureRequest) -> Iterator[tuple[MastraPeer, str]]:
    require_mastra()
    url = server_url("postgres") if request.param == "postgres" else ""
    peer = open_mastra(request.param, postgres_url=url, **SIZES)
    try:
        yield peer, url
    finally:
        peer.close()


def test_every_operation_on_the_real_packages(peer_and_url: tuple[MastraPeer, str]) -> None:
    peer, url = peer_and_url
    peer.prepare()
    assert peer.system == "mastra"
    if peer.backend == "postgres":
        assert peer.schema is not None and _schema_exists(url, peer.schema)
        assert any("max 20 connections" in note for note in peer.notes)
    else:
        assert (peer.directory / "mastra.db").exists()
        assert any(note.startswith("Probed after prepare: PRAGMA synchronous") for note in peer.notes)

    for operation in OPERATIONS:
        block = peer.measure(operation, 0, CALLS)
        assert len(block.latencies) == CALLS, operation
        assert all(latency > 0 for latency in block.latencies), operation
        assert block.seconds >= max(block.latencies), operation
        if not operation.startswith("get_thread_16"):  # sequential calls: the block holds every call
            assert block.seconds >= sum(block.latencies), operation
        if peer.backend == "file" and operation in {"create_thread", "replace_working_memory", "merge_field"}:
            assert block.extra["synchronous"] in {1, 2}, block.extra

    assert peer.created_threads_found(0, CALLS) == CALLS
    assert peer.created_threads_found(10_000, 3) == 0  # ids create_thread never made are not found
    more = peer.measure("create_thread", 10_000, 3)
    assert len(more.latencies) == 3 and peer.created_threads_found(10_000, 3) == 3

    kept = peer.merges_kept()
    assert isinstance(kept, int) and 0 < kept <= CONCURRENT_CLIENTS * MERGES_PER_CLIENT

    peer.close()
    assert not peer.running and not peer.directory.exists()
    if peer.backend == "postgres":
        assert peer.schema is not None and not _schema_exists(url, peer.schema)


@pytest.mark.backend("mastra")
def test_sequential_merges_through_the_tool_all_stick() -> None:
    require_mastra()
    peer = MastraPeer("file", postgres_url="", resources=2, threads_per_resource=1, list_threads=20, clients=1)
    try:
        peer.prepare()
        assert peer.merges_kept() == MERGES_PER_CLIENT  # one client: nothing to race, every key merged
    finally:
        peer.close()


@pytest.mark.backend("mastra")
def test_a_mastra_error_comes_back_and_kills_node() -> None:
    require_mastra()
    peer = open_mastra("file", postgres_url="")
    try:
        assert peer.running
        with pytest.raises(ValueError, match="unknown operation"):
            peer.measure("drop_everything", 0, 1)
        assert peer.running  # refused in Python, before Node
        with pytest.raises(MastraError, match="prepare first"):
            peer.measure("get_thread", 0, 1)
        assert not peer.running
        with pytest.raises(MastraError, match="has exited"):
            peer.merges_kept()
    finally:
        peer.close()
    assert not peer.directory.exists()


def test_unavailable_without_node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(mastra, "NODE", tmp_path / "no-node")
    with pytest.raises(Unavailable, match=r"no Node binary at .*npm ci --ignore-scripts"):
        open_mastra("file", postgres_url="")


def test_unavailable_without_a_postgres_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mastra, "mastra_missing", lambda: None)
    url = "postgresql://bench:s3cret-pw@127.0.0.1:1/postgres"
    with pytest.raises(Unavailable, match="no PostgreSQL at") as caught:
        open_mastra("postgres", postgres_url=url)
    assert "s3cret-pw" not in str(caught.value)


def test_no_peer_for_other_backends() -> None:
    with pytest.raises(ValueError, match="postgres, file"):
        open_mastra("mongodb", postgres_url="")


@pytest.mark.backend("mastra")
@pytest.mark.backend("libsql")
def test_the_normal_peer_runs_its_write_blocks_at_normal_even_after_overlapping_calls() -> None:
    """Mastra as it ships writes at FULL after overlapping calls (its NORMAL reaches one pooled connection); the
    peer at equal durability sets NORMAL on the connection each block borrows, and measures that it took."""
    require_mastra()
    with pytest.raises(ValueError, match="synchronous"):
        MastraPeer("postgres", postgres_url="", synchronous="normal")
    peer = open_mastra("file", postgres_url="", synchronous="normal", **SIZES)
    try:
        peer.prepare()
        assert peer.system == "mastra (normal)"
        peer.measure("get_thread_16", 0, CALLS)  # overlapping calls: the idle stack's top is now a FULL connection
        for operation in ("create_thread", "replace_working_memory", "merge_field"):
            assert peer.measure(operation, 0, CALLS).extra["synchronous"] == 1, operation  # 1: NORMAL
    finally:
        peer.close()
    shipped = open_mastra("file", postgres_url="", **SIZES)
    try:
        shipped.prepare()
        shipped.measure("get_thread_16", 0, CALLS)
        assert shipped.measure("create_thread", 0, CALLS).extra["synchronous"] == 2  # as shipped: FULL by then
    finally:
        shipped.close()
