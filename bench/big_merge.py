"""The ``big_merge`` section: one merge of a 60,000-key patch (about 1.8 MB), PostgreSQL against libSQL.

PostgreSQL merges inside its ``UPDATE`` (``workmem_merge_document``, a plpgsql
function, :mod:`workmem.adapters.postgres.dialect`); libSQL reads, merges in
Python and writes in one ``BEGIN IMMEDIATE`` transaction. Three patch shapes of
about 60,000 keys each:

* ``nested``: a binary tree of objects 15 levels deep (32,767 objects, 65,534 keys);
* ``deep``: 30 nested one-key objects around one object of 60,000 keys;
* ``wide``: one object of 60,000 keys.

Each shape is merged ``into nothing`` (a resource with no memory yet) and
``into other values`` (a stored memory of the same shape whose every leaf
differs, written beforehand, not timed: the merge walks every object). Every
merge is the public ``storage.merge_working_memory`` (resource scope) on a fresh
resource and is checked against the expected document; PostgreSQL and libSQL
alternate, ``rounds`` times, and the best (least) time of each is kept, so load
from other processes on a shared machine counts as little as possible. The
target: PostgreSQL within :data:`bench.report.BIG_MERGE_RATIO_LIMIT` times libSQL
on every shape and case.
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from typing import Any

from bench.backends import Unavailable, open_namespace
from workmem.storage import MemoryStorage
from workmem.validation import dump_json

__all__ = ["SHAPES", "big_merge_section", "patch_of"]

SHAPES = ("nested", "deep", "wide")
CASES = ("into nothing", "into other values")
_BACKENDS = ("postgres", "libsql")


def _tree(depth: int, leaf: str, path: str = "") -> Any:
    if depth == 0:
        return f"{leaf}-{path}"
    return {f"k{path}{i}": _tree(depth - 1, leaf, f"{path}{i}") for i in range(2)}


def _deep(leaf: str) -> dict[str, Any]:
    document: dict[str, Any] = {f"k{i}": f"{leaf}-{i}-xxxxxxxxx" for i in range(60_000)}
    for _ in range(30):
        document = {"a": document}
    return document


def patch_of(shape: str, leaf: str) -> dict[str, Any]:
    """The document of ``shape`` with every leaf text starting with ``leaf``."""
    if shape == "nested":
        tree: dict[str, Any] = _tree(15, leaf)
        return tree
    if shape == "deep":
        return _deep(leaf)
    if shape == "wide":
        return {f"k{i}": f"{leaf}-{i}-xxxxxxxxx" for i in range(60_000)}
    raise ValueError(f"unknown shape {shape!r}")


def _keys(document: Any) -> int:
    if not isinstance(document, dict):
        return 0
    return len(document) + sum(_keys(value) for value in document.values())


def _merge_seconds(storage: MemoryStorage, resource_id: str, patch: dict[str, Any], stored: str | None) -> float:
    if stored is not None:
        storage.set_working_memory(stored, scope="resource", resource_id=resource_id)
    began = time.perf_counter()
    merged = storage.merge_working_memory(patch, scope="resource", resource_id=resource_id)
    seconds = time.perf_counter() - began
    if merged != patch:  # the patch holds every key of the stored shape and no null: the result is the patch
        raise AssertionError(f"the merge into {resource_id} did not give the patch")
    return seconds


def big_merge_section(rounds: int = 3) -> dict[str, Any]:
    """The ``big_merge`` results (see :mod:`bench.report` for the layout); skipped when a backend is missing."""
    result: dict[str, Any] = {"status": "ok", "reason": None, "rounds": rounds, "points": []}
    with ExitStack() as stack:
        try:
            storages = {name: stack.enter_context(open_namespace(name)) for name in _BACKENDS}
        except Unavailable as exc:
            result.update(status="skipped", reason=str(exc))
            return result
        opened = {name: stack.enter_context(ns.connect()) for name, ns in storages.items()}
        for shape in SHAPES:
            patch = patch_of(shape, "new")
            other = dump_json(patch_of(shape, "old"))
            for case in CASES:
                print(f"[big_merge] {shape}, {case} ...", file=sys.stderr, flush=True)
                times: dict[str, list[float]] = {name: [] for name in _BACKENDS}
                for n in range(rounds):
                    order = _BACKENDS if n % 2 == 0 else tuple(reversed(_BACKENDS))
                    for name in order:
                        rid = f"bm-{shape}-{CASES.index(case)}-{n}"
                        stored = other if case == "into other values" else None
                        times[name].append(_merge_seconds(opened[name], rid, patch, stored))
                best = {name: round(min(values), 3) for name, values in times.items()}
                result["points"].append(
                    {
                        "shape": shape,
                        "case": case,
                        "keys": _keys(patch),
                        "bytes": len(dump_json(patch).encode()),
                        "postgres_s": best["postgres"],
                        "libsql_s": best["libsql"],
                        "ratio": round(best["postgres"] / best["libsql"], 2) if best["libsql"] > 0 else None,
                        "all_s": {name: [round(v, 3) for v in values] for name, values in times.items()},
                    }
                )
    return result
