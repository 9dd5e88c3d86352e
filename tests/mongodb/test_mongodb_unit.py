"""MongoDB adapter pieces that need no server: URL handling, error masking, BSON mapping.

The BSON checks use pymongo's real ``bson`` codec (what a server round trip does
to a document on the client side); the connection checks use real pymongo
against a closed local port.
"""

from __future__ import annotations

import logging
import socket
import time
from datetime import UTC, datetime

import bson
import pytest
from bson.codec_options import CodecOptions
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId

import workmem
from workmem.adapters.mongodb.client import Secrets, client_options
from workmem.adapters.mongodb.documents import (
    REV,
    cas_filter,
    next_rev,
    resource_document,
    resource_from_document,
    sort_spec,
    thread_from_document,
    thread_insert_fields,
    to_plain,
)
from workmem.adapters.mongodb.settings import MongoSettings
from workmem.adapters.mongodb.storage import MongoStorage
from workmem.changes import ResourceChange, ThreadChange
from workmem.errors import BackendUnavailableError, ValidationError
from workmem.records import Resource, Thread
from workmem.registry import resolve

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
PASSWORD = "s3cr3t-Pa55"
CODEC = CodecOptions(tz_aware=True, tzinfo=UTC)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bson_round_trip(document: dict[str, object]) -> dict[str, object]:
    return bson.decode(bson.encode(document), codec_options=CODEC)


# -- URLs, options, masking ---------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["mongodb", "mongodb+srv"])
def test_registry_resolves_mongodb_schemes(scheme: str) -> None:
    assert resolve(f"{scheme}://host/db") is MongoStorage


def test_client_options_defaults_and_overrides() -> None:
    options = client_options("mongodb://h/db", {})
    assert options["serverSelectionTimeoutMS"] == 5000 and options["connectTimeoutMS"] == 5000
    assert options["tz_aware"] is True and options["tzinfo"] is UTC
    assert "serverSelectionTimeoutMS" not in client_options("mongodb://h/db?serverselectiontimeoutms=100", {})
    assert client_options("mongodb://h/db", {"serverSelectionTimeoutMS": 7})["serverSelectionTimeoutMS"] == 7


def test_secrets_mask_raw_and_encoded_password() -> None:
    secrets = Secrets("mongodb://user:p%40ss%2Fword@host/db")
    assert secrets.mask("x p@ss/word y p%40ss%2Fword z") == "x *** y *** z"
    assert "p@ss" not in repr(secrets) and secrets.masked_url == "mongodb://user:***@host/db"


async def _no_probe(self: MongoStorage) -> None:
    pass


def test_database_from_url_path_or_default_or_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MongoStorage, "create_indexes", lambda self: None)  # no server here
    monkeypatch.setattr(MongoStorage, "_probe", _no_probe)  # (nor a hello to ask)
    port = closed_port()
    cases = {
        f"mongodb://127.0.0.1:{port}/agents": "agents",
        f"mongodb://127.0.0.1:{port}": "mastra",
        f"mongodb://127.0.0.1:{port}/?authSource=admin": "mastra",
    }
    for url, expected in cases.items():
        with MongoStorage.from_url(url) as storage:
            assert storage.database == expected
            assert storage._client.options.server_selection_timeout == 5.0
    with MongoStorage.from_url(f"mongodb://u:{PASSWORD}@127.0.0.1:{port}/a", database="b") as storage:
        assert storage.database == "b"
        assert PASSWORD not in repr(storage) and "u:***@" in repr(storage)


def test_settings_read_workmem_options_without_io_and_keep_secrets_out_of_repr() -> None:
    settings = MongoSettings.from_url(
        f"mongodb://u:{PASSWORD}@127.0.0.1:1/a", database="b", create=False, password="opt-" + PASSWORD
    )
    assert (settings.database, settings.create) == ("b", False)
    assert settings.options == {"password": "opt-" + PASSWORD}  # the rest go to pymongo as given
    assert PASSWORD not in repr(settings) and repr(settings) == "MongoSettings(database='b', create=False)"
    assert settings.secrets.masked_url == "mongodb://u:***@127.0.0.1:1/a"
    assert MongoSettings.from_url("mongodb://h").database is None  # the URL's path, read by pymongo
    for bad in ({"database": ""}, {"database": 3}, {"create": "no"}):
        with pytest.raises(ValidationError):
            MongoSettings.from_url("mongodb://h", **bad)


def _assert_masked(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    texts = [str(exc), repr(exc), caplog.text]
    if exc.__cause__ is not None:
        texts += [str(exc.__cause__), repr(exc.__cause__)]
    for text in texts:
        assert PASSWORD not in text


def test_unreachable_server_fails_fast_with_password_masked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"mongodb://admin:{PASSWORD}@127.0.0.1:{closed_port()}/agents"
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as info:
        workmem.connect(url, serverSelectionTimeoutMS=300)
    assert time.monotonic() - started < 5
    assert "admin:***@127.0.0.1" in str(info.value)
    assert "heartbeat failed" in caplog.text  # pymongo did log at DEBUG, so the masking check below means something
    _assert_masked(info.value, caplog)


def test_unreachable_server_default_timeout_is_seconds_not_thirty(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as info:
        workmem.connect(f"mongodb://admin:{PASSWORD}@127.0.0.1:{closed_port()}")
    elapsed = time.monotonic() - started
    assert 4 < elapsed < 12, elapsed  # the 5 s default, not pymongo's 30 s
    _assert_masked(info.value, caplog)


def test_srv_url_that_does_not_resolve_is_unavailable_and_masked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BackendUnavailableError) as info:
        workmem.connect(f"mongodb+srv://admin:{PASSWORD}@cluster0.nonexistent.invalid/agents")
    _assert_masked(info.value, caplog)


# -- BSON mapping ---------------------------------------------------------------------------


def test_thread_survives_a_bson_round_trip() -> None:
    metadata = {
        "$ref": "a",
        "$id": 1,  # decodes as a DBRef unless the adapter undoes it
        "inner": {"$id": "x", "$ref": "b", "$db": "c", "extra": [1]},
        "big": 2**53 - 1,  # decodes as bson.Int64
        "neg": -(2**53 - 1),
        "f": 1.0,
        "dotted.key": {"$dollar": None},
    }
    thread = Thread("t", "r", "title", metadata, T0, T0)
    document = bson_round_trip({"id": "t", "resourceId": "r", **thread_insert_fields(thread)})
    assert isinstance(document["metadata"], DBRef)  # the hazard is real
    back = thread_from_document(document)
    assert back == thread
    assert back.metadata is not None and type(back.metadata["big"]) is int and type(back.metadata["f"]) is float


def test_resource_survives_a_bson_round_trip() -> None:
    resource = Resource("r", '{"a":1}', {"$ref": "x", "$id": 2, "k.k": 3}, T0, T0)
    document = bson_round_trip({"id": "r", **resource_document(resource)})
    assert isinstance(document["metadata"], str)
    assert resource_from_document(document) == resource


def test_to_plain_maps_bson_types_like_json_stringify() -> None:
    oid = ObjectId("65a1b2c3d4e5f60718293a4b")
    assert to_plain({"o": oid, "d": T0, "i": Int64(5), "l": Int64(2**60), "n": Decimal128("1.5")}) == {
        "o": "65a1b2c3d4e5f60718293a4b",
        "d": "2025-01-02T03:04:05.678Z",
        "i": 5,
        "l": float(2**60),
        "n": "1.5",
    }
    assert to_plain(DBRef("c", 1, "db", extra=True)) == {"$ref": "c", "$id": 1, "$db": "db", "extra": True}


def test_mastra_string_timestamps_and_missing_fields() -> None:
    thread = thread_from_document(
        {"id": "t", "resourceId": "r", "createdAt": "2025-01-02T03:04:05.678Z", "metadata": '{"a":1}'}
    )
    assert (thread.title, thread.metadata, thread.created_at, thread.updated_at) == ("", {"a": 1}, T0, T0)
    resource = resource_from_document({"id": "r", "workingMemory": {"a": 1}, "metadata": "not json"})
    assert (resource.working_memory, resource.metadata) == ('{"a":1}', None)


def test_sort_and_cas_helpers() -> None:
    assert sort_spec("updated_at", "asc") == [("updatedAt", 1), ("id", 1)]
    assert sort_spec("created_at", "desc") == [("createdAt", -1), ("id", -1)]
    assert cas_filter({"id": "x", "updatedAt": T0}) == {"id": "x", REV: None, "updatedAt": T0}
    assert next_rev({}) == 1 and next_rev({REV: Int64(41)}) == 42


def test_update_documents_derive_from_the_change_rules() -> None:
    """The fields each update writes come from workmem.changes; kept fields are never rewritten."""
    from workmem.adapters.mongodb.documents import resource_rewrite, resource_upsert, thread_rewrite, thread_touch
    from workmem.errors import ValidationError
    from workmem.records import UNSET
    from workmem.validation import MAX_TEXT_BYTES

    assert resource_upsert("r", "# wm", T0) == {
        "$set": {"updatedAt": T0, "workingMemory": "# wm"},
        "$setOnInsert": {"metadata": None, "createdAt": T0},
        "$inc": {REV: 1},
    }
    assert resource_upsert("r", UNSET, T0)["$setOnInsert"] == {"workingMemory": None, "metadata": None, "createdAt": T0}
    stored = {"id": "r", "workingMemory": {"sub": "document"}, "metadata": '{"a":1}', "createdAt": T0, REV: 4}
    later = T0.replace(year=2026)
    new, fields = resource_rewrite(stored, "r", ResourceChange(UNSET, {"b": 2}, later))
    assert fields == {"updatedAt": later, "metadata": '{"a":1,"b":2}', REV: 5}  # workingMemory left as stored
    assert (new.metadata, new.created_at, new.updated_at) == ({"a": 1, "b": 2}, T0, later)
    assert resource_rewrite(None, "r", ResourceChange("x", UNSET, later))[1] == {
        "workingMemory": "x",
        "metadata": None,
        "createdAt": later,
        "updatedAt": later,
        REV: 1,
    }
    assert thread_touch("new title", later) == {"updatedAt": later, "title": "new title"}
    assert thread_touch(UNSET, later) == {"updatedAt": later}
    thread_doc = {
        "id": "t",
        "resourceId": "r",
        "title": "x",
        "metadata": {"when": T0, "oid": ObjectId()},
        "createdAt": T0,
    }
    new_thread, thread_fields = thread_rewrite(thread_doc, ThreadChange(UNSET, {"k": 1}, later))
    assert thread_fields["metadata"] == {**thread_doc["metadata"], "k": 1}  # stored BSON values keep their types
    assert "title" not in thread_fields and thread_fields[REV] == 1
    assert new_thread.metadata is not None and new_thread.metadata["when"] == "2025-01-02T03:04:05.678Z"
    with pytest.raises(ValidationError):  # the rule checks the merged metadata whole
        thread_rewrite(
            thread_doc,
            ThreadChange(
                UNSET, {"big": "x" * (MAX_TEXT_BYTES // 2 + 10), "big2": "y" * (MAX_TEXT_BYTES // 2 + 10)}, later
            ),
        )


def test_a_second_event_loop_is_refused_at_once_with_a_workmem_error_not_a_bare_runtime_error() -> None:
    """pymongo binds an ``AsyncMongoClient`` to the loop of its first operation, even one that failed."""
    import asyncio

    from pymongo import AsyncMongoClient

    from workmem.adapters.mongodb.storage import AsyncMongoStorage

    port = closed_port()
    url = f"mongodb://user:s3cr3t-pw@127.0.0.1:{port}/"
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        url, serverSelectionTimeoutMS=200, connectTimeoutMS=200
    )
    storage = AsyncMongoStorage(client, "wm", owns_client=True, url=url)
    with pytest.raises(BackendUnavailableError):
        asyncio.run(storage.get_thread("t1"))  # the first loop: the closed port
    started = time.monotonic()
    with pytest.raises(workmem.WrongEventLoopError, match="open one storage per event loop") as raised:
        asyncio.run(storage.get_thread("t1"))
    assert time.monotonic() - started < 0.2  # at once, before any I/O
    assert isinstance(raised.value, RuntimeError) and not isinstance(raised.value, workmem.RETRYABLE_ERRORS)
    assert "different event loop" in str(raised.value.__cause__)
    assert "s3cr3t-pw" not in str(raised.value) + repr(raised.value.__cause__)
