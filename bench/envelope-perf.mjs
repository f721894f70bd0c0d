#!/usr/bin/env node
// Where each microsecond of an envelope request goes, kernel included, against a baseline at the same request
// rate: the hand-written peer P of bench/envelope.mjs (bench/fixtures/peer-service.mjs), or with BENCH_BASELINE=bare
// the bare route (the limit L). bench/envelope-profile.mjs samples V8's own profiler, which cannot see inside system calls and
// counts a process that waits to be scheduled as running; this one samples the serving thread with Linux `perf`
// (`perf record -g`, call graphs through the kernel and through JIT code named by `--perf-basic-prof`).
//
// For each route, a single-process Fleetplane (`workers: 0`) and the baseline (GET /healthz: always the bare one) are
// each pinned to CPU 1 with the load generator (autocannon, in this process) on CPU 0, and loaded at the same
// rate: a share of what Fleetplane sustains. At the same rate both sides get the same batching from the event
// loop and the same wake-ups from the client, so the difference is per-request work. Each sample is charged to
// the innermost frame of a module (a Fleetplane file or a package), else to what Node, V8 or the kernel were
// doing; shares of samples times the serving thread's CPU per request (from /proc) give µs per request.
//
// Needs Linux `perf` with access to kernel call graphs (root, or kernel.perf_event_paranoid ≤ 1) and `taskset`.
// Run after `npm run build`. Writes bench/results/envelope-perf.json and .md; the .md keeps whatever follows
// its ANALYSIS marker line. Environment: BENCH_DURATION_S (measured run, default 6), BENCH_RATE_SHARE (the
// share of Fleetplane's sustained rate both sides are loaded at, default 0.85), BENCH_ROUTES (default
// `workflow,api,crud,healthz`; healthz is the probe bench/runtime's keep-alive figure loads), BENCH_RUNS (runs of each side, alternating; medians are reported, default 3).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Fixture, killAll } from './lib/procs.mjs';
import { ENVELOPE_ROUTES, seedEnvelopeData, startEnvelopeSide } from './lib/envelope-data.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const ANALYSIS = '<!-- ANALYSIS: everything below this line is kept when the benchmark rewrites the file -->';
const settings = {
  durationS: Number(process.env.BENCH_DURATION_S ?? 6),
  rateShare: Number(process.env.BENCH_RATE_SHARE ?? 0.85),
  runs: Number(process.env.BENCH_RUNS ?? 3),
  connections: 32,
  frequencyHz: 2000,
};
const ROUTES = ENVELOPE_ROUTES;
/** What Fleetplane is set against: the hand-written peer P (default) or the bare route; `healthz` has only the bare one. */
const BASELINE = process.env.BENCH_BASELINE ?? 'peer';
if (!['peer', 'bare'].includes(BASELINE)) throw new Error(`BENCH_BASELINE: "${BASELINE}" is neither peer nor bare`);
const baselineOf = (name) => (BASELINE === 'peer' && ROUTES[name].peer ? 'peer' : 'bare');
const routeNames = (process.env.BENCH_ROUTES ?? Object.keys(ROUTES).join(',')).split(',').filter(Boolean);
for (const name of routeNames) if (!ROUTES[name]) throw new Error(`BENCH_ROUTES: unknown route "${name}" (known: ${Object.keys(ROUTES).join(', ')})`);

const workDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-perf-'));
const dataDir = path.join(workDir, 'data');
mkdirSync(dataDir);
const perfMaps = new Set();
const cleanup = () => {
  killAll();
  for (const file of perfMaps) rmSync(file, { force: true });
  rmSync(workDir, { recursive: true, force: true });
};
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => (cleanup(), process.exit(130)));
const round2 = (value) => Math.round(value * 100) / 100;

function requireTools() {
  for (const [tool, args] of [
    ['perf', ['--version']],
    ['taskset', ['--version']],
  ]) {
    try {
      execFileSync(tool, args, { stdio: 'ignore' });
    } catch {
      throw new Error(`${tool} is not available: this benchmark needs Linux perf and taskset`);
    }
  }
  if (os.cpus().length < 2) throw new Error('this benchmark needs 2 CPUs: one for the server, one for the load generator');
}

let tickUs;
/** CPU time of a process's main thread (user, system) in µs, from /proc. */
function threadCpuUs(pid) {
  tickUs ??= 1e6 / (Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100);
  const fields = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const tick = tickUs;
  return { user: Number(fields[11]) * tick, system: Number(fields[12]) * tick };
}

/** Runs `perf record` on the serving thread while `during` runs; answers its result and the text of `perf script`. */
async function recordWhile(pid, file, during) {
  const recorder = spawn('perf', ['record', '-g', '-F', String(settings.frequencyHz), '-o', file, '-t', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  recorder.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => recorder.once('exit', resolve));
  let result;
  try {
    // perf prints nothing once attached: give it a moment before the measured run.
    await new Promise((resolve) => setTimeout(resolve, 300));
    result = await during();
  } finally {
    recorder.kill('SIGINT');
    await exited;
  }
  if (!existsSync(file)) throw new Error(`perf record wrote nothing: ${stderr.trim()}`);
  latestCodeOnly(`/tmp/perf-${pid}.map`);
  const script = execFileSync('perf', ['script', '-i', file], { encoding: 'utf8', maxBuffer: 1024 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] });
  return { result, script };
}

/**
 * V8 appends a line to the perf map for every piece of code it makes, and never says when one is freed, so the
 * code space it reuses keeps the names of code long gone (the boot's, typically). Of overlapping entries only
 * the one written last is kept: the code that was there when the samples were taken.
 */
function latestCodeOnly(mapFile) {
  if (!existsSync(mapFile)) throw new Error(`${mapFile} is missing: the server did not run with --perf-basic-prof`);
  const entries = readFileSync(mapFile, 'utf8')
    .split('\n')
    .map((line, order) => {
      const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
      return match && { start: BigInt(`0x${match[1]}`), end: BigInt(`0x${match[1]}`) + BigInt(`0x${match[2]}`), line, order };
    })
    .filter(Boolean)
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.order - b.order));
  const kept = [];
  for (const entry of entries) {
    // Drop every kept entry this one overlaps and outlives; skip it when a later-written one covers it.
    let covered = false;
    while (kept.length > 0 && kept.at(-1).end > entry.start) {
      if (kept.at(-1).order > entry.order) {
        covered = true;
        break;
      }
      kept.pop();
    }
    if (!covered) kept.push(entry);
  }
  writeFileSync(mapFile, `${kept.map((entry) => entry.line).join('\n')}\n`);
}

const NODE_CORE = 'Node core JS (http, streams, timers, microtasks)';
const KERNEL_AREAS = [
  [/sock_def_readable|try_to_wake_up|ep_poll_callback/, 'kernel: waking the client (its socket became readable)'],
  [/tcp_sendmsg|do_writev|sock_write_iter/, 'kernel: sending (TCP over loopback)'],
  [/tcp_recvmsg|sock_read_iter|ksys_read/, 'kernel: receiving'],
  [/epoll_wait|do_epoll/, 'kernel: epoll'],
];

/** The area a sample is charged to: the innermost module frame, else what Node, V8 or the kernel were doing. */
function areaOf(frames) {
  const leaf = frames[0];
  if (leaf.dso === '[kernel.kallsyms]') {
    const stack = frames.map((frame) => frame.symbol).join(' ');
    for (const [pattern, name] of KERNEL_AREAS) if (pattern.test(stack)) return name;
    return 'kernel: other (page faults, timers, scheduling)';
  }
  for (const frame of frames) {
    const match = /^JS:\S*\s+(?:file:\/\/)?(\S+):\d+:\d+/.exec(frame.symbol);
    if (!match || match[1].startsWith('node:')) continue;
    const file = match[1];
    const dist = /\/dist\/(.+)\.js$/.exec(file);
    if (dist) return dist[1].startsWith('src/') ? dist[1].split('/').slice(0, 2).join('/') : dist[1];
    const packaged = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.+)$/.exec(file);
    if (packaged) return packaged[1] === 'fastify' ? `fastify ${packaged[2].replace(/^lib\//, '')}` : packaged[1];
    return file;
  }
  if (frames.some((frame) => /Heap::|Scavenger|MarkCompact|ConcurrentMarking|MemoryAllocator/.test(frame.symbol))) return 'V8 garbage collection';
  if (frames.some((frame) => frame.symbol.startsWith('JS:'))) return NODE_CORE;
  if (frames.some((frame) => /llhttp/.test(frame.symbol))) return 'HTTP parser (llhttp)';
  return 'native: libuv, V8 runtime, libc';
}

/** Samples of `perf script` output per area (and per leaf function of Fleetplane's own code). */
function attribute(script) {
  const areas = new Map();
  const ownLeaves = new Map();
  const nodeLeaves = new Map();
  let samples = 0;
  for (const block of script.split('\n\n')) {
    const frames = [];
    for (const line of block.split('\n').slice(1)) {
      const match = /^\s*[0-9a-f]+\s+(.*?)\s+\(([^)]*)\)\s*$/.exec(line);
      if (match) frames.push({ symbol: match[1].replace(/\+0x[0-9a-f]+$/, ''), dso: match[2] });
    }
    if (frames.length === 0) continue;
    samples += 1;
    const area = areaOf(frames);
    areas.set(area, (areas.get(area) ?? 0) + 1);
    // The innermost JS frame: Node's own or Fleetplane's function, charged with its time and the native code it called.
    const innermost = frames.find((frame) => frame.symbol.startsWith('JS:'));
    if (area === NODE_CORE) {
      const name = innermost.symbol.replace(/^JS:[*^~]?/, '');
      nodeLeaves.set(name, (nodeLeaves.get(name) ?? 0) + 1);
    } else if (innermost && /\/dist\/.+\.js:\d+/.test(innermost.symbol)) {
      const name = innermost.symbol.replace(/^JS:[*^~]?/, '').replace(/\S*\/dist\//, '');
      ownLeaves.set(name, (ownLeaves.get(name) ?? 0) + 1);
    }
  }
  return { samples, areas, ownLeaves, nodeLeaves };
}

async function measureSide(name, side, data, upstreamPort, rate) {
  const { server, pid, request } = await startEnvelopeSide(name, side, { data, dataDir, upstreamPort, execArgv: ['--perf-basic-prof'], connections: settings.connections });
  try {
    perfMaps.add(`/tmp/perf-${pid}.map`);
    execFileSync('taskset', ['-a', '-p', '-c', '1', String(pid)], { stdio: 'ignore' });
    const warm = await autocannon({ ...request, duration: 3 });
    const sustained = warm.requests.average;
    const overallRate = rate ?? Math.round(sustained * settings.rateShare);
    await autocannon({ ...request, duration: 1, overallRate });
    const file = path.join(workDir, `${name}-${side}.data`);
    let before;
    const { result, script } = await recordWhile(pid, file, async () => {
      before = threadCpuUs(pid);
      const run = await autocannon({ ...request, duration: settings.durationS, overallRate });
      return { run, after: threadCpuUs(pid) };
    });
    const { run, after } = result;
    const failed = run.errors + run.timeouts + run.non2xx;
    if (failed > 0) throw new Error(`${request.url}: ${failed} failed requests`);
    const requests = run.requests.total;
    const cpuUsPerRequest = (after.user + after.system - before.user - before.system) / requests;
    const { samples, areas, ownLeaves, nodeLeaves } = attribute(script);
    const perRequest = (count) => round2((count / samples) * cpuUsPerRequest);
    return {
      sustainedRequestsPerSecond: Math.round(sustained),
      rate: overallRate,
      requestsPerSecond: Math.round(run.requests.average),
      requests,
      samples,
      cpuUsPerRequest: round2(cpuUsPerRequest),
      systemUsPerRequest: round2((after.system - before.system) / requests),
      areas: Object.fromEntries([...areas].sort((a, b) => b[1] - a[1]).map(([area, count]) => [area, perRequest(count)])),
      ownLeaves: [...ownLeaves].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([leaf, count]) => ({ function: leaf, usPerRequest: perRequest(count) })),
      nodeLeaves: Object.fromEntries([...nodeLeaves].map(([leaf, count]) => [leaf, perRequest(count)])),
    };
  } finally {
    await server.stop();
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
/** One side's runs as one: the median of each figure over the runs (an area missing from a run counts 0). */
function medianRun(runs) {
  const mapMedian = (maps) => {
    const keys = [...new Set(maps.flatMap((map) => Object.keys(map)))];
    return Object.fromEntries(keys.map((key) => [key, round2(median(maps.map((map) => map[key] ?? 0)))]));
  };
  const own = mapMedian(runs.map((run) => Object.fromEntries(run.ownLeaves.map((leaf) => [leaf.function, leaf.usPerRequest]))));
  return {
    rate: runs[0].rate,
    sustainedRequestsPerSecond: Math.round(median(runs.map((run) => run.sustainedRequestsPerSecond))),
    requests: runs.reduce((sum, run) => sum + run.requests, 0),
    samples: runs.reduce((sum, run) => sum + run.samples, 0),
    cpuUsPerRequest: round2(median(runs.map((run) => run.cpuUsPerRequest))),
    cpuUsPerRequestRuns: runs.map((run) => run.cpuUsPerRequest),
    systemUsPerRequest: round2(median(runs.map((run) => run.systemUsPerRequest))),
    areas: mapMedian(runs.map((run) => run.areas)),
    nodeLeaves: mapMedian(runs.map((run) => run.nodeLeaves)),
    ownLeaves: Object.entries(own).sort((a, b) => b[1] - a[1]).map(([leaf, usPerRequest]) => ({ function: leaf, usPerRequest })),
  };
}

function section(name, { baselineKind, candidate, baseline }) {
  const areas = [...new Set([...Object.keys(candidate.areas), ...Object.keys(baseline.areas)])]
    .map((area) => ({ area, candidate: candidate.areas[area] ?? 0, baseline: baseline.areas[area] ?? 0 }))
    .map((row) => ({ ...row, difference: round2(row.candidate - row.baseline) }))
    .sort((a, b) => b.difference - a.difference);
  return [
    `## ${ROUTES[name].what} (baseline: ${baselineKind === 'peer' ? ROUTES[name].peer : ROUTES[name].bare})`,
    '',
    `Both at ${candidate.rate} req/s (${Math.round(settings.rateShare * 100)} % of what Fleetplane sustained in the first run; medians over the runs: Fleetplane sustained ${candidate.sustainedRequestsPerSecond} req/s, the baseline ${baseline.sustainedRequestsPerSecond}). Fleetplane: ${candidate.requests} requests, ${candidate.samples} samples, ${candidate.cpuUsPerRequest} µs/request (runs ${candidate.cpuUsPerRequestRuns.join(', ')}) of which kernel ${candidate.systemUsPerRequest}. Baseline: ${baseline.requests} requests, ${baseline.samples} samples, ${baseline.cpuUsPerRequest} µs/request (runs ${baseline.cpuUsPerRequestRuns.join(', ')}) of which kernel ${baseline.systemUsPerRequest}. Each row is the median of its runs, so the rows need not add up to the total exactly.`,
    '',
    '| where (innermost module frame, else what the process was doing) | Fleetplane µs/req | baseline µs/req | difference |',
    '|---|---:|---:|---:|',
    ...areas.filter((row) => row.candidate >= 0.05 || row.baseline >= 0.05).map((row) => `| ${row.area} | ${row.candidate} | ${row.baseline} | ${row.difference} |`),
    `| **total (serving thread, /proc)** | **${candidate.cpuUsPerRequest}** | **${baseline.cpuUsPerRequest}** | **${round2(candidate.cpuUsPerRequest - baseline.cpuUsPerRequest)}** |`,
    '',
    `${NODE_CORE}: the innermost Node function, largest differences first:`,
    '',
    '| Node function | Fleetplane µs/req | baseline µs/req | difference |',
    '|---|---:|---:|---:|',
    ...[...new Set([...Object.keys(candidate.nodeLeaves), ...Object.keys(baseline.nodeLeaves)])]
      .map((leaf) => ({ leaf, candidate: candidate.nodeLeaves[leaf] ?? 0, baseline: baseline.nodeLeaves[leaf] ?? 0 }))
      .sort((a, b) => b.candidate - b.baseline - (a.candidate - a.baseline))
      .slice(0, 15)
      .map((row) => `| ${row.leaf} | ${row.candidate} | ${row.baseline} | ${round2(row.candidate - row.baseline)} |`),
    '',
    'Fleetplane\'s own functions where they are the innermost JS frame (their time and the native code they called):',
    '',
    '| function (dist file:line) | µs/req |',
    '|---|---:|',
    ...candidate.ownLeaves.filter((leaf) => leaf.usPerRequest >= 0.05).map((leaf) => `| ${leaf.function} | ${leaf.usPerRequest} |`),
    '',
  ].join('\n');
}

try {
  requireTools();
  if (!existsSync(path.join(here, '..', 'dist', 'index.js'))) throw new Error('dist/index.js is missing: run `npm run build` first');
  execFileSync('taskset', ['-a', '-p', '-c', '0', String(process.pid)], { stdio: 'ignore' });
  const upstream = new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'upstream' });
  const { port: upstreamPort } = await upstream.ready();
  const data = await seedEnvelopeData(dataDir, upstreamPort);
  const routes = {};
  for (const name of routeNames) {
    const runs = { candidate: [], baseline: [] };
    for (let run = 0; run < settings.runs; run += 1) {
      console.error(`measuring ${name}, run ${run + 1}/${settings.runs}`);
      // Every run of both sides at the rate the first run found, so that all of them compare.
      const rate = runs.candidate[0]?.rate;
      for (const side of run % 2 === 0 ? ['candidate', 'baseline'] : ['baseline', 'candidate']) {
        const started = side === 'baseline' && baselineOf(name) === 'peer' ? 'peer' : side;
        runs[side].push(await measureSide(name, started, data, upstreamPort, side === 'baseline' ? (rate ?? runs.candidate[0]?.rate) : rate));
      }
    }
    routes[name] = { baselineKind: baselineOf(name), candidate: medianRun(runs.candidate), baseline: medianRun(runs.baseline), runs };
  }
  await upstream.stop();

  const environment = { node: process.version, cpus: os.cpus().length, perf: execFileSync('perf', ['--version'], { encoding: 'utf8' }).trim(), loadavgAtEnd: os.loadavg().map(round2) };
  const result = { date: new Date().toISOString(), environment, settings, routes };
  const mdFile = path.join(here, 'results', 'envelope-perf.md');
  const previous = existsSync(mdFile) ? readFileSync(mdFile, 'utf8') : '';
  const analysis = previous.includes(ANALYSIS) ? previous.slice(previous.indexOf(ANALYSIS)) : `${ANALYSIS}\n`;
  const md = [
    '# Envelope routes: every microsecond, kernel included',
    '',
    `Single-process Fleetplane (\`workers: 0\`, no access log: \`log.requests\` is off by default) and the baseline named in each section (the peer P of bench/envelope.mjs, which logs each request in and out at info as Fastify does, or the bare route), each pinned to CPU 1, loaded by autocannon pinned to CPU 0 (${settings.connections} keep-alive connections) at the same request rate, and sampled with \`perf record -g -F ${settings.frequencyHz}\` on the serving thread for ${settings.durationS} s, ${settings.runs} runs of each side in alternation; Node ${process.version}, ${environment.perf}. A sample is charged to the innermost frame of a module (a Fleetplane file under dist/ or a package), else to what Node, V8 or the kernel were doing; a share of the samples times the serving thread's CPU per request (from /proc) gives µs per request. Rows sorted by the difference. Produced by \`node bench/envelope-perf.mjs\`.`,
    '',
    ...Object.entries(routes).map(([name, figures]) => section(name, figures)),
    analysis,
  ].join('\n');
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(path.join(here, 'results', 'envelope-perf.json'), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(mdFile, md);
  process.stdout.write(md);
} catch (error) {
  console.error(error?.stack ?? error);
  process.exitCode = 1;
} finally {
  cleanup();
}
