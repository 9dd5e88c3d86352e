"""``connect(url, create=False)``: read-only credentials and read-only files work; missing tables are named.

``connect()`` creates missing tables and indexes by default, which a SELECT-only
PostgreSQL role or a read-only libSQL file cannot do. ``create=False`` creates
nothing (and changes nothing); tables that are not there raise
:class:`MissingTablesError`, whose message names the option.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from backends import backend_url
from servers import server_url

import workmem
from workmem import Memory, MissingTablesError, ReadOnlyMemoryError, Thread, ValidationError
from workmem.adapters.libsql.storage import LibSQLStorage

__all__ = ["backend_url"]  # the fixture, run once per backend


def _fill(url: str) -> None:
    with workmem.connect(url) as storage:
        storage.save_thread(Thread("t-1", "user-1", "Trip"))
        storage.set_working_memory("# User\n- Name: Sam", scope="resource", resource_id="user-1")


def _read_only_memory_works(storage: workmem.MemoryStorage) -> None:
    memory = Memory(storage, read_only=True)
    assert memory.get_working_memory(resource_id="user-1") == "# User\n- Name: Sam"
    assert "- Name: Sam" in memory.system_message(resource_id="user-1")
    assert [t.id for t in memory.list_threads("user-1").threads] == ["t-1"]
    with pytest.raises(ReadOnlyMemoryError):
        memory.update_working_memory("# changed", resource_id="user-1")


# -- every backend ------------------------------------------------------------------------------


def test_create_false_reads_what_a_normal_connect_created(backend_url: str) -> None:
    _fill(backend_url)
    with workmem.connect(backend_url, create=False) as storage:
        _read_only_memory_works(storage)
        assert storage.get_thread("t-1") is not None


def test_create_must_be_a_bool(backend_url: str) -> None:
    with pytest.raises(ValidationError, match="create"):
        workmem.connect(backend_url, create="no")


# -- libSQL: a file opened read-only --------------------------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.backend("libsql")
def test_libsql_read_only_file_opens_and_stays_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    _fill(f"file:{path}")
    path.chmod(0o444)  # what a read-only file looks like; root ignores it, so open it read-only too
    before = _digest(path)
    with workmem.connect(f"file:{path}?mode=ro") as storage:
        assert isinstance(storage, LibSQLStorage)
        _read_only_memory_works(storage)
        with pytest.raises(workmem.WorkmemError, match="readonly"):
            storage.set_working_memory("x", scope="resource", resource_id="user-1")
    with Memory(f"file:{path}?mode=ro", read_only=True) as memory:
        assert memory.get_working_memory(resource_id="user-1") == "# User\n- Name: Sam"
    assert _digest(path) == before


@pytest.mark.backend("libsql")
def test_libsql_read_only_url_refuses_other_parameters(tmp_path: Path) -> None:
    for query in ("mode=rw", "mode=ro&cache=shared", "immutable=1"):
        with pytest.raises(ValidationError, match="mode=ro"):
            workmem.connect(f"file:{tmp_path / 'x.db'}?{query}")


@pytest.mark.backend("libsql")
def test_libsql_missing_tables_name_the_option(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()  # an empty database file
    with pytest.raises(MissingTablesError, match="create=False") as info:
        workmem.connect(f"file:{path}", create=False)
    assert "mastra_threads" in str(info.value) and str(path) in str(info.value)
    with pytest.raises(MissingTablesError, match="create=False"):
        workmem.connect(f"file:{path}?mode=ro")
    with pytest.raises(ValidationError, match="does not exist"):
        workmem.connect(f"file:{tmp_path / 'nothing-here.db'}?mode=ro")
    assert not (tmp_path / "nothing-here.db").exists()


@pytest.mark.backend("libsql")
def test_libsql_create_false_leaves_no_file_behind(tmp_path: Path) -> None:
    """A file that is not there is not made, not even empty: create=False and read-only Memory create nothing."""
    for name, opener in (
        ("plain.db", lambda url: workmem.connect(url, create=False)),
        ("memory.db", lambda url: Memory(url, read_only=True)),
    ):
        path = tmp_path / name
        for url in (f"file:{path}", str(path)):
            with pytest.raises(MissingTablesError, match="create=False") as info:
                opener(url)
            assert "does not exist" in str(info.value) and str(path) in str(info.value)
            assert not path.exists()
    assert list(tmp_path.iterdir()) == []


# -- PostgreSQL: a SELECT-only role ---------------------------------------------------------------


@contextlib.contextmanager
def _database_with_select_only_role() -> Iterator[tuple[str, str]]:
    """``(owner_url, reader_url)`` of a new random database and a new role that may only SELECT; both dropped after."""
    server = server_url("postgres")
    suffix = uuid.uuid4().hex[:12]
    database, role = f"wm_ro_db_{suffix}", f"wm_ro_role_{suffix}"
    parts = urlsplit(server)
    owner_url = urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))
    host = parts.hostname or "127.0.0.1"
    reader_netloc = f"{role}@{host}" + (f":{parts.port}" if parts.port else "")
    reader_url = urlunsplit((parts.scheme, reader_netloc, f"/{database}", parts.query, ""))
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        yield owner_url, reader_url
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.mark.backend("postgres")
def test_postgres_select_only_role() -> None:
    with _database_with_select_only_role() as (owner_url, reader_url):
        role = urlsplit(reader_url).username
        with psycopg.connect(owner_url, autocommit=True) as owner:
            owner.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        # before the tables exist: the missing tables are named, with the option to create them
        with pytest.raises(MissingTablesError, match="create=False") as info:
            workmem.connect(reader_url, create=False)
        assert "mastra_threads" in str(info.value)
        _fill(owner_url)
        with psycopg.connect(owner_url, autocommit=True) as owner:
            owner.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        with pytest.raises(workmem.BackendRefusedError, match="create=False"):  # the default connect() creates:
            workmem.connect(reader_url)  # refused for this role, and the error names the option that works
        with workmem.connect(reader_url, create=False) as storage:
            _read_only_memory_works(storage)
        with Memory(reader_url, read_only=True) as memory:  # a read-only Memory opened by URL creates nothing
            assert memory.get_working_memory(resource_id="user-1") == "# User\n- Name: Sam"


# -- MongoDB without a server: the collection check against mongomock (FAKE) ------------------------


def test_mongodb_create_false_checks_the_collections_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAKE (mongomock): ``create=False`` creates no index and names missing collections; not conformance."""
    import mongomock

    from workmem.adapters.mongodb import storage as mongodb

    client = mongomock.MongoClient(tz_aware=True)
    monkeypatch.setattr(mongodb, "open_client", lambda url, options, secrets: client)
    monkeypatch.setattr(client, "close", lambda: None)  # each connect "owns" the shared fake client
    url = f"mongodb://fake/wm_{uuid.uuid4().hex[:8]}"
    with pytest.raises(MissingTablesError, match="create=False") as info:
        workmem.connect(url, create=False)
    assert "mastra_threads" in str(info.value) and "mastra_resources" in str(info.value)
    _fill(url)
    with workmem.connect(url, create=False) as storage:
        _read_only_memory_works(storage)
