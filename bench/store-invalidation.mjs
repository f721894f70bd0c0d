#!/usr/bin/env node
// Cross-host cache invalidation on PostgreSQL (SPEC 7.1): how long after a write on one host another host's
// cache drops the entry, and how many statements an idle host's caches cost the store — with the change feed
// (LISTEN/NOTIFY) and with the counter polling it falls back to, same run, same server. Run after
// `npm run build`: `node bench/store-invalidation.mjs`. Writes bench/results/store-invalidation.{json,md}.
//
// The runner is host A: it starts its own PostgreSQL (bench/lib/postgres.mjs, with pg_stat_statements), writes
// through a store without a feed, and forks this file twice (BENCH_ROLE=host) as host B with the feed and host B
// polling, each on its own pool and its own role so the server counts each one's statements. Latency: from the
// start of A's write to the moment a cache of B calls `clear()` (process.hrtime, the host's monotonic clock, is
// shared by the processes). Environment: BENCH_FEED_WRITES (default 300), BENCH_POLL_WRITES (default 40),
// BENCH_CACHES (caches per host in the latency phase, default 8), BENCH_IDLE_MS (default 5000).
import { fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { postgresBin, startPostgres } from './lib/postgres.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = (file) => path.join(here, '..', 'dist', file);
const settings = {
  feedWrites: Number(process.env.BENCH_FEED_WRITES ?? 300),
  pollWrites: Number(process.env.BENCH_POLL_WRITES ?? 40),
  caches: Number(process.env.BENCH_CACHES ?? 8),
  idleMs: Number(process.env.BENCH_IDLE_MS ?? 5_000),
  revalidateMs: 250,
  idleModel: '3 caches as the key directory holds (organizations+keys twice, keys), each consulted every 10 ms, and the inventory change token read every 1 s as mesh discovery does; no writes anywhere',
};
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
  const load = async () => (await store.collection('bench_items').findOne({ _id: 'item' }))?.n ?? 0;
  const commands = {
    async latency({ caches: count }) {
      caches = Array.from({ length: count }, () => new TimedCache(store, ['bench_items'], { revalidateMs: settings.revalidateMs, maxAgeMs: 3_600_000 }));
      onClear = (cache) => process.send({ type: 'drop', cache: caches.indexOf(cache), t: String(nowNs()) });
      // Polling caches started a fraction of the interval apart check the counters at different moments.
      for (const cache of caches) {
        serve(cache, 1, load);
        await sleep(settings.revalidateMs / count);
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
  process.send({ type: 'ready' });
}

// ---------------------------------------------------------------- runner (host A)

class Host {
  constructor(name, env) {
    this.name = name;
    this.drops = [];
    this.pending = new Map();
    this.nextId = 1;
    this.child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, ...env, BENCH_ROLE: 'host' }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
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
}

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const summary = (values) => ({ p50: +percentile(values, 50).toFixed(3), p99: +percentile(values, 99).toFixed(3), max: +Math.max(...values).toFixed(3), samples: values.length });
const msSince = (start, end) => Number(end - start) / 1e6;

async function measureLatency(writer, host, writes, pauseMs) {
  const latencies = [];
  const afterAck = [];
  const writeTimes = [];
  await host.call('latency', { caches: settings.caches });
  for (let write = 0; write < writes; write += 1) {
    await sleep(pauseMs());
    const start = nowNs();
    await writer.collection('bench_items').updateOne({ _id: 'item' }, { $inc: { n: 1 } });
    const acknowledged = nowNs();
    writeTimes.push(msSince(start, acknowledged));
    for (const dropped of await host.dropsAfter(start, settings.caches)) {
      latencies.push(msSince(start, dropped));
      afterAck.push(msSince(acknowledged, dropped));
    }
  }
  return { drop: summary(latencies), afterAck: summary(afterAck), write: summary(writeTimes), writes };
}

async function statementsByRole(server) {
  const { rows } = await server.query("SELECT r.rolname AS role, sum(s.calls)::int AS calls FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname IN ('host_feed', 'host_polling') GROUP BY r.rolname");
  return Object.fromEntries(rows.map((row) => [row.role, row.calls]));
}

async function run() {
  if (!postgresBin()) {
    console.error('store-invalidation: skipped, PostgreSQL is not installed (Debian package "postgresql")');
    return;
  }
  const started = Date.now();
  const server = await startPostgres({ settings: { shared_preload_libraries: 'pg_stat_statements' } });
  const hosts = [];
  const stopAll = () => hosts.forEach((entry) => entry.child.exitCode === null && entry.child.kill('SIGKILL'));
  process.once('exit', stopAll);
  for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(130));
  const bound = setTimeout(() => {
    console.error('store-invalidation: over 2 minutes, giving up');
    process.exit(1);
  }, 120_000);
  bound.unref();
  try {
    const { PostgresStore } = await import(dist('src/db/postgres/store.js'));
    const writer = await PostgresStore.connect({ url: server.url() }, { changeFeed: false });
    await server.query('CREATE EXTENSION pg_stat_statements');
    await writer.collection('bench_items').insertOne({ _id: 'item', n: 0 });
    for (const role of ['host_feed', 'host_polling']) {
      await server.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}'`);
      await server.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`);
    }
    const version = (await server.query('SHOW server_version')).rows[0].server_version;
    const fed = new Host('host B (change feed)', { BENCH_URL: server.url('host_feed', 'host_feed'), BENCH_FEED: '1' });
    const polling = new Host('host B (polling)', { BENCH_URL: server.url('host_polling', 'host_polling'), BENCH_FEED: '0' });
    hosts.push(fed, polling);
    await Promise.all([fed.ready, polling.ready]);

    // The feed drops at once: a short random pause lets the caches read the entry again between writes. Polling
    // drops at the next check of each cache: a write at a random moment of the interval, as writes come.
    const feedLatency = await measureLatency(writer, fed, settings.feedWrites, () => 2 + Math.random() * 5);
    await fed.call('idle');
    const pollingLatency = await measureLatency(writer, polling, settings.pollWrites, () => Math.random() * settings.revalidateMs);
    await polling.call('idle');

    await sleep(1_000);
    const before = await statementsByRole(server);
    const windowStart = Date.now();
    await sleep(settings.idleMs);
    const after = await statementsByRole(server);
    const windowS = (Date.now() - windowStart) / 1000;
    const perSecond = (role) => +(((after[role] ?? 0) - (before[role] ?? 0)) / windowS).toFixed(2);
    const idle = { feed: perSecond('host_feed'), polling: perSecond('host_polling'), windowS: +windowS.toFixed(2) };

    await Promise.all([fed.call('stop'), polling.call('stop')]);
    await writer.close();
    const result = {
      date: new Date().toISOString(),
      environment: { node: process.version, platform: `${process.platform} ${process.arch}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverage: os.loadavg().map((load) => +load.toFixed(2)) },
      postgres: version,
      settings,
      latencyMs: { feed: feedLatency.drop, polling: pollingLatency.drop },
      /** From A's write returning; negative when B dropped the entry before A heard its commit acknowledged. */
      afterAcknowledgementMs: { feed: feedLatency.afterAck, polling: pollingLatency.afterAck },
      writes: { feed: feedLatency.writes, polling: pollingLatency.writes },
      writeMs: { feed: feedLatency.write, polling: pollingLatency.write },
      idleQueriesPerSecond: idle,
      elapsedS: +((Date.now() - started) / 1000).toFixed(1),
    };
    write(result);
    console.log(JSON.stringify({ latencyMs: result.latencyMs, idleQueriesPerSecond: idle }, null, 2));
  } finally {
    clearTimeout(bound);
    stopAll();
    await server.stop();
  }
}

function write(result) {
  const directory = path.join(here, 'results');
  mkdirSync(directory, { recursive: true });
  writeFileSync(path.join(directory, 'store-invalidation.json'), `${JSON.stringify(result, null, 2)}\n`);
  const { latencyMs, afterAcknowledgementMs: afterAck, writes, writeMs, idleQueriesPerSecond: idle, environment } = result;
  const row = (label, mode) =>
    `| ${label} | ${writes[mode]} × ${result.settings.caches} caches | ${latencyMs[mode].p50} | ${latencyMs[mode].p99} | ${latencyMs[mode].max} | ${afterAck[mode].p50} | ${afterAck[mode].p99} | ${writeMs[mode].p50} |`;
  const md = `# Store invalidation benchmark (PostgreSQL)

PostgreSQL ${result.postgres}, started by the benchmark on this host; Node ${environment.node}, ${environment.cpus} CPUs, load average ${environment.loadAverage.join(' / ')}; ${result.elapsedS} s in all.

Host A writes one document (an update in its own transaction, through a store without a change feed); host B, another process with its own pool and role, holds the document in ${result.settings.caches} caches (\`StoreCache\`, revalidateMs ${result.settings.revalidateMs}), each consulted every millisecond. Latency: from the start of A's write to the moment a cache of B drops the entry, one sample per cache and write (the columns after the acknowledgement count from A's write returning instead: below zero, B dropped the entry before A heard of its commit). With the change feed the notification is pushed when the write commits; polling, each cache compares the counters at its next check (caches started a fraction of the interval apart, writes at random moments).

| host B | writes × caches | p50 ms | p99 ms | max ms | after A's acknowledgement: p50 ms | p99 ms | A's write p50 ms |
|---|---|---:|---:|---:|---:|---:|---:|
${row('change feed (LISTEN/NOTIFY)', 'feed')}
${row('counter polling (the fallback)', 'polling')}

Statements per second an idle host B costs the store, counted by the server (\`pg_stat_statements\`, per role) over ${idle.windowS} s: ${result.settings.idleModel}.

| host B | statements/s |
|---|---:|
| change feed (LISTEN/NOTIFY) | ${idle.feed} |
| counter polling (the fallback) | ${idle.polling} |

A host whose caches are not consulted at all makes no freshness statement either way; with the feed the listening connection sits idle (TCP keepalive probes only, no statement).
`;
  writeFileSync(path.join(directory, 'store-invalidation.md'), md);
}

if (process.env.BENCH_ROLE === 'host') await host();
else await run();
