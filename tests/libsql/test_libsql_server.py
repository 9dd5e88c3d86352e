"""Remote libSQL against a REAL ``sqld`` 0.24.32: authentication, a killed and restarted server, concurrency.

Each test starts its own server (``tests/support/sqld.py``) on a free loopback port and stops
it by pid; without the binary they skip loudly as backend ``sqld``. The conformance
suite (create and owner races included) runs against the shared server in
``tests/conformance/test_conformance_backends.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pytest
from sqld import Sqld, jwt_keys, sign_jwt

import workmem
from workmem.errors import (
    RETRYABLE_ERRORS,
    BackendRefusedError,
    BackendUnavailableError,
    ThreadOwnershipError,
    WorkmemError,
)
from workmem.records import Thread

pytestmark = pytest.mark.backend("sqld")


@pytest.fixture
def server() -> Iterator[Sqld]:
    sqld = Sqld()
    try:
        yield sqld
    finally:
        sqld.close()


# -- authentication --------------------------------------------------------------------


@pytest.fixture(scope="module")
def keys() -> tuple[bytes, object]:
    return jwt_keys()


@pytest.fixture(scope="module")
def auth_server(keys: tuple[bytes, object]) -> Iterator[Sqld]:
    sqld = Sqld(jwt_public_key=keys[0])
    try:
        yield sqld
    finally:
        sqld.close()


def test_the_right_token_works_in_the_url_and_as_an_option(auth_server: Sqld, keys: tuple[bytes, object]) -> None:
    token = sign_jwt(keys[1], {"a": "rw"})
    with workmem.connect(f"{auth_server.url}&authToken={token}") as storage:
        storage.save_thread(Thread("t-auth", "r-auth", "by url"))
        assert token not in repr(storage)
    with workmem.connect(auth_server.url, auth_token=token) as storage:
        stored = storage.get_thread("t-auth")
        assert stored is not None and stored.title == "by url"


def _tokens(keys: tuple[bytes, object]) -> dict[str, str | None]:
    _, stranger = jwt_keys()
    return {
        "wrong key": sign_jwt(stranger, {"a": "rw"}),
        "expired": sign_jwt(keys[1], {"a": "rw", "exp": int(time.time()) - 3600}),
        "not a JWT": "not-a-jwt-secret-0123456789",
        "missing": None,
    }


@pytest.mark.parametrize("case", ["wrong key", "expired", "not a JWT", "missing"])
def test_a_refused_token_is_one_clear_non_retryable_error_with_the_token_masked(
    auth_server: Sqld, keys: tuple[bytes, object], case: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = _tokens(keys)[case]
    url = auth_server.url + (f"&authToken={token}" if token else "")
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(WorkmemError) as raised:
        workmem.connect(url)
    error = raised.value
    assert type(error) is BackendRefusedError, repr(error)
    assert not isinstance(error, RETRYABLE_ERRORS)
    assert "authentication failed" in str(error) and "authToken" in str(error)
    assert "401" in str(error.__cause__)  # the server's own answer is kept
    assert time.monotonic() - started < 5
    if token:
        shown = [str(error), repr(error), str(error.__cause__), repr(error.__cause__), caplog.text]
        assert not any(token in text for text in shown)
        assert not any(token[-12:] in text for text in shown)  # not even its signature's tail


def test_a_read_only_token_is_refused_as_permission_not_authentication(keys: tuple[bytes, object]) -> None:
    sqld = Sqld(jwt_public_key=keys[0])  # an empty database: opening has tables to create
    try:
        with pytest.raises(BackendRefusedError, match="permission denied") as raised:
            workmem.connect(sqld.url, auth_token=sign_jwt(keys[1], {"a": "ro"}))
        assert "authentication" not in str(raised.value)
    finally:
        sqld.close()


def _writes(storage: workmem.MemoryStorage) -> dict[str, Callable[[], object]]:
    """Every kind of write, those sent as one statement outside a transaction (the wheel's cursor stream) first."""
    return {
        "save_thread": lambda: storage.save_thread(Thread("t-ro-new", "r-ro")),
        "set_working_memory": lambda: storage.set_working_memory("x", scope="resource", resource_id="r-ro"),
        "create_thread": lambda: storage.create_thread(Thread("t-ro-other", "r-ro")),
        "update_thread": lambda: storage.update_thread("t-ro", title="changed"),
        "merge_working_memory": lambda: storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r-ro"),
        "delete_thread": lambda: storage.delete_thread("t-ro"),
    }


@pytest.mark.parametrize("create", [True, False])
def test_a_read_only_token_reads_a_ready_database_and_every_write_is_refused_not_unavailable(
    auth_server: Sqld, keys: tuple[bytes, object], create: bool
) -> None:
    # sqld cuts the cursor stream of a write it refuses ("unexpected EOF"): that must not read as an outage.
    with workmem.connect(auth_server.url, auth_token=sign_jwt(keys[1], {"a": "rw"})) as writer:
        writer.save_thread(Thread("t-ro", "r-ro", "kept"))
    # Nothing to create: opening is a read, which the token may do, whatever create says.
    with workmem.connect(auth_server.url, auth_token=sign_jwt(keys[1], {"a": "ro"}), create=create) as reader:
        for name, write in _writes(reader).items():
            with pytest.raises(WorkmemError) as raised:
                write()
            assert type(raised.value) is BackendRefusedError, f"{name}: {raised.value!r}"
            assert "permission denied" in str(raised.value) and "403" in str(raised.value.__cause__), name
            stored = reader.get_thread("t-ro")  # the storage reads on, through every pooled connection
            assert stored is not None and stored.title == "kept", name
        assert reader.get_thread("t-ro-new") is None and reader.get_resource("r-ro") is None


def test_a_cut_write_is_a_refusal_only_when_the_server_refuses_the_token_a_write() -> None:
    from workmem.adapters.libsql.remote import cut_write

    cut = ValueError(
        "Hrana: `cursor error: `error reading a body from connection: unexpected EOF during chunk size line``"
    )
    forbidden = ValueError('Hrana: `api error: `status=403 Forbidden, body={"error":"Authorization forbidden"}``')
    gone = ValueError("Hrana: `http error: `error trying to connect: tcp connect error: Connection refused``")
    probes: list[str] = []

    def probe(answer: Exception | None) -> Callable[[], None]:
        def ask() -> None:
            probes.append("asked")
            if answer is not None:
                raise answer

        return ask

    assert cut_write(cut, probe(forbidden)) is forbidden
    assert cut_write(cut, probe(gone)) is None  # the server crashed: the cut stays an outage (retryable)
    assert cut_write(cut, probe(None)) is None  # the token may write: a real cut
    assert len(probes) == 3
    assert cut_write(gone, probe(forbidden)) is None and len(probes) == 3  # not a cut: the server is not asked


# -- faults -------------------------------------------------------------------------------


def test_a_killed_server_is_a_fast_unavailable_error_and_a_restart_is_used_within_a_second(server: Sqld) -> None:
    storage = workmem.connect(server.url)
    try:
        storage.save_thread(Thread("t-fault", "r-fault", "before"))
        server.kill()
        for call in (lambda: storage.get_thread("t-fault"), lambda: storage.save_thread(Thread("t2", "r-fault"))):
            started = time.monotonic()
            with pytest.raises(BackendUnavailableError) as raised:
                call()
            assert time.monotonic() - started < 5, "a dead server must fail fast, not hang"
            assert "connect" in str(raised.value).lower() or "refused" in str(raised.value).lower(), raised.value
        server.start()
        restarted = time.monotonic()
        while True:
            try:
                stored = storage.get_thread("t-fault")
                break
            except BackendUnavailableError:
                assert time.monotonic() - restarted < 1.0, "the same storage must work within 1 s of the restart"
                time.sleep(0.02)
        assert stored is not None and stored.title == "before"
        storage.save_thread(Thread("t-after", "r-fault"))
        assert storage.list_threads("r-fault").total == 2
    finally:
        storage.close()


def test_writes_cut_by_restarts_apply_whole_or_not_at_all_and_never_twice(server: Sqld) -> None:
    storage = workmem.connect(server.url, busy_timeout=2)
    outcomes: dict[int, str] = {}
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            try:
                storage.merge_working_memory({f"a{i}": i, f"b{i}": i}, scope="resource", resource_id="r-cut")
                storage.save_thread(Thread(f"t-cut-{i}", "r-cut"))
                outcomes[i] = "ok"
            except RETRYABLE_ERRORS:
                outcomes[i] = "failed"
                time.sleep(0.01)
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(3):
            time.sleep(0.3)
            server.kill()
            time.sleep(0.1)
            server.start()
        time.sleep(0.3)
    finally:
        stop.set()
        writer.join(30)
    memory = storage.get_working_memory(scope="resource", resource_id="r-cut") or "{}"
    import json

    merged = json.loads(memory)
    page = storage.list_threads("r-cut", per_page=None)
    storage.close()
    assert "failed" in outcomes.values() and "ok" in outcomes.values(), outcomes  # the restarts did cut writes
    for i, outcome in outcomes.items():
        assert (f"a{i}" in merged) == (f"b{i}" in merged), f"merge {i} applied in half: {merged}"
        if outcome == "ok":
            assert merged[f"a{i}"] == i and f"t-cut-{i}" in {t.id for t in page.threads}
    assert page.total == len(page.threads)  # the kept count saw each insert once


# -- concurrency ----------------------------------------------------------------------------

WRITERS = 64
PROCESSES = 2


def _merge_many(url: str, first: int, count: int) -> None:
    """``count`` writers (threads, storages of their own) merging keys ``first..`` into both scopes."""
    storages = [workmem.connect(url) for _ in range(4)]
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def merge(i: int) -> None:
        try:
            barrier.wait(30)
            storage = storages[i % len(storages)]
            storage.merge_working_memory({f"k{first + i}": i}, scope="resource", resource_id="r-race")
            storage.merge_working_memory({f"k{first + i}": i}, scope="thread", thread_id="t-race", resource_id="r-race")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=merge, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for storage in storages:
        storage.close()
    if errors:
        raise errors[0]


def test_64_concurrent_merges_in_both_scopes_lose_nothing(server: Sqld) -> None:
    import json

    with workmem.connect(server.url) as storage:
        storage.save_thread(Thread("t-race", "r-race"))
    share = WRITERS // (PROCESSES + 1)
    here = WRITERS - share * PROCESSES  # keys 0..here-1 from this process, then share keys per other process
    with ProcessPoolExecutor(PROCESSES, mp_context=get_context("spawn")) as pool:
        others = [pool.submit(_merge_many, server.url, here + share * p, share) for p in range(PROCESSES)]
        _merge_many(server.url, 0, here)
        for other in others:
            other.result(180)
    want = {f"k{i}" for i in range(WRITERS)}
    with workmem.connect(server.url) as storage:
        for scope, kwargs in (("resource", {}), ("thread", {"thread_id": "t-race"})):
            text = storage.get_working_memory(scope=scope, resource_id="r-race", **kwargs)  # type: ignore[arg-type]
            assert set(json.loads(text or "{}")) == want, f"{scope} scope lost merges"


def _create(url: str, owner: int) -> str:
    try:
        with workmem.connect(url) as storage:
            storage.save_thread(Thread("t-contested", f"owner-{owner}", f"by {owner}"))
        return f"won {owner}"
    except ThreadOwnershipError:
        return "lost"


def test_exactly_one_of_racing_creates_with_different_owners_wins(server: Sqld) -> None:
    with ProcessPoolExecutor(4, mp_context=get_context("spawn")) as pool:
        results = list(pool.map(_create, [server.url] * 12, range(12)))
    winners = [r for r in results if r.startswith("won")]
    assert len(winners) == 1, results
    with workmem.connect(server.url) as storage:
        stored = storage.get_thread("t-contested")
    assert stored is not None and f"by {stored.resource_id.removeprefix('owner-')}" == stored.title
    assert winners[0] == f"won {stored.resource_id.removeprefix('owner-')}"


# -- error sorting: the messages sqld 0.24.32 and the libsql wheel sent in the runs above ---------------------

SQLD_MESSAGES = [
    # connect() with a wrong, expired or non-JWT token; without one
    ('Hrana: `api error: `status=401 Unauthorized, body={"error":"Unauthorized: `The JWT is invalid`"}``', "auth"),
    (
        'Hrana: `api error: `status=401 Unauthorized, body={"error":"Unauthorized: `Auth string does not conform '
        "to '<scheme> <token>' form`\"}``",
        "auth",
    ),
    # a write in a transaction with a read-only token
    (
        'Hrana: `api error: `status=403 Forbidden, body={"error":"Authorization forbidden: Current session '
        "doesn't not have Write permission to namespace default\"}``",
        "permission",
    ),
    # the server killed: before the request, and while answering
    ("Hrana: `http error: `error trying to connect: tcp connect error: Connection refused (os error 111)``", "gone"),
    (
        "Hrana: `cursor error: `cursor error: `error reading a body from connection: "
        "unexpected EOF during chunk size line```",
        "gone",
    ),
    # a transaction whose write lock sqld took back after 5 s (two threads of one process, before one writer per server)
    ('Hrana: `stream error: `Error { message: "Transaction timed out", code: "TRANSACTION_TIMEOUT" }``', "busy"),
    # named parameters bound by position (before ?N)
    (
        "Hrana: `cursor error: `error at step 0: (error code: ARGS_INVALID) `Arguments do not match SQL parameters: "
        "value for parameter :id not found```",
        "refused",
    ),
]


@pytest.mark.parametrize(("message", "kind"), SQLD_MESSAGES)
def test_errors_are_sorted_by_what_sqld_really_sends(message: str, kind: str) -> None:
    from workmem.adapters.libsql.storage import LibSQLStorage
    from workmem.errors import BackendBusyError

    storage = LibSQLStorage.__new__(LibSQLStorage)  # only what _driver_error reads
    storage._url, storage._token = "libsql://127.0.0.1:8080?tls=0", None
    error = storage._driver_error(ValueError(message))
    expected = {
        "auth": BackendRefusedError,
        "permission": BackendRefusedError,
        "refused": BackendRefusedError,
        "gone": BackendUnavailableError,
        "busy": BackendBusyError,
    }[kind]
    assert type(error) is expected, f"{message} -> {error!r}"
    if kind == "auth":
        assert str(error).startswith("libSQL authentication failed on libsql://127.0.0.1:8080?tls=0")
    if kind == "permission":
        assert str(error).startswith("libSQL permission denied on")
