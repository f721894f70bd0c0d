import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from '../helpers/server-process.js';
import { platformDataDir, spawnLifecycleServer } from './lifecycle-fixture.js';
import { budgetText, scaled } from '../helpers/wait.js';

interface Call {
  path: string;
  body: Record<string, unknown>;
}

/** The edge as a counting stand-in: registrations answer ids (or fail, or wait), removals are recorded. */
async function edge(t: Test, mode: { fail?: boolean; hold?: boolean } = {}) {
  const calls: Call[] = [];
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const waiters = new Set<() => void>();
  const record = (call: Call) => {
    calls.push(call);
    for (const wake of waiters) wake();
  };
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', async () => {
      const call = { path: req.url!, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
      record(call);
      if (req.url === '/origins' && mode.hold) await held;
      if (req.url === '/origins' && mode.fail) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"edge down"}');
      const answer = req.url === '/origins' ? { ids: ['reg-1', 'reg-2'] } : { removed: true };
      record({ path: `${req.url} answered`, body: {} });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  const count = (path: string) => calls.filter((call) => call.path === path).length;
  const until = (predicate: () => boolean, budgetMs = 15_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => predicate() && (waiters.delete(check), clearTimeout(timer), resolve());
      const timer = setTimeout(() => (waiters.delete(check), reject(new Error(`edge: timed out after ${budgetText(budgetMs)} waiting for ${String(predicate)}; calls ${JSON.stringify(calls)}`))), scaled(budgetMs));
      waiters.add(check);
      check();
    });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls, count, until, release };
}

function resources(edgeUrl: string) {
  return {
    apis: [{ name: 'edge', baseUrl: edgeUrl, endpoints: { register: { method: 'post', path: '/origins' }, deregister: { method: 'post', path: '/origins/remove' } } }],
    workflows: [{
      name: 'configure-cluster-routing',
      steps: [{ name: 'register', api: 'edge', endpoint: 'register', method: 'post', data: { server_id: '${input.server_id}', host: '${input.host}', ip: '${input.ip}' } }],
      output: { remove: { api: 'edge', endpoint: 'deregister', method: 'post', data: { registration_ids: '${steps.register.ids}' } } },
    }],
  };
}

/** A counting edge, a platform with the routing workflow pointing at it, and a server on that platform. */
async function edgeAndServer(t: Test, config: Record<string, unknown>, mode: { fail?: boolean; hold?: boolean } = {}) {
  const upstream = await edge(t, mode);
  const { dataDir } = platformDataDir(resources(upstream.url));
  return { upstream, server: spawnLifecycleServer(t, { dataDir, ...config }) };
}

t.test('readiness registers once (a replacement worker included); SIGTERM sends one removal with the reason and the ids', async (t) => {
  const { upstream, server } = await edgeAndServer(t, { workers: 2, server: { id: 'node-a' }, node: { host: 'node-a.example.com', privateIp: '10.0.0.9' } });
  await server.waitFor((event) => event.event === 'started', 20_000);
  await upstream.until(() => upstream.count('/origins answered') === 1);
  t.match(upstream.calls[0], { path: '/origins', body: { server_id: 'node-a', host: 'node-a.example.com', ip: { private: '10.0.0.9' } } });

  // A crashed worker's replacement makes the fleet ready again: the registration is shared, not repeated.
  const victim = server.events.find((event) => event.event === 'worker:ready')!.pid as number;
  const from = server.events.length;
  process.kill(victim, 'SIGKILL');
  await server.waitFor((event) => event.event === 'worker:ready', 20_000, from);
  t.equal(upstream.count('/origins'), 1, 'still one registration');

  server.signal('SIGTERM');
  t.equal(await server.exit(), 0);
  t.equal(upstream.count('/origins/remove'), 1);
  t.same(upstream.calls.find((call) => call.path === '/origins/remove')?.body, { registration_ids: ['reg-1', 'reg-2'], reason: 'SIGTERM' });
});

t.test('SIGTERM during a slow registration: the removal follows the registration', async (t) => {
  const { upstream, server } = await edgeAndServer(t, { workers: 1 }, { hold: true });
  await upstream.until(() => upstream.count('/origins') === 1);
  server.signal('SIGTERM');
  await server.waitFor((event) => event.event === 'shutdown:start');
  upstream.release();
  t.equal(await server.exit(), 0);
  t.same(upstream.calls.map((call) => call.path), ['/origins', '/origins answered', '/origins/remove', '/origins/remove answered']);
  t.equal(upstream.calls[2]?.body.reason, 'SIGTERM');
});

t.test('a failing routing workflow is logged; the server serves and stops normally without a removal', async (t) => {
  const { upstream, server } = await edgeAndServer(t, { workers: 1 }, { fail: true });
  const started = await server.waitFor((event) => event.event === 'started', 20_000);
  await server.waitFor((event) => event.msg === 'the routing workflow failed; the node is not registered for routing');
  t.equal((await request(started.port as number, '/healthz')).status, 200);
  server.signal('SIGTERM');
  t.equal(await server.exit(), 0);
  t.equal(upstream.count('/origins/remove'), 0);
});

t.test('kill -9 cannot withdraw: no removal (the edge must notice by itself)', async (t) => {
  const { upstream, server } = await edgeAndServer(t, { workers: 1 });
  await upstream.until(() => upstream.count('/origins answered') === 1);
  await server.stop();
  t.equal(upstream.count('/origins/remove'), 0);
});

t.test('single-process mode registers once the primary serves, and withdraws at SIGINT', async (t) => {
  const { upstream, server } = await edgeAndServer(t, { workers: 0 });
  await upstream.until(() => upstream.count('/origins answered') === 1);
  server.signal('SIGINT');
  t.equal(await server.exit(), 0);
  t.equal(upstream.count('/origins'), 1);
  t.same(upstream.calls.find((call) => call.path === '/origins/remove')?.body, { registration_ids: ['reg-1', 'reg-2'], reason: 'SIGINT' });
});
