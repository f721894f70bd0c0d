#!/usr/bin/env node
// Autoscaler decision benchmark: the cost of one evaluation of `decide` (src/autoscaler/decide.ts) over a
// cluster inventory of BENCH_NODES servers (default 10,000) with BENCH_SAMPLES samples each (default 12),
// against a baseline measured in the same run on the same data: one plain pass that averages every server's
// samples (the least any decision over these signals must do). Alternating rounds, median.
// Run after `npm run build`: `node bench/autoscaler.mjs`. Writes bench/results/autoscaler.json and .md.
import { mkdirSync, writeFileSync } from 'node:fs';
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
];
writeFileSync(path.join(results, 'autoscaler.md'), table.join('\n'));
console.log(table.join('\n'));
