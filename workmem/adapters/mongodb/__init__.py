"""MongoDB (``mongodb://``, ``mongodb+srv://``), with the TypeScript ``@mastra/mongodb`` adapter's collections.

* :mod:`.storage` — the hooks once (:class:`~.storage.MongoHooks`); :class:`MongoStorage` (sync, on
  ``pymongo.MongoClient``) and :class:`AsyncMongoStorage` (async, on ``pymongo.AsyncMongoClient``);
* :mod:`.port` — the few collection operations the hooks use, on either client;
* :mod:`.settings` — the URL and options read without I/O (:class:`~.settings.MongoSettings`), the secrets
  kept out of messages;
* :mod:`.client` — the pymongo client opened, its errors mapped;
* :mod:`.documents` — records to and from Mastra's documents, and what each update writes, without I/O.
"""

from __future__ import annotations

from .storage import AsyncMongoStorage, MongoStorage

__all__ = ["AsyncMongoStorage", "MongoStorage"]
