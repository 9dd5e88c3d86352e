"""The few collection operations the MongoDB hooks use, as coroutines, on pymongo's sync and async clients.

:class:`~workmem.adapters.mongodb.storage.MongoHooks` is written once over
:class:`DatabasePort`. :class:`BlockingDatabase` implements it on
``pymongo.MongoClient``: its coroutines call the blocking driver and never
suspend, as a sync storage's hooks must (:func:`workmem.flows.run_sync`).
:class:`AwaitedDatabase` implements it on ``pymongo.AsyncMongoClient`` (pymongo
4.9+, not Motor) by awaiting the same calls. Each method is one driver call;
errors are the driver's (the hooks map them).

:meth:`DatabasePort.transaction` runs a body in one multi-document transaction
(``ClientSession.with_transaction``: retried whole on a transient error), handing
it a port whose every call carries the session. Only a replica set or a sharded
cluster has transactions (:meth:`DatabasePort.supports_transactions`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, Self, TypeVar

from workmem.adapters.mongodb.documents import RESOURCES, THREADS, Document
from workmem.adapters.mongodb.versions import HISTORY
from workmem.kit import import_driver, run_sync

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient, MongoClient
    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase
    from pymongo.client_session import ClientSession
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
T = TypeVar("T")
C = TypeVar("C", bound="Collection[Document] | AsyncCollection[Document]")
S = TypeVar("S", bound="ClientSession | AsyncClientSession")


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

    async def delete_many(self, filter: Document) -> int:
        """How many documents were deleted."""
        ...

    async def find_one_and_delete(self, filter: Document) -> Document | None:
        """The document deleted, or ``None`` when nothing matched."""
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

    @property
    def history(self) -> CollectionPort:
        """``workmem_memory_history`` (:mod:`~workmem.adapters.mongodb.versions`)."""
        ...

    async def collection_names(self) -> list[str]: ...

    async def transaction(self, body: Callable[[DatabasePort], Coroutine[Any, Any, T]]) -> T:
        """``body``'s result, its calls (on the port it is given) one multi-document transaction, committed.

        ``with_transaction`` runs ``body`` again on a transient error (a write conflict); an exception of
        ``body`` aborts the transaction and propagates.
        """
        ...

    async def supports_transactions(self) -> bool:
        """Whether the server runs multi-document transactions (a replica set member or ``mongos``): ``hello``."""
        ...

    async def close_client(self) -> None: ...


def _codec_options() -> Any:
    """Whatever the client's defaults: dates decode timezone-aware (UTC), documents as dicts."""
    codec_options = import_driver("bson.codec_options", "mongodb").CodecOptions
    return codec_options(tz_aware=True, document_class=dict)


def _after() -> Any:
    return import_driver("pymongo", "mongodb").ReturnDocument.AFTER


class _Bound(Generic[C, S]):
    """What both :class:`CollectionPort` implementations hold: the driver's collection and a transaction's session."""

    def __init__(self, collection: C, session: S | None = None) -> None:
        self.collection = collection
        self.session = session
        self._after = _after()

    @classmethod
    def of(cls, database: Any, session: S | None) -> tuple[Self, Self, Self]:
        """The threads, resources and history collections of a driver's ``database``, each in ``session``."""
        return cls(database[THREADS], session), cls(database[RESOURCES], session), cls(database[HISTORY], session)

    @property
    def name(self) -> str:
        return self.collection.name


# -- pymongo.MongoClient: blocking calls that never suspend -------------------------------


def _transaction_options() -> Any:
    """Snapshot reads and majority writes: a transaction reads one point in time and commits durably."""
    pymongo = import_driver("pymongo", "mongodb")
    return {
        "read_concern": import_driver("pymongo.read_concern", "mongodb").ReadConcern("snapshot"),
        "write_concern": pymongo.WriteConcern("majority"),
    }


def _has_transactions(hello: Document) -> bool:
    """A ``hello`` reply of a server with multi-document transactions: a replica set member or ``mongos``."""
    sessions = hello.get("logicalSessionTimeoutMinutes") is not None
    return sessions and (hello.get("setName") is not None or hello.get("msg") == "isdbgrid")


class BlockingCollection(_Bound["Collection[Document]", "ClientSession"]):
    """:class:`CollectionPort` on a ``pymongo.collection.Collection`` (every call in ``session``, when one is given)."""

    async def find_one(self, filter: Document, projection: Document | None = None) -> Document | None:
        return self.collection.find_one(filter, projection, session=self.session)

    async def find_one_and_update(self, filter: Document, update: Document, *, upsert: bool = False) -> Document | None:
        return self.collection.find_one_and_update(
            filter, update, upsert=upsert, return_document=self._after, session=self.session
        )

    async def insert_one(self, document: Document) -> None:
        self.collection.insert_one(document, session=self.session)

    async def insert_many(self, documents: list[Document]) -> None:
        self.collection.insert_many(documents, ordered=False, session=self.session)

    async def update_one(self, filter: Document, update: Document, *, upsert: bool = False) -> Written:
        result = self.collection.update_one(filter, update, upsert=upsert, session=self.session)
        return Written(result.matched_count, result.upserted_id is not None)

    async def delete_one(self, filter: Document) -> int:
        return self.collection.delete_one(filter, session=self.session).deleted_count

    async def delete_many(self, filter: Document) -> int:
        return self.collection.delete_many(filter, session=self.session).deleted_count

    async def find_one_and_delete(self, filter: Document) -> Document | None:
        return self.collection.find_one_and_delete(filter, session=self.session)

    async def find(self, filter: Document, sort: Sort, skip: int, limit: int | None) -> list[Document]:
        cursor = self.collection.find(filter, session=self.session).sort(sort).skip(skip)
        return list(cursor if limit is None else cursor.limit(limit))

    async def count_documents(self, filter: Document) -> int:
        return self.collection.count_documents(filter, session=self.session)

    async def create_index(self, keys: Sort, options: Document) -> None:
        self.collection.create_index(keys, **options)


class BlockingDatabase:
    """:class:`DatabasePort` on a ``pymongo.MongoClient`` (connects lazily: no I/O here)."""

    def __init__(self, client: MongoClient[Document], database: str, session: ClientSession | None = None) -> None:
        self.client = client
        self.database: Database[Document] = client.get_database(database, codec_options=_codec_options())
        self.threads, self.resources, self.history = BlockingCollection.of(self.database, session)

    async def collection_names(self) -> list[str]:
        return self.database.list_collection_names()

    async def transaction(self, body: Callable[[DatabasePort], Coroutine[Any, Any, T]]) -> T:
        with self.client.start_session() as session:
            bound = BlockingDatabase(self.client, self.database.name, session)
            # The body's coroutine never suspends (blocking calls): it runs to its end inside the callback.
            result: T = session.with_transaction(lambda _: run_sync(body(bound)), **_transaction_options())
            return result

    async def supports_transactions(self) -> bool:
        return _has_transactions(self.client.admin.command("hello"))

    async def close_client(self) -> None:
        self.client.close()


# -- pymongo.AsyncMongoClient: the same calls, awaited -----------------------------------


class AwaitedCollection(_Bound["AsyncCollection[Document]", "AsyncClientSession"]):
    """:class:`CollectionPort` on a ``pymongo.asynchronous.collection.AsyncCollection`` (in ``session``, if given)."""

    async def find_one(self, filter: Document, projection: Document | None = None) -> Document | None:
        return await self.collection.find_one(filter, projection, session=self.session)

    async def find_one_and_update(self, filter: Document, update: Document, *, upsert: bool = False) -> Document | None:
        return await self.collection.find_one_and_update(
            filter, update, upsert=upsert, return_document=self._after, session=self.session
        )

    async def insert_one(self, document: Document) -> None:
        await self.collection.insert_one(document, session=self.session)

    async def insert_many(self, documents: list[Document]) -> None:
        await self.collection.insert_many(documents, ordered=False, session=self.session)

    async def update_one(self, filter: Document, update: Document, *, upsert: bool = False) -> Written:
        result = await self.collection.update_one(filter, update, upsert=upsert, session=self.session)
        return Written(result.matched_count, result.upserted_id is not None)

    async def delete_one(self, filter: Document) -> int:
        return (await self.collection.delete_one(filter, session=self.session)).deleted_count

    async def delete_many(self, filter: Document) -> int:
        return (await self.collection.delete_many(filter, session=self.session)).deleted_count

    async def find_one_and_delete(self, filter: Document) -> Document | None:
        return await self.collection.find_one_and_delete(filter, session=self.session)

    async def find(self, filter: Document, sort: Sort, skip: int, limit: int | None) -> list[Document]:
        cursor = self.collection.find(filter, session=self.session).sort(sort).skip(skip)
        return await (cursor if limit is None else cursor.limit(limit)).to_list()

    async def count_documents(self, filter: Document) -> int:
        return await self.collection.count_documents(filter, session=self.session)

    async def create_index(self, keys: Sort, options: Document) -> None:
        await self.collection.create_index(keys, **options)


class AwaitedDatabase:
    """:class:`DatabasePort` on a ``pymongo.AsyncMongoClient`` (no I/O here)."""

    def __init__(
        self, client: AsyncMongoClient[Document], database: str, session: AsyncClientSession | None = None
    ) -> None:
        self.client = client
        self.database: AsyncDatabase[Document] = client.get_database(database, codec_options=_codec_options())
        self.threads, self.resources, self.history = AwaitedCollection.of(self.database, session)

    async def collection_names(self) -> list[str]:
        return await self.database.list_collection_names()

    async def transaction(self, body: Callable[[DatabasePort], Coroutine[Any, Any, T]]) -> T:
        async with self.client.start_session() as session:
            bound = AwaitedDatabase(self.client, self.database.name, session)

            async def callback(_: AsyncClientSession) -> T:
                return await body(bound)

            result: T = await session.with_transaction(callback, **_transaction_options())
            return result

    async def supports_transactions(self) -> bool:
        return _has_transactions(await self.client.admin.command("hello"))

    async def close_client(self) -> None:
        await self.client.close()
