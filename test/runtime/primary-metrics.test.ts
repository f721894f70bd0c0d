import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { PrimaryMetrics } from '../../src/runtime/primary-metrics.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

t.test('the primary counts without the metrics library, which the first scrape loads', async (t) => {
  // A fresh process, so nothing else has loaded the library before.
  const script = `
    import { createRequire } from 'node:module';
    const { PrimaryMetrics } = await import('./src/runtime/primary-metrics.ts');
    const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('/node_modules/prom-client/'));
    const metrics = new PrimaryMetrics();
    metrics.trackProcess();
    metrics.restarts.inc();
    metrics.workersActive.set(2);
    const before = loaded();
    const text = await metrics.text([]);
    console.log(JSON.stringify({ before, after: loaded(), restarts: /^fleetplane_worker_restarts_total 1$/m.test(text) }));
  `;
  const run = spawnSync(process.execPath, ['--import', './test/helpers/ts-loader.mjs', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  t.same(JSON.parse(run.stdout.trim().split('\n').at(-1)!), { before: false, after: true, restarts: true });
});

t.test('counters add up per label set, gauges keep the last value, and a scrape shows both', async (t) => {
  const metrics = new PrimaryMetrics();
  metrics.recycles.inc({ reason: 'rss' });
  metrics.recycles.inc({ reason: 'rss' });
  metrics.recycles.inc({ reason: 'lag' });
  metrics.fallbackResponses.inc({ status: '307' });
  metrics.workersTarget.set(3);
  metrics.workersTarget.set(5);
  t.equal(metrics.value('fleetplane_worker_recycles_total', { reason: 'rss' }), 2);
  t.equal(metrics.value('fleetplane_worker_recycles_total', { reason: 'lag' }), 1);
  t.equal(metrics.value('fleetplane_worker_recycles_total', { reason: 'health' }), undefined);
  t.equal(metrics.value('fleetplane_workers_target'), 5);
  const text = await metrics.text([]);
  t.match(text, /^fleetplane_worker_recycles_total\{reason="rss"\} 2$/m);
  t.match(text, /^fleetplane_worker_recycles_total\{reason="lag"\} 1$/m);
  t.match(text, /^fleetplane_fallback_responses_total\{status="307"\} 1$/m);
  t.match(text, /^fleetplane_workers_target 5$/m);
  t.match(text, /^fleetplane_worker_crashes_total 0$/m, 'a counter never counted reads 0, as before');
  t.notMatch(text, /fleetplane_process_cpu/, 'no process metrics unless tracked');
  // Later counts reach the next scrape.
  metrics.recycles.inc({ reason: 'rss' });
  t.match(await metrics.text([]), /^fleetplane_worker_recycles_total\{reason="rss"\} 3$/m);
});

t.test('a worker counts its requests without the metrics library, which the first scrape loads; the counts were kept', async (t) => {
  const script = `
    import { createRequire } from 'node:module';
    const { WorkerRuntime } = await import('./src/runtime/worker.ts');
    const { loadConfig } = await import('./src/config/load.ts');
    const { createLogger } = await import('./src/logging/logger.ts');
    const { serverEvents } = await import('./src/runtime/events.ts');
    const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('/node_modules/prom-client/'));
    const log = createLogger({ level: 'silent' });
    const runtime = new WorkerRuntime(loadConfig({ env: {}, object: {} }).config, 3, log, serverEvents(log), () => {});
    runtime.httpMetrics.declare('GET', '/healthz');
    runtime.httpMetrics.record('GET', '/healthz', 200, 0.002);
    const before = loaded();
    const metrics = await runtime.metricsJson();
    const requests = metrics.find((metric) => metric.name === 'fleetplane_http_requests_total');
    const ok = requests.values.find((value) => value.labels.status_class === '2xx');
    const cpu = metrics.find((metric) => metric.name === 'fleetplane_process_cpu_user_seconds_total');
    console.log(JSON.stringify({ before, after: loaded(), ok: ok.value, worker: cpu.values[0].labels.worker }));
  `;
  const run = spawnSync(process.execPath, ['--import', './test/helpers/ts-loader.mjs', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  t.same(JSON.parse(run.stdout.trim().split('\n').at(-1)!), { before: false, after: true, ok: 1, worker: '3' });
});
