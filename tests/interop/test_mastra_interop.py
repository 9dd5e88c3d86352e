"""The published Mastra packages and workmem on one database, both ways, field by field.

Mastra writes (its storage adapter's threads and resources, its ``Memory``'s
working-memory updates through the agent tool, in both scopes, template and
schema mode, ``Memory.createThread``, deletes) and workmem reads exactly that,
then changes it and Mastra reads the change; workmem writes and Mastra reads
exactly that (threads, resources, lists, ``Memory.getWorkingMemory``), then
changes it (thread-scope working memory into a thread with other metadata, an
update of a thread holding workmem's working memory, a delete) and workmem
reads the change. Each
runs once on tables Mastra created and once on tables workmem created, on
PostgreSQL (a fresh database), PostgreSQL with ``mastra_threads.metadata`` as
``TEXT``, libSQL (a temporary file, and a real ``sqld`` server over HTTP) and Upstash (``@mastra/upstash`` talking
to workmem's REST bridge in front of the test Redis); MongoDB and Oracle where
a server is found (``tests/support/servers.py``).

Mastra runs in a Node process per batch of steps (``tests/support/mastra_node.py``); the
tests skip loudly without Node or the packages, and fail instead when
``WORKMEM_REQUIRE_BACKENDS`` names ``mastra``.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import pytest
from mastra_node import Step, require_mastra, run_mastra, step

import workmem
from workmem import Memory, Resource, Thread

pytestmark = pytest.mark.backend("mastra")

HISTORY_BACKENDS = ("libsql", "sqld", "postgres", "postgres-text-metadata", "oracle")
"""The targets whose adapters record working memory's history (the SQL ones)."""
T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
T1 = datetime(2025, 1, 3, 0, 0, 0, 1000, tzinfo=UTC)
T2 = datetime(2025, 2, 1, 10, 0, 0, tzinfo=UTC)
T3 = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)
TEMPLATE = "# User\n- Name:\n- City:\n"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "city": {"type": "string"},
        "langs": {"type": "array", "items": {"type": "string"}},
        "prefs": {"type": "object", "properties": {"tone": {"type": "string"}, "units": {"type": "string"}}},
    },
}


# -- where: one database, as workmem and as Mastra open it ----------------------------------------


@dataclass
class Target:
    """One fresh namespace: the workmem URL and the Mastra store spec (``interop/driver.mjs``) of the same data."""

    url: str
    store: dict[str, Any]
    backend: str
    tables_by: str
    cleanup: list[Callable[[], None]] = field(default_factory=list)


@contextlib.contextmanager
def _postgres(text_metadata: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    import psycopg
    from servers import server_url

    server = server_url("postgres")
    name = f"wm_interop_{secrets.token_hex(6)}"
    parts = urlsplit(server)
    url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        if text_metadata:  # a thread table whose metadata is text, as a database created from table constants
            # declaring it text has it (@mastra/core 1.71.0 declares jsonb; @mastra/pg then keeps the text table)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    'CREATE TABLE mastra_threads (id text NOT NULL PRIMARY KEY, "resourceId" text NOT NULL, '
                    'title text NOT NULL, metadata text, "createdAt" timestamp NOT NULL, '
                    '"updatedAt" timestamp NOT NULL, "createdAtZ" timestamptz DEFAULT now(), '
                    '"updatedAtZ" timestamptz DEFAULT now())'
                )
        yield url, {"kind": "pg", "connectionString": url}
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _libsql() -> Iterator[tuple[str, dict[str, Any]]]:
    with tempfile.TemporaryDirectory(prefix="wm_interop_") as directory:
        path = Path(directory) / "agent.db"
        yield f"file:{path}", {"kind": "libsql", "url": f"file:{path}"}


@contextlib.contextmanager
def _sqld() -> Iterator[tuple[str, dict[str, Any]]]:
    # A server of its own: @mastra/libsql's concurrent init deadlocked on a sqld shared with other tests.
    from sqld import Sqld

    server = Sqld()
    try:
        yield server.url, {"kind": "libsql", "url": server.http_url}
    finally:
        server.close()


@contextlib.contextmanager
def _upstash(suffix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    from upstash_fixtures import mastra_keyspace

    with mastra_keyspace(suffix) as opened:
        yield opened


@contextlib.contextmanager
def _mongodb() -> Iterator[tuple[str, dict[str, Any]]]:
    from backends import fresh_mongodb_url

    with fresh_mongodb_url() as url:
        database = urlsplit(url).path.lstrip("/")
        parts = urlsplit(url)
        server = urlunsplit((parts.scheme, parts.netloc, "/", parts.query, ""))
        yield url, {"kind": "mongodb", "url": server, "dbName": database}


@contextlib.contextmanager
def _oracle(suffix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    # @mastra/oracledb uses its own table names: the test's rows (ids carry the suffix) are deleted afterwards.
    from servers import server_url

    url = server_url("oracle")
    parts = urlsplit(url)
    service = parse_qs(parts.query).get("service_name", [""])[0]
    store = {
        "kind": "oracle",
        "user": parts.username,
        "password": parts.password,
        "connectString": f"{parts.hostname}:{parts.port or 1521}/{service}",
    }
    try:
        yield url, store
    finally:
        import oracledb

        with oracledb.connect(user=parts.username, password=parts.password, dsn=store["connectString"]) as conn:
            for table in ("mastra_threads", "mastra_resources"):
                conn.cursor().execute(f"DELETE FROM {table} WHERE id LIKE :s", s=f"%{suffix}%")
            conn.commit()


TARGETS = [
    ("postgres", "mastra"),
    ("postgres", "workmem"),
    ("postgres-text-metadata", "mastra"),
    ("postgres-text-metadata", "workmem"),
    ("libsql", "mastra"),
    ("libsql", "workmem"),
    ("sqld", "mastra"),
    ("sqld", "workmem"),
    ("upstash", "mastra"),
    ("mongodb", "mastra"),
    ("mongodb", "workmem"),
    ("oracle", "mastra"),
    ("oracle", "workmem"),
]
_SERVER_MARK = {"postgres-text-metadata": "postgres", "upstash": "upstash"}


@dataclass
class Ids:
    """This test's ids, each ending in one random suffix (the Upstash and Oracle cleanup finds them by it)."""

    suffix: str = field(default_factory=lambda: secrets.token_hex(5))

    def __call__(self, name: str) -> str:
        return f"{name}-{self.suffix}"


@pytest.fixture
def ids() -> Ids:
    return Ids()


@pytest.fixture(
    params=[
        pytest.param(
            (backend, tables_by),
            id=f"{backend}-tables-by-{tables_by}",
            marks=pytest.mark.backend(_SERVER_MARK.get(backend, backend)),
        )
        for backend, tables_by in TARGETS
    ]
)
def target(request: pytest.FixtureRequest, ids: Ids) -> Iterator[Target]:
    backend, tables_by = request.param
    require_mastra()
    opened: contextlib.AbstractContextManager[tuple[str, dict[str, Any]]]
    if backend.startswith("postgres"):
        opened = _postgres(text_metadata=backend == "postgres-text-metadata")
    elif backend == "libsql":
        opened = _libsql()
    elif backend == "sqld":
        opened = _sqld()
    elif backend == "upstash":
        opened = _upstash(ids.suffix)
    elif backend == "mongodb":
        opened = _mongodb()
    else:
        opened = _oracle(ids.suffix)
    with opened as (url, store):
        if tables_by == "workmem":
            workmem.connect(url).close()  # workmem creates the tables; Mastra's init then finds them
        else:
            run_mastra(store, [])  # Mastra's init creates the tables before workmem first connects
        yield Target(url, store, backend, tables_by)
        if backend == "postgres-text-metadata":  # and every run of Mastra's init left the column text
            import psycopg

            with psycopg.connect(url) as conn:
                column = "SELECT data_type FROM information_schema.columns WHERE table_name = %s AND column_name = %s"
                assert conn.execute(column, ("mastra_threads", "metadata")).fetchone() == ("text",)


# -- records as Mastra hands them over ----------------------------------------------------------------


def as_mastra_thread(thread: Thread) -> dict[str, Any]:
    return {
        "id": thread.id,
        "resourceId": thread.resource_id,
        "title": thread.title,
        "metadata": thread.metadata,
        "createdAt": thread.created_at,
        "updatedAt": thread.updated_at,
    }


def as_mastra_resource(resource: Resource) -> dict[str, Any]:
    return {
        "id": resource.id,
        "workingMemory": resource.working_memory,
        "metadata": resource.metadata,
        "createdAt": resource.created_at,
        "updatedAt": resource.updated_at,
    }


def mastra_view(record: dict[str, Any]) -> dict[str, Any]:
    """A record from Mastra with the fields workmem keeps (Mastra adds none of its own to these)."""
    keys = ("id", "resourceId", "title") if "resourceId" in record else ("id", "workingMemory")
    return {
        **{key: record[key] for key in keys},
        "metadata": record.get("metadata"),
        "createdAt": record["createdAt"],
        "updatedAt": record["updatedAt"],
    }


def tool(config: dict[str, Any], thread_id: str, resource_id: str, memory: Any) -> Step:
    """Mastra's ``updateWorkingMemory`` tool run by an agent on ``thread_id`` of ``resource_id``."""
    return step("memory.tool", config=config, threadId=thread_id, resourceId=resource_id, memory=memory)


def get_wm(config: dict[str, Any], thread_id: str, resource_id: str) -> Step:
    return step("memory.getWorkingMemory", config=config, threadId=thread_id, resourceId=resource_id)


RESOURCE_TEMPLATE = {"scope": "resource", "template": TEMPLATE}
THREAD_TEMPLATE = {"scope": "thread", "template": TEMPLATE}
RESOURCE_SCHEMA = {"scope": "resource", "schema": SCHEMA}
THREAD_SCHEMA = {"scope": "thread", "schema": SCHEMA}


def workmem_memory(storage: workmem.MemoryStorage, config: dict[str, Any]) -> Memory:
    if "schema" in config:
        return Memory(storage, scope=config["scope"], schema=config["schema"])
    return Memory(storage, scope=config["scope"], template=config["template"])


# -- Mastra writes, workmem reads ----------------------------------------------------------------------


def test_mastra_writes_workmem_reads_exactly(target: Target, ids: Ids) -> None:
    ada, grace, lin, mo = ids("ada"), ids("grace"), ids("lin"), ids("mo")
    chat, empty, bare, mos = ids("chat"), ids("empty"), ids("bare"), ids("mo-chat")
    made, kept, gone = ids("made"), ids("kept"), ids("gone")
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
        step(
            "saveThread",
            thread={"id": empty, "resourceId": ada, "title": "", "metadata": {}, "createdAt": T2, "updatedAt": T2},
        ),
        step(
            "saveThread",
            thread={"id": bare, "resourceId": ada, "title": "No metadata", "createdAt": T3, "updatedAt": T3},
        ),
        step("updateThread", id=chat, title="Renamed", metadata={"extra": True}),
        *(
            step("saveThread", thread={"id": t, "resourceId": grace, "title": t, "createdAt": T0, "updatedAt": T0})
            for t in (kept, gone)
        ),
        step("deleteThread", threadId=gone),
        step(
            "memory.createThread",
            config=RESOURCE_TEMPLATE,
            threadId=made,
            resourceId=lin,
            title="Made by Memory",
            metadata={"via": "Memory", "n": [1]},
        ),
        step("updateResource", resourceId=grace, workingMemory="plain text", metadata={"a": 1}),
        step("updateResource", resourceId=grace, metadata={"b": {"c": 2}}),
        # Memory through its agent tool: template mode replaces, schema mode merges (in Mastra's code)
        tool(RESOURCE_TEMPLATE, chat, ada, "# User\n- Name: Ada Lovelace\n- City: London"),
        tool(THREAD_TEMPLATE, empty, ada, "# User\n- Name: (thread) Ada"),
        # thread scope into a thread whose metadata has other keys: Mastra merges workingMemory in
        tool(THREAD_TEMPLATE, chat, ada, "# User\n- Name: (chat) Ada"),
        tool(RESOURCE_SCHEMA, mos, mo, {"name": "Mo", "langs": ["en", "de"], "prefs": {"tone": "dry"}}),
        tool(RESOURCE_SCHEMA, mos, mo, {"city": "Oslo", "prefs": {"units": "metric"}, "name": None}),
        tool(THREAD_SCHEMA, bare, ada, {"name": "Bare", "prefs": {"tone": "warm"}}),
        tool(THREAD_SCHEMA, bare, ada, {"langs": ["fr"]}),
        step(
            "memory.updateWorkingMemory", config=RESOURCE_TEMPLATE, threadId=chat, resourceId=lin, workingMemory="# Lin"
        ),
    ]
    reads = [
        *(step("getResourceById", resourceId=r) for r in (ada, grace, mo, lin)),
        *(step("getThreadById", threadId=t) for t in (chat, empty, bare, mos, made, kept)),
        step("listThreads", filter={"resourceId": ada}),
        step("listThreads", filter={"resourceId": ada}, perPage=2, page=1),
        step("listThreads", filter={"resourceId": ada}, orderBy={"field": "updatedAt", "direction": "ASC"}),
        step("listThreads", filter={"resourceId": grace}),
        get_wm(RESOURCE_TEMPLATE, chat, ada),
        get_wm(THREAD_TEMPLATE, empty, ada),
        get_wm(RESOURCE_SCHEMA, mos, mo),
        get_wm(THREAD_SCHEMA, bare, ada),
        get_wm(THREAD_TEMPLATE, chat, ada),
        step("getThreadById", threadId=gone),
    ]
    outcomes = run_mastra(target.store, writes + reads)
    for outcome in outcomes[: len(writes)]:
        assert outcome.ok, f"Mastra {outcome.op}: {outcome.error}"
    values = [o.value for o in outcomes[len(writes) :]]
    resources, threads, lists, memories = values[:4], values[4:10], values[10:14], values[14:19]
    assert values[19] is None, "Mastra deleted it"
    assert all(r is not None for r in resources + threads)
    # what Mastra says it stored, as Mastra reads it back
    assert resources[0]["metadata"] == {"plan": "pro", "n": 1.5, "tags": ["a", "b"], "nested": {"k": None}, "é": "ü"}
    assert resources[0]["workingMemory"] == "# User\n- Name: Ada Lovelace\n- City: London"
    assert resources[1]["metadata"] == {"a": 1, "b": {"c": 2}} and resources[1]["workingMemory"] == "plain text"
    # (Mastra's tool drops a null for an optional field before merging: "name" stays)
    mo_memory = {"name": "Mo", "langs": ["en", "de"], "prefs": {"tone": "dry", "units": "metric"}, "city": "Oslo"}
    assert json.loads(memories[2]) == mo_memory
    assert json.loads(memories[3]) == {"name": "Bare", "prefs": {"tone": "warm"}, "langs": ["fr"]}
    assert threads[0]["metadata"] == {
        "source": "ts",
        "deep": {"k": [1, 2.5, "x", None, True]},
        "extra": True,
        "workingMemory": "# User\n- Name: (chat) Ada",
    }
    assert (threads[4]["title"], threads[4]["resourceId"], threads[4]["metadata"]) == (
        "Made by Memory",
        lin,
        {"via": "Memory", "n": [1]},
    )
    assert [t["id"] for t in lists[3]["threads"]] == [kept] and lists[3]["total"] == 1

    with workmem.connect(target.url) as storage:
        for mastra in resources:
            stored = storage.get_resource(mastra["id"])
            assert stored is not None
            assert as_mastra_resource(stored) == mastra_view(mastra)
        for mastra in threads:
            stored_thread = storage.get_thread(mastra["id"])
            assert stored_thread is not None
            assert as_mastra_thread(stored_thread) == mastra_view(mastra)
        if target.backend == "upstash":
            # Iteration needs no reindex: the first page finds what @mastra/upstash wrote (no workmem id set).
            mine = sorted(t["id"] for t in threads)
            assert [t.id for t in storage.iter_threads(page_size=2) if t.id.endswith(ids.suffix)] == mine
            iterated = [r for r in storage.iter_resources(page_size=2) if r.id.endswith(ids.suffix)]
            assert [as_mastra_resource(r) for r in iterated] == [
                mastra_view(r) for r in sorted(resources, key=lambda r: str(r["id"]))
            ]
            # @mastra/upstash keeps no thread index: workmem's is rebuilt, as documented
            assert storage.reindex().threads >= 6  # type: ignore[attr-defined]
        assert storage.get_thread(gone) is None
        graces = storage.list_threads(grace)
        assert [as_mastra_thread(t) for t in graces.threads] == [mastra_view(t) for t in lists[3]["threads"]]
        assert graces.total == 1
        everything = storage.list_threads(ada)
        assert [as_mastra_thread(t) for t in everything.threads] == [mastra_view(t) for t in lists[0]["threads"]]
        assert (everything.total, everything.has_more) == (lists[0]["total"], lists[0]["hasMore"]) == (3, False)
        second = storage.list_threads(ada, page=1, per_page=2)
        assert [as_mastra_thread(t) for t in second.threads] == [mastra_view(t) for t in lists[1]["threads"]]
        assert (second.total, second.has_more) == (lists[1]["total"], lists[1]["hasMore"])
        oldest = storage.list_threads(ada, order_by="updated_at", direction="asc")
        assert [t.id for t in oldest.threads] == [t["id"] for t in lists[2]["threads"]]
        configs = [(RESOURCE_TEMPLATE, chat, ada), (THREAD_TEMPLATE, empty, ada), (RESOURCE_SCHEMA, mos, mo)]
        configs += [(THREAD_SCHEMA, bare, ada), (THREAD_TEMPLATE, chat, ada)]
        for (config, thread_id, resource_id), text in zip(configs, memories, strict=True):
            memory = workmem_memory(storage, config)
            assert memory.get_working_memory(thread_id=thread_id, resource_id=resource_id) == text
            if "schema" in config:
                assert memory.get_working_memory_data(thread_id=thread_id, resource_id=resource_id) == json.loads(text)

        # workmem's own writes on what Mastra wrote, then Mastra reads them back exactly
        changed_resource = storage.update_resource(ada, metadata={"plan": "team", "seats": 3})
        assert changed_resource.metadata == {**resources[0]["metadata"], "plan": "team", "seats": 3}
        changed_thread = storage.update_thread(chat, title="Again", metadata={"deep": None, "more": [1]})
        assert changed_thread.metadata == {**threads[0]["metadata"], "deep": None, "more": [1]}
        workmem_memory(storage, RESOURCE_SCHEMA).merge_working_memory({"city": "Bergen"}, resource_id=mo)
        workmem_memory(storage, THREAD_SCHEMA).merge_working_memory({"prefs": {"tone": None}}, thread_id=bare)
        workmem_memory(storage, THREAD_TEMPLATE).update_working_memory("# User\n- Name: Ada (py)", thread_id=empty)
        assert storage.delete_thread(kept)
        after = [storage.get_resource(ada), storage.get_resource(mo)]
        after_threads = [storage.get_thread(t) for t in (chat, empty, bare)]

    back = run_mastra(
        target.store,
        [
            *(step("getResourceById", resourceId=r) for r in (ada, mo)),
            *(step("getThreadById", threadId=t) for t in (chat, empty, bare)),
            get_wm(RESOURCE_SCHEMA, mos, mo),
            get_wm(THREAD_SCHEMA, bare, ada),
            get_wm(THREAD_TEMPLATE, empty, ada),
            get_wm(THREAD_TEMPLATE, chat, ada),
            step("getThreadById", threadId=kept),
            step("listThreads", filter={"resourceId": grace}),
        ],
    )
    for record, outcome in zip(after, back[:2], strict=True):
        assert record is not None and mastra_view(outcome.value) == as_mastra_resource(record)
    for thread, outcome in zip(after_threads, back[2:5], strict=True):
        assert thread is not None and mastra_view(outcome.value) == as_mastra_thread(thread)
    assert json.loads(back[5].value) == {**mo_memory, "city": "Bergen"}
    assert json.loads(back[6].value) == {"name": "Bare", "prefs": {}, "langs": ["fr"]}
    assert back[7].value == "# User\n- Name: Ada (py)"
    assert back[8].value == "# User\n- Name: (chat) Ada", "workmem's update_thread kept Mastra's working memory"
    assert back[9].value is None and (back[10].value["threads"], back[10].value["total"]) == ([], 0)


# -- workmem writes, Mastra reads ----------------------------------------------------------------------


def test_workmem_writes_mastra_reads_exactly(target: Target, ids: Ids) -> None:
    sam, kim = ids("sam"), ids("kim")
    a, b, c, d = ids("a"), ids("b"), ids("c"), ids("d")
    history = target.backend in HISTORY_BACKENDS  # versions recorded beside Mastra's rows: Mastra reads the same
    with workmem.connect(target.url, history=history) as storage:
        storage.save_resource(Resource(sam, "# User\n- Name: Sam", {"plan": "free", "x": [1, {"y": None}]}, T0, T1))
        storage.save_thread(Thread(a, sam, "Trip", {"origin": "py", "n": -0.5}, T0, T0))
        storage.save_thread(Thread(b, sam, "", None, T1, T1))
        storage.save_thread(Thread(c, sam, "Third ✓", {}, T2, T2))
        storage.update_thread(a, title="Trip planning", metadata={"stage": 2})
        storage.update_resource(sam, metadata={"plan": "pro"})
        storage.update_resource(kim, working_memory="kim's notes", metadata={"k": True})
        workmem_memory(storage, RESOURCE_TEMPLATE).update_working_memory(
            "# User\n- Name: Sam\n- City: Rome", resource_id=sam
        )
        workmem_memory(storage, THREAD_TEMPLATE).update_working_memory("# User\n- Name: (thread) Sam", thread_id=b)
        schema_memory = workmem_memory(storage, RESOURCE_SCHEMA)
        schema_memory.create_thread(d, resource_id=kim, title="Kim's", metadata={"via": "Memory"})
        storage.set_working_memory("", scope="resource", resource_id=kim)  # blank: a schema merge starts from {}
        schema_memory.merge_working_memory({"name": "Kim", "prefs": {"tone": "brief"}}, resource_id=kim)
        schema_memory.merge_working_memory({"langs": ["ko"], "prefs": {"units": "si"}}, thread_id=d)
        thread_schema = workmem_memory(storage, THREAD_SCHEMA)
        thread_schema.merge_working_memory({"city": "Seoul"}, thread_id=c)
        thread_schema.merge_working_memory({"name": "C", "city": None}, thread_id=c)
        if history:
            versions = storage.working_memory_history(scope="resource", resource_id=kim).versions
            kim_memory = storage.get_working_memory(scope="resource", resource_id=kim)
            assert [v.kind for v in versions] == ["merge", "merge", "set", "set"] and versions[0].content == kim_memory
        resources = [storage.get_resource(sam), storage.get_resource(kim)]
        threads = [storage.get_thread(t) for t in (a, b, c, d)]
        listed = storage.list_threads(sam)
        page = storage.list_threads(sam, page=1, per_page=2)
        by_update = storage.list_threads(sam, order_by="updated_at", direction="asc")
        texts = [
            workmem_memory(storage, RESOURCE_TEMPLATE).get_working_memory(thread_id=a, resource_id=sam),
            workmem_memory(storage, THREAD_TEMPLATE).get_working_memory(thread_id=b, resource_id=sam),
            schema_memory.get_working_memory(thread_id=d, resource_id=kim),
            thread_schema.get_working_memory(thread_id=c, resource_id=sam),
        ]
    assert json.loads(texts[2] or "") == {"name": "Kim", "prefs": {"tone": "brief", "units": "si"}, "langs": ["ko"]}
    assert json.loads(texts[3] or "") == {"name": "C"}

    outcomes = run_mastra(
        target.store,
        [
            *(step("getResourceById", resourceId=r) for r in (sam, kim)),
            *(step("getThreadById", threadId=t) for t in (a, b, c, d)),
            step("listThreads", filter={"resourceId": sam}),
            step("listThreads", filter={"resourceId": sam}, perPage=2, page=1),
            step("listThreads", filter={"resourceId": sam}, orderBy={"field": "updatedAt", "direction": "ASC"}),
            get_wm(RESOURCE_TEMPLATE, a, sam),
            get_wm(THREAD_TEMPLATE, b, sam),
            get_wm(RESOURCE_SCHEMA, d, kim),
            get_wm(THREAD_SCHEMA, c, sam),
            # and Mastra's own tool continues from what workmem stored
            tool(RESOURCE_SCHEMA, d, kim, {"city": "Busan"}),
            get_wm(RESOURCE_SCHEMA, d, kim),
        ],
    )
    values = [o.value for o in outcomes]
    for resource, mastra in zip(resources, values[:2], strict=True):
        assert resource is not None and mastra_view(mastra) == as_mastra_resource(resource)
    for thread, mastra in zip(threads, values[2:6], strict=True):
        assert thread is not None and mastra_view(mastra) == as_mastra_thread(thread)
    for ours, theirs in zip((listed, page), values[6:8], strict=True):
        assert [mastra_view(t) for t in theirs["threads"]] == [as_mastra_thread(t) for t in ours.threads]
        assert (theirs["total"], theirs["hasMore"]) == (ours.total, ours.has_more)
    assert [t["id"] for t in values[8]["threads"]] == [t.id for t in by_update.threads]
    assert values[9:13] == texts
    assert json.loads(values[14]) == {
        "name": "Kim",
        "prefs": {"tone": "brief", "units": "si"},
        "langs": ["ko"],
        "city": "Busan",
    }

    # Mastra changes what workmem wrote; workmem reads exactly that
    changes = run_mastra(
        target.store,
        [
            tool(THREAD_TEMPLATE, a, sam, "# User\n- Name: (a) Sam"),  # into a thread with other metadata
            step("updateThread", id=b, title="B renamed", metadata={"ts": 1}),  # b holds workmem's working memory
            step("deleteThread", threadId=c),
            *(step("getThreadById", threadId=t) for t in (a, b, c)),
            step("listThreads", filter={"resourceId": sam}),
            get_wm(THREAD_TEMPLATE, b, sam),
        ],
    )
    changed = [o.value for o in changes]
    assert changed[3]["metadata"] == {"origin": "py", "n": -0.5, "stage": 2, "workingMemory": "# User\n- Name: (a) Sam"}
    assert (changed[4]["title"], changed[4]["metadata"]) == (
        "B renamed",
        {"workingMemory": "# User\n- Name: (thread) Sam", "ts": 1},
    )
    assert changed[5] is None and changed[7] == "# User\n- Name: (thread) Sam"
    with workmem.connect(target.url) as storage:
        if target.backend == "upstash":  # after @mastra/upstash deleted a thread: workmem's index rebuilt
            assert storage.reindex().removed == 2  # type: ignore[attr-defined]  # its two index entries
        for thread_id, mastra in zip((a, b), changed[3:5], strict=True):
            stored_thread = storage.get_thread(thread_id)
            assert stored_thread is not None and as_mastra_thread(stored_thread) == mastra_view(mastra)
        assert storage.get_thread(c) is None
        listed = storage.list_threads(sam)
        assert [as_mastra_thread(t) for t in listed.threads] == [mastra_view(t) for t in changed[6]["threads"]]
        assert listed.total == changed[6]["total"] == 2
        thread_template = workmem_memory(storage, THREAD_TEMPLATE)
        assert thread_template.get_working_memory(thread_id=a, resource_id=sam) == "# User\n- Name: (a) Sam"
        assert thread_template.get_working_memory(thread_id=b, resource_id=sam) == changed[7]
