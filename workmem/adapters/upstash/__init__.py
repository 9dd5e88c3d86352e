"""Upstash Redis over its REST API: ``upstash+https://HOST?token=TOKEN[&prefix=P]``.

URL forms:

* ``upstash+https://us1-merry-cat-32748.upstash.io?token=TOKEN`` -- an Upstash database;
* ``upstash+http://127.0.0.1:8079?token=TOKEN`` -- a local bridge (``python -m workmem.testing.upstash_bridge``);
* ``upstash://`` -- read ``UPSTASH_REDIS_REST_URL`` and ``UPSTASH_REDIS_REST_TOKEN``.

Options (query parameters or ``connect()`` keyword arguments): ``token``;
``prefix`` (put before every key, default empty so the keys are exactly
Mastra's); ``retries`` and ``retry_interval`` (the driver re-sends a failed
request, default once after 3 s); ``timeout`` (HTTP seconds, default 30).

Keys: ``mastra_resources:{id}`` and ``mastra_threads:id:{id}`` hold Mastra's JSON
documents, so the TypeScript ``@mastra/upstash`` adapter reads and writes the
same data. workmem adds two sorted sets per resource
(``workmem:thread_index:created_at:{id}`` / ``...:updated_at:{id}``, thread ids
scored by epoch milliseconds), kept exact by every workmem write, so
``list_threads`` costs O(log n + page) and its ``total`` is exact. Threads
written by the TypeScript adapter are not in them until
:meth:`UpstashStorage.reindex` runs.

Atomicity: every write is one Lua compare-and-set script (document plus index
entries). JSON is parsed, merged and printed in Python only; the scripts never
touch cjson, so numbers, ``[]``/``{}`` and Unicode round-trip exactly.
"""

from __future__ import annotations

from .storage import ReindexResult, UpstashStorage

__all__ = ["ReindexResult", "UpstashStorage"]
