// A workmem store in JavaScript, run by the conformance suite over the wire protocol (docs/wire-protocol.md).
//
//   workmem conformance 'wire:node examples/wire-store/store.mjs /tmp/agent.db'
//
// Records live in one SQLite file (node:sqlite, Node 22), so the several processes the suite starts
// (one per connection, and the cross-process checks' workers) share them; every write runs in one
// BEGIN IMMEDIATE transaction, which makes it atomic between processes too. Requests are answered one
// at a time, in the order they come (node:sqlite is synchronous); the protocol lets a store answer in
// any order. About 300 lines: the contract's rules, written once more in another language.

import { DatabaseSync } from "node:sqlite";
import { createInterface } from "node:readline";

const PROTOCOL = 1;
const MAX_TEXT_BYTES = 4 * 1024 * 1024;
const MAX_DEPTH = 32;

class StoreError extends Error {
  // An error the protocol carries by workmem's class name (`data` sets its attributes in Python).
  constructor(cls, message, data = {}) {
    super(message);
    this.cls = cls;
    this.data = data;
  }
}

const notFound = (id) => new StoreError("ThreadNotFoundError", `thread ${JSON.stringify(id)} not found`, { thread_id: id });
const notOwned = (id, owner) =>
  new StoreError("ThreadOwnershipError", `thread ${JSON.stringify(id)} is not owned by resource ${JSON.stringify(owner)}`, {
    thread_id: id,
    resource_id: owner,
  });

// -- sizes as workmem counts them: len() of Python text (code points), JSON as Python's compact dump --

const chars = (text) => {
  let n = 0;
  for (const _ of text) n++;
  return n;
};
// Blank is what the contract calls blank: nothing but the characters Python's str.isspace() accepts.
// JavaScript's trim() differs (it keeps U+001C-U+001F and U+0085, and strips U+FEFF).
const BLANK = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;
const blank = (text) => text == null || BLANK.test(text);
const textSize = (text) => (blank(text) ? 0 : chars(text));

function pyNumber(n) {
  // Python's repr of a float (JSON numbers that are not integers), or an integer's digits.
  if (Number.isInteger(n) && Math.abs(n) < 2 ** 53) return String(n);
  const [digits, exp] = n.toExponential().split("e"); // shortest round-trip digits, as repr uses (1e+16, not 1.0e+16)
  const e = Number(exp);
  if (e < -4 || e >= 16) {
    return `${digits}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  const s = String(n);
  return s.includes(".") || s.includes("e") ? s : `${s}.0`;
}

function dump(value) {
  // workmem's dump_json: compact, non-ASCII as is (JSON.stringify's strings are Python's, for valid text).
  if (value === undefined) return "null";
  if (value === null || typeof value !== "object") return typeof value === "number" ? pyNumber(value) : JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(dump).join(",")}]`;
  return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${dump(v)}`).join(",")}}`;
}

function checkLimit(size, current, maxChars) {
  if (maxChars != null && size > maxChars && size > current) {
    const over = current > maxChars ? `; it holds ${current} now, also over the limit, and may only shrink` : "";
    throw new StoreError(
      "WorkingMemoryTooLargeError",
      `working memory not updated: the result would be ${size} characters, over the ${maxChars}-character limit${over}`,
      { size, limit: maxChars, current },
    );
  }
}

function parseDocument(text) {
  if (blank(text)) return {};
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new StoreError("WorkingMemoryFormatError", `stored working memory is not JSON: ${e.message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new StoreError("WorkingMemoryFormatError", "stored working memory is not a JSON object");
  }
  const within = (value, depth) =>
    depth <= MAX_DEPTH && (value === null || typeof value !== "object" || Object.values(value).every((v) => within(v, depth + 1)));
  if (!within(doc, 1)) {
    throw new StoreError("WorkingMemoryFormatError", `stored working memory is nested more than ${MAX_DEPTH} levels deep`);
  }
  return doc;
}

function mergePatch(target, patch) {
  // RFC 7396.
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out = target !== null && typeof target === "object" && !Array.isArray(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

function mergeDocument(stored, patch, maxChars) {
  const doc = parseDocument(stored);
  const merged = mergePatch(doc, patch);
  const text = dump(merged);
  if (maxChars != null) checkLimit(chars(text), blank(stored) ? 0 : chars(dump(doc)), maxChars);
  if (Buffer.byteLength(text) > MAX_TEXT_BYTES) {
    throw new StoreError("ValidationError", `merged working memory is larger than ${MAX_TEXT_BYTES} bytes as JSON`);
  }
  return [merged, text];
}

// -- the database --------------------------------------------------------------------------------------------

const db = new DatabaseSync(process.argv[2] ?? ":memory:");
db.exec("PRAGMA busy_timeout = 30000");
db.exec("PRAGMA journal_mode = WAL");
db.exec(`CREATE TABLE IF NOT EXISTS resources (id TEXT PRIMARY KEY, workingMemory TEXT, metadata TEXT,
           createdAt TEXT NOT NULL, updatedAt TEXT NOT NULL)`);
db.exec(`CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, resourceId TEXT NOT NULL, title TEXT NOT NULL,
           metadata TEXT, createdAt TEXT NOT NULL, updatedAt TEXT NOT NULL)`);
db.exec("CREATE INDEX IF NOT EXISTS threads_owner ON threads (resourceId)");

const json = (value) => (value == null ? null : dump(value)); // a float stays a float (1e+20, 2.0) for Python
const resourceOf = (row) =>
  row && { ...row, metadata: row.metadata == null ? null : JSON.parse(row.metadata) };
const threadOf = resourceOf;

const sql = (text) => db.prepare(text);
const getResource = (id) => resourceOf(sql("SELECT * FROM resources WHERE id = ?").get(id));
const getThread = (id) => threadOf(sql("SELECT * FROM threads WHERE id = ?").get(id));
function putResource(r) {
  sql(`INSERT INTO resources VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET workingMemory = excluded.workingMemory,
       metadata = excluded.metadata, createdAt = excluded.createdAt, updatedAt = excluded.updatedAt`).run(
    r.id, r.workingMemory ?? null, json(r.metadata), r.createdAt, r.updatedAt);
  return r;
}
function putThread(t) {
  sql(`INSERT INTO threads VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET resourceId = excluded.resourceId,
       title = excluded.title, metadata = excluded.metadata, createdAt = excluded.createdAt, updatedAt = excluded.updatedAt`).run(
    t.id, t.resourceId, t.title, json(t.metadata), t.createdAt, t.updatedAt);
  return t;
}

function atomically(fn) {
  // One write, atomic across processes: BEGIN IMMEDIATE takes SQLite's write lock before anything is read.
  db.exec("BEGIN IMMEDIATE");
  try {
    const result = fn();
    db.exec("COMMIT");
    return result;
  } catch (e) {
    db.exec("ROLLBACK");
    throw e;
  }
}

const shallow = (old, patch) => (patch == null ? old : { ...(old ?? {}), ...patch });

function lockedThread(id, owner) {
  const thread = getThread(id);
  if (!thread) throw notFound(id);
  if (owner != null && thread.resourceId !== owner) throw notOwned(id, owner);
  return thread;
}

function page(table, after, limit) {
  const rows = after == null
    ? sql(`SELECT * FROM ${table} ORDER BY id LIMIT ?`).all(limit)
    : sql(`SELECT * FROM ${table} WHERE id > ? ORDER BY id LIMIT ?`).all(after, limit);
  const records = rows.map(resourceOf);
  return { records, unreadable: [], nextAfter: records.length === limit ? records[records.length - 1].id : null };
}

function insertAbsent(table, records) {
  return atomically(() => {
    const present = records.filter((r) => sql(`SELECT 1 FROM ${table} WHERE id = ?`).get(r.id)).map((r) => r.id);
    for (const r of records) if (!present.includes(r.id)) (table === "threads" ? putThread : putResource)(r);
    return present;
  });
}

// -- the operations: one per hook of workmem.flows.StorageHooks ----------------------------------------------

const ops = {
  hello: () => ({
    protocol: PROTOCOL,
    store: "examples/wire-store (node:sqlite)",
    capabilities: { cross_process_atomic: true, persistent: process.argv[2] != null, unsupported: [] },
  }),
  get_resource: ({ id }) => getResource(id) ?? null,
  save_resource: ({ resource }) => atomically(() => putResource(resource)),
  update_resource: (a) =>
    atomically(() => {
      const old = getResource(a.id) ?? { id: a.id, workingMemory: null, metadata: null, createdAt: a.now, updatedAt: a.now };
      if (typeof a.workingMemory === "string") checkLimit(chars(a.workingMemory), textSize(old.workingMemory), a.maxChars);
      return putResource({
        ...old,
        workingMemory: "workingMemory" in a ? a.workingMemory : old.workingMemory,
        metadata: shallow(old.metadata, a.metadata),
        updatedAt: a.now,
      });
    }),
  get_thread: ({ id }) => getThread(id) ?? null,
  create_thread: ({ thread }) =>
    atomically(() => {
      if (getThread(thread.id)) {
        throw new StoreError("ThreadExistsError", `thread ${JSON.stringify(thread.id)} already exists`, { thread_id: thread.id });
      }
      return putThread(thread);
    }),
  save_thread: ({ thread, now }) =>
    atomically(() => {
      const old = getThread(thread.id);
      if (!old) return putThread(thread);
      if (old.resourceId !== thread.resourceId) throw notOwned(thread.id, thread.resourceId);
      return putThread({ ...old, title: thread.title, metadata: thread.metadata, updatedAt: now });
    }),
  update_thread: (a) =>
    atomically(() => {
      const old = lockedThread(a.id, a.owner);
      const memory = a.metadata?.workingMemory;
      if (typeof memory === "string") {
        const stored = old.metadata?.workingMemory;
        checkLimit(chars(memory), typeof stored === "string" ? textSize(stored) : 0, a.maxChars);
      }
      return putThread({
        ...old,
        title: "title" in a ? a.title : old.title,
        metadata: shallow(old.metadata, a.metadata),
        updatedAt: a.now,
      });
    }),
  delete_thread: ({ id, owner }) =>
    atomically(() => {
      if (!getThread(id)) return false;
      lockedThread(id, owner);
      sql("DELETE FROM threads WHERE id = ?").run(id);
      return true;
    }),
  list_threads: ({ resourceId, page: number, perPage, orderBy, direction }) => {
    const column = orderBy === "updated_at" ? "updatedAt" : "createdAt";
    const dir = direction === "desc" ? "DESC" : "ASC";
    // The count and the page from one snapshot (one read transaction): a write between two autocommit
    // reads would give a total that no moment had with this page.
    db.exec("BEGIN");
    try {
      const total = sql("SELECT count(*) AS n FROM threads WHERE resourceId = ?").get(resourceId).n;
      const rows = sql(`SELECT * FROM threads WHERE resourceId = ? ORDER BY ${column} ${dir}, id ${dir} LIMIT ? OFFSET ?`).all(
        resourceId, perPage ?? -1, perPage == null ? 0 : number * perPage);
      return { threads: rows.map(threadOf), total, unreadable: [] };
    } finally {
      db.exec("COMMIT");
    }
  },
  merge_working_memory: (a) =>
    atomically(() => {
      if (a.scope === "resource") {
        const old = getResource(a.resourceId) ?? { id: a.resourceId, workingMemory: null, metadata: null, createdAt: a.now };
        const [merged, text] = mergeDocument(old.workingMemory, a.patch, a.maxChars);
        putResource({ ...old, workingMemory: text, updatedAt: a.now });
        return merged;
      }
      const thread = lockedThread(a.threadId, a.resourceId);
      const stored = thread.metadata?.workingMemory ?? null;
      if (stored !== null && typeof stored !== "string") {
        throw new StoreError("WorkingMemoryFormatError", "stored thread working memory is not a string");
      }
      const [merged, text] = mergeDocument(stored, a.patch, a.maxChars);
      putThread({ ...thread, metadata: { ...(thread.metadata ?? {}), workingMemory: text }, updatedAt: a.now });
      return merged;
    }),
  resource_page: ({ after, limit }) => page("resources", after, limit),
  thread_page: ({ after, limit }) => page("threads", after, limit),
  insert_resources: ({ resources }) => insertAbsent("resources", resources),
  insert_threads: ({ threads }) => insertAbsent("threads", threads),
  replace_thread: ({ thread: t }) =>
    atomically(
      () =>
        sql("UPDATE threads SET title = ?, metadata = ?, createdAt = ?, updatedAt = ? WHERE id = ? AND resourceId = ?").run(
          t.title, json(t.metadata), t.createdAt, t.updatedAt, t.id, t.resourceId).changes > 0,
    ),
};

// -- the protocol: one JSON request a line in, one JSON response a line out ----------------------------------

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  const { id, op, args } = JSON.parse(line);
  let reply;
  try {
    const handler = ops[op];
    if (!handler) throw new StoreError("OperationNotSupportedError", `the store does not support ${op}`, { operation: op });
    reply = { id, ok: handler(args) };
  } catch (e) {
    reply = e instanceof StoreError
      ? { id, error: { class: e.cls, message: e.message, data: e.data } }
      : { id, error: { class: "BackendRefusedError", message: `${e.name}: ${e.message}` } };
  }
  process.stdout.write(dump(reply) + "\n");
}
db.close();
