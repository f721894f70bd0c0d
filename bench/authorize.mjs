#!/usr/bin/env node
// Authorization and store benchmark (SPEC 7, 8): `authorize.request` per call against a no-op async function
// (warm caches, as in a serving worker), and the embedded store's `findOne` by `_id` and by a unique-indexed
// field against the same lookup as a raw better-sqlite3 prepared statement (plus JSON.parse) on the same file.
// Baseline and candidate alternate within each round; the figures are medians of per-round ratios.
// Run after `npm run build`: `node bench/authorize.mjs`. Writes bench/results/authorize.json and .md.
// Environment: BENCH_CALLS (default 100000), BENCH_ROUNDS (default 5), BENCH_ORGANIZATIONS (default 200),
// BENCH_KEYS_PER_ORGANIZATION (default 5).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { Authorizer } from '../dist/src/auth/authorize.js';
import { createKey } from '../dist/src/auth/keys.js';
import { createOrganization } from '../dist/src/auth/organizations.js';
import { openStore } from '../dist/src/db/open.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const settings = {
  calls: Number(process.env.BENCH_CALLS ?? 100_000),
  rounds: Number(process.env.BENCH_ROUNDS ?? 5),
  organizations: Number(process.env.BENCH_ORGANIZATIONS ?? 200),
  keysPerOrganization: Number(process.env.BENCH_KEYS_PER_ORGANIZATION ?? 5),
};
const GOAL_STORE_RATIO = 0.5;

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
const cleanup = () => rmSync(dataDir, { recursive: true, force: true });
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
const goals = {
  findOneById: { goal: `≥ ${GOAL_STORE_RATIO}× raw prepared statement`, met: figures.findOneById.medianRatio >= GOAL_STORE_RATIO },
  findOneByIndex: { goal: `≥ ${GOAL_STORE_RATIO}× raw prepared statement`, met: figures.findOneByIndex.medianRatio >= GOAL_STORE_RATIO },
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
`;
mkdirSync(path.join(here, 'results'), { recursive: true });
writeFileSync(path.join(here, 'results', 'authorize.json'), `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(path.join(here, 'results', 'authorize.md'), md);
process.stdout.write(md);
process.exitCode = goals.findOneById.met && goals.findOneByIndex.met ? 0 : 1;
