#!/usr/bin/env node
// Autoscaler benchmark.
// 1. Decision: the cost of one evaluation of `decide` (src/autoscaler/decide.ts) over a cluster inventory of
//    BENCH_NODES servers (default 10,000) with BENCH_SAMPLES samples each (default 12), against a baseline
//    measured in the same run on the same data: one plain pass that averages every server's samples (the least
//    any decision over these signals must do). Alternating rounds, median.
// 2. End to end: BENCH_E2E_RUNS runs (default 3; 0 skips) of test/e2e/autoscaler-fleet.test.ts, the autoscaled
//    cluster on the local provider with real processes (a platform server, its tenant servers, autocannon load),
//    each reporting its figures: threshold crossed (the scale-out decision) → the new server serving its first
//    request of the load; the scale-in (decision → done) and the requests of a light client that failed during
//    it; the organization confirmed inactive → the last server's process gone; the activation on the platform →
//    the new server serving. Median, min and max over the runs.
// Run after `npm run build`: `node bench/autoscaler.mjs`. Writes bench/results/autoscaler.json and .md.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decide } from '../dist/src/autoscaler/decide.js';
import { parsePolicy } from '../dist/src/autoscaler/policy.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const settings = {
  nodes: Number(process.env.BENCH_NODES ?? 10_000),
  samples: Number(process.env.BENCH_SAMPLES ?? 12),
  evaluations: Number(process.env.BENCH_EVALUATIONS ?? 200),
  rounds: Number(process.env.BENCH_ROUNDS ?? 5),
  e2eRuns: Number(process.env.BENCH_E2E_RUNS ?? 3),
};

const now = 100_000_000;
const policy = parsePolicy({ minClusterSize: 1, maxClusterSize: settings.nodes + 10, windowMs: 60_000, cooldownMs: 60_000 });
const nodes = [];
const signals = new Map();
for (let index = 0; index < settings.nodes; index++) {
  const id = `server-${String(index).padStart(6, '0')}`;
  // A few servers are still booting or leaving, as in a real inventory.
  const status = index % 97 === 0 ? 'terminating' : index % 89 === 0 ? 'failed' : 'running';
  nodes.push({ id, status, createdAt: index });
  const samples = [];
  for (let sample = 0; sample < settings.samples; sample++) samples.push({ at: now - sample * 5_000, cpu: 40 + ((index * 7 + sample) % 30), memory: 50 + ((index + sample) % 20) });
  signals.set(id, samples);
}

let sink = 0;
const candidates = {
  baseline() {
    let cpu = 0;
    let count = 0;
    for (const node of nodes) {
      if (node.status !== 'running') continue;
      for (const sample of signals.get(node.id)) {
        cpu += sample.cpu;
        count++;
      }
    }
    sink += cpu / count;
  },
  decide() {
    const decision = decide({ policy, nodes, signals, now });
    sink += decision.current;
  },
};

function measure(run) {
  for (let warm = 0; warm < 5; warm++) run();
  const started = process.hrtime.bigint();
  for (let index = 0; index < settings.evaluations; index++) run();
  return Number(process.hrtime.bigint() - started) / 1_000 / settings.evaluations;
}

const runs = { baseline: [], decide: [] };
for (let round = 0; round < settings.rounds; round++) {
  // Alternate which goes first, so neither always runs on a warmer cache.
  const order = round % 2 === 0 ? ['baseline', 'decide'] : ['decide', 'baseline'];
  for (const name of order) runs[name].push(measure(candidates[name]));
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const endToEnd = settings.e2eRuns > 0 ? runEndToEnd(settings.e2eRuns) : null;
const result = {
  bench: 'autoscaler',
  at: new Date().toISOString(),
  node: process.version,
  settings,
  usPerEvaluation: { baseline: median(runs.baseline), decide: median(runs.decide) },
  rounds: runs,
  ratio: median(runs.decide) / median(runs.baseline),
  decision: decide({ policy, nodes, signals, now }),
  sink,
  endToEnd,
};
const results = path.join(here, 'results');
mkdirSync(results, { recursive: true });
writeFileSync(path.join(results, 'autoscaler.json'), `${JSON.stringify(result, null, 2)}\n`);
const fmt = (value) => value.toFixed(1);
const table = [
  `# Autoscaler decision`,
  '',
  `${settings.nodes.toLocaleString('en')} servers, ${settings.samples} samples each, ${settings.evaluations} evaluations per round, median of ${settings.rounds} alternating rounds (${process.version}, ${result.at}).`,
  '',
  '| | µs per evaluation | rounds (µs) |',
  '|---|---:|---|',
  `| baseline: one pass averaging every server's samples | ${fmt(result.usPerEvaluation.baseline)} | ${runs.baseline.map(fmt).join(', ')} |`,
  `| \`decide\` (window filter, per-server means, pick) | ${fmt(result.usPerEvaluation.decide)} | ${runs.decide.map(fmt).join(', ')} |`,
  '',
  `\`decide\` costs ${result.ratio.toFixed(2)}× the baseline pass; the decision on this inventory: \`${JSON.stringify({ action: result.decision.action, reason: result.decision.reason })}\`.`,
  '',
  ...(endToEnd ? endToEndMarkdown(endToEnd) : []),
];
writeFileSync(path.join(results, 'autoscaler.md'), table.join('\n'));
console.log(table.join('\n'));

/** The figures each run of the end-to-end test wrote, with median, min and max per figure. */
function runEndToEnd(runs) {
  const root = path.join(here, '..');
  const tap = path.join(root, 'node_modules', '.bin', 'tap');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-autoscaler-'));
  const results = [];
  for (let run = 1; run <= runs; run++) {
    const file = path.join(dir, `run-${run}.json`);
    const loadAverage = os.loadavg()[0];
    const started = Date.now();
    const child = spawnSync(tap, ['--reporter=terse', 'test/e2e/autoscaler-fleet.test.ts'], { cwd: root, env: { ...process.env, AUTOSCALER_E2E_FIGURES: file }, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    const durationMs = Date.now() - started;
    if (child.status !== 0) {
      console.error(child.stdout.slice(-4000), child.stderr.slice(-2000));
      throw new Error(`end-to-end run ${run} failed (exit ${child.status}): no figures from a run whose assertions did not hold`);
    }
    const figures = JSON.parse(readFileSync(file, 'utf8'));
    results.push({ ...figures, fileDurationMs: durationMs, loadAverage: Number(loadAverage.toFixed(2)) });
    console.error(`end-to-end run ${run}: ${JSON.stringify(results.at(-1))}`);
  }
  const names = ['loadToDecisionMs', 'thresholdToServingMs', 'loadStopToScaleInMs', 'scaleInMs', 'scaleInRequests', 'scaleInFailed', 'inactiveToRemovedMs', 'activationToServingMs', 'fileDurationMs'];
  const summary = {};
  for (const name of names) {
    const values = results.map((entry) => entry[name]);
    summary[name] = { median: median(values), min: Math.min(...values), max: Math.max(...values) };
  }
  return { runs: results, summary, cpus: os.availableParallelism() };
}

function endToEndMarkdown(endToEnd) {
  const { summary, runs } = endToEnd;
  const row = (label, name, unit = ' ms') => `| ${label} | ${summary[name].median}${unit} | ${summary[name].min}–${summary[name].max}${unit} | ${runs.map((entry) => entry[name]).join(', ')} |`;
  return [
    '# Autoscaler end to end',
    '',
    `\`test/e2e/autoscaler-fleet.test.ts\`, ${runs.length} runs: a platform server with the local provider and the tenant cluster's servers it starts (one worker each, real processes on 127.0.0.1), autocannon load through a pool that follows the inventory, policy window 2 s, cooldown 4 s, evaluation every 250 ms. ${endToEnd.cpus} CPUs; load average at each run's start: ${runs.map((entry) => entry.loadAverage).join(', ')} (the machine is shared).`,
    '',
    '| figure | median | min–max | runs |',
    '|---|---:|---:|---|',
    row('load on → scale-out decision (window, and the cooldown from the first server serving)', 'loadToDecisionMs'),
    row('threshold crossed (scale-out decision) → new server serving the load', 'thresholdToServingMs'),
    row('load stops → scale-in decision (cooldown from the new server serving, window)', 'loadStopToScaleInMs'),
    row('scale-in: decision → done (drain with 500 ms readiness grace, terminating, provider, shutdown)', 'scaleInMs'),
    row('requests of the light client during the scale-in', 'scaleInRequests', ''),
    row('of which failed (socket error or 5xx)', 'scaleInFailed', ''),
    row('organization confirmed inactive → last server stopped (its drain includes the 500 ms readiness grace)', 'inactiveToRemovedMs'),
    row('activation on the platform → new server serving', 'activationToServingMs'),
    row('the whole test file', 'fileDurationMs'),
    '',
    'Both "→ serving" figures include a server start (`fleetplane start`, one worker) on this machine: compare `bench/results/manager.md`.',
    '',
  ];
}
