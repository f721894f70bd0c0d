// The data and operations bench/store.mjs measures on each backend, the same for both: one organization with an
// admin key, the collection `items` (ITEMS documents of about 300 bytes, in GROUPS groups), the workflow `version`
// whose output a write changes (the invalidation seen through two servers), and four operations a tenant's
// requests make, each aimed at another document every time: `object.read` by `_id`, `object.read` by `group`
// (ITEMS / GROUPS documents), `object.create` of one document into `inserted`, `object.update` `$inc` by `_id`.
// This file is also the store-API process (forked by `StoreApiProcess`): it opens the store as a server does
// (dist/src/db/open.js) and runs one operation in a loop, as /crud runs it, without HTTP.
import { fork } from 'node:child_process';
import path from 'node:path';
import { createHistogram } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const dist = (file) => path.join(path.dirname(self), '..', '..', 'dist', file);
export const ITEMS = 1_000;
export const GROUPS = 100;
export const OPERATIONS = ['readById', 'filtered', 'insert', 'update'];
export const OPERATION_LABELS = { readById: 'read by id', filtered: `filtered read (${ITEMS / GROUPS} of ${ITEMS})`, insert: 'insert', update: 'update by id' };
const pick = (list) => list[Math.floor(Math.random() * list.length)];
const group = () => `g-${Math.floor(Math.random() * GROUPS)}`;
const newDocument = () => ({ group: group(), n: 0, text: 'x'.repeat(240) });

/** `openStore`'s configuration for a backend: the embedded file `<dataDir>/fleetplane.db`, or PostgreSQL at `url`. */
export const storeConfig = ({ dataDir, url }) => ({ dataDir, db: {}, mongodb: {}, ...(url ? { postgres: { url } } : {}) });

/** Seeds an empty store (standard indexes made by `openStore`); answers what the requests need. */
export async function seedStore(config) {
  const { openStore } = await import(dist('src/db/open.js'));
  const { createOrganization } = await import(dist('src/auth/organizations.js'));
  const { createKey } = await import(dist('src/auth/keys.js'));
  const store = await openStore(config);
  try {
    const organization = await createOrganization(store, { name: 'bench', hosts: ['127.0.0.1', 'localhost'] });
    const { key } = await createKey(store, { organizationId: organization._id, name: 'bench', admin: true });
    const scope = store.forOrganization(organization._id);
    await scope.collection('workflows').insertOne({ name: 'version', steps: [], output: { version: 0 } });
    const items = scope.collection('items');
    const itemIds = [];
    for (let index = 0; index < ITEMS; index += 1) itemIds.push((await items.insertOne({ name: `item-${index}`, group: `g-${index % GROUPS}`, n: 0, text: 'x'.repeat(200) })).insertedId);
    return { organizationId: organization._id, key, itemIds };
  } finally {
    await store.close();
  }
}

/** The `/crud` body of one operation, on a document or group picked at random. */
export function crudBody(operation, { itemIds }) {
  switch (operation) {
    case 'readById':
      return { method: 'object.read', collection: 'items', filter: { _id: pick(itemIds) } };
    case 'filtered':
      return { method: 'object.read', collection: 'items', filter: { group: group() } };
    case 'insert':
      return { method: 'object.create', collection: 'inserted', documents: [newDocument()] };
    case 'update':
      return { method: 'object.update', collection: 'items', filter: { _id: pick(itemIds) }, update: { $inc: { n: 1 } } };
  }
  throw new Error(`unknown operation ${operation}`);
}

/** Whether a 200 reply of `/crud` is the answer the operation should have. */
export const crudAnswered = {
  readById: (reply) => reply.documents?.length === 1,
  filtered: (reply) => reply.documents?.length === ITEMS / GROUPS,
  insert: (reply) => reply.insertedIds?.length === 1,
  update: (reply) => reply.matchedCount === 1,
};

/** The store calls `/crud` makes for an operation (src/crud/run.ts): the organization's scope, `find` with its default limit, `updateMany`. */
function storeCall(operation, scope, data) {
  const body = crudBody(operation, data);
  const collection = scope.collection(body.collection);
  switch (operation) {
    case 'readById':
    case 'filtered':
      return collection.find(body.filter, { limit: 100 });
    case 'insert':
      return collection.insertOne(body.documents[0]);
    case 'update':
      return collection.updateMany(body.filter, body.update);
  }
}

// ---------------------------------------------------------------- the store-API process

async function storeApiProcess() {
  const { openStore } = await import(dist('src/db/open.js'));
  const store = await openStore(JSON.parse(process.env.BENCH_STORE_CONFIG));
  const data = JSON.parse(process.env.BENCH_STORE_DATA);
  const scope = store.forOrganization(data.organizationId);
  /** `operation` for `durationMs`, `inFlight` at a time: operations, ops/s and latency in µs. */
  const loop = async ({ operation, durationMs, inFlight }) => {
    const histogram = createHistogram();
    let done = 0;
    const started = performance.now();
    const deadline = started + durationMs;
    const lane = async () => {
      while (performance.now() < deadline) {
        const start = process.hrtime.bigint();
        await storeCall(operation, scope, data);
        histogram.record(Math.max(1, Number(process.hrtime.bigint() - start)));
        done += 1;
      }
    };
    await Promise.all(Array.from({ length: inFlight }, lane));
    const elapsedS = (performance.now() - started) / 1000;
    const ms = (ns) => Math.round(ns / 1e3) / 1e3;
    return { requests: done, failed: 0, requestsPerSecond: Math.round(done / elapsedS), p50Ms: ms(histogram.percentile(50)), p99Ms: ms(histogram.percentile(99)) };
  };
  process.on('message', async ({ id, ...args }) => {
    try {
      process.send({ id, value: await loop(args) });
    } catch (error) {
      process.send({ id, error: String(error?.stack ?? error) });
    }
  });
  process.on('disconnect', () => void store.close().finally(() => process.exit(0)));
  process.send({ ready: true });
}

/** One process that has the store open (`config`, seeded with `data`) and runs operations when asked. */
export class StoreApiProcess {
  constructor(config, data) {
    this.child = fork(self, [], { env: { ...process.env, BENCH_STORE_CONFIG: JSON.stringify(config), BENCH_STORE_DATA: JSON.stringify(data) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.pid = this.child.pid;
    this.pending = new Map();
    this.nextId = 1;
    this.ready = new Promise((resolve, reject) => {
      this.child.once('exit', (code) => reject(new Error(`store-API process exited with ${code}`)));
      this.child.on('message', (message) => {
        if (message.ready) return resolve();
        const { resolve: done, reject: fail } = this.pending.get(message.id);
        this.pending.delete(message.id);
        if (message.error) fail(new Error(message.error));
        else done(message.value);
      });
    });
  }

  run(operation, { durationMs, inFlight }) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, operation, durationMs, inFlight });
    });
  }

  kill() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

if (process.argv[1] === self) await storeApiProcess();
