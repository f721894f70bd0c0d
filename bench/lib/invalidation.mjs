// Cross-host cache invalidation on PostgreSQL, the method bench/store-invalidation.mjs and bench/store.mjs share.
// Host A (the runner) writes one document through a store of its own; host B, this file forked with its own pool
// and role, holds that document in `StoreCache`s consulted every millisecond and reports the moment each cache
// drops the entry. Latency runs from the start of A's write to the drop (process.hrtime, the host's monotonic
// clock, is shared by the processes). Host B's environment: BENCH_URL, BENCH_FEED=1 for the change feed.
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const dist = (file) => path.join(path.dirname(self), '..', '..', 'dist', file);
/** The caches' revalidation interval: how often a cache without a live feed compares the counters. */
export const REVALIDATE_MS = 250;
/** What host B's `idle` command models: the key directory's caches and mesh discovery's change token. */
export const IDLE_MODEL = '3 caches as the key directory holds (organizations+keys twice, keys), each consulted every 10 ms, and the inventory change token read every 1 s as mesh discovery does; no writes anywhere';
export const BENCH_COLLECTION = 'bench_items';
const nowNs = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------- host B (a forked process)

async function host() {
  const { PostgresStore } = await import(dist('src/db/postgres/store.js'));
  const { StoreCache } = await import(dist('src/db/store-cache.js'));
  const feed = process.env.BENCH_FEED === '1';
  const store = await PostgresStore.connect({ url: process.env.BENCH_URL }, { changeFeed: feed });
  let onClear = () => undefined;
  class TimedCache extends StoreCache {
    clear() {
      super.clear();
      onClear(this);
    }
  }
  const timers = [];
  let caches = [];
  const stopServing = () => {
    timers.splice(0).forEach(clearInterval);
    caches.splice(0).forEach((cache) => cache.close());
  };
  /** Consults `cache` every `everyMs`, reading from the store when it has no entry (one read at a time). */
  const serve = (cache, everyMs, load) => {
    let reading = false;
    const consult = () => {
      if (reading || cache.peek('item') !== undefined) return;
      reading = true;
      cache.get('item', load).finally(() => (reading = false));
    };
    consult();
    timers.push(setInterval(consult, everyMs));
  };
  const load = async () => (await store.collection(BENCH_COLLECTION).findOne({ _id: 'item' }))?.n ?? 0;
  const commands = {
    async latency({ caches: count }) {
      stopServing();
      caches = Array.from({ length: count }, () => new TimedCache(store, [BENCH_COLLECTION], { revalidateMs: REVALIDATE_MS, maxAgeMs: 3_600_000 }));
      onClear = (cache) => process.send({ type: 'drop', cache: caches.indexOf(cache), t: String(nowNs()) });
      // Polling caches started a fraction of the interval apart check the counters at different moments.
      for (const cache of caches) {
        serve(cache, 1, load);
        await sleep(REVALIDATE_MS / count);
      }
      if (feed) while (!store.feed.live) await sleep(10);
    },
    async idle() {
      stopServing();
      onClear = () => undefined;
      caches = [['organizations', 'keys'], ['organizations', 'keys'], ['keys']].map((names) => new StoreCache(store, names));
      for (const cache of caches) serve(cache, 10, async () => null);
      const discovery = setInterval(() => void store.changeToken(['servers']).catch(() => undefined), 1_000);
      timers.push(discovery);
      if (feed) while (!store.feed.live) await sleep(10);
    },
    async stop() {
      stopServing();
      await store.close();
      setImmediate(() => process.exit(0));
    },
  };
  process.on('message', async ({ id, command, ...args }) => {
    try {
      process.send({ type: 'reply', id, value: await commands[command](args) });
    } catch (error) {
      process.send({ type: 'reply', id, error: String(error?.stack ?? error) });
    }
  });
  // The runner gone (killed, crashed): nothing is left behind.
  process.on('disconnect', () => process.exit(0));
  process.send({ type: 'ready' });
}

// ---------------------------------------------------------------- the runner's side

/** Host B: `url` its own connection string, `feed` whether its store listens for changes. */
export class InvalidationHost {
  constructor(name, { url, feed }) {
    this.name = name;
    this.drops = [];
    this.pending = new Map();
    this.nextId = 1;
    this.child = fork(self, [], { env: { ...process.env, BENCH_URL: url, BENCH_FEED: feed ? '1' : '0' }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.ready = new Promise((resolve, reject) => {
      this.child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
      this.child.on('message', (message) => {
        if (message.type === 'ready') resolve();
        else if (message.type === 'drop') this.drops.push({ cache: message.cache, t: BigInt(message.t) });
        else if (message.type === 'reply') {
          const { resolve: done, reject: fail } = this.pending.get(message.id);
          this.pending.delete(message.id);
          if (message.error) fail(new Error(`${name}: ${message.error}`));
          else done(message.value);
        }
      });
    });
  }

  call(command, args = {}) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, command, ...args });
    });
  }

  /** The first drop of each cache after `since`, once every one of `count` caches dropped (or `timeoutMs` passed). */
  async dropsAfter(since, count, timeoutMs = 3_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const first = new Map();
      for (const drop of this.drops) if (drop.t > since && !first.has(drop.cache)) first.set(drop.cache, drop.t);
      if (first.size >= count) return [...first.values()];
      if (Date.now() > deadline) throw new Error(`${this.name}: ${first.size} of ${count} caches dropped the entry within ${timeoutMs} ms`);
      await sleep(1);
    }
  }

  kill() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

export const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
export const summary = (values) => ({ p50: +percentile(values, 50).toFixed(3), p99: +percentile(values, 99).toFixed(3), max: +Math.max(...values).toFixed(3), samples: values.length });
const msSince = (start, end) => Number(end - start) / 1e6;

/** Creates the document host B caches, through `writer` (host A's store). */
export const seedInvalidation = (writer) => writer.collection(BENCH_COLLECTION).insertOne({ _id: 'item', n: 0 });

/**
 * `writes` updates through `writer`, each after `pauseMs()`, while host B holds the document in `caches` caches:
 * the drop latency (one sample per cache and write), the same from A's acknowledgement, and A's write time.
 */
export async function measureInvalidation(writer, host, { writes, caches, pauseMs }) {
  const latencies = [];
  const afterAck = [];
  const writeTimes = [];
  await host.call('latency', { caches });
  for (let write = 0; write < writes; write += 1) {
    await sleep(pauseMs());
    const start = nowNs();
    await writer.collection(BENCH_COLLECTION).updateOne({ _id: 'item' }, { $inc: { n: 1 } });
    const acknowledged = nowNs();
    writeTimes.push(msSince(start, acknowledged));
    for (const dropped of await host.dropsAfter(start, caches)) {
      latencies.push(msSince(start, dropped));
      afterAck.push(msSince(acknowledged, dropped));
    }
  }
  return { drop: summary(latencies), afterAck: summary(afterAck), write: summary(writeTimes), writes };
}

if (process.argv[1] === self) await host();
