#!/usr/bin/env node
// Where the per-request microseconds of the envelope routes go. For each of `POST /workflows/echo`, `POST /api`
// (to a local upstream) and `POST /crud` (`object.read` by id), a single-process Fleetplane (`workers: 0`, so the
// process that serves is the one profiled) runs under `node --cpu-prof`, takes a warm-up run and then a measured
// autocannon run; only the samples of the measured run count (V8's profile clock is the monotonic clock of
// `process.hrtime`). Same data and bodies as bench/envelope.mjs. Run after `npm run build`.
// Writes bench/results/envelope-profile.json and .md; the .md keeps whatever follows its ANALYSIS marker line
// (the hand-written reading of the figures). Raw profiles stay in a temporary directory, printed at the end
// when BENCH_KEEP_PROFILES=1. Environment: BENCH_DURATION_S (measured run, default 8), BENCH_CONNECTIONS (16),
// BENCH_PROFILE_INTERVAL_US (sampling interval, default 200).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Fixture, cpuMs, killAll } from './lib/procs.mjs';
import { analyzeProfile } from './lib/cpuprofile.mjs';
import { ENVELOPE_ROUTES, seedEnvelopeData, startEnvelopeSide } from './lib/envelope-data.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const ANALYSIS = '<!-- ANALYSIS: everything below this line is kept when the benchmark rewrites the file -->';
const settings = {
  durationS: Number(process.env.BENCH_DURATION_S ?? 8),
  warmUpS: 2,
  connections: Number(process.env.BENCH_CONNECTIONS ?? 16),
  intervalUs: Number(process.env.BENCH_PROFILE_INTERVAL_US ?? 200),
};
const ROUTES = { workflow: ENVELOPE_ROUTES.workflow, api: ENVELOPE_ROUTES.api, crud: ENVELOPE_ROUTES.crud };

const workDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-profile-'));
const dataDir = path.join(workDir, 'data');
const profileDir = path.join(workDir, 'profiles');
mkdirSync(dataDir);
mkdirSync(profileDir);
const keep = process.env.BENCH_KEEP_PROFILES === '1';
const cleanup = () => {
  killAll();
  if (!keep) rmSync(workDir, { recursive: true, force: true });
};
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => (cleanup(), process.exit(130)));
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const round2 = (value) => Math.round(value * 100) / 100;

/** Profiles `name` served by Fleetplane (`side: 'candidate'`) or by the bare baseline (`side: 'baseline'`). */
async function profileRoute(name, side, data, upstreamPort) {
  const profileName = `${name}-${side}`;
  const execArgv = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${profileName}.cpuprofile`, `--cpu-prof-interval=${settings.intervalUs}`];
  const { server: fleetplane, pid, request } = await startEnvelopeSide(name, side, { data, dataDir, upstreamPort, execArgv, connections: settings.connections });
  try {
    await autocannon({ ...request, duration: settings.warmUpS });
    const cpuBefore = cpuMs(pid);
    const fromUs = nowUs();
    const result = await autocannon({ ...request, duration: settings.durationS });
    const toUs = nowUs();
    const cpuUsedMs = cpuMs(pid) - cpuBefore;
    if (result.errors + result.timeouts + result.non2xx > 0) throw new Error(`${request.url}: ${result.errors + result.timeouts + result.non2xx} failed requests`);
    const stopped = await fleetplane.stop();
    if (!stopped.graceful) throw new Error(`${profileName}: the server did not exit on SIGTERM, so it wrote no profile`);
    const file = path.join(profileDir, `${profileName}.cpuprofile`);
    if (!existsSync(file)) throw new Error(`${profileName}: no profile in ${profileDir} (${readdirSync(profileDir).join(', ')})`);
    const profile = JSON.parse(readFileSync(file, 'utf8'));
    if (profile.endTime < fromUs || profile.startTime > toUs) throw new Error(`${profileName}: the profile's clock (${profile.startTime}–${profile.endTime} µs) does not cover the measured run (${fromUs}–${toUs})`);
    const cpuUsPerRequest = round2((cpuUsedMs * 1000) / result.requests.total);
    const analysis = analyzeProfile(profile, { fromUs, toUs, requests: result.requests.total, cpuUsPerRequest });
    return { route: request.url.replace(/^http:\/\/[^/]+/, ''), requestsPerSecond: result.requests.average, ...analysis };
  } finally {
    await fleetplane.stop();
  }
}

function section(name, { candidate, baseline }) {
  const baselineStages = new Map(baseline.stages.map((stage) => [stage.name, stage.usPerRequest]));
  const names = [...new Set([...candidate.stages.map((stage) => stage.name), ...baseline.stages.map((stage) => stage.name)])];
  const stageRows = names.map((stageName) => {
    const stage = candidate.stages.find((entry) => entry.name === stageName);
    const bare = baselineStages.get(stageName) ?? 0;
    const used = stage?.usPerRequest ?? 0;
    return `| ${stageName} | ${used} | ${stage ? `${stage.percent}%` : '–'} | ${bare} | ${round2(used - bare)} | ${stage ? stage.leafAreas.map((area) => `${area.name} ${area.usPerRequest}`).join(', ') : ''} |`;
  });
  const rows = (list, limit) => list.slice(0, limit).map((entry) => `| ${entry.name.replace(/\|/g, '\\|')} | ${entry.usPerRequest} | ${entry.percent}% |`);
  const line = (figures, what) =>
    `${what}: ${figures.requests} requests in ${figures.windowMs} ms (${Math.round(figures.requestsPerSecond)} req/s under the profiler), ${figures.samples} samples; server CPU ${figures.cpuUsPerRequest} µs/request from /proc (profiler on).`;
  return [
    `## ${ROUTES[name].what} (baseline: ${ROUTES[name].bare})`,
    '',
    line(candidate, 'Fleetplane'),
    line(baseline, 'Baseline'),
    '',
    '| stage (entry frame of Fleetplane or plugin code; else what the framework was doing) | µs/req | share | baseline µs/req | difference | where its leaf time is (µs/req) |',
    '|---|---:|---:|---:|---:|---|',
    ...stageRows,
    `| **total (server CPU, /proc)** | **${candidate.cpuUsPerRequest}** | | **${baseline.cpuUsPerRequest}** | **${round2(candidate.cpuUsPerRequest - baseline.cpuUsPerRequest)}** | |`,
    '',
    'Fleetplane functions, inclusive (callees included; nested ones overlap):',
    '',
    '| function (dist file:line) | µs/req | share |',
    '|---|---:|---:|',
    ...rows(candidate.inclusiveProduct, 25),
    '',
    'Top self time, Fleetplane (the function on top of the stack):',
    '',
    '| function | µs/req | share |',
    '|---|---:|---:|',
    ...rows(candidate.selfTop, 25),
    '',
  ].join('\n');
}

try {
  if (!existsSync(path.join(here, '..', 'dist', 'index.js'))) throw new Error('dist/index.js is missing: run `npm run build` first');
  // The upstream of /api is bench/envelope.mjs in its upstream role (Fixture resolves names under bench/fixtures/).
  const upstream = new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'upstream' });
  const { port: upstreamPort } = await upstream.ready();
  const data = await seedEnvelopeData(dataDir, upstreamPort);
  const routes = {};
  for (const name of Object.keys(ROUTES)) {
    routes[name] = {};
    for (const side of ['candidate', 'baseline']) {
      console.error(`profiling ${name} ${side}`);
      routes[name][side] = await profileRoute(name, side, data, upstreamPort);
    }
  }
  await upstream.stop();

  const environment = { node: process.version, cpus: os.cpus().length, loadavgAtEnd: os.loadavg().map(round2) };
  const result = { date: new Date().toISOString(), environment, settings, routes };
  const mdFile = path.join(here, 'results', 'envelope-profile.md');
  const previous = existsSync(mdFile) ? readFileSync(mdFile, 'utf8') : '';
  const analysis = previous.includes(ANALYSIS) ? previous.slice(previous.indexOf(ANALYSIS)) : `${ANALYSIS}\n`;
  const md = [
    '# Envelope routes: where the microseconds go',
    '',
    `Single-process Fleetplane (\`workers: 0\`) and, for each route, its bare baseline from bench/envelope.mjs, each under \`node --cpu-prof --cpu-prof-interval=${settings.intervalUs}\`, ${settings.connections} keep-alive connections, ${settings.warmUpS} s warm-up then ${settings.durationS} s measured (only its samples count), Node ${process.version}, ${environment.cpus} CPUs shared with the load generator. Figures are µs per answered request: a part's share of the profile's samples (each sample counts the same) times the server's CPU time per request that /proc measured over the same window. The profiler adds its own cost and the machine is shared, so read shares and differences rather than absolutes; bench/results/envelope.md has the real per-request cost. Produced by \`node bench/envelope-profile.mjs\`.`,
    '',
    ...Object.entries(routes).map(([name, figures]) => section(name, figures)),
    analysis,
  ].join('\n');
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(path.join(here, 'results', 'envelope-profile.json'), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(mdFile, md);
  process.stdout.write(md);
  if (keep) console.error(`profiles kept in ${profileDir}`);
} catch (error) {
  console.error(error?.stack ?? error);
  process.exitCode = 1;
} finally {
  cleanup();
}
