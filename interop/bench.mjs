// The Mastra peer of `python -m bench --peers` (bench/peers/mastra.py): the published @mastra/pg PostgresStore,
// @mastra/libsql LibSQLStore and @mastra/memory Memory, timed inside this one long-lived Node process.
//
// Protocol: one JSON command per line on stdin; one JSON reply per line on the file descriptor given as
// `--reply-fd N` (not stdout, which Mastra's console logger may write to; stdout and stderr go to a log file).
//   reply: {"ok": true, "value": ...} | {"ok": false, "error": "<Mastra's message>", "stack": "..."}
//
// Commands:
//   ping: replies {node: process.version} once the Mastra packages imported.
//   open {kind: "pg", connectionString, schemaName} | {kind: "libsql", url}: construct the store, init() it
//     (Mastra creates its schema and tables), open the memory domain and two Memory instances (resource scope:
//     template mode for replace, schema mode for merges).
//   prepare {resources, threadsPerResource, listThreads}: the fixture (resources r_<i> with a JSON working
//     memory, threads t_<i>_<j>; resource r_list with threads tl_<k>, tl_<k> updated k seconds after tl_0).
//   measure {op, start, count}: `count` calls of one operation, call i for i in start..start+count-1; each call
//     timed with process.hrtime.bigint() around it (so the pipe is in no sample); replies {latencies (s),
//     seconds (the block's wall time), extra}. Every result is checked (a read that finds nothing is an error).
//   threadsFound {start, count}: how many threads create_thread made for calls start..start+count-1 exist.
//   mergesKept {clients, perClient}: clients x perClient distinct keys merged concurrently through Memory's
//     updateWorkingMemory tool into one fresh resource; replies {kept, expected}.
//   pragmas {connections}: PRAGMA synchronous on `connections` concurrent calls of the libSQL client (each
//     borrows its own pooled connection) and on the next sequential call; replies {concurrent, sequential}.
//   close: close the store; replies, then the process exits.

import fs from "node:fs";
import readline from "node:readline";
import { Memory } from "@mastra/memory";

const TEMPLATE = "# User\n- Name:\n- City:\n- Tone:\n";
const MERGE_SCHEMA = { type: "object", additionalProperties: true };
const CONCURRENT = 16;

function replyFd() {
  const index = process.argv.indexOf("--reply-fd");
  const fd = index >= 0 ? Number(process.argv[index + 1]) : NaN;
  if (!Number.isInteger(fd) || fd < 0) throw new Error("usage: node bench.mjs --reply-fd N");
  return fd;
}

const state = {
  kind: null,
  store: null,
  domain: null,
  templateMemory: null,
  schemaMemory: null,
  fixture: null,
  merges: 0,
  mergeTool: null,
};

async function openStore(spec) {
  const id = "workmem-bench";
  if (spec.kind === "pg") {
    const { PostgresStore } = await import("@mastra/pg");
    return new PostgresStore({ id, connectionString: spec.connectionString, schemaName: spec.schemaName });
  }
  if (spec.kind === "libsql") {
    const { LibSQLStore } = await import("@mastra/libsql");
    return new LibSQLStore({ id, url: spec.url });
  }
  throw new Error(`unknown store kind ${spec.kind}`);
}

function memory(store, workingMemory) {
  return new Memory({ storage: store, options: { lastMessages: 10, workingMemory: { enabled: true, ...workingMemory } } });
}

const SYNCHRONOUS_LEVELS = { normal: "NORMAL", full: "FULL" };

async function open(spec) {
  if (spec.synchronous != null && !(spec.synchronous in SYNCHRONOUS_LEVELS)) {
    throw new Error(`synchronous is one of ${Object.keys(SYNCHRONOUS_LEVELS).join(", ")}, not ${spec.synchronous}`);
  }
  const store = await openStore(spec);
  await store.init();
  state.kind = spec.kind;
  state.synchronous = spec.synchronous == null ? null : SYNCHRONOUS_LEVELS[spec.synchronous];
  state.store = store;
  state.domain = await store.getStore("memory");
  state.templateMemory = memory(store, { scope: "resource", template: TEMPLATE });
  state.schemaMemory = memory(store, { scope: "resource", schema: MERGE_SCHEMA });
  return { kind: spec.kind };
}

// Runs fn over items with at most `limit` in flight (seeding PostgreSQL; libSQL runs each call synchronously on
// the event loop, so it is seeded with limit 1 and needs no second connection).
async function forEachLimited(items, limit, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++];
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function workingMemoryJson(i) {
  return JSON.stringify({ name: `user ${i}`, city: "Lisbon", prefs: { tone: "brief", units: "metric" } });
}

async function prepare({ resources, threadsPerResource, listThreads }) {
  const base = Date.UTC(2025, 0, 1);
  const day = 86_400_000;
  const calls = [];
  for (let r = 0; r < resources; r++) {
    const at = new Date(base);
    calls.push(() =>
      state.domain.saveResource({
        resource: { id: `r_${r}`, workingMemory: workingMemoryJson(r), metadata: {}, createdAt: at, updatedAt: at },
      }),
    );
    for (let j = 0; j < threadsPerResource; j++) {
      const created = new Date(base + j * 1000);
      calls.push(() =>
        state.domain.saveThread({
          thread: { id: `t_${r}_${j}`, resourceId: `r_${r}`, title: `thread ${j}`, metadata: {}, createdAt: created, updatedAt: created },
        }),
      );
    }
  }
  const at = new Date(base);
  calls.push(() =>
    state.domain.saveResource({
      resource: { id: "r_list", workingMemory: workingMemoryJson(-1), metadata: {}, createdAt: at, updatedAt: at },
    }),
  );
  for (let k = 0; k < listThreads; k++) {
    const created = new Date(base - day + k * 1000);
    const updated = new Date(base + k * 1000);
    calls.push(() =>
      state.domain.saveThread({
        thread: { id: `tl_${k}`, resourceId: "r_list", title: `listed ${k}`, metadata: {}, createdAt: created, updatedAt: updated },
      }),
    );
  }
  const started = process.hrtime.bigint();
  await forEachLimited(calls, state.kind === "pg" ? CONCURRENT : 1, (call) => call());
  state.fixture = { resources, threadsPerResource, listThreads };
  return { calls: calls.length, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

function fixture() {
  if (!state.fixture) throw new Error("prepare first");
  return state.fixture;
}

function threadIdFor(i) {
  const { resources, threadsPerResource } = fixture();
  return `t_${i % resources}_${Math.floor(i / resources) % threadsPerResource}`;
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

function replaceText(i) {
  const text = `# User\n- Name: user ${i}\n- City: Lisbon, Portugal (moved in ${2000 + (i % 25)})\n- Tone: brief, friendly, no emoji\n- Notes: prefers metric units; asks for sources; call ${i}\n`;
  return text.padEnd(200, ".");
}

// One call of `op` for index i: what a Mastra user writes for it.
const OPERATIONS = {
  async get_thread(i) {
    const threadId = threadIdFor(i);
    const thread = await state.domain.getThreadById({ threadId });
    expect(thread?.id === threadId, `getThreadById(${threadId}) found ${thread?.id ?? "nothing"}`);
  },
  async get_resource(i) {
    const resourceId = `r_${i % fixture().resources}`;
    const resource = await state.domain.getResourceById({ resourceId });
    expect(resource?.id === resourceId && resource.workingMemory, `getResourceById(${resourceId}) found no working memory`);
  },
  async create_thread(i) {
    const now = new Date();
    const thread = { id: `ct_${i}`, resourceId: `r_${i % fixture().resources}`, title: `new ${i}`, metadata: {}, createdAt: now, updatedAt: now };
    await state.domain.saveThread({ thread });
  },
  async replace_working_memory(i) {
    // Memory.updateWorkingMemory is where the agent's tool ends in template mode (the tool first reads the
    // thread and the working memory, to refuse an empty template); it takes Memory's per-resource mutex and
    // runs the store's updateResource (a read of the resource, then an UPDATE).
    const { resources } = fixture();
    const resourceId = `r_${(2 * i) % resources}`;
    await state.templateMemory.updateWorkingMemory({ resourceId, workingMemory: replaceText(i) });
  },
  async merge_field(i) {
    const { resources } = fixture();
    const r = (2 * i + 1) % resources;
    const result = await mergeThroughTool(`t_${r}_0`, `r_${r}`, { [`f${i}`]: i });
    expect(result?.success === true, `the updateWorkingMemory tool answered ${JSON.stringify(result)}`);
  },
  async list_newest_20() {
    const { listThreads } = fixture();
    const page = await state.domain.listThreads({
      filter: { resourceId: "r_list" },
      page: 0,
      perPage: 20,
      orderBy: { field: "updatedAt", direction: "DESC" },
    });
    const newest = `tl_${listThreads - 1}`;
    expect(page.threads.length === Math.min(20, listThreads), `listThreads gave ${page.threads.length} threads`);
    expect(page.threads[0].id === newest, `listThreads gave ${page.threads[0].id} first, not ${newest}`);
  },
};

// Memory's updateWorkingMemory tool as an agent runs it: in schema mode it reads the thread, reads the working
// memory, merges the input into it, and writes the result (Memory.updateWorkingMemory -> updateResource).
// The tool is listed once: a freshly listed tool's first execute takes ~10-35 ms longer (one-off setup, likely
// of its input schema's validator; an agent lists its tools once per run), which would be in every sample.
function mergeThroughTool(threadId, resourceId, input) {
  const memory = state.schemaMemory;
  state.mergeTool ??= memory.listTools()?.updateWorkingMemory;
  if (!state.mergeTool) throw new Error("Memory.listTools() has no updateWorkingMemory tool");
  return state.mergeTool.execute({ memory: input }, { agent: { threadId, resourceId }, memory });
}

const seconds = (from, to) => Number(to - from) / 1e9;

async function measure({ op, start, count }) {
  if (op === "get_thread_16") return measureConcurrentGets(start, count);
  const call = OPERATIONS[op];
  if (!call) throw new Error(`unknown operation ${op}`);
  if (state.kind === "libsql" && state.synchronous) {
    // Set on the connection the block's sequential calls borrow (the top of the idle stack, see nextSynchronous).
    await libsqlClient().execute(`PRAGMA synchronous=${state.synchronous}`);
  }
  const extra = state.kind === "libsql" && op !== "list_newest_20" ? { synchronous: await nextSynchronous() } : {};
  const latencies = new Array(count);
  const began = process.hrtime.bigint();
  for (let k = 0; k < count; k++) {
    const t0 = process.hrtime.bigint();
    await call(start + k);
    latencies[k] = seconds(t0, process.hrtime.bigint());
  }
  return { latencies, seconds: seconds(began, process.hrtime.bigint()), extra };
}

async function measureConcurrentGets(start, count) {
  const latencies = [];
  let next = start;
  const end = start + count;
  const client = async () => {
    while (next < end) {
      const i = next++;
      const t0 = process.hrtime.bigint();
      await OPERATIONS.get_thread(i);
      latencies.push(seconds(t0, process.hrtime.bigint()));
    }
  };
  const began = process.hrtime.bigint();
  await Promise.all(Array.from({ length: CONCURRENT }, client));
  return { latencies, seconds: seconds(began, process.hrtime.bigint()), extra: { clients: CONCURRENT } };
}

async function threadsFound({ start, count }) {
  let found = 0;
  for (let i = start; i < start + count; i++) {
    const thread = await state.domain.getThreadById({ threadId: `ct_${i}` });
    if (thread?.id === `ct_${i}` && thread.resourceId === `r_${i % fixture().resources}`) found += 1;
  }
  return { found };
}

async function mergesKept({ clients, perClient }) {
  const run = state.merges++;
  const resourceId = `mk_${run}`;
  const now = new Date();
  await state.domain.saveResource({
    resource: { id: resourceId, workingMemory: "{}", metadata: {}, createdAt: now, updatedAt: now },
  });
  for (let c = 0; c < clients; c++) {
    const thread = { id: `mk_${run}_t${c}`, resourceId, title: `client ${c}`, metadata: {}, createdAt: now, updatedAt: now };
    await state.domain.saveThread({ thread });
  }
  // One Memory instance for all clients, as one Mastra server serves concurrent agent runs of one user.
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let k = 0; k < perClient; k++) {
        const result = await mergeThroughTool(`mk_${run}_t${c}`, resourceId, { [`c${c}_k${k}`]: k });
        expect(result?.success === true, `the updateWorkingMemory tool answered ${JSON.stringify(result)}`);
      }
    }),
  );
  const raw = await state.schemaMemory.getWorkingMemory({ threadId: `mk_${run}_t0`, resourceId });
  const data = typeof raw === "string" ? JSON.parse(raw) : (raw ?? {});
  let kept = 0;
  for (let c = 0; c < clients; c++) for (let k = 0; k < perClient; k++) if (`c${c}_k${k}` in data) kept += 1;
  return { kept, expected: clients * perClient };
}

function libsqlClient() {
  if (state.kind !== "libsql") throw new Error("pragmas: only for the libSQL store");
  return state.store.client;
}

async function nextSynchronous() {
  // A sequential call borrows the connection on top of the pool's idle stack and puts it back there, so the
  // next sequential calls (the block about to run) use this same connection.
  const result = await libsqlClient().execute("PRAGMA synchronous");
  return Number(Object.values(result.rows[0])[0]);
}

async function pragmas({ connections }) {
  const client = libsqlClient();
  const rows = await Promise.all(Array.from({ length: connections }, () => client.execute("PRAGMA synchronous")));
  const concurrent = rows.map((result) => Number(Object.values(result.rows[0])[0]));
  return { concurrent, sequential: await nextSynchronous() };
}

async function close() {
  await state.store?.close?.();
  state.store = null;
  return {};
}

const ping = async () => ({ node: process.version });

const COMMANDS = { ping, open, prepare, measure, threadsFound, mergesKept, pragmas, close };

async function main() {
  const fd = replyFd();
  const reply = (value) => fs.writeSync(fd, `${JSON.stringify(value)}\n`);
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let request;
    try {
      request = JSON.parse(line);
      const command = COMMANDS[request.cmd];
      if (!command) throw new Error(`unknown command ${request.cmd}`);
      reply({ ok: true, value: await command(request) });
    } catch (error) {
      reply({ ok: false, error: String(error?.message ?? error), cause: String(error?.cause?.message ?? ""), stack: String(error?.stack ?? "") });
    }
    if (request?.cmd === "close") break;
  }
  await state.store?.close?.();
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
