// bench/store.mjs's figures from its samples (medians of rounds, per-round ratios), its goal, and its result files.
// store.md keeps whatever follows its ANALYSIS marker line when rewritten; `node bench/lib/store-report.mjs` writes
// store.md again from store.json (after a change of wording, without measuring again).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OPERATIONS, OPERATION_LABELS } from './store-workload.mjs';

const ANALYSIS = '<!-- ANALYSIS: everything below this line is kept when the benchmark rewrites the file -->';

const BACKENDS = ['embedded', 'postgres'];
const LABEL = { embedded: 'embedded', postgres: 'PostgreSQL' };
/** Idle statements per server may not grow with the number of servers beyond this (the window's rounding). */
const IDLE_GROWTH = { factor: 1.1, plusPerSecond: 0.1 };

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const round = (value, digits = 2) => (value === null || value === undefined ? null : +value.toFixed(digits));
const mean = (values) => values.reduce((total, value) => total + value, 0) / values.length;

const summarizeRuns = (runs) => ({
  opsPerSecond: Math.round(median(runs.map((run) => run.opsPerSecond))),
  p50Ms: round(median(runs.map((run) => run.p50Ms)), 3),
  p99Ms: round(median(runs.map((run) => run.p99Ms)), 3),
  cpuUsPerOp: round(median(runs.map((run) => run.cpuUsPerOp)), 1),
  postgresCpuUsPerOp: runs[0].postgresCpuUsPerOp === null ? null : round(median(runs.map((run) => run.postgresCpuUsPerOp)), 1),
});

/** Medians per operation, backend and pass, and PostgreSQL against embedded per round (`ratioPass`'s ops/s). */
function summarizeSamples(samples, ratioPass) {
  return Object.fromEntries(
    OPERATIONS.map((operation) => {
      const byBackend = samples[operation];
      const figures = Object.fromEntries(BACKENDS.map((backend) => [backend, Object.fromEntries(Object.entries(byBackend[backend]).map(([pass, runs]) => [pass, summarizeRuns(runs)]))]));
      const ratios = byBackend.postgres[ratioPass].map((run, index) => run.opsPerSecond / byBackend.embedded[ratioPass][index].opsPerSecond);
      return [operation, { ...figures, postgresOpsRatio: { median: round(median(ratios)), rounds: ratios.map((ratio) => round(ratio)) } }];
    }),
  );
}

function summarizeIdle(windows) {
  return windows.map(({ backend, servers, windowS, statementsPerSecond, cpuMsPerSecond }) => ({
    backend,
    servers,
    windowS,
    statementsPerSecondPerServer: { mean: round(mean(statementsPerSecond), 3), max: round(Math.max(...statementsPerSecond), 3) },
    statementsPerSecondAllServers: round(statementsPerSecond.reduce((total, value) => total + value, 0), 3),
    cpuMsPerSecondPerServer: { mean: round(mean(cpuMsPerSecond)), max: round(Math.max(...cpuMsPerSecond)) },
    perServer: { statementsPerSecond: statementsPerSecond.map((value) => round(value, 3)), cpuMsPerSecond: cpuMsPerSecond.map((value) => round(value)) },
  }));
}

function idleGoal(idle, backend) {
  const windows = idle.filter((window) => window.backend === backend);
  const first = windows[0].statementsPerSecondPerServer.mean;
  const limit = round(first * IDLE_GROWTH.factor + IDLE_GROWTH.plusPerSecond, 3);
  const perServer = Object.fromEntries(windows.map((window) => [window.servers, window.statementsPerSecondPerServer.mean]));
  return { goal: `idle statements/s per server at every number of servers ≤ ${IDLE_GROWTH.factor} × at ${windows[0].servers} + ${IDLE_GROWTH.plusPerSecond}`, limit, perServer, met: windows.every((window) => window.statementsPerSecondPerServer.mean <= limit) };
}

const pair = (a, b) => `${a} / ${b}`;
const orDash = (value) => (value === null ? '—' : value);
const us = (ms) => round(ms * 1000, 1);

function markdown(result) {
  const { figures, goals, environment: env, settings } = result;
  const [http, api] = [figures.http, figures.api];
  const httpRows = OPERATIONS.flatMap((operation) =>
    BACKENDS.map((backend) => {
      const { sequential: one, load } = http[operation][backend];
      return `| ${OPERATION_LABELS[operation]} | ${LABEL[backend]} | ${pair(one.p50Ms, one.p99Ms)} | ${one.opsPerSecond} | ${load.opsPerSecond} | ${pair(load.p50Ms, load.p99Ms)} | ${load.cpuUsPerOp} | ${orDash(load.postgresCpuUsPerOp)} |`;
    }),
  );
  const apiRows = OPERATIONS.flatMap((operation) =>
    BACKENDS.map((backend) => {
      const { sequential: one, concurrent } = api[operation][backend];
      return `| ${OPERATION_LABELS[operation]} | ${LABEL[backend]} | ${pair(us(one.p50Ms), us(one.p99Ms))} | ${one.opsPerSecond} | ${one.cpuUsPerOp} | ${concurrent.opsPerSecond} | ${concurrent.cpuUsPerOp} | ${orDash(concurrent.postgresCpuUsPerOp)} |`;
    }),
  );
  const ratios = (table, pass) => OPERATIONS.map((operation) => `${OPERATION_LABELS[operation]} ${table[operation].postgresOpsRatio.median}×`).join(', ') + ` (${pass})`;
  const invalidationRow = (label, figure) => `| ${label} | ${figure.writes} | ${figure.drop.p50} | ${figure.drop.p99} | ${figure.drop.max} | ${pair(figure.afterAck.p50, figure.afterAck.p99)} |`;
  const counts = [...new Set(figures.idle.map((window) => window.servers))];
  const idleCell = (count, backend) => {
    const window = figures.idle.find((each) => each.servers === count && each.backend === backend);
    return [`${window.statementsPerSecondPerServer.mean} (${window.statementsPerSecondPerServer.max})`, window.statementsPerSecondAllServers, `${window.cpuMsPerSecondPerServer.mean} (${window.cpuMsPerSecondPerServer.max})`];
  };
  const idleRows = counts.map((count) => `| ${count} | ${[...idleCell(count, 'postgres'), ...idleCell(count, 'embedded')].join(' | ')} |`);
  const goalLine = (backend) => {
    const goal = goals[`idle_${backend}`];
    return `- ${LABEL[backend]}: ${goal.goal} (≤ ${goal.limit}): **${goal.met ? 'met' : 'missed'}** — ${Object.entries(goal.perServer).map(([count, rate]) => `${rate} at ${count}`).join(', ')}`;
  };
  return `# Store benchmark: embedded (SQLite) and PostgreSQL

PostgreSQL ${result.postgres}, started by the benchmark on this host with ${Object.entries(result.postgresSettings).map(([name, value]) => `${name} = ${value}`).join(', ')} (a commit waits for the disk on neither store: the embedded store's WAL runs with synchronous = NORMAL); Node ${env.node}, on a ${env.cpus}-core machine shared with other work (load average ${env.loadAverage.join(' / ')} at the end); ${result.elapsedS} s in all. ${settings.pin ? `Servers and the store-API process pinned to CPU ${env.cpus - 1}; the client and PostgreSQL to CPU 0` : 'Nothing pinned'}. Same data on both stores: one organization, \`items\` with 1,000 documents of about 300 bytes in 100 groups; each operation picks another document or group every time. Medians of ${settings.rounds} rounds, the stores alternating in each.

Goal: no growth per server with the number of idle servers.
${goalLine('postgres')}
${goalLine('embedded')}

## Per operation through \`POST /crud\`, one worker

A Fleetplane server with one worker per store, an admin key. One request at a time, then ${settings.connections} keep-alive connections each sending its next request when the answer is in. Server CPU: the worker's and the primary's threads (/proc schedstat) ÷ operations; PostgreSQL CPU: every process of \`pg_stat_activity\` the same way (pg_stat_statements on).

| operation | store | one at a time: p50 / p99 ms | ops/s | ${settings.connections} connections: ops/s | p50 / p99 ms | server CPU µs/op | PostgreSQL CPU µs/op |
|---|---|---:|---:|---:|---:|---:|---:|
${httpRows.join('\n')}

PostgreSQL against embedded, ops/s at ${settings.connections} connections (median of per-round ratios): ${ratios(http, 'through /crud')}.

## Per operation through the Store interface, one process

\`openStore\` from dist, the organization's scope, the calls \`/crud\` makes (\`find\` with its limit of 100, \`insertOne\`, \`updateMany\`), no HTTP: what the store itself costs, with the client in the same process.

| operation | store | one at a time: p50 / p99 µs | ops/s | process CPU µs/op | ${settings.apiInFlight} in flight: ops/s | process CPU µs/op | PostgreSQL CPU µs/op |
|---|---|---:|---:|---:|---:|---:|---:|
${apiRows.join('\n')}

PostgreSQL against embedded, ops/s with ${settings.apiInFlight} in flight: ${ratios(api, 'Store interface')}.

## Cross-host cache invalidation on PostgreSQL (change feed)

From the start of a write on one host until the other host no longer holds the old entry. Another process's caches: bench/lib/invalidation.mjs, as in store-invalidation (${settings.invalidationCaches} caches, one sample per cache and write). Through two servers (one worker each, one PostgreSQL): \`/crud\` \`object.update\` of a workflow's output on server A while a client asks server B for that workflow one request after another, until B answers with the new output.

| path | writes | p50 ms | p99 ms | max ms | after the writer's answer: p50 / p99 ms |
|---|---:|---:|---:|---:|---:|
${invalidationRow("another process's caches", result.invalidation.store)}
${invalidationRow('through two servers', result.invalidation.servers)}

## Idle servers

Servers of a primary and one worker each, in one mesh (a shared secret), nothing asked of them; a ${figures.idle[0].windowS} s window per step (one mesh discovery per server), ${settings.idleSettleS} s after the last server of the step was ready. PostgreSQL: statements counted by the database, \`pg_stat_statements\` by each server's own role (the measurer's own statements are under another role and left out). Embedded: the servers share one SQLite file; each process counts its own statements (bench/fixtures/count-sqlite.cjs), as there is no database server to count them. CPU: each server's primary and worker (it includes each server's settling after its start: the servers started for a step have been up for only the settling time and a little more).

| servers per store | PostgreSQL: statements/s per server, mean (max) | all servers | CPU ms/s per server, mean (max) | embedded: statements/s per server, mean (max) | all servers | CPU ms/s per server, mean (max) |
|---|---:|---:|---:|---:|---:|---:|
${idleRows.join('\n')}
`;
}

/** Writes store.md from `full` (store.json's content), keeping the analysis that follows the marker. */
function writeMarkdown(full, directory) {
  const file = path.join(directory, 'store.md');
  const previous = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const analysis = previous.includes(ANALYSIS) ? `\n${previous.slice(previous.indexOf(ANALYSIS))}` : '';
  writeFileSync(file, markdown(full) + analysis);
}

/** The figures and goals of `result`; writes store.json and store.md into `directory` when given. */
export function writeStoreResults(result, directory) {
  const { samples, idle, ...rest } = result;
  const figures = { http: summarizeSamples(samples.http, 'load'), api: summarizeSamples(samples.api, 'concurrent'), idle: summarizeIdle(idle) };
  const goals = Object.fromEntries(BACKENDS.map((backend) => [`idle_${backend}`, idleGoal(figures.idle, backend)]));
  const full = { ...rest, figures, goals, samples };
  if (directory) {
    mkdirSync(directory, { recursive: true });
    writeFileSync(path.join(directory, 'store.json'), `${JSON.stringify(full, null, 2)}\n`);
    writeMarkdown(full, directory);
  }
  return { markdown: markdown(full), goalsMet: Object.values(goals).every((goal) => goal.met) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const directory = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'results');
  writeMarkdown(JSON.parse(readFileSync(path.join(directory, 'store.json'), 'utf8')), directory);
}
