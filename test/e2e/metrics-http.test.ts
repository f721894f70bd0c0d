import { spawnSync } from 'node:child_process';
import t from 'tap';
import { ServerProcess, request } from '../helpers/server-process.js';
import { scaled } from '../helpers/wait.js';

const promtoolMissing = spawnSync('promtool', ['--version']).error ? 'promtool is not installed (Debian package "prometheus")' : false;

/** Sum over workers of the samples of `name` whose labels include every pair of `labels`. */
function total(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const match of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
    const found = Object.fromEntries([...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((pair) => [pair[1], pair[2]]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) sum += Number(match[2]);
  }
  return sum;
}

t.test('/metrics of a real server: HTTP requests by route pattern, the primary process, promtool-clean', async (t) => {
  const server = await ServerProcess.start({ workers: 2, metrics: { public: true } });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);

  for (const name of ['alpha', 'beta', 'gamma']) {
    const reply = await request(server.port, `/workflows/${name}`, { body: { input: {} } });
    t.ok(reply.status >= 400 && reply.status < 500, `POST /workflows/${name} without a key: ${reply.status}`);
  }
  for (let i = 0; i < 2; i++) t.equal((await request(server.port, '/whoami')).status, 200);
  t.equal((await request(server.port, '/no/such/path/42')).status, 404);

  const body = (await request(server.port, '/metrics')).body;
  const requests = 'fleetplane_http_requests_total';
  t.equal(total(body, requests, { route: '/workflows/:name', method: 'POST', status_class: '4xx' }), 3, 'counted under the route pattern');
  t.notMatch(body, /route="\/workflows\/alpha"/, 'never the raw URL');
  t.equal(total(body, requests, { route: '/whoami', method: 'GET', status_class: '2xx' }), 2);
  t.equal(total(body, requests, { route: 'unmatched', method: 'GET', status_class: '4xx' }), 1, 'an unmatched URL counts as "unmatched"');
  t.notMatch(body, /route="\/no\/such/);
  t.match(body, /^fleetplane_http_requests_total\{route="\/control",method="POST",status_class="5xx",worker="1"\} 0$/m, 'declared routes show 0');
  t.equal(total(body, 'fleetplane_http_request_duration_seconds_count', { route: '/whoami', method: 'GET' }), 2);
  t.equal(total(body, 'fleetplane_http_request_duration_seconds_bucket', { route: '/whoami', method: 'GET', le: '+Inf' }), 2);

  for (const worker of ['0', '1', '2']) {
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
      t.match(body, new RegExp(`^fleetplane_${name}\\{worker="${worker}"\\} [\\d.e+-]+$`, 'm'), `${name} of worker ${worker}`);
    }
  }
  t.notMatch(body, /^fleetplane_nodejs_active_\w+_total/m, 'no gauge named like a counter');

  await t.test('promtool check metrics finds nothing in the served body', { skip: promtoolMissing }, async (t) => {
    const checked = spawnSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8', timeout: scaled(10_000) });
    t.equal(checked.status, 0, 'promtool exits 0');
    t.equal(`${checked.stdout}${checked.stderr}`, '', 'promtool reports nothing');
  });
});
