"""``max_chars`` holds under concurrency: parallel updates never leave the stored memory over the limit.

A model turn with parallel tool calls (pydantic-ai, the Agents SDK) runs its
``updateWorkingMemory`` calls at the same time. Here N of them (20, then 64),
each setting a distinct field, run at once through one ``Memory`` (threads) or
one ``AsyncMemory`` (tasks), in both scopes, on every backend reachable here
(memory://, a libSQL file, PostgreSQL and Upstash through the REST bridge to
the local Redis; MongoDB and Oracle skip loudly without a server). After all
finished: the stored memory is within the limit, the updates reported stored
are exactly the fields stored (nothing reported stored was lost), and every
other update was refused as too large (a tool error, or
:class:`~workmem.WorkingMemoryTooLargeError`). Half the workers call the tool,
half call ``merge_working_memory``. The replace rule (template mode) is raced
the same way from memory stored above the limit, where an update is accepted
only when it does not make the memory larger.

The MongoDB adapter's limit paths run against mongomock in ``test_mongodb_fake.py``
(FAKE: code paths only, never conformance).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from backends import BACKENDS, fresh_url

import workmem
from workmem import AsyncMemory, Memory, WorkingMemoryTooLargeError
from workmem.records import Scope
from workmem.validation import dump_json

LIMIT = 200
FIELDS = 64
SCHEMA = {"type": "object", "properties": {f"f{i:02d}": {"type": "string"} for i in range(FIELDS)}}
TEMPLATE = "# Notes\n"
REFUSED = "Working memory not updated: the result would be "


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.backend(name)) for name in BACKENDS])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    with fresh_url(request.param) as fresh:
        yield fresh


def _patch(index: int) -> dict[str, str]:
    return {f"f{index:02d}": "v" * 10}  # 18 characters each in the stored JSON (and a comma)


Outcome = tuple[int, str]
"""(worker index, "stored" | "refused" | a description of anything else)."""


def _merge_outcome(index: int, call: Callable[[], Any]) -> Outcome:
    try:
        result = call()
    except WorkingMemoryTooLargeError as exc:
        assert exc.limit == LIMIT and exc.size > LIMIT, exc
        return index, "refused"
    except Exception as exc:  # reported, and failed, below
        return index, f"raised {exc!r}"
    if isinstance(result, dict) and "ok" in result:  # a tool result
        if result["ok"] and result["action"] == "merged":
            return index, "stored"
        if not result["ok"] and result["error"].startswith(REFUSED):
            return index, "refused"
        return index, f"returned {result!r}"
    return index, "stored"


def _check(stored: str | None, outcomes: list[Outcome], count: int) -> None:
    others = [outcome for outcome in outcomes if outcome[1] not in ("stored", "refused")]
    assert not others, f"updates that were neither stored nor refused as too large: {others[:5]}"
    assert len(outcomes) == count
    document = json.loads(stored or "{}")
    assert len(dump_json(document)) == len(stored or "")  # stored as workmem writes it: the size counted
    size = len(stored or "")
    assert size <= LIMIT, f"{count} concurrent updates stored {size} characters, over the {LIMIT}-character limit"
    accepted = {f"f{index:02d}" for index, outcome in outcomes if outcome == "stored"}
    assert set(document) == accepted, (
        f"reported stored but missing: {sorted(accepted - set(document))}; "
        f"stored but reported refused: {sorted(set(document) - accepted)}"
    )
    assert accepted and len(accepted) < count  # some fit, the rest could not


def _new_address(memory: Memory, scope: Scope) -> dict[str, str]:
    resource_id = f"user-{uuid.uuid4().hex[:8]}"
    thread = memory.create_thread(resource_id=resource_id)
    return {"thread_id": thread.id} if scope == "thread" else {"resource_id": resource_id}


async def _new_address_async(memory: AsyncMemory, scope: Scope) -> dict[str, str]:
    resource_id = f"user-{uuid.uuid4().hex[:8]}"
    thread = await memory.create_thread(resource_id=resource_id)
    return {"thread_id": thread.id} if scope == "thread" else {"resource_id": resource_id}


def _in_threads(count: int, work: Callable[[int], Outcome]) -> list[Outcome]:
    """``work(i)`` in ``count`` threads released together."""
    barrier = threading.Barrier(count)
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        barrier.wait(timeout=60)
        outcome = work(index)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return outcomes


@pytest.mark.parametrize("count", [20, 64])
@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_parallel_schema_updates_never_exceed_the_limit_sync(url: str, scope: Scope, count: int) -> None:
    with Memory(url, scope=scope, schema=SCHEMA, max_chars=LIMIT) as memory:
        at = _new_address(memory, scope)

        def work(index: int) -> Outcome:
            if index % 2:
                return _merge_outcome(index, lambda: memory.merge_working_memory(_patch(index), **at))
            return _merge_outcome(index, lambda: memory.call_tool({"memory": _patch(index)}, **at))

        outcomes = _in_threads(count, work)
        _check(memory.get_working_memory(**at), outcomes, count)


@pytest.mark.parametrize("count", [20, 64])
@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_parallel_schema_updates_never_exceed_the_limit_async(url: str, scope: Scope, count: int) -> None:
    async def main() -> None:
        async with await AsyncMemory.open(url, scope=scope, schema=SCHEMA, max_chars=LIMIT) as memory:
            at = await _new_address_async(memory, scope)
            start = asyncio.Event()

            async def work(index: int) -> Outcome:
                await start.wait()
                try:
                    if index % 2:
                        result: Any = await memory.merge_working_memory(_patch(index), **at)
                    else:
                        result = await memory.call_tool({"memory": _patch(index)}, **at)
                except Exception as exc:
                    return _merge_outcome(index, _raiser(exc))
                return _merge_outcome(index, lambda: result)

            tasks = [asyncio.create_task(work(i)) for i in range(count)]
            await asyncio.sleep(0)
            start.set()
            outcomes = list(await asyncio.gather(*tasks))
            _check(await memory.get_working_memory(**at), outcomes, count)

    asyncio.run(main())


def _raiser(exc: Exception) -> Callable[[], Any]:
    def call() -> Any:
        raise exc

    return call


# -- replace (template mode), from memory stored above the limit ----------------------------------------

REPLACES = 20
START = 400  # characters stored by another writer, twice the limit


def _text(size: int) -> str:
    return TEMPLATE + "x" * (size - len(TEMPLATE))


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_parallel_replaces_above_the_limit_only_ever_shrink_the_memory(url: str, scope: Scope) -> None:
    """Each replace is over the limit, so it is stored only if it is no larger than the memory at that moment.

    Applied one after another, the stored size can then only go down: the memory
    left at the end is the smallest text accepted, and every refused text was
    larger than it. A check against a stale read lets a larger text land after a
    smaller one.
    """
    sizes = [START - 1 - 9 * i for i in range(REPLACES)]  # all over the limit, all smaller than START
    with Memory(url, scope=scope, template=TEMPLATE, max_chars=LIMIT) as memory:
        at = _new_address(memory, scope)
        with workmem.connect(url) as other:  # another program, with no limit
            other.set_working_memory(_text(START), scope=scope, **at)

        def work(index: int) -> Outcome:
            try:
                if index % 2:
                    memory.update_working_memory(_text(sizes[index]), **at)
                else:
                    result = memory.call_tool({"memory": _text(sizes[index])}, **at)
                    if not result["ok"]:
                        return index, "refused" if result["error"].startswith(REFUSED) else f"returned {result!r}"
            except WorkingMemoryTooLargeError:
                return index, "refused"
            except Exception as exc:
                return index, f"raised {exc!r}"
            return index, "stored"

        outcomes = _in_threads(REPLACES, work)
        others = [outcome for outcome in outcomes if outcome[1] not in ("stored", "refused")]
        assert not others, others[:5]
        stored = memory.get_working_memory(**at)
        assert stored is not None
        accepted = [sizes[i] for i, outcome in outcomes if outcome == "stored"]
        refused = [sizes[i] for i, outcome in outcomes if outcome == "refused"]
        assert accepted, "the first replace to run always shrinks the memory"
        assert len(stored) == min(accepted), f"a larger replace ({len(stored)}) landed after a smaller one"
        assert all(size > len(stored) for size in refused)


def test_the_limit_holds_on_the_storage_api_alone(url: str) -> None:
    """``merge_working_memory(..., max_chars=)`` / ``set_working_memory(..., max_chars=)`` on the storage itself."""
    with workmem.connect(url) as storage:
        rid = f"user-{uuid.uuid4().hex[:8]}"

        def merge(index: int) -> Outcome:
            return _merge_outcome(
                index,
                lambda: storage.merge_working_memory(_patch(index), scope="resource", resource_id=rid, max_chars=LIMIT),
            )

        outcomes = _in_threads(20, merge)
        _check(storage.get_working_memory(scope="resource", resource_id=rid), outcomes, 20)
