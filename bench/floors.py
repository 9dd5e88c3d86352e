"""Raw driver floors: the cheapest hand-written driver call doing what each workmem operation does.

Each floor talks to the same server and namespace as the adapter, in the same
run, with the same connection settings, so ``adapter / floor`` is the price of
workmem itself (validation, statement building, row mapping, pooling):

* PostgreSQL -- psycopg 3 through a ``psycopg_pool`` pool (autocommit, the
  adapter's sizes), prepared statements: a primary-key ``SELECT`` of
  a thread / resource, one ``UPDATE`` of a thread's title, and the page query
  of 20 threads (without the total count the adapter adds);
* libSQL -- a raw ``apsw`` connection on a file (autocommit, its statement cache, the
  engine the adapter runs a file on) doing the same statements (for ``sqld``, remote
  libSQL, a raw ``libsql`` wheel connection, ``isolation_level=None``, to the same
  server over HTTP); and, for the two reads, a hand-written
  read returning the same record (:meth:`Floor.thread_record`): the driver
  call, ``json.loads`` of the metadata, both timestamps parsed, the frozen
  ``Thread`` / ``Resource`` built with ``trusted_thread`` / ``trusted_resource``;
* Upstash -- one raw ``upstash-redis`` command through the same bridge:
  ``GET`` of a document, ``SET`` of a scratch key, ``ZRANGE ... REV`` of 20 ids;
* MongoDB -- ``find_one({"id": ...})``, ``update_one``, ``find().sort().limit(20)``;
* Oracle -- a cursor ``SELECT`` / ``UPDATE`` by primary key.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bench.backends import Namespace
from workmem.records import Resource, Thread, trusted_resource, trusted_thread

__all__ = ["Floor", "open_floor"]

_THREAD_COLUMNS = 'id, "resourceId", title, metadata, "createdAt", "updatedAt"'
_RESOURCE_COLUMNS = 'id, "workingMemory", metadata, "createdAt", "updatedAt"'


class Floor(ABC):
    """Raw driver calls on one namespace."""

    description: str = ""

    @abstractmethod
    def read_thread(self, thread_id: str) -> object: ...

    @abstractmethod
    def read_resource(self, resource_id: str) -> object: ...

    @abstractmethod
    def write_thread(self, thread_id: str, title: str) -> object: ...

    @abstractmethod
    def list_page(self, resource_id: str) -> object: ...

    def statement(self, sql: str, params: Any) -> object | None:
        """Run an already rendered statement (the adapter's own SQL) raw; ``None`` where unsupported."""
        return None

    supports_statements = False

    records = False
    """Whether :meth:`thread_record` / :meth:`resource_record` exist (hand-written reads of whole records)."""

    def thread_record(self, thread_id: str) -> Thread | None:
        """The thread as a record, read and mapped by hand on the raw driver (where :attr:`records`)."""
        raise NotImplementedError

    def resource_record(self, resource_id: str) -> Resource | None:
        """The resource as a record, read and mapped by hand on the raw driver (where :attr:`records`)."""
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional
        """Release the connection."""


class PostgresFloor(Floor):
    description = "psycopg 3, pooled autocommit connection, prepared statements"

    def __init__(self, ns: Namespace) -> None:
        from psycopg_pool import ConnectionPool

        s = f'"{ns.detail["schema"]}"'
        self._pool = ConnectionPool(
            ns.detail["conninfo"],
            kwargs={"autocommit": True, "connect_timeout": 10},
            min_size=1,
            max_size=10,
            open=True,
            name="wmbench-floor",
        )
        self._read_thread = f"SELECT {_THREAD_COLUMNS} FROM {s}.mastra_threads WHERE id = %s"
        self._read_resource = f"SELECT {_RESOURCE_COLUMNS} FROM {s}.mastra_resources WHERE id = %s"
        self._write = f"UPDATE {s}.mastra_threads SET title = %s WHERE id = %s"
        self._list = (
            f'SELECT {_THREAD_COLUMNS} FROM {s}.mastra_threads WHERE "resourceId" = %s '
            'ORDER BY "createdAt" DESC, id DESC LIMIT 20'
        )

    def _run(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._pool.connection() as conn:
            cursor = conn.execute(sql, params, prepare=True)
            return cursor.fetchall() if cursor.description else []

    def read_thread(self, thread_id: str) -> object:
        return self._run(self._read_thread, (thread_id,))

    def read_resource(self, resource_id: str) -> object:
        return self._run(self._read_resource, (resource_id,))

    def write_thread(self, thread_id: str, title: str) -> object:
        return self._run(self._write, (title, thread_id))

    def list_page(self, resource_id: str) -> object:
        return self._run(self._list, (resource_id,))

    supports_statements = True

    def statement(self, sql: str, params: Any) -> object:
        with self._pool.connection() as conn:
            cursor = conn.execute(sql, params, prepare=True)
            return cursor.fetchall() if cursor.description else []

    def close(self) -> None:
        self._pool.close()


class LibSQLFloor(Floor):
    description = "raw libsql connection (isolation_level=None)"

    def __init__(self, ns: Namespace) -> None:
        self._conn = self._connect(ns.detail["path"])
        columns = _THREAD_COLUMNS.replace("metadata", "json(metadata)")
        self._read_thread = f"SELECT {columns} FROM mastra_threads WHERE id = ?"
        self._read_resource = (
            f"SELECT {_RESOURCE_COLUMNS.replace('metadata', 'json(metadata)')} FROM mastra_resources WHERE id = ?"
        )
        self._write = "UPDATE mastra_threads SET title = ? WHERE id = ?"
        self._list = (
            f'SELECT {columns} FROM mastra_threads WHERE "resourceId" = ? ORDER BY "createdAt" DESC, id DESC LIMIT 20'
        )

    def read_thread(self, thread_id: str) -> object:
        return self._conn.execute(self._read_thread, (thread_id,)).fetchall()

    def read_resource(self, resource_id: str) -> object:
        return self._conn.execute(self._read_resource, (resource_id,)).fetchall()

    def write_thread(self, thread_id: str, title: str) -> object:
        return self._conn.execute(self._write, (title, thread_id)).fetchall()

    def list_page(self, resource_id: str) -> object:
        return self._conn.execute(self._list, (resource_id,)).fetchall()

    supports_statements = True

    def statement(self, sql: str, params: Any) -> object:
        return self._conn.execute(sql, params).fetchall()

    records = True

    # What a program using the driver by hand would write to get the record workmem returns: one row
    # (fetchone), the metadata JSON decoded, the two ...Z stamps parsed (fromisoformat reads them as UTC),
    # the frozen record built without re-validation. No pool, no id check, no error mapping.

    def thread_record(self, thread_id: str) -> Thread | None:
        row = self._conn.execute(self._read_thread, (thread_id,)).fetchone()
        if row is None:
            return None
        metadata = None if row[3] is None else json.loads(row[3])
        return trusted_thread(
            row[0], row[1], row[2], metadata, datetime.fromisoformat(row[4]), datetime.fromisoformat(row[5])
        )

    def resource_record(self, resource_id: str) -> Resource | None:
        row = self._conn.execute(self._read_resource, (resource_id,)).fetchone()
        if row is None:
            return None
        metadata = None if row[2] is None else json.loads(row[2])
        return trusted_resource(
            row[0], row[1], metadata, datetime.fromisoformat(row[3]), datetime.fromisoformat(row[4])
        )

    def close(self) -> None:
        self._conn.close()

    @staticmethod
    def _connect(where: str) -> Any:
        import libsql

        return libsql.connect(where, isolation_level=None)


class FileFloor(LibSQLFloor):
    description = "raw apsw connection (autocommit, statement cache): the engine workmem runs a file on"

    @staticmethod
    def _connect(where: str) -> Any:
        import apsw

        return apsw.Connection(where)


class UpstashFloor(Floor):
    description = "raw upstash-redis client, one command through the same bridge"

    def __init__(self, ns: Namespace) -> None:
        from upstash_redis import Redis

        from workmem.adapters.upstash.keys import KeySpace

        self._keys = KeySpace(ns.detail["prefix"])
        self._redis: Any = Redis(url=ns.detail["rest_url"], token=ns.detail["token"], allow_telemetry=False)
        self._scratch = f"{ns.detail['prefix']}wmbench:scratch"

    def read_thread(self, thread_id: str) -> object:
        return self._redis.get(self._keys.thread(thread_id))

    def read_resource(self, resource_id: str) -> object:
        return self._redis.get(self._keys.resource(resource_id))

    def write_thread(self, thread_id: str, title: str) -> object:
        return self._redis.set(self._scratch, title)

    def list_page(self, resource_id: str) -> object:
        return self._redis.zrange(self._keys.thread_index("created_at", resource_id), 0, 19, rev=True)

    def close(self) -> None:
        self._redis.close()


class MongoFloor(Floor):
    description = "raw pymongo find_one / update_one / find().sort().limit(20)"

    def __init__(self, ns: Namespace) -> None:
        import pymongo

        self._client: Any = pymongo.MongoClient(ns.detail["url"])
        db = self._client[ns.detail["database"]]
        self._threads = db["mastra_threads"]
        self._resources = db["mastra_resources"]

    def read_thread(self, thread_id: str) -> object:
        return self._threads.find_one({"id": thread_id})

    def read_resource(self, resource_id: str) -> object:
        return self._resources.find_one({"id": resource_id})

    def write_thread(self, thread_id: str, title: str) -> object:
        return self._threads.update_one({"id": thread_id}, {"$set": {"title": title}})

    def list_page(self, resource_id: str) -> object:
        return list(self._threads.find({"resourceId": resource_id}).sort([("createdAt", -1), ("id", -1)]).limit(20))

    def close(self) -> None:
        self._client.close()


class OracleFloor(Floor):
    description = "raw python-oracledb (thin) cursor, primary-key SELECT / UPDATE"

    def __init__(self, ns: Namespace) -> None:
        import oracledb

        from workmem.adapters.oracle import OracleSettings

        config = OracleSettings.from_url(ns.detail["url"])
        self._conn: Any = oracledb.connect(
            user=config.user, password=config.password, host=config.host, port=config.port,
            service_name=config.service_name,
        )  # fmt: skip
        self._conn.autocommit = True
        prefix = ns.detail["table_prefix"]
        threads, resources = f"{prefix}MASTRA_THREADS", f"{prefix}MASTRA_RESOURCES"
        self._read_thread = f"SELECT * FROM {threads} WHERE id = :1"
        self._read_resource = f"SELECT * FROM {resources} WHERE id = :1"
        self._write = f"UPDATE {threads} SET title = :1 WHERE id = :2"
        self._list = (
            f'SELECT * FROM {threads} WHERE "resourceId" = :1 '
            'ORDER BY "createdAt" DESC, id DESC FETCH FIRST 20 ROWS ONLY'
        )

    def _run(self, sql: str, params: list[Any]) -> object:
        cursor = self._conn.cursor()
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else None

    def read_thread(self, thread_id: str) -> object:
        return self._run(self._read_thread, [thread_id])

    def read_resource(self, resource_id: str) -> object:
        return self._run(self._read_resource, [resource_id])

    def write_thread(self, thread_id: str, title: str) -> object:
        return self._run(self._write, [title, thread_id])

    def list_page(self, resource_id: str) -> object:
        return self._run(self._list, [resource_id])

    def close(self) -> None:
        self._conn.close()


_FLOORS: dict[str, Callable[[Namespace], Floor]] = {
    "postgres": PostgresFloor,
    "libsql": FileFloor,
    "sqld": LibSQLFloor,  # the same raw connection, to the server's http:// URL
    "upstash": UpstashFloor,
    "mongodb": MongoFloor,
    "oracle": OracleFloor,
}


def open_floor(ns: Namespace) -> Floor | None:
    """The raw floor of ``ns``'s backend (its tables must exist), or ``None`` (``memory`` has none)."""
    cls = _FLOORS.get(ns.backend)
    return None if cls is None else cls(ns)
