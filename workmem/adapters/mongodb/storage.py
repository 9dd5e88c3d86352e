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
* With history on (``connect(url, history=True)``), a change of working memory
  and the version it records are one multi-document transaction
  (``ClientSession.with_transaction``: the compare-and-swap write, the version
  numbered one above the newest, retention) in ``workmem_memory_history``
  (:mod:`workmem.adapters.mongodb.versions`). Only a replica set or a sharded
  cluster has transactions: on a standalone server ``connect(url, history=...)``
  raises :class:`~workmem.errors.OperationNotSupportedError` (history is never
  written outside the change's transaction). ``delete_resource`` is one
  transaction where the server has them, else three deletes, re-runnable.
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

from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
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
    next_rev,
    raw_metadata,
    resource_document,
    resource_from_document,
    resource_insert,
    resource_insert_fields,
    resource_rewrite,
    resource_set,
    resource_upsert,
    resource_working_memory,
    sort_spec,
    stored_memory,
    thread_from_document,
    thread_insert,
    thread_insert_fields,
    thread_replacement,
    thread_restoration,
    thread_rewrite,
    thread_touch,
    thread_upsert_fields,
)
from workmem.adapters.mongodb.port import AwaitedDatabase, BlockingDatabase, CollectionPort, DatabasePort
from workmem.adapters.mongodb.settings import MongoSettings, Secrets, checked_database
from workmem.adapters.mongodb.versions import (
    HISTORY_INDEXES,
    history_filter,
    imported_document,
    version_document,
    version_from_document,
)
from workmem.aio import AsyncMemoryStorage
from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    OperationNotSupportedError,
    StorageClosedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    WorkmemError,
)
from workmem.history import HistoryPolicy
from workmem.hooks import Capabilities, ListQuery, ScopeTarget, StorageHooks, read_record_page
from workmem.kit import (
    ErasedResource,
    HistoryKey,
    MemoryStorage,
    MemoryVersion,
    MergeChange,
    Recording,
    ResourceChange,
    ThreadChange,
    backoff,
    check_owner,
    import_driver,
    kept_versions,
    merge_document,
    missing_tables,
    raise_unchained,
    replaced_thread,
    run_sync,
    thread_working_memory,
    thread_working_memory_to_merge,
)
from workmem.records import UNSET, WORKING_MEMORY_KEY, RecordPage, Resource, Thread, ThreadPage, Unset

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient, MongoClient
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.collection import Collection

__all__ = ["AsyncMongoStorage", "MongoHooks", "MongoStorage"]

T = TypeVar("T")
C = TypeVar("C", bound="MongoClient[Document] | AsyncMongoClient[Document]")
P = TypeVar("P", bound="DatabasePort")

MAX_ATTEMPTS: Final = 200
"""Compare-and-swap attempts before giving up; each lost attempt means another writer succeeded."""
_MAX_BACKOFF_S: Final = 0.05  # the longest pause before a retry (kit.backoff)
_DUPLICATE_KEY: Final = (11000, 11001)
"""MongoDB's duplicate-key error codes (E11000; 11001 from old servers)."""


_NO_TRANSACTIONS: Final = 20
"""IllegalOperation: "Transaction numbers are only allowed on a replica set member or mongos"."""


def _document_id(document: Mapping[str, Any]) -> str:
    """The id of a document a page read (always a string: pages select string ids only)."""
    return str(document.get("id"))


class MongoHooks(StorageHooks):
    """The MongoDB hooks, once, over a :class:`~workmem.adapters.mongodb.port.DatabasePort`.

    Atomic steps are single conditional writes in the database (see the module
    docstring); a compare-and-swap loop that loses a race waits
    (:meth:`~workmem.flows.StorageHooks._pause`) and reads again.
    """

    capabilities: ClassVar[Capabilities] = Capabilities(
        cross_process_atomic=True, persistent=True, history=True, erase=True, snapshot_listing=False
    )
    """``snapshot_listing=False``: a full page and its ``total`` are two reads (see :meth:`_list_threads`)."""
    _transactions: bool | None = None
    """Whether the server runs multi-document transactions (``None``: not asked yet; see :meth:`_probe`)."""
    _history_policy: HistoryPolicy | None = None
    _client: MongoClient[Document] | AsyncMongoClient[Document]
    """The driver's client (the sync or the async one)."""

    def _attach(
        self, client: C, database: str, port: Callable[[C, str], P], *, owns_client: bool, url: str | None
    ) -> P:
        """Serve database ``database`` of ``client`` through ``port(client, database)`` (no I/O), and return it."""
        database = checked_database(database)
        self._client = client
        self._errors: ModuleType = import_driver("pymongo.errors", "mongodb")
        self._secrets = Secrets(url or f"mongodb:///{database}")
        with driver_errors(self._errors, self._secrets, "open database"):
            self._db = opened = port(client, database)
        self._owns_client = owns_client
        self._closed = False
        self.database = database
        return opened

    @property
    def history(self) -> HistoryPolicy | None:
        """Whether this connection records history; set by ``connect(url, history=...)``.

        Refused (:class:`OperationNotSupportedError`) on a server known to have no multi-document transactions
        (a standalone ``mongod``): a version is only ever written in the change's transaction.
        """
        return self._history_policy

    @history.setter
    def history(self, policy: HistoryPolicy | None) -> None:
        if policy is not None and self._transactions is None:
            self._probe_now()
        if policy is not None and self._transactions is False:
            raise OperationNotSupportedError(
                f"working memory history on {self._secrets.masked_url}: a standalone server, without the "
                "multi-document transactions that write a version with its change (use a replica set or a sharded "
                "cluster)"
            )
        self._history_policy = policy

    async def _probe(self) -> None:
        """Ask the server (``hello``) whether it runs multi-document transactions."""
        with self._driver("hello"):
            self._transactions = await self._db.supports_transactions()

    def _probe_now(self) -> None:
        """:meth:`_probe` where it needs no await (the sync storage), for a storage made from a client, not opened.

        ``from_url``/``open`` ask when they open. An async storage made from a client cannot ask from the setter:
        a standalone server refuses its first transaction instead (:meth:`_atomically`:
        :class:`OperationNotSupportedError`, nothing written).
        """

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
        await self._create(self._db.history, HISTORY_INDEXES)

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
        self,
        action: str,
        resource_id: str,
        change: Callable[[Document | None], tuple[T, Document, str | None]],
        record: Recording | None = None,
        now: datetime | None = None,
    ) -> T:
        """Compare-and-swap: ``change(stored document or None)`` gives the result, the fields to write and the
        working memory after the write; with ``record``, the version of it is written in the same transaction."""

        async def attempt(db: DatabasePort) -> T | None:
            old = await db.resources.find_one({"id": resource_id})
            result, fields, memory = change(old)
            if old is None:
                if not await self._insert_if_absent(db.resources, resource_id, fields):
                    return None
            elif not (await db.resources.update_one(cas_filter(old), {"$set": fields})).matched:
                return None
            await self._record(db, record, HistoryKey(resource_id), memory, now)
            return result

        with self._driver(action):
            return await self._retry(action, lambda: self._atomically(record, attempt))

    async def _rewrite_thread(
        self,
        action: str,
        thread_id: str,
        owner: str | None,
        change: Callable[[Document], tuple[T, Document, str | None]],
        record: Recording | None = None,
        now: datetime | None = None,
    ) -> T:
        """Compare-and-swap on a stored thread (:class:`ThreadNotFoundError` without one, owner checked), recording
        as :meth:`_rewrite_resource` does."""

        async def attempt(db: DatabasePort) -> T | None:
            old = await db.threads.find_one({"id": thread_id})
            if old is None:
                raise ThreadNotFoundError(thread_id)
            stored = thread_from_document(old)
            check_owner(stored, owner)
            result, fields, memory = change(old)
            if not (await db.threads.update_one(cas_filter(old), {"$set": fields})).matched:
                return None
            await self._record(db, record, HistoryKey(stored.resource_id, thread_id), memory, now)
            return result

        with self._driver(action):
            return await self._retry(action, lambda: self._atomically(record, attempt))

    async def _atomically(
        self, record: Recording | None, body: Callable[[DatabasePort], Coroutine[Any, Any, T | None]]
    ) -> T | None:
        """``body`` on the database: in one transaction when it records a version, else as it is.

        ``None`` (try again) when the version's number was taken meanwhile (an import: the unique index).
        """
        if record is None:
            return await body(self._db)
        try:
            return await self._db.transaction(body)
        except self._errors.PyMongoError as exc:
            if is_duplicate_key(self._errors, exc):
                return None
            if getattr(exc, "code", None) == _NO_TRANSACTIONS:
                self._transactions = False
                refused = OperationNotSupportedError(
                    f"working memory history on {self._secrets.masked_url}: it refused the multi-document "
                    "transaction that writes a version with its change (a standalone server; use a replica set or "
                    "a sharded cluster), and nothing was written"
                )
                refused.__cause__ = self._secrets.detach(exc)
                raise_unchained(refused)
            raise

    async def _record(
        self, db: DatabasePort, record: Recording | None, key: HistoryKey, memory: str | None, now: datetime | None
    ) -> None:
        """Write the version ``record`` makes of ``key`` (inside the write's transaction): newest + 1, retention."""
        if record is None:
            return
        assert now is not None
        versions = history_filter(key)
        newest = await db.history.find(versions, [("version", -1)], 0, 1)
        number = int(newest[0]["version"]) + 1 if newest else 1
        await db.history.insert_one(version_document(key, number, memory, now, record.kind, record.source_text))
        oldest = kept_versions(number, record.keep)
        if oldest > 1:
            await db.history.delete_many({**versions, "version": {"$lt": oldest}})

    # -- resources -------------------------------------------------------------------

    async def _get_resource(self, resource_id: str) -> Resource | None:
        with self._driver("get_resource"):
            document = await self._db.resources.find_one({"id": resource_id})
        return None if document is None else resource_from_document(document)

    async def _save_resource(self, resource: Resource, record: Recording | None = None) -> Resource:
        if record is not None:
            return await self._save_resource_recorded(resource, record)
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
        metadata = not isinstance(change.metadata, Unset) and change.metadata is not None
        if not metadata and not limited and change.record is None:
            return await self._upsert_resource(resource_id, change.working_memory, change.now)
        # A metadata merge, a size limit that compares with the stored memory, or a version to record in the
        # write's transaction: compare-and-swap.

        def rewrite(old: Document | None) -> tuple[Resource, Document, str | None]:
            new, fields = resource_rewrite(old, resource_id, change)
            return new, fields, new.working_memory

        return await self._rewrite_resource("update_resource", resource_id, rewrite, change.record, change.now)

    async def _save_resource_recorded(self, resource: Resource, record: Recording) -> Resource:
        """Compare-and-swap the whole resource in a transaction that records its working memory where it changed."""

        async def attempt(db: DatabasePort) -> Resource | None:
            old = await db.resources.find_one({"id": resource.id})
            if old is None:
                if not await self._insert_if_absent(db.resources, resource.id, resource_insert_fields(resource)):
                    return None
            elif not (await db.resources.update_one(cas_filter(old), {"$set": resource_set(resource, old)})).matched:
                return None
            if stored_memory(old) != resource.working_memory:
                await self._record(db, record, HistoryKey(resource.id), resource.working_memory, record.at)
            return resource

        with self._driver("save_resource"):
            return await self._retry("save_resource", lambda: self._atomically(record, attempt))

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

    async def _create_thread(self, thread: Thread, record: Recording | None = None) -> Thread:
        if record is not None:
            return await self._save_thread_recorded(thread, None, record)
        document = thread_insert(thread)
        with self._driver("create_thread"):
            try:
                await self._db.threads.insert_one(document)
            except self._errors.PyMongoError as exc:
                if not is_duplicate_key(self._errors, exc):
                    raise
                raise_unchained(ThreadExistsError(thread.id))  # the unique index on id refused it
        return thread

    async def _save_thread(self, thread: Thread, now: datetime, record: Recording | None = None) -> Thread:
        if record is not None:
            return await self._save_thread_recorded(thread, now, record)
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

    async def _save_thread_recorded(self, thread: Thread, now: datetime | None, record: Recording) -> Thread:
        """``create_thread`` (``now`` ``None``) or ``save_thread`` in a transaction that records the thread's
        working memory where it changed: compare-and-swap on the stored thread, the owner checked on it."""
        memory = thread_working_memory(thread.metadata)

        async def attempt(db: DatabasePort) -> Thread | None:
            old = await db.threads.find_one({"id": thread.id})
            if old is None:
                if not await self._insert_if_absent(db.threads, thread.id, thread_upsert_fields(thread)):
                    return None  # a racing insert: read again (create_thread then finds it and refuses)
                new = thread
                if memory is None:
                    return new  # none stored counts as None: nothing changed
            elif now is None:
                raise ThreadExistsError(thread.id)
            else:
                stored = thread_from_document(old)
                new = replaced_thread(stored, thread, now)  # another owner's thread: ThreadOwnershipError
                replace = {**thread_replacement(thread, now), REV: next_rev(old)}
                if not (await db.threads.update_one(cas_filter(old), {"$set": replace})).matched:
                    return None
                if thread_working_memory(stored.metadata) == memory:
                    return new
            await self._record(db, record, HistoryKey(new.resource_id, new.id), memory, record.at)
            return new

        with self._driver("create_thread" if now is None else "save_thread"):
            return await self._retry("save_thread", lambda: self._atomically(record, attempt))

    async def _update_thread(self, thread_id: str, change: ThreadChange) -> Thread:
        owner = change.owner
        if not isinstance(change.metadata, Unset) and change.metadata is not None:

            def rewrite(old: Document) -> tuple[Thread, Document, str | None]:
                new, fields = thread_rewrite(old, change)
                return new, fields, thread_working_memory(new.metadata)

            return await self._rewrite_thread("update_thread", thread_id, owner, rewrite, change.record, change.now)
        with self._driver("update_thread"):  # nothing to merge: one blind update (thread_touch)
            document = await self._db.threads.find_one_and_update(
                _owned_filter(thread_id, owner), {"$set": thread_touch(change.title, change.now), "$inc": {REV: 1}}
            )
        if document is None:
            await self._not_owned("update_thread", thread_id, owner)
            raise ThreadNotFoundError(thread_id)
        return thread_from_document(document)

    async def _delete_thread(self, thread_id: str, *, owner: str | None) -> bool:
        """The thread and its history: one transaction while this connection records history; else the thread,
        then its versions (left only by an import, or a connection with history: ``delete_resource`` removes
        what an interruption between the two leaves)."""

        async def delete(db: DatabasePort) -> bool:
            deleted = await db.threads.find_one_and_delete(_owned_filter(thread_id, owner))
            if deleted is None:
                return False
            key = HistoryKey(str(deleted.get("resourceId")), thread_id)
            await db.history.delete_many(history_filter(key))
            return True

        with self._driver("delete_thread"):
            if self.history is None or self._transactions is False:
                deleted = await delete(self._db)
            else:
                deleted = await self._db.transaction(delete)
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
        """The page from one ``find``; a page that ends before ``per_page`` (every ``per_page=None`` page) is the
        end of the resource's threads, so that read counts them too. Only a full page, or an empty one past
        the end, is followed by ``count_documents``: a second read, which a write between the two may
        change, so ``total`` is then never below what the page showed (the listing is no snapshot)."""
        owned = {"resourceId": query.resource_id}
        sort = sort_spec(query.order_by, query.direction)
        with self._driver("list_threads"):
            documents = await self._db.threads.find(owned, sort, query.offset, query.per_page)
            if query.per_page is None or 0 < len(documents) < query.per_page or not (documents or query.offset):
                total = query.offset + len(documents)  # this read reached the end of the resource's threads
            else:  # a full page, or an empty one past the end (where the skip saw fewer than the offset)
                shown = query.offset + len(documents) if documents else 0
                total = max(shown, await self._db.threads.count_documents(owned))
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
        ids = [document["id"] for document in documents]  # insert_many adds an _id to each document
        return frozenset(ids[index] for index in await self._insert_absent(collection, action, documents))

    async def _insert_absent(
        self, collection: CollectionPort, action: str, documents: list[Document]
    ) -> frozenset[int]:
        """One unordered ``insert_many``; the indexes of the documents its duplicate-key errors refused."""
        if not documents:
            return frozenset()
        with self._driver(action):
            try:
                await collection.insert_many(documents)
            except self._errors.BulkWriteError as exc:
                details = exc.details or {}
                errors = details.get("writeErrors") or []
                others = [error for error in errors if error.get("code") not in _DUPLICATE_KEY]
                if others or details.get("writeConcernErrors"):
                    raise
                return frozenset(int(error["index"]) for error in errors)
        return frozenset()

    async def _replace_thread(self, thread: Thread) -> bool:
        owned = {"id": thread.id, "resourceId": thread.resource_id}
        with self._driver("replace_thread"):
            written = await self._db.threads.update_one(owned, {"$set": thread_restoration(thread), "$inc": {REV: 1}})
        return written.matched > 0

    # -- working memory --------------------------------------------------------------

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch, now, max_chars, record = change.patch, change.now, change.max_chars, change.record
        if target.scope == "resource":
            assert target.resource_id is not None
            resource_id = target.resource_id

            def merge_resource(old: Document | None) -> tuple[dict[str, Any], Document, str | None]:
                stored = None if old is None else resource_working_memory(old.get("workingMemory"))
                merged, text = merge_document(stored, patch, max_chars)
                return merged, resource_rewrite(old, resource_id, ResourceChange(text, UNSET, now))[1], text

            return await self._rewrite_resource("merge_working_memory", resource_id, merge_resource, record, now)

        def merge_thread(old: Document) -> tuple[dict[str, Any], Document, str | None]:
            stored = thread_working_memory_to_merge(raw_metadata(old.get("metadata")))
            merged, text = merge_document(stored, patch, max_chars)
            return merged, thread_rewrite(old, ThreadChange(UNSET, {WORKING_MEMORY_KEY: text}, now))[1], text

        assert target.thread_id is not None
        thread_id, owner = target.thread_id, target.resource_id
        return await self._rewrite_thread("merge_working_memory", thread_id, owner, merge_thread, record, now)

    # -- history and erasure ---------------------------------------------------------

    async def _history(self, key: HistoryKey, limit: int, before: int | None) -> list[MemoryVersion]:
        versions = history_filter(key)
        if before is not None:
            versions["version"] = {"$lt": before}
        with self._driver("working_memory_history"):
            documents = await self._db.history.find(versions, [("version", -1)], 0, limit)
        return [version_from_document(document) for document in documents]

    async def _insert_versions(self, versions: Sequence[MemoryVersion]) -> int:
        # Each version is one insert the unique index decides: present (same key and number) ones are refused.
        documents = [imported_document(version) for version in versions]
        return len(documents) - len(await self._insert_absent(self._db.history, "insert versions", documents))

    async def _delete_resource(self, resource_id: str) -> ErasedResource:
        """One transaction where the server runs them; else the threads, then the history, then the resource.

        Without transactions each of the three deletes is atomic alone and the order makes a rerun complete the
        erasure: an interruption leaves the resource record (so the user is still findable) until the last step.
        """

        async def erase(db: DatabasePort) -> ErasedResource:
            owned = {"resourceId": resource_id}
            found = await db.threads.find(owned, [("id", 1)], 0, None)
            ids = sorted(str(document.get("id")) for document in found)
            if ids:
                await db.threads.delete_many({**owned, "id": {"$in": ids}})
            versions = await db.history.delete_many({"resource_id": resource_id})
            resource = await db.resources.delete_one({"id": resource_id}) > 0
            return ErasedResource(resource_id, resource, tuple(ids), versions)

        with self._driver("delete_resource"):
            if self._transactions is None:
                await self._probe()
            if self._transactions:
                return await self._db.transaction(erase)
            return await erase(self._db)

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
        port = self._attach(client, database, BlockingDatabase, owns_client=owns_client, url=url)
        self._threads: Collection[Document] = port.threads.collection
        self._resources: Collection[Document] = port.resources.collection
        if create_indexes:
            self.create_indexes()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        settings = MongoSettings.from_url(url, **options)
        database, create, secrets = settings.database, settings.create, settings.secrets
        client = open_client(url, settings.options, secrets)
        try:
            storage = cls(
                client, _database_name(client, database, secrets), owns_client=True, url=url, create_indexes=create
            )
            if not create:
                run_sync(storage._check_collections())
            return storage  # connect(url, history=...) asks the server then, through the history setter
        except BaseException:
            client.close()
            raise

    def create_indexes(self) -> None:
        """Create the unique ``id`` indexes and the thread listing indexes when missing (idempotent)."""
        run_sync(self._create_indexes())

    def _probe_now(self) -> None:
        run_sync(self._probe())  # the blocking driver: the coroutine never suspends


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
        port = self._attach(client, database, AwaitedDatabase, owns_client=owns_client, url=url)
        self._threads: AsyncCollection[Document] = port.threads.collection
        self._resources: AsyncCollection[Document] = port.resources.collection

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        """Open ``url`` as :meth:`MongoStorage.from_url` does: indexes created, or with ``create=False`` checked."""
        settings = MongoSettings.from_url(url, **options)
        database, create, secrets = settings.database, settings.create, settings.secrets
        client = open_async_client(url, settings.options, secrets)
        try:
            storage = cls(client, _database_name(client, database, secrets), owns_client=True, url=url)
            with driver_errors(storage._errors, secrets, "connect"):
                await client.aconnect()  # a +srv URL resolves its DNS records here
            if create:
                await storage._create_indexes()
            else:
                await storage._check_collections()
            await storage._probe()  # so that connect_async(url, history=...) on a standalone server refuses at once
            return storage
        except BaseException:
            await client.close()
            raise

    async def create_indexes(self) -> None:
        """Create the unique ``id`` indexes and the thread listing indexes when missing (idempotent)."""
        await self._create_indexes()


MongoStorage.async_adapter = "workmem.adapters.mongodb.storage:AsyncMongoStorage"


def _database_name(
    client: MongoClient[Document] | AsyncMongoClient[Document], database: str | None, secrets: Secrets
) -> str:
    """``database``, or else the one the URL names (``DEFAULT_DATABASE`` where it names none); no I/O."""
    if database is not None:
        return database
    with driver_errors(import_driver("pymongo.errors", "mongodb"), secrets, "read database name"):
        return client.get_default_database(DEFAULT_DATABASE).name


def _owned_filter(thread_id: str, owner: str | None) -> Document:
    """The thread ``thread_id``, and only while ``owner`` owns it when one is given (one atomic match)."""
    return {"id": thread_id} if owner is None else {"id": thread_id, "resourceId": owner}
