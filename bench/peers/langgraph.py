"""LangGraph's long-term memory stores as a peer: the same operations written the way a LangGraph user writes them.

``postgres`` is ``langgraph.store.postgres.PostgresStore`` (package
``langgraph-checkpoint-postgres``), ``file`` is ``langgraph.store.sqlite.SqliteStore``
(``langgraph-checkpoint-sqlite``), each opened with its own ``from_conn_string``
helper, as the LangGraph docs show. A store holds JSON values under
``(namespace, key)``, so the records become items:

* a thread: namespace ``("threads", resource_id)``, key ``thread_id``, value ``{"title", "metadata"}``;
* a resource: namespace ``("resources",)``, key ``resource_id``, value ``{"workingMemory", "metadata"}``,
  the working memory kept as *text* (JSON text or markdown, as Mastra stores it), so a peer's
  bytes are the same as the others' and ``merge_field`` parses and re-serializes it.

LangGraph has no merge and no "create only": ``merge_field`` is a ``get``, a change and a
``put`` (two statements, not atomic), ``create_thread`` is a ``put`` (an upsert).
:attr:`LangGraphPeer.notes` lists these and what was read in the installed source
(the order of ``search``, the store's lock, the SQLite pragmas).

Namespace: on PostgreSQL, the store creates its tables in the connection's
``search_path``, so every connection gets ``options=-c search_path=wmbench_lg_<random>``
(a fresh schema, dropped with ``CASCADE`` at close; :meth:`LangGraphPeer.prepare` checks
the tables landed there). On the file, a fresh temporary directory, removed at close.
"""

from __future__ import annotations

import importlib
import json
import secrets
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.peers.base import (
    CONCURRENT_CLIENTS,
    LIST_THREADS,
    MERGES_PER_CLIENT,
    RESOURCES,
    THREADS_PER_RESOURCE,
    Measurement,
    Peer,
    Unavailable,
    in_threads,
    replacement,
    resource_index,
    thread_index,
)
from bench.timing import time_calls

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

__all__ = ["LIST_RESOURCE", "LangGraphPeer", "open_langgraph"]

RESOURCES_NS = ("resources",)
LIST_RESOURCE = "bench-list"
"""The resource with ``list_threads`` threads that ``list_newest_20`` lists."""
MEMORY = json.dumps({"name": "Ada", "plan": "pro", "prefs": {"tone": "brief"}})
"""Every fixture resource's working memory (the JSON text the workmem peer seeds)."""
SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
"""The ``synchronous`` levels the file peer accepts, as PRAGMA keywords (a PRAGMA takes no parameters)."""
_SEED_BATCH = 1_000
"""Items per seeding ``store.batch`` (a PostgreSQL statement holds 4 parameters per item, SQLite 5)."""
_PACKAGES = {"postgres": "langgraph-checkpoint-postgres", "file": "langgraph-checkpoint-sqlite"}
_MODULES = {"postgres": "langgraph.store.postgres", "file": "langgraph.store.sqlite"}


def threads_ns(resource: str) -> tuple[str, str]:
    return ("threads", resource)


def merge_field(store: BaseStore, resource: str, field: str, value: object) -> None:
    """What a LangGraph user writes for a merge: read the item, change one field, write the whole value back.

    Two calls, two transactions: a concurrent merge between them is overwritten
    (:meth:`LangGraphPeer.merges_kept` counts how many).
    """
    item = store.get(RESOURCES_NS, resource)
    current: dict[str, Any] = dict(item.value) if item is not None else {"workingMemory": None, "metadata": {}}
    memory = json.loads(current.get("workingMemory") or "{}")
    memory[field] = value
    current["workingMemory"] = json.dumps(memory)
    store.put(RESOURCES_NS, resource, current)


class LangGraphPeer(Peer):
    """LangGraph's ``PostgresStore`` (``postgres``) or ``SqliteStore`` (``file``) doing the nine measurements.

    ``synchronous`` (file only): ``"full"`` or ``"normal"`` is set with ``PRAGMA synchronous`` on
    every connection the peer opens; ``None`` keeps what LangGraph leaves (SQLite's default).
    The sizes default to :mod:`bench.peers.base`'s; tests pass small ones.
    """

    system = "langgraph"

    def __init__(
        self,
        backend: str,
        *,
        postgres_url: str = "",
        synchronous: str | None = None,
        resources: int = RESOURCES,
        threads_per_resource: int = THREADS_PER_RESOURCE,
        list_threads: int = LIST_THREADS,
    ) -> None:
        if backend not in _PACKAGES:
            raise ValueError(f"unknown backend {backend!r}; choose postgres or file")
        if synchronous is not None and (backend != "file" or synchronous not in SYNCHRONOUS):
            raise ValueError(f"synchronous={synchronous!r}: only the file backend takes one, 'full' or 'normal'")
        if backend == "postgres" and not postgres_url:
            raise Unavailable("no PostgreSQL server URL")
        self.backend = backend
        self.synchronous = synchronous
        self.resources = resources
        self.threads_per_resource = threads_per_resource
        self.list_threads = list_threads
        self._postgres_url = postgres_url
        self.namespace = ""
        """After :meth:`prepare`: the PostgreSQL schema or the file's temporary directory (both gone after close)."""
        self._stack = ExitStack()
        self._store: BaseStore | None = None
        self._open_client: Callable[[ExitStack], BaseStore] | None = None
        """Opens one more store on the same namespace (a ``merges_kept`` client's own)."""
        self.notes = [
            f"Python, {_PACKAGES[backend]} {metadata.version(_PACKAGES[backend])}; one store object for all "
            "timed calls, get_thread_16 = 16 OS threads sharing it",
            "a thread is the item ('threads', resourceId)/threadId = {title, metadata}; a resource is "
            "('resources',)/resourceId = {workingMemory, metadata}, the working memory held as text "
            "(JSON text, as Mastra stores it)",
            "get_thread needs the resource id: the namespace holds it, and a store has no lookup by key alone",
            "create_thread is store.put of a fresh key: an upsert; nothing checks that the id is new "
            "or that the resource exists",
            "replace_working_memory is store.put of the whole resource value (put replaces the value: "
            "the fixture's metadata is written back blind, with no read)",
            "merge_field: LangGraph has no merge; store.get, change one field, store.put: two calls in "
            "two transactions, not atomic (see merges_kept)",
            "list_newest_20 is store.search(('threads', rid), limit=20) without a query: ORDER BY "
            "updated_at DESC (installed source, both stores), no index on it, so each call sorts the "
            f"namespace's {list_threads:,} items; updated_at is the database's CURRENT_TIMESTAMP, not the caller's, "
            "so items seeded in one batch tie and their order is arbitrary",
            "merges_kept: 16 clients, each with its own store and connection (as 16 processes would), "
            "20 get/change/put merges each",
        ]
        if backend == "postgres":
            self.notes += [
                "PostgresStore.from_conn_string(pool_config min=max=16): a psycopg ConnectionPool, autocommit, "
                "prepare_threshold=0 (every statement prepared), each call one batch() in pipeline mode",
                "every batch() holds the store's own threading.Lock (installed source, "
                "PostgresStore._cursor): with 16 pooled connections, one statement is in flight at a time",
                "get is one statement: a CTE that also UPDATEs expires_at when a TTL is set (none is here)",
            ]

    # -- setup ----------------------------------------------------------------------

    def prepare(self) -> None:
        if self.backend == "postgres":
            self._open_client = self._prepare_postgres()
        else:
            self._open_client = self._prepare_file()
        self._seed()

    def _prepare_postgres(self) -> Callable[[ExitStack], BaseStore]:
        import psycopg
        from langgraph.store.postgres import PostgresStore
        from psycopg import sql
        from psycopg.conninfo import make_conninfo
        from psycopg_pool import ConnectionPool

        schema = f"wmbench_lg_{secrets.token_hex(5)}"
        with psycopg.connect(self._postgres_url, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        self._stack.callback(self._drop_schema, schema)
        self.namespace = schema
        conninfo = make_conninfo(self._postgres_url, options=f"-c search_path={schema}")
        pool = CONCURRENT_CLIENTS
        store = self._stack.enter_context(
            PostgresStore.from_conn_string(conninfo, pool_config={"min_size": pool, "max_size": pool})
        )
        store.setup()
        if isinstance(store.conn, ConnectionPool):
            store.conn.wait(timeout=30.0)  # all 16 connections open before anything is timed
        with psycopg.connect(self._postgres_url, autocommit=True) as admin:
            found = admin.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = 'store'",
                (schema,),
            ).fetchone()
        if not found or found[0] != 1:
            raise RuntimeError(f"PostgresStore.setup() did not create its tables in schema {schema}")
        self.notes.append(f"tables in a fresh schema (connection option -c search_path={schema}), verified")
        self._store = store

        def open_client(stack: ExitStack) -> BaseStore:
            return stack.enter_context(PostgresStore.from_conn_string(conninfo))

        return open_client

    def _drop_schema(self, schema: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self._postgres_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    def _prepare_file(self) -> Callable[[ExitStack], BaseStore]:
        from langgraph.store.sqlite import SqliteStore

        folder = Path(tempfile.mkdtemp(prefix="wmbench_lg_"))
        self._stack.callback(shutil.rmtree, folder)
        self.namespace = str(folder)
        path = str(folder / "store.db")
        level = SYNCHRONOUS.get(self.synchronous or "")

        def open_client(stack: ExitStack) -> SqliteStore:
            store = stack.enter_context(SqliteStore.from_conn_string(path))
            if level is not None:
                store.conn.execute(f"PRAGMA synchronous = {level}")
            store.setup()
            return store

        probe = open_client(self._stack)
        journal = probe.conn.execute("PRAGMA journal_mode").fetchone()[0]
        synchronous = probe.conn.execute("PRAGMA synchronous").fetchone()[0]
        chosen = f"synchronous={self.synchronous} set by the peer" if level else "no PRAGMA set (LangGraph sets none)"
        self.notes += [
            f"SqliteStore.from_conn_string: one stdlib sqlite3 connection (SQLite {sqlite3.sqlite_version}, "
            "check_same_thread=False, autocommit) shared by all threads under the store's own lock; every "
            "batch() is BEGIN .. COMMIT",
            f"{chosen}: journal_mode={journal}, synchronous={synchronous} (0 off, 1 normal, 2 full) read back "
            "on the connection (workmem and Mastra use WAL)",
            "updated_at has whole seconds (SQLite's CURRENT_TIMESTAMP): a thread written within the same "
            "second as others ties with them, so list_newest_20 may leave out one created a moment ago",
        ]
        self._store = probe
        return open_client

    def _seed(self) -> None:
        from langgraph.store.base import PutOp

        store = self._require()
        ops = [
            PutOp(RESOURCES_NS, self.resource_id(r), {"workingMemory": MEMORY, "metadata": {}})
            for r in range(self.resources)
        ]
        ops.append(PutOp(RESOURCES_NS, LIST_RESOURCE, {"workingMemory": MEMORY, "metadata": {}}))
        ops += [
            PutOp(
                threads_ns(self.resource_id(r)),
                f"bench-t{r}-{t}",
                {"title": f"thread {t}", "metadata": {"topic": "bench"}},
            )
            for r in range(self.resources)
            for t in range(self.threads_per_resource)
        ]
        ops += [
            PutOp(threads_ns(LIST_RESOURCE), f"bench-l{n:05d}", {"title": f"listed {n}", "metadata": {}})
            for n in range(self.list_threads)
        ]
        for begin in range(0, len(ops), _SEED_BATCH):
            store.batch(ops[begin : begin + _SEED_BATCH])

    def _require(self) -> BaseStore:
        if self._store is None:
            raise RuntimeError("prepare() first")
        return self._store

    # -- ids --------------------------------------------------------------------------

    def resource_id(self, i: int) -> str:
        return f"bench-r{resource_index(i, self.resources)}"

    def thread_key(self, i: int) -> tuple[tuple[str, str], str]:
        """Call ``i``'s fixture thread as ``(namespace, key)``, spread over every thread of every resource."""
        r, t = resource_index(i, self.resources), thread_index(i, self.resources, self.threads_per_resource)
        return threads_ns(self.resource_id(r)), f"bench-t{r}-{t}"

    # -- measurements ----------------------------------------------------------------

    def _call(self, operation: str) -> Callable[[int], object]:
        store = self._require()
        if operation == "get_thread":
            return lambda i: store.get(*self.thread_key(i))
        if operation == "get_resource":
            return lambda i: store.get(RESOURCES_NS, self.resource_id(i))
        if operation == "create_thread":
            return lambda i: store.put(
                threads_ns(self.resource_id(i)), f"bench-new-{i}", {"title": "new", "metadata": {}}
            )
        if operation == "replace_working_memory":
            return lambda i: store.put(
                RESOURCES_NS, self.resource_id(i), {"workingMemory": replacement(i), "metadata": {}}
            )
        if operation == "merge_field":
            return lambda i: merge_field(store, self.resource_id(i), f"f{i % 10}", i)
        if operation == "list_newest_20":
            return lambda i: store.search(threads_ns(LIST_RESOURCE), limit=20)
        raise ValueError(f"unknown operation {operation!r}")

    def measure(self, operation: str, start: int, count: int) -> Measurement:
        if operation in ("get_thread_16", "get_thread_16_threads"):  # 16 OS threads either way
            return self._concurrent_reads(start, count)
        call = self._call(operation)
        began = time.perf_counter_ns()
        latencies = time_calls(call, start, count)
        return Measurement(latencies, (time.perf_counter_ns() - began) / 1e9)

    def _concurrent_reads(self, start: int, count: int) -> Measurement:
        get = self._call("get_thread")
        per_client: list[list[float]] = [[] for _ in range(CONCURRENT_CLIENTS)]

        clock = time.perf_counter_ns

        def client(c: int) -> None:
            out = per_client[c]
            for i in range(start + c, start + count, CONCURRENT_CLIENTS):
                before = clock()
                get(i)
                out.append((clock() - before) / 1e9)

        seconds = in_threads(CONCURRENT_CLIENTS, client)
        return Measurement([x for out in per_client for x in out], seconds)

    def merges_kept(self) -> int:
        store, open_client = self._require(), self._open_client
        assert open_client is not None
        target = f"bench-race-{time.monotonic_ns()}"
        store.put(RESOURCES_NS, target, {"workingMemory": "{}", "metadata": {}})
        with ExitStack() as clients:
            own = [open_client(clients) for _ in range(CONCURRENT_CLIENTS)]

            def client(c: int) -> None:
                for k in range(MERGES_PER_CLIENT):
                    merge_field(own[c], target, f"c{c}k{k}", k)

            in_threads(CONCURRENT_CLIENTS, client)
        item = store.get(RESOURCES_NS, target)
        return len(json.loads(item.value["workingMemory"])) if item is not None else 0

    def close(self) -> None:
        self._store = None
        self._stack.close()


def open_langgraph(backend: str, *, postgres_url: str, synchronous: str | None = None) -> LangGraphPeer:
    """The LangGraph peer on ``backend``, or :class:`Unavailable` when its store package is not installed."""
    try:
        importlib.import_module(_MODULES.get(backend, "langgraph.store"))
    except ImportError as exc:
        package = _PACKAGES.get(backend, "langgraph")
        raise Unavailable(f"{package} is not installed (pip install 'workmem[bench]'): {exc}") from None
    return LangGraphPeer(backend, postgres_url=postgres_url, synchronous=synchronous)
