"""The ``max_chars`` size limit of the working-memory writes, as fixed examples (the races are in ``concurrency``).

Each example pins what is counted, so every backend refuses and accepts the
same writes: characters (``len()``), not UTF-8 bytes; a merge's result as the
compact JSON workmem writes, measured against the stored document written the
same way (another program's indented text included); a replace's text against
the text stored. A refused write changes nothing, ``updated_at`` included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from workmem.errors import ValidationError, WorkingMemoryTooLargeError
from workmem.records import Resource, Thread
from workmem.storage import MemoryStorage

from .expect import clock_past
from .registry import CheckContext, check

__all__ = ["compact"]


def compact(document: dict[str, Any]) -> str:
    """A document as a merge stores it: JSON without spaces, non-ASCII as is."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


class _Place:
    """One working memory (a resource's, or a thread's) and a way to read its record."""

    def __init__(self, storage: MemoryStorage, scope: str, rid: str, tid: str) -> None:
        self.storage = storage
        self.scope = scope
        self.rid, self.tid = rid, tid
        self.ids: dict[str, Any] = {"scope": "resource", "resource_id": rid}
        if scope == "thread":
            self.ids = {"scope": "thread", "thread_id": tid, "resource_id": rid}

    def record(self) -> Resource | Thread | None:
        return self.storage.get_resource(self.rid) if self.scope == "resource" else self.storage.get_thread(self.tid)

    def text(self) -> str | None:
        return self.storage.get_working_memory(**self.ids)

    def refused(self, what: str, write: Callable[[], object], size: int, current: int, limit: int) -> None:
        """``write`` raises WorkingMemoryTooLargeError(size, current, limit) and changes nothing."""
        before = self.record()
        assert before is not None, f"the {self.scope} is missing"
        clock_past(before.updated_at)
        what = f"{what} ({self.scope} scope)"
        try:
            write()
        except WorkingMemoryTooLargeError as exc:
            got = (exc.size, exc.current, exc.limit)
            assert got == (size, current, limit), (
                f"{what} raised WorkingMemoryTooLargeError with (size, current, limit) {got}, "
                f"not {(size, current, limit)}"
            )
        except Exception as exc:
            raise AssertionError(f"{what} raised {type(exc).__name__}: {exc}, not WorkingMemoryTooLargeError") from exc
        else:
            raise AssertionError(f"{what} was stored: {size} characters, over max_chars={limit} and above {current}")
        after = self.record()
        assert after == before, f"{what} was refused but changed the {self.scope}: {before!r} became {after!r}"

    def stored(self, what: str, write: Callable[[], object], expected: str | dict[str, Any], *, sized: bool) -> None:
        """``write`` succeeds and stores ``expected``: a text exactly, a document as JSON equal to it.

        ``sized``: a merged document is stored as long as its compact JSON, the size its limit counted.
        """
        what = f"{what} ({self.scope} scope)"
        try:
            write()
        except Exception as exc:
            raise AssertionError(f"{what} raised {type(exc).__name__}: {exc}") from exc
        got = self.text()
        if isinstance(expected, str):
            assert got == expected, f"{what} stored {got!r:.120}, not {expected!r:.120}"
            return
        assert got is not None and json.loads(got) == expected, f"{what} stored {got!r:.120}, not {expected!r:.120}"
        if sized:
            assert len(got) == len(compact(expected)), (
                f"{what} stored {len(got)} characters, not the {len(compact(expected))} of its compact JSON: "
                f"{got!r:.120}"
            )


@check(
    "max_chars_rules",
    "max_chars on set/merge/update writes: characters counted, not bytes; a merge counts its compact JSON "
    "against the stored document written the same way; over the limit only what does not grow is stored",
)
def max_chars_rules(ctx: CheckContext) -> None:
    storage = ctx.storage
    p = ctx.prefix()
    rid, tid = p + "r", p + "t"
    storage.save_thread(Thread(tid, rid, "title"))
    for scope in ("resource", "thread"):
        place = _Place(storage, scope, rid, tid)
        _merges(place)
        _replaces(place)
    _nothing_created(storage, p)
    _bad_limits(storage, p)


def _merges(place: _Place) -> None:
    storage, ids = place.storage, place.ids
    merge = storage.merge_working_memory
    # From nothing: exactly the limit is stored, one more is refused (the merged document, not the patch, counts).
    storage.set_working_memory("", **ids)
    fits = {"name": "Zoë", "notes": "ü" * 20}  # non-ASCII: 2 bytes each in UTF-8, 1 character each
    limit = len(compact(fits))
    place.refused(
        "merge_working_memory(one character too many, from blank)",
        lambda: merge({**fits, "notes": "ü" * 21}, **ids, max_chars=limit),
        limit + 1,
        0,
        limit,
    )
    place.stored(
        f"merge_working_memory(exactly max_chars={limit} characters, twice as many bytes)",
        lambda: merge(fits, **ids, max_chars=limit),
        fits,
        sized=True,
    )
    # Another program stores the document indented: it counts as its compact JSON (what a merge would store).
    document = {"name": "Ann", "notes": "n" * 60}
    size = len(compact(document))
    storage.set_working_memory(json.dumps(document, indent=4), **ids)
    grown = {**document, "tags": ["x"]}
    place.refused(
        "merge_working_memory(growing memory stored above the limit, indented)",
        lambda: merge({"tags": ["x"]}, **ids, max_chars=size - 10),
        len(compact(grown)),
        size,
        size - 10,
    )
    shrunk = {**document, "notes": "n" * 55}
    place.stored(
        "merge_working_memory(shrinking memory stored above the limit)",
        lambda: merge({"notes": "n" * 55}, **ids, max_chars=size - 10),
        shrunk,
        sized=True,
    )
    place.stored(  # no limit: a merge may grow it, as ever
        "merge_working_memory(growing it without max_chars)",
        lambda: merge({"tags": ["x"]}, **ids),
        {**shrunk, "tags": ["x"]},
        sized=False,
    )


def _replaces(place: _Place) -> None:
    storage, ids = place.storage, place.ids
    write = storage.set_working_memory
    storage.set_working_memory("é" * 300, **ids)  # another writer, above the limit
    place.refused(
        "set_working_memory(larger, over the limit)", lambda: write("x" * 301, **ids, max_chars=200), 301, 300, 200
    )
    kept = [  # what does not grow is stored as given, even above the limit
        ("set_working_memory(the same size, over the limit)", "y" * 300),
        ("set_working_memory(smaller, still over the limit)", "z" * 201),
        ("set_working_memory(200 characters, 400 bytes)", "é" * 200),
    ]
    for what, text in kept:
        place.stored(what, partial(write, text, **ids, max_chars=200), text, sized=False)
    place.refused(
        "set_working_memory(one character over)", lambda: write("é" * 201, **ids, max_chars=200), 201, 200, 200
    )
    storage.set_working_memory("  \n ", **ids)  # blank counts as nothing stored
    place.refused(
        "set_working_memory(over the limit, over blank memory)", lambda: write("b" * 5, **ids, max_chars=4), 5, 0, 4
    )
    if place.scope == "resource":
        place.refused(
            "update_resource(working_memory=over the limit)",
            lambda: storage.update_resource(place.rid, working_memory="w" * 9, metadata={"k": 1}, max_chars=4),
            9,
            0,
            4,
        )
    else:
        place.refused(
            "update_thread(title=..., metadata={'workingMemory': over the limit})",
            lambda: storage.update_thread(
                place.tid, title="renamed", metadata={"workingMemory": "w" * 9, "k": 1}, max_chars=4
            ),
            9,
            0,
            4,
        )


def _nothing_created(storage: MemoryStorage, p: str) -> None:
    """A refused write to a resource that does not exist yet does not create it."""
    writes: list[tuple[str, Callable[[str], object]]] = [
        (
            "merge_working_memory",
            lambda r: storage.merge_working_memory({"a": 1}, scope="resource", resource_id=r, max_chars=3),
        ),
        (
            "set_working_memory",
            lambda r: storage.set_working_memory("abcd", scope="resource", resource_id=r, max_chars=3),
        ),
        ("update_resource", lambda r: storage.update_resource(r, working_memory="abcd", max_chars=3)),
    ]
    for name, write in writes:
        rid = p + "new-" + name
        try:
            write(rid)
        except WorkingMemoryTooLargeError:
            pass
        except Exception as exc:
            raise AssertionError(
                f"{name} over max_chars raised {type(exc).__name__}, not WorkingMemoryTooLargeError"
            ) from exc
        else:
            raise AssertionError(f"{name} over max_chars into a new resource was stored")
        assert storage.get_resource(rid) is None, f"{name} over max_chars was refused but created the resource"


def _bad_limits(storage: MemoryStorage, p: str) -> None:
    for bad in (0, -1, True, 2.5, "200"):
        try:
            storage.merge_working_memory({"a": 1}, scope="resource", resource_id=p + "bad", max_chars=bad)  # type: ignore[arg-type]
        except ValidationError:
            pass
        except Exception as exc:
            raise AssertionError(f"max_chars={bad!r} raised {type(exc).__name__}, not ValidationError") from exc
        else:
            raise AssertionError(f"merge_working_memory(max_chars={bad!r}) was accepted")
        assert storage.get_resource(p + "bad") is None, f"merge_working_memory(max_chars={bad!r}) wrote a resource"
