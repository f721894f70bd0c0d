#!/usr/bin/env node
// Authorization and store benchmark (SPEC 7, 8): `authorize.request` per call against a no-op async function
// (warm caches, as in a serving worker), and the embedded store's `findOne` by `_id` and by a unique-indexed
// field against the same lookup as a raw better-sqlite3 prepared statement (plus JSON.parse) on the same file.
// Baseline and candidate alternate within each round; the figures are medians of per-round ratios.
// Then the failed-authentication burst (SPEC 8.7), against real server processes (`workers: 1`, log level info,
// as deployed): a legitimate client measures its p95 latency alone, then while 5,000 requests with made-up
// keys arrive from its own address: with the limit as shipped (429s held 500 ms), with 429s answered at once,
// and with the limit off (`auth.failureLimit.max: 0`, what every wrong key cost before), taking turns, each
// round from a fresh loopback address. Server CPU per refused request is read from /proc (primary and worker).
// Run after `npm run build`: `node bench/authorize.mjs`. Writes bench/results/authorize.json and .md.
// Environment: BENCH_CALLS (default 100000), BENCH_ROUNDS (default 5), BENCH_ORGANIZATIONS (default 200),
// BENCH_KEYS_PER_ORGANIZATION (default 5), BENCH_BURST (default 5000), BENCH_BURST_CONNECTIONS (default 32),
// BENCH_BURST_ROUNDS (default 3), BENCH_QUIET_REQUESTS (default 500, one every 10 ms).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { Authorizer } from '../dist/src/auth/authorize.js';
import { createKey } from '../dist/src/auth/keys.js';
import { createOrganization } from '../dist/src/auth/organizations.js';
import { openStore } from '../dist/src/db/open.js';
import { legitimateClient } from './lib/burst.mjs';
import { Fixture, cpuMs, killAll } from './lib/procs.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const settings = {
  calls: Number(process.env.BENCH_CALLS ?? 100_000),
  rounds: Number(process.env.BENCH_ROUNDS ?? 5),
  organizations: Number(process.env.BENCH_ORGANIZATIONS ?? 200),
  keysPerOrganization: Number(process.env.BENCH_KEYS_PER_ORGANIZATION ?? 5),
  burst: Number(process.env.BENCH_BURST ?? 5_000),
  burstConnections: Number(process.env.BENCH_BURST_CONNECTIONS ?? 32),
  burstRounds: Number(process.env.BENCH_BURST_ROUNDS ?? 3),
  quietRequests: Number(process.env.BENCH_QUIET_REQUESTS ?? 500),
};
const GOAL_STORE_RATIO = 0.5;
const GOAL_BURST_P95_RATIO = 2;

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const round2 = (value) => Math.round(value * 100) / 100;

/** Nanoseconds per call of `call`, awaited one at a time, `calls` times. */
async function timeAsync(call, calls) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i += 1) await call(i);
  return Number(process.hrtime.bigint() - started) / calls;
}

function timeSync(call, calls) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i += 1) call(i);
  return Number(process.hrtime.bigint() - started) / calls;
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-authorize-'));
const serverDirs = [];
const cleanup = () => {
  killAll();
  for (const dir of [dataDir, ...serverDirs]) rmSync(dir, { recursive: true, force: true });
};
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => (cleanup(), process.exit(130)));

const config = { dataDir, db: {}, mongodb: { database: 'fleetplane' } };
const store = await openStore(config);
let target;
for (let i = 0; i < settings.organizations; i += 1) {
  const organization = await createOrganization(store, { name: `org-${i}`, hosts: [`org-${i}.example`, `www.org-${i}.example`] });
  for (let k = 0; k < settings.keysPerOrganization; k += 1) {
    const created = await createKey(store, { organizationId: organization._id, name: `key-${k}`, permissions: { 'object.read': { collection: ['apis', 'workflows'] }, 'metrics.read': true } });
    if (i === Math.floor(settings.organizations / 2) && k === 0) target = { organization, ...created };
  }
}

const authorizer = new Authorizer(store);
const request = { host: `${target.organization.hosts[0]}:8080`, headers: { authorization: `Bearer ${target.key}` }, socket: { remoteAddress: '10.0.0.7', remotePort: 40_000, encrypted: false } };
const envelope = { method: 'object.read', collection: 'apis', filter: { name: 'items' }, limit: 10 };
const noop = async (_request, body) => body;
await authorizer.request(request, envelope);

const raw = new Database(path.join(dataDir, 'fleetplane.db'), { readonly: true });
const rawById = raw.prepare('SELECT doc FROM documents WHERE collection = ? AND id = ?').pluck();
const rawByKey = raw
  .prepare('SELECT d.doc FROM unique_keys u JOIN documents d ON d.collection = u.collection AND d.id = u.doc_id WHERE u.collection = ? AND u.index_name = ? AND u.key = ?')
  .pluck();
const keys = store.collection('keys');
const organizations = store.collection('organizations');
const hostKey = JSON.stringify([target.organization.hosts[0]]);
// Every lookup must find its document, or the figures would time a miss.
if ((await keys.findOne({ _id: target.key_id }))?._id !== target.key_id) throw new Error('findOne by id missed');
if ((await organizations.findOne({ hosts: target.organization.hosts[0] }))?._id !== target.organization._id) throw new Error('findOne by index missed');
if (JSON.parse(rawByKey.get('organizations', 'hosts_1', hostKey))._id !== target.organization._id) throw new Error('raw lookup missed');

const pairs = {
  authorize: {
    baseline: () => timeAsync(() => noop(request, envelope), settings.calls),
    candidate: () => timeAsync(() => authorizer.request(request, envelope), settings.calls),
  },
  findOneById: {
    baseline: async () => timeSync(() => JSON.parse(rawById.get('keys', target.key_id)), settings.calls),
    candidate: () => timeAsync(() => keys.findOne({ _id: target.key_id }), settings.calls),
  },
  findOneByIndex: {
    baseline: async () => timeSync(() => JSON.parse(rawByKey.get('organizations', 'hosts_1', hostKey)), settings.calls),
    candidate: () => timeAsync(() => organizations.findOne({ hosts: target.organization.hosts[0] }), settings.calls),
  },
};

// Warm-up: let the JIT settle on every path before anything is recorded.
for (const pair of Object.values(pairs)) {
  const calls = settings.calls;
  settings.calls = Math.max(1, Math.floor(calls / 5));
  await pair.baseline();
  await pair.candidate();
  settings.calls = calls;
}

const samples = Object.fromEntries(Object.keys(pairs).map((name) => [name, { baselineNs: [], candidateNs: [], ratio: [] }]));
for (let round = 0; round < settings.rounds; round += 1) {
  for (const [name, pair] of Object.entries(pairs)) {
    const order = round % 2 === 0 ? ['baseline', 'candidate'] : ['candidate', 'baseline'];
    const measured = {};
    for (const side of order) measured[side] = await pair[side]();
    const sample = samples[name];
    sample.baselineNs.push(measured.baseline);
    sample.candidateNs.push(measured.candidate);
    // authorize: extra cost per call; store: throughput relative to the raw statement (candidate/baseline speed).
    sample.ratio.push(name === 'authorize' ? measured.candidate / measured.baseline : measured.baseline / measured.candidate);
  }
  console.error(`round ${round + 1}/${settings.rounds} done`);
}
raw.close();
await store.close();

/** A server process over a fresh data directory with one organization on 127.0.0.1, its key and an echo workflow. */
async function startServer(config) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-authorize-server-'));
  serverDirs.push(dir);
  const serverStore = await openStore({ dataDir: dir, db: {}, mongodb: { database: 'fleetplane' } });
  const organization = await createOrganization(serverStore, { name: 'bench', hosts: ['127.0.0.1', 'localhost'] });
  const { key } = await createKey(serverStore, { organizationId: organization._id, name: 'bench', permissions: { workflow: true } });
  await serverStore.forOrganization(organization._id).collection('workflows').insertOne({ name: 'echo', steps: [], output: '${input}' });
  await serverStore.close();
  const fixture = new Fixture('fleetplane.mjs', {
    BENCH_FP_CONFIG: JSON.stringify({ dataDir: dir, workers: 1, http: { port: 0, host: '127.0.0.1' }, log: { level: 'info', requests: false }, ...config }),
  });
  const info = await fixture.ready(60_000);
  return { fixture, key, origin: `http://127.0.0.1:${info.port}`, pids: [info.pid, ...info.workers] };
}

const serverCpuMs = (pids) => pids.reduce((sum, pid) => sum + (cpuMs(pid) ?? 0), 0);
const burstBody = JSON.stringify({ echo: [{ id: 'bench' }] });
const burstPath = '/workflows/echo';
const LEGITIMATE_INTERVAL_MS = 10;

/**
 * One round on one server: the legitimate client alone, then during the burst, both from `address`. The client
 * sends one request every LEGITIMATE_INTERVAL_MS, so the server CPU its requests (and the server's own timers)
 * take per second is known from the quiet phase and can be taken out of the burst's.
 */
async function burstRound(server, address) {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${server.key}` };
  const client = (options) => legitimateClient({ origin: server.origin, localAddress: address, path: burstPath, body: burstBody, headers, intervalMs: LEGITIMATE_INTERVAL_MS, ...options });
  let cpu = serverCpuMs(server.pids);
  const quiet = await client({ count: settings.quietRequests });
  const quietCpuMsPerS = ((serverCpuMs(server.pids) - cpu) * 1000) / quiet.elapsedMs;
  cpu = serverCpuMs(server.pids);
  let done = false;
  const options = { origin: server.origin, localAddress: address, path: burstPath, body: burstBody, total: settings.burst, connections: settings.burstConnections };
  const burst = attacker.command('burst', { options }, 300_000).finally(() => (done = true));
  const during = await client({ until: () => done });
  const attack = await burst;
  const burstCpuMs = serverCpuMs(server.pids) - cpu;
  if (quiet.statuses[200] !== quiet.sent || during.statuses[200] !== during.sent) throw new Error(`the legitimate client was refused: ${JSON.stringify({ quiet: quiet.statuses, during: during.statuses })}`);
  return {
    quietP50Ms: quiet.p50Ms,
    quietP95Ms: quiet.p95Ms,
    burstP50Ms: during.p50Ms,
    burstP95Ms: during.p95Ms,
    p95Ratio: during.p95Ms / quiet.p95Ms,
    legitimateDuringBurst: during.sent,
    serverCpuUsPerRefusal: ((burstCpuMs - (quietCpuMsPerS * during.elapsedMs) / 1000) * 1000) / settings.burst,
    quietServerCpuMsPerS: quietCpuMsPerS,
    statuses: attack.statuses,
    withRetryAfter: attack.retryAfter,
    burstElapsedMs: attack.elapsedMs,
  };
}

/** The shipped defaults; the same limit with 429s answered at once; no limit (every wrong key checked and refused, as before). */
const VARIANTS = {
  held: { config: {}, label: 'limit on (defaults: 429s held 500 ms)' },
  atOnce: { config: { auth: { failureLimit: { delayMs: 0 } } }, label: 'limit on, 429s answered at once (`delayMs: 0`)' },
  off: { config: { auth: { failureLimit: { max: 0 } } }, label: 'limit off (`max: 0`: every wrong key looked up and refused with 403)' },
};
const variants = Object.fromEntries(Object.entries(VARIANTS).map(([name, variant]) => [name, variant.config]));
const attacker = new Fixture('../lib/burst.mjs', { BENCH_BURST_ROLE: 'attacker' });
await attacker.ready();
const servers = {};
for (const [name, config] of Object.entries(variants)) servers[name] = await startServer(config);
// Warm-up: each server's JIT, caches and connections, from an address no round uses.
for (const server of Object.values(servers)) {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${server.key}` };
  await legitimateClient({ origin: server.origin, localAddress: '127.0.0.2', path: burstPath, body: burstBody, headers, count: 2_000 });
}
const burstSamples = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
for (let round = 0; round < settings.burstRounds; round += 1) {
  const names = Object.keys(variants);
  const order = names.map((_, index) => names[(index + round) % names.length]);
  // A fresh address each round: a limited server still remembers the previous rounds' attackers.
  for (const name of order) burstSamples[name].push(await burstRound(servers[name], `127.0.0.${10 + round}`));
  console.error(`burst round ${round + 1}/${settings.burstRounds} done`);
}
await Promise.all([attacker.stop(), ...Object.values(servers).map((server) => server.fixture.stop())]);
cleanup();

const figures = {};
for (const [name, sample] of Object.entries(samples)) {
  const baselineNs = median(sample.baselineNs);
  const candidateNs = median(sample.candidateNs);
  figures[name] = {
    baselineNsPerCall: Math.round(baselineNs),
    candidateNsPerCall: Math.round(candidateNs),
    baselineCallsPerSecond: Math.round(1e9 / baselineNs),
    candidateCallsPerSecond: Math.round(1e9 / candidateNs),
    medianRatio: round2(median(sample.ratio)),
    ratios: sample.ratio.map(round2),
  };
}
figures.authorize.overheadUsPerCall = round2((figures.authorize.candidateNsPerCall - figures.authorize.baselineNsPerCall) / 1000);
for (const [name, rounds] of Object.entries(burstSamples)) {
  const medianOf = (field) => round2(median(rounds.map((sample) => sample[field])));
  figures[`burst_${name}`] = {
    quietP95Ms: medianOf('quietP95Ms'),
    burstP95Ms: medianOf('burstP95Ms'),
    medianP95Ratio: medianOf('p95Ratio'),
    serverCpuUsPerRefusal: medianOf('serverCpuUsPerRefusal'),
    quietServerCpuMsPerS: medianOf('quietServerCpuMsPerS'),
    answered429: rounds.map((sample) => sample.statuses[429] ?? 0),
    rounds: rounds.map((sample) => Object.fromEntries(Object.entries(sample).map(([field, value]) => [field, typeof value === 'number' ? round2(value) : value]))),
  };
}
const held = figures.burst_held;
const goals = {
  findOneById: { goal: `≥ ${GOAL_STORE_RATIO}× raw prepared statement`, met: figures.findOneById.medianRatio >= GOAL_STORE_RATIO },
  findOneByIndex: { goal: `≥ ${GOAL_STORE_RATIO}× raw prepared statement`, met: figures.findOneByIndex.medianRatio >= GOAL_STORE_RATIO },
  burst: { goal: `legitimate p95 during the burst ≤ ${GOAL_BURST_P95_RATIO}× without it`, met: held.medianP95Ratio <= GOAL_BURST_P95_RATIO },
};

const environment = { node: process.version, platform: `${process.platform} ${process.arch}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model };
const result = { date: new Date().toISOString(), environment, settings, figures, goals };
const md = `# Authorization and store benchmark

${settings.calls} calls per measurement, one at a time (awaited), ${settings.rounds} rounds with baseline and candidate alternating; medians of per-round figures. ${settings.organizations} organizations × ${settings.keysPerOrganization} keys in the embedded store. Node ${process.version}, ${environment.cpus} CPUs.

| measurement | baseline | baseline ns/call | candidate ns/call | median ratio | goal | met |
|---|---|---:|---:|---:|---|---|
| \`authorize.request\` (warm cache, key + restriction) | no-op async function | ${figures.authorize.baselineNsPerCall} | ${figures.authorize.candidateNsPerCall} | ${figures.authorize.medianRatio}× the no-op's time (+${figures.authorize.overheadUsPerCall} µs/call) | none set | — |
| \`findOne({ _id })\` | raw prepared statement + JSON.parse | ${figures.findOneById.baselineNsPerCall} | ${figures.findOneById.candidateNsPerCall} | ${figures.findOneById.medianRatio}× raw throughput | ${goals.findOneById.goal} | ${goals.findOneById.met ? 'yes' : 'no'} |
| \`findOne({ hosts })\` (unique multikey index) | raw prepared statement + JSON.parse | ${figures.findOneByIndex.baselineNsPerCall} | ${figures.findOneByIndex.candidateNsPerCall} | ${figures.findOneByIndex.medianRatio}× raw throughput | ${goals.findOneByIndex.goal} | ${goals.findOneByIndex.met ? 'yes' : 'no'} |

Per-round ratios: authorize ${figures.authorize.ratios.join(', ')}; findOne by id ${figures.findOneById.ratios.join(', ')}; findOne by index ${figures.findOneByIndex.ratios.join(', ')}.

## Failed-authentication burst

A legitimate client (one keep-alive connection, one \`POST ${burstPath}\` every ${LEGITIMATE_INTERVAL_MS} ms) measures its latency alone (${settings.quietRequests} requests), then while ${settings.burst} requests with made-up keys arrive from its own address, as fast as ${settings.burstConnections} keep-alive connections carry them, each waiting for its answer (in another process). One server process with one worker per variant, log level info (the denial log is rate-limited in all three); the variants take turns, ${settings.burstRounds} rounds, each round from a fresh loopback address; medians of per-round figures. Server CPU per wrong key is the primary's and the worker's CPU time (from /proc) during the burst, less what the legitimate client and the server's timers take per second when alone, divided by ${settings.burst}.

| server | legitimate p95 alone (ms) | during the burst (ms) | median p95 ratio | goal | met | server CPU µs per wrong key | answered 429 (per round) | burst took (s) |
|---|---:|---:|---:|---|---|---:|---|---:|
${Object.entries(VARIANTS)
  .map(([name, variant]) => {
    const f = figures[`burst_${name}`];
    const goal = name === 'held' ? `${goals.burst.goal} | ${goals.burst.met ? 'yes' : 'no'}` : '— | —';
    // Held, the burst is spread over more than a minute in which the legitimate client's own requests cost more than the attacker's: the difference is noise.
    const cpu = name === 'held' ? '— (see below)' : f.serverCpuUsPerRefusal;
    return `| ${variant.label} | ${f.quietP95Ms} | ${f.burstP95Ms} | ${f.medianP95Ratio}× | ${goal} | ${cpu} | ${f.answered429.join(', ')} of ${settings.burst} | ${round2(median(f.rounds.map((sample) => sample.burstElapsedMs)) / 1000)} |`;
  })
  .join('\n')}

Per-round p95 ratios: ${Object.keys(VARIANTS).map((name) => `${name} ${figures[`burst_${name}`].rounds.map((sample) => sample.p95Ratio).join(', ')}`).join('; ')}. Server CPU µs per wrong key per round: ${Object.keys(VARIANTS).map((name) => `${name} ${figures[`burst_${name}`].rounds.map((sample) => sample.serverCpuUsPerRefusal).join(', ')}`).join('; ')}.

A refusal past the limit takes the same path whether it is held or not (held, it also waits on a timer), so its CPU cost is the at-once row's; held, the burst is spread over more than a minute in which the legitimate client's own requests cost the server more than the attacker's, and the difference is within the noise. Answered at once, even a cheap refusal lets ${settings.burstConnections} connections keep the worker busy; held for 500 ms, they send about ${settings.burstConnections * 2} requests a second.
`;
mkdirSync(path.join(here, 'results'), { recursive: true });
writeFileSync(path.join(here, 'results', 'authorize.json'), `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(path.join(here, 'results', 'authorize.md'), md);
process.stdout.write(md);
process.exitCode = goals.findOneById.met && goals.findOneByIndex.met && goals.burst.met ? 0 : 1;
