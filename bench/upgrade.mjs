#!/usr/bin/env node
// Failed requests and latency while a node replaces its own primary, three ways, under the same steady load:
//
//   handover         `fleetplane upgrade`: a new primary takes the listening sockets, then the old one drains.
//   restart-master   `ctl restart --master --value '{"isPrimary": true}'`: the primary stops gracefully and exits
//                    75; a service manager (emulated here: this script starts it again on exit code 75) restarts
//                    it. The port is closed from the old primary's exit until the new one has bound it.
//   rolling          `ctl restart --broadcast`: a rolling restart of the workers, the primary staying (the baseline
//                    of a change that needs no new primary).
//
// Each run starts one `fleetplane start` (2 workers) of this build, puts the paced load of bench/runtime on it
// (keep-alive connections and new-connection loops), waits `BENCH_SETTLE_MS`, triggers one replacement, waits
// until the node serves with its replacement (new primary pid or new worker pids) plus `BENCH_SETTLE_MS`, then
// stops the load. The latency figures cover that whole window, the replacement being most of it. Modes
// alternate within a round so they see the same machine.
//
// Usage, after `npm run build`: node bench/upgrade.mjs
// Environment: BENCH_RUNS (default 5) rounds, BENCH_SETTLE_MS (default 1000).
// Writes bench/results/upgrade.{json,md}.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { steadyLoad } from './lib/load.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.join(path.dirname(here), 'dist', 'cli', 'main.js');
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 1_000);
const MODES = ['handover', 'restart-master', 'rolling'];
const STEADY = { keepAlive: 8, newConnection: 8, ratePerLoop: 100, timeoutMs: 5_000 };
const RESTART_EXIT_CODE = 75;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (message) => console.error(`[upgrade] ${message}`);

/** Every primary group started, killed at the end whatever happened (a hand-over's primary leads its own). */
const groups = new Set();
const killAll = () => {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
};
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function cli(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

async function primaryStatus(dataDir) {
  const result = await cli(['ctl', 'status', '--master', '--broadcast', '--json', '--timeout', '3000', '--data-dir', dataDir]);
  if (result.status !== 0) return undefined;
  const { replies } = JSON.parse(result.stdout);
  const primary = replies.find((reply) => reply.worker === 0);
  const workers = replies.filter((reply) => reply.worker > 0 && reply.ok && reply.result.status === 'ready').map((reply) => reply.result.pid);
  return primary?.ok ? { pid: primary.result.pid, status: primary.result.status, workers } : undefined;
}

async function until(probe, what, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    await sleep(100);
  }
  throw new Error(`${what}: not reached in ${timeoutMs} ms`);
}

/**
 * `fleetplane start`, started again when it exits with the restart exit code, as a service manager with
 * `Restart=on-failure` would. Its log is read only to learn the pid of every primary (to kill at the end).
 */
function supervise(configFile) {
  let stopped = false;
  const start = () => {
    const child = spawn(process.execPath, [CLI, 'start', '--config', configFile], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    groups.add(child.pid);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const successor = /"successor":(\d+)/.exec(line);
      if (successor) groups.add(Number(successor[1]));
    });
    child.stderr.resume();
    child.on('exit', (code) => {
      if (!stopped && code === RESTART_EXIT_CODE) start();
    });
  };
  start();
  return { stop: () => (stopped = true) };
}

async function run(mode, tmpDir, index) {
  const dataDir = path.join(tmpDir, `${mode}-${index}`);
  const port = await freePort();
  const configFile = path.join(tmpDir, `${mode}-${index}.json`);
  const config = {
    // A busy host boots workers slowly; an aborted hand-over is recorded, but wastes the run.
    workers: { count: 2, readyTimeoutMs: 120_000 },
    dataDir,
    http: { port, host: '127.0.0.1' },
    log: { level: 'warn' },
    lifecycle: { readinessGraceMs: 0, restartExitCode: RESTART_EXIT_CODE },
  };
  writeFileSync(configFile, JSON.stringify(config));
  const supervisor = supervise(configFile);
  try {
    const before = await until(async () => {
      const status = await primaryStatus(dataDir);
      return status?.status === 'ready' && status.workers.length === 2 ? status : undefined;
    }, 'the node serves');
    const load = steadyLoad({ port, path: '/healthz', ...STEADY });
    await sleep(SETTLE_MS);
    const triggeredAt = performance.now();
    if (mode === 'handover') {
      const result = await cli(['upgrade', '--data-dir', dataDir]);
      if (result.status !== 0) {
        const stopped = await load.stop();
        return { aborted: result.stderr.trim(), failed: stopped.failed, requests: stopped.counts.ka.ok + stopped.counts.nc.ok + stopped.failed, p99Ms: { keepAlive: null, newConnection: null }, maxMs: {}, replacedMs: null, failuresByType: stopped.failuresByType };
      }
    } else if (mode === 'restart-master') {
      await cli(['ctl', 'restart', '--master', '--value', '{"isPrimary":true}', '--data-dir', dataDir]);
    } else {
      await cli(['ctl', 'restart', '--broadcast', '--data-dir', dataDir]);
    }
    await until(async () => {
      const status = await primaryStatus(dataDir);
      if (!status || status.status !== 'ready' || status.workers.length !== 2) return undefined;
      const replaced = mode === 'rolling' ? status.workers.every((pid) => !before.workers.includes(pid)) : status.pid !== before.pid;
      return replaced ? status : undefined;
    }, `${mode}: the node serves with its replacement`);
    const replacedMs = Math.round(performance.now() - triggeredAt);
    await sleep(SETTLE_MS);
    const result = await load.stop();
    return {
      failed: result.failed,
      requests: result.counts.ka.ok + result.counts.nc.ok + result.failed,
      p99Ms: { keepAlive: result.latency.keepAlive.p99Ms, newConnection: result.latency.newConnection.p99Ms },
      maxMs: { keepAlive: result.latency.keepAlive.maxMs, newConnection: result.latency.newConnection.maxMs },
      replacedMs,
      failuresByType: result.failuresByType,
    };
  } finally {
    supervisor.stop();
    killAll();
    groups.clear();
  }
}

const median = (values) => {
  const sorted = [...values].filter((value) => value !== null).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const spread = (values) => {
  const present = values.filter((value) => value !== null);
  return present.length ? [Math.min(...present), Math.max(...present)] : null;
};

async function main() {
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-upgrade-'));
  const startedAt = Date.now();
  const runs = Object.fromEntries(MODES.map((mode) => [mode, []]));
  try {
    for (let index = 0; index < RUNS; index++) {
      const order = MODES.map((_, offset) => MODES[(index + offset) % MODES.length]);
      for (const mode of order) {
        log(`round ${index + 1}/${RUNS}: ${mode}`);
        const result = await run(mode, tmpDir, index);
        if (result.aborted) log(`  aborted (${result.failed} failed meanwhile): ${result.aborted}`);
        else log(`  ${result.failed} failed of ${result.requests}; p99 ${result.p99Ms.keepAlive} ms keep-alive, ${result.p99Ms.newConnection} ms new connection; replaced in ${result.replacedMs} ms`);
        runs[mode].push(result);
      }
    }
  } finally {
    killAll();
    rmSync(tmpDir, { recursive: true, force: true });
  }
  const summary = (mode) => {
    const list = runs[mode].filter((run) => !run.aborted);
    const pick = (get) => ({ median: median(list.map(get)), spread: spread(list.map(get)) });
    return {
      mode,
      runs: runs[mode],
      aborted: runs[mode].length - list.length,
      failed: pick((run) => run.failed),
      p99KeepAliveMs: pick((run) => run.p99Ms.keepAlive),
      p99NewConnectionMs: pick((run) => run.p99Ms.newConnection),
      replacedMs: pick((run) => run.replacedMs),
    };
  };
  const report = {
    benchmark: 'upgrade',
    date: new Date().toISOString(),
    machine: { node: process.version, cpus: os.availableParallelism(), loadavgAtEnd: os.loadavg().map((value) => Math.round(value * 100) / 100) },
    settings: { runs: RUNS, settleMs: SETTLE_MS, steadyLoad: STEADY, workers: 2 },
    durationS: Math.round((Date.now() - startedAt) / 1000),
    modes: MODES.map(summary),
  };
  const results = path.join(here, 'results');
  mkdirSync(results, { recursive: true });
  writeFileSync(path.join(results, 'upgrade.json'), `${JSON.stringify(report, null, 2)}\n`);
  const cell = ({ median: middle, spread: range }) => (middle === null ? '-' : `${middle} (${range[0]}–${range[1]})`);
  const markdown = [
    '# Replacing the primary under load',
    '',
    `${RUNS} run(s) per mode, modes alternating; each run: one node (2 workers) under ${STEADY.keepAlive} keep-alive connections + ${STEADY.newConnection} new-connection loops at ${STEADY.ratePerLoop} req/s each, one replacement, ${SETTLE_MS} ms of load before and after it. A connection error, reset, close before the response, ${STEADY.timeoutMs / 1000} s timeout or non-2xx is a failed request. Latency covers the whole window. Median (min–max). ${report.machine.cpus} CPUs, load average ${report.machine.loadavgAtEnd[0]} at the end; the run took ${report.durationS} s.`,
    '',
    '| mode | failed requests | p99 keep-alive (ms) | p99 new connection (ms) | replaced in (ms) | aborted runs |',
    '|---|---:|---:|---:|---:|---:|',
    ...report.modes.map((entry) => `| ${entry.mode} | ${cell(entry.failed)} | ${cell(entry.p99KeepAliveMs)} | ${cell(entry.p99NewConnectionMs)} | ${cell(entry.replacedMs)} | ${entry.aborted} |`),
    '',
  ].join('\n');
  writeFileSync(path.join(results, 'upgrade.md'), markdown);
  process.stdout.write(markdown);
}

main().catch((error) => {
  log(`failed: ${error?.stack ?? error}`);
  killAll();
  process.exit(1);
});
