"""The MongoDB adapter against a REAL MongoDB server (``WORKMEM_MONGODB_URL`` or testcontainers).

Without a server these tests are skipped, loudly (see ``tests/support/servers.py``).
Each test gets a fresh random database, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from backends import fresh_mongodb_url
from test_mongodb_behaviour import MongoBehaviour

from workmem.adapters.mongodb.storage import MongoStorage


def fresh_database_url(url: str) -> tuple[str, str]:
    """``url`` pointed at a new random database, and that database's name.

    Credentials keep authenticating where they did: against the URL's own
    ``authSource``, else the database the URL named, else ``admin``.
    """
    parts = urlsplit(url)
    name = f"workmem_test_{uuid.uuid4().hex[:16]}"
    query = parse_qsl(parts.query, keep_blank_values=True)
    if parts.username and not any(key.lower() == "authsource" for key, _ in query):
        query.append(("authSource", parts.path.strip("/") or "admin"))
    return urlunsplit(parts._replace(path=f"/{name}", query=urlencode(query))), name


@pytest.fixture
def database_url() -> Iterator[str]:
    """A URL naming a fresh database on the real server; the database is dropped afterwards."""
    with fresh_mongodb_url() as url:
        yield url


@pytest.fixture
def open_storage(database_url: str) -> Iterator[Callable[[], MongoStorage]]:
    opened: list[MongoStorage] = []

    def open_one() -> MongoStorage:
        opened.append(MongoStorage.from_url(database_url))
        return opened[-1]

    yield open_one
    for storage in opened:
        storage.close()


@pytest.fixture
def storage(open_storage: Callable[[], MongoStorage]) -> MongoStorage:
    return open_storage()


def test_fresh_database_url_keeps_authentication() -> None:  # no server needed, so not marked backend("mongodb")
    url, name = fresh_database_url("mongodb://u:p@h:1/app?tls=true")
    assert url == f"mongodb://u:p@h:1/{name}?tls=true&authSource=app"
    url, name = fresh_database_url("mongodb://u:p@h:1")
    assert url == f"mongodb://u:p@h:1/{name}?authSource=admin"
    url, name = fresh_database_url("mongodb://h:1/?authSource=x")
    assert url == f"mongodb://h:1/{name}?authSource=x"


@pytest.mark.backend("mongodb")
class TestMongoServer(MongoBehaviour):
    """The shared MongoDB checks against a real server."""

    def test_indexes(self, storage: MongoStorage) -> None:
        db = storage._client[storage.database]
        threads = {tuple(info["key"]): info for info in db["mastra_threads"].index_information().values()}
        resources = {tuple(info["key"]): info for info in db["mastra_resources"].index_information().values()}
        assert threads[(("id", 1),)].get("unique") is True
        assert (("resourceId", 1), ("createdAt", -1)) in threads
        assert (("resourceId", 1), ("updatedAt", -1)) in threads
        assert resources[(("id", 1),)].get("unique") is True
        storage.create_indexes()  # idempotent

    def test_server_version_supported(self, storage: MongoStorage) -> None:
        version = storage._client.server_info()["versionArray"]
        assert version[0] >= 5, f"workmem's MongoDB adapter needs MongoDB 5.0+, this server is {version}"


@pytest.mark.backend("mongodb")
def test_history_on_a_real_server(database_url: str) -> None:
    """With transactions (a replica set or mongos): 64 concurrent merges from 8 connections make versions 1..64
    and delete_resource erases the user; on a standalone server connect(url, history=True) refuses."""
    import json
    import threading

    import workmem
    from workmem.errors import OperationNotSupportedError

    with workmem.connect(database_url) as probe:
        assert isinstance(probe, MongoStorage)
        transactions = probe._transactions
    if not transactions:
        with pytest.raises(OperationNotSupportedError, match="standalone"):
            workmem.connect(database_url, history=True)
        return
    stores = [workmem.connect(database_url, history=True) for _ in range(8)]
    errors: list[BaseException] = []

    def merge(worker: int) -> None:
        try:
            for n in range(8):
                stores[worker].merge_working_memory({f"w{worker}n{n}": n}, scope="resource", resource_id="r")
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=merge, args=(w,)) for w in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors
    versions = stores[0].working_memory_history(scope="resource", resource_id="r", limit=100).versions[::-1]
    assert [v.version for v in versions] == list(range(1, 65))
    assert [len(json.loads(v.content or "")) for v in versions] == list(range(1, 65))
    assert versions[-1].content == stores[0].get_working_memory(scope="resource", resource_id="r")
    erased = stores[0].delete_resource("r")
    assert (erased.resource, erased.versions) == (True, 64)
    assert stores[0].delete_resource("r").removed_anything is False
    for store in stores:
        store.close()
