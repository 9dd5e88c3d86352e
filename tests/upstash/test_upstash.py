"""The Upstash adapter against a real redis-server behind the REST bridge."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from upstash_fixtures import Bridge, bridge, losing_script_responses, raw_client, upstash_prefix, upstash_url

import workmem
from workmem import Resource, Thread, ThreadNotFoundError, ThreadOwnershipError, WorkingMemoryFormatError
from workmem.adapters.reference import ReferenceStorage
from workmem.adapters.upstash import UpstashStorage
from workmem.adapters.upstash.scripts import CAS_SET, Script
from workmem.adapters.upstash.settings import UpstashSettings
from workmem.errors import BackendRefusedError, BackendUnavailableError, ValidationError, WorkmemError
from workmem.storage import MemoryStorage

pytestmark = pytest.mark.backend("upstash")

__all__ = ["bridge", "upstash_prefix", "upstash_url"]

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
TRICKY: dict[str, Any] = {
    "empty_list": [],
    "empty_object": {},
    "nested": {"a": [], "b": {}, "c": [{}, [], [[]]]},
    "float": 0.1 + 0.2,
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "max_int": 2**53 - 1,
    "min_int": -(2**53 - 1),
    "negative_zero_ish": -0.0,
    "unicode": 'ünïcödé 😀 \u2028 "quotes" \\ {not: json}',
    "ключ": "значение",
    "bools": [True, False, None],
}


@pytest.fixture
def storage(upstash_url: str) -> Iterator[UpstashStorage]:
    store = workmem.connect(upstash_url)
    assert isinstance(store, UpstashStorage)
    yield store
    store.close()


def raw_get(bridge: Bridge, key: str) -> Any:
    client = raw_client(bridge)
    try:
        return client.get(key)  # type: ignore[attr-defined]
    finally:
        client.close()  # type: ignore[attr-defined]


def raw_set(bridge: Bridge, key: str, value: str) -> None:
    client = raw_client(bridge)
    try:
        client.set(key, value)  # type: ignore[attr-defined]
    finally:
        client.close()  # type: ignore[attr-defined]


def thread_keys(bridge: Bridge, prefix: str) -> dict[str, str]:
    """Every thread document under ``prefix``: thread id -> owner."""
    client = raw_client(bridge)
    owners: dict[str, str] = {}
    cursor = 0
    start = prefix + "mastra_threads:id:"
    try:
        while True:
            cursor, keys = client.scan(cursor, match=f"{prefix}mastra_threads:id:*", count=1000)  # type: ignore[attr-defined]
            for key in keys:
                owners[key[len(start) :]] = json.loads(client.get(key))["resourceId"]  # type: ignore[attr-defined]
            if cursor == 0:
                return owners
    finally:
        client.close()  # type: ignore[attr-defined]


# -- URLs, secrets, errors -------------------------------------------------------------


def test_url_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UPSTASH_REDIS_REST_URL", raising=False)
    monkeypatch.delenv("UPSTASH_REDIS_REST_TOKEN", raising=False)
    s = UpstashSettings.from_url("upstash+https://db.upstash.io?token=T1")
    assert (s.rest_url, s.token, s.prefix, s.retries, s.timeout) == ("https://db.upstash.io", "T1", "", 1, 30.0)
    s = UpstashSettings.from_url("upstash+http://127.0.0.1:8079/?token=T2&prefix=wm_x:&retries=0&timeout=2.5")
    assert (s.rest_url, s.token, s.prefix, s.retries, s.timeout) == ("http://127.0.0.1:8079", "T2", "wm_x:", 0, 2.5)
    s = UpstashSettings.from_url("upstash+https://:T3@db.upstash.io", prefix="p:")
    assert (s.rest_url, s.token, s.prefix) == ("https://db.upstash.io", "T3", "p:")
    with pytest.raises(ValidationError, match="UPSTASH_REDIS_REST_URL"):
        UpstashSettings.from_url("upstash://")
    monkeypatch.setenv("UPSTASH_REDIS_REST_URL", "https://env.upstash.io/")
    with pytest.raises(ValidationError, match="needs a token"):
        UpstashSettings.from_url("upstash://")
    monkeypatch.setenv("UPSTASH_REDIS_REST_TOKEN", "ENVTOKEN")
    s = UpstashSettings.from_url("upstash://?prefix=q:")
    assert (s.rest_url, s.token, s.prefix) == ("https://env.upstash.io", "ENVTOKEN", "q:")
    with pytest.raises(ValidationError, match="unknown Upstash option") as info:
        UpstashSettings.from_url("upstash+https://db.upstash.io?token=SECRET123&bogus=1")
    assert "SECRET123" not in str(info.value)
    with pytest.raises(ValidationError):
        UpstashSettings.from_url("upstash+https://db.upstash.io?token=t&retries=many")


def test_registry_and_capabilities(storage: UpstashStorage) -> None:
    assert workmem.registry.resolve("upstash+http://h?token=t") is UpstashStorage
    assert UpstashStorage.capabilities.cross_process_atomic
    assert UpstashStorage.capabilities.persistent
    storage.close()
    storage.close()  # idempotent


def _chain(exc: BaseException) -> str:
    parts = []
    seen: BaseException | None = exc
    while seen is not None:
        parts.append(f"{type(seen).__name__}: {seen!s} {seen!r}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def test_token_is_never_shown(bridge: Bridge, upstash_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with workmem.connect(upstash_url) as store:
        assert bridge.token not in repr(store)
        assert bridge.token not in repr(store._settings)
        assert bridge.token not in repr(store._client)
    wrong = f"wrong-{secrets.token_hex(8)}"
    with pytest.raises(BackendRefusedError) as refused:  # a wrong token: retrying fails the same way
        workmem.connect(f"upstash+{bridge.url}?token={wrong}&retries=0")
    assert wrong not in _chain(refused.value)
    assert "WRONGPASS" in str(refused.value)
    dead = f"upstash+http://127.0.0.1:9?token={wrong}&retries=0"
    with pytest.raises(BackendUnavailableError) as unreachable:
        workmem.connect(dead)
    assert wrong not in _chain(unreachable.value)
    out = capsys.readouterr()
    assert bridge.token not in out.out + out.err
    assert wrong not in out.out + out.err


def test_redis_errors_are_mapped(bridge: Bridge, storage: UpstashStorage, upstash_prefix: str) -> None:
    client = raw_client(bridge)
    client.hset(upstash_prefix + "mastra_threads:id:h", values={"a": "1"})  # type: ignore[attr-defined]
    client.close()  # type: ignore[attr-defined]
    with pytest.raises(BackendRefusedError, match="WRONGTYPE") as info:
        storage.get_thread("h")
    assert not isinstance(info.value, BackendUnavailableError)
    assert bridge.token not in _chain(info.value)
    raw_set(bridge, upstash_prefix + "mastra_threads:id:bad", "not json")
    with pytest.raises(WorkmemError, match="not a JSON object"):
        storage.get_thread("bad")


def test_evalsha_falls_back_to_eval_on_noscript(storage: UpstashStorage) -> None:
    script = Script("probe", f"return {{'{secrets.token_hex(8)}', ARGV[1]}}")
    first = storage._client.run(script, [], ["x"])  # not cached yet: NOSCRIPT, then EVAL
    assert first[1] == "x"
    assert storage._client.run(script, [], ["y"])[1] == "y"  # cached by that EVAL


# -- the on-disk format -----------------------------------------------------------------


def test_documents_match_mastra(bridge: Bridge, storage: UpstashStorage, upstash_prefix: str) -> None:
    storage.save_resource(Resource("r1", "# Notes", {"plan": "pro", "n": 1}, T0, T0 + timedelta(seconds=1)))
    doc = json.loads(raw_get(bridge, upstash_prefix + "mastra_resources:r1"))
    assert doc == {
        "id": "r1",
        "workingMemory": "# Notes",
        "metadata": '{"plan":"pro","n":1}',
        "createdAt": "2025-01-02T03:04:05.678Z",
        "updatedAt": "2025-01-02T03:04:06.678Z",
    }
    storage.save_thread(Thread("t1", "r1", "Hello", {"k": [1, 2]}, T0, T0))
    doc = json.loads(raw_get(bridge, upstash_prefix + "mastra_threads:id:t1"))
    assert doc == {
        "id": "t1",
        "resourceId": "r1",
        "title": "Hello",
        "metadata": {"k": [1, 2]},
        "createdAt": "2025-01-02T03:04:05.678Z",
        "updatedAt": "2025-01-02T03:04:05.678Z",
    }
    client = raw_client(bridge)
    scores = client.zrange(upstash_prefix + "workmem:thread_index:created_at:r1", 0, -1, withscores=True)  # type: ignore[attr-defined]
    client.close()  # type: ignore[attr-defined]
    assert scores == [("t1", float(int(T0.timestamp() * 1000)))]


def test_json_values_round_trip_exactly(storage: UpstashStorage) -> None:
    storage.save_resource(Resource("r", None, TRICKY, T0, T0))
    assert storage.get_resource("r").metadata == TRICKY  # type: ignore[union-attr]
    storage.update_resource("r", metadata={"added": [], "float": 1e-7})
    assert storage.get_resource("r").metadata == {**TRICKY, "added": [], "float": 1e-7}  # type: ignore[union-attr]
    storage.save_thread(Thread("t", "r", "ünï 😀", TRICKY, T0, T0))
    assert storage.get_thread("t").metadata == TRICKY  # type: ignore[union-attr]
    assert storage.update_thread("t", metadata={"x": {}}).metadata == {**TRICKY, "x": {}}
    merged = storage.merge_working_memory(TRICKY, scope="resource", resource_id="r")
    assert merged == {k: v for k, v in TRICKY.items()}
    assert json.loads(storage.get_working_memory(scope="resource", resource_id="r")) == TRICKY  # type: ignore[arg-type]
    merged = storage.merge_working_memory(TRICKY, scope="thread", resource_id="r", thread_id="t")
    assert json.loads(storage.get_working_memory(scope="thread", thread_id="t")) == TRICKY  # type: ignore[arg-type]
    for key in ("empty_list", "empty_object"):
        assert type(merged[key]) is type(TRICKY[key])


# -- the contract, compared with the reference adapter ------------------------------------


def _view(value: Any) -> Any:
    """Records with the timestamps each adapter takes from its own clock replaced by ``"now"``."""
    if isinstance(value, Resource | Thread):
        fields = {f: getattr(value, f) for f in value.__slots__}  # type: ignore[union-attr]
        for name in ("created_at", "updated_at"):
            if fields[name] > T0 + timedelta(days=30):
                fields[name] = "now"
        return (type(value).__name__, fields)
    if isinstance(value, workmem.ThreadPage):
        return ([_view(t) for t in value.threads], value.total, value.page, value.per_page, value.has_more)
    return value


def _script(store: MemoryStorage) -> list[Any]:
    out: list[Any] = []

    def attempt(fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            out.append(_view(fn(*args, **kwargs)))
        except WorkmemError as exc:
            out.append(type(exc).__name__)

    attempt(store.get_resource, "u1")
    attempt(store.update_resource, "u1", metadata={"a": 1})
    attempt(store.update_resource, "u1", working_memory="# Profile", metadata={"b": []})
    attempt(store.update_resource, "u1", metadata=None)
    attempt(store.update_resource, "u1", working_memory=None)
    attempt(store.save_resource, Resource("u2", "text", None, T0, T0))
    attempt(store.get_resource, "u2")
    for i in range(6):
        attempt(store.save_thread, Thread(f"th{i % 4}", "u1", f"title {i}", {"i": i}, T0 + timedelta(hours=i % 3), T0))
    attempt(store.save_thread, Thread("th0", "u2", "steal"))
    attempt(store.get_thread, "th0", resource_id="u2")
    attempt(store.get_thread, "th0", resource_id="u1")
    attempt(store.update_thread, "th1", title="renamed")
    attempt(store.update_thread, "th1", metadata={"extra": {"deep": [1]}})
    attempt(store.update_thread, "nope", title="x")
    attempt(store.list_threads, "u1", order_by="created_at", direction="asc")
    attempt(store.list_threads, "u1", page=1, per_page=3)
    attempt(store.list_threads, "u1", per_page=None)
    attempt(store.list_threads, "u1", page=5, per_page=3)
    attempt(store.list_threads, "nobody")
    attempt(store.merge_working_memory, {"a": {"b": 1}}, scope="resource", resource_id="u3")
    attempt(store.merge_working_memory, {"a": {"c": 2}, "x": [1]}, scope="resource", resource_id="u3")
    attempt(store.merge_working_memory, {"a": None}, scope="resource", resource_id="u3")
    attempt(store.merge_working_memory, {"a": 1}, scope="resource", resource_id="u2")  # "text" is not JSON
    attempt(store.get_resource, "u2")
    attempt(store.merge_working_memory, {"k": 1}, scope="thread", thread_id="th2")
    attempt(store.merge_working_memory, {"k": 1}, scope="thread", thread_id="th2", resource_id="u2")
    attempt(store.merge_working_memory, {"k": 1}, scope="thread", thread_id="missing")
    attempt(store.set_working_memory, "# md", scope="thread", thread_id="th3", resource_id="u1")
    attempt(store.get_working_memory, scope="thread", thread_id="th3")
    attempt(store.get_working_memory, scope="thread", thread_id="th3", resource_id="u2")
    attempt(store.get_working_memory, scope="resource", resource_id="nobody")
    attempt(store.delete_thread, "th2")
    attempt(store.delete_thread, "th2")
    attempt(store.get_thread, "th2")
    attempt(store.list_threads, "u1", per_page=2, direction="asc")
    attempt(store.get_resource, "")
    attempt(store.list_threads, "u1", page=-1)
    return out


def test_behaves_like_the_reference_adapter(storage: UpstashStorage) -> None:
    expected = _script(ReferenceStorage())
    assert _script(storage) == expected
    assert "ThreadOwnershipError" in expected and "WorkingMemoryFormatError" in expected


def test_updates_move_updated_at_and_keep_created_at(storage: UpstashStorage) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    saved = storage.save_thread(Thread("t", "r", "a", None, T0, T0))
    assert saved.updated_at == T0
    again = storage.save_thread(Thread("t", "r", "b", {"m": 1}, T0 + timedelta(days=1), T0))
    assert again.created_at == T0 and again.updated_at > before and again.title == "b"
    listed = storage.list_threads("r", order_by="updated_at")
    assert [t.updated_at for t in listed.threads] == [again.updated_at]
    resource = storage.update_resource("r", working_memory="x")
    assert resource.created_at == resource.updated_at > before


def test_stored_text_that_is_not_an_object_is_left_alone(storage: UpstashStorage) -> None:
    storage.update_resource("r", working_memory="[1, 2]")
    with pytest.raises(WorkingMemoryFormatError):
        storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
    assert storage.get_resource("r").working_memory == "[1, 2]"  # type: ignore[union-attr]
    with pytest.raises(ThreadNotFoundError):
        storage.merge_working_memory({"a": 1}, scope="thread", thread_id="none")
    storage.save_thread(Thread("t", "owner"))
    with pytest.raises(ThreadOwnershipError):
        storage.merge_working_memory({"a": 1}, scope="thread", thread_id="t", resource_id="other")
    assert storage.get_thread("t").metadata is None  # type: ignore[union-attr]


@pytest.mark.parametrize("order_by", ["created_at", "updated_at"])
@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_pages_never_overlap_or_skip(storage: UpstashStorage, order_by: str, direction: str) -> None:
    reference = ReferenceStorage()
    ids = [
        "a",
        "B",
        "b",
        "é",
        "z",
        "ä",
        "😀",
        "a:b",
        "a*",
        "10",
        "9",
        "ab",
        "aa",
        "-",
        "_",
        "Z",
        "t 1",
        "t\u007f1",
        "\U0010ffff",
    ]
    for n, thread_id in enumerate(ids):
        created = T0 + timedelta(milliseconds=n % 3)  # many ties: the id breaks them
        thread = Thread(thread_id, "r", f"t{n}", None, created, T0 + timedelta(milliseconds=n % 2))
        storage.save_thread(thread)
        reference.save_thread(thread)
    storage.save_thread(Thread("other", "r2", "", None, T0, T0))
    expected = reference.list_threads("r", per_page=None, order_by=order_by, direction=direction)  # type: ignore[arg-type]
    seen: list[str] = []
    for page in range(6):
        got = storage.list_threads("r", page=page, per_page=4, order_by=order_by, direction=direction)  # type: ignore[arg-type]
        want = reference.list_threads("r", page=page, per_page=4, order_by=order_by, direction=direction)  # type: ignore[arg-type]
        assert got == want
        seen += [t.id for t in got.threads]
    assert seen == [t.id for t in expected.threads]
    assert len(set(seen)) == len(ids) == expected.total


# -- concurrency ----------------------------------------------------------------------------


def _parallel(count: int, work: Any) -> list[Any]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(work, range(count)))


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_concurrent_merges_keep_every_key(upstash_url: str, storage: UpstashStorage, scope: str) -> None:
    storage.save_thread(Thread("shared", "r"))
    workers = 16

    def work(n: int) -> None:
        with workmem.connect(upstash_url) as own:
            for round_ in range(3):
                own.merge_working_memory(
                    {f"w{n}": {"round": round_, "list": [n] * round_}, "last": n},
                    scope=scope,  # type: ignore[arg-type]
                    resource_id="r",
                    thread_id="shared" if scope == "thread" else None,
                )

    _parallel(workers, work)
    stored = json.loads(storage.get_working_memory(scope=scope, resource_id="r", thread_id="shared"))  # type: ignore[arg-type]
    assert {k for k in stored if k.startswith("w")} == {f"w{n}" for n in range(workers)}
    assert all(stored[f"w{n}"] == {"round": 2, "list": [n, n]} for n in range(workers))


def test_racing_creates_with_different_owners_have_one_winner(upstash_url: str, storage: UpstashStorage) -> None:
    won: dict[str, int] = {}
    for thread_id in ("race-1", "race-2", "race-3"):

        def work(n: int, thread_id: str = thread_id) -> str | None:
            with workmem.connect(upstash_url) as own:
                try:
                    own.save_thread(Thread(thread_id, f"owner-{n}", f"by {n}"))
                    return f"owner-{n}"
                except ThreadOwnershipError:
                    return None

        winners = [w for w in _parallel(16, work) if w is not None]
        assert len(winners) == 1
        stored = storage.get_thread(thread_id)
        assert stored is not None and stored.resource_id == winners[0] and stored.title == f"by {winners[0][6:]}"
        won[winners[0]] = won.get(winners[0], 0) + 1
    for n in range(16):
        page = storage.list_threads(f"owner-{n}")
        assert page.total == len(page.threads) == won.get(f"owner-{n}", 0)


def test_index_matches_the_documents_after_concurrent_writes(
    bridge: Bridge, upstash_url: str, upstash_prefix: str, storage: UpstashStorage
) -> None:
    import random

    def work(n: int) -> None:
        rng = random.Random(n)
        with workmem.connect(upstash_url) as own:
            for _ in range(25):
                thread_id, owner = f"t{rng.randrange(12)}", f"r{rng.randrange(3)}"
                op = rng.randrange(4)
                try:
                    if op == 0:
                        own.save_thread(Thread(thread_id, owner, "x", {"n": n}))
                    elif op == 1:
                        own.update_thread(thread_id, title=f"by {n}")
                    elif op == 2:
                        own.delete_thread(thread_id)
                    else:
                        own.merge_working_memory({str(n): n}, scope="thread", thread_id=thread_id)
                except (ThreadOwnershipError, ThreadNotFoundError):
                    pass

    _parallel(8, work)
    owners = thread_keys(bridge, upstash_prefix)
    for owner in ("r0", "r1", "r2"):
        for order_by in ("created_at", "updated_at"):
            page = storage.list_threads(owner, per_page=None, order_by=order_by)  # type: ignore[arg-type]
            assert page.total == sum(1 for o in owners.values() if o == owner)
            assert {t.id for t in page.threads} == {t for t, o in owners.items() if o == owner}
    assert storage.reindex().removed == 0


# -- interop with the TypeScript adapter ---------------------------------------------------


def test_reindex_picks_up_threads_written_by_typescript(
    bridge: Bridge, storage: UpstashStorage, upstash_prefix: str
) -> None:
    # As @mastra/upstash writes them: no index, metadata native or JSON text, extra fields.
    p = upstash_prefix
    raw_set(bridge, p + "mastra_threads:id:ts-1", json.dumps({
        "id": "ts-1", "resourceId": "res", "title": "From TS", "metadata": {"workingMemory": '{"a":1}'},
        "createdAt": "2025-01-02T03:04:05.678Z", "updatedAt": "2025-01-03T00:00:00.000Z",
        "lastMessageAt": "2025-01-03T00:00:00.000Z",
    }))  # fmt: skip
    raw_set(bridge, p + "mastra_threads:id:ts-2", json.dumps({
        "id": "ts-2", "resourceId": "res", "metadata": '{"k":"v"}',
        "createdAt": int(T0.timestamp() * 1000) + 1, "updatedAt": "2025-01-02T03:04:05.679Z",
    }))  # fmt: skip
    raw_set(bridge, p + "mastra_resources:res", json.dumps({
        "id": "res", "workingMemory": "# Hi", "metadata": '{"plan":"pro"}',
        "createdAt": "2025-01-02T03:04:05.678Z", "updatedAt": "2025-01-02T03:04:05.678Z",
    }))  # fmt: skip
    storage.save_thread(Thread("py-1", "res", "From Python", None, T0 - timedelta(days=1), T0))
    assert storage.list_threads("res").total == 1  # the TS threads are not indexed yet
    assert storage.get_resource("res") == Resource("res", "# Hi", {"plan": "pro"}, T0, T0)
    ts2 = storage.get_thread("ts-2")
    assert (
        ts2 is not None
        and ts2.metadata == {"k": "v"}
        and ts2.title == ""
        and ts2.created_at == T0 + timedelta(milliseconds=1)
    )

    result = storage.reindex()
    assert (result.threads, result.removed) == (3, 0)
    page = storage.list_threads("res", order_by="created_at", direction="asc")
    assert [t.id for t in page.threads] == ["py-1", "ts-1", "ts-2"] and page.total == 3
    assert storage.get_working_memory(scope="thread", thread_id="ts-1") == '{"a":1}'

    # workmem keeps the fields it does not know when it rewrites a document.
    storage.merge_working_memory({"b": 2}, scope="thread", thread_id="ts-1")
    doc = json.loads(raw_get(bridge, p + "mastra_threads:id:ts-1"))
    assert doc["lastMessageAt"] == "2025-01-03T00:00:00.000Z"
    assert json.loads(doc["metadata"]["workingMemory"]) == {"a": 1, "b": 2}

    # The TS adapter deletes one thread and moves another to a new owner: stale entries until reindex().
    client = raw_client(bridge)
    client.delete(p + "mastra_threads:id:py-1")  # type: ignore[attr-defined]
    client.close()  # type: ignore[attr-defined]
    moved = json.loads(raw_get(bridge, p + "mastra_threads:id:ts-2"))
    raw_set(bridge, p + "mastra_threads:id:ts-2", json.dumps({**moved, "resourceId": "elsewhere"}))
    page = storage.list_threads("res")
    assert [t.id for t in page.threads] == ["ts-1"]  # stale entries are never returned
    result = storage.reindex()
    assert result.removed == 4  # py-1 and ts-2, each from both indexes of "res"
    assert storage.list_threads("res").total == 1
    assert [t.id for t in storage.list_threads("elsewhere").threads] == ["ts-2"]
    assert storage.reindex() == type(result)(2, 0)


# -- retries ------------------------------------------------------------------------------------


def test_a_write_replayed_after_a_lost_response_is_harmless(upstash_url: str) -> None:
    store = workmem.connect(upstash_url + "&retry_interval=0.01")
    assert isinstance(store, UpstashStorage)
    try:
        with losing_script_responses(store) as lost:
            created = store.save_thread(Thread("t", "r", "first", None, T0, T0))  # applied, response lost, replayed
            assert lost and created.resource_id == "r"
            assert store.get_thread("t") == Thread("t", "r", "first", None, T0, T0)
            lost.clear()
            merged = store.merge_working_memory({"n": 1, "l": [1]}, scope="resource", resource_id="r")
            assert lost and merged == {"n": 1, "l": [1]}
            assert json.loads(store.get_working_memory(scope="resource", resource_id="r")) == {"n": 1, "l": [1]}  # type: ignore[arg-type]
    finally:
        store.close()
    # The script itself: replaying an applied compare-and-set succeeds without changing anything.
    with workmem.connect(upstash_url) as again:
        assert isinstance(again, UpstashStorage)
        key = again.keys.resource("replay")
        args = ["0", "", '{"id":"replay"}']
        assert again._client.run(CAS_SET, [key], args) == [1]
        assert again._client.run(CAS_SET, [key], args) == [1]
        assert again._client.run(CAS_SET, [key], ["0", "", '{"id":"other"}'])[0] == 0
