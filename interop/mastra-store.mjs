// The published Mastra stores through workmem's wire protocol (docs/wire-protocol.md), for the conformance suite:
//
//   workmem conformance 'mastra+pg://user:pass@127.0.0.1:5432/db'     (workmem.adapters.wire.mastra starts this)
//
// The handshake's args carry `store`, a spec of interop/stores.mjs ({kind: "pg", connectionString, schemaName},
// {kind: "libsql", url}, {kind: "upstash", url, token}), and `create` (false: the store's init() is not run).
// Each operation is done the way a Mastra application does it, never re-implemented here:
//   - records: the memory domain's own methods (getResourceById, saveResource, updateResource, getThreadById,
//     saveThread, updateThread, deleteThread, listThreads);
//   - setting working memory (a working memory alone given to update_resource, a {workingMemory} alone to
//     update_thread): @mastra/memory's Memory.updateWorkingMemory, in the scope asked for;
//   - merging working memory: @mastra/memory's updateWorkingMemory tool in schema mode (schema {"type":
//     "object"}), executed as an agent executes it, then Memory.getWorkingMemory to read the merged document
//     (the tool returns no document).
// An owner given to update_thread / delete_thread is checked on the thread getThreadById returns, before the
// write (Mastra has no owner-conditioned write). What Mastra has no way to do is declared unsupported in the
// handshake (insert-only create, iteration, bulk inserts, replace_thread), and a request with max_chars is
// answered OperationNotSupportedError (Mastra has no size limit). Requests run concurrently, as a server's
// requests do.

import { createInterface } from "node:readline";
import { Memory } from "@mastra/memory";
import { openStore } from "./stores.mjs";

const PROTOCOL = 1;
const UNSUPPORTED = ["create_thread", "resource_page", "thread_page", "insert_resources", "insert_threads", "replace_thread"];
const SCHEMA = { type: "object" };

class WireError extends Error {
  constructor(cls, message, data = {}) {
    super(message);
    this.cls = cls;
    this.data = data;
  }
}

function pyNumber(n) {
  // JSON numbers as Python writes them, so that a float stays a float (1e+20, 2.0) for workmem.
  if (Number.isInteger(n) && Math.abs(n) < 2 ** 53) return String(n);
  const [digits, exp] = n.toExponential().split("e");
  const e = Number(exp);
  if (e < -4 || e >= 16) return `${digits}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  const s = String(n);
  return s.includes(".") || s.includes("e") ? s : `${s}.0`;
}

function dump(value) {
  if (value === undefined) return "null";
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (value === null || typeof value !== "object") return typeof value === "number" ? pyNumber(value) : JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(dump).join(",")}]`;
  return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${dump(v)}`).join(",")}}`;
}

const iso = (value) => (value instanceof Date ? value : new Date(value)).toISOString();
const date = (text) => new Date(text);
const resourceOut = (r) =>
  r && {
    id: r.id,
    workingMemory: r.workingMemory ?? null,
    metadata: r.metadata ?? null,
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
  };
const threadOut = (t) =>
  t && {
    id: t.id,
    resourceId: t.resourceId,
    title: t.title ?? "",
    metadata: t.metadata ?? null,
    createdAt: iso(t.createdAt),
    updatedAt: iso(t.updatedAt),
  };
const withDates = (record) => ({ ...record, createdAt: date(record.createdAt), updatedAt: date(record.updatedAt) });

function noLimits(args) {
  if (args.maxChars != null) {
    throw new WireError("OperationNotSupportedError", "Mastra has no working-memory size limit (max_chars)", {
      operation: "max_chars",
    });
  }
}

const notFound = (id) => new WireError("ThreadNotFoundError", `thread ${JSON.stringify(id)} not found`, { thread_id: id });
const notOwned = (id, owner) =>
  new WireError("ThreadOwnershipError", `thread ${JSON.stringify(id)} is not owned by resource ${JSON.stringify(owner)}`, {
    thread_id: id,
    resource_id: owner,
  });

function translated(error, args) {
  // Mastra's refusals, named as workmem names them; anything else is the store refusing.
  if (error instanceof WireError) return error;
  const text = String(error?.message ?? error);
  if (/resourceId does not match the current resourceId/.test(text)) return notOwned(args.threadId, args.resourceId);
  if (/^Thread \S+ not found/.test(text)) return notFound(args.threadId ?? args.id);
  const id = error?.id ? `${error.id}: ` : "";
  const cause = error?.cause?.message ? ` (${error.cause.message})` : "";
  return new WireError("BackendRefusedError", `${id}${text}${cause}`);
}

let store, domain;
const memories = {};

const ops = {
  async hello({ store: spec, create }) {
    store = await openStore(spec);
    if (create !== false) await store.init();
    domain = await store.getStore("memory");
    for (const scope of ["resource", "thread"]) {
      memories[scope] = new Memory({
        storage: store,
        options: { workingMemory: { enabled: true, scope, schema: SCHEMA }, lastMessages: 10 },
      });
    }
    const pkg = { pg: "@mastra/pg", libsql: "@mastra/libsql", upstash: "@mastra/upstash" }[spec.kind] ?? spec.kind;
    const version = async (name) =>
      (await import(`${name}/package.json`, { with: { type: "json" } }).catch(() => ({ default: {} }))).default.version ?? "?";
    return {
      protocol: PROTOCOL,
      store: `${pkg} ${await version(pkg)}, @mastra/memory ${await version("@mastra/memory")}, @mastra/core ${await version("@mastra/core")}`,
      capabilities: { cross_process_atomic: false, persistent: true, unsupported: UNSUPPORTED },
    };
  },

  get_resource: async ({ id }) => resourceOut(await domain.getResourceById({ resourceId: id })) ?? null,
  save_resource: async ({ resource }) => resourceOut((await domain.saveResource({ resource: withDates(resource) })) ?? resource),
  async update_resource(a) {
    noLimits(a);
    if (typeof a.workingMemory === "string" && !("metadata" in a)) {
      await memories.resource.updateWorkingMemory({ resourceId: a.id, workingMemory: a.workingMemory });
      return resourceOut(await domain.getResourceById({ resourceId: a.id }));
    }
    const updated = await domain.updateResource({
      resourceId: a.id,
      ...("workingMemory" in a ? { workingMemory: a.workingMemory } : {}),
      ...(a.metadata != null ? { metadata: a.metadata } : {}),
    });
    return resourceOut(updated);
  },

  get_thread: async ({ id }) => threadOut(await domain.getThreadById({ threadId: id })) ?? null,
  save_thread: async ({ thread }) => threadOut((await domain.saveThread({ thread: withDates(thread) })) ?? thread),
  async update_thread(a) {
    noLimits(a);
    const thread = await domain.getThreadById({ threadId: a.id });
    if (!thread) throw notFound(a.id);
    if (a.owner != null && thread.resourceId !== a.owner) throw notOwned(a.id, a.owner);
    const keys = a.metadata ? Object.keys(a.metadata) : [];
    if (!("title" in a) && keys.length === 1 && typeof a.metadata.workingMemory === "string") {
      await memories.thread.updateWorkingMemory({
        threadId: a.id,
        resourceId: thread.resourceId,
        workingMemory: a.metadata.workingMemory,
      });
      // Mastra's update returns nothing: the thread is read back, and a thread deleted meanwhile is not found.
      const after = await domain.getThreadById({ threadId: a.id });
      if (!after) throw notFound(a.id);
      return threadOut(after);
    }
    const updated = await domain.updateThread({
      id: a.id,
      title: "title" in a ? a.title : thread.title,
      metadata: a.metadata ?? {},
    });
    return threadOut(updated);
  },
  async delete_thread({ id, owner }) {
    const thread = await domain.getThreadById({ threadId: id });
    if (!thread) return false;
    if (owner != null && thread.resourceId !== owner) throw notOwned(id, owner);
    await domain.deleteThread({ threadId: id });
    return true;
  },
  async list_threads({ resourceId, page, perPage, orderBy, direction }) {
    const found = await domain.listThreads({
      filter: { resourceId },
      page,
      perPage: perPage ?? false,
      orderBy: { field: orderBy === "updated_at" ? "updatedAt" : "createdAt", direction: direction.toUpperCase() },
    });
    return { threads: found.threads.map(threadOut), total: found.total };
  },

  async merge_working_memory(a) {
    noLimits(a);
    const memory = memories[a.scope];
    const tool = memory.listTools()?.updateWorkingMemory;
    if (!tool) throw new Error("Memory.listTools() has no updateWorkingMemory tool");
    const threadId = a.scope === "thread" ? a.threadId : undefined;
    const resourceId = a.resourceId ?? undefined;
    const result = await tool.execute({ memory: a.patch }, { agent: { threadId, resourceId }, memory });
    if (result && result.success === false) throw new WireError("BackendRefusedError", String(result.message));
    const text = await memory.getWorkingMemory({ threadId, resourceId });
    return text ? JSON.parse(text) : {};
  },
};

async function answer(request) {
  const { id, op, args } = request;
  try {
    const handler = ops[op];
    if (!handler) throw new WireError("OperationNotSupportedError", `Mastra has no ${op}`, { operation: op });
    return { id, ok: (await handler(args)) ?? null };
  } catch (error) {
    const e = translated(error, args ?? {});
    return { id, error: { class: e.cls, message: e.message, data: e.data } };
  }
}

let ready = Promise.resolve();
const pending = new Set();
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  const request = JSON.parse(line);
  const work = (request.op === "hello" ? answer(request) : ready.then(() => answer(request))).then((reply) => {
    process.stdout.write(dump(reply) + "\n");
  });
  if (request.op === "hello") ready = work;
  pending.add(work);
  work.finally(() => pending.delete(work));
}
await Promise.allSettled([...pending]);
await store?.close?.();
process.exit(0);
