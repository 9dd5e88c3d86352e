"""What a racing write returns is what it saw when it took effect (found by the ``linearizable`` check).

Each test interleaves a second connection at the one point of an adapter's
operation where the race lands, deterministically, and drives the first
connection through the public API:

* SQL adapters condition a write naming an owner on it (``WHERE id = ? AND
  "resourceId" = ?``) and, when it matched no row, read the thread again to
  pick the error. A thread created under that very owner in between must not
  turn "no such thread" into ``ThreadOwnershipError`` (the owner the write names
  never owned anything the write could have seen). Where a dialect updates
  under a row lock instead (libSQL), there is no such gap and the update tests
  check the plain outcome.
* Upstash deletes by a compare-and-set script on the document it read: of two
  deletes racing for one thread, the one whose script finds the document gone
  deleted nothing and returns ``False``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
from backends import fresh_url

import workmem
from workmem import Thread, ThreadNotFoundError


@pytest.fixture(params=[pytest.param(n, marks=pytest.mark.backend(n)) for n in ("libsql", "postgres")])
def sql_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with fresh_url(request.param) as url:
        yield url


def _after_first(
    storage: workmem.MemoryStorage, name: str, then: Callable[[], object]
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``storage``'s coroutine method ``name``, running ``then()`` once, right after its first call returned."""
    real = getattr(storage, name)
    done: list[object] = []

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = await real(*args, **kwargs)
        if not done:
            done.append(then())
        return result

    return wrapped


WRITES: dict[str, Callable[[workmem.MemoryStorage], object]] = {
    "update_thread": lambda s: s.update_thread("t", title="mine", resource_id="b"),
    "set_working_memory": lambda s: s.set_working_memory("mine", scope="thread", thread_id="t", resource_id="b"),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_write_naming_an_owner_of_a_missing_thread_is_not_refused_as_another_owners(
    sql_url: str, write: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with workmem.connect(sql_url) as storage, workmem.connect(sql_url) as other:
        create = lambda: other.create_thread(Thread("t", "b", "created meanwhile"))  # noqa: E731
        monkeypatch.setattr(storage, "_execute", _after_first(storage, "_execute", create))
        with pytest.raises(ThreadNotFoundError):  # the conditioned write found no thread at all
            WRITES[write](storage)


def test_a_delete_naming_an_owner_of_a_missing_thread_returns_false(
    sql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with workmem.connect(sql_url) as storage, workmem.connect(sql_url) as other:
        # The one-statement delete (then a read for the owner) runs where there is no history table to clear in
        # the same transaction: a database only Mastra wrote, opened with create=False. Elsewhere the delete
        # reads the row under its lock first, and no thread can come between.
        monkeypatch.setattr(storage.dialect, "history_present", False)
        create = lambda: other.create_thread(Thread("t", "b", "created meanwhile"))  # noqa: E731
        monkeypatch.setattr(storage, "_execute", _after_first(storage, "_execute", create))
        assert storage.delete_thread("t", resource_id="b") is False  # it deleted nothing: nothing was there
        assert other.get_thread("t") is not None


@pytest.mark.backend("upstash")
def test_of_two_racing_deletes_of_one_thread_one_returns_true(monkeypatch: pytest.MonkeyPatch) -> None:
    with fresh_url("upstash") as url, workmem.connect(url) as storage, workmem.connect(url) as other:
        storage.create_thread(Thread("t", "a"))
        # The second connection deletes the thread after the first read it and before its script runs.
        monkeypatch.setattr(storage, "_get", _after_first(storage, "_get", lambda: other.delete_thread("t")))
        assert storage.delete_thread("t") is False, "a delete that found the thread already gone returned True"
        assert other.get_thread("t") is None
        assert storage.delete_thread("t") is False


def test_a_page_past_the_last_fits_its_total(sql_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the last page the total comes from a second statement: a thread created between the two must not
    give an empty page with a total that says it holds a thread (``[]``, ``total=2``, ``has_more=True``)."""
    with workmem.connect(sql_url) as storage, workmem.connect(sql_url) as other:
        storage.create_thread(Thread("t1", "r"))
        create = lambda: other.create_thread(Thread("t2", "r"))  # noqa: E731
        monkeypatch.setattr(storage, "_execute", _after_first(storage, "_execute", create))
        page = storage.list_threads("r", page=1, per_page=1, order_by="created_at", direction="asc")
        assert (len(page.threads), page.total, page.has_more) == (1, 2, False), page
