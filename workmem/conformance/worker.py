"""A worker process for the cross-process checks: ``python -m workmem.conformance.worker``.

Reads one JSON job line from standard input (so a URL with a password never
shows in the process list), connects, prints ``ready``, waits for the parent's
``go`` line (a start barrier across all workers), runs the job and prints one
JSON result line. A job with ``"api": "async"`` connects with
:func:`workmem.connect_async` and runs through the suite's
:class:`~workmem.conformance.target.Target`, as the parent's checks do.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import workmem
from workmem.conformance.history import record_calls
from workmem.conformance.target import Target
from workmem.incidents import watching
from workmem.records import Thread
from workmem.urls import scheme_of

__all__ = ["main"]


def _job(storage: workmem.MemoryStorage, job: dict[str, Any]) -> dict[str, Any]:
    op = job["op"]
    if op == "steps":  # several jobs one after the other, on the one connection: a process fewer per job
        return {"ok": True, "results": [_job(storage, step) for step in job["steps"]]}
    if op == "merge":
        for patch in job["patches"]:
            storage.merge_working_memory(patch, **job["ids"])
        return {"ok": True}
    if op == "create_thread":
        try:
            storage.save_thread(Thread(job["thread_id"], job["resource_id"], job["title"]))
        except workmem.ThreadOwnershipError:
            return {"ok": False, "error": "ThreadOwnershipError"}
        return {"ok": True}
    if op == "history":
        events = record_calls(storage, job["calls"], job["worker"], job.get("seconds"))
        return {"ok": True, "events": [e.to_json() for e in events]}
    if op == "read":
        resource = storage.get_resource(job["resource_id"])
        thread = storage.get_thread(job["thread_id"])
        return {
            "resource_memory": None if resource is None else resource.working_memory,
            "resource_metadata": None if resource is None else resource.metadata,
            "thread_owner": None if thread is None else thread.resource_id,
            "thread_memory": storage.get_working_memory(scope="thread", thread_id=job["thread_id"]),
        }
    raise ValueError(f"unknown op {op!r}")


def main() -> int:
    job = json.loads(sys.stdin.readline())
    with watching() as seen:
        ready, result = _run(job)
    if not ready:
        print("ready")  # keep to the protocol: the parent reads one line before the result
    if seen:  # harness errors and unsupported operations, for the parent to report the check by
        result["incidents"] = [[i.kind, i.message] for i in seen]
    print(json.dumps(result))
    return 0


def _run(job: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    ready = False
    try:
        if job.get("adapter"):
            workmem.register(scheme_of(job["url"]), job["adapter"], clobber=True)
        target = Target(job["url"], job.get("api", "sync"))
        try:
            storage = target.open()
            print("ready", flush=True)
            ready = True
            sys.stdin.readline()  # "go"
            result = _job(storage, job)
        finally:
            target.close_all()
    except Exception as exc:
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return ready, result


if __name__ == "__main__":
    sys.exit(main())
