// Mesh benchmark: raw `ws` echo between two processes vs `server.mesh.send` round trips between two
// Fleetplane servers, over the same process pair and with the same payloads, alternating in the same run
// (goal: mesh round trips/s ≥ 0.8 × raw). Writes bench/results/mesh.{json,md}. `node bench/mesh.mjs` after
// a build. The file also holds the two roles it spawns (`--role responder|measurer`).
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

const root = path.resolve(import.meta.dirname, '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SEQUENTIAL = Number(process.env.BENCH_COUNT ?? 2_000);
const IN_FLIGHT = 256;
const CONCURRENT = SEQUENTIAL * 10;
const PAYLOADS = {
  '100 B': { kind: 'bench', values: [1, 2, 3], text: 'x'.repeat(54) },
  '4 KiB': { kind: 'bench', values: [1, 2, 3], text: 'x'.repeat(4_050) },
};
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const out = (record) => process.stdout.write(`${JSON.stringify(record)}\n`);

function serverConfig(id) {
  return {
    workers: 0,
    dataDir: mkdtempSync(path.join(tmpdir(), `fleetplane-bench-mesh-${id}-`)),
    db: { path: process.env.BENCH_DB },
    server: { id, cluster: 'bench' },
    http: { port: 0, host: '127.0.0.1' },
    log: { level: 'error' },
    health: { heartbeatMs: 0 },
    mesh: { port: 0, host: '127.0.0.1', secret: 'bench-mesh-secret-0123456789' },
  };
}

/** Answers mesh.echo and, on a raw ws port, echoes every message back as it came. */
async function responder() {
  const { Fleetplane } = await import('../dist/index.js');
  const { WebSocketServer } = await import('ws');
  const server = await Fleetplane.init(serverConfig('bench-a'), { handleSignals: true });
  server.mesh.handle('mesh.echo', (data) => data);
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false, maxPayload: 8 * 1024 * 1024 });
  wss.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
  await new Promise((resolve) => wss.once('listening', resolve));
  out({ ready: true, rawUrl: `ws://127.0.0.1:${wss.address().port}` });
}

/** Dials the responder both ways and measures, alternating raw and mesh within each round. */
async function measurer() {
  const { Fleetplane } = await import('../dist/index.js');
  const { default: WebSocket } = await import('ws');
  const server = await Fleetplane.init(serverConfig('bench-b'), { handleSignals: true });
  const deadline = Date.now() + 30_000;
  while (!(await server.mesh.peers()).some((peer) => peer.server === 'bench-a')) {
    if (Date.now() > deadline) throw new Error('the mesh link never formed');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const ws = new WebSocket(process.env.RAW_URL, { perMessageDeflate: false });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  // The baseline gets the bookkeeping any request/reply layer needs: ids, JSON both ways, a map of waiters.
  const waiting = new Map();
  ws.on('message', (data) => {
    const reply = JSON.parse(data);
    waiting.get(reply.id)?.(reply.data);
    waiting.delete(reply.id);
  });
  let nextId = 1;
  const raw = (payload) =>
    new Promise((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      ws.send(JSON.stringify({ id, data: payload }));
    });
  const mesh = async (payload) => {
    const reply = await server.mesh.send({ method: 'mesh.echo', server: 'bench-a', data: payload });
    if (!reply.ok) throw new Error(`mesh.send failed: ${JSON.stringify(reply.error)}`);
    return reply.result;
  };

  async function sequential(fn, payload) {
    const latencies = new Float64Array(SEQUENTIAL);
    const started = performance.now();
    for (let i = 0; i < SEQUENTIAL; i++) {
      const t0 = performance.now();
      await fn(payload);
      latencies[i] = performance.now() - t0;
    }
    const elapsed = performance.now() - started;
    latencies.sort();
    return { p50Us: latencies[Math.floor(SEQUENTIAL * 0.5)] * 1000, p99Us: latencies[Math.floor(SEQUENTIAL * 0.99)] * 1000, perSecond: SEQUENTIAL / (elapsed / 1000) };
  }
  async function concurrent(fn, payload) {
    let issued = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (issued++ < CONCURRENT) await fn(payload);
      }),
    );
    return { perSecond: CONCURRENT / ((performance.now() - started) / 1000) };
  }

  for (const payload of Object.values(PAYLOADS)) for (let i = 0; i < 500; i++) await raw(payload), await mesh(payload);
  const rounds = [];
  for (let round = 0; round < ROUNDS; round++) {
    const entry = {};
    for (const [name, payload] of Object.entries(PAYLOADS)) {
      // Alternate which goes first, so neither always runs on a warmer (or more tired) machine.
      const order = round % 2 === 0 ? ['raw', 'mesh'] : ['mesh', 'raw'];
      const figures = {};
      for (const which of order) figures[which] = await sequential(which === 'raw' ? raw : mesh, payload);
      for (const which of order) figures[`${which}Concurrent`] = await concurrent(which === 'raw' ? raw : mesh, payload);
      entry[name] = figures;
    }
    rounds.push(entry);
  }
  out({ results: rounds });
  ws.close();
  await server.shutdown('bench done');
  process.exit(0);
}

async function orchestrate() {
  const db = path.join(mkdtempSync(path.join(tmpdir(), 'fleetplane-bench-meshdb-')), 'inventory.db');
  const children = [];
  const killAll = () => {
    for (const child of children) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  };
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));
  const timer = setTimeout(() => {
    console.error('mesh bench timed out');
    process.exit(1);
  }, 600_000);
  const start = (role, env) => {
    const child = spawn(process.execPath, [import.meta.filename, '--role', role], { env: { ...process.env, BENCH_DB: db, ...env }, stdio: ['ignore', 'pipe', 'inherit'], detached: true });
    children.push(child);
    const lines = createInterface({ input: child.stdout });
    return new Promise((resolve, reject) => {
      lines.on('line', (line) => {
        try {
          const record = JSON.parse(line);
          if (record.ready || record.results) resolve(record);
        } catch {
          // a log line
        }
      });
      child.once('exit', (code) => reject(new Error(`${role} exited (${code}) before reporting`)));
    });
  };
  const { rawUrl } = await start('responder', {});
  const { results } = await start('measurer', { RAW_URL: rawUrl });
  clearTimeout(timer);
  killAll();
  report(results);
}

function report(rounds) {
  const summary = {
    name: 'mesh',
    date: new Date().toISOString(),
    node: process.version,
    method: `two Fleetplane servers (workers: 0) on 127.0.0.1, one mesh link; raw ws echo between the same two processes (deflate off, JSON with ids both ways); ${SEQUENTIAL} sequential round trips and ${CONCURRENT} with ${IN_FLIGHT} in flight per payload and round; ${ROUNDS} rounds, order alternating; medians of per-round ratios`,
    rounds,
    payloads: {},
    goals: [],
  };
  for (const name of Object.keys(PAYLOADS)) {
    const of = (which, field) => median(rounds.map((round) => round[name][which][field]));
    const ratio = (field, which = '') => median(rounds.map((round) => round[name][`mesh${which}`][field] / round[name][`raw${which}`][field]));
    summary.payloads[name] = {
      raw: { p50Us: of('raw', 'p50Us'), p99Us: of('raw', 'p99Us'), sequentialPerSecond: of('raw', 'perSecond'), concurrentPerSecond: of('rawConcurrent', 'perSecond') },
      mesh: { p50Us: of('mesh', 'p50Us'), p99Us: of('mesh', 'p99Us'), sequentialPerSecond: of('mesh', 'perSecond'), concurrentPerSecond: of('meshConcurrent', 'perSecond') },
      ratios: { sequential: ratio('perSecond'), concurrent: ratio('perSecond', 'Concurrent'), p50: ratio('p50Us') },
    };
    const { ratios } = summary.payloads[name];
    summary.goals.push({ figure: `${name}: sequential round trips/s, mesh / raw`, value: ratios.sequential, goal: '>= 0.8', met: ratios.sequential >= 0.8 });
    summary.goals.push({ figure: `${name}: round trips/s with ${IN_FLIGHT} in flight, mesh / raw`, value: ratios.concurrent, goal: '>= 0.8', met: ratios.concurrent >= 0.8 });
  }
  const fmt = (value) => Math.round(value).toLocaleString('en-US');
  const rows = Object.entries(summary.payloads).flatMap(([name, { raw, mesh, ratios }]) => [
    `| ${name} | RTT p50 (µs) | ${fmt(raw.p50Us)} | ${fmt(mesh.p50Us)} | ${ratios.p50.toFixed(2)} |`,
    `| ${name} | RTT p99 (µs) | ${fmt(raw.p99Us)} | ${fmt(mesh.p99Us)} | |`,
    `| ${name} | sequential round trips/s | ${fmt(raw.sequentialPerSecond)} | ${fmt(mesh.sequentialPerSecond)} | ${ratios.sequential.toFixed(2)} |`,
    `| ${name} | round trips/s, ${IN_FLIGHT} in flight | ${fmt(raw.concurrentPerSecond)} | ${fmt(mesh.concurrentPerSecond)} | ${ratios.concurrent.toFixed(2)} |`,
  ]);
  const markdown = `# Mesh round trips between two servers

| payload | figure | raw ws echo | server.mesh.send | mesh / raw |
|---|---|---|---|---|
${rows.join('\n')}

Goal: mesh round trips/s ≥ 0.8 × raw ws echo. ${summary.goals.map((goal) => `${goal.figure}: ${goal.value.toFixed(2)}× (${goal.met ? 'met' : 'missed'})`).join('; ')}.
Method: ${summary.method}. ${summary.date}, Node ${process.version}.
`;
  mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
  writeFileSync(path.join(root, 'bench', 'results', 'mesh.json'), `${JSON.stringify(summary, null, 2)}\n`);
  writeFileSync(path.join(root, 'bench', 'results', 'mesh.md'), markdown);
  process.stdout.write(markdown);
}

const role = process.argv[2] === '--role' ? process.argv[3] : undefined;
if (role === 'responder') await responder();
else if (role === 'measurer') await measurer();
else await orchestrate();
