#!/usr/bin/env node
// A soak: three servers (2 workers each) sharing one embedded store file and a mesh, under mixed load for
// a long time, with a rolling restart of one server every BENCH_SOAK_ROLL_S. Every 10 s the RSS and the open
// file descriptors of every process (each primary and its workers) are sampled; at the end a least-squares
// line per process gives its slope in MiB/hour and fds/hour. Workers are replaced by the rolling restarts, so
// a worker's series is one slot of one server (whatever pid fills it), and the fit is over the samples taken
// at least 30 s after that slot's last restart settled. Event-loop lag p99 per slot comes from the workers'
// heartbeats (`worker:health`).
//
// Load, paced: CRUD envelopes (object.create / object.read / object.delete over POST /crud, the collection kept
// at about 2,000 documents), GET /whoami on fresh and keep-alive connections, WebSocket churn on /ws (open,
// authorize, close), IPC and mesh broadcasts (an envelope to every process of every server through
// /fixture/request).
//
// Usage: npm run build && node bench/soak.mjs      Environment: BENCH_SOAK_S (default 900), BENCH_SOAK_ROLL_S
// (default 180), BENCH_SOAK_WARMUP_S (default 600: the primaries' settled fit starts after it). Writes
// bench/results/soak.{json,md}.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(here);
const DURATION_S = Number(process.env.BENCH_SOAK_S ?? 900);
const ROLL_S = Number(process.env.BENCH_SOAK_ROLL_S ?? 180);
const SAMPLE_MS = 10_000;
const KEEP_DOCUMENTS = 2_000;
const SETTLE_MS = 30_000;
// The primaries keep the dashboard's history (the last 10 minutes of samples per worker): their memory grows
// while that window fills. Their settled fit starts after it.
const WARMUP_S = Number(process.env.BENCH_SOAK_WARMUP_S ?? 600);
const log = (message) => console.error(`[soak] ${message}`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const { EmbeddedStore } = await import(path.join(root, 'dist/src/db/embedded/store.js'));
const { ensureStandardIndexes } = await import(path.join(root, 'dist/src/db/open.js'));
const { createOrganization } = await import(path.join(root, 'dist/src/auth/organizations.js'));
const { createKey } = await import(path.join(root, 'dist/src/auth/keys.js'));

const tmp = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-soak-'));
const dbPath = path.join(tmp, 'shared.db');
const store = await EmbeddedStore.open(dbPath);
await ensureStandardIndexes(store);
const organization = await createOrganization(store, { name: 'soak', hosts: ['localhost'] });
const key = (await createKey(store, { organizationId: organization._id, name: 'admin', admin: true })).key;
await store.close();

/** One server of the mesh fixture; events on stdout, commands on stdin. */
function startServer(index) {
  const id = `soak-${index}`;
  const config = {
    dataDir: path.join(tmp, id),
    db: { path: dbPath },
    server: { id, cluster: 'soak' },
    http: { port: 0, host: '127.0.0.1' },
    workers: 2,
    log: { level: 'warn' },
    mesh: { port: 0, host: '127.0.0.1', secret: 'soak-mesh-secret-0123456789abcdef', pingIntervalMs: 2_000, pongTimeoutMs: 5_000 },
  };
  mkdirSync(config.dataDir, { recursive: true });
  const child = spawn(process.execPath, [path.join(root, 'test/fixtures/mesh-server.mjs')], { detached: true, stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, FIXTURE_CONFIG: JSON.stringify(config) } });
  const server = { id, child, events: [], port: 0, restartsAt: [] };
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      server.events.push(JSON.parse(line));
    } catch {
      // a stray line
    }
  });
  return server;
}

async function until(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function call({ port, method = 'GET', path: pathname, body, agent = false, headers = {} }) {
  return new Promise((resolve) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const all = { host: 'localhost', ...headers };
    if (text !== undefined) Object.assign(all, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), authorization: `Bearer ${key}` });
    const request = http.request({ host: '127.0.0.1', port, method, path: pathname, headers: all, agent, timeout: 10_000 }, (response) => {
      let data = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (data += chunk));
      response.on('end', () => resolve({ status: response.statusCode, body: data }));
    });
    request.on('timeout', () => request.destroy(new Error('timeout')));
    request.on('error', (error) => resolve({ status: 0, body: error.message }));
    request.end(text);
  });
}

const servers = [0, 1, 2].map(startServer);
const stopAll = () => servers.forEach((server) => {
  try {
    process.kill(-server.child.pid, 'SIGKILL');
  } catch {
    // gone
  }
});
process.on('exit', stopAll);
process.on('SIGINT', () => process.exit(130));

for (const server of servers) {
  await until(() => server.events.some((event) => event.event === 'started'), 60_000, `${server.id} to start`);
  server.port = server.events.find((event) => event.event === 'started').port;
  await until(() => server.events.filter((event) => event.event === 'worker:ready').length >= 2, 60_000, `${server.id}'s workers`);
}
log(`3 servers ready on ports ${servers.map((server) => server.port).join(', ')}; soaking ${DURATION_S} s, a rolling restart every ${ROLL_S} s`);

// ---- load
const counts = { requests: 0, failed: 0, failedInRestart: 0, byKind: {} };
const failures = [];
const restartWindows = [];
const inRestart = (at) => restartWindows.some(([from, to]) => at >= from && at <= (to ?? Infinity) + 1_000);
function record(kind, ok, detail, startedAt) {
  counts.requests++;
  const entry = (counts.byKind[kind] ??= { requests: 0, failed: 0 });
  entry.requests++;
  if (ok) return;
  if (inRestart(startedAt)) counts.failedInRestart++;
  else counts.failed++;
  entry.failed++;
  if (failures.length < 50) failures.push({ kind, detail: String(detail).slice(0, 200), at: startedAt });
}
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 4 });
let sequence = 0;
const loaders = [
  [50, async (server) => {
    const name = `doc-${++sequence}`;
    const answer = await call({ port: server.port, method: 'POST', path: '/crud', body: { method: 'object.create', collection: 'soak', documents: [{ name, at: Date.now() }] } });
    return [answer.status === 200, answer.status];
  }],
  [50, async (server) => {
    const answer = await call({ port: server.port, method: 'POST', path: '/crud', body: { method: 'object.read', collection: 'soak', filter: { name: `doc-${Math.max(1, sequence - 5)}` } } });
    return [answer.status === 200, answer.status];
  }],
  // The collection stays about KEEP_DOCUMENTS long: a filtered read scans the embedded store's collection, so a
  // collection that grows for the whole soak would measure its own growth (at 45,000 documents each read took a
  // worker 0.2-1 s), not the processes'.
  [50, async (server) => {
    if (sequence <= KEEP_DOCUMENTS) return undefined; // nothing to delete yet: no request
    const answer = await call({ port: server.port, method: 'POST', path: '/crud', body: { method: 'object.delete', collection: 'soak', filter: { name: `doc-${sequence - KEEP_DOCUMENTS}` } } });
    return [answer.status === 200, answer.status];
  }],
  [25, async (server) => {
    const answer = await call({ port: server.port, path: '/whoami' });
    return [answer.status === 200, answer.status];
  }],
  [25, async (server) => {
    const answer = await call({ port: server.port, path: '/whoami', agent: keepAlive });
    return [answer.status === 200, answer.status];
  }],
  [200, (server) =>
    new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${server.port}/ws`, { headers: { authorization: `Bearer ${key}`, host: 'localhost' }, handshakeTimeout: 10_000 });
      ws.on('open', () => setTimeout(() => ws.close(1000), 200));
      ws.on('close', (code) => resolve([code === 1000 || code === 1005, `close ${code}`]));
      ws.on('error', (error) => resolve([false, error.message]));
    })],
  [500, async (server) => {
    // IPC and mesh: an envelope to every process of every server, answered by each.
    const answer = await call({ port: server.port, method: 'POST', path: '/fixture/request', body: { envelope: { method: 'probe', broadcast: true, data: {} }, timeoutMs: 5_000 } });
    if (answer.status !== 200) return [false, answer.status];
    const missing = JSON.parse(answer.body).result?.missing ?? [];
    return [missing.length === 0, `missing ${JSON.stringify(missing)}`];
  }],
];
let turn = 0;
const timers = loaders.map(([everyMs, run], index) =>
  setInterval(() => {
    const server = servers[(turn++ + index) % servers.length];
    const startedAt = Date.now();
    void run(server).then((outcome) => outcome && record(`${index}`, outcome[0], outcome[1], startedAt), (error) => record(`${index}`, false, error.message, startedAt));
  }, everyMs),
);
const kindNames = ['crud create', 'crud read', 'crud delete', 'whoami (new connection)', 'whoami (keep-alive)', 'websocket churn', 'broadcast envelope (IPC + mesh)'];

// ---- rolling restarts
let rollIndex = 0;
const roller = setInterval(() => {
  const server = servers[rollIndex++ % servers.length];
  const since = server.events.length;
  const window = [Date.now(), undefined];
  restartWindows.push(window);
  server.restartsAt.push(Date.now());
  process.kill(server.child.pid, 'SIGHUP');
  void until(() => server.events.slice(since).filter((event) => event.event === 'worker:ready').length >= 2, 120_000, 'restart').then(
    () => (window[1] = Date.now()),
    () => (window[1] = Date.now()),
  );
}, ROLL_S * 1_000);

// ---- sampling
const childrenOf = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
const fds = (pid) => readdirSync(`/proc/${pid}/fd`).length;
const samples = [];
/** Each process's V8 heap in use (MiB) by worker number (0: the primary), from the server's /metrics. */
async function heapsOf(server) {
  const answer = await call({ port: server.port, path: '/metrics', headers: { authorization: `Bearer ${key}` } });
  const heaps = new Map();
  if (answer.status !== 200) return heaps;
  for (const match of answer.body.matchAll(/^fleetplane_nodejs_heap_size_used_bytes\{[^}]*worker="(\d+)"[^}]*\} ([\d.e+]+)$/gm)) heaps.set(Number(match[1]), Number(match[2]) / 1_048_576);
  return heaps;
}
async function sample() {
  const at = Date.now();
  for (const server of servers) {
    const heaps = await heapsOf(server).catch(() => new Map());
    const processes = [{ name: `${server.id}/primary`, pid: server.child.pid, slot: 0 }];
    const workers = server.events.filter((event) => event.event === 'worker:ready');
    const slotOf = new Map(workers.map((event) => [event.pid, event.workerId]));
    for (const pid of childrenOf(server.child.pid)) if (slotOf.has(pid)) processes.push({ name: `${server.id}/worker ${slotOf.get(pid)}`, pid, slot: slotOf.get(pid) });
    for (const { name, pid, slot } of processes) {
      try {
        const heap = heaps.get(slot);
        samples.push({ at, process: name, pid, rssMiB: Number(rssMiB(pid).toFixed(2)), heapMiB: heap === undefined ? null : Number(heap.toFixed(2)), fds: fds(pid) });
      } catch {
        // the process left between the listing and the read
      }
    }
  }
}
await sample();
const sampler = setInterval(() => void sample(), SAMPLE_MS);
const started = Date.now();
while (Date.now() - started < DURATION_S * 1_000) {
  await sleep(5_000);
  log(`${Math.round((Date.now() - started) / 1000)} s: ${counts.requests} requests, ${counts.failed} failed outside restarts, ${counts.failedInRestart} inside`);
}
clearInterval(roller);
clearInterval(sampler);
timers.forEach(clearInterval);
await sleep(3_000);
await sample();

// ---- fit
function fit(points) {
  if (points.length < 3) return undefined;
  const n = points.length;
  const mx = points.reduce((sum, [x]) => sum + x, 0) / n;
  const my = points.reduce((sum, [, y]) => sum + y, 0) / n;
  const sxx = points.reduce((sum, [x]) => sum + (x - mx) ** 2, 0);
  const sxy = points.reduce((sum, [x, y]) => sum + (x - mx) * (y - my), 0);
  const slope = sxx === 0 ? 0 : sxy / sxx;
  const residual = points.reduce((sum, [x, y]) => sum + (y - (my + slope * (x - mx))) ** 2, 0);
  // Standard error of the slope: a slope within about 2 of it is noise.
  const stderr = n > 2 && sxx > 0 ? Math.sqrt(residual / (n - 2) / sxx) : 0;
  return { slope, stderr, n };
}
const perHour = 3_600_000;
const lastSettledRestart = (name) => {
  const server = servers.find((each) => name.startsWith(`${each.id}/`));
  const windows = restartWindows.filter(([from]) => server.restartsAt.includes(from));
  return Math.max(0, ...windows.map(([, to]) => to ?? Infinity));
};
const processes = [...new Set(samples.map((entry) => entry.process))].sort();
const fits = processes.map((name) => {
  const own = samples.filter((entry) => entry.process === name);
  const primary = name.endsWith('/primary');
  const from = primary ? started + WARMUP_S * 1_000 : lastSettledRestart(name) + SETTLE_MS;
  const settled = own.filter((entry) => entry.at >= from);
  const rss = fit(settled.map((entry) => [entry.at, entry.rssMiB]));
  const heap = fit(settled.filter((entry) => entry.heapMiB !== null).map((entry) => [entry.at, entry.heapMiB]));
  const fd = fit(settled.map((entry) => [entry.at, entry.fds]));
  // For a primary, the whole run after its start too: what the warm-up adds.
  const whole = primary ? fit(own.filter((entry) => entry.at >= started + SETTLE_MS).map((entry) => [entry.at, entry.rssMiB])) : undefined;
  // Each worker's heartbeats (every few seconds) carry its event-loop lag.
  const [serverId, slot] = [name.split('/')[0], Number(name.split(' ')[1])];
  const heartbeats = servers.find((each) => each.id === serverId).events.filter((event) => event.event === 'worker:health' && event.workerId === slot);
  const lags = heartbeats.map((event) => event.eventLoopLagMs).filter((value) => typeof value === 'number').sort((a, b) => a - b);
  return {
    process: name,
    samples: own.length,
    fittedSamples: settled.length,
    rssMiBPerHour: rss && Number((rss.slope * perHour).toFixed(2)),
    rssStderrMiBPerHour: rss && Number((rss.stderr * perHour).toFixed(2)),
    heapMiBPerHour: heap && Number((heap.slope * perHour).toFixed(2)),
    heapStderrMiBPerHour: heap && Number((heap.stderr * perHour).toFixed(2)),
    wholeRunRssMiBPerHour: whole && Number((whole.slope * perHour).toFixed(2)),
    wholeRunRssStderrMiBPerHour: whole && Number((whole.stderr * perHour).toFixed(2)),
    rssFirstLastMiB: settled.length ? [settled[0].rssMiB, settled.at(-1).rssMiB] : null,
    fdsPerHour: fd && Number((fd.slope * perHour).toFixed(2)),
    fdsStderrPerHour: fd && Number((fd.stderr * perHour).toFixed(2)),
    lagP99Ms: lags.length ? Number(lags[Math.min(lags.length - 1, Math.floor(lags.length * 0.99))].toFixed(1)) : null,
    heartbeats: lags.length,
  };
});

const result = {
  at: new Date().toISOString(),
  durationS: DURATION_S,
  rollEveryS: ROLL_S,
  warmupS: WARMUP_S,
  host: { cpus: os.cpus().length, node: process.version },
  requests: counts.requests,
  failedOutsideRestarts: counts.failed,
  failedDuringRestarts: counts.failedInRestart,
  byKind: Object.fromEntries(Object.entries(counts.byKind).map(([index, value]) => [kindNames[index], value])),
  restarts: restartWindows.map(([from, to]) => ({ at: new Date(from).toISOString(), tookMs: to === undefined ? null : to - from })),
  fits,
  failures,
  samples,
};
mkdirSync(path.join(here, 'results'), { recursive: true });
writeFileSync(path.join(here, 'results', 'soak.json'), `${JSON.stringify(result, null, 2)}\n`);
const pm = (value, error) => `${value ?? '—'} ± ${error ?? '—'}`;
const table = fits.map(
  (entry) =>
    `| ${entry.process} | ${entry.fittedSamples}/${entry.samples} | ${entry.rssFirstLastMiB?.join(' → ') ?? '—'} | ${pm(entry.rssMiBPerHour, entry.rssStderrMiBPerHour)} | ${pm(entry.heapMiBPerHour, entry.heapStderrMiBPerHour)} | ${pm(entry.fdsPerHour, entry.fdsStderrPerHour)} | ${entry.wholeRunRssMiBPerHour === undefined ? '' : pm(entry.wholeRunRssMiBPerHour, entry.wholeRunRssStderrMiBPerHour)} | ${entry.lagP99Ms ?? '—'} |`,
);
writeFileSync(
  path.join(here, 'results', 'soak.md'),
  [
    `# Soak (${DURATION_S} s, a rolling restart every ${ROLL_S} s, ${os.cpus().length} CPUs, Node ${process.version})`,
    '',
    `${counts.requests} requests: ${counts.failed} failed outside the restarts, ${counts.failedInRestart} during a restart (+1 s).`,
    '',
    '| load | requests | failed |',
    '|---|---|---|',
    ...Object.entries(result.byKind).map(([name, value]) => `| ${name} | ${value.requests} | ${value.failed} |`),
    '',
    `Least-squares slope per process (± one standard error; a slope within two of it is noise): a worker over the samples taken 30 s after its slot's last restart settled, a primary over the samples after the first ${WARMUP_S} s (the dashboard history's window filling); "whole run" is a primary's fit from 30 s after start. V8 heap in use from each server's /metrics.`,
    '',
    '| process | samples fitted/all | RSS first → last MiB | RSS MiB/hour | V8 heap MiB/hour | fds/hour | RSS MiB/hour, whole run | event-loop lag p99 ms |',
    '|---|---|---|---|---|---|---|---|',
    ...table,
    '',
  ].join('\n'),
);
log(`wrote bench/results/soak.json and soak.md: ${counts.failed} failed outside restarts`);
stopAll();
rmSync(tmp, { recursive: true, force: true });
process.exit(0);
