#!/usr/bin/env node
// Old build against new build: runs bench/envelope.mjs, bench/runtime.mjs, bench/ipc.mjs and bench/storage.mjs of THIS checkout against two
// built trees, alternating (old, new, old, new, ...), and puts each figure of each run side by side with the
// run-to-run spread of each build. Usage after `npm run build` in both trees:
//   node bench/compare-builds.mjs <old-tree> [alternations, default 3]
// The old tree needs its own `dist/` (built) and `node_modules`; this script copies this checkout's bench/
// into it first, so both builds run the same benchmark code. Writes bench/results/compare-builds.{json,md}.
// Environment: BENCH_ROUNDS for each envelope run (default 2), BENCH_SECONDS for runtime runs (default 3).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const newTree = path.dirname(here);
const oldTree = path.resolve(process.argv[2] ?? '');
const alternations = Number(process.argv[3] ?? 3);
if (!process.argv[2]) {
  console.error('usage: node bench/compare-builds.mjs <old-tree> [alternations]');
  process.exit(2);
}
rmSync(path.join(oldTree, 'bench'), { recursive: true, force: true });
cpSync(here, path.join(oldTree, 'bench'), { recursive: true });

const gitCommit = (tree) => spawnSync('git', ['-C', tree, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
const env = { ...process.env, BENCH_ROUNDS: process.env.BENCH_ROUNDS ?? '2', BENCH_SECONDS: process.env.BENCH_SECONDS ?? '3' };

/** The figures compared, read from each benchmark's JSON; `better` says which direction is an improvement. */
const FIGURES = {
  envelope: (result) =>
    Object.fromEntries(
      Object.entries(result.figures).flatMap(([pair, figure]) => [
        [`${pair}: CPU-efficiency ratio`, { value: figure.medianCpuRatio, better: 'higher' }],
        [`${pair}: throughput ratio`, { value: figure.medianRatio, better: 'higher' }],
        [`${pair}: server CPU µs/request`, { value: figure.candidateServerCpuUsPerRequest, better: 'lower' }],
      ]),
    ),
  runtime: (result) => ({
    'hand-off keep-alive ratio': { value: result.handOff.ratios.keepAliveReqPerSec, better: 'higher' },
    'hand-off new-connection ratio': { value: result.handOff.ratios.newConnectionReqPerSec, better: 'higher' },
    'fallback 307 ratio': { value: result.goals.fallback307ReqPerSec.ratio, better: 'higher' },
    'rolling restart failed requests': { value: result.goals.rollingRestartFailedRequests.failed, better: 'lower' },
    'idle RSS primary MiB': { value: result.handOff.rssMiB.idle.b.primary, better: 'lower' },
    'idle RSS worker MiB (max)': { value: Math.max(...result.handOff.rssMiB.idle.b.workers), better: 'lower' },
    'settled idle RSS primary MiB': { value: result.handOff.rssMiB.settled.b.primary, better: 'lower' },
    'settled idle RSS worker MiB (max)': { value: Math.max(...result.handOff.rssMiB.settled.b.workers), better: 'lower' },
  }),
  // Each against its own raw baseline measured in the same run (raw process.send), which other load moves alike.
  ipc: (result) => ({
    'IPC request p50 / raw p50': { value: result.median.requestP50Us / result.median.rawP50Us, better: 'lower' },
    'IPC requests/s in flight / raw': { value: result.median.requestConcurrentPerSecond / result.median.rawConcurrentPerSecond, better: 'higher' },
  }),
  storage: (result) => ({
    'storage sequential p50 / relay p50': { value: result.ratios['sequential: storage p50 / relay p50'], better: 'lower' },
    'storage sequential sets/s / relay ops/s': { value: result.ratios['sequential: storage sets/s / relay ops/s'], better: 'higher' },
    'storage in-flight sets/s / relay ops/s': { value: result.ratios['inFlight: storage sets/s / relay ops/s'], better: 'higher' },
  }),
};

const runs = { old: [], new: [] };
for (let round = 0; round < alternations; round++) {
  for (const [build, tree] of [
    ['old', oldTree],
    ['new', newTree],
  ]) {
    const figures = {};
    for (const bench of Object.keys(FIGURES)) {
      console.error(`== round ${round + 1}/${alternations}: ${bench} on the ${build} build (${tree})`);
      const file = path.join(tree, 'bench', 'results', `${bench}.json`);
      const startedAt = Date.now();
      // A benchmark exits 1 when its goals are missed; only a result file it did not rewrite is a failure.
      spawnSync(process.execPath, [path.join(tree, 'bench', `${bench}.mjs`)], { cwd: tree, env, stdio: ['ignore', 'ignore', 'inherit'] });
      if (!existsSync(file) || statSync(file).mtimeMs < startedAt) {
        console.error(`${bench} on the ${build} build wrote no result: stopping`);
        process.exit(1);
      }
      const result = JSON.parse(readFileSync(file, 'utf8'));
      Object.assign(figures, FIGURES[bench](result));
    }
    runs[build].push(figures);
  }
}
// The benchmarks rewrote this checkout's results: put the committed ones back (this run's are summarised below).
spawnSync('git', ['-C', newTree, 'checkout', '--', ...Object.keys(FIGURES).flatMap((bench) => [`bench/results/${bench}.json`, `bench/results/${bench}.md`])]);

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const rows = Object.keys(runs.new[0]).map((name) => {
  const old = runs.old.map((figures) => figures[name].value);
  const now = runs.new.map((figures) => figures[name].value);
  const spread = Math.max(Math.max(...old) - Math.min(...old), Math.max(...now) - Math.min(...now));
  const better = runs.new[0][name].better;
  const delta = median(now) - median(old);
  const worse = better === 'higher' ? -delta : delta;
  return { name, better, old, new: now, oldMedian: median(old), newMedian: median(now), spread, verdict: worse > spread ? 'worse beyond the spread' : worse > 0 ? 'worse within the spread' : 'same or better' };
});
const result = { benchmark: 'compare-builds', date: new Date().toISOString(), old: gitCommit(oldTree), new: gitCommit(newTree), alternations, settings: { BENCH_ROUNDS: env.BENCH_ROUNDS, BENCH_SECONDS: env.BENCH_SECONDS }, rows };
mkdirSync(path.join(here, 'results'), { recursive: true });
writeFileSync(path.join(here, 'results', 'compare-builds.json'), `${JSON.stringify(result, null, 2)}\n`);
const fmt = (value) => (Number.isInteger(value) ? String(value) : value.toFixed(2));
const md = [
  '# Old build against new build',
  '',
  `\`${result.old}\` (old) against \`${result.new}\` (new), ${alternations} alternating runs of bench/envelope (BENCH_ROUNDS=${env.BENCH_ROUNDS}), bench/runtime (BENCH_SECONDS=${env.BENCH_SECONDS}), bench/ipc and bench/storage, same benchmark code, ${result.date}. Spread: the larger of the two builds' max − min over their runs.`,
  '',
  '| figure | better | old (median; runs) | new (median; runs) | spread | verdict |',
  '|---|---|---|---|---:|---|',
  ...rows.map((row) => `| ${row.name} | ${row.better} | ${fmt(row.oldMedian)}; ${row.old.map(fmt).join(', ')} | ${fmt(row.newMedian)}; ${row.new.map(fmt).join(', ')} | ${fmt(row.spread)} | ${row.verdict} |`),
  '',
];
writeFileSync(path.join(here, 'results', 'compare-builds.md'), md.join('\n'));
console.log(md.join('\n'));
