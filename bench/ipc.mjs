// IPC benchmark: raw `process.send` ping-pong RTT vs `server.request` to one worker (goal: p50 ≤ 1.5× raw),
// same process pair, alternating, several rounds. Writes bench/results/ipc.{json,md}.
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import autocannon from 'autocannon';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** A node process in its own process group; the group (workers included) is killed when this script exits. */
function spawnGroup(args, options) {
  const child = spawn(process.execPath, args, { ...options, detached: true });
  const kill = () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone
    }
  };
  process.on('exit', kill);
  return { child, kill };
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'fleetplane-bench-ipc-'));
const config = { workers: 1, dataDir, http: { port: 0, host: '127.0.0.1' }, log: { level: 'error' }, health: { heartbeatMs: 0 } };
const { child, kill: killGroup } = spawnGroup([path.join(root, 'bench', 'fixtures', 'ipc-server.mjs')], {
  env: { ...process.env, BENCH_CONFIG: JSON.stringify(config), BENCH_ROUNDS: '5' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const timer = setTimeout(() => {
  console.error('ipc bench timed out');
  killGroup();
  process.exit(1);
}, 180_000);

let output = '';
child.stdout.on('data', (chunk) => (output += chunk));
await new Promise((resolve) => child.on('exit', resolve));
clearTimeout(timer);
const line = output.split('\n').find((entry) => entry.startsWith('{"results"'));
if (!line) throw new Error(`no results from the fixture:\n${output}`);
const { results } = JSON.parse(line);

// `POST /control` status round trips per second, through authorization and the primary's router.
async function freePort() {
  const probe = net.createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
const cli = path.join(root, 'dist', 'cli', 'main.js');
const controlDir = mkdtempSync(path.join(tmpdir(), 'fleetplane-bench-control-'));
const initialized = spawnSync(process.execPath, [cli, 'init', '--json', '--data-dir', controlDir], { encoding: 'utf8' });
if (initialized.status !== 0) throw new Error(`init failed: ${initialized.stderr}`);
const { key } = JSON.parse(initialized.stdout);
const port = await freePort();
const { kill: stopControl } = spawnGroup([cli, 'start', '--port', String(port), '--workers', '1', '--data-dir', controlDir], {
  env: { ...process.env, FLEETPLANE_HTTP_HOST: '127.0.0.1', FLEETPLANE_LOG_LEVEL: 'error' },
  stdio: 'ignore',
});
for (let attempt = 0; attempt < 100; attempt++) {
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((reply) => reply.ok, () => false);
  if (ready) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
const control = {};
for (const [name, envelope] of [['status of the primary', { method: 'status', master: true }], ['status of worker 1', { method: 'status', worker: 1 }]]) {
  const run = await autocannon({
    url: `http://127.0.0.1:${port}/control`,
    method: 'POST',
    connections: 16,
    duration: 5,
    headers: { host: 'localhost', authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(envelope),
  });
  control[name] = { perSecond: run.requests.average, p50Ms: run.latency.p50, p99Ms: run.latency.p99, non2xx: run.non2xx, errors: run.errors };
}
stopControl();

const ratios = results.map((round) => round.request.p50Us / round.raw.p50Us);
const summary = {
  name: 'ipc',
  date: new Date().toISOString(),
  node: process.version,
  method: 'one worker; sequential round trips (2000 per round) and 64 in flight (8000 per round); raw process.send ping-pong vs server.request({ worker: 1 }); 5 alternating rounds; medians',
  rounds: results,
  median: {
    rawP50Us: median(results.map((round) => round.raw.p50Us)),
    rawP99Us: median(results.map((round) => round.raw.p99Us)),
    requestP50Us: median(results.map((round) => round.request.p50Us)),
    requestP99Us: median(results.map((round) => round.request.p99Us)),
    rawSequentialPerSecond: median(results.map((round) => round.raw.perSecond)),
    requestSequentialPerSecond: median(results.map((round) => round.request.perSecond)),
    rawConcurrentPerSecond: median(results.map((round) => round.rawConcurrent.perSecond)),
    requestConcurrentPerSecond: median(results.map((round) => round.requestConcurrent.perSecond)),
  },
  control,
  goals: [{ figure: 'request p50 RTT / raw p50 RTT', value: median(ratios), goal: '<= 1.5', met: median(ratios) <= 1.5 }],
};
const m = summary.median;
const fmt = (value) => Math.round(value).toLocaleString('en-US');
const markdown = `# IPC round trips (one worker)

| figure | raw process.send | server.request |
|---|---|---|
| RTT p50 (µs) | ${fmt(m.rawP50Us)} | ${fmt(m.requestP50Us)} |
| RTT p99 (µs) | ${fmt(m.rawP99Us)} | ${fmt(m.requestP99Us)} |
| sequential round trips/s | ${fmt(m.rawSequentialPerSecond)} | ${fmt(m.requestSequentialPerSecond)} |
| round trips/s, 64 in flight | ${fmt(m.rawConcurrentPerSecond)} | ${fmt(m.requestConcurrentPerSecond)} |

| \`POST /control\` round trips | req/s | p50 / p99 ms | non-2xx |
|---|---|---|---|
${Object.entries(control).map(([name, figures]) => `| ${name} | ${fmt(figures.perSecond)} | ${figures.p50Ms} / ${figures.p99Ms} | ${figures.non2xx} |`).join('\n')}

Goal: request p50 ≤ 1.5 × raw p50 — measured ${median(ratios).toFixed(2)}× (${summary.goals[0].met ? 'met' : 'missed'}).
Method: ${summary.method}. ${summary.date}, Node ${process.version}.
`;
mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
writeFileSync(path.join(root, 'bench', 'results', 'ipc.json'), `${JSON.stringify(summary, null, 2)}\n`);
writeFileSync(path.join(root, 'bench', 'results', 'ipc.md'), markdown);
process.stdout.write(markdown);
