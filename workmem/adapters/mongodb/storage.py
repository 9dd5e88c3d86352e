"""MongoDB adapter: ``mongodb://user:pass@host:27017/dbname`` or ``mongodb+srv://user:pass@cluster.example.net/dbname``.

The database is the URL's path (``mastra`` when it names none; the
``database=`` option overrides both). Other options go to ``pymongo.MongoClient``
(or ``pymongo.AsyncMongoClient``)
(``serverSelectionTimeoutMS=...``, ``tls=True``, ...); URL query options work
too. Unless set, server selection and connect time out after 5 s, so an
unreachable server raises :class:`~workmem.errors.BackendUnavailableError`
quickly instead of after pymongo's 30 s.

Collections and documents are those of the TypeScript ``@mastra/mongodb``
adapter (``mastra_threads``, ``mastra_resources``; see
:mod:`workmem.adapters.mongodb.documents`). Atomicity needs no multi-document
transaction, so a standalone server works:

* ``save_thread`` is an upsert filtered on ``{id, resourceId}``: when the id
  belongs to another resource, the insert half hits the unique index on ``id``
  (E11000) and nothing is written.
* ``create_thread`` is one ``insert_one``; the unique index on ``id`` refuses an
  existing id (E11000), whoever owns it.
* Read-modify-writes (metadata merges, working-memory merges) are optimistic
  compare-and-swap loops: read the document, compute in Python, write with a
  filter on the ``workmemRev`` revision and ``updatedAt`` that were read;
  a write that matched nothing lost a race and retries (bounded, with jitter).
* Sub-documents are always written whole (``$set: {metadata: ...}``) or by a
  fixed path (``metadata.workingMemory``), never by user-chosen key paths, so
  metadata keys containing ``.`` or starting with ``$`` are stored as given.

The hooks are written once (:class:`MongoHooks`) as coroutines over a small
port of collection operations (:mod:`workmem.adapters.mongodb.port`):
:class:`MongoStorage` runs them on ``pymongo.MongoClient`` (the sync API) and
:class:`AsyncMongoStorage` on ``pymongo.AsyncMongoClient`` (the async API,
``workmem.connect_async``; pymongo's own asyncio client, not Motor).

Requires MongoDB 5.0 or newer (nested ``$``-prefixed and dotted field names in
stored documents) and pymongo 4.9+.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Self, TypeVar

from workmem.adapters.mongodb.client import driver_errors, is_duplicate_key, open_async_client, open_client
from workmem.adapters.mongodb.documents import (
    DEFAULT_DATABASE,
    RESOURCE_INDEXES,
    RESOURCES,
    REV,
    THREAD_INDEXES,
    THREADS,
    Document,
    IndexSpec,
    cas_filter,
    raw_metadata,
    resource_document,
    resource_from_document,
    resource_insert,
    resource_rewrite,
    resource_upsert,
    resource_working_memory,
    sort_spec,
    thread_from_document,
    thread_insert,
    thread_insert_fields,
    thread_replacement,
    thread_restoration,
    thread_rewrite,
    thread_touch,
)
from workmem.adapters.mongodb.port import AwaitedDatabase, BlockingDatabase, CollectionPort, DatabasePort
from workmem.adapters.mongodb.settings import MongoSettings, Secrets, checked_database
from workmem.aio import AsyncMemoryStorage
from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    StorageClosedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    WorkmemError,
)
from workmem.hooks import Capabilities, ListQuery, ScopeTarget, StorageHooks, read_record_page
from workmem.kit import (
    MemoryStorage,
    MergeChange,
    ResourceChange,
    ThreadChange,
    backoff,
    check_owner,
    import_driver,
    merge_document,
    missing_tables,
    raise_unchained,
    run_sync,
    thread_working_memory_to_merge,
)
from workmem.records import UNSET, WORKING_MEMORY_KEY, RecordPage, Resource, Thread, ThreadPage, Unset

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient, MongoClient
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.collection import Collection

__all__ = ["AsyncMongoStorage", "MongoHooks", "MongoStorage"]

T = TypeVar("T")

MAX_ATTEMPTS: Final = 200
"""Compare-and-swap attempts before giving up; each lost attempt means another writer succeeded."""
_MAX_BACKOFF_S: Final = 0.05  # the longest pause before a retry (kit.backoff)
_DUPLICATE_KEY: Final = (11000, 11001)
"""MongoDB's duplicate-key error codes (E11000; 11001 from old servers)."""


def _document_id(document: Mapping[str, Any]) -> str:
    """The id of a document a page read (always a string: pages select string ids only)."""
    return str(document.get("id"))


class MongoHooks(StorageHooks):
    """The MongoDB hooks, once, over a :class:`~workmem.adapters.mongodb.port.DatabasePort`.

    Atomic steps are single conditional writes in the database (see the module
    docstring); a compare-and-swap loop that loses a race waits
    (:meth:`~workmem.flows.StorageHooks._pause`) and reads again.
    """

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=True, persistent=True)

    def _attach(self, port: DatabasePort, database: str, *, owns_client: bool, url: str | None) -> None:
        self._db = port
        self._errors: ModuleType = import_driver("pymongo.errors", "mongodb")
        self._secrets = Secrets(url or f"mongodb:///{database}")
        self._owns_client = owns_client
        self._closed = False
        self.database = database

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self._secrets.masked_url!r}, database={self.database!r})"

    # -- setup -----------------------------------------------------------------------

    async def _check_collections(self) -> None:
        """``create=False``: the collections must be there (nothing is created)."""
        with self._driver("list collections"):
            found = set(await self._db.collection_names())
        missing = [name for name in (THREADS, RESOURCES) if name not in found]
        if missing:
            raise missing_tables(f"{self._secrets.masked_url} (database {self.database})", missing)

    async def _create_indexes(self) -> None:
        await self._create(self._db.threads, THREAD_INDEXES)
        await self._create(self._db.resources, RESOURCE_INDEXES)

    async def _create(self, collection: CollectionPort, specs: tuple[IndexSpec, ...]) -> None:
        for keys, options in specs:
            try:
                with self._driver(f"create index {keys} on {collection.name}"):
                    await collection.create_index(keys, options)
            except WorkmemError as exc:
                code = getattr(exc.__cause__, "code", None)
                if code in (85, 86):  # IndexOptionsConflict / IndexKeySpecsConflict
                    raise BackendRefusedError(
                        f"{collection.name} already has an index on {keys} with other options (is it unique?); "
                        f"drop it or make it match: {exc}"
                    ) from exc.__cause__
                raise

    # -- plumbing --------------------------------------------------------------------

    def _driver(self, action: str) -> AbstractContextManager[None]:
        """Map the driver's errors for one call; a closed storage refuses it first (a client passed in stays open)."""
        if self._closed:
            raise StorageClosedError(f"this {type(self).__name__} is closed ({self._secrets.masked_url})")
        return driver_errors(self._errors, self._secrets, action)

    async def _retry(self, action: str, attempt: Callable[[], Awaitable[T | None]]) -> T:
        """Run ``attempt`` until it returns a result (``None``: it lost a race and wrote nothing), with backoff."""
        for number in range(MAX_ATTEMPTS):
            if number:
                await self._pause(backoff(number, first=0.0005, cap=_MAX_BACKOFF_S))
            result = await attempt()
            if result is not None:
                return result
        raise BackendBusyError(f"mongodb {action}: gave up after {MAX_ATTEMPTS} attempts lost to concurrent writers")

    async def _insert_if_absent(self, collection: CollectionPort, record_id: str, fields: Document) -> bool:
        """Insert ``{id: record_id, **fields}`` unless the id exists; whether it was inserted."""
        try:
            written = await collection.update_one({"id": record_id}, {"$setOnInsert": fields}, upsert=True)
        except self._errors.PyMongoError as exc:
            if is_duplicate_key(self._errors, exc):
                return False  # a concurrent insert won
            raise
        return written.upserted

    async def _rewrite_resource(
        self, action: str, resource_id: str, change: Callable[[Document | None], tuple[T, Document]]
    ) -> T:
        """Compare-and-swap: ``change(stored document or None)`` gives the result and the fields to write."""

        async def attempt() -> T | None:
            old = await self._db.resources.find_one({"id": resource_id})
            result, fields = change(old)
            if old is None:
                inserted = await self._insert_if_absent(self._db.resources, resource_id, fields)
                return result if inserted else None
            written = await self._db.resources.update_one(cas_filter(old), {"$set": fields})
            return result if written.matched else None

        with self._driver(action):
            return await self._retry(action, attempt)

    async def _rewrite_thread(
        self, action: str, thread_id: str, owner: str | None, change: Callable[[Document], tuple[T, Document]]
    ) -> T:
        """Compare-and-swap on a stored thread (:class:`ThreadNotFoundError` without one, owner checked)."""

        async def attempt() -> T | None:
            old = await self._db.threads.find_one({"id": thread_id})
            if old is None:
                raise ThreadNotFoundError(thread_id)
            check_owner(thread_from_document(old), owner)
            result, fields = change(old)
            written = await self._db.threads.update_one(cas_filter(old), {"$set": fields})
            return result if written.matched else None

        with self._driver(action):
            return await self._retry(action, attempt)

    # -- resources -------------------------------------------------------------------

    async def _get_resource(self, resource_id: str) -> Resource | None:
        with self._driver("get_resource"):
            document = await self._db.resources.find_one({"id": resource_id})
        return None if document is None else resource_from_document(document)

    async def _save_resource(self, resource: Resource) -> Resource:
        update = {"$set": resource_document(resource), "$inc": {REV: 1}}

        async def attempt() -> Resource | None:
            try:
                await self._db.resources.update_one({"id": resource.id}, update, upsert=True)
            except self._errors.PyMongoError as exc:
                if is_duplicate_key(self._errors, exc):
                    return None  # E11000 only when two upserts raced to insert: the next one updates
                raise
            return resource

        with self._driver("save_resource"):
            return await self._retry("save_resource", attempt)

    async def _update_resource(self, resource_id: str, change: ResourceChange) -> Resource:
        limited = change.max_chars is not None and isinstance(change.working_memory, str)
        if (isinstance(change.metadata, Unset) or change.metadata is None) and not limited:
            return await self._upsert_resource(resource_id, change.working_memory, change.now)
        # A metadata merge, or a size limit that compares with the stored memory: compare-and-swap.
        return await self._rewrite_resource(
            "update_resource", resource_id, lambda old: resource_rewrite(old, resource_id, change)
        )

    async def _upsert_resource(self, resource_id: str, working_memory: str | Unset | None, now: datetime) -> Resource:
        """No metadata to merge: one atomic upsert (:func:`resource_upsert`), no read."""
        update = resource_upsert(resource_id, working_memory, now)

        async def attempt() -> Resource | None:
            try:
                document = await self._db.resources.find_one_and_update({"id": resource_id}, update, upsert=True)
            except self._errors.PyMongoError as exc:
                if is_duplicate_key(self._errors, exc):
                    return None  # two upserts raced to insert: the next one updates
                raise
            assert document is not None  # an upsert always returns the document
            return resource_from_document(document)

        with self._driver("update_resource"):
            return await self._retry("update_resource", attempt)

    # -- threads ---------------------------------------------------------------------

    async def _get_thread(self, thread_id: str) -> Thread | None:
        with self._driver("get_thread"):
            document = await self._db.threads.find_one({"id": thread_id})
        return None if document is None else thread_from_document(document)

    async def _create_thread(self, thread: Thread) -> Thread:
        document = thread_insert(thread)
        with self._driver("create_thread"):
            try:
                await self._db.threads.insert_one(document)
            except self._errors.PyMongoError as exc:
                if not is_duplicate_key(self._errors, exc):
                    raise
                raise_unchained(ThreadExistsError(thread.id))  # the unique index on id refused it
        return thread

    async def _save_thread(self, thread: Thread, now: datetime) -> Thread:
        owned = {"id": thread.id, "resourceId": thread.resource_id}
        replace = {"$set": thread_replacement(thread, now), "$inc": {REV: 1}}
        threads = self._db.threads

        async def attempt() -> Thread | None:
            try:
                created = await threads.update_one(owned, {"$setOnInsert": thread_insert_fields(thread)}, upsert=True)
            except self._errors.PyMongoError as exc:
                if not is_duplicate_key(self._errors, exc):
                    raise
                # The id exists but not with this owner; owners never change, so one read decides.
                holder = await threads.find_one({"id": thread.id}, {"resourceId": 1})
                if holder is not None and holder.get("resourceId") != thread.resource_id:
                    refused = ThreadOwnershipError(thread.id, thread.resource_id)
                    refused.__cause__ = self._secrets.detach(exc)
                    raise_unchained(refused)
                return None  # a same-owner insert raced ours, or the other owner's thread was just deleted
            if created.upserted:
                return thread
            document = await threads.find_one_and_update(owned, replace)
            return None if document is None else thread_from_document(document)  # None: deleted in between

        with self._driver("save_thread"):
            return await self._retry("save_thread", attempt)

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        owner = change.owner
        if not isinstance(change.metadata, Unset) and change.metadata is not None:
            return await self._rewrite_thread(
                "update_thread", thread_id, owner, lambda old: thread_rewrite(old, change)
            )
        with self._driver("update_thread"):  # nothing to merge: one blind update (thread_touch)
            document = await self._db.threads.find_one_and_update(
                _owned_filter(thread_id, owner), {"$set": thread_touch(change.title, change.now), "$inc": {REV: 1}}
            )
        if document is None:
            await self._not_owned("update_thread", thread_id, owner)
            raise ThreadNotFoundError(thread_id)
        return thread_from_document(document)

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        with self._driver("delete_thread"):
            deleted = await self._db.threads.delete_one(_owned_filter(thread_id, owner)) > 0
        if not deleted:
            await self._not_owned("delete_thread", thread_id, owner)
        return deleted

    async def _not_owned(self, action: str, thread_id: str, owner: str | None) -> None:
        """After a write conditioned on ``owner`` matched nothing: raise when another resource owns the thread.

        A thread this read finds under ``owner`` itself was created after the write, which saw no thread.
        """
        if owner is None:
            return
        with self._driver(action):
            document = await self._db.threads.find_one({"id": thread_id})
        if document is not None and document.get("resourceId") != owner:
            raise ThreadOwnershipError(thread_id, owner)

    async def _list_threads(self, query: ListQuery) -> ThreadPage:
        owned = {"resourceId": query.resource_id}
        sort = sort_spec(query.order_by, query.direction)
        with self._driver("list_threads"):
            documents = await self._db.threads.find(owned, sort, query.offset, query.per_page)
            total = await self._db.threads.count_documents(owned)
        return query.read_page(documents, thread_from_document, total)

    # -- iteration and bulk writes ---------------------------------------------------
    #
    # Pages are keyset reads on the unique ``id`` index: ``find({id: {$gt: after}}).sort(id).limit()``. Strings
    # compare by their UTF-8 bytes (the collections have no collation), which is code-point order; only
    # string ids are iterated (a bound on a string selects strings only), so a document whose ``id`` is not
    # a string -- unreadable, and unreachable by id -- never sits between two pages.

    async def _resource_page(self, after: str | None, limit: int) -> RecordPage[Resource]:
        documents = await self._page(self._db.resources, "resource_page", after, limit)
        return read_record_page(documents, resource_from_document, _document_id, limit)

    async def _thread_page(self, after: str | None, limit: int) -> RecordPage[Thread]:
        documents = await self._page(self._db.threads, "thread_page", after, limit)
        return read_record_page(documents, thread_from_document, _document_id, limit)

    async def _page(self, collection: CollectionPort, action: str, after: str | None, limit: int) -> list[Document]:
        bound = {"$gte": ""} if after is None else {"$gt": after}
        with self._driver(action):
            return await collection.find({"id": bound}, [("id", 1)], 0, limit)

    async def _insert_resources(self, resources: Sequence[Resource]) -> frozenset[str]:
        return await self._insert_many(self._db.resources, "insert_resources", [resource_insert(r) for r in resources])

    async def _insert_threads(self, threads: Sequence[Thread]) -> frozenset[str]:
        # The unique index on id refuses an id that exists, whoever owns it: nothing is ever moved.
        return await self._insert_many(self._db.threads, "insert_threads", [thread_insert(t) for t in threads])

    async def _insert_many(self, collection: CollectionPort, action: str, documents: list[Document]) -> frozenset[str]:
        """One unordered ``insert_many``; the ids its duplicate-key errors (E11000) name were already present."""
        if not documents:
            return frozenset()
        ids = [document["id"] for document in documents]  # insert_many adds an _id to each document
        with self._driver(action):
            try:
                await collection.insert_many(documents)
            except self._errors.BulkWriteError as exc:
                details = exc.details or {}
                errors = details.get("writeErrors") or []
                others = [error for error in errors if error.get("code") not in _DUPLICATE_KEY]
                if others or details.get("writeConcernErrors"):
                    raise
                return frozenset(ids[error["index"]] for error in errors)
        return frozenset()

    async def _replace_thread(self, thread: Thread) -> bool:
        owned = {"id": thread.id, "resourceId": thread.resource_id}
        with self._driver("replace_thread"):
            written = await self._db.threads.update_one(owned, {"$set": thread_restoration(thread), "$inc": {REV: 1}})
        return written.matched > 0

    # -- working memory --------------------------------------------------------------

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars = change.patch, change.now, change.max_chars
        if target.scope == "resource":
            assert target.resource_id is not None
            resource_id = target.resource_id

            def merge_resource(old: Document | None) -> tuple[dict[str, Any], Document]:
                stored = None if old is None else resource_working_memory(old.get("workingMemory"))
                merged, text = merge_document(stored, patch, max_chars)
                return merged, resource_rewrite(old, resource_id, ResourceChange(text, UNSET, now))[1]

            return await self._rewrite_resource("merge_working_memory", resource_id, merge_resource)

        def merge_thread(old: Document) -> tuple[dict[str, Any], Document]:
            stored = thread_working_memory_to_merge(raw_metadata(old.get("metadata")))
            merged, text = merge_document(stored, patch, max_chars)
            return merged, thread_rewrite(old, ThreadChange(UNSET, {WORKING_MEMORY_KEY: text}, now))[1]

        assert target.thread_id is not None
        return await self._rewrite_thread("merge_working_memory", target.thread_id, target.resource_id, merge_thread)

    # -- lifecycle -------------------------------------------------------------------

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self._db.close_client()


class MongoStorage(MongoHooks, MemoryStorage):
    """Resources and threads in the ``mastra_resources`` / ``mastra_threads`` collections of one database (sync)."""

    def __init__(
        self,
        client: MongoClient[Document],
        database: str = DEFAULT_DATABASE,
        *,
        owns_client: bool = False,
        url: str | None = None,
        create_indexes: bool = True,
    ) -> None:
        """Use ``client`` (a ``pymongo.MongoClient``); ``close()`` closes it if ``owns_client``."""
        database = checked_database(database)
        self._client = client
        with driver_errors(
            import_driver("pymongo.errors", "mongodb"), Secrets(url or f"mongodb:///{database}"), "open database"
        ):
            port = BlockingDatabase(client, database)
        self._threads: Collection[Document] = port.threads.collection
        self._resources: Collection[Document] = port.resources.collection
        self._attach(port, database, owns_client=owns_client, url=url)
        if create_indexes:
            self.create_indexes()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        settings = MongoSettings.from_url(url, **options)
        database, create, secrets = settings.database, settings.create, settings.secrets
        client = open_client(url, settings.options, secrets)
        try:
            if database is None:
                with driver_errors(import_driver("pymongo.errors", "mongodb"), secrets, "read database name"):
                    database = client.get_default_database(DEFAULT_DATABASE).name
            storage = cls(client, database, owns_client=True, url=url, create_indexes=create)
            if not create:
                run_sync(storage._check_collections())
            return storage
        except BaseException:
            client.close()
            raise

    def create_indexes(self) -> None:
        """Create the unique ``id`` indexes and the thread listing indexes when missing (idempotent)."""
        run_sync(self._create_indexes())


class AsyncMongoStorage(MongoHooks, AsyncMemoryStorage):
    """:class:`MongoStorage` as coroutines, on ``pymongo.AsyncMongoClient``: the same collections and documents."""

    def __init__(
        self,
        client: AsyncMongoClient[Document],
        database: str = DEFAULT_DATABASE,
        *,
        owns_client: bool = False,
        url: str | None = None,
    ) -> None:
        """Use ``client`` (a ``pymongo.AsyncMongoClient``); creates nothing (see :meth:`create_indexes`)."""
        database = checked_database(database)
        self._client = client
        with driver_errors(
            import_driver("pymongo.errors", "mongodb"), Secrets(url or f"mongodb:///{database}"), "open database"
        ):
            port = AwaitedDatabase(client, database)
        self._threads: AsyncCollection[Document] = port.threads.collection
        self._resources: AsyncCollection[Document] = port.resources.collection
        self._attach(port, database, owns_client=owns_client, url=url)

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        """Open ``url`` as :meth:`MongoStorage.from_url` does: indexes created, or with ``create=False`` checked."""
        settings = MongoSettings.from_url(url, **options)
        database, create, secrets = settings.database, settings.create, settings.secrets
        client = open_async_client(url, settings.options, secrets)
        try:
            errors = import_driver("pymongo.errors", "mongodb")
            if database is None:
                with driver_errors(errors, secrets, "read database name"):
                    database = client.get_default_database(DEFAULT_DATABASE).name
            storage = cls(client, database, owns_client=True, url=url)
            with driver_errors(errors, secrets, "connect"):
                await client.aconnect()  # a +srv URL resolves its DNS records here
            if create:
                await storage._create_indexes()
            else:
                await storage._check_collections()
            return storage
        except BaseException:
            await client.close()
            raise

    async def create_indexes(self) -> None:
        """Create the unique ``id`` indexes and the thread listing indexes when missing (idempotent)."""
        await self._create_indexes()


MongoStorage.async_adapter = "workmem.adapters.mongodb.storage:AsyncMongoStorage"


def _owned_filter(thread_id: str, owner: str | None) -> Document:
    """The thread ``thread_id``, and only while ``owner`` owns it when one is given (one atomic match)."""
    return {"id": thread_id} if owner is None else {"id": thread_id, "resourceId": owner}
