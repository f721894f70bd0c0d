#!/usr/bin/env node
// Manager benchmark (SPEC 13.2): `state.save()` of a primary with mirroring to a parent on vs off, alternating,
// median of BENCH_ROUNDS rounds of BENCH_SAVES sequential saves each. The parent is a stand-in in its own
// process that answers each mirror after BENCH_PARENT_DELAY_MS: a save that waited for it would show it.
// Goal: on / off ≤ 1.1. Run after `npm run build`: `node bench/manager.mjs`. Writes bench/results/manager.json
// and bench/results/manager.md. Environment: BENCH_SAVES (default 500), BENCH_ROUNDS (default 5),
// BENCH_PARENT_DELAY_MS (default 5), BENCH_GAP_MS (default 2).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const settings = {
  saves: Number(process.env.BENCH_SAVES ?? 500),
  rounds: Number(process.env.BENCH_ROUNDS ?? 5),
  parentDelayMs: Number(process.env.BENCH_PARENT_DELAY_MS ?? 5),
  gapMs: Number(process.env.BENCH_GAP_MS ?? 2),
};

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

  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const result = {
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
