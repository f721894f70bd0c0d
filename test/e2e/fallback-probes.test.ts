import t from 'tap';
import http from 'node:http';
import { ServerProcess, request, type Reply } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { scaled } from '../helpers/wait.js';

/** One GET on a fresh connection, with a bearer key when given. */
function get(port: number, pathname: string, key?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host: 'localhost' };
    if (key) headers.authorization = `Bearer ${key}`;
    const req = http.request({ host: '127.0.0.1', port, path: pathname, agent: false, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, json: () => JSON.parse(body) }));
    });
    req.setTimeout(scaled(10_000), () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

const REDIRECT = 'https://lb.example.test/';

t.test('every worker cordoned, a redirect configured: /metrics, /healthz and /readyz are answered by this server (200/200/503), never 307', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([{ name: 'platform', hosts: ['localhost', '127.0.0.1'] }]);
  const platformKey = tenants[0]!.adminKey;
  const server = await ServerProcess.start({ workers: 2, dataDir, fallback: { redirect: REDIRECT } });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  const serverId = server.events.find((event) => event.event === 'started')!.id as string;

  // How a worker refuses /metrics without a key and with a wrong one: the primary must do the same.
  const workerAnonymous = await get(server.port, '/metrics');
  const workerBogus = await get(server.port, '/metrics', 'fpk_bogus.key');
  t.not(workerAnonymous.status, 200);

  await server.command('cordon', { value: true });
  const other = await request(server.port, '/whoami');
  t.equal(other.status, 307, 'ordinary requests get the fallback redirect');

  const metrics = await get(server.port, '/metrics', platformKey);
  t.equal(metrics.status, 200, '/metrics with a platform key: 200');
  t.equal(metrics.headers.location, undefined, 'no Location');
  t.match(metrics.headers['content-type'], /^text\/plain/);
  t.match(metrics.body, /^fleetplane_workers_active 0$/m, "this server's own state: no worker serving");
  t.match(metrics.body, /^fleetplane_workers_target 2$/m);
  t.match(metrics.body, /^fleetplane_fallback_responses_total\{status="307"\} 1$/m, 'the redirect answered above is counted here');
  t.match(metrics.body, /^fleetplane_nodejs_heap_size_used_bytes\{[^}]*worker="1"[^}]*\} \d/m, "the cordoned workers' figures are aggregated");
  t.match(metrics.body, /^fleetplane_nodejs_heap_size_used_bytes\{[^}]*worker="2"[^}]*\} \d/m);

  const anonymous = await get(server.port, '/metrics');
  t.equal(anonymous.status, workerAnonymous.status, 'without a key: refused as a worker refuses');
  t.equal(anonymous.json().error.code, workerAnonymous.json().error.code);
  const bogus = await get(server.port, '/metrics', 'fpk_bogus.key');
  t.equal(bogus.status, workerBogus.status, 'a wrong key: refused as a worker refuses');
  t.equal(bogus.json().error.code, workerBogus.json().error.code);

  const live = await get(server.port, '/healthz');
  t.equal(live.status, 200);
  t.equal(live.json().server, serverId, 'healthz names this server');
  t.equal(live.json().worker, 0, 'answered by the primary');
  const ready = await get(server.port, '/readyz');
  t.equal(ready.status, 503);
  t.same(ready.json(), { status: 'fallback', server: serverId, worker: 0, version: live.json().version });
  t.match(live.json().version, /^\d+\.\d+\.\d+/, "the primary's probes carry the version it runs");
  t.equal(server.count((event) => event.event === 'worker:exit'), 0, 'no worker left');
});

t.test('with metrics.public, the primary in fallback serves /metrics without a key', async (t) => {
  const server = await ServerProcess.start({ workers: 1, metrics: { public: true }, fallback: { redirect: REDIRECT } });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);
  await server.command('cordon', { value: true });
  const metrics = await get(server.port, '/metrics');
  t.equal(metrics.status, 200);
  t.match(metrics.body, /^fleetplane_workers_active 0$/m);
  t.equal((await get(server.port, '/metrics?x=1')).status, 200, 'a query string does not make it a redirect');
});
