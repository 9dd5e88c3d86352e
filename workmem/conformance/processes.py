"""Optional checks across processes: atomicity between processes and persistence.

They need a URL (a factory cannot be handed to another process) and run only
when the adapter declares the capability; otherwise they are reported skipped.
The worker processes drive the API the run drives (``sync`` or ``async``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from workmem.incidents import note
from workmem.records import Thread
from workmem.registry import builtin_schemes, resolve
from workmem.urls import scheme_of

from .apis import Api
from .registry import CheckContext, CheckSkipped, check

__all__ = ["PROCESSES", "spawn"]

PROCESSES = 4
MERGES_PER_PROCESS = 4


def _url(ctx: CheckContext) -> str:
    if ctx.target.url is None:
        raise CheckSkipped("needs a URL: a connection factory cannot be used from another process")
    return ctx.target.url


def _adapter_of(url: str) -> str | None:
    """``module:Class`` for a scheme registered at run time in this process (workers must register it too)."""
    scheme = scheme_of(url)
    if scheme in builtin_schemes():
        return None
    cls = resolve(url)
    return f"{cls.__module__}:{cls.__qualname__}"


def spawn(
    jobs: list[dict[str, Any]],
    timeout: float = 120.0,
    *,
    api: Api = "sync",
    started: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Run each job in its own Python process (started together); their JSON results in order.

    The workers see this process's ``sys.path`` and the adapter of any scheme
    registered here with :func:`workmem.register`, and use the same ``api``.
    ``started`` is called once every worker has connected and been told to go
    (so that work in this process can start with them).
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    jobs = [{**job, "adapter": _adapter_of(job["url"]), "api": api} for job in jobs]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "workmem.conformance.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,  # unbuffered: reading the "ready" line must not swallow the result behind it
            env=env,
        )
        for _ in jobs
    ]
    try:
        for proc, job in zip(procs, jobs, strict=True):
            assert proc.stdin is not None
            proc.stdin.write((json.dumps(job) + "\n").encode())
            proc.stdin.flush()
        # A start barrier: every worker has imported workmem and connected before any begins.
        for proc in procs:
            assert proc.stdout is not None
            proc.stdout.readline()  # "ready", or "" if the worker already failed (its result says why)
        for proc in procs:
            assert proc.stdin is not None
            try:
                proc.stdin.write(b"go\n")
                proc.stdin.close()
            except BrokenPipeError:  # the worker failed before the start; its result says why
                pass
            proc.stdin = None  # communicate() below must not touch the closed pipe
        if started is not None:
            started()
        results = []
        for proc in procs:
            try:
                raw_out, raw_err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise AssertionError("a worker process did not finish in time") from None
            out, err = raw_out.decode(errors="replace"), raw_err.decode(errors="replace")
            lines = out.strip().splitlines()
            assert proc.returncode == 0 and lines, f"a worker process failed: {err.strip()[-2000:]}"
            result = json.loads(lines[-1])
            for kind, message in result.pop("incidents", []):  # the check is reported by them
                note(kind, f"in a worker process: {message}")
            results.append(result)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


@check(
    "cross_process_atomic",
    "owner races and merges stay atomic between separate processes",
    capability="cross_process_atomic",
)
def cross_process_atomic(ctx: CheckContext) -> None:
    url = _url(ctx)
    p = ctx.prefix()
    rid, tid, raced = p + "r", p + "t", p + "raced"
    ctx.storage.save_thread(Thread(tid, rid))
    keys = [[f"p{i}k{j}" for j in range(MERGES_PER_PROCESS)] for i in range(PROCESSES)]
    jobs: list[dict[str, Any]] = []
    for i in range(PROCESSES):
        # Each process races the others' creates at the start, then their merges: two races, one process each.
        scope_ids = {"scope": "resource", "resource_id": rid} if i % 2 else {"scope": "thread", "thread_id": tid}
        create = {"op": "create_thread", "thread_id": raced, "resource_id": f"{p}owner{i}", "title": f"by {i}"}
        merge = {"op": "merge", "ids": scope_ids, "patches": [{k: i, "shared": {k: True}} for k in keys[i]]}
        jobs.append({"url": url, "op": "steps", "steps": [create, merge]})
    results = spawn(jobs, api=ctx.target.api)
    broken = [r for r in results if not r.get("ok")]
    assert not broken, f"a process creating a thread and merging failed: {broken[0]}"
    creates = [r["results"][0] for r in results]  # each merge returned, or failed its process above
    for scope, ids, owners in (
        ("resource", {"resource_id": rid}, range(1, PROCESSES, 2)),
        ("thread", {"thread_id": tid}, range(0, PROCESSES, 2)),
    ):
        doc = json.loads(ctx.storage.get_working_memory(scope=scope, **ids) or "{}")  # type: ignore[arg-type]
        want = {k for i in owners for k in keys[i]}
        lost = sorted(want - set(doc)) + sorted(want - set(doc.get("shared") or {}))
        assert not lost, f"merges from separate processes were lost in {scope} scope: {lost[:8]}"
    winners = [i for i, r in enumerate(creates) if r.get("ok")]
    odd = [r for r in creates if not r.get("ok") and r.get("error") != "ThreadOwnershipError"]
    assert not odd, f"a racing create in another process failed: {odd[0]}"
    assert len(winners) == 1, (
        f"{len(winners)} of {PROCESSES} processes creating one thread with different owners succeeded"
    )
    stored = ctx.storage.get_thread(raced)
    assert stored is not None and stored.resource_id == f"{p}owner{winners[0]}", f"the stored owner is {stored!r}"


@check("persistence", "data outlives its connections and the process that wrote it", capability="persistent")
def persistence(ctx: CheckContext) -> None:
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    writer = ctx.open()
    writer.update_resource(rid, working_memory="# kept ✓", metadata={"kept": [1, {"deep": True}]})
    writer.save_thread(Thread(tid, rid, "kept"))
    writer.set_working_memory("thread memory ✓", scope="thread", thread_id=tid)
    ctx.target.close_all()
    want = {
        "resource_memory": "# kept ✓",
        "resource_metadata": {"kept": [1, {"deep": True}]},
        "thread_owner": rid,
        "thread_memory": "thread memory ✓",
    }
    if ctx.target.url is not None:
        job = {"url": ctx.target.url, "op": "read", "resource_id": rid, "thread_id": tid}
        got = spawn([job], api=ctx.target.api)[0]
        assert got == want, f"another process read {got!r} after the writer closed, expected {want!r}"
    reader = ctx.open()
    resource, thread = reader.get_resource(rid), reader.get_thread(tid)
    got = {
        "resource_memory": resource and resource.working_memory,
        "resource_metadata": resource and resource.metadata,
        "thread_owner": thread and thread.resource_id,
        "thread_memory": reader.get_working_memory(scope="thread", thread_id=tid),
    }
    assert got == want, f"a new connection read {got!r} after the writer closed, expected {want!r}"
