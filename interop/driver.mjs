// Runs the published Mastra packages for workmem's interop tests (tests/support/mastra_node.py).
//
// Reads one JSON request on stdin and prints one JSON reply on stdout:
//   request: {"store": {...}, "steps": [{"op": "...", "args": {...}}, ...]}
//   reply:   {"results": [{"ok": true, "value": ...} | {"ok": false, "error": "..."}, ...]}
// Every step runs in order in this one process (Node starts slowly: batch many steps per run).
// Dates travel as {"$date": "<ISO-8601>"} both ways, so a test can tell a Date from a string.
//
// store.kind: "pg" {connectionString, schemaName?}, "libsql" {url}, "upstash" {url, token},
// "mongodb" {url, dbName}, "oracle" {user, password, connectString}; "none" opens no store
// (for the libsql.* steps). store.init (default true) runs the store's init(), which creates
// missing tables the way Mastra does.
//
// Steps:
//   saveThread, getThreadById, listThreads, updateThread, deleteThread, saveResource,
//   updateResource, getResourceById: the memory domain's method of that name, called with args.
//   memory.updateWorkingMemory {config, threadId, resourceId, workingMemory}: Memory's own update.
//   memory.tool {config, threadId, resourceId, memory}: Memory's updateWorkingMemory tool, as an
//     agent runs it (schema mode merges there).
//   memory.getWorkingMemory {config, threadId, resourceId}; memory.getWorkingMemoryTemplate {config}.
//   memory.createThread {config, threadId, resourceId, title?, metadata?}; memory.getThreadById.
//   libsql.execute {url, sql, args}: one statement through @libsql/client.
//   libsql.appendKeys {url, resourceId, prefix, count, pauseMs?}: `count` read-modify-write transactions,
//     each reading the resource's working memory JSON, adding key `${prefix}${i}` and
//     incrementing `${prefix}count`, retried on SQLITE_BUSY, `pauseMs` apart (the cross-process
//     test's writer); returns {count, retries}.
// config (Memory's working-memory options): {scope: "resource"|"thread", template?, schema?}.

import { Memory } from "@mastra/memory";
import { createClient } from "@libsql/client";
import { openStore } from "./stores.mjs";

function decode(value) {
  if (Array.isArray(value)) return value.map(decode);
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === "$date") return new Date(value.$date);
    return Object.fromEntries(keys.map((k) => [k, decode(value[k])]));
  }
  return value;
}

function encode(value) {
  if (value instanceof Date) return { $date: value.toISOString() };
  if (Array.isArray(value)) return value.map(encode);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, encode(v)]));
  }
  return value === undefined ? null : value;
}

const DOMAIN_OPS = new Set([
  "saveThread",
  "getThreadById",
  "listThreads",
  "updateThread",
  "deleteThread",
  "saveResource",
  "updateResource",
  "getResourceById",
]);

const memories = new Map();

function memoryFor(store, config) {
  const key = JSON.stringify(config ?? {});
  if (!memories.has(key)) {
    const workingMemory = { enabled: true, scope: config?.scope ?? "resource" };
    if (config?.template !== undefined) workingMemory.template = config.template;
    if (config?.schema !== undefined) workingMemory.schema = config.schema;
    memories.set(key, new Memory({ storage: store, options: { workingMemory, lastMessages: 10 } }));
  }
  return memories.get(key);
}

const clients = new Map();

// As @mastra/libsql opens a local file: a 5 s busy timeout, so a writer waits for another's lock. (Without
// one, @libsql/client 0.18 answers SQLITE_BUSY at once, and a connection that got it can keep answering it.)
function libsqlClient(url) {
  if (!clients.has(url)) clients.set(url, createClient({ url, ...(url.startsWith("file:") ? { timeout: 5000 } : {}) }));
  return clients.get(url);
}

function isBusy(error) {
  const text = `${error?.code ?? ""} ${error?.message ?? ""} ${error?.cause?.code ?? ""}`;
  return /SQLITE_BUSY|database is locked/i.test(text);
}

async function appendKeys({ url, resourceId, prefix, count, pauseMs = 0 }) {
  const client = libsqlClient(url);
  let retries = 0;
  for (let i = 0; i < count; i++) {
    for (;;) {
      let tx;
      try {
        tx = await client.transaction("write");
        const rows = await tx.execute({
          sql: 'SELECT "workingMemory" FROM mastra_resources WHERE id = ?',
          args: [resourceId],
        });
        const data = JSON.parse(rows.rows[0].workingMemory || "{}");
        data[`${prefix}${i}`] = i;
        data[`${prefix}count`] = (data[`${prefix}count`] ?? 0) + 1;
        await tx.execute({
          sql: 'UPDATE mastra_resources SET "workingMemory" = ? WHERE id = ?',
          args: [JSON.stringify(data), resourceId],
        });
        await tx.commit();
        if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
        break;
      } catch (error) {
        if (tx) {
          try {
            await tx.rollback();
          } catch {}
        }
        if (!isBusy(error) || retries >= 1000) throw error;
        retries += 1;
        await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 4));
      } finally {
        tx?.close();
      }
    }
  }
  return { count, retries };
}

async function run(store, domain, step) {
  const args = decode(step.args ?? {});
  if (DOMAIN_OPS.has(step.op)) return domain[step.op](args);
  switch (step.op) {
    case "memory.updateWorkingMemory": {
      const { config, ...rest } = args;
      return memoryFor(store, config).updateWorkingMemory(rest);
    }
    case "memory.getWorkingMemory": {
      const { config, ...rest } = args;
      return memoryFor(store, config).getWorkingMemory(rest);
    }
    case "memory.getWorkingMemoryTemplate":
      return memoryFor(store, args.config).getWorkingMemoryTemplate({});
    case "memory.createThread": {
      const { config, ...rest } = args;
      return memoryFor(store, config).createThread(rest);
    }
    case "memory.getThreadById": {
      const { config, ...rest } = args;
      return memoryFor(store, config).getThreadById(rest);
    }
    case "memory.tool": {
      const { config, threadId, resourceId, memory: input } = args;
      const memory = memoryFor(store, config);
      const tool = memory.listTools()?.updateWorkingMemory;
      if (!tool) throw new Error("Memory.listTools() has no updateWorkingMemory tool");
      return tool.execute({ memory: input }, { agent: { threadId, resourceId }, memory });
    }
    case "libsql.execute": {
      const result = await libsqlClient(args.url).execute({ sql: args.sql, args: args.args ?? [] });
      return { rows: result.rows.map((row) => ({ ...row })), rowsAffected: result.rowsAffected };
    }
    case "libsql.appendKeys":
      return appendKeys(args);
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}

// @mastra/libsql's init creates its domains' tables in parallel (Promise.all) on a server (sequentially on a
// local file). Against sqld 0.24.32 over HTTP one of those CREATE TABLEs now and then fails with SQLITE_SCHEMA
// ("database schema has changed": another of them changed the schema first) -- Mastra's own init, failing for any
// Mastra user. Its statements are idempotent, and init caches its failed promise on a server, so the store's
// own sequential init (what it runs on a local file) takes over -- as the cached promise too, as init() itself
// caches it on a local file: Memory awaits store.init() again before its calls, and the failed parallel promise
// left in place failed Memory's createThread with the same SQLITE_SCHEMA (seen once in CI, 2026-12-07).
async function initStore(store) {
  try {
    await store.init();
  } catch (error) {
    const schema = /SQLITE_SCHEMA/.test(`${error?.code ?? ""} ${error?.message ?? ""}`);
    if (!schema || typeof store.initDomainsSequentially !== "function") throw error;
    const sequential = store.initDomainsSequentially();
    if ("hasInitialized" in store) store.hasInitialized = sequential;
    await sequential;
  }
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const store = await openStore(request.store ?? { kind: "none" });
  let domain = null;
  if (store) {
    if (request.store.init !== false) await initStore(store);
    domain = await store.getStore("memory");
  }
  const results = [];
  try {
    for (const step of request.steps ?? []) {
      try {
        results.push({ ok: true, value: encode(await run(store, domain, step)) });
      } catch (error) {
        results.push({ ok: false, error: String(error?.message ?? error) });
        if (request.stopOnError) break;
      }
    }
  } finally {
    for (const client of clients.values()) client.close();
    await store?.close?.();
  }
  process.stdout.write(JSON.stringify({ results }));
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
