// The benchmark summary of docs/benchmarks.md and README.md, written from bench/results/*.json: every figure in
// those tables is read from a result file, none is typed by hand. `node scripts/bench-summary.mjs` prints both
// tables, `--write` replaces them between their markers, `--check` exits 1 when a committed table differs from
// what the result files say (CI and test/docs/bench-summary.test.ts run it).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const results = path.join(root, 'bench', 'results');

const x = (value, digits = 2) => `${Number(value).toFixed(digits)}×`;
const ms = (value) => (value >= 1000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`);
const us = (value) => `${Number(value).toFixed(1)} µs`;
const n = (value) => Math.round(value).toLocaleString('en-US');
const range = (summary, format) => `${format(summary.median)} (${format(summary.min)}–${format(summary.max)})`;
const mib = (values) => [...new Set(values.map((value) => Math.round(value)).sort((a, b) => a - b))].join('–');

/**
 * One row per figure: the result file, what is measured, against what, how it reads from the file, and the goal
 * (with whether the file says it is met) when the benchmark has one.
 */
const ROWS = [
  {
    file: 'runtime',
    what: '`runtime`: GET /healthz through the primary\'s hand-off, keep-alive',
    baseline: 'Node cluster round-robin + bare Fastify',
    measured: (d) => `${x(d.handOff.ratios.keepAliveReqPerSec)} req/s; the runtime serving the baseline's own app: ${x(d.handOff.ratiosBareAppOverA.keepAliveReqPerSec)}`,
    goal: (d) => [`≥ ${d.handOff.goal.min}`, d.handOff.metBy.keepAlive],
  },
  {
    file: 'runtime',
    what: '`runtime`: same, a new connection per request',
    baseline: 'same',
    measured: (d) => `${x(d.handOff.ratios.newConnectionReqPerSec)} (autocannon), ${x(d.handOff.ratios.newConnectionRawClientReqPerSec)} (raw client)`,
    goal: (d) => [`≥ ${d.handOff.goal.min}`, d.handOff.metBy.newConnection],
  },
  {
    file: 'runtime',
    what: '`runtime`: the primary\'s 307 fallback, new connection each',
    baseline: 'bare `node:http` 307',
    measured: (d) => `${x(d.fallback307.ratios.newConnectionReqPerSec)} (autocannon), ${x(d.fallback307.ratios.newConnectionRawClientReqPerSec)} (raw client)`,
    goal: (d) => [`≥ ${d.fallback307.goal.min}`, d.fallback307.met],
  },
  {
    file: 'runtime',
    what: '`runtime`: kill -9 one of 2 workers under load',
    baseline: '—',
    measured: (d) => `${n(d.kill9.load.failed)} failed of ${n(d.kill9.load.ok + d.kill9.load.failed)}; 2 workers ready again ${ms(d.kill9.capacityBackMs.first)}–${ms(d.kill9.capacityBackMs.max)} after each kill`,
  },
  {
    file: 'runtime',
    what: '`runtime`: rolling restart under load',
    baseline: '—',
    measured: (d) => `${n(d.rollingRestart.load.failed)} failed of ${n(d.rollingRestart.load.ok + d.rollingRestart.load.failed)}`,
    goal: (d) => [`${d.rollingRestart.goal.max} failed`, d.rollingRestart.met],
  },
  {
    file: 'runtime',
    what: '`runtime`: idle RSS, primary / worker (MiB)',
    baseline: 'bare cluster primary / Fastify worker',
    measured: (d) => {
      const { idle, early, earlyAfterMs, settled, settledAfterMs } = d.handOff.rssMiB;
      return `${mib([idle.b.primary])} / ${mib(idle.b.workers)} when ready; ${mib([early.b.primary])} / ${mib(early.b.workers)} ${earlyAfterMs / 1000} s later; ${mib([settled.b.primary])} / ${mib(settled.b.workers)} ${settledAfterMs / 1000} s later, vs ${mib([settled.a.primary])} / ${mib(settled.a.workers)}`;
    },
    // PM2's daemon and a Fastify worker: settled within 10 s of ready.
    goal: (d) => {
      const { early } = d.handOff.rssMiB;
      return [`≤ 55 / ≤ 70 ${d.handOff.rssMiB.earlyAfterMs / 1000} s after ready`, early.b.primary <= 55 && Math.max(...early.b.workers) <= 70];
    },
  },
  {
    file: 'rolling-restart',
    what: '`rolling-restart`: rolling restarts under load with busy processes taking the CPUs',
    baseline: (d) => `the build before (${d.builds[0].commit})`,
    measured: (d) => `${n(d.builds[1].failed)} failed of ${n(d.builds[1].requests)} vs ${n(d.builds[0].failed)} of ${n(d.builds[0].requests)}`,
    goal: (d) => ['0 failed', d.builds[1].failed === 0],
  },
  {
    file: 'ipc',
    what: '`ipc`: `server.request` to one worker',
    baseline: 'raw `process.send` ping-pong',
    measured: (d) => `p50 ${x(d.median.requestP50Us / d.median.rawP50Us)} raw (${us(d.median.requestP50Us)} vs ${us(d.median.rawP50Us)})`,
    goal: (d) => [d.goals[0].goal.replace('<=', '≤') + '×', d.goals[0].met],
  },
  {
    file: 'ipc',
    what: '`ipc`: `POST /control` status',
    baseline: '—',
    measured: (d) => Object.entries(d.control).map(([target, figures]) => `${n(figures.perSecond)}/s (${target})`).join(', '),
  },
  {
    file: 'storage',
    what: '`storage`: `set` seen by every worker',
    baseline: 'raw relay worker → primary → workers',
    measured: (d) => `p50 ${x(d.ratios['sequential: storage p50 / relay p50'])} relay`,
  },
  {
    file: 'store-invalidation',
    what: "`store-invalidation`: a write on one PostgreSQL host until another host's cache drops the entry; an idle host's freshness statements",
    baseline: 'counter polling every 250 ms (the fallback), same run',
    measured: (d) => {
      const { feed, polling } = d.latencyMs;
      const idle = d.idleQueriesPerSecond;
      return `p50 ${feed.p50.toFixed(1)} ms / p99 ${feed.p99.toFixed(1)} ms with LISTEN/NOTIFY vs ${ms(polling.p50)} / ${ms(polling.p99)} polling; idle host ${idle.feed} vs ${idle.polling} statements/s`;
    },
  },
  ...[
    ['http', '`store`: PostgreSQL per operation through `POST /crud`, one worker: read by id / filtered read / insert / update', 'load', (d) => `${d.settings.connections} connections`],
    ['api', '`store`: the same through the Store interface, one process', 'concurrent', (d) => `${d.settings.apiInFlight} in flight`],
  ].map(([level, what, pass, load]) => ({
    file: 'store',
    what,
    baseline: 'the embedded store, same run',
    measured: (d) => {
      const figures = d.figures[level];
      const read = figures.readById;
      const ratios = ['readById', 'filtered', 'insert', 'update'].map((operation) => x(figures[operation].postgresOpsRatio.median)).join(' / ');
      return `${ratios} ops/s (${load(d)}); a read by id costs ${us(read.postgres[pass].cpuUsPerOp)} of ${level === 'http' ? 'server' : 'process'} CPU vs ${us(read.embedded[pass].cpuUsPerOp)}, plus ${us(read.postgres[pass].postgresCpuUsPerOp)} in PostgreSQL`;
    },
  })),
  {
    file: 'store',
    what: "`store`: a write on one PostgreSQL host until another host's cache no longer holds the old entry",
    baseline: '—',
    measured: (d) => {
      const { store, servers } = d.invalidation;
      return `p50 ${store.drop.p50.toFixed(1)} ms / p99 ${store.drop.p99.toFixed(1)} ms to another process's caches; ${servers.drop.p50.toFixed(1)} / ${servers.drop.p99.toFixed(1)} ms from \`/crud\` on one server until the other serves the change`;
    },
  },
  ...[
    ['postgres', 'PostgreSQL (statements counted by the database)'],
    ['embedded', 'the embedded store (servers sharing one SQLite file)'],
  ].map(([backend, what]) => ({
    file: 'store',
    what: (d) => `\`store\`: idle servers on ${what}, statements/s per server at ${Object.keys(d.goals[`idle_${backend}`].perServer).join(' / ')} servers`,
    baseline: 'the same at 1 server',
    measured: (d) => Object.values(d.goals[`idle_${backend}`].perServer).map((rate) => rate.toFixed(2)).join(' / '),
    goal: (d) => ['no growth per server', d.goals[`idle_${backend}`].met],
  })),
  {
    file: 'authorize',
    what: '`authorize`: `findOne` by id / by indexed field',
    baseline: 'raw better-sqlite3 prepared statement',
    measured: (d) => `${x(d.figures.findOneById.medianRatio)} / ${x(d.figures.findOneByIndex.medianRatio)}`,
    goal: (d) => ['≥ 0.5×', d.goals.findOneById.met && d.goals.findOneByIndex.met],
  },
  {
    file: 'authorize',
    what: '`authorize`: `authorize.request`, warm cache',
    baseline: 'no-op',
    measured: (d) => `+${d.figures.authorize.overheadUsPerCall} µs per call`,
  },
  {
    file: 'authorize',
    what: '`authorize`: a client\'s p95 while 5,000 wrong keys arrive from its own address',
    baseline: 'the same client alone',
    measured: (d) => `${x(d.figures.burst_held.medianP95Ratio)} with 429s held; ${x(d.figures.burst_atOnce.medianP95Ratio)} answered at once, ${x(d.figures.burst_off.medianP95Ratio)} with the limit off`,
    goal: (d) => ['≤ 2×', d.goals.burst.met],
  },
  ...['100 B', '4 KiB'].map((payload) => ({
    file: 'mesh',
    what: `\`mesh\`: \`server.mesh.send\` round trips, ${payload}`,
    baseline: 'raw ws echo between two processes',
    measured: (d) => `${x(d.payloads[payload].ratios.sequential)} sequential; ${x(d.payloads[payload].ratios.concurrent)} with 256 in flight`,
    goal: (d) => ['≥ 0.8×', d.goals.filter((goal) => goal.figure.startsWith(`${payload}:`)).every((goal) => goal.met)],
  })),
  ...[
    ['workflow', '`POST /workflows/echo` (authorization, validation, engine)', 'the hand-written peer P: Fastify, pino, Bearer check, TypeBox body, echo'],
    ['api', '`POST /api` to a local upstream', 'the peer P + undici to the same upstream'],
    ['crud', '`POST /crud` `object.read` by id', 'the peer P + the same better-sqlite3 statement'],
  ].map(([route, what, baseline]) => ({
    file: 'envelope',
    what: `\`envelope\`: ${what}`,
    baseline,
    measured: (d) => {
      const { full, paced } = d.figures[route];
      return `${x(full.efficiencyAgainstPeer.median)} by server CPU per request (${us(full.candidate.serverCpuUsPerRequest.median)} vs ${us(full.baseline.serverCpuUsPerRequest.median)}); ${x(paced.efficiencyAgainstPeer.median)} at one rate`;
    },
    goal: (d) => [d.goals[route].goal.replace(/^CPU-efficiency against P /, ''), d.goals[route].met],
  })),
  {
    file: 'manager',
    what: '`manager`: `createServer` with the local provider to confirmed',
    baseline: 'a plain `fleetplane start` of the same configuration to ready',
    measured: (d) => `${x(d.startup.ratio)} (to the record saying running: ${x(d.startup.ratioRecord)}; to ready: ${x(d.startup.ratioReady)})`,
    goal: (d) => ['≤ 1.3×', d.startup.ratio <= 1.3],
  },
  {
    file: 'manager',
    what: '`manager`: `state.save` with mirroring on',
    baseline: 'mirroring off',
    measured: (d) => `${x(d.ratio)} (${d.msPerSave.on.toFixed(3)} vs ${d.msPerSave.off.toFixed(3)} ms); ${n(d.mirrorsReceived)} of ${n(d.mirrorsExpected)} mirrors received`,
    goal: (d) => ['≤ 1.1×', d.ratio <= 1.1],
  },
  {
    file: 'autoscaler',
    what: (d) => `\`autoscaler\`: one decision over ${n(d.settings.nodes)} servers × ${d.settings.samples} samples`,
    baseline: 'one pass averaging every sample',
    measured: (d) => `${(d.usPerEvaluation.decide / 1000).toFixed(2)} ms vs ${(d.usPerEvaluation.baseline / 1000).toFixed(2)} ms (${x(d.ratio, 1)})`,
  },
  {
    file: 'autoscaler',
    what: (d) => `\`autoscaler\`: end to end with the local provider, ${d.settings.e2eRuns} runs`,
    baseline: '—',
    measured: (d) => {
      const s = d.endToEnd.summary;
      return `over the threshold → new server serving ${range(s.thresholdToServingMs, ms)}; scale-in ${range(s.scaleInMs, ms)} with ${s.scaleInFailed.max} failed requests; inactive → last server stopped ${range(s.inactiveToRemovedMs, ms)}; activation → serving ${range(s.activationToServingMs, ms)}`;
    },
  },
];

/** Node version, date and load of a result file, in whichever fields that benchmark writes them. */
function runOf(d) {
  const node = d.environment?.node ?? d.machine?.node ?? d.node;
  const date = (d.date ?? d.at)?.slice(0, 10);
  const load = d.loadAverage?.[0] ?? d.environment?.loadAverage?.[0] ?? d.machine?.loadavgAtStart?.[0];
  return [date, node, load === undefined ? undefined : `load ${Number(load).toFixed(1)}`].filter(Boolean).join(', ');
}

const cell = (value) => String(value).replaceAll('|', '\\|');
const read = (file) => JSON.parse(readFileSync(path.join(results, `${file}.json`), 'utf8'));
const value = (field, d) => (typeof field === 'function' ? field(d) : field);

function rows() {
  return ROWS.filter((row) => existsSync(path.join(results, `${row.file}.json`))).map((row) => {
    const d = read(row.file);
    const [goal, met] = row.goal ? row.goal(d) : ['—', undefined];
    return { what: value(row.what, d), baseline: value(row.baseline, d), measured: row.measured(d), goal: met === undefined ? goal : `${goal} ${met ? 'met' : 'missed'}`, met, run: runOf(d), file: row.file };
  });
}

/** docs/benchmarks.md: every figure, with its result file and run. */
export function fullTable() {
  const lines = ['| benchmark | baseline | measured | goal | run |', '|---|---|---|---|---|'];
  for (const row of rows()) lines.push(`| ${cell(row.what)} | ${cell(row.baseline)} | ${cell(row.measured)} | ${cell(row.goal)} | [${row.file}](../bench/results/${row.file}.md), ${cell(row.run)} |`);
  return lines.join('\n');
}

/** README.md: the figures that have a goal, and whether the last run met it. */
export function goalsTable() {
  const lines = ['| benchmark | measured | goal |', '|---|---|---|'];
  for (const row of rows().filter((candidate) => candidate.met !== undefined)) lines.push(`| ${cell(row.what)} | ${cell(row.measured)} | ${cell(row.goal)} |`);
  return lines.join('\n');
}

const TARGETS = [
  { file: path.join(root, 'docs', 'benchmarks.md'), marker: 'bench-summary', table: fullTable },
  { file: path.join(root, 'README.md'), marker: 'bench-goals', table: goalsTable },
];

/** The file's text with the generated table between its markers. */
function replaced({ file, marker, table }) {
  const text = readFileSync(file, 'utf8');
  const start = `<!-- ${marker}:start -->`;
  const end = `<!-- ${marker}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${path.relative(root, file)} has no ${marker} markers`);
  return `${text.slice(0, from + start.length)}\n${table()}\n${text.slice(to)}`;
}

if (process.argv[1] === import.meta.filename) {
  if (process.argv.includes('--write')) {
    for (const target of TARGETS) writeFileSync(target.file, replaced(target));
  } else if (process.argv.includes('--check')) {
    const stale = TARGETS.filter((target) => replaced(target) !== readFileSync(target.file, 'utf8'));
    for (const target of stale) process.stderr.write(`${path.relative(root, target.file)}: the ${target.marker} table differs from bench/results; run "node scripts/bench-summary.mjs --write"\n`);
    process.exitCode = stale.length ? 1 : 0;
  } else {
    process.stdout.write(`${fullTable()}\n\n${goalsTable()}\n`);
  }
}
