"""The few collection operations the MongoDB hooks use, as coroutines, on pymongo's sync and async clients.

:class:`~workmem.adapters.mongodb.storage.MongoHooks` is written once over
:class:`DatabasePort`. :class:`BlockingDatabase` implements it on
``pymongo.MongoClient``: its coroutines call the blocking driver and never
suspend, as a sync storage's hooks must (:func:`workmem.flows.run_sync`).
:class:`AwaitedDatabase` implements it on ``pymongo.AsyncMongoClient`` (pymongo
4.9+, not Motor) by awaiting the same calls. Each method is one driver call;
errors are the driver's (the hooks map them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from workmem.adapters.mongodb.documents import RESOURCES, THREADS, Document
from workmem.kit import import_driver

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient, MongoClient
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase
    from pymongo.collection import Collection
    from pymongo.database import Database

__all__ = [
    "AwaitedCollection",
    "AwaitedDatabase",
    "BlockingCollection",
    "BlockingDatabase",
    "CollectionPort",
    "DatabasePort",
    "Written",
]

Sort = list[tuple[str, int]]


class Written(NamedTuple):
    """What an ``update_one`` did."""

    matched: int
    """Documents the filter matched (0 or 1)."""
    upserted: bool
    """Whether the upsert inserted a new document."""


class CollectionPort(Protocol):
    """One collection's operations; documents decode as dicts with timezone-aware UTC dates."""

    @property
    def name(self) -> str: ...

    async def find_one(self, filter: Document, projection: Document | None = None) -> Document | None: ...

    async def find_one_and_update(self, filter: Document, update: Document, *, upsert: bool = False) -> Document | None:
        """The document after the update, or ``None`` when nothing matched (and nothing was upserted)."""
        ...

    async def insert_one(self, document: Document) -> None: ...

    async def insert_many(self, documents: list[Document]) -> None:
        """Insert every document, unordered (one failing does not stop the others): ``BulkWriteError`` names
        each that failed by its index."""
        ...

    async def update_one(self, filter: Document, update: Document, *, upsert: bool = False) -> Written: ...

    async def delete_one(self, filter: Document) -> int:
        """How many documents were deleted (0 or 1)."""
        ...

    async def find(self, filter: Document, sort: Sort, skip: int, limit: int | None) -> list[Document]: ...

    async def count_documents(self, filter: Document) -> int: ...

    async def create_index(self, keys: Sort, options: Document) -> None: ...


class DatabasePort(Protocol):
    """The adapter's two collections in one database, and the client they live on."""

    @property
    def threads(self) -> CollectionPort: ...

    @property
    def resources(self) -> CollectionPort: ...

    async def collection_names(self) -> list[str]: ...

    async def close_client(self) -> None: ...


def _codec_options() -> Any:
    """Whatever the client's defaults: dates decode timezone-aware (UTC), documents as dicts."""
    codec_options = import_driver("bson.codec_options", "mongodb").CodecOptions
    return codec_options(tz_aware=True, document_class=dict)


def _after() -> Any:
    return import_driver("pymongo", "mongodb").ReturnDocument.AFTER


# -- pymongo.MongoClient: blocking calls that never suspend -------------------------------


class BlockingCollection:
    """:class:`CollectionPort` on a ``pymongo.collection.Collection``."""

    def __init__(self, collection: Collection[Document]) -> None:
        self.collection = collection
        self._after = _after()

    @property
    def name(self) -> str:
        return self.collection.name

    async def find_one(self, filter: Document, projection: Document | None = None) -> Document | None:
        return self.collection.find_one(filter, projection)

    async def find_one_and_update(self, filter: Document, update: Document, *, upsert: bool = False) -> Document | None:
        return self.collection.find_one_and_update(filter, update, upsert=upsert, return_document=self._after)

    async def insert_one(self, document: Document) -> None:
        self.collection.insert_one(document)

    async def insert_many(self, documents: list[Document]) -> None:
        self.collection.insert_many(documents, ordered=False)

    async def update_one(self, filter: Document, update: Document, *, upsert: bool = False) -> Written:
        result = self.collection.update_one(filter, update, upsert=upsert)
        return Written(result.matched_count, result.upserted_id is not None)

    async def delete_one(self, filter: Document) -> int:
        return self.collection.delete_one(filter).deleted_count

    async def find(self, filter: Document, sort: Sort, skip: int, limit: int | None) -> list[Document]:
        cursor = self.collection.find(filter).sort(sort).skip(skip)
        return list(cursor if limit is None else cursor.limit(limit))

    async def count_documents(self, filter: Document) -> int:
        return self.collection.count_documents(filter)

    async def create_index(self, keys: Sort, options: Document) -> None:
        self.collection.create_index(keys, **options)


class BlockingDatabase:
    """:class:`DatabasePort` on a ``pymongo.MongoClient`` (connects lazily: no I/O here)."""

    def __init__(self, client: MongoClient[Document], database: str) -> None:
        self.client = client
        self.database: Database[Document] = client.get_database(database, codec_options=_codec_options())
        self.threads = BlockingCollection(self.database[THREADS])
        self.resources = BlockingCollection(self.database[RESOURCES])

    async def collection_names(self) -> list[str]:
        return self.database.list_collection_names()

    async def close_client(self) -> None:
        self.client.close()


# -- pymongo.AsyncMongoClient: the same calls, awaited -----------------------------------


class AwaitedCollection:
    """:class:`CollectionPort` on a ``pymongo.asynchronous.collection.AsyncCollection``."""

    def __init__(self, collection: AsyncCollection[Document]) -> None:
        self.collection = collection
        self._after = _after()

    @property
    def name(self) -> str:
        return self.collection.name

    async def find_one(self, filter: Document, projection: Document | None = None) -> Document | None:
        return await self.collection.find_one(filter, projection)

    async def find_one_and_update(self, filter: Document, update: Document, *, upsert: bool = False) -> Document | None:
        return await self.collection.find_one_and_update(filter, update, upsert=upsert, return_document=self._after)

    async def insert_one(self, document: Document) -> None:
        await self.collection.insert_one(document)

    async def insert_many(self, documents: list[Document]) -> None:
        await self.collection.insert_many(documents, ordered=False)

    async def update_one(self, filter: Document, update: Document, *, upsert: bool = False) -> Written:
        result = await self.collection.update_one(filter, update, upsert=upsert)
        return Written(result.matched_count, result.upserted_id is not None)

    async def delete_one(self, filter: Document) -> int:
        return (await self.collection.delete_one(filter)).deleted_count

    async def find(self, filter: Document, sort: Sort, skip: int, limit: int | None) -> list[Document]:
        cursor = self.collection.find(filter).sort(sort).skip(skip)
        return await (cursor if limit is None else cursor.limit(limit)).to_list()

    async def count_documents(self, filter: Document) -> int:
        return await self.collection.count_documents(filter)

    async def create_index(self, keys: Sort, options: Document) -> None:
        await self.collection.create_index(keys, **options)


class AwaitedDatabase:
    """:class:`DatabasePort` on a ``pymongo.AsyncMongoClient`` (no I/O here)."""

    def __init__(self, client: AsyncMongoClient[Document], database: str) -> None:
        self.client = client
        self.database: AsyncDatabase[Document] = client.get_database(database, codec_options=_codec_options())
        self.threads = AwaitedCollection(self.database[THREADS])
        self.resources = AwaitedCollection(self.database[RESOURCES])

    async def collection_names(self) -> list[str]:
        return await self.database.list_collection_names()

    async def close_client(self) -> None:
        await self.client.close()
