"""MongoDB adapter: ``mongodb://user:pass@host:27017/dbname`` or ``mongodb+srv://user:pass@cluster.example.net/dbname``.

The database is the URL's path (``mastra`` when it names none; the
``database=`` option overrides both). Other options go to ``pymongo.MongoClient``
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

Requires MongoDB 5.0 or newer (nested ``$``-prefixed and dotted field names in
stored documents) and pymongo 4.9+.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Self

from workmem.adapters.mongodb.client import Secrets, driver_errors, is_duplicate_key, open_client
from workmem.adapters.mongodb.documents import (
    DEFAULT_DATABASE,
    RESOURCE_INDEXES,
    RESOURCES,
    REV,
    THREAD_INDEXES,
    THREADS,
    IndexSpec,
    cas_filter,
    is_native_metadata,
    next_rev,
    raw_metadata,
    resource_document,
    resource_from_document,
    resource_metadata_value,
    resource_working_memory,
    sort_spec,
    thread_from_document,
    thread_insert_fields,
)
from workmem.changes import merge_document
from workmem.errors import (
    BackendBusyError,
    BackendRefusedError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnershipError,
    ValidationError,
    WorkmemError,
)
from workmem.kit import import_driver
from workmem.records import UNSET, WORKING_MEMORY_KEY, Direction, OrderBy, Resource, Scope, Thread, ThreadPage, Unset
from workmem.storage import (
    Capabilities,
    MemoryStorage,
    check_create,
    check_list_args,
    check_resource_update,
    check_scope,
    check_thread_update,
    missing_tables,
    thread_working_memory_to_merge,
)
from workmem.timestamps import utc_now
from workmem.validation import dump_json, validate_id, validate_json_object

if TYPE_CHECKING:
    from pymongo import MongoClient
    from pymongo.collection import Collection

__all__ = ["MongoStorage"]

Document = dict[str, Any]

MAX_ATTEMPTS: Final = 200
"""Compare-and-swap attempts before giving up; each lost attempt means another writer succeeded."""
_MAX_BACKOFF_S: Final = 0.05


class MongoStorage(MemoryStorage):
    """Resources and threads in the ``mastra_resources`` / ``mastra_threads`` collections of one database."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=True, persistent=True)

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
        if not isinstance(database, str) or not database:
            raise ValidationError(f"database must be a non-empty str, not {database!r}")
        pymongo = import_driver("pymongo", "mongodb")
        self._errors: ModuleType = import_driver("pymongo.errors", "mongodb")
        self._after = pymongo.ReturnDocument.AFTER
        self._secrets = Secrets(url or f"mongodb:///{database}")
        self._client = client
        self._owns_client = owns_client
        self._closed = False
        self.database = database
        codec_options = import_driver("bson.codec_options", "mongodb").CodecOptions
        with self._driver("open database"):
            # Whatever the client's defaults: dates decode timezone-aware (UTC), documents as dicts.
            db = client.get_database(database, codec_options=codec_options(tz_aware=True, document_class=dict))
            self._threads: Collection[Document] = db[THREADS]
            self._resources: Collection[Document] = db[RESOURCES]
        if create_indexes:
            self.create_indexes()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        database = options.pop("database", None)
        create = check_create(options.pop("create", True))
        secrets = Secrets(url)
        client = open_client(url, options, secrets)
        try:
            if database is None:
                with driver_errors(import_driver("pymongo.errors", "mongodb"), secrets, "read database name"):
                    database = client.get_default_database(DEFAULT_DATABASE).name
            storage = cls(client, database, owns_client=True, url=url, create_indexes=create)
            if not create:
                storage._check_collections()
            return storage
        except BaseException:
            client.close()
            raise

    def __repr__(self) -> str:
        return f"MongoStorage(url={self._secrets.masked_url!r}, database={self.database!r})"

    def _check_collections(self) -> None:
        """``connect(url, create=False)``: the collections must be there (nothing is created)."""
        with self._driver("list collections"):
            db = self._threads.database
            found = set(db.list_collection_names())
        missing = [name for name in (THREADS, RESOURCES) if name not in found]
        if missing:
            raise missing_tables(f"{self._secrets.masked_url} (database {self.database})", missing)

    def create_indexes(self) -> None:
        """Create the unique ``id`` indexes and the thread listing indexes when missing (idempotent)."""
        self._create(self._threads, THREAD_INDEXES)
        self._create(self._resources, RESOURCE_INDEXES)

    def _create(self, collection: Collection[Document], specs: tuple[IndexSpec, ...]) -> None:
        for keys, options in specs:
            try:
                with self._driver(f"create index {keys} on {collection.name}"):
                    collection.create_index(keys, **options)
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
        return driver_errors(self._errors, self._secrets, action)

    def _attempts(self, action: str) -> Iterator[int]:
        """Attempt numbers of a compare-and-swap loop, with jittered backoff; raises when exhausted."""
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, min(_MAX_BACKOFF_S, 0.0005 * 2 ** min(attempt, 10))))
            yield attempt
        raise BackendBusyError(f"mongodb {action}: gave up after {MAX_ATTEMPTS} attempts lost to concurrent writers")

    def _insert_if_absent(self, collection: Collection[Document], record_id: str, fields: Document) -> bool:
        """Insert ``{id: record_id, **fields}`` unless the id exists; whether it was inserted."""
        try:
            result = collection.update_one({"id": record_id}, {"$setOnInsert": fields}, upsert=True)
        except self._errors.PyMongoError as exc:
            if is_duplicate_key(self._errors, exc):
                return False  # a concurrent insert won
            raise
        return result.upserted_id is not None

    # -- resources -------------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        validate_id(resource_id, "resource id")
        with self._driver("get_resource"):
            document = self._resources.find_one({"id": resource_id})
        return None if document is None else resource_from_document(document)

    def save_resource(self, resource: Resource) -> Resource:
        if not isinstance(resource, Resource):
            raise ValidationError(f"expected a Resource, got {type(resource).__name__}")
        update = {"$set": resource_document(resource), "$inc": {REV: 1}}
        with self._driver("save_resource"):
            for _ in self._attempts("save_resource"):
                try:
                    self._resources.update_one({"id": resource.id}, update, upsert=True)
                    return resource
                except self._errors.PyMongoError as exc:
                    if not is_duplicate_key(self._errors, exc):
                        raise  # E11000 only when two upserts raced to insert: the next one updates
        raise AssertionError("unreachable")

    def update_resource(
        self,
        resource_id: str,
        *,
        working_memory: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Resource:
        validate_id(resource_id, "resource id")
        working_memory, metadata = check_resource_update(working_memory, metadata)
        with self._driver("update_resource"):
            if metadata is UNSET or metadata is None:
                return self._touch_resource(resource_id, working_memory)
            return self._merge_resource_metadata(resource_id, working_memory, metadata)

    def _touch_resource(self, resource_id: str, working_memory: str | Unset | None) -> Resource:
        """Set ``working_memory`` (when given) and ``updatedAt``, creating the resource: one atomic upsert."""
        for _ in self._attempts("update_resource"):
            now = utc_now()
            changes: Document = {"updatedAt": now}
            on_insert: Document = {"createdAt": now, "metadata": None}
            if working_memory is UNSET:
                on_insert["workingMemory"] = None
            else:
                changes["workingMemory"] = working_memory
            try:
                document = self._resources.find_one_and_update(
                    {"id": resource_id},
                    {"$set": changes, "$setOnInsert": on_insert, "$inc": {REV: 1}},
                    upsert=True,
                    return_document=self._after,
                )
            except self._errors.PyMongoError as exc:
                if is_duplicate_key(self._errors, exc):
                    continue
                raise
            assert document is not None  # an upsert always returns the document
            return resource_from_document(document)
        raise AssertionError("unreachable")

    def _merge_resource_metadata(
        self, resource_id: str, working_memory: str | Unset | None, metadata: Document
    ) -> Resource:
        for _ in self._attempts("update_resource"):
            now = utc_now()
            old = self._resources.find_one({"id": resource_id})
            if old is None:
                new = Resource(resource_id, None if working_memory is UNSET else working_memory, metadata, now, now)
                if self._insert_if_absent(self._resources, resource_id, {**resource_document(new), REV: 1}):
                    return new
                continue
            merged = {**(resource_metadata_value(old.get("metadata")) or {}), **metadata}
            changes: Document = {"metadata": dump_json(merged), "updatedAt": now, REV: next_rev(old)}
            if working_memory is not UNSET:
                changes["workingMemory"] = working_memory
            document = self._resources.find_one_and_update(
                cas_filter(old), {"$set": changes}, return_document=self._after
            )
            if document is not None:
                return resource_from_document(document)
        raise AssertionError("unreachable")

    # -- threads ---------------------------------------------------------------------

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread | None:
        validate_id(thread_id, "thread id")
        if resource_id is not None:
            validate_id(resource_id, "resource id")
        with self._driver("get_thread"):
            document = self._threads.find_one({"id": thread_id})
        if document is None or (resource_id is not None and document.get("resourceId") != resource_id):
            return None
        return thread_from_document(document)

    def create_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        document = {"id": thread.id, "resourceId": thread.resource_id, **thread_insert_fields(thread)}
        with self._driver("create_thread"):
            try:
                self._threads.insert_one(document)
            except self._errors.PyMongoError as exc:
                if not is_duplicate_key(self._errors, exc):
                    raise
                raise ThreadExistsError(thread.id) from None  # the unique index on id refused it
        return thread

    def save_thread(self, thread: Thread) -> Thread:
        if not isinstance(thread, Thread):
            raise ValidationError(f"expected a Thread, got {type(thread).__name__}")
        owned = {"id": thread.id, "resourceId": thread.resource_id}
        with self._driver("save_thread"):
            for _ in self._attempts("save_thread"):
                try:
                    created = self._threads.update_one(
                        owned, {"$setOnInsert": thread_insert_fields(thread)}, upsert=True
                    )
                except self._errors.PyMongoError as exc:
                    if not is_duplicate_key(self._errors, exc):
                        raise
                    # The id exists but not with this owner; owners never change, so one read decides.
                    holder = self._threads.find_one({"id": thread.id}, {"resourceId": 1})
                    if holder is not None and holder.get("resourceId") != thread.resource_id:
                        raise ThreadOwnershipError(thread.id, thread.resource_id) from exc
                    continue  # a same-owner insert raced ours, or the other owner's thread was just deleted
                if created.upserted_id is not None:
                    return thread
                document = self._threads.find_one_and_update(
                    owned,
                    {
                        "$set": {"title": thread.title, "metadata": thread.metadata, "updatedAt": utc_now()},
                        "$inc": {REV: 1},
                    },
                    return_document=self._after,
                )
                if document is not None:
                    return thread_from_document(document)
                # deleted between the two statements: start over
        raise AssertionError("unreachable")

    def update_thread(
        self,
        thread_id: str,
        *,
        title: str | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> Thread:
        validate_id(thread_id, "thread id")
        title, metadata = check_thread_update(title, metadata)
        with self._driver("update_thread"):
            if metadata is UNSET or metadata is None:
                changes: Document = {"updatedAt": utc_now()}
                if title is not UNSET:
                    changes["title"] = title
                document = self._threads.find_one_and_update(
                    {"id": thread_id}, {"$set": changes, "$inc": {REV: 1}}, return_document=self._after
                )
                if document is None:
                    raise ThreadNotFoundError(thread_id)
                return thread_from_document(document)
            for _ in self._attempts("update_thread"):
                old = self._threads.find_one({"id": thread_id})
                if old is None:
                    raise ThreadNotFoundError(thread_id)
                changes = {
                    # Old values as decoded, so they keep their BSON types; written whole, so no key is a path.
                    "metadata": {**(raw_metadata(old.get("metadata")) or {}), **metadata},
                    "updatedAt": utc_now(),
                    REV: next_rev(old),
                }
                if title is not UNSET:
                    changes["title"] = title
                document = self._threads.find_one_and_update(
                    cas_filter(old), {"$set": changes}, return_document=self._after
                )
                if document is not None:
                    return thread_from_document(document)
        raise AssertionError("unreachable")

    def delete_thread(self, thread_id: str) -> bool:
        validate_id(thread_id, "thread id")
        with self._driver("delete_thread"):
            return self._threads.delete_one({"id": thread_id}).deleted_count > 0

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = 100,
        order_by: OrderBy = "created_at",
        direction: Direction = "desc",
    ) -> ThreadPage:
        query = check_list_args(resource_id, page, per_page, order_by, direction)
        owned = {"resourceId": query.resource_id}
        with self._driver("list_threads"):
            cursor = self._threads.find(owned).sort(sort_spec(query.order_by, query.direction)).skip(query.offset)
            if query.per_page is not None:
                cursor = cursor.limit(query.per_page)
            documents = list(cursor)
            total = self._threads.count_documents(owned)
        return query.read_page(documents, thread_from_document, total)

    # -- working memory --------------------------------------------------------------

    def merge_working_memory(
        self,
        patch: Mapping[str, Any],
        *,
        scope: Scope,
        resource_id: str | None = None,
        thread_id: str | None = None,
    ) -> dict[str, Any]:
        target = check_scope(scope, resource_id, thread_id)
        patch = validate_json_object(patch, "patch")
        with self._driver("merge_working_memory"):
            if target.scope == "resource":
                assert target.resource_id is not None
                return self._merge_resource_memory(target.resource_id, patch)
            assert target.thread_id is not None
            return self._merge_thread_memory(target.thread_id, target.resource_id, patch)

    def _merge_resource_memory(self, resource_id: str, patch: Document) -> Document:
        for _ in self._attempts("merge_working_memory"):
            old = self._resources.find_one({"id": resource_id})
            stored = None if old is None else resource_working_memory(old.get("workingMemory"))
            merged, text = merge_document(stored, patch)
            now = utc_now()
            if old is None:
                fields = {"workingMemory": text, "metadata": None, "createdAt": now, "updatedAt": now, REV: 1}
                if self._insert_if_absent(self._resources, resource_id, fields):
                    return merged
                continue
            changes = {"workingMemory": text, "updatedAt": now, REV: next_rev(old)}
            if self._resources.update_one(cas_filter(old), {"$set": changes}).matched_count:
                return merged
        raise AssertionError("unreachable")

    def _merge_thread_memory(self, thread_id: str, owner: str | None, patch: Document) -> Document:
        for _ in self._attempts("merge_working_memory"):
            old = self._threads.find_one({"id": thread_id})
            if old is None:
                raise ThreadNotFoundError(thread_id)
            if owner is not None and old.get("resourceId") != owner:
                raise ThreadOwnershipError(thread_id, owner)
            metadata = raw_metadata(old.get("metadata"))
            merged, text = merge_document(thread_working_memory_to_merge(metadata), patch)
            changes: Document = {"updatedAt": utc_now(), REV: next_rev(old)}
            if is_native_metadata(old.get("metadata")):
                changes[f"metadata.{WORKING_MEMORY_KEY}"] = text  # a fixed path; other keys stay untouched
            else:
                changes["metadata"] = {**(metadata or {}), WORKING_MEMORY_KEY: text}
            if self._threads.update_one(cas_filter(old), {"$set": changes}).matched_count:
                return merged
        raise AssertionError("unreachable")

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self._client.close()
