"""Real faults against real servers: killed connections, killed processes, restarted servers.

After each fault three things must hold: nothing is half applied (an owner
check, a record and its index entries, a multi-key merge are all or nothing),
the same storage object works again on its next call (nobody rebuilds
anything), and what was written before the fault is still there.

Merges are made checkable: every patch writes one new key
``"w<writer>n<n>": {"a": n, "b": n, "c": n}`` and overwrites ``"last<writer>"``
with the same object, so a partially applied patch would show as a missing or
mismatched sub-key, a lost acknowledged merge as a missing key. A merge whose
call failed may or may not have been applied (the commit can land just before
the connection dies) -- but never partly.

Everything runs on 127.0.0.1; each loop is bounded in count and in time.
Restarting the SHARED PostgreSQL or Redis of this machine would disturb other
test runs, so those two tests run only with ``WORKMEM_FAULT_RESTART=1``; a
private ``redis-server`` started by the test itself is restarted (and
SIGKILLed) always.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from servers import port_open, server_url
from upstash_fixtures import Bridge, delete_prefix, raw_client, stop_bridge

import workmem
from workmem.errors import BackendUnavailableError, ThreadOwnershipError
from workmem.records import Thread
from workmem.storage import MemoryStorage
from workmem.testing.upstash_bridge import spawn_bridge

RESTART = os.environ.get("WORKMEM_FAULT_RESTART", "").strip() == "1"
NEEDS_RESTART = pytest.mark.skipif(
    not RESTART, reason="restarts the shared server of this machine (disturbs other runs): set WORKMEM_FAULT_RESTART=1"
)


# -- checkable merges ------------------------------------------------------------------


def patch_of(writer: str, n: int) -> dict[str, Any]:
    """A patch that sets several keys at once: a new key and the writer's ``last`` key."""
    value = {"a": n, "b": n, "c": n}
    return {f"w{writer}n{n}": value, f"last{writer}": value}


@dataclass
class Ledger:
    """What one writer's calls reported: acknowledged merges, and merges whose outcome is unknown."""

    writer: str
    ok: list[int] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)


def check_document(doc: dict[str, Any], ledgers: list[Ledger]) -> None:
    """Every patch in ``doc`` is whole; every acknowledged one is there; ``last`` is a patch that could be last."""
    for key, value in doc.items():
        if key.startswith(("w", "last")):
            n = value.get("a") if isinstance(value, dict) else None
            assert value == {"a": n, "b": n, "c": n}, f"a partially applied patch is visible: {key}={value!r}"
    for ledger in ledgers:
        w = ledger.writer
        for n in ledger.ok:
            assert doc.get(f"w{w}n{n}") == {"a": n, "b": n, "c": n}, f"acknowledged merge w{w}n{n} is lost"
        present = {n for n in ledger.unknown if f"w{w}n{n}" in doc}
        extra = {int(k[len(f"w{w}n") :]) for k in doc if k.startswith(f"w{w}n")} - set(ledger.ok) - set(ledger.unknown)
        assert not extra, f"merges nobody made: {sorted(extra)}"
        applied = sorted(set(ledger.ok) | present)
        if applied:  # a writer is sequential: its last applied merge is the one "last" shows
            assert doc[f"last{w}"]["a"] == applied[-1], (w, doc[f"last{w}"], applied[-3:])


def run_threads(workers: list[Callable[[], None]]) -> list[BaseException]:
    """Run each worker in a thread; return what they raised."""
    errors: list[BaseException] = []

    def wrap(work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a worker did not finish in 120 s"
    return errors


def merger(
    storage: MemoryStorage, ledger: Ledger, count: int, deadline: float, scope: str, pause: float = 0.0
) -> Callable[[], None]:
    """A worker merging ``count`` checkable patches, tolerating only :class:`BackendUnavailableError`."""
    where: dict[str, Any] = (
        {"resource_id": "r"} if scope == "resource" else {"thread_id": "t", "resource_id": "owner-a"}
    )

    def work() -> None:
        for n in range(count):
            if time.monotonic() > deadline:
                return
            try:
                merged = storage.merge_working_memory(patch_of(ledger.writer, n), scope=scope, **where)  # type: ignore[arg-type]
            except BackendUnavailableError:
                ledger.unknown.append(n)
                time.sleep(pause)
                continue
            assert merged[f"w{ledger.writer}n{n}"] == {"a": n, "b": n, "c": n}
            ledger.ok.append(n)

    return work


def doc_of(storage: MemoryStorage, scope: str) -> dict[str, Any]:
    where: dict[str, Any] = {"resource_id": "r"} if scope == "resource" else {"thread_id": "t"}
    text = storage.get_working_memory(scope=scope, **where)  # type: ignore[arg-type]
    parsed = json.loads(text or "{}")
    assert isinstance(parsed, dict)
    return parsed


# -- PostgreSQL: connections terminated by the server -----------------------------------


def terminate(application_name: str, *, wait: bool = False) -> int:
    """``pg_terminate_backend`` every session of ``application_name``, from a separate admin connection.

    ``wait``: return only once those sessions are gone (PostgreSQL 14+), i.e. a kill *between* calls.
    """
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True, connect_timeout=5) as admin:
        row = admin.execute(
            f"SELECT count(pg_terminate_backend(pid{', 5000' if wait else ''})) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def postgres_storage(max_size: int = 4) -> Iterator[tuple[MemoryStorage, str]]:
    from postgres_schemas import fresh_schema_url

    app = f"wm_fault_{uuid.uuid4().hex[:10]}"
    with fresh_schema_url(application_name=app) as url, workmem.connect(url, max_size=max_size) as storage:
        yield storage, app


@pytest.mark.backend("postgres")
def test_postgres_connections_killed_between_calls() -> None:
    with postgres_storage() as (storage, app):
        storage.save_thread(Thread("t", "owner-a", "before"))
        ledger = Ledger("0")
        for n in range(6):
            assert terminate(app, wait=True) >= 1
            if n % 2:  # a read first, then a write; or a write first (writes are never retried)
                assert storage.get_thread("t").resource_id == "owner-a"  # type: ignore[union-attr]
            storage.merge_working_memory(patch_of("0", n), scope="resource", resource_id="r")
            ledger.ok.append(n)
            assert terminate(app, wait=True) >= 1
            with pytest.raises(ThreadOwnershipError):
                storage.save_thread(Thread("t", "owner-b", "stolen"))
            storage.update_thread("t", metadata={"round": n})
        check_document(doc_of(storage, "resource"), [ledger])
        thread = storage.get_thread("t")
        assert thread is not None and (thread.resource_id, thread.title, thread.metadata) == (
            "owner-a",
            "before",
            {"round": 5},
        )


@pytest.mark.backend("postgres")
def test_postgres_connections_killed_mid_operation() -> None:
    with postgres_storage(max_size=4) as (storage, app):
        storage.save_thread(Thread("t", "owner-a", "owned"))
        ledgers = [Ledger(str(w)) for w in range(4)]
        deadline = time.monotonic() + 60
        stolen: list[Thread] = []
        done = threading.Event()

        def thief() -> None:  # racing owner changes: each must be refused or fail, never succeed
            while not done.is_set() and time.monotonic() < deadline:
                with contextlib.suppress(ThreadOwnershipError, BackendUnavailableError):
                    stolen.append(storage.save_thread(Thread("t", "owner-b", "stolen")))

        kills: list[int] = []

        def killer() -> None:
            rng = random.Random()
            while not done.is_set() and len(kills) < 40 and time.monotonic() < deadline:
                time.sleep(rng.uniform(0.005, 0.04))
                kills.append(terminate(app))

        workers = [
            merger(storage, ledger, 60, deadline, ("resource", "thread")[int(ledger.writer) % 2]) for ledger in ledgers
        ]
        side = [threading.Thread(target=f, daemon=True) for f in (thief, killer)]
        for t in side:
            t.start()
        errors = run_threads(workers)
        done.set()
        for t in side:
            t.join(timeout=30)
        assert not errors, errors
        print(f"killed {sum(kills)} sessions; merges ok/unknown: {[(len(x.ok), len(x.unknown)) for x in ledgers]}")
        assert sum(kills) >= 5, f"the test killed too few sessions to mean anything: {kills}"
        assert any(ledger.unknown for ledger in ledgers), "no merge met a killed connection"
        assert not stolen, f"an owner check let another resource take the thread: {stolen}"
        # The same storage object, no rebuild: the first calls after the storm succeed.
        check_document(doc_of(storage, "resource"), ledgers[0::2])
        check_document(doc_of(storage, "thread"), ledgers[1::2])
        thread = storage.get_thread("t")
        assert thread is not None and (thread.resource_id, thread.title) == ("owner-a", "owned")
        assert storage.list_threads("owner-b").total == 0 and storage.list_threads("owner-a").total == 1
        storage.merge_working_memory({"after": 1}, scope="resource", resource_id="r")


@pytest.mark.backend("postgres")
@NEEDS_RESTART
def test_postgres_server_restart() -> None:
    version = next(iter(sorted(os.listdir("/etc/postgresql"))), "15") if os.path.isdir("/etc/postgresql") else "15"
    with postgres_storage() as (storage, _):
        storage.save_thread(Thread("t", "owner-a", "before"))
        storage.merge_working_memory(patch_of("0", 0), scope="resource", resource_id="r")
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"], check=True, timeout=120
        )
        wait_until_postgres_accepts()
        # The pool's connections all died with the server; the next calls replace them, at once.
        started = time.monotonic()
        check_document(doc_of(storage, "resource"), [Ledger("0", ok=[0])])
        assert storage.get_thread("t").resource_id == "owner-a"  # type: ignore[union-attr]
        assert time.monotonic() - started < 1.0, "the first call after the server is back waited"
        storage.merge_working_memory(patch_of("0", 1), scope="resource", resource_id="r")
        check_document(doc_of(storage, "resource"), [Ledger("0", ok=[0, 1])])


def wait_until_postgres_accepts(seconds: float = 60) -> None:
    """Wait until the server accepts a session (an open port is not enough: it may still be starting up)."""
    import psycopg

    deadline = time.monotonic() + seconds
    while True:
        try:
            psycopg.connect(server_url("postgres"), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# -- Upstash: the REST bridge killed, Redis killed and restarted -------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_bridge_on(redis_url: str, token: str, port: int) -> Bridge:
    """``python -m workmem.testing.upstash_bridge`` on a given port (so that it can come back on the same one)."""
    return spawn_bridge(redis_url, token=token, port=port)


def sigkill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


@dataclass
class UpstashFault:
    """A bridge of our own (random token, random prefix) that the test may kill and bring back."""

    redis_url: str
    token: str = field(default_factory=lambda: f"S3cr3t-{secrets.token_hex(8)}")
    prefix: str = field(default_factory=lambda: f"wm_fault_{secrets.token_hex(6)}:")
    port: int = field(default_factory=free_port)
    bridge: Bridge | None = None

    def start(self) -> Bridge:
        self.bridge = start_bridge_on(self.redis_url, self.token, self.port)
        return self.bridge

    def kill(self) -> None:
        assert self.bridge is not None
        sigkill(self.bridge.process)

    @property
    def url(self) -> str:
        assert self.bridge is not None
        return self.bridge.storage_url(self.prefix) + "&retries=0&timeout=5"


@contextlib.contextmanager
def upstash_fault(redis_url: str) -> Iterator[UpstashFault]:
    fault = UpstashFault(redis_url)
    fault.start()
    try:
        yield fault
    finally:
        if fault.bridge is not None and fault.bridge.process.poll() is not None:
            with contextlib.suppress(Exception):
                fault.start()
        if fault.bridge is not None and fault.bridge.process.poll() is None:
            with contextlib.suppress(Exception):
                delete_prefix(fault.bridge, fault.prefix)
            stop_bridge(fault.bridge)


def thread_writer(
    storage: MemoryStorage, w: int, count: int, deadline: float, failures: list[str]
) -> Callable[[], None]:
    """Creates, updates and deletes threads of two owners; a failed call is noted and the loop goes on."""

    def work() -> None:
        for i in range(count):
            if time.monotonic() > deadline:
                return
            tid, owner = f"t{w}-{i}", f"owner{i % 2}"
            try:
                storage.save_thread(Thread(tid, owner, f"title {i}", {"i": i}))
                storage.update_thread(tid, metadata={"updated": i})
                if i % 3 == 0:
                    storage.delete_thread(f"t{w}-{i - 3}")
            except BackendUnavailableError as exc:
                failures.append(str(exc))
                time.sleep(0.02)

    return work


def check_thread_index(storage: MemoryStorage, fault: UpstashFault) -> None:
    """Every listed thread exists, and each owner's index counts exactly its thread documents."""
    client: Any = raw_client(fault.bridge)  # type: ignore[arg-type]
    try:
        keys: list[str] = []
        cursor = 0
        while True:
            cursor, batch = client.scan(cursor, match=f"{fault.prefix}mastra_threads:id:*", count=1000)
            keys += batch
            if int(cursor) == 0:
                break
        owners = [json.loads(text)["resourceId"] for text in (client.mget(*keys) if keys else [])]
    finally:
        client.close()
    for owner in ("owner0", "owner1"):
        page = storage.list_threads(owner, per_page=None)
        assert page.total == len(page.threads) == owners.count(owner), (owner, page.total, len(page.threads))
        assert all(t.resource_id == owner for t in page.threads)


@pytest.mark.backend("upstash")
def test_upstash_bridge_killed_mid_run() -> None:
    with upstash_fault(server_url("redis")) as fault, workmem.connect(fault.url) as storage:
        storage.save_thread(Thread("t", "owner-a", "before"))
        ledgers = [Ledger("0"), Ledger("1")]
        failures: list[str] = []
        deadline = time.monotonic() + 60
        workers = [
            merger(storage, ledgers[0], 400, deadline, "resource", pause=0.02),
            merger(storage, ledgers[1], 400, deadline, "thread", pause=0.02),
            thread_writer(storage, 0, 400, deadline, failures),
            thread_writer(storage, 1, 400, deadline, failures),
        ]
        down: list[str] = []

        def chaos() -> None:
            rng = random.Random()
            for _ in range(3):
                time.sleep(rng.uniform(0.2, 0.6))
                fault.kill()
                try:  # while it is down, a call fails cleanly, the token masked
                    storage.get_thread("t")
                except BackendUnavailableError as exc:
                    down.append(str(exc))
                time.sleep(rng.uniform(0.1, 0.3))
                fault.start()

        errors = run_threads([*workers, chaos])
        assert not errors, errors
        print(
            f"bridge down 3x; failed thread writes {len(failures)}; merges ok/unknown: "
            f"{[(len(x.ok), len(x.unknown)) for x in ledgers]}"
        )
        assert len(down) == 3, down
        everything = down + failures + [m for ledger in ledgers for m in map(str, ledger.unknown)]
        assert not any(fault.token in text for text in everything)
        assert any(ledger.unknown for ledger in ledgers) or failures, "no call met the dead bridge"
        # Same storage object: works again, nothing half applied, record and index agree.
        check_document(doc_of(storage, "resource"), ledgers[:1])
        check_document(doc_of(storage, "thread"), ledgers[1:])
        check_thread_index(storage, fault)
        assert storage.get_thread("t").title == "before"  # type: ignore[union-attr]


@contextlib.contextmanager
def private_redis(directory: Path) -> Iterator[Callable[[], subprocess.Popen[str]]]:
    """A ``redis-server`` of this test only (append-only file, fsync always); yields a function (re)starting it."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("SKIPPED: no redis-server binary on PATH for a private Redis")
    port = free_port()
    processes: list[subprocess.Popen[str]] = []

    def start() -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
             "--appendfsync", "always", "--dir", str(directory), "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        processes.append(process)
        for _ in range(100):
            if port_open("127.0.0.1", port, timeout=0.1):
                return process
            time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    start.port = port  # type: ignore[attr-defined]
    try:
        yield start
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


@pytest.mark.backend("upstash")
def test_upstash_redis_killed_and_restarted_keeps_everything() -> None:
    with tempfile.TemporaryDirectory(prefix="wm_redis_") as directory, private_redis(Path(directory)) as start:
        redis = start()
        redis_url = f"redis://127.0.0.1:{start.port}"  # type: ignore[attr-defined]
        with upstash_fault(redis_url) as fault, workmem.connect(fault.url) as storage:
            storage.save_thread(Thread("t", "owner-a", "before"))
            ledgers = [Ledger("0"), Ledger("1")]
            failures: list[str] = []
            deadline = time.monotonic() + 60
            workers = [
                merger(storage, ledgers[0], 300, deadline, "resource", pause=0.02),
                merger(storage, ledgers[1], 300, deadline, "thread", pause=0.02),
                thread_writer(storage, 0, 300, deadline, failures),
            ]
            restarts: list[subprocess.Popen[str]] = [redis]

            def chaos() -> None:
                rng = random.Random()
                for _ in range(2):
                    time.sleep(rng.uniform(0.2, 0.5))
                    restarts[-1].kill()  # SIGKILL: no shutdown, no final save
                    restarts[-1].wait(timeout=10)
                    time.sleep(rng.uniform(0.05, 0.2))
                    restarts.append(start())

            errors = run_threads([*workers, chaos])
            assert not errors, errors
            print(
                f"redis killed {len(restarts) - 1}x; failed thread writes {len(failures)}; merges ok/unknown: "
                f"{[(len(x.ok), len(x.unknown)) for x in ledgers]}"
            )
            assert len(restarts) == 3
            assert not any(fault.token in text for text in failures)
            check_document(doc_of(storage, "resource"), ledgers[:1])
            check_document(doc_of(storage, "thread"), ledgers[1:])
            check_thread_index(storage, fault)
            assert storage.get_thread("t").title == "before"  # type: ignore[union-attr]


@pytest.mark.backend("upstash")
@NEEDS_RESTART
def test_upstash_shared_redis_restart_recovers() -> None:
    """The shared Redis keeps nothing on disk: a restart wipes it, so only recovery is checked, not persistence."""
    from backends import shared_bridge

    redis_url = server_url("redis")
    session = shared_bridge()  # the bridge every other Upstash test of this run uses: it must survive too
    session_client: Any = raw_client(session, rest_retries=0)
    with upstash_fault(redis_url) as fault, workmem.connect(fault.url) as storage:
        storage.save_thread(Thread("t", "owner-a", "before"))
        run_threads([lambda: session_client.ping() for _ in range(16)])  # idle pooled connections to Redis
        subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "shutdown", "nosave"], check=False, timeout=30)
        with pytest.raises(BackendUnavailableError) as down:
            storage.get_thread("t")
        assert fault.token not in str(down.value)
        subprocess.run(
            ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", "6379", "--save", "",
             "--appendonly", "no"],
            check=True, timeout=30,
        )  # fmt: skip
        for _ in range(60):
            if port_open("127.0.0.1", 6379):
                break
            time.sleep(0.5)
        storage.save_thread(Thread("t2", "owner-a", "after"))  # the scripts are reloaded (NOSCRIPT -> EVAL)
        assert storage.get_thread("t2").title == "after"  # type: ignore[union-attr]
        assert storage.list_threads("owner-a").total == 1
        # No request fails on a pooled connection that died with the old server.
        assert [session_client.ping() for _ in range(40)] == ["PONG"] * 40
    session_client.close()


# -- libSQL: a writer process killed mid-transaction -------------------------------------

_WRITER = """
import sys, workmem
from workmem.records import Thread
path, name = sys.argv[1], sys.argv[2]
storage = workmem.connect("file:" + path, busy_timeout=30)
print("ready", flush=True)
n = 0
while True:
    value = {"a": n, "b": n, "c": n}
    patch = {f"w{name}n{n}": value, f"last{name}": value}
    storage.merge_working_memory(patch, scope="resource", resource_id="r")
    storage.merge_working_memory(patch, scope="thread", thread_id="t")
    storage.save_thread(Thread(f"{name}-{n}", "owner", "x", {"n": n}))
    if n % 3 == 0:
        storage.delete_thread(f"{name}-{n - 3}")
    print(n, flush=True)
    n += 1
"""


class Writer:
    """A writer process and the merges it reported done (each line it prints is one finished round)."""

    def __init__(self, path: Path, name: str) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.done: list[int] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == "ready":
                self.ready.set()
            elif line.strip().isdigit():
                self.done.append(int(line))

    def wait_for(self, rounds: int, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while len(self.done) < rounds:
            assert self.process.poll() is None, self.process.stderr.read() if self.process.stderr else ""
            assert time.monotonic() < end, f"writer {self.name} made no progress: {len(self.done)} rounds"
            time.sleep(0.005)

    def kill(self) -> Ledger:
        sigkill(self.process)
        self._reader.join(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        # Rounds it reported are done; the round it was in may or may not have landed.
        finished = list(self.done)
        ledger = Ledger(self.name, ok=finished)
        ledger.unknown = [finished[-1] + 1 if finished else 0]
        return ledger


def libsql_consistent(path: Path, ledgers: list[Ledger]) -> None:
    from raw_sqlite import raw

    conn = raw(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        counts = [
            conn.execute(f'SELECT count(*) FROM mastra_threads {how} WHERE "resourceId" = ?', ("owner",)).fetchone()[0]
            for how in (
                "NOT INDEXED",
                "INDEXED BY workmem_threads_resourceid_createdat_idx",
                "INDEXED BY workmem_threads_resourceid_updatedat_idx",
            )
        ]
    finally:
        conn.close()
    assert len(set(counts)) == 1, f"table and indexes disagree: {counts}"
    with workmem.connect(f"file:{path}", busy_timeout=5) as storage:  # a new writer proceeds: no stale lock
        page = storage.list_threads("owner", per_page=None)
        assert page.total == len(page.threads) == counts[0]
        started = time.monotonic()
        storage.merge_working_memory({"probe": {"a": 0, "b": 0, "c": 0}}, scope="resource", resource_id="r")
        assert time.monotonic() - started < 5
        check_document(doc_of(storage, "resource"), ledgers)
        check_document(doc_of(storage, "thread"), ledgers)


@pytest.mark.backend("libsql")
def test_libsql_writer_processes_killed_mid_transaction(tmp_path: Path) -> None:
    path = tmp_path / "faults.db"
    with workmem.connect(f"file:{path}") as storage:
        storage.save_thread(Thread("t", "owner-t", "merges"))
    rng = random.Random()
    ledgers: list[Ledger] = []
    for round_ in range(5):
        writers = [Writer(path, f"{round_}x{i}") for i in range(2)]
        for writer in writers:
            assert writer.ready.wait(60), "a writer did not start"
        victim, survivor = rng.sample(writers, 2)
        victim.wait_for(rng.randint(2, 15))
        time.sleep(rng.uniform(0, 0.01))
        ledgers.append(victim.kill())
        before = len(survivor.done)  # the survivor goes on: the victim left no lock behind
        survivor.wait_for(before + 5)
        ledgers.append(survivor.kill())
        libsql_consistent(path, ledgers)
    print(f"killed writers after rounds: {[len(x.ok) for x in ledgers]}")
    with workmem.connect(f"file:{path}") as storage:
        assert storage.get_thread("t").resource_id == "owner-t"  # type: ignore[union-attr]


def test_the_merge_check_itself_catches_partial_and_lost_merges() -> None:
    """The checker is not vacuous: a half-applied patch, a lost acknowledged merge, an invented one all fail it."""
    ledger = Ledger("0", ok=[0, 1], unknown=[2])
    whole = {**patch_of("0", 0), **patch_of("0", 1)}
    check_document(whole, [ledger])
    check_document({**whole, **patch_of("0", 2)}, [ledger])  # the unknown one landed, whole
    bad = [
        {**whole, "w0n1": {"a": 1, "b": 1}},  # a sub-key missing
        {**whole, "last0": {"a": 1, "b": 0, "c": 1}},  # mixed values
        patch_of("0", 1),  # acknowledged w0n0 lost
        {**whole, **patch_of("0", 3)},  # a merge nobody made
        {**whole, **patch_of("0", 2), "last0": {"a": 1, "b": 1, "c": 1}},  # "last" older than what landed
    ]
    for doc in bad:
        with pytest.raises(AssertionError):
            check_document(doc, [ledger])
