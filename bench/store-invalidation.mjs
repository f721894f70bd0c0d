#!/usr/bin/env node
// Cross-host cache invalidation on PostgreSQL (SPEC 7.1): how long after a write on one host another host's
// cache drops the entry, and how many statements an idle host's caches cost the store — with the change feed
// (LISTEN/NOTIFY) and with the counter polling it falls back to, same run, same server. Run after
// `npm run build`: `node bench/store-invalidation.mjs`. Writes bench/results/store-invalidation.{json,md}.
//
// The runner is host A: it starts its own PostgreSQL (bench/lib/postgres.mjs, with pg_stat_statements), writes
// through a store without a feed, and starts host B twice (bench/lib/invalidation.mjs, the method bench/store.mjs
// shares), with the feed and polling, each on its own pool and its own role so the server counts each one's
// statements. Latency: from the start of A's write to the moment a cache of B calls `clear()`. Environment: BENCH_FEED_WRITES (default 300), BENCH_POLL_WRITES (default 40),
// BENCH_CACHES (caches per host in the latency phase, default 8), BENCH_IDLE_MS (default 5000).
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { IDLE_MODEL, InvalidationHost, REVALIDATE_MS, measureInvalidation, seedInvalidation } from './lib/invalidation.mjs';
import { postgresBin, startPostgres } from './lib/postgres.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = (file) => path.join(here, '..', 'dist', file);
const settings = {
  feedWrites: Number(process.env.BENCH_FEED_WRITES ?? 300),
  pollWrites: Number(process.env.BENCH_POLL_WRITES ?? 40),
  caches: Number(process.env.BENCH_CACHES ?? 8),
  idleMs: Number(process.env.BENCH_IDLE_MS ?? 5_000),
  revalidateMs: REVALIDATE_MS,
  idleModel: IDLE_MODEL,
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
  const stopAll = () => hosts.forEach((entry) => entry.kill());
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
    await seedInvalidation(writer);
    for (const role of ['host_feed', 'host_polling']) {
      await server.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}'`);
      await server.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`);
    }
    const version = (await server.query('SHOW server_version')).rows[0].server_version;
    const fed = new InvalidationHost('host B (change feed)', { url: server.url('host_feed', 'host_feed'), feed: true });
    const polling = new InvalidationHost('host B (polling)', { url: server.url('host_polling', 'host_polling'), feed: false });
    hosts.push(fed, polling);
    await Promise.all([fed.ready, polling.ready]);

    // The feed drops at once: a short random pause lets the caches read the entry again between writes. Polling
    // drops at the next check of each cache: a write at a random moment of the interval, as writes come.
    const feedLatency = await measureInvalidation(writer, fed, { writes: settings.feedWrites, caches: settings.caches, pauseMs: () => 2 + Math.random() * 5 });
    await fed.call('idle');
    const pollingLatency = await measureInvalidation(writer, polling, { writes: settings.pollWrites, caches: settings.caches, pauseMs: () => Math.random() * settings.revalidateMs });
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

await run();
