#!/usr/bin/env node
// Envelope routes benchmark (SPEC 9–11), one worker each, the same 300-byte JSON body for both sides of a pair:
//   workflow: bare Fastify POST echo  vs  POST /workflows/echo through authorization, validation and the engine
//   api:      bare Fastify POST that calls the upstream with undici directly  vs  POST /api to the same upstream
// Baseline and candidate alternate within each round (the load generator shares the 2 cores); the figures are
// medians of per-round throughput ratios. Run after `npm run build`: `node bench/envelope.mjs`.
// Writes bench/results/envelope.json and .md. Environment: BENCH_ROUNDS (default 5), BENCH_DURATION_S (default 4),
// BENCH_CONNECTIONS (default 32).
// The same file is also each helper process (BENCH_ENVELOPE_ROLE=upstream|bare), so every process it starts
// runs in its own process group and is killed at the end, on failure and on Ctrl-C.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const role = process.env.BENCH_ENVELOPE_ROLE;
const BODY_BYTES = 300;

/** A JSON text of exactly BODY_BYTES bytes: `make(padding)` with the padding grown to fit. */
function sized(make) {
  const empty = JSON.stringify(make(''));
  const text = JSON.stringify(make('x'.repeat(BODY_BYTES - Buffer.byteLength(empty))));
  if (Buffer.byteLength(text) !== BODY_BYTES) throw new Error(`body is ${Buffer.byteLength(text)} bytes, not ${BODY_BYTES}`);
  return text;
}

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
  await app.listen({ port: 0, host: '127.0.0.1' });
  exitWithParent(() => app.close());
  emit({ type: 'ready', port: app.server.address().port, pid: process.pid });
}

async function runner() {
  const { default: autocannon } = await import('autocannon');
  const { Fixture, cpuMs, killAll } = await import('./lib/procs.mjs');
  const { EmbeddedStore } = await import('../dist/src/db/embedded/store.js');
  const { ensureStandardIndexes } = await import('../dist/src/db/open.js');
  const { createOrganization } = await import('../dist/src/auth/organizations.js');
  const { createKey } = await import('../dist/src/auth/keys.js');

  const settings = {
    rounds: Number(process.env.BENCH_ROUNDS ?? 5),
    durationS: Number(process.env.BENCH_DURATION_S ?? 4),
    connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
    bodyBytes: BODY_BYTES,
  };
  const GOALS = { workflow: 0.75, api: 0.7 };
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
    const bare = new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'bare', BENCH_UPSTREAM_PORT: String(upstreamPort) });

    const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
    await ensureStandardIndexes(store);
    const organization = await createOrganization(store, { name: 'bench', hosts: ['127.0.0.1', 'localhost'] });
    const { key } = await createKey(store, { organizationId: organization._id, name: 'bench', admin: true });
    const scope = store.forOrganization(organization._id);
    await scope.collection('workflows').insertOne({ name: 'echo', steps: [], output: '${input}' });
    await scope.collection('apis').insertOne({ name: 'echo', baseUrl: `http://127.0.0.1:${upstreamPort}`, timeoutMs: 10_000, endpoints: { create: { method: 'post', path: '/items/{id}' } } });
    await store.close();
    const fleetplane = new Fixture('fleetplane.mjs', {
      BENCH_FP_CONFIG: JSON.stringify({ dataDir, workers: 1, http: { port: 0, host: '127.0.0.1' }, log: { level: 'warn', requests: false } }),
    });
    const [{ port: barePort, pid: barePid }, { port: fpPort, workers: fpWorkers }] = await Promise.all([bare.ready(), fleetplane.ready(60_000)]);
    const fpWorkerPid = fpWorkers[0];

    const workflowBody = sized((pad) => ({ echo: [{ id: 'bench', text: pad }] }));
    const apiBody = sized((pad) => ({ api: 'echo', endpoint: 'create', method: 'post', data: { id: 'bench', text: pad } }));
    const json = { 'content-type': 'application/json' };
    const withKey = { ...json, authorization: `Bearer ${key}` };
    const pairs = {
      workflow: {
        baseline: { url: `http://127.0.0.1:${barePort}/echo`, body: workflowBody, headers: json, pid: barePid },
        candidate: { url: `http://127.0.0.1:${fpPort}/workflows/echo`, body: workflowBody, headers: withKey, pid: fpWorkerPid },
      },
      api: {
        baseline: { url: `http://127.0.0.1:${barePort}/proxy`, body: apiBody, headers: json, pid: barePid },
        candidate: { url: `http://127.0.0.1:${fpPort}/api`, body: apiBody, headers: withKey, pid: fpWorkerPid },
      },
    };

    // Server CPU per request is measured too: unlike throughput, it does not move with what else the machine runs.
    const load = async ({ url, body, headers, pid }, durationS) => {
      const cpuBefore = cpuMs(pid);
      const result = await autocannon({ url, body, headers, method: 'POST', connections: settings.connections, duration: durationS });
      const cpuUsedMs = cpuMs(pid) - cpuBefore;
      const failed = result.errors + result.timeouts + result.non2xx;
      if (failed > 0) throw new Error(`${url}: ${failed} failed requests (${result.non2xx} non-2xx)`);
      return { requestsPerSecond: result.requests.average, p50Ms: result.latency.p50, p99Ms: result.latency.p99, serverCpuUsPerRequest: (cpuUsedMs * 1000) / result.requests.total };
    };
    // Each side must answer what it is meant to before anything is measured.
    for (const [name, pair] of Object.entries(pairs)) {
      for (const side of ['baseline', 'candidate']) {
        const response = await fetch(pair[side].url, { method: 'POST', body: pair[side].body, headers: pair[side].headers });
        const reply = await response.json();
        const expected = name === 'workflow' ? JSON.parse(workflowBody).echo[0].id : 201;
        const got = name === 'workflow' ? (reply.echo?.[0]?.id ?? reply.echo?.[0]) : reply.status;
        if (response.status !== 200 || (name === 'workflow' ? reply.echo?.[0]?.id !== expected : got !== expected)) throw new Error(`${pair[side].url} answered ${response.status} ${JSON.stringify(reply).slice(0, 200)}`);
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
        medianCpuRatio: round2(median(sample.cpuRatio)),
      };
      goals[name] = { goal: `≥ ${GOALS[name]}× baseline`, met: figures[name].medianRatio >= GOALS[name] };
    }
    const environment = { node: process.version, platform: `${process.platform} ${process.arch}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model };
    const result = { date: new Date().toISOString(), environment, settings, figures, goals };
    const row = (name, what, baseline) =>
      `| ${what} | ${baseline} | ${figures[name].baselineRequestsPerSecond} | ${figures[name].candidateRequestsPerSecond} | ${figures[name].candidateP50Ms} / ${figures[name].candidateP99Ms} | ${figures[name].medianRatio}× | ${goals[name].goal} | ${goals[name].met ? 'yes' : 'no'} | ${figures[name].baselineServerCpuUsPerRequest} / ${figures[name].candidateServerCpuUsPerRequest} | ${figures[name].medianCpuRatio}× |`;
    const md = `# Envelope routes benchmark

One worker each (Fleetplane: \`workers: 1\`, the primary hands the connections over), ${settings.connections} keep-alive connections, ${settings.durationS} s per run, the same ${BODY_BYTES}-byte JSON body for both sides of a pair, ${settings.rounds} rounds with baseline and candidate alternating; medians of per-round throughput ratios. The load generator (autocannon, in the runner) shares the machine's ${environment.cpus} CPUs. Node ${process.version}.

| candidate | baseline | baseline req/s | candidate req/s | candidate p50 / p99 ms | median ratio | goal | met | server CPU µs/req (baseline / candidate) | CPU-efficiency ratio |
|---|---|---:|---:|---:|---:|---|---|---:|---:|
${row('workflow', '`POST /workflows/echo` (authorization, validation, engine; `output: "${input}"`)', 'bare Fastify POST echo')}
${row('api', '`POST /api` → local upstream (authorization, provider lookup, path parameter, undici pool)', 'bare Fastify POST → undici pool → the same upstream')}

Per-round throughput ratios: workflow ${figures.workflow.ratios.join(', ')}; api ${figures.api.ratios.join(', ')}. The CPU-efficiency ratio is baseline ÷ candidate server CPU time per request (the serving process only, read from /proc), which other load on the machine moves far less than throughput.
`;
    mkdirSync(path.join(here, 'results'), { recursive: true });
    writeFileSync(path.join(here, 'results', 'envelope.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(path.join(here, 'results', 'envelope.md'), md);
    process.stdout.write(md);
    await Promise.all([fleetplane.stop(), bare.stop(), upstream.stop()]);
    process.exitCode = goals.workflow.met && goals.api.met ? 0 : 1;
  } finally {
    cleanup();
  }
}

if (role === 'upstream') await upstreamRole();
else if (role === 'bare') await bareRole();
else await runner();
