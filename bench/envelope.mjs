#!/usr/bin/env node
// Envelope routes benchmark (SPEC 9–11), one worker each, the same 300-byte JSON body for both sides of a pair:
//   workflow: bare Fastify POST echo  vs  POST /workflows/echo through authorization, validation and the engine
//   api:      bare Fastify POST that calls the upstream with undici directly  vs  POST /api to the same upstream
//   crud:     bare Fastify POST that reads one row by id with the store's own better-sqlite3 prepared statement
//             vs  POST /crud `object.read` with `filter: { _id }` (the same SQLite file, the same row)
// Baseline and candidate alternate within each round (the load generator shares the 2 cores); the figures are
// medians of per-round ratios. Server CPU per request (the serving process, from /proc) gives the CPU-efficiency
// ratio (baseline ÷ candidate µs per request), the primary figure: it moves far less with other load than req/s.
// Run after `npm run build`: `node bench/envelope.mjs`.
// Writes bench/results/envelope.json and .md (keeping whatever follows the .md's ANALYSIS marker line). Environment: BENCH_ROUNDS (default 5), BENCH_DURATION_S (default 4),
// BENCH_CONNECTIONS (default 32), BENCH_PAIRS (a subset such as `workflow,crud`: printed, not written).
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
  const { Fixture, cpuSplitMs, killAll } = await import('./lib/procs.mjs');
  const { BODY_BYTES, seedEnvelopeData } = await import('./lib/envelope-data.mjs');

  const settings = {
    rounds: Number(process.env.BENCH_ROUNDS ?? 5),
    durationS: Number(process.env.BENCH_DURATION_S ?? 4),
    connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
    bodyBytes: BODY_BYTES,
    /** The second pass offers both sides this share of the rate Fleetplane sustained in the first. */
    sameRateShare: 0.85,
  };
  // Minimum CPU-efficiency ratios (the primary figure); throughput ratios are reported next to them.
  const GOALS = { workflow: 0.75, api: 0.8, crud: 0.6 };
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

  try {
    // Helper processes are this file in another role; Fixture resolves names under bench/fixtures/.
    const upstream = new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'upstream' });
    const { port: upstreamPort } = await upstream.ready();
    const { dbFile, organizationId, json, withKey, bodies, answers } = await seedEnvelopeData(dataDir, upstreamPort);
    const bare = new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'bare', BENCH_UPSTREAM_PORT: String(upstreamPort), BENCH_DB_FILE: dbFile, BENCH_ORGANIZATION_ID: organizationId });
    const fleetplane = new Fixture('fleetplane.mjs', {
      BENCH_FP_CONFIG: JSON.stringify({ dataDir, workers: 1, http: { port: 0, host: '127.0.0.1' }, log: { level: 'warn', requests: false } }),
    });
    const [{ port: barePort, pid: barePid }, { port: fpPort, workers: fpWorkers }] = await Promise.all([bare.ready(), fleetplane.ready(60_000)]);
    const fpWorkerPid = fpWorkers[0];

    const pairs = {
      workflow: {
        baseline: { url: `http://127.0.0.1:${barePort}/echo`, body: bodies.workflow, headers: json, pid: barePid },
        candidate: { url: `http://127.0.0.1:${fpPort}/workflows/echo`, body: bodies.workflow, headers: withKey, pid: fpWorkerPid },
      },
      api: {
        baseline: { url: `http://127.0.0.1:${barePort}/proxy`, body: bodies.api, headers: json, pid: barePid },
        candidate: { url: `http://127.0.0.1:${fpPort}/api`, body: bodies.api, headers: withKey, pid: fpWorkerPid },
      },
      crud: {
        baseline: { url: `http://127.0.0.1:${barePort}/read`, body: bodies.crud, headers: json, pid: barePid },
        candidate: { url: `http://127.0.0.1:${fpPort}/crud`, body: bodies.crud, headers: withKey, pid: fpWorkerPid },
      },
    };

    // BENCH_PAIRS=workflow,crud measures only those pairs and prints their figures without writing the results.
    const only = process.env.BENCH_PAIRS ? process.env.BENCH_PAIRS.split(',') : undefined;
    if (only) for (const name of Object.keys(pairs)) if (!only.includes(name)) delete pairs[name];
    // Server CPU per request is measured too: unlike throughput, it does not move with what else the machine runs.
    const load = async ({ url, body, headers, pid }, durationS, overallRate) => {
      const cpuBefore = cpuSplitMs(pid);
      const result = await autocannon({ url, body, headers, method: 'POST', connections: settings.connections, duration: durationS, ...(overallRate ? { overallRate } : {}) });
      const cpuAfter = cpuSplitMs(pid);
      const cpuUsedMs = cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system;
      const failed = result.errors + result.timeouts + result.non2xx;
      if (failed > 0) throw new Error(`${url}: ${failed} failed requests (${result.non2xx} non-2xx)`);
      return { requestsPerSecond: result.requests.average, p50Ms: result.latency.p50, p99Ms: result.latency.p99, serverCpuUsPerRequest: (cpuUsedMs * 1000) / result.requests.total, serverSystemCpuUsPerRequest: ((cpuAfter.system - cpuBefore.system) * 1000) / result.requests.total };
    };
    // Each side must answer what it is meant to before anything is measured.
    for (const [name, pair] of Object.entries(pairs)) {
      for (const side of ['baseline', 'candidate']) {
        const response = await fetch(pair[side].url, { method: 'POST', body: pair[side].body, headers: pair[side].headers });
        const reply = await response.json();
        if (response.status !== 200 || !answers[name](reply)) throw new Error(`${pair[side].url} answered ${response.status} ${JSON.stringify(reply).slice(0, 200)}`);
      }
    }
    for (const pair of Object.values(pairs)) for (const side of ['baseline', 'candidate']) await load(pair[side], 1);

    const samples = Object.fromEntries(Object.keys(pairs).map((name) => [name, { baseline: [], candidate: [], ratio: [], cpuRatio: [] }]));
    for (let round = 0; round < settings.rounds; round += 1) {
      for (const [name, pair] of Object.entries(pairs)) {
        const order = round % 2 === 0 ? ['baseline', 'candidate'] : ['candidate', 'baseline'];
        const measured = {};
        for (const side of order) measured[side] = await load(pair[side], settings.durationS);
        samples[name].baseline.push(measured.baseline);
        samples[name].candidate.push(measured.candidate);
        samples[name].ratio.push(measured.candidate.requestsPerSecond / measured.baseline.requestsPerSecond);
        samples[name].cpuRatio.push(measured.baseline.serverCpuUsPerRequest / measured.candidate.serverCpuUsPerRequest);
      }
      console.error(`round ${round + 1}/${settings.rounds} done`);
    }

    // The same pairs again with both sides offered the same rate, a share of what Fleetplane sustained: at full
    // load the faster side also gets larger event-loop batches and finds its client awake more often (fewer
    // wake-ups per answer), so part of the full-load gap could follow from the slower side being slower. At one
    // rate that part is gone and what remains is the work per request.
    for (const [name, pair] of Object.entries(pairs)) {
      const rate = Math.round(median(samples[name].candidate.map((run) => run.requestsPerSecond)) * settings.sameRateShare);
      samples[name].sameRate = { rate, cpuRatio: [], baseline: [], candidate: [] };
      for (let round = 0; round < settings.rounds; round += 1) {
        const order = round % 2 === 0 ? ['baseline', 'candidate'] : ['candidate', 'baseline'];
        const measured = {};
        for (const side of order) measured[side] = await load(pair[side], settings.durationS, rate);
        samples[name].sameRate.baseline.push(measured.baseline.serverCpuUsPerRequest);
        samples[name].sameRate.candidate.push(measured.candidate.serverCpuUsPerRequest);
        samples[name].sameRate.cpuRatio.push(measured.baseline.serverCpuUsPerRequest / measured.candidate.serverCpuUsPerRequest);
      }
      console.error(`${name} at ${rate} req/s done`);
    }

    const figures = {};
    const goals = {};
    for (const [name, sample] of Object.entries(samples)) {
      figures[name] = {
        baselineRequestsPerSecond: Math.round(median(sample.baseline.map((run) => run.requestsPerSecond))),
        candidateRequestsPerSecond: Math.round(median(sample.candidate.map((run) => run.requestsPerSecond))),
        baselineP50Ms: median(sample.baseline.map((run) => run.p50Ms)),
        candidateP50Ms: median(sample.candidate.map((run) => run.p50Ms)),
        candidateP99Ms: median(sample.candidate.map((run) => run.p99Ms)),
        medianRatio: round2(median(sample.ratio)),
        ratios: sample.ratio.map(round2),
        baselineServerCpuUsPerRequest: round2(median(sample.baseline.map((run) => run.serverCpuUsPerRequest))),
        candidateServerCpuUsPerRequest: round2(median(sample.candidate.map((run) => run.serverCpuUsPerRequest))),
        // Kernel time (socket reads and writes): tells the cost of I/O from the cost of the code.
        baselineServerSystemCpuUsPerRequest: round2(median(sample.baseline.map((run) => run.serverSystemCpuUsPerRequest))),
        candidateServerSystemCpuUsPerRequest: round2(median(sample.candidate.map((run) => run.serverSystemCpuUsPerRequest))),
        medianCpuRatio: round2(median(sample.cpuRatio)),
        cpuRatios: sample.cpuRatio.map(round2),
        sameRate: {
          requestsPerSecond: sample.sameRate.rate,
          baselineServerCpuUsPerRequest: round2(median(sample.sameRate.baseline)),
          candidateServerCpuUsPerRequest: round2(median(sample.sameRate.candidate)),
          medianCpuRatio: round2(median(sample.sameRate.cpuRatio)),
          cpuRatios: sample.sameRate.cpuRatio.map(round2),
        },
      };
      goals[name] = { goal: `CPU-efficiency ≥ ${GOALS[name]}×`, met: figures[name].medianCpuRatio >= GOALS[name] };
    }
    if (only) {
      for (const [name, figure] of Object.entries(figures)) {
        console.log(`${name}: CPU µs/req ${figure.baselineServerCpuUsPerRequest} / ${figure.candidateServerCpuUsPerRequest} (kernel ${figure.baselineServerSystemCpuUsPerRequest} / ${figure.candidateServerSystemCpuUsPerRequest}), CPU-efficiency ${figure.medianCpuRatio}× (rounds ${figure.cpuRatios.join(', ')}), throughput ${figure.medianRatio}×; at ${figure.sameRate.requestsPerSecond} req/s both: ${figure.sameRate.baselineServerCpuUsPerRequest} / ${figure.sameRate.candidateServerCpuUsPerRequest} µs, ${figure.sameRate.medianCpuRatio}× (rounds ${figure.sameRate.cpuRatios.join(', ')})`);
      }
      await Promise.all([fleetplane.stop(), bare.stop(), upstream.stop()]);
      return;
    }
    const environment = { node: process.version, platform: `${process.platform} ${process.arch}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model };
    const result = { date: new Date().toISOString(), environment, settings, figures, goals };
    const row = (name, what, baseline) =>
      `| ${what} | ${baseline} | ${figures[name].baselineRequestsPerSecond} | ${figures[name].candidateRequestsPerSecond} | ${figures[name].candidateP50Ms} / ${figures[name].candidateP99Ms} | ${figures[name].medianRatio}× | ${figures[name].baselineServerCpuUsPerRequest} / ${figures[name].candidateServerCpuUsPerRequest} | ${figures[name].baselineServerSystemCpuUsPerRequest} / ${figures[name].candidateServerSystemCpuUsPerRequest} | ${figures[name].medianCpuRatio}× | ${goals[name].goal} | ${goals[name].met ? 'yes' : 'no'} |`;
    const md = `# Envelope routes benchmark

One worker each (Fleetplane: \`workers: 1\`, the primary hands the connections over), ${settings.connections} keep-alive connections, ${settings.durationS} s per run, the same JSON body for both sides of a pair (${BODY_BYTES} bytes for workflow and api), ${settings.rounds} rounds with baseline and candidate alternating; medians of per-round ratios. The goal is on the CPU-efficiency ratio. The load generator (autocannon, in the runner) shares the machine's ${environment.cpus} CPUs. Node ${process.version}.

| candidate | baseline | baseline req/s | candidate req/s | candidate p50 / p99 ms | throughput ratio | server CPU µs/req (baseline / candidate) | of which kernel (baseline / candidate) | CPU-efficiency ratio | goal | met |
|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|
${row('workflow', '`POST /workflows/echo` (authorization, validation, engine; `output: "${input}"`)', 'bare Fastify POST echo')}
${row('api', '`POST /api` → local upstream (authorization, provider lookup, path parameter, undici pool)', 'bare Fastify POST → undici pool → the same upstream')}
${row('crud', '`POST /crud` `object.read`, `filter: { _id }` (authorization, envelope checks, scoped store read, redaction)', 'bare Fastify POST → the same better-sqlite3 prepared statement, same row')}

Per-round throughput ratios: workflow ${figures.workflow.ratios.join(', ')}; api ${figures.api.ratios.join(', ')}; crud ${figures.crud.ratios.join(', ')}. Per-round CPU-efficiency ratios: workflow ${samples.workflow.cpuRatio.map(round2).join(', ')}; api ${samples.api.cpuRatio.map(round2).join(', ')}; crud ${samples.crud.cpuRatio.map(round2).join(', ')}. The CPU-efficiency ratio is baseline ÷ candidate server CPU time per request (the serving process only, user + system time read from /proc), which other load on the machine moves far less than throughput; the kernel (system) part is mostly socket reads and writes.


Both sides at the same rate (${Math.round(settings.sameRateShare * 100)} % of what Fleetplane sustained above), ${settings.rounds} rounds alternating: at full load the faster side also gets larger event-loop batches and finds its client awake more often (fewer wake-ups per answer), so part of the full-load gap could follow from the slower side being slower; at one rate that part is gone and what remains is the work per request. The goals are on the full-load ratio above.

| pair | rate, req/s (both) | server CPU µs/req (baseline / candidate) | CPU-efficiency ratio at that rate | rounds |
|---|---:|---:|---:|---|
${Object.keys(figures).map((name) => `| ${name} | ${figures[name].sameRate.requestsPerSecond} | ${figures[name].sameRate.baselineServerCpuUsPerRequest} / ${figures[name].sameRate.candidateServerCpuUsPerRequest} | ${figures[name].sameRate.medianCpuRatio}× | ${figures[name].sameRate.cpuRatios.join(', ')} |`).join('\n')}
`;
    mkdirSync(path.join(here, 'results'), { recursive: true });
    const mdFile = path.join(here, 'results', 'envelope.md');
    const previous = existsSync(mdFile) ? readFileSync(mdFile, 'utf8') : '';
    const analysis = previous.includes(ANALYSIS) ? `\n${previous.slice(previous.indexOf(ANALYSIS))}` : '';
    writeFileSync(path.join(here, 'results', 'envelope.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(mdFile, md + analysis);
    process.stdout.write(md);
    await Promise.all([fleetplane.stop(), bare.stop(), upstream.stop()]);
    process.exitCode = Object.values(goals).every((goal) => goal.met) ? 0 : 1;
  } finally {
    cleanup();
  }
}

if (role === 'upstream') await upstreamRole();
else if (role === 'bare') await bareRole();
else await runner();
