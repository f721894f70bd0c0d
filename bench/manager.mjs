#!/usr/bin/env node
// Manager benchmark (SPEC 13).
// 1. Startup: a platform server P (a real process) creates a server with the built-in local provider
//    (`createServer` through `POST /manager`) until its confirmation (`master.status: running`) persists on P,
//    vs a plain `fleetplane start` of the same configuration (the config file the provider wrote, with its own
//    id, data directory and ports, and no manager) until `/readyz` answers 200; alternating, median of
//    BENCH_STARTUP_ROUNDS rounds. Goal: managed / plain ≤ 1.3.
// 2. Mirroring (SPEC 13.2): `state.save()` of a primary with mirroring to a parent on vs off, alternating,
//    median of BENCH_ROUNDS rounds of BENCH_SAVES sequential saves each. The parent is a stand-in in its own
//    process that answers each mirror after BENCH_PARENT_DELAY_MS: a save that waited for it would show it.
//    Goal: on / off ≤ 1.1.
// Run after `npm run build`: `node bench/manager.mjs`. Writes bench/results/manager.json and
// bench/results/manager.md. Environment: BENCH_STARTUP_ROUNDS (default 5; 0 skips part 1), BENCH_SAVES
// (default 500), BENCH_ROUNDS (default 5), BENCH_PARENT_DELAY_MS (default 5), BENCH_GAP_MS (default 2).
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const settings = {
  saves: Number(process.env.BENCH_SAVES ?? 500),
  rounds: Number(process.env.BENCH_ROUNDS ?? 5),
  parentDelayMs: Number(process.env.BENCH_PARENT_DELAY_MS ?? 5),
  gapMs: Number(process.env.BENCH_GAP_MS ?? 2),
  startupRounds: Number(process.env.BENCH_STARTUP_ROUNDS ?? 5),
};
const CLI = path.join(here, '..', 'dist', 'cli', 'main.js');
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

if (process.env.BENCH_MANAGER_ROLE === 'parent') {
  const http = await import('node:http');
  let received = 0;
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received++;
      setTimeout(() => response.end('{"matchedCount":1}'), settings.parentDelayMs);
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
  process.on('message', () => process.send({ received }));
} else {
  await run();
}

async function run() {
  const startup = settings.startupRounds > 0 ? await startupRun() : null;
  const { loadConfig } = await import('../dist/src/config/load.js');
  const { EmbeddedStore } = await import('../dist/src/db/embedded/store.js');
  const { ensureStandardIndexes } = await import('../dist/src/db/open.js');
  const { Manager } = await import('../dist/src/manager/manager.js');
  const { ServerState } = await import('../dist/src/state/state.js');

  const parent = spawn(process.execPath, [fileURLToPath(import.meta.url)], { env: { ...process.env, BENCH_MANAGER_ROLE: 'parent' }, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const { port } = await new Promise((resolve) => parent.stdout.once('data', (chunk) => resolve(JSON.parse(String(chunk)))));
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-manager-'));
  const store = await EmbeddedStore.open(path.join(dir, 'fleetplane.db'));
  await ensureStandardIndexes(store);
  const config = loadConfig({ env: {}, object: { server: { cluster: 'bench' }, manager: { organizationId: 'platform', host: `http://127.0.0.1:${port}`, apiKey: 'fpk_benchmarkkey00001.bench-secret' } } }).config;
  const warnings = [];
  const log = { info() {}, warn: (details) => warnings.push(details), error() {} };
  const manager = new Manager({ config: config.manager, connection: { organization_id: 'platform', host: config.manager.host }, log });
  const host = { id: 'bench-server', config, log, status: 'ready', db: store, primaryRuntime: { status: 'ready' } };
  const states = { off: new ServerState(host), on: new ServerState({ ...host, manager }) };

  // Only the save is timed; between saves the process idles `BENCH_GAP_MS`, as a serving one does between
  // status changes, and the mirrors' I/O runs there (a save that waited for its mirror would be timed).
  const time = async (state) => {
    let total = 0n;
    for (let index = 0; index < settings.saves; index++) {
      const start = process.hrtime.bigint();
      await state.save();
      total += process.hrtime.bigint() - start;
      await new Promise((resolve) => setTimeout(resolve, settings.gapMs));
    }
    return Number(total) / 1e6 / settings.saves;
  };
  await time(states.off);
  await time(states.on);
  const samples = { off: [], on: [] };
  for (let round = 0; round < settings.rounds; round++) {
    for (const mode of round % 2 === 0 ? ['off', 'on'] : ['on', 'off']) samples[mode].push(await time(states[mode]));
  }
  const expected = settings.saves * (settings.rounds + 1);
  const deadline = Date.now() + 30_000;
  let received = 0;
  while (Date.now() < deadline) {
    received = await new Promise((resolve) => (parent.once('message', (message) => resolve(message.received)), parent.send('count')));
    if (received >= expected) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  parent.kill();
  await manager.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });

  const result = {
    startup,
    settings,
    node: process.version,
    cpus: os.availableParallelism(),
    loadAverage: os.loadavg().map((value) => Number(value.toFixed(2))),
    msPerSave: { off: median(samples.off), on: median(samples.on) },
    samples,
    ratio: median(samples.on) / median(samples.off),
    mirrorsReceived: received,
    mirrorsExpected: expected,
    warnings: warnings.length,
    warningCodes: [...new Set(warnings.map((warning) => warning.code))],
  };
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(path.join(here, 'results', 'manager.json'), `${JSON.stringify(result, null, 2)}\n`);
  const md = [
    '# Manager benchmark',
    '',
    ...(startup ? startupMarkdown(startup) : []),
    '## Mirroring',
    '',
    `\`state.save()\` of a primary on the embedded store, ${settings.saves} sequential saves per round, ${settings.gapMs} ms apart (only the save is timed), median of ${settings.rounds} rounds (order alternated); the parent stand-in answers each mirror after ${settings.parentDelayMs} ms, in its own process. Node ${process.version}, ${result.cpus} CPUs, load average ${result.loadAverage.join(' / ')}.`,
    '',
    '| mirroring | ms per save |',
    '|---|---:|',
    `| off | ${result.msPerSave.off.toFixed(3)} |`,
    `| on | ${result.msPerSave.on.toFixed(3)} |`,
    '',
    `Ratio on / off: **${result.ratio.toFixed(2)}** (goal ≤ 1.1). Mirrors received by the parent: ${received} of ${expected} (each save mirrored once); warnings: ${warnings.length}.`,
    '',
  ].join('\n');
  writeFileSync(path.join(here, 'results', 'manager.md'), md);
  process.stdout.write(md);
}

/** A port free on 127.0.0.1 right now. */
async function freePort() {
  const net = await import('node:net');
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts the CLI on a config file; its log goes to a file next to it. */
function startCli(configFile) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('FLEETPLANE_')));
  const log = openSync(path.join(path.dirname(configFile), 'server.log'), 'a');
  const child = spawn(process.execPath, [CLI, 'start'], { env: { ...env, FLEETPLANE_CONFIG: configFile }, detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return { child, exited, stop: () => (process.kill(-child.pid, 'SIGTERM'), exited) };
}

/** Polls `probe` every 10 ms until it answers true; throws after `timeoutMs`. */
async function until(what, probe, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function ready(port) {
  return fetch(`http://127.0.0.1:${port}/readyz`).then((reply) => reply.status === 200);
}

/** Part 1: `createServer` → confirmed on P, vs a plain start of the same configuration → ready. */
async function startupRun() {
  const { createKey } = await import('../dist/src/auth/keys.js');
  const { createOrganization } = await import('../dist/src/auth/organizations.js');
  const { EmbeddedStore } = await import('../dist/src/db/embedded/store.js');
  const { ensureStandardIndexes } = await import('../dist/src/db/open.js');
  const root = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-startup-'));
  const parentDb = path.join(root, 'parent', 'fleetplane.db');
  const tenantDb = path.join(root, 'tenant.db');
  mkdirSync(path.dirname(parentDb), { recursive: true });
  const parentStore = await EmbeddedStore.open(parentDb);
  await ensureStandardIndexes(parentStore);
  const platform = await createOrganization(parentStore, { name: 'platform', hosts: ['localhost', '127.0.0.1'] });
  const acme = await createOrganization(parentStore, { name: 'acme', hosts: ['acme.test'] });
  const { key } = await createKey(parentStore, { organizationId: platform._id, name: 'admin', admin: true });
  const tenantStore = await EmbeddedStore.open(tenantDb);
  await ensureStandardIndexes(tenantStore);
  await tenantStore.collection('organizations').insertOne({ ...acme, platform: true });

  const parentPort = await freePort();
  const localRoot = path.join(root, 'local');
  const parentConfig = path.join(root, 'parent', 'fleetplane.config.json');
  writeFileSync(parentConfig, JSON.stringify({
    dataDir: path.dirname(parentDb),
    workers: 1,
    log: { level: 'warn' },
    server: { id: 'bench-platform', cluster: 'platform', publicUrl: `http://127.0.0.1:${parentPort}` },
    http: { port: parentPort, host: '127.0.0.1' },
    mesh: { enabled: false },
    manager: { startupTimeoutMs: 120_000, cleanupDelayMs: 1_000, localRoot, activation: false },
  }), { mode: 0o600 });
  const parent = startCli(parentConfig);
  const samples = { managed: [], plain: [] };
  try {
    await until('P to be ready', () => ready(parentPort));
    const post = (pathname, body) => fetch(`http://127.0.0.1:${parentPort}${pathname}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, apikey: key }) }).then(async (reply) => {
      if (reply.status !== 200) throw new Error(`${pathname} answered ${reply.status}: ${await reply.text()}`);
      return reply.json();
    });
    const cluster = { name: 'acme', manager: { organization_id: platform._id, host: `http://127.0.0.1:${parentPort}`, for: acme._id }, initialDeployment: { cloud: 'local', workers: 1, logLevel: 'warn' }, store: { path: tenantDb } };
    const clusterId = (await post('/crud', { method: 'object.create', collection: 'clusters', documents: [cluster] })).insertedIds[0];
    let lastConfig;

    const since = (start) => () => Number(process.hrtime.bigint() - start) / 1e6;
    // Each start is timed to two events: its inventory record saying `running` (on P for the managed one,
    // where that is the confirmation; in the cluster's store for the plain one) and `/readyz` answering 200.
    const managed = async () => {
      const elapsed = since(process.hrtime.bigint());
      const { server_id: serverId, instanceId } = await post('/manager', { method: 'createServer', cluster: clusterId });
      lastConfig = JSON.parse(readFileSync(path.join(localRoot, instanceId, 'fleetplane.config.json'), 'utf8'));
      const [record, readyMs] = await Promise.all([
        until('the confirmation on P', async () => (await parentStore.collection('servers').findOne({ _id: serverId }))?.master?.status === 'running').then(elapsed),
        until('the managed server to be ready', () => ready(lastConfig.http.port)).then(elapsed),
      ]);
      await post('/manager', { method: 'terminateServer', cluster: clusterId, server_id: serverId });
      return { record, ready: readyMs };
    };
    // The same configuration as the provider wrote it, as a separate unmanaged server: its own id, data
    // directory and ports.
    const plain = async () => {
      const dataDir = mkdtempSync(path.join(root, 'plain-'));
      const [httpPort, meshPort] = [await freePort(), await freePort()];
      const { manager: _manager, ...rest } = lastConfig;
      const config = { ...rest, dataDir, server: { ...rest.server, id: path.basename(dataDir), publicUrl: `http://127.0.0.1:${httpPort}` }, http: { ...rest.http, port: httpPort }, mesh: { ...rest.mesh, port: meshPort, url: `ws://127.0.0.1:${meshPort}` } };
      const configFile = path.join(dataDir, 'fleetplane.config.json');
      writeFileSync(configFile, JSON.stringify(config), { mode: 0o600 });
      const elapsed = since(process.hrtime.bigint());
      const server = startCli(configFile);
      const [record, readyMs] = await Promise.all([
        until('the plain record to say running', async () => (await tenantStore.collection('servers').findOne({ _id: config.server.id }))?.master?.status === 'running').then(elapsed),
        until('the plain start to be ready', () => ready(httpPort)).then(elapsed),
      ]);
      await server.stop();
      return { record, ready: readyMs };
    };
    // One of each unmeasured: the file cache warm, and a config for the first plain start.
    await managed();
    await plain();
    for (let round = 0; round < settings.startupRounds; round++) {
      for (const mode of round % 2 === 0 ? ['plain', 'managed'] : ['managed', 'plain']) samples[mode].push(await (mode === 'managed' ? managed() : plain()));
    }
  } finally {
    await parent.stop();
    await parentStore.close();
    await tenantStore.close();
    rmSync(root, { recursive: true, force: true });
  }
  const medians = (mode, event) => median(samples[mode].map((sample) => sample[event]));
  const ms = { managed: { confirmed: medians('managed', 'record'), ready: medians('managed', 'ready') }, plain: { recordRunning: medians('plain', 'record'), ready: medians('plain', 'ready') } };
  return {
    rounds: settings.startupRounds,
    ms,
    samples,
    // The issue's figure: createServer → confirmed against a plain start → ready; and like for like.
    ratio: ms.managed.confirmed / ms.plain.ready,
    ratioReady: ms.managed.ready / ms.plain.ready,
    ratioRecord: ms.managed.confirmed / ms.plain.recordRunning,
  };
}

function startupMarkdown(startup) {
  return [
    '## Startup',
    '',
    `A platform server (one worker) creates a server with the built-in local provider (\`createServer\` through \`POST /manager\`), vs a plain \`fleetplane start\` of the same configuration (the provider's config file with its own id, data directory and ports, and no manager). Each is timed to its inventory record saying \`running\` (for the managed one: its confirmation persisted on the platform) and to its \`/readyz\` answering 200. Median of ${startup.rounds} rounds, order alternated, after one unmeasured round of each. Load average at the end ${os.loadavg().map((value) => value.toFixed(1)).join(' / ')}.`,
    '',
    '| start | record `running` (managed: confirmed on P) ms | `/readyz` 200 ms |',
    '|---|---:|---:|',
    `| plain \`fleetplane start\` | ${startup.ms.plain.recordRunning.toFixed(0)} | ${startup.ms.plain.ready.toFixed(0)} |`,
    `| managed (\`createServer\` →) | ${startup.ms.managed.confirmed.toFixed(0)} | ${startup.ms.managed.ready.toFixed(0)} |`,
    '',
    `Managed confirmed / plain ready: **${startup.ratio.toFixed(2)}** (goal ≤ 1.3). Like for like: ready / ready ${startup.ratioReady.toFixed(2)}, record / record ${startup.ratioRecord.toFixed(2)}.`,
    '',
    `Samples (ms, record / ready): plain ${startup.samples.plain.map((sample) => `${sample.record.toFixed(0)}/${sample.ready.toFixed(0)}`).join(', ')}; managed ${startup.samples.managed.map((sample) => `${sample.record.toFixed(0)}/${sample.ready.toFixed(0)}`).join(', ')}.`,
    '',
  ];
}
