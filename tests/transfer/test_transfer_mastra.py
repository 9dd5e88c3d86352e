"""``workmem copy --verify`` on records the published Mastra packages wrote, and Mastra reading the copies.

The real ``@mastra/*`` packages (``tests/support/mastra_node.py``) write resources and
threads, with working memory in both scopes (template and schema mode, through
Memory's agent tool) and metadata, into a libSQL file, a PostgreSQL schema or
Upstash (``@mastra/upstash`` through workmem's REST bridge, on a Redis database
of its own: Mastra's keys have no prefix, and a copy from Upstash takes every
record it finds). Then ``python -m workmem copy SRC DST --verify`` copies them
to another of those backends (exit 0, verify clean), ``workmem.copy`` copies
them into the in-process memory backend and back (the memory backend is not
reachable from a subprocess), every record read through workmem on each side
equals what Mastra wrote, and Mastra reads a resource, a thread and working
memory in both scopes back from the copy. A libSQL or PostgreSQL source is
left without any workmem table, index, trigger or function.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from backends import fresh_url
from mastra_node import require_mastra, run_mastra, step
from test_mastra_interop import (
    RESOURCE_SCHEMA,
    RESOURCE_TEMPLATE,
    T0,
    T1,
    T2,
    THREAD_SCHEMA,
    THREAD_TEMPLATE,
    Ids,
    as_mastra_resource,
    as_mastra_thread,
    get_wm,
    mastra_view,
    tool,
    workmem_memory,
)
from test_transfer_flows import workmem_objects

import workmem
from workmem import MemoryStorage, Resource, Thread

pytestmark = pytest.mark.backend("mastra")


@dataclass(frozen=True)
class Side:
    """One empty namespace: the workmem URL and the Mastra store spec (``interop/driver.mjs``) of the same data."""

    url: str
    store: dict[str, Any]


@contextlib.contextmanager
def _private_upstash(suffix: str) -> Iterator[Side]:
    """A bridge of its own in front of an empty Redis database; this test's keys are deleted afterwards."""
    from servers import server_url
    from upstash_fixtures import delete_suffixed, raw_client, start_bridge, stop_bridge

    server = server_url("redis").rstrip("/")
    for db in random.sample(range(1, 16), 15):
        bridge = start_bridge(f"{server}/{db}")
        client: Any = raw_client(bridge)
        if client.dbsize() == 0:
            break
        client.close()
        stop_bridge(bridge)
    else:
        pytest.fail("no empty Redis database (1 to 15) for @mastra/upstash, whose keys have no prefix")
    client.close()
    try:
        yield Side(bridge.storage_url(), {"kind": "upstash", "url": bridge.url, "token": bridge.token})
    finally:
        try:
            delete_suffixed(bridge, suffix)
        finally:
            stop_bridge(bridge)


@contextlib.contextmanager
def side(backend: str, suffix: str) -> Iterator[Side]:
    if backend == "libsql":
        with tempfile.TemporaryDirectory(prefix="wm_mastra_copy_") as directory:
            url = f"file:{Path(directory) / 'agent.db'}"
            yield Side(url, {"kind": "libsql", "url": url})
    elif backend == "postgres":
        from servers import server_url

        with fresh_url("postgres") as url:  # ...?schema=wm_<random>; dropped afterwards
            schema = url.rsplit("schema=", 1)[1]
            yield Side(url, {"kind": "pg", "connectionString": server_url("postgres"), "schemaName": schema})
    elif backend == "upstash":
        with _private_upstash(suffix) as upstash:
            yield upstash
    else:
        raise ValueError(backend)


@dataclass(frozen=True)
class Written:
    """What Mastra wrote, as Mastra reads it back."""

    resources: dict[str, dict[str, Any]]
    threads: dict[str, dict[str, Any]]
    memories: list[tuple[dict[str, Any], str, str, str]]  # (config, thread id, resource id, text)


def mastra_writes(src: Side, ids: Ids) -> Written:
    ada, grace, lin, mo = ids("ada"), ids("grace"), ids("lin"), ids("mo")
    chat, bare, mos, made = ids("chat"), ids("bare"), ids("mo-chat"), ids("made")
    wm_reads = [(RESOURCE_TEMPLATE, chat, ada), (THREAD_TEMPLATE, chat, ada), (RESOURCE_SCHEMA, mos, mo)]
    wm_reads += [(THREAD_SCHEMA, bare, ada)]
    writes = [
        step(
            "saveResource",
            resource={
                "id": ada,
                "workingMemory": "# User\n- Name: Ada",
                "metadata": {"plan": "pro", "n": 1.5, "tags": ["a", "b"], "nested": {"k": None}, "é": "ü"},
                "createdAt": T0,
                "updatedAt": T1,
            },
        ),
        step(
            "saveThread",
            thread={
                "id": chat,
                "resourceId": ada,
                "title": "First chat",
                "metadata": {"source": "ts", "deep": {"k": [1, 2.5, "x", None, True]}},
                "createdAt": T0,
                "updatedAt": T1,
            },
        ),
        step("saveThread", thread={"id": bare, "resourceId": ada, "title": "", "createdAt": T2, "updatedAt": T2}),
        step("saveThread", thread={"id": mos, "resourceId": mo, "title": "Mo", "createdAt": T1, "updatedAt": T2}),
        step(
            "memory.createThread",
            config=RESOURCE_TEMPLATE,
            threadId=made,
            resourceId=lin,
            title="Made by Memory",
            metadata={"via": "Memory", "n": [1]},
        ),
        step("updateResource", resourceId=grace, workingMemory="plain text", metadata={"a": 1}),
        tool(RESOURCE_TEMPLATE, chat, ada, "# User\n- Name: Ada Lovelace\n- City: London"),
        tool(THREAD_TEMPLATE, chat, ada, "# User\n- Name: (chat) Ada"),  # into a thread with other metadata
        tool(RESOURCE_SCHEMA, mos, mo, {"name": "Mo", "langs": ["en", "de"], "prefs": {"tone": "dry"}}),
        tool(RESOURCE_SCHEMA, mos, mo, {"city": "Oslo", "prefs": {"units": "metric"}}),
        tool(THREAD_SCHEMA, bare, ada, {"name": "Bare", "prefs": {"tone": "warm"}}),
        step(
            "memory.updateWorkingMemory", config=RESOURCE_TEMPLATE, threadId=made, resourceId=lin, workingMemory="# L"
        ),
    ]
    resource_ids, thread_ids = (ada, grace, lin, mo), (chat, bare, mos, made)
    reads = [
        *(step("getResourceById", resourceId=r) for r in resource_ids),
        *(step("getThreadById", threadId=t) for t in thread_ids),
        *(get_wm(*where) for where in wm_reads),
    ]
    outcomes = run_mastra(src.store, writes + reads)
    for outcome in outcomes[: len(writes)]:
        assert outcome.ok, f"Mastra {outcome.op}: {outcome.error}"
    values = [o.value for o in outcomes[len(writes) :]]
    resources = dict(zip(resource_ids, values[:4], strict=True))
    threads = dict(zip(thread_ids, values[4:8], strict=True))
    assert all(record is not None for record in [*resources.values(), *threads.values()])
    # both scopes and both modes really are in what Mastra stored
    assert resources[ada]["workingMemory"] == "# User\n- Name: Ada Lovelace\n- City: London"
    assert threads[chat]["metadata"]["workingMemory"] == "# User\n- Name: (chat) Ada"
    assert threads[chat]["metadata"]["source"] == "ts"
    assert '"city"' in resources[mo]["workingMemory"] and '"tone"' in threads[bare]["metadata"]["workingMemory"]
    memories = [(*where, text) for where, text in zip(wm_reads, values[8:], strict=True)]
    assert all(isinstance(text, str) and text for *_, text in memories)
    return Written(resources, threads, memories)


def read_all(storage: MemoryStorage) -> tuple[list[Resource], list[Thread]]:
    """Every record of ``storage``, in id order (through workmem's iteration: nothing else is there)."""
    return list(storage.iter_resources(page_size=3)), list(storage.iter_threads(page_size=3))


def assert_holds_what_mastra_wrote(storage: MemoryStorage, written: Written) -> tuple[list[Resource], list[Thread]]:
    resources, threads = read_all(storage)
    assert [as_mastra_resource(r) for r in resources] == [
        mastra_view(written.resources[k]) for k in sorted(written.resources)
    ]
    assert [as_mastra_thread(t) for t in threads] == [mastra_view(written.threads[k]) for k in sorted(written.threads)]
    for config, thread_id, resource_id, text in written.memories:
        assert workmem_memory(storage, config).get_working_memory(thread_id=thread_id, resource_id=resource_id) == text
    return resources, threads


def cli_copy(src_url: str, dst_url: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "workmem", "copy", src_url, dst_url, "--verify", "--page-size", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


UNCHANGED_SOURCES = {"libsql", "postgres"}
"""Sources a copy changes nothing in. Upstash has no ordered keys: reading it keeps sorted sets of its ids."""

CASES = [("libsql", "postgres"), ("postgres", "libsql"), ("postgres", "upstash"), ("upstash", "libsql")]


@pytest.mark.parametrize(
    ("src_backend", "dst_backend"),
    [pytest.param(s, d, id=f"{s}-to-{d}", marks=[pytest.mark.backend(s), pytest.mark.backend(d)]) for s, d in CASES],
)
def test_what_mastra_wrote_copies_verified_and_mastra_reads_the_copy(src_backend: str, dst_backend: str) -> None:
    require_mastra()
    ids = Ids()
    with side(src_backend, ids.suffix) as src, side(dst_backend, ids.suffix) as dst:
        written = mastra_writes(src, ids)
        # first workmem contact with the source: a database only Mastra wrote copies as it is, and stays so
        summary = cli_copy(src.url, dst.url)
        if src_backend in UNCHANGED_SOURCES:
            assert workmem_objects(src.url) == [], "the copy created workmem's tables or triggers in its source"
        with workmem.connect(src.url, create=False) as source:
            resources, threads = assert_holds_what_mastra_wrote(source, written)
        assert f"resources: {len(resources)} inserted, {len(resources)} verified" in summary, summary
        assert f"threads: {len(threads)} inserted, {len(threads)} verified" in summary, summary
        assert "problems: none" in summary, summary
        with workmem.connect(dst.url) as target:
            assert read_all(target) == (resources, threads)
            assert_holds_what_mastra_wrote(target, written)
        again = cli_copy(src.url, dst.url)  # re-run: everything identical, skipped
        assert f"threads: {len(threads)} skipped, {len(threads)} verified" in again, again

        # the in-process memory backend: there and back (back into the destination: all identical)
        with fresh_url("memory") as memory_url:
            there = workmem.copy(src.url, memory_url, verify=True, page_size=2)
            assert there.ok, there.issues
            assert there.counts["thread", "inserted"] == there.counts["thread", "verified"] == len(threads)
            assert there.counts["resource", "inserted"] == len(resources)
            with workmem.connect(memory_url) as memory:
                assert read_all(memory) == (resources, threads)
                assert_holds_what_mastra_wrote(memory, written)
            back = workmem.copy(memory_url, dst.url, verify=True)
            assert back.ok, back.issues
            assert back.counts["thread", "skipped"] == len(threads) and back.counts["thread", "inserted"] == 0

        if src_backend in UNCHANGED_SOURCES:  # nor did reading it (create=False), re-running or verifying
            assert workmem_objects(src.url) == []

        # Mastra reads the copy: a resource, a thread holding thread-scope working memory, both scopes
        ada, chat, mo, mos = ids("ada"), ids("chat"), ids("mo"), ids("mo-chat")
        outcomes = run_mastra(
            dst.store,
            [
                step("getResourceById", resourceId=ada),
                step("getThreadById", threadId=chat),
                step("listThreads", filter={"resourceId": ada}),
                get_wm(THREAD_TEMPLATE, chat, ada),
                get_wm(RESOURCE_SCHEMA, mos, mo),
            ],
        )
        values = [o.value for o in outcomes]
        assert mastra_view(values[0]) == mastra_view(written.resources[ada])
        assert mastra_view(values[1]) == mastra_view(written.threads[chat])
        listed = sorted(mastra_view(t)["id"] for t in values[2]["threads"])
        assert listed == sorted(t.id for t in threads if t.resource_id == ada) and values[2]["total"] == 2
        texts = {(config["scope"], thread_id): text for config, thread_id, _, text in written.memories}
        assert values[3] == texts["thread", chat] == "# User\n- Name: (chat) Ada"
        assert values[4] == texts["resource", mos]
