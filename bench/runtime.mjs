#!/usr/bin/env node
// Runtime benchmark: Fleetplane's primary hand-off against Node's cluster round-robin (plus, as a diagnostic,
// Fleetplane's runtime serving the baseline's bare app), the primary's 307 fallback against a bare node:http
// 307, and failed requests while a worker is killed (kill -9) and during a rolling restart. Run after
// `npm run build`: `node bench/runtime.mjs`. Writes bench/results/runtime.json and bench/results/runtime.md.
//
// Every figure compared is taken in this run, baseline and candidate alternately (order flipped every round),
// and a ratio is the median of the per-round ratios: the load generator shares the machine with the servers.
// CPU time per request of the primary and of the workers (from /proc) is recorded next to req/s: it says where
// a difference comes from and is less disturbed by other load on the machine than req/s.
//
// Idle RSS is read 0.5 s after the servers are ready, 10 s later, and BENCH_SETTLE_MS later (default 30 s), once
// V8 has given back what the boot used.
//
// Environment: BENCH_ROUNDS (default 3), BENCH_SECONDS (seconds per autocannon run, default 5).
//
// `BENCH_ONLY=rolling` runs only (e), BENCH_ROLLING_RUNS times in a row (default 10) on one server, each run a
// rolling restart under its own steady load once the fleet is complete again, and writes
// bench/results/runtime-rolling.{json,md} instead.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Fixture, cpuMs, killAll, rssMiB } from './lib/procs.mjs';
import { newConnectionLoop, steadyLoad } from './lib/load.mjs';
import { memoryMarkdown, memoryProbeEnv, memorySnapshots, summarizeSnapshot } from './lib/memory.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const resultsDir = path.join(here, 'results');

const WORKERS = 2;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = 50;
const RAW_CLIENT = { concurrency: 16, seconds: 3 };
const RAW_CLIENT_307 = { concurrency: 16, seconds: 2 };
const STEADY = { keepAlive: 8, newConnection: 8, ratePerLoop: 200, timeoutMs: 3_000, leadMs: 2_000, tailMs: 2_000 };
const KILLS = 3;
const KILL_SPACING_MS = 1_500;
const GOALS = { handOff: 0.95, fallback: 0.9, rollingRestartFailures: 0 };
const REDIRECT = 'http://lb.bench.invalid:8080';
const HOST = '127.0.0.1';
/** How long the servers stay idle before their settled memory is read. */
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 30_000);
/** An earlier reading on the way: memory 10 s after ready (or at the settled reading, if that comes first). */
const EARLY_MS = Math.min(10_000, SETTLE_MS);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const wallNow = () => performance.timeOrigin + performance.now();
const round2 = (value) => (value === null || value === undefined || Number.isNaN(value) ? null : Math.round(value * 100) / 100);
const round3 = (value) => (value === null || value === undefined || Number.isNaN(value) ? null : Math.round(value * 1000) / 1000);

function median(values) {
  const sorted = values.filter((value) => typeof value === 'number' && !Number.isNaN(value)).sort((x, y) => x - y);
  if (sorted.length === 0) return null;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const log = (message) => process.stderr.write(`[bench runtime ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

// ---------------------------------------------------------------------------------------------------------
// Cleanup: every fixture is its own process group; kill them all however this process ends.
let tmpDir;
function cleanup() {
  killAll();
  if (tmpDir) {
    try {
      rmSync(tmpDir, { recursive: true, force: true });
    } catch {
      // best effort
    }
    tmpDir = undefined;
  }
}
process.on('exit', cleanup);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    log(`${signal}: stopping every fixture`);
    cleanup();
    process.exit(130);
  });
}
process.on('uncaughtException', (error) => {
  log(`uncaught: ${error?.stack ?? error}`);
  cleanup();
  process.exit(1);
});
process.on('unhandledRejection', (error) => {
  log(`unhandled rejection: ${error?.stack ?? error}`);
  cleanup();
  process.exit(1);
});

// ---------------------------------------------------------------------------------------------------------
// Measurements

/** autocannon against `path`; `close` sends `Connection: close` so every request opens a new connection. */
async function cannon({ port, path: urlPath, close, seconds = SECONDS, expect = '2xx' }) {
  const result = await autocannon({
    url: `http://${HOST}:${port}${urlPath}`,
    connections: CONNECTIONS,
    duration: seconds,
    headers: close ? { connection: 'close' } : {},
    timeout: 10,
  });
  const good = result[expect] ?? 0;
  return {
    reqPerSec: Math.round(good / result.duration),
    requestsAvgPerSec: result.requests.average,
    // autocannon's latency is only meaningful with keep-alive (see BENCH-NOTES).
    p50Ms: close ? null : result.latency.p50,
    p99Ms: close ? null : result.latency.p99,
    [expect]: good,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    resets: result.resets,
    durationS: result.duration,
  };
}

/**
 * Runs `measure` and adds the CPU time the server's processes used per answered request (µs): the primary's
 * share shows what accepting and handing over costs, the workers' what serving costs.
 */
async function withCpu(info, measure) {
  const pids = [info.pid, ...info.workers];
  const before = pids.map(cpuMs);
  const result = await measure();
  const after = pids.map(cpuMs);
  const answered = result.ok ?? result['2xx'] ?? result['3xx'] ?? 0;
  const perRequest = (index) => (answered > 0 && before[index] !== null && after[index] !== null ? round2(((after[index] - before[index]) * 1000) / answered) : null);
  const workers = pids.slice(1).map((_, index) => perRequest(index + 1));
  result.cpuUsPerRequest = { primary: perRequest(0), workers: round2(workers.reduce((sum, value) => sum + (value ?? 0), 0)), total: null };
  result.cpuUsPerRequest.total = round2((result.cpuUsPerRequest.primary ?? 0) + result.cpuUsPerRequest.workers);
  return result;
}

function rssOf(info) {
  return { primary: rssMiB(info.pid), workers: info.workers.map((pid) => rssMiB(pid)) };
}

async function fleetPids(fixture) {
  const health = await fixture.command('health');
  return { ...fixture.info, workers: health.fleet.workers.map((worker) => worker.pid) };
}

function probe(port, urlPath) {
  return new Promise((resolve, reject) => {
    const req = request({ host: HOST, port, path: urlPath, headers: { connection: 'close' } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode, headers: response.headers, body, bytes: Buffer.byteLength(body) }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error(`GET ${urlPath}: no answer in 5 s`)));
    req.on('error', reject);
    req.end();
  });
}

const events = (fixture, since, name) => fixture.lines.slice(since).filter((line) => line.type === 'event' && (!name || line.name === name));

/** (e) One rolling restart (SIGHUP to the primary) of `b` under the steady paced load: failures and capacity. */
async function rollingRestart(b) {
  const load = steadyLoad({ port: b.info.port, path: '/healthz', ...STEADY });
  await sleep(STEADY.leadMs);
  const since = b.lines.length;
  const signalledAt = wallNow();
  b.signal('SIGHUP');
  const complete = await b.waitFor((line) => line.type === 'event' && line.name === 'restart:complete', 60_000, since);
  await sleep(STEADY.tailMs);
  const result = await load.stop();
  const list = events(b, since);
  // Windows where fewer than 2 workers took new connections (between fleet:degraded and fleet:recovered).
  const reduced = [];
  let openAt;
  for (const line of list) {
    if (line.name === 'fleet:degraded' && openAt === undefined) openAt = line.t;
    if (line.name === 'fleet:recovered' && openAt !== undefined) {
      reduced.push({ fromMs: round2(openAt - signalledAt), toMs: round2(line.t - signalledAt), ms: round2(line.t - openAt) });
      openAt = undefined;
    }
  }
  return {
    what: 'SIGHUP to the primary (rolling restart of 2 workers) under the same steady load',
    durationMs: complete.payload.durationMs,
    signalToCompleteMs: round2(complete.t - signalledAt),
    reducedCapacity: { windows: reduced, totalMs: round2(reduced.reduce((sum, window) => sum + window.ms, 0)) },
    load: summarizeLoad(result, signalledAt),
    goal: { metric: 'failed requests', max: GOALS.rollingRestartFailures },
    met: result.failed <= GOALS.rollingRestartFailures,
    events: list.map((line) => ({ ms: round2(line.t - signalledAt), name: line.name, workerId: line.payload.workerId ?? null, reason: line.payload.reason ?? null })),
  };
}

// ---------------------------------------------------------------------------------------------------------

async function main() {
  const started = wallNow();
  if (!existsSync(path.join(root, 'dist', 'index.js'))) throw new Error('dist/index.js is missing: run `npm run build` first');
  tmpDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-'));
  let commit = null;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // not a checkout
  }
  const fpConfig = (name, extra = {}) => ({
    BENCH_FP_CONFIG: JSON.stringify({
      workers: WORKERS,
      http: { port: 0, host: HOST },
      dataDir: path.join(tmpDir, name),
      log: { level: 'warn' },
      fallback: { redirect: REDIRECT },
      ...extra,
    }),
  });

  const report = {
    benchmark: 'runtime',
    date: new Date().toISOString(),
    machine: { node: process.version, cpus: os.availableParallelism(), loadavgAtStart: os.loadavg().map(round2) },
    commit,
    settings: {
      workers: WORKERS,
      rounds: ROUNDS,
      autocannon: { connections: CONNECTIONS, seconds: SECONDS },
      rawClient: RAW_CLIENT,
      rawClient307: RAW_CLIENT_307,
      steadyLoad: STEADY,
      redirect: REDIRECT,
    },
  };

  // ---- (a) cluster round-robin vs (b) Fleetplane hand-off ------------------------------------------------
  // `bBareApp` is Fleetplane's runtime serving (a)'s bare app: b/bBareApp is the application's share of a gap,
  // bBareApp/a the runtime's (primary hand-off, worker runtime).
  log('starting (a) cluster + Fastify, (b) Fleetplane, (bBareApp) Fleetplane runtime with the bare app');
  // The memory probe is preloaded in (a), (b) and (bBareApp), primary and workers: it answers SIGURG only.
  const memoryDir = path.join(tmpDir, 'memory');
  const memoryProbe = memoryProbeEnv(memoryDir);
  const a = new Fixture('cluster-fastify.mjs', { BENCH_WORKERS: String(WORKERS), ...memoryProbe });
  // The primary runs with the Node flags `npm start`, the CLI's shebang and the image give it.
  const primaryFlags = { execArgv: ['--max-semi-space-size=2'] };
  const b = new Fixture('fleetplane.mjs', { ...fpConfig('b'), ...memoryProbe }, primaryFlags);
  const bBareApp = new Fixture('fleetplane.mjs', { ...fpConfig('b-bare-app'), BENCH_FP_APP: 'bare', ...memoryProbe }, primaryFlags);
  await Promise.all([a.ready(), b.ready(), bBareApp.ready()]);
  const names = ['a', 'b', 'bBareApp'];
  const fixtures = { a, b, bBareApp };
  const probes = {};
  for (const name of names) {
    probes[name] = await probe(fixtures[name].info.port, '/healthz');
    if (probes[name].status !== 200) throw new Error(`${name} /healthz answered ${probes[name].status}`);
  }
  await sleep(500);
  const targets = { a: a.info, b: await fleetPids(b), bBareApp: await fleetPids(bBareApp) };
  const rssIdle = Object.fromEntries(names.map((name) => [name, rssOf(targets[name])]));
  // V8 gives back the memory of the boot on its own, some seconds after it: idle memory once settled.
  await sleep(EARLY_MS);
  const rssEarly = Object.fromEntries(names.map((name) => [name, rssOf(targets[name])]));
  await sleep(SETTLE_MS - EARLY_MS);
  const rssSettled = Object.fromEntries(names.map((name) => [name, rssOf(targets[name])]));
  // After RSS is read: the snapshot itself loads the inspector.
  const memoryIdle = [];
  for (const name of names) {
    const snapshots = await memorySnapshots(memoryDir, [targets[name].pid, ...targets[name].workers]);
    snapshots.forEach((snapshot, index) => memoryIdle.push({ fixture: name, label: `${name} ${index === 0 ? 'primary' : `worker ${index}`}`, summary: summarizeSnapshot(snapshot) }));
  }
  log('warm-up');
  for (const name of names) {
    await cannon({ port: targets[name].port, path: '/healthz', close: false, seconds: 1 });
    await cannon({ port: targets[name].port, path: '/healthz', close: true, seconds: 1 });
  }

  const kinds = [
    ['keepAlive', (port) => cannon({ port, path: '/healthz', close: false })],
    ['newConnection', (port) => cannon({ port, path: '/healthz', close: true })],
    ['newConnectionRawClient', (port) => newConnectionLoop({ port, path: '/healthz', concurrency: RAW_CLIENT.concurrency, durationMs: RAW_CLIENT.seconds * 1000 })],
  ];
  const ratiosOf = (entry, name) => ({
    keepAliveReqPerSec: round3(entry[name].keepAlive.reqPerSec / entry.a.keepAlive.reqPerSec),
    newConnectionReqPerSec: round3(entry[name].newConnection.reqPerSec / entry.a.newConnection.reqPerSec),
    newConnectionRawClientReqPerSec: round3(entry[name].newConnectionRawClient.reqPerSec / entry.a.newConnectionRawClient.reqPerSec),
    keepAliveP99: round3(entry[name].keepAlive.p99Ms / entry.a.keepAlive.p99Ms),
    newConnectionRawClientP99: round3(entry[name].newConnectionRawClient.p99Ms / entry.a.newConnectionRawClient.p99Ms),
  });
  const handOffRounds = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 ? names : [...names].reverse();
    const entry = { round, order: order.join(','), a: {}, b: {}, bBareApp: {} };
    for (const [kind, run] of kinds) {
      for (const name of order) {
        log(`round ${round}/${ROUNDS}: ${kind} ${name}`);
        entry[name][kind] = await withCpu(targets[name], () => run(targets[name].port));
        await sleep(300);
      }
    }
    entry.ratios = ratiosOf(entry, 'b');
    entry.ratiosBareAppOverA = ratiosOf(entry, 'bBareApp');
    handOffRounds.push(entry);
  }
  const rssAfterLoad = Object.fromEntries(names.map((name) => [name, rssOf(targets[name])]));
  const med = (name, kind, field) => median(handOffRounds.map((entry) => entry[name][kind][field]));
  const medCpu = (name, kind) => ({
    primary: median(handOffRounds.map((entry) => entry[name][kind].cpuUsPerRequest.primary)),
    workers: median(handOffRounds.map((entry) => entry[name][kind].cpuUsPerRequest.workers)),
  });
  const medianRatios = (key) => Object.fromEntries(Object.keys(handOffRounds[0][key]).map((field) => [field, round3(median(handOffRounds.map((entry) => entry[key][field])))]));
  const handOffMedians = {};
  for (const name of names) {
    handOffMedians[name] = {
      keepAlive: { reqPerSec: med(name, 'keepAlive', 'reqPerSec'), p50Ms: med(name, 'keepAlive', 'p50Ms'), p99Ms: med(name, 'keepAlive', 'p99Ms'), cpuUsPerRequest: medCpu(name, 'keepAlive') },
      newConnection: { reqPerSec: med(name, 'newConnection', 'reqPerSec'), cpuUsPerRequest: medCpu(name, 'newConnection') },
      newConnectionRawClient: {
        reqPerSec: med(name, 'newConnectionRawClient', 'reqPerSec'),
        p50Ms: med(name, 'newConnectionRawClient', 'p50Ms'),
        p99Ms: med(name, 'newConnectionRawClient', 'p99Ms'),
        cpuUsPerRequest: medCpu(name, 'newConnectionRawClient'),
      },
    };
  }
  const handOffRatios = medianRatios('ratios');
  const bareAppRatios = medianRatios('ratiosBareAppOverA');
  const handOffMet = {
    keepAlive: handOffRatios.keepAliveReqPerSec >= GOALS.handOff,
    newConnection: handOffRatios.newConnectionReqPerSec >= GOALS.handOff,
    newConnectionRawClient: handOffRatios.newConnectionRawClientReqPerSec >= GOALS.handOff,
  };
  report.handOff = {
    what:
      '(a) Node cluster round-robin, 2 workers, bare Fastify GET /healthz vs (b) Fleetplane primary hand-off, 2 workers, its own app, GET /healthz; bBareApp = Fleetplane runtime serving the bare app of (a) (diagnostic)',
    probes: Object.fromEntries(names.map((name) => [name, { status: probes[name].status, bodyBytes: probes[name].bytes, body: probes[name].body }])),
    rounds: handOffRounds,
    medians: handOffMedians,
    ratios: handOffRatios,
    ratiosBareAppOverA: bareAppRatios,
    goal: { metric: 'median of per-round b/a req/s: keep-alive (autocannon) and new connection per request (autocannon and the raw client)', min: GOALS.handOff },
    met: handOffMet.keepAlive && handOffMet.newConnection && handOffMet.newConnectionRawClient,
    metBy: handOffMet,
    rssMiB: { idle: rssIdle, early: rssEarly, earlyAfterMs: EARLY_MS, settled: rssSettled, settledAfterMs: SETTLE_MS, afterLoad: rssAfterLoad },
    memoryIdle,
  };
  log('stopping (a) and (bBareApp)');
  await Promise.all([a.stop(5_000), bBareApp.stop(15_000)]);

  // ---- (d) kill -9 of one worker under steady load ----------------------------------------------------------
  // Several kills in one load run (spaced so the fleet is complete again before the next), because whether a
  // connection is caught in flight at the instant of the kill is a matter of timing.
  log(`(d) kill -9 of one worker under steady load, ${KILLS} times`);
  {
    const load = steadyLoad({ port: b.info.port, path: '/healthz', ...STEADY });
    await sleep(STEADY.leadMs);
    const kills = [];
    for (let trial = 1; trial <= KILLS; trial++) {
      const health = await b.command('health');
      const ready = health.fleet.workers.filter((worker) => worker.status === 'ready' && !worker.retiring);
      const victim = ready[(trial - 1) % ready.length];
      const since = b.lines.length;
      const killedAt = wallNow();
      process.kill(victim.pid, 'SIGKILL');
      const readyEvent = await b.waitFor((line) => line.type === 'event' && line.name === 'worker:ready' && line.payload.workerId === victim.worker, 30_000, since);
      let confirmedAt;
      for (let attempt = 0; attempt < 100; attempt++) {
        if ((await b.command('health')).fleet.active >= WORKERS) {
          confirmedAt = wallNow();
          break;
        }
        await sleep(20);
      }
      const first = (name) => events(b, since, name).find((line) => line.payload.workerId === undefined || line.payload.workerId === victim.worker);
      kills.push({
        trial,
        worker: victim.worker,
        pid: victim.pid,
        killedAt,
        msAfterKill: {
          exitSeen: first('worker:exit') ? round2(first('worker:exit').t - killedAt) : null,
          restartForked: first('worker:restart') ? round2(first('worker:restart').t - killedAt) : null,
          online: first('worker:online') ? round2(first('worker:online').t - killedAt) : null,
          ready: round2(readyEvent.t - killedAt),
          active2ConfirmedByPoll: confirmedAt ? round2(confirmedAt - killedAt) : null,
        },
        restartBackoffMs: first('worker:restart')?.payload.delayMs ?? null,
        capacityBackMs: round2(readyEvent.t - killedAt),
        events: events(b, since).map((line) => ({ ms: round2(line.t - killedAt), name: line.name, workerId: line.payload.workerId ?? null, signal: line.payload.signal ?? null })),
      });
      await sleep(KILL_SPACING_MS);
    }
    await sleep(STEADY.tailMs - KILL_SPACING_MS);
    const result = await load.stop();
    // Attribute every failed request to the last kill before it was sent (a request sent up to 100 ms before
    // a kill may still be in flight when the worker dies, so it counts for that kill too).
    const owner = (failure) => [...kills].reverse().find((kill) => failure.sentAt >= kill.killedAt - 100);
    for (const kill of kills) {
      const mine = result.failures.filter((failure) => owner(failure) === kill);
      kill.failed = mine.length;
      kill.failuresByType = countTypes(mine);
      kill.failures = mine.map((failure) => ({ sentMs: round2(failure.sentAt - kill.killedAt), failedMs: round2(failure.t - kill.killedAt), kind: failure.kind, type: failure.type, reusedSocket: failure.reused }));
    }
    const unattributed = result.failures.filter((failure) => !owner(failure)).length;
    report.kill9 = {
      what: `SIGKILL of one of 2 workers, ${KILLS} times ${KILL_SPACING_MS} ms after the fleet was complete again, under steady load (${STEADY.keepAlive} keep-alive connections + ${STEADY.newConnection} new-connection loops, ${STEADY.ratePerLoop} req/s each, ${STEADY.timeoutMs / 1000} s client timeout)`,
      kills: kills.map(({ killedAt, ...rest }) => rest),
      unattributedFailures: unattributed,
      capacityBackMs: { first: kills[0].capacityBackMs, median: median(kills.map((kill) => kill.capacityBackMs)), max: Math.max(...kills.map((kill) => kill.capacityBackMs)) },
      load: summarizeLoad(result, kills[0].killedAt),
    };
  }

  // ---- (e) rolling restart (SIGHUP) under steady load ------------------------------------------------------
  log('(e) rolling restart (SIGHUP) under steady load');
  await sleep(500);
  report.rollingRestart = await rollingRestart(b);

  log('stopping (b): SIGTERM');
  {
    const stoppingAt = wallNow();
    const stop = await b.stop(15_000);
    report.shutdownB = { ...stop, ms: round2(wallNow() - stoppingAt) };
  }

  // ---- (c) the primary's 307 fallback vs a bare node:http 307 ----------------------------------------------
  log('starting (c) bare 307 server and Fleetplane with every worker cordoned');
  const bare = new Fixture('redirect-307.mjs', { BENCH_REDIRECT: REDIRECT });
  const fallback = new Fixture('fleetplane.mjs', fpConfig('c'));
  await Promise.all([bare.ready(), fallback.ready()]);
  const cordonReply = await fallback.command('cordon');
  const fallbackStatus = await fallback.command('health');
  const probe307 = { bare: await probe(bare.info.port, '/bench/redirect?x=1'), fleetplane: await probe(fallback.info.port, '/bench/redirect?x=1') };
  for (const [name, result] of Object.entries(probe307)) {
    if (result.status !== 307) throw new Error(`${name}: expected a 307, got ${result.status} (server status ${fallbackStatus.status})`);
  }
  const c307 = { bare: bare.info, fleetplane: await fleetPids(fallback) };
  for (const fixture of [bare, fallback]) await cannon({ port: fixture.info.port, path: '/bench/redirect', close: true, seconds: 1, expect: '3xx' });
  const fallbackRounds = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 ? ['bare', 'fleetplane'] : ['fleetplane', 'bare'];
    const entry = { round, order: order.join(','), bare: {}, fleetplane: {} };
    for (const [kind, run] of [
      ['newConnection', (port) => cannon({ port, path: '/bench/redirect', close: true, expect: '3xx' })],
      ['newConnectionRawClient', (port) => newConnectionLoop({ port, path: '/bench/redirect', expectStatus: 307, concurrency: RAW_CLIENT_307.concurrency, durationMs: RAW_CLIENT_307.seconds * 1000 })],
    ]) {
      for (const name of order) {
        log(`(c) round ${round}/${ROUNDS}: ${kind} ${name}`);
        entry[name][kind] = await withCpu(c307[name], () => run(c307[name].port));
        await sleep(300);
      }
    }
    entry.ratios = {
      newConnectionReqPerSec: round3(entry.fleetplane.newConnection.reqPerSec / entry.bare.newConnection.reqPerSec),
      newConnectionRawClientReqPerSec: round3(entry.fleetplane.newConnectionRawClient.reqPerSec / entry.bare.newConnectionRawClient.reqPerSec),
      newConnectionRawClientP99: round3(entry.fleetplane.newConnectionRawClient.p99Ms / entry.bare.newConnectionRawClient.p99Ms),
    };
    fallbackRounds.push(entry);
  }
  const medC = (name, kind, field) => median(fallbackRounds.map((entry) => entry[name][kind][field]));
  const fallbackRatios = {
    newConnectionReqPerSec: round3(median(fallbackRounds.map((entry) => entry.ratios.newConnectionReqPerSec))),
    newConnectionRawClientReqPerSec: round3(median(fallbackRounds.map((entry) => entry.ratios.newConnectionRawClientReqPerSec))),
    newConnectionRawClientP99: round3(median(fallbackRounds.map((entry) => entry.ratios.newConnectionRawClientP99))),
  };
  report.fallback307 = {
    what: "bare node:http 307 vs Fleetplane's primary answering the 307 fallback (2 workers, all cordoned), new connection per request",
    cordonReply,
    serverStatus: fallbackStatus.status,
    probes: Object.fromEntries(
      Object.entries(probe307).map(([name, result]) => [
        name,
        { status: result.status, location: result.headers.location, cacheControl: result.headers['cache-control'], connection: result.headers.connection },
      ]),
    ),
    rounds: fallbackRounds,
    medians: Object.fromEntries(
      ['bare', 'fleetplane'].map((name) => [
        name,
        {
          newConnection: { reqPerSec: medC(name, 'newConnection', 'reqPerSec') },
          newConnectionRawClient: { reqPerSec: medC(name, 'newConnectionRawClient', 'reqPerSec'), p50Ms: medC(name, 'newConnectionRawClient', 'p50Ms'), p99Ms: medC(name, 'newConnectionRawClient', 'p99Ms') },
        },
      ]),
    ),
    ratios: fallbackRatios,
    goal: { metric: 'median of per-round fleetplane/bare 307 req/s, new connection per request (autocannon)', min: GOALS.fallback },
    met: fallbackRatios.newConnectionReqPerSec >= GOALS.fallback,
  };
  log('stopping (c)');
  await Promise.all([bare.stop(5_000), fallback.stop(15_000)]);

  report.durationS = round2((wallNow() - started) / 1000);
  report.machine.loadavgAtEnd = os.loadavg().map(round2);
  report.goals = {
    handOffReqPerSec: { min: GOALS.handOff, keepAlive: handOffRatios.keepAliveReqPerSec, newConnection: handOffRatios.newConnectionReqPerSec, met: report.handOff.met },
    fallback307ReqPerSec: { min: GOALS.fallback, ratio: fallbackRatios.newConnectionReqPerSec, met: report.fallback307.met },
    rollingRestartFailedRequests: { max: GOALS.rollingRestartFailures, failed: report.rollingRestart.load.failed, met: report.rollingRestart.met },
  };
  report.met = report.handOff.met && report.fallback307.met && report.rollingRestart.met;

  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(path.join(resultsDir, 'runtime.json'), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(path.join(resultsDir, 'runtime.md'), markdown(report));
  log(`done in ${report.durationS} s: bench/results/runtime.json, bench/results/runtime.md`);
  process.stdout.write(markdown(report));
}

function countTypes(failures) {
  const byType = {};
  for (const failure of failures) {
    const key = `${failure.kind === 'ka' ? 'keep-alive' : 'new-connection'} ${failure.type}${failure.reused ? ' (reused socket)' : ''}`;
    byType[key] = (byType[key] ?? 0) + 1;
  }
  return byType;
}

/** Failed requests of a steady-load run, with times relative to `zero` (the kill or the signal). */
function summarizeLoad(result, zero) {
  const failures = result.failures.map((failure) => ({ sentMs: round2(failure.sentAt - zero), failedMs: round2(failure.t - zero), kind: failure.kind, type: failure.type, reusedSocket: failure.reused }));
  return {
    durationS: result.durationS,
    offeredReqPerSec: result.offeredReqPerSec,
    ok: result.counts.ka.ok + result.counts.nc.ok,
    failed: result.failed,
    counts: result.counts,
    failuresByType: countTypes(result.failures),
    failures,
    latency: result.latency,
    // Answers per 250 ms of the load, from `zero`: where capacity dipped and where requests failed.
    timeline: result.timeline.map((slot) => ({ ms: Math.round(result.startedAt + slot.atMs - zero), ok: slot.ok, failed: slot.failed })),
  };
}

// ---------------------------------------------------------------------------------------------------------

const yes = (value) => (value ? '**met**' : '**missed**');
const fmt = (value, digits = 0) => (value === null || value === undefined ? '–' : Number(value).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));
/** `median (min–max over rounds)` of one per-round ratio. */
const spread = (rounds, key, field) => {
  const values = rounds.map((entry) => entry[key][field]).filter((value) => typeof value === 'number');
  return `${fmt(median(values), 3)} (${fmt(Math.min(...values), 2)}–${fmt(Math.max(...values), 2)})`;
};
const cpu = (row) => `${fmt(row.cpuUsPerRequest.primary, 1)} + ${fmt(row.cpuUsPerRequest.workers, 1)}`;
const mib = (rss) => `${fmt(rss.primary, 0)} / ${rss.workers.map((value) => fmt(value, 0)).join(', ')}`;

function failures(load) {
  if (load.failed === 0) return `0 of ${fmt(load.ok)}`;
  return `${load.failed} of ${fmt(load.ok + load.failed)} (${Object.entries(load.failuresByType).map(([type, count]) => `${count} ${type}`).join(', ')})`;
}

function markdown(report) {
  const h = report.handOff;
  const m = h.medians;
  const r = h.ratios;
  const c = report.fallback307;
  const k = report.kill9;
  const e = report.rollingRestart;
  const lines = [
    `# Runtime benchmark (${report.date.slice(0, 10)}, Node ${report.machine.node}, ${report.machine.cpus} CPUs${report.commit ? `, ${report.commit}` : ''})`,
    '',
    '| measure | baseline | Fleetplane | ratio: median of rounds (min–max) | goal | |',
    '|---|---|---|---|---|---|',
    `| GET /healthz keep-alive, req/s — (a) cluster RR vs (b) hand-off | ${fmt(m.a.keepAlive.reqPerSec)} | ${fmt(m.b.keepAlive.reqPerSec)} | ${spread(h.rounds, 'ratios', 'keepAliveReqPerSec')} | ≥ ${GOALS.handOff} | ${yes(h.metBy.keepAlive)} |`,
    `| keep-alive p50 / p99 ms (autocannon, ${CONNECTIONS} conns) | ${fmt(m.a.keepAlive.p50Ms, 1)} / ${fmt(m.a.keepAlive.p99Ms, 1)} | ${fmt(m.b.keepAlive.p50Ms, 1)} / ${fmt(m.b.keepAlive.p99Ms, 1)} | p99 ${fmt(r.keepAliveP99, 2)} | | |`,
    `| GET /healthz new connection per request, req/s (autocannon) | ${fmt(m.a.newConnection.reqPerSec)} | ${fmt(m.b.newConnection.reqPerSec)} | ${spread(h.rounds, 'ratios', 'newConnectionReqPerSec')} | ≥ ${GOALS.handOff} | ${yes(h.metBy.newConnection)} |`,
    `| new connection per request, raw client (${RAW_CLIENT.concurrency} loops): req/s | ${fmt(m.a.newConnectionRawClient.reqPerSec)} | ${fmt(m.b.newConnectionRawClient.reqPerSec)} | ${spread(h.rounds, 'ratios', 'newConnectionRawClientReqPerSec')} | ≥ ${GOALS.handOff} | ${yes(h.metBy.newConnectionRawClient)} |`,
    `| new connection per request, raw client: p50 / p99 ms | ${fmt(m.a.newConnectionRawClient.p50Ms, 2)} / ${fmt(m.a.newConnectionRawClient.p99Ms, 2)} | ${fmt(m.b.newConnectionRawClient.p50Ms, 2)} / ${fmt(m.b.newConnectionRawClient.p99Ms, 2)} | p99 ${fmt(r.newConnectionRawClientP99, 2)} | | |`,
    `| diagnostic: Fleetplane runtime with (a)'s bare app, req/s keep-alive / new conn. (autocannon) / new conn. (raw) | | ${fmt(m.bBareApp.keepAlive.reqPerSec)} / ${fmt(m.bBareApp.newConnection.reqPerSec)} / ${fmt(m.bBareApp.newConnectionRawClient.reqPerSec)} | ${fmt(h.ratiosBareAppOverA.keepAliveReqPerSec, 3)} / ${fmt(h.ratiosBareAppOverA.newConnectionReqPerSec, 3)} / ${fmt(h.ratiosBareAppOverA.newConnectionRawClientReqPerSec, 3)} (vs a) | | |`,
    `| CPU µs per request, primary + workers: keep-alive (Fleetplane runtime + bare app: ${cpu(m.bBareApp.keepAlive)}) | ${cpu(m.a.keepAlive)} | ${cpu(m.b.keepAlive)} | | | |`,
    `| CPU µs per request, primary + workers: new connection, raw client (runtime + bare app: ${cpu(m.bBareApp.newConnectionRawClient)}) | ${cpu(m.a.newConnectionRawClient)} | ${cpu(m.b.newConnectionRawClient)} | | | |`,
    `| RSS MiB primary / workers, idle (runtime + bare app: ${mib(h.rssMiB.idle.bBareApp)}) | ${mib(h.rssMiB.idle.a)} | ${mib(h.rssMiB.idle.b)} | | | |`,
    `| RSS MiB primary / workers, idle ${EARLY_MS / 1000} s later (runtime + bare app: ${mib(h.rssMiB.early.bBareApp)}) | ${mib(h.rssMiB.early.a)} | ${mib(h.rssMiB.early.b)} | | | |`,
    `| RSS MiB primary / workers, idle ${SETTLE_MS / 1000} s later (runtime + bare app: ${mib(h.rssMiB.settled.bBareApp)}) | ${mib(h.rssMiB.settled.a)} | ${mib(h.rssMiB.settled.b)} | | | |`,
    `| RSS MiB primary / workers, after the rounds (runtime + bare app: ${mib(h.rssMiB.afterLoad.bBareApp)}) | ${mib(h.rssMiB.afterLoad.a)} | ${mib(h.rssMiB.afterLoad.b)} | | | |`,
    `| (c) 307 new connection per request, req/s — bare node:http vs primary fallback | ${fmt(c.medians.bare.newConnection.reqPerSec)} | ${fmt(c.medians.fleetplane.newConnection.reqPerSec)} | ${spread(c.rounds, 'ratios', 'newConnectionReqPerSec')} | ≥ ${GOALS.fallback} | ${yes(c.met)} |`,
    `| (c) 307 raw client: req/s, p50 / p99 ms | ${fmt(c.medians.bare.newConnectionRawClient.reqPerSec)}, ${fmt(c.medians.bare.newConnectionRawClient.p50Ms, 2)} / ${fmt(c.medians.bare.newConnectionRawClient.p99Ms, 2)} | ${fmt(c.medians.fleetplane.newConnectionRawClient.reqPerSec)}, ${fmt(c.medians.fleetplane.newConnectionRawClient.p50Ms, 2)} / ${fmt(c.medians.fleetplane.newConnectionRawClient.p99Ms, 2)} | ${fmt(c.ratios.newConnectionRawClientReqPerSec, 3)} | | |`,
    `| (d) kill -9 of 1 of 2 workers, ${k.kills.length} kills: failed requests | | ${failures(k.load)}; per kill ${k.kills.map((kill) => kill.failed).join(' / ')} | | | |`,
    `| (d) kill -9: 2 workers ready again after (per kill; restart backoff) | | ${k.kills.map((kill) => `${fmt(kill.capacityBackMs)} ms`).join(' / ')} (backoff ${k.kills.map((kill) => fmt(kill.restartBackoffMs)).join(' / ')} ms; exit seen after ${k.kills.map((kill) => fmt(kill.msAfterKill.exitSeen)).join(' / ')} ms) | | | |`,
    `| (e) rolling restart (SIGHUP): failed requests | | ${failures(e.load)} | | 0 | ${yes(e.met)} |`,
    `| (e) rolling restart: duration; time with < 2 workers taking connections | | ${fmt(e.durationMs)} ms; ${fmt(e.reducedCapacity.totalMs)} ms | | | |`,
    '',
    '## Idle memory per process (MiB unless said)',
    '',
    '(a) bare Node cluster + Fastify, (b) Fleetplane, (bBareApp) Fleetplane runtime serving the bare app. Taken right after the idle RSS above, from inside each process (`process.memoryUsage()`, `v8.getHeapSpaceStatistics()`); "other native" is RSS − heap total − external (Node itself, native addons such as SQLite, thread stacks, allocator slack). Loaded code: every script V8 holds, listed with the inspector\'s `Debugger.enable` in-process (CommonJS, ES modules and code compiled from strings alike), grouped by package or dist/ folder; KiB of source text.',
    '',
    memoryMarkdown(h.memoryIdle),
    '',
    `Method: one run (${fmt(report.durationS)} s; load average ${report.machine.loadavgAtStart[0]} at the start, ${report.machine.loadavgAtEnd[0]} at the end, on ${report.machine.cpus} CPUs shared with other work), ${report.settings.rounds} rounds, baseline and candidate alternately (order flipped each round), ${SECONDS} s autocannon runs (${CONNECTIONS} connections; \`Connection: close\` for the new-connection rows, counting only 2xx/3xx answers) plus a raw-socket client (one connection per request, latency from connect to complete response); ratios are medians of per-round ratios; CPU per request from /proc/<pid>/stat; (d)/(e) use a paced load of ${STEADY.keepAlive} keep-alive connections + ${STEADY.newConnection} new-connection loops at ${STEADY.ratePerLoop} req/s each, where a connection error, reset, close before the response, ${STEADY.timeoutMs / 1000} s timeout or non-2xx is a failed request. Overall: ${report.met ? 'all goals met' : 'not all goals met'}.`,
    '',
  ];
  return lines.join('\n');
}

// Whatever happens, do not outlive 10 minutes (the run takes about 3.5).
const watchdog = setTimeout(() => {
  log('watchdog: still running after 10 minutes, stopping');
  cleanup();
  process.exit(1);
}, 600_000);
watchdog.unref();

/** (e) alone, `BENCH_ROLLING_RUNS` times in a row: every rolling restart's failed requests. */
async function rollingOnly() {
  const runs = Number(process.env.BENCH_ROLLING_RUNS ?? 10);
  if (!(Number.isInteger(runs) && runs > 0)) throw new Error(`BENCH_ROLLING_RUNS must be a positive integer, not ${process.env.BENCH_ROLLING_RUNS}`);
  if (!existsSync(path.join(root, 'dist', 'index.js'))) throw new Error('dist/index.js is missing: run `npm run build` first');
  const started = wallNow();
  tmpDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-'));
  let commit = null;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // not a checkout
  }
  const config = { workers: WORKERS, http: { port: 0, host: HOST }, dataDir: path.join(tmpDir, 'b'), log: { level: 'warn' }, fallback: { redirect: REDIRECT } };
  const b = new Fixture('fleetplane.mjs', { BENCH_FP_CONFIG: JSON.stringify(config) }, { execArgv: ['--max-semi-space-size=2'] });
  await b.ready();
  await cannon({ port: b.info.port, path: '/healthz', close: false, seconds: 1 });
  const results = [];
  for (let run = 1; run <= runs; run++) {
    // Each run starts from a complete fleet, as the first does.
    for (const deadline = Date.now() + 60_000; (await b.command('health')).fleet.active < WORKERS; await sleep(100)) {
      if (Date.now() > deadline) throw new Error(`run ${run}: the fleet was not complete again within 60 s`);
    }
    await sleep(500);
    const result = await rollingRestart(b);
    log(`run ${run}/${runs}: ${result.load.ok} answered, ${result.load.failed} failed, restart ${result.durationMs} ms`);
    results.push(result);
  }
  await b.stop(15_000);
  const failed = results.map((result) => result.load.failed);
  const report = {
    benchmark: 'runtime-rolling',
    date: new Date().toISOString(),
    machine: { node: process.version, cpus: os.availableParallelism(), loadavgAtEnd: os.loadavg().map(round2) },
    commit,
    settings: { workers: WORKERS, runs, steadyLoad: STEADY },
    goal: { metric: 'failed requests in every run', max: GOALS.rollingRestartFailures },
    met: failed.every((count) => count <= GOALS.rollingRestartFailures),
    totals: { answered: results.reduce((sum, result) => sum + result.load.ok, 0), failed: failed.reduce((sum, count) => sum + count, 0) },
    runs: results.map(({ events: _events, ...result }) => ({ ...result, load: { ...result.load, timeline: undefined } })),
    durationS: round2((wallNow() - started) / 1000),
  };
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(path.join(resultsDir, 'runtime-rolling.json'), `${JSON.stringify(report, null, 2)}\n`);
  const lines = [
    '# Runtime: rolling restarts in a row',
    '',
    `${report.date}, commit ${commit ?? '–'}, ${report.machine.cpus} CPUs, Node ${report.machine.node}, load average ${report.machine.loadavgAtEnd.join(' / ')} at the end.`,
    `One server with ${WORKERS} workers; ${runs} rolling restarts (SIGHUP) one after the other, each under its own steady load (${STEADY.keepAlive} keep-alive connections + ${STEADY.newConnection} new-connection loops, ${STEADY.ratePerLoop} req/s each) from ${STEADY.leadMs / 1000} s before the signal to ${STEADY.tailMs / 1000} s after the restart completed.`,
    '',
    '| run | answered | failed | restart ms | reduced capacity ms |',
    '|---:|---:|---:|---:|---:|',
    ...results.map((result, index) => `| ${index + 1} | ${fmt(result.load.ok)} | ${result.load.failed} | ${fmt(result.durationMs)} | ${fmt(result.reducedCapacity.totalMs)} |`),
    `| all | ${fmt(report.totals.answered)} | ${report.totals.failed} | | |`,
    '',
    `Goal: 0 failed requests in every run — ${yes(report.met)}.`,
    '',
  ];
  writeFileSync(path.join(resultsDir, 'runtime-rolling.md'), lines.join('\n'));
  log(`done in ${report.durationS} s: bench/results/runtime-rolling.json, bench/results/runtime-rolling.md`);
}

try {
  if (process.env.BENCH_ONLY === 'rolling') await rollingOnly();
  else if (process.env.BENCH_ONLY !== undefined) throw new Error(`BENCH_ONLY takes "rolling", not ${JSON.stringify(process.env.BENCH_ONLY)}`);
  else await main();
} catch (error) {
  log(`failed: ${error?.stack ?? error}`);
  process.exitCode = 1;
} finally {
  cleanup();
}
