#!/usr/bin/env node
// Dashboard benchmark: what an open fleet dashboard costs the server it watches.
// One Fleetplane server (2 workers, embedded store) and one headless Chromium (Debian's, through
// playwright-core). Phases of BENCH_SECONDS each (default 30): no page open (the baseline, measured in the
// same run), then the page counts of BENCH_PAGES (default 1,1,10: one page, the same page again, ten pages)
// signed in with the platform key on BENCH_VIEW (default `server`: the server view, with its sparklines;
// `cluster` is the other polled view), then no page again. Per phase:
// - CPU of the server's processes (primary and workers), user + system from /proc/<pid>/stat, as % of one core;
//   the dashboard's cost is the phase minus the mean of the two baselines, and per page that divided by the
//   pages open;
// - bytes per second per page, counted by the browser: received as encoded on the wire (HTTP headers and
//   bodies, WebSocket frames); sent as request bodies and WebSocket frames plus an estimated 400 B of headers
//   per request (the browser does not report what it sent on the wire); and requests per second per page.
// Goal: one open dashboard costs the node < 1 % of a core.
// Run after `npm run build`: `node bench/dashboard.mjs` (BENCH_SECONDS=5 for a quick check). Writes
// bench/results/dashboard.json and .md.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs } from './lib/procs.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const settings = {
  seconds: Number(process.env.BENCH_SECONDS ?? 30),
  view: process.env.BENCH_VIEW ?? 'server',
  pages: (process.env.BENCH_PAGES ?? '1,1,10').split(',').map(Number),
  chromium: process.env.FLEETPLANE_CHROMIUM ?? '/usr/bin/chromium',
};
if (!existsSync(settings.chromium)) {
  console.error(`dashboard bench: no Chromium at ${settings.chromium} (apt-get install chromium)`);
  process.exit(2);
}
const { chromium } = await import('playwright-core');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function post(port, key, envelope) {
  const response = await fetch(`http://127.0.0.1:${port}/control`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, host: 'localhost' }, body: JSON.stringify(envelope) });
  return response.json();
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-dashboard-'));
const port = await freePort();
const server = spawn(process.execPath, [path.join(root, 'dist', 'cli', 'main.js'), 'start', '--port', String(port), '--workers', '2', '--data-dir', dataDir], {
  env: { ...process.env, FLEETPLANE_LOG_LEVEL: 'warn', FLEETPLANE_MESH_PORT: String(await freePort()) },
  stdio: ['ignore', 'ignore', 'inherit'],
  detached: true,
});
const stopServer = () => {
  try {
    process.kill(-server.pid, 'SIGKILL');
  } catch {
    // gone
  }
};
process.on('exit', stopServer);

let key;
let summary;
let lastError;
server.once('exit', (code, signal) => (lastError = new Error(`the server exited (${code ?? signal})`)));
for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(250)) {
  try {
    key ??= readFileSync(path.join(dataDir, 'admin.key'), 'utf8').match(/fpk_[A-Za-z0-9_.-]+/)?.[0];
    if (!key) continue;
    const reply = await post(port, key, { method: 'overview.server', master: true });
    summary = reply.replies?.[0]?.result;
    if (summary?.workers.active === 2) break;
  } catch (error) {
    lastError = error;
  }
}
if (summary?.workers.active !== 2) throw new Error(`the server did not come up with 2 workers (${lastError?.message ?? JSON.stringify(summary?.workers)})`);
const pids = [summary.pid, ...summary.processes.map((entry) => entry.pid)];
const base = `http://localhost:${port}`;
const target = settings.view === 'cluster' ? '#/cluster' : `#/server/${encodeURIComponent(summary.server)}`;

const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: settings.chromium,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-renderer-backgrounding', '--disable-background-timer-throttling'],
});

/** A page signed in on the view, with counters of what it sends and receives. */
async function openPage() {
  const page = await context.newPage();
  const counters = { received: 0, sent: 0, requests: 0 };
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  cdp.on('Network.requestWillBeSent', (event) => {
    counters.requests += 1;
    // Request headers: an estimate (method, path, host, authorization, content type, accept...).
    counters.sent += (event.request.postData?.length ?? 0) + 400;
  });
  cdp.on('Network.loadingFinished', (event) => (counters.received += event.encodedDataLength));
  cdp.on('Network.webSocketFrameReceived', (event) => (counters.received += event.response.payloadData.length));
  cdp.on('Network.webSocketFrameSent', (event) => (counters.sent += event.response.payloadData.length));
  await page.goto(`${base}/dashboard${target}`);
  await page.fill('#key', key);
  await page.click('form button[type=submit]');
  await page.waitForSelector(settings.view === 'cluster' ? '#cluster-title' : 'tbody tr[data-worker]', { timeout: 30_000 });
  return { page, counters };
}

const cpuNow = () => pids.reduce((sum, pid) => sum + (cpuMs(pid) ?? 0), 0);

async function measure(pages) {
  await sleep(3_000);
  const before = pages.map(({ counters }) => ({ ...counters }));
  const cpu0 = cpuNow();
  const t0 = performance.now();
  await sleep(settings.seconds * 1000);
  const elapsedS = (performance.now() - t0) / 1000;
  const cpu = ((cpuNow() - cpu0) / (elapsedS * 1000)) * 100;
  const per = pages.map(({ counters }, index) => ({
    received: (counters.received - before[index].received) / elapsedS,
    sent: (counters.sent - before[index].sent) / elapsedS,
    requests: (counters.requests - before[index].requests) / elapsedS,
  }));
  const mean = (field) => (per.length ? per.reduce((sum, entry) => sum + entry[field], 0) / per.length : 0);
  return { pages: pages.length, seconds: Math.round(elapsedS * 10) / 10, cpuPercentOfCore: round(cpu), receivedBytesPerSecondPerPage: Math.round(mean('received')), sentBytesPerSecondPerPage: Math.round(mean('sent')), requestsPerSecondPerPage: round(mean('requests')) };
}

const round = (value) => Math.round(value * 100) / 100;
const phases = [];
const open = [];
try {
  phases.push({ ...(await measure(open)), phase: 'baseline (no page)' });
  for (const count of settings.pages) {
    const again = open.length === count;
    while (open.length < count) open.push(await openPage());
    phases.push({ ...(await measure(open)), phase: `${count} page${count === 1 ? '' : 's'}${again ? ' (again)' : ''}` });
  }
  // The baseline again, every page closed: the server's own idle cost drifts (a fresh server settles for a
  // while), so each phase is judged against the mean of the baselines before and after.
  while (open.length > 0) await open.pop().page.close();
  phases.push({ ...(await measure(open)), phase: 'baseline again (pages closed)' });
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  stopServer();
}

const baselines = phases.filter((entry) => entry.pages === 0);
const baseline = round(baselines.reduce((sum, entry) => sum + entry.cpuPercentOfCore, 0) / baselines.length);
for (const entry of phases.filter((phase) => phase.pages > 0)) {
  entry.dashboardCpuPercentOfCore = round(entry.cpuPercentOfCore - baseline);
  entry.perPageCpuPercentOfCore = round((entry.cpuPercentOfCore - baseline) / entry.pages);
}
const ones = phases.filter((entry) => entry.pages === 1);
// Judged by the larger of the single-page phases.
const one = ones.sort((a, b) => b.dashboardCpuPercentOfCore - a.dashboardCpuPercentOfCore)[0];
const result = {
  benchmark: 'dashboard',
  date: new Date().toISOString(),
  machine: { cpus: os.availableParallelism(), node: process.version, loadAverage: os.loadavg().map(round) },
  settings: { seconds: settings.seconds, view: settings.view, workers: 2 },
  baselineCpuPercentOfCore: baseline,
  goal: 'one open dashboard costs the node < 1 % of a core',
  met: one ? one.dashboardCpuPercentOfCore < 1 : null,
  phases,
};
mkdirSync(path.join(here, 'results'), { recursive: true });
writeFileSync(path.join(here, 'results', 'dashboard.json'), `${JSON.stringify(result, null, 2)}\n`);
const rows = phases.map((entry) =>
  `| ${entry.phase} | ${entry.cpuPercentOfCore} | ${entry.dashboardCpuPercentOfCore ?? '–'} | ${entry.perPageCpuPercentOfCore ?? '–'} | ${entry.pages ? entry.receivedBytesPerSecondPerPage : '–'} | ${entry.pages ? entry.sentBytesPerSecondPerPage : '–'} | ${entry.pages ? entry.requestsPerSecondPerPage : '–'} |`,
);
const markdown = [
  '# Dashboard: the server-side cost of open pages',
  '',
  `${result.date}, ${result.machine.cpus} CPUs, Node ${result.machine.node}, load average ${result.machine.loadAverage.join(' / ')} at the end.`,
  `One server with 2 workers; pages on the ${settings.view} view, ${settings.seconds} s per phase; CPU of the primary and its workers from /proc.`,
  `Each phase's dashboard share is its CPU less the mean of the two baselines (${baseline} % of a core); the goal is judged by the larger single-page share.`,
  '',
  '| phase | server CPU (% of a core) | dashboard share | per page | received B/s per page | sent B/s per page | requests/s per page |',
  '|---|---|---|---|---|---|---|',
  ...rows,
  '',
  `Goal: ${result.goal} — ${result.met === null ? 'not measured' : result.met ? 'met' : 'not met'} in this run.`,
  '',
].join('\n');
writeFileSync(path.join(here, 'results', 'dashboard.md'), markdown);
process.stdout.write(markdown);
