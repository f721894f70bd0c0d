#!/usr/bin/env node
// Store benchmark: the embedded store against PostgreSQL, same run, as a tenant's requests use them.
// - Per operation (read by id, filtered read, insert, update: bench/lib/store-workload.mjs) through a real
//   Fleetplane server with one worker, `POST /crud` with an admin key: one request at a time (latency), then
//   BENCH_CONNECTIONS keep-alive connections (ops/s, latency under load), server CPU per operation from /proc
//   (worker and primary) and, on PostgreSQL, the database's CPU per operation (every process of pg_stat_activity).
//   Then the same operations through the Store interface from one process, without HTTP.
// - Cross-host cache invalidation on PostgreSQL: bench/lib/invalidation.mjs (another process's caches, as
//   bench/store-invalidation.mjs measures them), and through two servers: a workflow changed by `/crud` on one
//   until the other serves the change.
// - Idle servers (a primary and one worker each, in one mesh) at BENCH_IDLE_SERVERS on each store: statements per
//   second per server (PostgreSQL: pg_stat_statements by each server's role; embedded, servers sharing one SQLite
//   file: bench/fixtures/count-sqlite.cjs) and CPU per server (bench/lib/idle-fleet.mjs). Goal: no growth per
//   server with the number of servers.
// Servers and store-API processes on the last CPU; the runner (the client) and PostgreSQL on the first; the idle
// servers anywhere. Run after `npm run build`: `node bench/store.mjs`; writes bench/results/store.{json,md}.
// BENCH_SMOKE=1: a few seconds of each part, printed, nothing written. Environment: BENCH_ROUNDS (default 3),
// BENCH_DURATION_S (load runs, default 2.5), BENCH_CONNECTIONS (default 16), BENCH_IDLE_SERVERS (default 1,3,10),
// BENCH_IDLE_S (idle window, default 30: one mesh discovery per server), BENCH_PIN=0 (no CPU pinning).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { IdleFleet, measureIdle } from './lib/idle-fleet.mjs';
import { InvalidationHost, measureInvalidation, seedInvalidation, summary } from './lib/invalidation.mjs';
import { closedLoop, postBuffer } from './lib/load.mjs';
import { postgresBin, startPostgres } from './lib/postgres.mjs';
import { Fixture, cpuPreciseMs, killAll } from './lib/procs.mjs';
import { writeStoreResults } from './lib/store-report.mjs';
import { OPERATIONS, StoreApiProcess, crudAnswered, crudBody, seedStore, storeConfig } from './lib/store-workload.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const smoke = process.env.BENCH_SMOKE === '1';
const settings = {
  rounds: Number(process.env.BENCH_ROUNDS ?? (smoke ? 1 : 3)),
  sequentialS: smoke ? 0.4 : 1.5,
  loadS: Number(process.env.BENCH_DURATION_S ?? (smoke ? 0.4 : 2.5)),
  connections: Number(process.env.BENCH_CONNECTIONS ?? 16),
  apiS: smoke ? 0.3 : 1,
  apiInFlight: 16,
  invalidationWrites: smoke ? 20 : 200,
  invalidationCaches: 8,
  serverWrites: smoke ? 10 : 100,
  idleServers: (process.env.BENCH_IDLE_SERVERS ?? (smoke ? '1,3' : '1,3,10')).split(',').map(Number),
  idleWindowS: Number(process.env.BENCH_IDLE_S ?? (smoke ? 3 : 30)),
  idleSettleS: smoke ? 1 : 5,
  pin: process.env.BENCH_PIN !== '0' && os.cpus().length >= 2,
};
const BACKENDS = ['embedded', 'postgres'];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const sum = (values) => values.reduce((total, value) => total + value, 0);
const lastCpu = os.cpus().length - 1;
const pin = (cpus, pid) => settings.pin && execFileSync('taskset', ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });

if (!postgresBin()) {
  console.error('store: skipped, PostgreSQL is not installed (Debian package "postgresql")');
  process.exit(0);
}
const started = Date.now();
const root = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-store-'));
const helpers = [];
// Exit handlers run on every way out (a signal turns into process.exit): the fixtures' process groups, the forked
// helpers, the directory; the PostgreSQL helper stops its server on exit on its own.
process.once('exit', () => {
  killAll();
  helpers.forEach((helper) => helper.kill());
  rmSync(root, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(130));
setTimeout(() => {
  console.error('store: over 10 minutes, giving up');
  process.exit(1);
}, 600_000).unref();

// The runner and PostgreSQL (started from it, so it inherits the affinity) share the first CPU.
pin('0', process.pid);
// Durability as the embedded store's (WAL, synchronous = NORMAL): a commit does not wait for the disk, a crash
// loses no more than the last commits. The test helper's default (no fsync at all) would flatter PostgreSQL.
const DURABILITY = { fsync: 'on', full_page_writes: 'on', synchronous_commit: 'off' };
const postgres = await startPostgres({ settings: { ...DURABILITY, shared_preload_libraries: 'pg_stat_statements', max_connections: 200 } });
const measurer = new pg.Client({ connectionString: postgres.url() });
await measurer.connect();
await measurer.query('CREATE EXTENSION pg_stat_statements');
const postgresVersion = (await measurer.query('SHOW server_version')).rows[0].server_version;
/** CPU (ms) of every PostgreSQL process so far, by pid. */
const postgresCpu = async () => new Map((await measurer.query('SELECT pid FROM pg_stat_activity')).rows.map(({ pid }) => [pid, cpuPreciseMs(pid) ?? 0]));
const postgresCpuSince = (before, after) => sum([...after].map(([pid, ms]) => ms - (before.get(pid) ?? 0)));

const dirs = { embedded: path.join(root, 'embedded'), postgres: path.join(root, 'postgres') };
BACKENDS.forEach((backend) => mkdirSync(dirs[backend]));
const configs = { embedded: storeConfig({ dataDir: dirs.embedded }), postgres: storeConfig({ dataDir: dirs.postgres, url: postgres.url() }) };
const data = { embedded: await seedStore(configs.embedded), postgres: await seedStore(configs.postgres) };
const headers = (backend) => ({ 'content-type': 'application/json', authorization: `Bearer ${data[backend].key}` });

/** A Fleetplane server with one worker on `backend`'s store, pinned to the last CPU. */
async function startServer(backend, dataDir = dirs[backend]) {
  const config = { dataDir, workers: 1, http: { port: 0, host: '127.0.0.1' }, log: { level: 'warn', requests: false }, ...(backend === 'postgres' ? { postgres: { url: postgres.url() } } : {}) };
  const fixture = new Fixture('fleetplane.mjs', { BENCH_FP_CONFIG: JSON.stringify(config) });
  const { port, pid, workers } = await fixture.ready(60_000);
  for (const each of [pid, ...workers]) pin(String(lastCpu), each);
  return { fixture, port, pids: [pid, ...workers] };
}

/** Runs `drive()` and charges the CPU of `pids` (and PostgreSQL's, on PostgreSQL) to the operations it made. */
async function charged(backend, pids, drive) {
  const postgresBefore = backend === 'postgres' && (await postgresCpu());
  const before = sum(pids.map(cpuPreciseMs));
  const result = await drive();
  const after = sum(pids.map(cpuPreciseMs));
  const postgresAfter = backend === 'postgres' && (await postgresCpu());
  if (result.failed > 0) throw new Error(`${backend}: ${result.failed} failed operations (${JSON.stringify(result.statuses)})`);
  const perOp = (ms) => +((ms * 1000) / result.requests).toFixed(1);
  return { opsPerSecond: result.requestsPerSecond, p50Ms: result.p50Ms, p99Ms: result.p99Ms, cpuUsPerOp: perOp(after - before), postgresCpuUsPerOp: postgresAfter ? perOp(postgresCpuSince(postgresBefore, postgresAfter)) : null };
}

/** Rounds of every operation on both backends, the backends' order reversed every other round. */
async function alternate(passes, run) {
  const samples = Object.fromEntries(OPERATIONS.map((operation) => [operation, Object.fromEntries(BACKENDS.map((backend) => [backend, Object.fromEntries(Object.keys(passes).map((pass) => [pass, []]))]))]));
  for (let round = 0; round < settings.rounds; round += 1) {
    for (const operation of OPERATIONS) {
      for (const backend of round % 2 === 0 ? BACKENDS : [...BACKENDS].reverse()) {
        for (const [pass, options] of Object.entries(passes)) samples[operation][backend][pass].push(await run(backend, operation, options));
      }
    }
    console.error(`store: round ${round + 1}/${settings.rounds} done`);
  }
  return samples;
}

// ---------------------------------------------------------------- per operation, through /crud and the Store API

const servers = { embedded: await startServer('embedded'), postgres: await startServer('postgres') };
const crudLoad = (backend, operation, { connections, seconds }) => {
  const { port } = servers[backend];
  return closedLoop({ port, connections, durationMs: seconds * 1000, request: () => postBuffer('127.0.0.1', port, '/crud', headers(backend), JSON.stringify(crudBody(operation, data[backend]))) });
};
for (const backend of BACKENDS) {
  for (const operation of OPERATIONS) {
    const response = await fetch(`http://127.0.0.1:${servers[backend].port}/crud`, { method: 'POST', headers: headers(backend), body: JSON.stringify(crudBody(operation, data[backend])) });
    const reply = await response.json();
    if (response.status !== 200 || !crudAnswered[operation](reply)) throw new Error(`${backend} ${operation}: ${response.status} ${JSON.stringify(reply).slice(0, 300)}`);
    await crudLoad(backend, operation, { connections: settings.connections, seconds: smoke ? 0.2 : 1 });
  }
}
const http = await alternate({ sequential: { connections: 1, seconds: settings.sequentialS }, load: { connections: settings.connections, seconds: settings.loadS } }, (backend, operation, options) =>
  charged(backend, servers[backend].pids, () => crudLoad(backend, operation, options)),
);

const apiProcesses = {};
for (const backend of BACKENDS) {
  apiProcesses[backend] = new StoreApiProcess(configs[backend], data[backend]);
  helpers.push(apiProcesses[backend]);
  await apiProcesses[backend].ready;
  pin(String(lastCpu), apiProcesses[backend].pid);
}
const api = await alternate({ sequential: { inFlight: 1 }, concurrent: { inFlight: settings.apiInFlight } }, (backend, operation, { inFlight }) =>
  charged(backend, [apiProcesses[backend].pid], () => apiProcesses[backend].run(operation, { durationMs: settings.apiS * 1000, inFlight })),
);
for (const backend of BACKENDS) apiProcesses[backend].kill();

// ---------------------------------------------------------------- cross-host invalidation on PostgreSQL

const { PostgresStore } = await import('../dist/src/db/postgres/store.js');
const writer = await PostgresStore.connect({ url: postgres.url() }, { changeFeed: false });
await seedInvalidation(writer);
const cacheHost = new InvalidationHost('host B', { url: postgres.url(), feed: true });
helpers.push(cacheHost);
await cacheHost.ready;
pin(String(lastCpu), cacheHost.child.pid);
const storeInvalidation = await measureInvalidation(writer, cacheHost, { writes: settings.invalidationWrites, caches: settings.invalidationCaches, pauseMs: () => 2 + Math.random() * 5 });
await cacheHost.call('stop');
await writer.close();

/** A workflow's output changed through `/crud` on server A, until server B's answer shows it (B polled all along). */
async function invalidationThroughServers(a, b) {
  const run = (port, route, body) => fetch(`http://127.0.0.1:${port}${route}`, { method: 'POST', headers: headers('postgres'), body: JSON.stringify(body) }).then((response) => response.json());
  const served = async () => (await run(b.port, '/workflows/version', { version: [{}] })).version?.[0]?.version;
  if ((await served()) !== 0) throw new Error('server B does not serve the workflow "version"');
  const nowMs = () => performance.now();
  const latencies = [];
  const afterAck = [];
  for (let version = 1; version <= settings.serverWrites; version += 1) {
    await sleep(5 + Math.random() * 10);
    const start = nowMs();
    let acknowledged;
    const write = run(a.port, '/crud', { method: 'object.update', collection: 'workflows', filter: { name: 'version' }, update: { $set: { output: { version } } } }).then((reply) => {
      if (reply.matchedCount !== 1) throw new Error(`server A: ${JSON.stringify(reply)}`);
      acknowledged = nowMs();
    });
    while ((await served()) !== version) if (nowMs() - start > 5_000) throw new Error(`server B still serves an older version than ${version} after 5 s`);
    const seen = nowMs();
    await write;
    latencies.push(seen - start);
    afterAck.push(seen - acknowledged);
  }
  return { drop: summary(latencies), afterAck: summary(afterAck), writes: settings.serverWrites };
}
const secondServer = await startServer('postgres', mkdtempSync(path.join(root, 'postgres-b-')));
const serverInvalidation = await invalidationThroughServers(servers.postgres, secondServer);
await Promise.all([secondServer, ...Object.values(servers)].map((server) => server.fixture.stop()));

// ---------------------------------------------------------------- idle servers

pin(`0-${lastCpu}`, process.pid);
const fleets = [new IdleFleet({ root, postgres }), new IdleFleet({ root, sqliteFile: path.join(dirs.embedded, 'fleetplane.db') })];
const idle = [];
for (const count of settings.idleServers) {
  await Promise.all(fleets.map((fleet) => fleet.grow(count)));
  await sleep(settings.idleSettleS * 1000);
  idle.push(...(await measureIdle(fleets, settings.idleWindowS * 1000)));
  console.error(`store: idle window with ${count} servers on each store done`);
}
await Promise.all(fleets.map((fleet) => fleet.stop()));
await measurer.end();
await postgres.stop();

const environment = { node: process.version, platform: `${process.platform} ${process.arch}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverage: os.loadavg().map((load) => +load.toFixed(2)) };
const result = { date: new Date().toISOString(), environment, postgres: postgresVersion, postgresSettings: DURABILITY, settings, samples: { http, api }, invalidation: { store: storeInvalidation, servers: serverInvalidation }, idle, elapsedS: +((Date.now() - started) / 1000).toFixed(1) };
const report = writeStoreResults(result, smoke ? undefined : path.join(here, 'results'));
process.stdout.write(report.markdown);
process.exitCode = report.goalsMet ? 0 : 1;
