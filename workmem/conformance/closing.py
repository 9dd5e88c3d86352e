"""What a closed storage does: ``close()`` may be repeated, and every later call raises ``StorageClosedError``.

The contract (:meth:`workmem.storage.MemoryStorage.close`) says so, and callers
rely on the class: a retry loop stops on :class:`~workmem.errors.StorageClosedError`
but retries :class:`~workmem.errors.BackendUnavailableError`, so a closed storage
that answers "unavailable" (or answers at all, from a cache) keeps a caller
retrying a storage that will never come back.
"""

from __future__ import annotations

from collections.abc import Callable

from workmem.errors import StorageClosedError
from workmem.records import Resource, Thread

from .registry import CheckContext, check


@check(
    "closed_refuses",
    "close() may be repeated; after it every call raises StorageClosedError and writes nothing",
)
def closed_refuses(ctx: CheckContext) -> None:
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    reader = ctx.storage
    closed = ctx.open()
    closed.save_resource(Resource(rid, "before", {"m": 1}))
    closed.save_thread(Thread(tid, rid, "title", {"workingMemory": "tw"}))
    before = (reader.get_resource(rid), reader.get_thread(tid), reader.list_threads(rid))
    closed.close()
    closed.close()  # idempotent: a second close is no error
    resource, thread = Resource(rid, "after"), Thread(tid, rid, "after")
    calls: list[tuple[str, Callable[[], object]]] = [
        ("get_resource", lambda: closed.get_resource(rid)),
        ("save_resource", lambda: closed.save_resource(resource)),
        ("update_resource", lambda: closed.update_resource(rid, working_memory="after")),
        ("get_thread", lambda: closed.get_thread(tid)),
        ("create_thread", lambda: closed.create_thread(Thread(p + "new", rid))),
        ("save_thread", lambda: closed.save_thread(thread)),
        ("update_thread", lambda: closed.update_thread(tid, title="after")),
        ("restore_thread", lambda: closed.restore_thread(thread)),
        ("delete_thread", lambda: closed.delete_thread(tid)),
        ("list_threads", lambda: closed.list_threads(rid)),
        ("get_working_memory", lambda: closed.get_working_memory(scope="resource", resource_id=rid)),
        ("set_working_memory", lambda: closed.set_working_memory("after", scope="thread", thread_id=tid)),
        ("merge_working_memory", lambda: closed.merge_working_memory({"a": 1}, scope="resource", resource_id=rid)),
        ("resources_after", lambda: closed.resources_after()),
        ("threads_after", lambda: closed.threads_after()),
        ("iter_threads", lambda: next(closed.iter_threads())),
        ("insert_resources", lambda: closed.insert_resources([Resource(p + "new")])),
        ("insert_threads", lambda: closed.insert_threads([Thread(p + "new", rid)])),
    ]
    problems: list[str] = []
    for name, call in calls:
        try:
            result = call()
        except StorageClosedError:
            continue
        except Exception as exc:  # any other outcome is the finding
            problems.append(f"{name} raised {type(exc).__name__} ({exc!s:.120}), not StorageClosedError")
        else:
            problems.append(f"{name} returned {result!r:.80} on a closed storage")
    after = (reader.get_resource(rid), reader.get_thread(tid), reader.list_threads(rid))
    if after != before:
        problems.append("calls on the closed storage changed what another connection reads")
    assert not problems, f"{len(problems)} calls after close() did not raise StorageClosedError:\n" + "\n".join(
        problems
    )
