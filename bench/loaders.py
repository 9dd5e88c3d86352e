"""Bulk loading of threads and resources, in exactly the rows/documents the adapter itself writes.

Scaling runs need 100 000 threads in seconds, which the adapter's own
``save_thread`` (one round trip each) cannot do over a network. The raw paths:

* PostgreSQL: ``COPY`` of every column the adapter writes (``createdAt`` as
  naive UTC, ``createdAtZ`` as timestamptz, metadata as jsonb);
* libSQL: one transaction of ``executemany`` with ``jsonb(?)`` metadata and
  ISO ``...Z`` text timestamps;
* Upstash: pipelined ``SET`` of the adapter's own document text
  (:func:`~workmem.adapters.upstash.documents.encode_thread`) plus its two
  sorted-set index entries (``ZADD``), 1 500 commands per request;
* MongoDB: ``insert_many`` of the adapter's document fields.

:meth:`Loader.verify` proves the raw path right before it is used: it writes
one record through the adapter and the same record (another id) through the
raw path, and compares every stored column/field but the id. A backend whose
raw path does not match -- or has none (Oracle, memory) -- falls back to the
adapter's own ``save_*`` in a loop.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any

from bench.backends import Namespace
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage
from workmem.timestamps import to_iso
from workmem.validation import dump_json

__all__ = ["Loader", "RawMismatch", "loader_for"]

_BATCH = 500


class RawMismatch(Exception):
    """The raw bulk path stores something other than the adapter does."""


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else dump_json(value)


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Loader:
    """Bulk writes through the adapter (the fallback every raw loader is checked against)."""

    name = "adapter save_thread/save_resource loop"

    def __init__(self, ns: Namespace, storage: MemoryStorage) -> None:
        self.ns = ns
        self.storage = storage

    def threads(self, threads: Sequence[Thread]) -> None:
        for thread in threads:
            self.storage.save_thread(thread)

    def resources(self, resources: Sequence[Resource]) -> None:
        for resource in resources:
            self.storage.save_resource(resource)

    def close(self) -> None:
        """Release raw connections."""

    # -- verification --------------------------------------------------------------

    def raw_thread(self, thread_id: str) -> Any:
        """Every stored column/field of the thread but its id (raw driver read)."""
        return None

    def raw_resource(self, resource_id: str) -> Any:
        return None

    def verify(self) -> None:
        """Raise :class:`RawMismatch` unless the raw path stores what the adapter stores."""
        if type(self).threads is Loader.threads:
            return
        token = "wmbench-verify"
        thread = Thread(f"{token}-a", f"{token}-owner", "title ü", {"topic": "x", "n": 1.5, "deep": {"a": [1, None]}})
        resource = Resource(f"{token}-a", '{"name": "Ada"}', {"plan": "pro", "n": 3})
        self.storage.save_thread(thread)
        self.storage.save_resource(resource)
        self.threads([dataclasses.replace(thread, id=f"{token}-b")])
        self.resources([dataclasses.replace(resource, id=f"{token}-b")])
        pairs = {
            "thread": (self.raw_thread(f"{token}-a"), self.raw_thread(f"{token}-b")),
            "resource": (self.raw_resource(f"{token}-a"), self.raw_resource(f"{token}-b")),
        }
        for kind, (by_adapter, by_loader) in pairs.items():
            if by_adapter is None or by_adapter != by_loader:
                raise RawMismatch(f"{kind}: adapter wrote {by_adapter!r}, the raw loader wrote {by_loader!r}")
        for suffix in ("a", "b"):
            self.storage.delete_thread(f"{token}-{suffix}")
        if self.storage.get_thread(f"{token}-b") is not None:
            raise RawMismatch("the raw thread cannot be deleted through the adapter")


class PostgresLoader(Loader):
    name = "PostgreSQL COPY"

    def __init__(self, ns: Namespace, storage: MemoryStorage) -> None:
        super().__init__(ns, storage)
        import psycopg

        self._conn = psycopg.connect(ns.detail["conninfo"], autocommit=True)
        self._s = f'"{ns.detail["schema"]}"'

    def threads(self, threads: Sequence[Thread]) -> None:
        sql = (
            f'COPY {self._s}.mastra_threads (id, "resourceId", title, metadata, '
            '"createdAt", "updatedAt", "createdAtZ", "updatedAtZ") FROM STDIN'
        )
        with self._conn.cursor() as cursor, cursor.copy(sql) as copy:
            for t in threads:
                created, updated = t.created_at.astimezone(UTC), t.updated_at.astimezone(UTC)
                copy.write_row(
                    (t.id, t.resource_id, t.title, _json(t.metadata),
                     created.replace(tzinfo=None), updated.replace(tzinfo=None), created, updated)
                )  # fmt: skip

    def resources(self, resources: Sequence[Resource]) -> None:
        sql = (
            f'COPY {self._s}.mastra_resources (id, "workingMemory", metadata, '
            '"createdAt", "updatedAt", "createdAtZ", "updatedAtZ") FROM STDIN'
        )
        with self._conn.cursor() as cursor, cursor.copy(sql) as copy:
            for r in resources:
                created, updated = r.created_at.astimezone(UTC), r.updated_at.astimezone(UTC)
                copy.write_row(
                    (r.id, r.working_memory, _json(r.metadata),
                     created.replace(tzinfo=None), updated.replace(tzinfo=None), created, updated)
                )  # fmt: skip

    def _row(self, table: str, key: str) -> Any:
        row = self._conn.execute(f"SELECT to_jsonb(t) - 'id' FROM {self._s}.{table} AS t WHERE id = %s", (key,))
        found = row.fetchone()
        return None if found is None else found[0]

    def raw_thread(self, thread_id: str) -> Any:
        return self._row("mastra_threads", thread_id)

    def raw_resource(self, resource_id: str) -> Any:
        return self._row("mastra_resources", resource_id)

    def analyze(self) -> None:
        """Refresh planner statistics after a bulk load (autovacuum would, a little later)."""
        self._conn.execute(f"ANALYZE {self._s}.mastra_threads")
        self._conn.execute(f"ANALYZE {self._s}.mastra_resources")

    def close(self) -> None:
        self._conn.close()


class LibSQLLoader(Loader):
    name = "libSQL executemany in one transaction (apsw, the engine workmem runs a file on)"

    def __init__(self, ns: Namespace, storage: MemoryStorage) -> None:
        super().__init__(ns, storage)
        import apsw

        self._conn = apsw.Connection(ns.detail["path"])

    def _many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.executemany(sql, rows)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def threads(self, threads: Sequence[Thread]) -> None:
        sql = (
            'INSERT INTO mastra_threads ("id", "resourceId", "title", "metadata", "createdAt", "updatedAt") '
            "VALUES (?, ?, ?, jsonb(?), ?, ?)"
        )
        rows = [
            (t.id, t.resource_id, t.title, _json(t.metadata), to_iso(t.created_at), to_iso(t.updated_at))
            for t in threads
        ]
        self._many(sql, rows)

    def resources(self, resources: Sequence[Resource]) -> None:
        sql = (
            'INSERT INTO mastra_resources ("id", "workingMemory", "metadata", "createdAt", "updatedAt") '
            "VALUES (?, ?, jsonb(?), ?, ?)"
        )
        rows = [
            (r.id, r.working_memory, _json(r.metadata), to_iso(r.created_at), to_iso(r.updated_at)) for r in resources
        ]
        self._many(sql, rows)

    def _row(self, table: str, columns: str, key: str) -> Any:
        rows = self._conn.execute(f"SELECT {columns} FROM {table} WHERE id = ?", (key,)).fetchall()
        return tuple(rows[0]) if rows else None

    def raw_thread(self, thread_id: str) -> Any:
        columns = '"resourceId", title, typeof(metadata), hex(metadata), "createdAt", "updatedAt"'
        return self._row("mastra_threads", columns, thread_id)

    def raw_resource(self, resource_id: str) -> Any:
        columns = '"workingMemory", typeof(metadata), hex(metadata), "createdAt", "updatedAt"'
        return self._row("mastra_resources", columns, resource_id)

    def close(self) -> None:
        self._conn.close()


class UpstashLoader(Loader):
    name = "Upstash pipelined SET + ZADD of the adapter's documents"

    def __init__(self, ns: Namespace, storage: MemoryStorage) -> None:
        super().__init__(ns, storage)
        from upstash_redis import Redis

        from workmem.adapters.upstash.keys import KeySpace

        self._keys = KeySpace(ns.detail["prefix"])
        self._redis: Any = Redis(url=ns.detail["rest_url"], token=ns.detail["token"], allow_telemetry=False)

    def threads(self, threads: Sequence[Thread]) -> None:
        from workmem.adapters.upstash.documents import encode_thread, epoch_ms

        for chunk in _chunks(threads, _BATCH):
            pipe = self._redis.pipeline()
            for t in chunk:
                created_index, updated_index = self._keys.thread_indexes(t.resource_id)
                pipe.set(self._keys.thread(t.id), encode_thread(t))
                pipe.zadd(created_index, {t.id: epoch_ms(t.created_at)})
                pipe.zadd(updated_index, {t.id: epoch_ms(t.updated_at)})
            pipe.exec()

    def resources(self, resources: Sequence[Resource]) -> None:
        from workmem.adapters.upstash.documents import encode_resource

        for chunk in _chunks(resources, _BATCH * 3):
            pipe = self._redis.pipeline()
            for r in chunk:
                pipe.set(self._keys.resource(r.id), encode_resource(r))
            pipe.exec()

    def raw_thread(self, thread_id: str) -> Any:
        text = self._redis.get(self._keys.thread(thread_id))
        if text is None:
            return None
        doc = json.loads(text)
        doc.pop("id")
        created_index, updated_index = self._keys.thread_indexes(doc["resourceId"])
        scores = (self._redis.zscore(created_index, thread_id), self._redis.zscore(updated_index, thread_id))
        return list(json.loads(text).keys()), doc, scores

    def raw_resource(self, resource_id: str) -> Any:
        text = self._redis.get(self._keys.resource(resource_id))
        if text is None:
            return None
        doc = json.loads(text)
        doc.pop("id")
        return list(json.loads(text).keys()), doc

    def close(self) -> None:
        self._redis.close()


class MongoLoader(Loader):
    name = "MongoDB insert_many of the adapter's document fields"

    def __init__(self, ns: Namespace, storage: MemoryStorage) -> None:
        super().__init__(ns, storage)
        import pymongo

        self._client: Any = pymongo.MongoClient(ns.detail["url"])
        self._db = self._client[ns.detail["database"]]

    def threads(self, threads: Sequence[Thread]) -> None:
        from workmem.adapters.mongodb.documents import thread_insert_fields

        for chunk in _chunks(threads, _BATCH * 4):
            self._db["mastra_threads"].insert_many(
                [{"id": t.id, "resourceId": t.resource_id, **thread_insert_fields(t)} for t in chunk], ordered=False
            )

    def resources(self, resources: Sequence[Resource]) -> None:
        from workmem.adapters.mongodb.documents import resource_document

        for chunk in _chunks(resources, _BATCH * 4):
            self._db["mastra_resources"].insert_many(
                [{"id": r.id, **resource_document(r)} for r in chunk], ordered=False
            )

    def _doc(self, collection: str, key: str) -> Any:
        doc = self._db[collection].find_one({"id": key}, {"_id": 0, "id": 0})
        return None if doc is None else sorted(doc.items())

    def raw_thread(self, thread_id: str) -> Any:
        return self._doc("mastra_threads", thread_id)

    def raw_resource(self, resource_id: str) -> Any:
        return self._doc("mastra_resources", resource_id)

    def close(self) -> None:
        self._client.close()


_LOADERS: dict[str, type[Loader]] = {
    "postgres": PostgresLoader,
    "libsql": LibSQLLoader,
    "sqld": LibSQLLoader,
    "upstash": UpstashLoader,
    "mongodb": MongoLoader,
}


def loader_for(ns: Namespace, storage: MemoryStorage) -> tuple[Loader, str | None]:
    """The verified raw loader of ``ns``'s backend, or the adapter loop and why the raw one is not used."""
    cls = _LOADERS.get(ns.backend)
    if cls is None:
        return Loader(ns, storage), None
    loader = cls(ns, storage)
    try:
        loader.verify()
    except RawMismatch as exc:
        loader.close()
        return Loader(ns, storage), f"raw loader rejected, using the adapter loop: {exc}"
    return loader, None
