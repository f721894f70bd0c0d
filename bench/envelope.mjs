#!/usr/bin/env node
// Envelope routes benchmark (SPEC 9–11): each route on three sides, the same JSON body for all three:
//   L (limit): bare Fastify, no hooks, logger off, the route's core work only (this file's bare role)
//   P (baseline): the peer a team writes by hand (bench/fixtures/peer-service.mjs): Fastify 5, pino at info, an
//      onRequest Bearer check, a TypeBox body, the same work
//   F (candidate): Fleetplane, `workers: 1`
//   workflow: POST echo  vs  POST /workflows/echo through authorization, validation and the engine
//   api:      POST that calls the upstream with undici  vs  POST /api to the same upstream
//   crud:     POST that reads one row by id with the store's own better-sqlite3 prepared statement
//             vs  POST /crud `object.read` with `filter: { _id }` (the same SQLite file, the same row)
// The sides alternate within each round (the load generator shares the 2 cores); servers are pinned to one CPU
// and the runner to the other. Server CPU per request (from /proc) gives the CPU-efficiency ratio (P's or L's µs
// per request ÷ F's), the primary figure: it moves far less with other load than req/s. Two passes: full load
// (autocannon) and one rate for every side, evenly paced (bench/lib/load.mjs `pacedLoad`).
// Run after `npm run build`: `node bench/envelope.mjs`.
// Writes bench/results/envelope.json and .md (keeping whatever follows the .md's ANALYSIS marker line).
// Environment: BENCH_ROUNDS (default 5), BENCH_DURATION_S (default 4), BENCH_CONNECTIONS (default 32),
// BENCH_PAIRS (a subset such as `workflow,crud`: printed, not written), BENCH_PIN=0 (no CPU pinning).
// The same file is also each helper process (BENCH_ENVELOPE_ROLE=upstream|bare), so every process it starts
// runs in its own process group and is killed at the end, on failure and on Ctrl-C.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ANALYSIS = '<!-- ANALYSIS: everything below this line is kept when the benchmark rewrites the file -->';
const role = process.env.BENCH_ENVELOPE_ROLE;
async function upstreamRole() {
  const { emit, exitWithParent } = await import('./fixtures/protocol.mjs');
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      const id = decodeURIComponent(request.url.split('/').pop());
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id, ...body }));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  exitWithParent(() => new Promise((resolve) => server.close(resolve)));
  emit({ type: 'ready', port: server.address().port, pid: process.pid });
}

async function bareRole() {
  const { emit, exitWithParent } = await import('./fixtures/protocol.mjs');
  const { default: Fastify } = await import('fastify');
  const { Pool } = await import('undici');
  const { default: Database } = await import('better-sqlite3');
  // The statement the embedded store prepares for a read by id (src/db/embedded/store.ts `documentById`).
  const db = new Database(process.env.BENCH_DB_FILE, { readonly: true, fileMustExist: true });
  const documentById = db.prepare('SELECT doc FROM documents WHERE collection = ? AND id = ?').pluck();
  const organizationId = process.env.BENCH_ORGANIZATION_ID;
  const pool = new Pool(`http://127.0.0.1:${process.env.BENCH_UPSTREAM_PORT}`, { connections: 32, keepAliveTimeout: 4_000 });
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
  app.post('/echo', async (request, reply) => {
    reply.header('cache-control', 'no-store');
    return request.body;
  });
  // What /api does at its core, without authorization, validation or the provider lookup.
  app.post('/proxy', async (request, reply) => {
    const { id, ...rest } = request.body.data;
    const response = await pool.request({ method: 'POST', path: `/items/${encodeURIComponent(id)}`, headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(rest) });
    const data = await response.body.json();
    reply.header('cache-control', 'no-store');
    return { status: response.statusCode, data };
  });
  // What /crud object.read by id does at its core: one prepared statement, the row parsed, the tenant checked.
  // The probe bench/envelope-perf.mjs compares with Fleetplane's: the same route as bench/runtime's baseline.
  const { addBareHealthz } = await import('./fixtures/bare-healthz.mjs');
  addBareHealthz(app, { status: 'ready', server: 'bare', worker: 0 });
  app.post('/read', async (request, reply) => {
    const { collection, filter } = request.body;
    const text = documentById.get(collection, filter._id);
    const document = text === undefined ? undefined : JSON.parse(text);
    reply.header('cache-control', 'no-store');
    return { documents: document && document.organization_id === organizationId ? [document] : [] };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  exitWithParent(() => (app.close(), db.close()));
  // A graceful exit on SIGTERM, so that a profiled run (bench/envelope-profile.mjs) writes its profile.
  process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
  emit({ type: 'ready', port: app.server.address().port, pid: process.pid });
}

async function runner() {
  const { default: autocannon } = await import('autocannon');
  const { execFileSync } = await import('node:child_process');
  const { Fixture, cpuPreciseMs, cpuSplitMs, killAll } = await import('./lib/procs.mjs');
  const { pacedLoad, postBuffer } = await import('./lib/load.mjs');
  const { BODY_BYTES, seedEnvelopeData } = await import('./lib/envelope-data.mjs');

  const settings = {
    rounds: Number(process.env.BENCH_ROUNDS ?? 5),
    durationS: Number(process.env.BENCH_DURATION_S ?? 4),
    connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
    bodyBytes: BODY_BYTES,
    /** The paced pass offers every side this share of the rate Fleetplane sustained at full load. */
    pacedShare: 0.85,
    /** Servers on the last CPU, the runner (load generator) and the upstream on the first. */
    pin: process.env.BENCH_PIN !== '0' && os.cpus().length >= 2,
  };
  // Minimum CPU-efficiency against the peer P (its µs per request ÷ Fleetplane's), the primary figure.
  const GOALS = { workflow: 0.9, api: 0.9, crud: 0.9 };
  const SIDES = ['limit', 'baseline', 'candidate'];
  const LABEL = { limit: 'L', baseline: 'P', candidate: 'F' };
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-bench-envelope-'));
  const cleanup = () => {
    killAll();
    rmSync(dataDir, { recursive: true, force: true });
  };
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => (cleanup(), process.exit(130)));
  const median = (values) => {
    const sorted = [...values].sort((a, b) => a - b);
    const middle = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  };
  const round2 = (value) => Math.round(value * 100) / 100;
  const spread = (values) => ({ median: round2(median(values)), min: round2(Math.min(...values)), max: round2(Math.max(...values)), rounds: values.map(round2) });
  const pin = (cpu, pid) => settings.pin && execFileSync('taskset', ['-a', '-cp', String(cpu), String(pid)], { stdio: 'ignore' });
  const serverCpu = os.cpus().length - 1;

  try {
    pin(0, process.pid);
    // Helper processes are this file in another role; Fixture resolves names under bench/fixtures/.
    const upstream = new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'upstream' });
    const { port: upstreamPort, pid: upstreamPid } = await upstream.ready();
    pin(0, upstreamPid);
    const { dbFile, organizationId, key, json, withKey, bodies, answers } = await seedEnvelopeData(dataDir, upstreamPort);
    const data = { BENCH_UPSTREAM_PORT: String(upstreamPort), BENCH_DB_FILE: dbFile, BENCH_ORGANIZATION_ID: organizationId };
    const bare = new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'bare', ...data });
    const peer = new Fixture('peer-service.mjs', { ...data, BENCH_PEER_KEY: key });
    const fleetplane = new Fixture('fleetplane.mjs', {
      BENCH_FP_CONFIG: JSON.stringify({ dataDir, workers: 1, http: { port: 0, host: '127.0.0.1' }, log: { level: 'warn', requests: false } }),
    });
    const [{ port: barePort, pid: barePid }, { port: peerPort, pid: peerPid }, { port: fpPort, workers: fpWorkers }] = await Promise.all([bare.ready(), peer.ready(), fleetplane.ready(60_000)]);
    // Fleetplane's CPU is its worker's and its primary's (which hands the connections over).
    const processes = { limit: [barePid], baseline: [peerPid], candidate: [fpWorkers[0], fleetplane.pid] };
    for (const pids of Object.values(processes)) for (const pid of pids) pin(serverCpu, pid);

    const side = (port, route, headers, body, pids) => ({ port, route, url: `http://127.0.0.1:${port}${route}`, body, headers, pids });
    const pairs = {
      workflow: { limit: side(barePort, '/echo', json, bodies.workflow, processes.limit), baseline: side(peerPort, '/echo', withKey, bodies.workflow, processes.baseline), candidate: side(fpPort, '/workflows/echo', withKey, bodies.workflow, processes.candidate) },
      api: { limit: side(barePort, '/proxy', json, bodies.api, processes.limit), baseline: side(peerPort, '/proxy', withKey, bodies.api, processes.baseline), candidate: side(fpPort, '/api', withKey, bodies.api, processes.candidate) },
      crud: { limit: side(barePort, '/read', json, bodies.crud, processes.limit), baseline: side(peerPort, '/read', withKey, bodies.crud, processes.baseline), candidate: side(fpPort, '/crud', withKey, bodies.crud, processes.candidate) },
    };
    // BENCH_PAIRS=workflow,crud measures only those pairs and prints their figures without writing the results.
    const only = process.env.BENCH_PAIRS ? process.env.BENCH_PAIRS.split(',') : undefined;
    if (only) for (const name of Object.keys(pairs)) if (!only.includes(name)) delete pairs[name];

    const sum = (values) => values.reduce((total, value) => total + value, 0);
    /** Runs `drive()` against one side and charges the servers' CPU to the requests answered. */
    const measured = async (target, drive) => {
      const before = { total: sum(target.pids.map(cpuPreciseMs)), system: sum(target.pids.map((pid) => cpuSplitMs(pid).system)) };
      const result = await drive();
      const after = { total: sum(target.pids.map(cpuPreciseMs)), system: sum(target.pids.map((pid) => cpuSplitMs(pid).system)) };
      if (result.failed > 0) throw new Error(`${target.url}: ${result.failed} failed requests`);
      // The kernel part comes in clock ticks (10 ms): read it over whole runs only.
      return { ...result, serverCpuUsPerRequest: ((after.total - before.total) * 1000) / result.requests, serverSystemCpuUsPerRequest: ((after.system - before.system) * 1000) / result.requests };
    };
    // Full load: autocannon, every connection sending its next request as soon as the answer is in.
    const fullLoad = (target) =>
      measured(target, async () => {
        const result = await autocannon({ url: target.url, body: target.body, headers: target.headers, method: 'POST', connections: settings.connections, duration: settings.durationS });
        return { requests: result.requests.total, failed: result.errors + result.timeouts + result.non2xx, requestsPerSecond: result.requests.average, p50Ms: result.latency.p50, p99Ms: result.latency.p99 };
      });
    // One rate for every side, evenly paced (bench/lib/load.mjs `pacedLoad`): one request per connection per interval.
    const paced = (target, rate) => measured(target, () => pacedLoad({ port: target.port, request: postBuffer('127.0.0.1', target.port, target.route, target.headers, target.body), connections: settings.connections, rate, durationMs: settings.durationS * 1000 }));

    // Each side must answer what it is meant to before anything is measured; then one short warm-up each.
    for (const [name, pair] of Object.entries(pairs)) {
      for (const which of SIDES) {
        const response = await fetch(pair[which].url, { method: 'POST', body: pair[which].body, headers: pair[which].headers });
        const reply = await response.json();
        if (response.status !== 200 || !answers[name](reply)) throw new Error(`${pair[which].url} answered ${response.status} ${JSON.stringify(reply).slice(0, 200)}`);
      }
    }
    for (const pair of Object.values(pairs)) for (const which of SIDES) await measured(pair[which], () => autocannon({ url: pair[which].url, body: pair[which].body, headers: pair[which].headers, method: 'POST', connections: settings.connections, duration: 1 }).then((result) => ({ requests: result.requests.total, failed: 0 })));

    // The three sides alternate within each round, in reverse order every other round (the client shares the CPUs).
    const runRounds = async (pass, drive) => {
      for (let round = 0; round < settings.rounds; round += 1) {
        for (const [name, pair] of Object.entries(pairs)) {
          const runs = {};
          for (const which of round % 2 === 0 ? SIDES : [...SIDES].reverse()) runs[which] = await drive(pair[which], name);
          samples[name][pass].push(runs);
        }
        console.error(`${pass}: round ${round + 1}/${settings.rounds} done`);
      }
    };
    const samples = Object.fromEntries(Object.keys(pairs).map((name) => [name, { full: [], paced: [] }]));
    await runRounds('full', (target) => fullLoad(target));
    const rates = Object.fromEntries(Object.keys(pairs).map((name) => [name, Math.round(median(samples[name].full.map((runs) => runs.candidate.requestsPerSecond)) * settings.pacedShare)]));
    await runRounds('paced', (target, name) => paced(target, rates[name]));

    const summarize = (runs) => ({
      ...Object.fromEntries(
        SIDES.map((which) => [
          which,
          {
            requestsPerSecond: Math.round(median(runs.map((run) => run[which].requestsPerSecond))),
            p50Ms: round2(median(runs.map((run) => run[which].p50Ms))),
            p99Ms: round2(median(runs.map((run) => run[which].p99Ms))),
            serverCpuUsPerRequest: spread(runs.map((run) => run[which].serverCpuUsPerRequest)),
            serverSystemCpuUsPerRequest: round2(median(runs.map((run) => run[which].serverSystemCpuUsPerRequest))),
          },
        ]),
      ),
      // Efficiency: the reference's CPU per request ÷ Fleetplane's, per round; P against L says what P's own work costs.
      efficiencyAgainstPeer: spread(runs.map((run) => run.baseline.serverCpuUsPerRequest / run.candidate.serverCpuUsPerRequest)),
      efficiencyAgainstLimit: spread(runs.map((run) => run.limit.serverCpuUsPerRequest / run.candidate.serverCpuUsPerRequest)),
      peerAgainstLimit: spread(runs.map((run) => run.limit.serverCpuUsPerRequest / run.baseline.serverCpuUsPerRequest)),
      throughputAgainstPeer: spread(runs.map((run) => run.candidate.requestsPerSecond / run.baseline.requestsPerSecond)),
    });
    const figures = {};
    const goals = {};
    for (const [name, sample] of Object.entries(samples)) {
      const full = summarize(sample.full);
      figures[name] = {
        full,
        paced: { requestsPerSecond: rates[name], ...summarize(sample.paced) },
        // The figures bench/compare-builds.mjs reads.
        medianCpuRatio: full.efficiencyAgainstPeer.median,
        medianRatio: full.throughputAgainstPeer.median,
        candidateServerCpuUsPerRequest: full.candidate.serverCpuUsPerRequest.median,
      };
      goals[name] = { goal: `CPU-efficiency against P ≥ ${GOALS[name]}×`, met: figures[name].medianCpuRatio >= GOALS[name] };
    }
    const cpuCell = (figure) => `${figure.median} (${figure.min}–${figure.max})`;
    const sideRows = (name, pass) =>
      SIDES.map((which) => {
        const f = figures[name][pass][which];
        return `| ${name} | ${LABEL[which]} | ${f.requestsPerSecond} | ${f.p50Ms} / ${f.p99Ms} | ${cpuCell(f.serverCpuUsPerRequest)} | ${f.serverSystemCpuUsPerRequest} |`;
      }).join('\n');
    const ratioRow = (name, pass) => {
      const f = figures[name][pass];
      return `| ${name} | ${cpuCell(f.efficiencyAgainstPeer)} | ${cpuCell(f.efficiencyAgainstLimit)} | ${cpuCell(f.peerAgainstLimit)} | ${f.efficiencyAgainstPeer.rounds.join(', ')} |`;
    };
    const passTables = (pass) => `| pair | side | req/s | p50 / p99 ms | server CPU µs/req, median (min–max) | of which kernel |
|---|---|---:|---:|---:|---:|
${Object.keys(figures).map((name) => sideRows(name, pass)).join('\n')}

| pair | F efficiency against P | F efficiency against L | P against L | F against P, per round |
|---|---:|---:|---:|---|
${Object.keys(figures).map((name) => ratioRow(name, pass)).join('\n')}`;
    if (only) {
      console.log(`${passTables('full')}\n\nPaced at ${Object.entries(rates).map(([name, rate]) => `${name} ${rate}`).join(', ')} req/s:\n\n${passTables('paced')}`);
      await Promise.all([fleetplane.stop(), peer.stop(), bare.stop(), upstream.stop()]);
      return;
    }
    const environment = { node: process.version, platform: `${process.platform} ${process.arch}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model };
    const result = { date: new Date().toISOString(), environment, settings, figures, goals };
    const md = `# Envelope routes benchmark

Three sides per route, the same JSON body for each (${BODY_BYTES} bytes for workflow and api):
- **L**, the limit: bare Fastify, no hooks, logger off, doing the route's core work only (bench/envelope.mjs, bare role);
- **P**, the baseline: the peer a team writes by hand (bench/fixtures/peer-service.mjs): Fastify 5, pino at info, an onRequest Bearer check (key id in a Map, SHA-256 and \`timingSafeEqual\`, a permission check on the method), a TypeBox-validated body, the same work;
- **F**, Fleetplane, \`workers: 1\` (CPU: the worker's plus the primary's, which hands the connections over).

${settings.rounds} rounds, ${settings.durationS} s per run, ${settings.connections} keep-alive connections, the three sides alternating in each round (reversed every other round). ${settings.pin ? `Servers pinned to CPU ${serverCpu}, the load generator and the upstream to CPU 0` : 'Not pinned'}; ${environment.cpus} CPUs, Node ${process.version}. Server CPU per request is the servers' threads' on-CPU time (/proc schedstat, user and kernel) over the run ÷ requests answered; the kernel part comes from /proc stat in 10 ms ticks; an efficiency is the reference's µs per request ÷ Fleetplane's, the median (min–max) of per-round ratios.

| pair | goal | F efficiency against P (full load) | met |
|---|---|---:|---|
${Object.keys(figures).map((name) => `| ${name} | ${goals[name].goal} | ${figures[name].medianCpuRatio}× | ${goals[name].met ? 'yes' : 'no'} |`).join('\n')}

## Full load (autocannon, ${settings.connections} connections)

${passTables('full')}

## One rate, evenly paced

Every side offered ${Math.round(settings.pacedShare * 100)} % of the rate Fleetplane sustained at full load (${Object.entries(rates).map(([name, rate]) => `${name} ${rate} req/s`).join(', ')}), each connection sending one request per interval, the connections' start times spread over the interval (bench/lib/load.mjs \`pacedLoad\`); latency from each request's write to its complete answer.

${passTables('paced')}
`;
    mkdirSync(path.join(here, 'results'), { recursive: true });
    const mdFile = path.join(here, 'results', 'envelope.md');
    const previous = existsSync(mdFile) ? readFileSync(mdFile, 'utf8') : '';
    const analysis = previous.includes(ANALYSIS) ? `\n${previous.slice(previous.indexOf(ANALYSIS))}` : '';
    writeFileSync(path.join(here, 'results', 'envelope.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(mdFile, md + analysis);
    process.stdout.write(md);
    await Promise.all([fleetplane.stop(), peer.stop(), bare.stop(), upstream.stop()]);
    process.exitCode = Object.values(goals).every((goal) => goal.met) ? 0 : 1;
  } finally {
    cleanup();
  }
}

if (role === 'upstream') await upstreamRole();
else if (role === 'bare') await bareRole();
else await runner();
