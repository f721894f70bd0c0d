import { spawnSync } from 'node:child_process';
import t from 'tap';
import { createWorkerRegistry, type MetricsJson } from '../../src/runtime/metrics.js';
import { PrimaryMetrics } from '../../src/runtime/primary-metrics.js';
import { HttpMetrics } from '../../src/runtime/http-metrics.js';
import { scaled } from '../helpers/wait.js';

/** The text `/metrics` serves: one worker that answered requests, the primary with its process metrics. */
async function exposition(): Promise<string> {
  const worker = createWorkerRegistry({ worker: '1' });
  const http = new HttpMetrics();
  http.register(worker);
  http.declare('POST', '/workflows/:name');
  http.record('POST', '/workflows/:name', 200, 0.003);
  http.record('GET', undefined, 404, 0.2);
  const primary = new PrimaryMetrics();
  primary.trackProcess();
  primary.restarts.inc();
  return primary.text([(await worker.getMetricsAsJSON()) as unknown as MetricsJson]);
}

interface Family {
  name: string;
  type?: string;
  help?: string;
  samples: string[];
}

function families(text: string): Map<string, Family> {
  const byName = new Map<string, Family>();
  const family = (name: string) => byName.get(name) ?? byName.set(name, { name, samples: [] }).get(name)!;
  for (const line of text.split('\n').filter(Boolean)) {
    const meta = line.match(/^# (HELP|TYPE) (\S+) (.*)$/);
    if (meta) {
      if (meta[1] === 'HELP') family(meta[2]!).help = meta[3];
      else family(meta[2]!).type = meta[3];
      continue;
    }
    const sample = line.match(/^([^{ ]+)/)![1]!;
    const owner = [sample, sample.replace(/_(bucket|sum|count)$/, '')].find((name) => byName.has(name));
    family(owner ?? sample).samples.push(line);
  }
  return byName;
}

t.test('every metric follows the Prometheus naming rules', async (t) => {
  const found = families(await exposition());
  t.ok(found.size > 20, `${found.size} metric families`);
  for (const metric of found.values()) {
    t.match(metric.name, /^fleetplane_[a-z0-9_]+$/, `${metric.name}: snake case, one prefix`);
    t.ok(metric.help && metric.help.length > 0, `${metric.name} has HELP`);
    t.ok(metric.type, `${metric.name} has TYPE`);
    if (metric.type === 'counter') t.match(metric.name, /_total$/, `${metric.name}: a counter ends in _total`);
    else t.notMatch(metric.name, /_total$/, `${metric.name}: a ${metric.type} does not end in _total`);
    t.notMatch(metric.name, /_(ms|milliseconds|microseconds|kb|mb|kilobytes|megabytes|minutes|hours)(_total)?$/, `${metric.name}: base units`);
  }
});

const promtoolMissing = spawnSync('promtool', ['--version']).error ? 'promtool is not installed (Debian package "prometheus")' : false;

t.test('the exposition passes promtool check metrics without a warning', { skip: promtoolMissing }, async (t) => {
  const checked = spawnSync('promtool', ['check', 'metrics'], { input: await exposition(), encoding: 'utf8', timeout: scaled(10_000) });
  t.equal(checked.status, 0, 'promtool exits 0');
  t.equal(`${checked.stdout}${checked.stderr}`, '', 'promtool reports nothing');
});

t.test('HTTP metrics: by route pattern and status class, zeros for declared routes, cumulative buckets', async (t) => {
  const registry = createWorkerRegistry({ worker: '3' });
  const http = new HttpMetrics();
  http.register(registry);
  http.declare('POST', '/workflows/:name');
  http.declare('GET', '/healthz');
  http.record('POST', '/workflows/:name', 200, 0.004);
  http.record('POST', '/workflows/:name', 201, 0.3);
  http.record('POST', '/workflows/:name', 503, 12);
  http.record('DELETE', undefined, 404, 0.001);
  const text = await registry.metrics();
  const value = (pattern: RegExp) => Number(text.match(pattern)?.[1]);
  t.equal(value(/^fleetplane_http_requests_total\{route="\/workflows\/:name",method="POST",status_class="2xx",worker="3"\} (\d+)$/m), 2);
  t.equal(value(/^fleetplane_http_requests_total\{route="\/workflows\/:name",method="POST",status_class="5xx",worker="3"\} (\d+)$/m), 1);
  t.equal(value(/^fleetplane_http_requests_total\{route="\/workflows\/:name",method="POST",status_class="4xx",worker="3"\} (\d+)$/m), 0, 'a declared class shows 0');
  t.equal(value(/^fleetplane_http_requests_total\{route="\/healthz",method="GET",status_class="2xx",worker="3"\} (\d+)$/m), 0, 'a route never called shows 0');
  t.equal(value(/^fleetplane_http_requests_total\{route="unmatched",method="DELETE",status_class="4xx",worker="3"\} (\d+)$/m), 1);
  t.notMatch(text, /status_class="3xx"/, 'a class never answered is not shown');
  const bucket = (le: string) => value(new RegExp(`^fleetplane_http_request_duration_seconds_bucket\\{route="/workflows/:name",method="POST",le="${le.replace('+', '\\+')}",worker="3"\\} (\\d+)$`, 'm'));
  t.equal(bucket('0.005'), 1);
  t.equal(bucket('0.25'), 1);
  t.equal(bucket('0.5'), 2);
  t.equal(bucket('10'), 2);
  t.equal(bucket('+Inf'), 3);
  t.equal(value(/^fleetplane_http_request_duration_seconds_count\{route="\/workflows\/:name",method="POST",worker="3"\} (\d+)$/m), 3);
  t.equal(value(/^fleetplane_http_request_duration_seconds_sum\{route="\/workflows\/:name",method="POST",worker="3"\} ([\d.]+)$/m), 12.304);
  t.notMatch(text, /_count\{route="\/healthz"/, 'no histogram for a route never called');
});

t.test("the primary's process metrics carry worker=\"0\"; its supervision counters no label", async (t) => {
  const text = await exposition();
  for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
    t.match(text, new RegExp(`^fleetplane_${name}\\{worker="0"\\} [\\d.e+-]+$`, 'm'), `${name} of the primary`);
    t.match(text, new RegExp(`^fleetplane_${name}\\{worker="1"\\} [\\d.e+-]+$`, 'm'), `${name} of the worker`);
  }
  t.match(text, /^fleetplane_worker_restarts_total 1$/m);
});
