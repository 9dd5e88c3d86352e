"""Upstash Redis over its REST API: ``upstash+https://HOST?token=TOKEN[&prefix=P]``.

URL forms:

* ``upstash+https://us1-merry-cat-32748.upstash.io?token=TOKEN`` -- an Upstash database;
* ``upstash+http://127.0.0.1:8079?token=TOKEN`` -- a local bridge (``python -m workmem.testing.upstash_bridge``);
* ``upstash://`` -- read ``UPSTASH_REDIS_REST_URL`` and ``UPSTASH_REDIS_REST_TOKEN``.

Options (query parameters or ``connect()`` keyword arguments): ``token``;
``prefix`` (put before every key, default empty so the keys are exactly
Mastra's); ``retries`` and ``retry_interval`` (the driver re-sends a failed
request, default once after 3 s); ``timeout`` (HTTP seconds, default 30);
``listing`` (``index`` or ``scan``, below).

Keys: ``mastra_resources:{id}`` and ``mastra_threads:id:{id}`` hold Mastra's JSON
documents, so the TypeScript ``@mastra/upstash`` adapter reads and writes the
same data. workmem adds two sorted sets per resource
(``workmem:thread_index:created_at:{id}`` / ``...:updated_at:{id}``, thread ids
scored by epoch milliseconds), kept exact by every workmem write. With
``listing=index`` (the default) ``list_threads`` reads them: O(log n + page),
complete while only workmem writes threads; threads the TypeScript adapter
created, moved or deleted show there only after :meth:`UpstashStorage.reindex`
(a list that meets a leftover entry logs one warning). With ``listing=scan`` it
reads the thread documents themselves (``SCAN``, the owner filtered in Redis, see
:mod:`.listing`): complete and exact whoever writes, O(keys in the database) a
list. Mixed TypeScript/Python deployments use ``listing=scan``.

Iteration (``iter_resources``/``iter_threads``, ``resource_page``/``thread_page``)
walks two more sorted sets, ``workmem:ids:resources`` and ``workmem:ids:threads``
(every id, score 0, so ``ZRANGEBYLEX`` is byte order, i.e. code-point order),
kept exact by every workmem write in the same script as the document. Records
the TypeScript adapter wrote are not in them: the first page of an iteration
(``after=None``) adds them with one ``SCAN`` of the record keys (batch by batch,
memory flat; O(keys in the database) once per iteration), and a page drops the
ids whose document is gone. A page with ``after`` set reads the id set only, so
it sees another program's records from the last first page (or ``reindex()``) on.
Iterating writes to the id sets, so it needs a read-write token.

Bulk inserts (``insert_resources``/``insert_threads``) run one Lua script per
batch (up to 200 records or about 512 KiB): each record is written, with its id
set and index entries, only where its document is missing; present ids are
returned and left as they are, whoever owns them.

Atomicity: every write is one Lua compare-and-set script (document plus index
entries). JSON is parsed, merged and printed in Python only; the scripts never
touch cjson, so numbers, ``[]``/``{}`` and Unicode round-trip exactly.

History (``connect(url, history=...)``): each working memory's versions are a
sorted set ``workmem:history:["{resource_id}",null|"{thread_id}"]`` (score = version),
written by the write's own compare-and-set script (numbered, retention trimmed);
``workmem:history_keys:{resource_id}`` names a resource's history keys.
``delete_resource`` is a ``SCAN`` plus batched scripts, each atomic, re-runnable
to completion (see ``UpstashHooks._delete_resource`` and docs/backends/upstash.md).

Async: ``await workmem.connect_async(url)`` opens :class:`AsyncUpstashStorage`
on the ``upstash_redis.asyncio`` client (same URL, options, keys and scripts;
``await store.reindex()``), usable from any event loop (one httpx client per
loop, :mod:`.transport`). A cancelled call leaves no partial write: each
write is one script, sent whole or not at all. ``close()`` ends calls in
flight with ``StorageClosedError``, sync and async.
"""

from __future__ import annotations

from .storage import AsyncUpstashStorage, ReindexResult, UpstashStorage

__all__ = ["AsyncUpstashStorage", "ReindexResult", "UpstashStorage"]
