"""MongoDB (``mongodb://``, ``mongodb+srv://``), with the TypeScript ``@mastra/mongodb`` adapter's collections.

* :mod:`.storage` — :class:`MongoStorage`: the contract's flows over pymongo;
* :mod:`.client` — the URL, the client, the secrets kept out of errors, driver errors mapped;
* :mod:`.documents` — records to and from Mastra's documents, without I/O.
"""

from __future__ import annotations

from .storage import MongoStorage

__all__ = ["MongoStorage"]
