#!/usr/bin/env node
// Failed requests during rolling restarts, this build against another one, on a loaded host.
//
// Each round starts one server (2 workers) of each build in turn, puts the steady paced load of
// bench/runtime on it (keep-alive connections and new-connection loops), and restarts its workers with
// SIGHUP `RESTARTS` times. `CONTENTION` busy processes run beside it during the restarts: on a host whose CPUs
// are taken, a worker's event loop stalls, and a drain that mistakes a stalled socket for an idle one drops the
// request waiting unread in it. Builds alternate (old, new, old, new, ...), so both see the same machine.
//
// Usage, after `npm run build` in both trees (the old tree needs its own dist/ and node_modules):
//   node bench/rolling-restart.mjs [<old-tree>]      without an old tree, only this build is measured
// Environment: BENCH_ROUNDS (default 3), BENCH_RESTARTS per round (default 5), BENCH_CONTENTION (default 2).
// Writes bench/results/rolling-restart.{json,md}.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Fixture, killAll } from './lib/procs.mjs';
import { steadyLoad } from './lib/load.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RESTARTS = Number(process.env.BENCH_RESTARTS ?? 5);
const CONTENTION = Number(process.env.BENCH_CONTENTION ?? 2);
const STEADY = { keepAlive: 8, newConnection: 8, ratePerLoop: 200, timeoutMs: 3_000 };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (message) => console.error(`[rolling-restart] ${message}`);

const builds = [{ name: 'new', tree: path.dirname(here) }];
if (process.argv[2]) builds.unshift({ name: 'old', tree: path.resolve(process.argv[2]) });
const commitOf = (tree) => {
  try {
    return execFileSync('git', ['-C', tree, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
};

/** Busy processes that take the CPUs while the workers restart. */
function contention(count) {
  const hogs = Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  return () => hogs.forEach((hog) => hog.kill('SIGKILL'));
}

async function round(build, tmpDir, index) {
  const config = { workers: 2, http: { port: 0, host: '127.0.0.1' }, dataDir: path.join(tmpDir, `${build.name}-${index}`), log: { level: 'warn' } };
  const server = new Fixture(`fleetplane.mjs (${build.name})`, { BENCH_FP_CONFIG: JSON.stringify(config) }, { script: path.join(build.tree, 'bench', 'fixtures', 'fleetplane.mjs'), execArgv: ['--max-semi-space-size=2'] });
  try {
    await server.ready();
    const load = steadyLoad({ port: server.info.port, path: '/healthz', ...STEADY });
    await sleep(1_000);
    const stopContention = contention(CONTENTION);
    try {
      for (let restart = 0; restart < RESTARTS; restart++) {
        const since = server.lines.length;
        server.signal('SIGHUP');
        await server.waitFor((line) => line.type === 'event' && line.name === 'restart:complete', 120_000, since);
      }
    } finally {
      stopContention();
    }
    await sleep(1_000);
    const result = await load.stop();
    return { failed: result.failed, ok: result.counts.ka.ok + result.counts.nc.ok, failuresByType: result.failuresByType };
  } finally {
    await server.stop();
  }
}

async function main() {
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-rolling-'));
  const startedAt = Date.now();
  const runs = Object.fromEntries(builds.map((build) => [build.name, []]));
  try {
    for (let index = 0; index < ROUNDS; index++) {
      for (const build of index % 2 === 0 ? builds : [...builds].reverse()) {
        log(`round ${index + 1}/${ROUNDS}: ${build.name} build, ${RESTARTS} rolling restarts, ${CONTENTION} busy processes`);
        const result = await round(build, tmpDir, index);
        log(`  ${result.failed} failed of ${result.ok + result.failed}`);
        runs[build.name].push(result);
      }
    }
  } finally {
    killAll();
    rmSync(tmpDir, { recursive: true, force: true });
  }
  const report = {
    benchmark: 'rolling-restart',
    date: new Date().toISOString(),
    machine: { node: process.version, cpus: os.availableParallelism(), loadavgAtEnd: os.loadavg().map((value) => Math.round(value * 100) / 100) },
    settings: { rounds: ROUNDS, restartsPerRound: RESTARTS, contention: CONTENTION, steadyLoad: STEADY, workers: 2 },
    durationS: Math.round((Date.now() - startedAt) / 1000),
    builds: builds.map((build) => ({
      name: build.name,
      commit: commitOf(build.tree),
      failedPerRound: runs[build.name].map((run) => run.failed),
      failed: runs[build.name].reduce((sum, run) => sum + run.failed, 0),
      requests: runs[build.name].reduce((sum, run) => sum + run.ok + run.failed, 0),
      failuresByType: runs[build.name].map((run) => run.failuresByType),
    })),
  };
  const results = path.join(here, 'results');
  mkdirSync(results, { recursive: true });
  writeFileSync(path.join(results, 'rolling-restart.json'), `${JSON.stringify(report, null, 2)}\n`);
  const rows = report.builds.map((build) => `| ${build.name} (${build.commit ?? '?'}) | ${build.failedPerRound.join(' / ')} | ${build.failed} of ${build.requests} |`);
  const markdown = [
    '# Rolling restarts under load on a busy host',
    '',
    `${ROUNDS} rounds per build, alternating builds; each round ${RESTARTS} rolling restarts (SIGHUP, 2 workers) under ${STEADY.keepAlive} keep-alive connections + ${STEADY.newConnection} new-connection loops at ${STEADY.ratePerLoop} req/s each, with ${CONTENTION} busy processes taking the CPUs (${report.machine.cpus} CPUs). A connection error, reset, close before the response, ${STEADY.timeoutMs / 1000} s timeout or non-2xx is a failed request. Run took ${report.durationS} s.`,
    '',
    '| build | failed requests per round | total |',
    '|---|---|---:|',
    ...rows,
    '',
  ].join('\n');
  writeFileSync(path.join(results, 'rolling-restart.md'), markdown);
  process.stdout.write(markdown);
}

main().catch((error) => {
  log(`failed: ${error?.stack ?? error}`);
  killAll();
  process.exit(1);
});
