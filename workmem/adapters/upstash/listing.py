"""``list_threads`` from the thread documents themselves (``listing="scan"``), no I/O.

With ``listing="index"`` (the default) a page is read from workmem's sorted-set
indexes, which only workmem's own writes keep. With ``listing="scan"`` the
adapter reads every thread document of the database (``SCAN`` batch by batch,
the owner filtered in Redis by :data:`~.scripts.OWNED_THREADS`) and this module
turns the documents of one resource into the page: the same order (``order_by``,
then the id, in the same direction), ``total`` and ``has_more`` as the indexes
give, whoever wrote, moved or deleted the threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from workmem.errors import UnreadableRecordError
from workmem.kit import ListQuery
from workmem.records import Thread, ThreadPage

from .documents import decode_thread, epoch_ms, raw_owner

__all__ = ["owner_filter", "scanned_page"]


def owner_filter(resource_id: str) -> list[str]:
    """The arguments of :data:`~.scripts.OWNED_THREADS` for ``resource_id``.

    The id as a JSON string spelled without escapes, and the escapes that could
    spell it otherwise: ``\\u`` always, ``\\/`` when the id holds a ``/``. A
    document with none of them cannot hold the id as any string value. An id that
    JSON must escape (``"``, ``\\``, control characters) gets no such shortcut.
    """
    if any(char in '"\\' or char < " " for char in resource_id):
        return [resource_id, ""]
    return [resource_id, f'"{resource_id}"', "\\u", *(["\\/"] if "/" in resource_id else [])]


def scanned_page(query: ListQuery, documents: Mapping[str, str], key_of: Callable[[str], str]) -> ThreadPage:
    """The page ``query`` asks for, from ``documents`` (thread id -> document text, every candidate found).

    A document whose owner is not ``query.resource_id`` is left out. One that
    cannot be read as a thread but whose ``resourceId`` is the resource's counts
    in ``total`` and is named in :attr:`ThreadPage.unreadable`; it sorts as if
    its timestamps were 1970 (its own cannot be trusted).
    """
    ranked: list[tuple[int, str, Thread | None]] = []
    for thread_id, text in documents.items():
        try:
            thread = decode_thread(text, key_of(thread_id), thread_id)[0]
        except UnreadableRecordError:
            if raw_owner(text)[0] == query.resource_id:
                ranked.append((0, thread_id, None))
            continue
        if thread.resource_id == query.resource_id:
            ranked.append((epoch_ms(getattr(thread, query.order_by)), thread_id, thread))
    ranked.sort(key=lambda entry: (entry[0], entry[1]), reverse=query.direction == "desc")
    end = None if query.per_page is None else query.offset + query.per_page
    page = ranked[query.offset : end]
    threads = [thread for _, _, thread in page if thread is not None]
    unreadable = [thread_id for _, thread_id, thread in page if thread is None]
    return query.page_of(threads, len(ranked), unreadable)
