#!/usr/bin/env node
// Storage benchmark (SPEC 4): `storage.set` in one worker until the change is seen in every worker — p50/p99
// latency and sets/s, one at a time and with many in flight — against two baselines measured in the same run
// on the same processes: a raw `process.send` ping-pong primary ↔ worker, and a raw relay (worker →
// primary → every worker, plain `process.send`, no storage). Run after `npm run build`:
// `node bench/storage.mjs`. Writes bench/results/storage.json and bench/results/storage.md.
//
// This file is both the runner and (with BENCH_STORAGE_ROLE=server) the server it starts, in its own process
// group, killed at the end. Cross-process latencies use process.hrtime, the host's monotonic clock.
// Environment: BENCH_WORKERS (default 3), BENCH_SEQUENTIAL (default 2000), BENCH_PIPELINED (default 10000),
// BENCH_IN_FLIGHT (default 64), BENCH_ROUNDS (default 3).
import cluster from 'node:cluster';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MARK = '@@BENCH ';
const here = path.dirname(fileURLToPath(import.meta.url));
const settings = {
  workers: Number(process.env.BENCH_WORKERS ?? 3),
  sequential: Number(process.env.BENCH_SEQUENTIAL ?? 2_000),
  pipelined: Number(process.env.BENCH_PIPELINED ?? 10_000),
  inFlight: Number(process.env.BENCH_IN_FLIGHT ?? 64),
  rounds: Number(process.env.BENCH_ROUNDS ?? 3),
};
const nowUs = () => Number(process.hrtime.bigint() / 1_000n);
const emit = (record) => process.stdout.write(`${MARK}${JSON.stringify(record)}\n`);

// ---------------------------------------------------------------- server (primary and workers)

async function serve() {
  const { Fleetplane } = await import('../dist/index.js');
  const server = await Fleetplane.init(JSON.parse(process.env.BENCH_CONFIG), { handleSignals: true });
  if (cluster.isWorker) serveWorker(server.storage);
  else servePrimary(server);
}

function serveWorker(storage) {
  const runs = new Map();
  const waitingForOwn = new Map();
  const markSeen = (run, index) => {
    const record = runs.get(run);
    if (record && record.times[index] === 0) {
      record.times[index] = nowUs();
      if (--record.remaining === 0) record.complete();
    }
    waitingForOwn.get(`${run}:${index}`)?.();
  };
  storage.on('mutation', (mutation) => {
    if (mutation.kind === 'set' && mutation.key.startsWith('bench:')) markSeen(mutation.value.run, mutation.value.index);
  });
  const ownCopy = (run, index) => new Promise((resolve) => waitingForOwn.set(`${run}:${index}`, () => (waitingForOwn.delete(`${run}:${index}`), resolve())));
  const once = {
    storage: (run, index) => storage.set(`bench:${index % 64}`, { run, index }),
    relay: (run, index) => {
      const seen = ownCopy(run, index);
      process.send({ bench: 'relay', run, index });
      return seen;
    },
    pingpong: (run, index) => {
      const pong = ownCopy(run, index);
      process.send({ bench: 'ping', run, index });
      return pong;
    },
  };
  const commands = {
    arm({ run, count }) {
      const record = { times: new Array(count).fill(0), remaining: count };
      record.done = new Promise((resolve) => (record.complete = resolve));
      runs.set(run, record);
    },
    async collect({ run }) {
      await runs.get(run).done;
      const { times } = runs.get(run);
      runs.delete(run);
      return times;
    },
    async drive({ run, path: name, count, inFlight }) {
      const t0 = new Array(count);
      const done = new Array(count);
      let next = 0;
      const lane = async () => {
        while (next < count) {
          const index = next++;
          t0[index] = nowUs();
          await once[name](run, index);
          done[index] = nowUs();
        }
      };
      await Promise.all(Array.from({ length: inFlight }, lane));
      return { t0, done };
    },
  };
  process.on('message', async (message) => {
    if (message?.bench === 'relay') markSeen(message.run, message.index);
    else if (message?.bench === 'pong') waitingForOwn.get(`${message.run}:${message.index}`)?.();
    else if (message?.bench === 'command') process.send({ bench: 'reply', id: message.id, result: (await commands[message.name](message.args)) ?? null });
  });
}

function servePrimary(server) {
  const ready = new Map();
  server.on('worker:ready', ({ workerId, pid }) => {
    ready.set(workerId, pid);
    if (ready.size === settings.workers) emit({ type: 'ready' });
  });
  const replies = new Map();
  let nextId = 1;
  const workerOf = (workerId) => Object.values(cluster.workers).find((worker) => worker.process.pid === ready.get(workerId));
  cluster.on('message', (worker, message) => {
    if (message?.bench === 'ping') worker.send({ bench: 'pong', run: message.run, index: message.index });
    else if (message?.bench === 'relay') for (const target of Object.values(cluster.workers)) target.send(message);
    else if (message?.bench === 'reply') replies.get(message.id)?.(message.result);
  });
  const call = (workerId, name, args) =>
    new Promise((resolve) => {
      const id = nextId++;
      replies.set(id, (result) => (replies.delete(id), resolve(result)));
      workerOf(workerId).send({ bench: 'command', id, name, args });
    });
  let runs = 0;
  const measure = async (name, count, inFlight) => {
    const run = ++runs;
    const workerIds = [...ready.keys()].sort();
    if (name !== 'pingpong') await Promise.all(workerIds.map((workerId) => call(workerId, 'arm', { run, count })));
    const { t0, done } = await call(workerIds[0], 'drive', { run, path: name, count, inFlight });
    let finished = done;
    if (name !== 'pingpong') {
      const seen = await Promise.all(workerIds.map((workerId) => call(workerId, 'collect', { run })));
      finished = t0.map((_, index) => Math.max(...seen.map((times) => times[index])));
    }
    const latencies = finished.map((end, index) => end - t0[index]).sort((a, b) => a - b);
    const elapsedUs = Math.max(...finished) - t0[0];
    return { p50Us: percentile(latencies, 0.5), p99Us: percentile(latencies, 0.99), opsPerSecond: Math.round((count / elapsedUs) * 1e6) };
  };
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', async (chunk) => {
    if (!chunk.includes('run')) return;
    const rounds = [];
    for (const name of ['pingpong', 'relay', 'storage']) await measure(name, 200, 8); // warm-up
    for (let round = 0; round < settings.rounds; round++) {
      const order = ['pingpong', 'relay', 'storage'];
      if (round % 2 === 1) order.reverse();
      const figures = {};
      for (const name of order) {
        figures[`${name}.sequential`] = await measure(name, settings.sequential, 1);
        figures[`${name}.inFlight`] = await measure(name, settings.pipelined, settings.inFlight);
      }
      rounds.push(figures);
    }
    emit({ type: 'result', rounds });
  });
}

function percentile(sorted, fraction) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))];
}

// ---------------------------------------------------------------- runner

async function runBenchmark() {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-storage-'));
  const config = { workers: settings.workers, dataDir, http: { port: 0, host: '127.0.0.1' }, log: { level: 'warn' } };
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { ...process.env, BENCH_STORAGE_ROLE: 'server', BENCH_CONFIG: JSON.stringify(config) },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  const killGroup = () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  process.on('exit', killGroup);
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(1));
  setTimeout(() => {
    console.error('storage bench: gave up after 10 minutes');
    process.exit(1);
  }, 600_000).unref();

  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  const messages = linesOf(child);
  child.once('exit', (code, signal) => messages.fail(new Error(`server exited (${code ?? signal})\n${stderr}`)));
  try {
    await messages.next('ready');
    child.stdin.write('run\n');
    const { rounds } = await messages.next('result');
    const summary = summarize(rounds);
    write(summary, rounds);
    console.log(markdown(summary));
  } finally {
    killGroup();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function linesOf(child) {
  const queue = [];
  let wake = () => {};
  let failure;
  let buffer = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    for (let index = buffer.indexOf('\n'); index >= 0; index = buffer.indexOf('\n')) {
      const line = buffer.slice(0, index);
      buffer = buffer.slice(index + 1);
      if (line.startsWith(MARK)) queue.push(JSON.parse(line.slice(MARK.length)));
    }
    wake();
  });
  return {
    fail(error) {
      failure = error;
      wake();
    },
    async next(type) {
      for (;;) {
        const index = queue.findIndex((message) => message.type === type);
        if (index >= 0) return queue.splice(index, 1)[0];
        if (failure) throw failure;
        await new Promise((resolve) => (wake = resolve));
      }
    },
  };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)];

function summarize(rounds) {
  const figures = {};
  for (const key of Object.keys(rounds[0])) {
    figures[key] = Object.fromEntries(['p50Us', 'p99Us', 'opsPerSecond'].map((stat) => [stat, median(rounds.map((round) => round[key][stat]))]));
  }
  const ratio = (a, b) => Math.round((a / b) * 100) / 100;
  const ratios = {};
  for (const mode of ['sequential', 'inFlight']) {
    const storage = figures[`storage.${mode}`];
    for (const baseline of ['relay', 'pingpong']) {
      ratios[`${mode}: storage p50 / ${baseline} p50`] = ratio(storage.p50Us, figures[`${baseline}.${mode}`].p50Us);
      ratios[`${mode}: storage sets/s / ${baseline} ops/s`] = ratio(storage.opsPerSecond, figures[`${baseline}.${mode}`].opsPerSecond);
    }
  }
  return { figures, ratios };
}

function write(summary, rounds) {
  const results = path.join(here, 'results');
  mkdirSync(results, { recursive: true });
  // The load average says how much else competed for the CPUs while this ran.
  const loadAverage = os.loadavg().map((load) => Math.round(load * 100) / 100);
  const environment = { node: process.version, platform: `${os.platform()} ${os.arch()}`, cpus: os.availableParallelism(), cpuModel: os.cpus()[0]?.model, loadAverage };
  writeFileSync(path.join(results, 'storage.json'), `${JSON.stringify({ date: new Date().toISOString(), environment, settings, ...summary, rounds }, null, 2)}\n`);
  writeFileSync(path.join(results, 'storage.md'), markdown(summary, environment));
}

const PATHS = {
  pingpong: 'raw `process.send` ping-pong, primary ↔ 1 worker (round trip)',
  relay: 'raw relay: worker → primary → every worker (`process.send`)',
  storage: '`storage.set` in one worker → change seen in every worker',
};

function markdown({ figures, ratios }, environment) {
  const rows = Object.entries(figures).map(([key, figure]) => {
    const [name, mode] = key.split('.');
    const label = mode === 'sequential' ? 'one at a time' : `${settings.inFlight} in flight`;
    return `| ${PATHS[name]} | ${label} | ${figure.p50Us} | ${figure.p99Us} | ${figure.opsPerSecond} |`;
  });
  return [
    '# Storage benchmark',
    '',
    `${settings.workers} workers; ${settings.sequential} operations one at a time and ${settings.pipelined} with ${settings.inFlight} in flight, ` +
      `median of ${settings.rounds} rounds (order alternated)` +
      `${environment ? `; Node ${environment.node}, ${environment.cpus} CPUs, load average ${environment.loadAverage.join(' / ')}` : ''}. ` +
      'Latency: from the call in the writing worker until the last worker saw the change (ping-pong: the round trip); ' +
      'ops/s: operations ÷ time from the first call until the last worker saw the last change. ' +
      'The writing worker is one of the workers that must see each change.',
    '',
    '| path | mode | p50 µs | p99 µs | ops/s |',
    '|---|---|---:|---:|---:|',
    ...rows,
    '',
    '| ratio | value |',
    '|---|---:|',
    ...Object.entries(ratios).map(([name, value]) => `| ${name} | ${value} |`),
    '',
  ].join('\n');
}

// Last, so every module-level constant above is initialized before either role starts.
if (process.env.BENCH_STORAGE_ROLE === 'server') await serve();
else await runBenchmark();
