"""Child process of :mod:`bench.regress`: time a fixed workload on an embedded file with whichever workmem is first on
``sys.path`` (the tree under test), and print one JSON object ``{operation: ops per second}`` on stdout.

It runs against older revisions too, so it uses only long-standing public API; an operation a revision lacks is
reported as ``null``. Usage: ``python bench/regress_probe.py CALLS``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

THREADS = 200


def _rate(call: Callable[[int], Any], calls: int) -> float | None:
    try:
        call(0)  # warm-up; a revision without the operation fails here
    except (AttributeError, TypeError):
        return None
    began = time.perf_counter()
    for j in range(1, calls + 1):
        call(j)
    return calls / (time.perf_counter() - began)


def main(calls: int) -> dict[str, float | None]:
    import workmem
    from workmem.records import Thread

    with tempfile.TemporaryDirectory() as folder:
        storage = workmem.connect(f"file:{folder}/regress.db")
        try:
            create = getattr(storage, "create_thread", None) or storage.save_thread
            ids = [f"t{i}" for i in range(THREADS)]
            for thread_id in ids:
                create(Thread(id=thread_id, resource_id="r", title="t", metadata={"k": thread_id}))
            operations: dict[str, Callable[[int], Any]] = {
                "get_thread": lambda j: storage.get_thread(ids[j % THREADS]),
                "list_threads": lambda j: storage.list_threads("r", page=j % 5, per_page=20),
                "create_thread": lambda j: create(Thread(id=f"new-{j}", resource_id="r2", title="t")),
                "set_working_memory": lambda j: storage.set_working_memory(
                    f"# note {j}", scope="resource", resource_id="r"
                ),
                "merge_working_memory": lambda j: storage.merge_working_memory(
                    {"k": j}, scope="resource", resource_id="m"
                ),
            }
            return {name: _rate(call, calls) for name, call in operations.items()}
        finally:
            storage.close()


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
