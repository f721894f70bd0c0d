import t from 'tap';
import http from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ServerProcess, request, steadyLoad, tempDir } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { scaled, until } from '../helpers/wait.js';

interface Reply { status: number; headers: http.IncomingHttpHeaders; json: any }

function post(port: number, body: unknown, options: { key?: string; host?: string; raw?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const text = options.raw ?? JSON.stringify(body);
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), host: options.host ?? 'localhost' };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    const req = http.request({ host: '127.0.0.1', port, path: '/control', method: 'POST', agent: false, headers }, (res) => {
      let data = '';
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, json: data ? JSON.parse(data) : undefined }));
    });
    req.setTimeout(scaled(20_000), () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(text);
  });
}

async function start(config: Record<string, unknown> = {}) {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'acme', hosts: ['localhost', '127.0.0.1'] },
    { name: 'globex', hosts: ['globex.test'] },
  ]);
  const server = await ServerProcess.start({ workers: 2, dataDir, ...config });
  await server.readyWorkers(2);
  return { server, acme: tenants[0]!, globex: tenants[1]! };
}

let shared: ReturnType<typeof start> | undefined;
/**
 * One server for the tests that leave it as they found it (each undoes what it changed): fallback redirect on,
 * as the shedding tests need.
 */
function sharedServer(): ReturnType<typeof start> {
  shared ??= start({ fallback: { redirect: 'http://lb.example.test' } });
  return shared;
}
t.teardown(async () => (await shared)?.server.stop());

t.test('POST /control cordons one worker: it gets no new connections while the other serves', async (t) => {
  const { server, acme } = await sharedServer();
  const cordon = await post(server.port, { method: 'cordon', worker: 1, data: true }, { key: acme.adminKey });
  t.equal(cordon.status, 200);
  t.equal(cordon.json.replies[0].worker, 1);
  t.equal(cordon.headers['cache-control'], 'no-store');
  for (let i = 0; i < 6; i++) t.equal((await request(server.port, '/whoami')).json().worker, 2, 'served by worker 2');
  await post(server.port, { method: 'cordon', worker: 1, data: false }, { key: acme.adminKey });
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) seen.add((await request(server.port, '/whoami')).json().worker);
  t.same([...seen].sort(), [1, 2]);
});

t.test('POST /control naming a worker the server does not have says so, with the workers it has', async (t) => {
  const { server, acme } = await sharedServer();
  const reply = await post(server.port, { method: 'status', worker: [1, 9] }, { key: acme.adminKey, host: 'localhost' });
  t.equal(reply.status, 200);
  t.match(reply.json.replies, [{ worker: 1, ok: true }]);
  const id = reply.json.replies[0].server;
  t.same(reply.json.missing, [{ server: id, worker: 9 }], 'still missing, as scripts read it');
  t.same(reply.json.unknownWorkers, [{ server: id, worker: 9, message: 'no such worker: 9 (this server has workers 1, 2)' }], 'and why');
});

t.test('POST /control drain lets an in-flight request finish', async (t) => {
  const { server, acme } = await sharedServer();
  const probe = await request(server.port, '/whoami');
  const target = probe.json().worker === 1 ? 2 : 1;
  const slow = request(server.port, '/slow?ms=1200');
  await server.waitFor((event) => event.event === 'fixture:slow');
  const drained = post(server.port, { method: 'drain', worker: target, data: true }, { key: acme.adminKey });
  const reply = await slow;
  t.equal(reply.status, 200, 'in-flight request finished');
  t.equal(reply.json().worker, target);
  const result = await drained;
  t.equal(result.status, 200);
  t.match(result.json.replies[0].result, { worker: target, remaining: 0 });
  t.equal((await post(server.port, { method: 'drain', worker: target, data: false }, { key: acme.adminKey })).status, 200, 'undrained');
});

t.test('shed an organization: its host gets the 307 while another organization is served', async (t) => {
  const { server, acme, globex } = await sharedServer();
  const shed = await post(server.port, { method: 'shed', master: true, data: [globex.organization_id] }, { key: acme.adminKey });
  t.equal(shed.status, 200, JSON.stringify(shed.json));
  const globexReply = await request(server.port, '/whoami?x=1', { host: 'globex.test' });
  t.equal(globexReply.status, 307);
  t.equal(globexReply.headers.location, 'http://lb.example.test/whoami?x=1');
  t.equal(globexReply.headers.connection, 'close');
  t.equal((await request(server.port, '/whoami', { host: 'localhost' })).status, 200, 'acme still served');
  await post(server.port, { method: 'shed', master: true, data: false }, { key: acme.adminKey });
  t.equal((await request(server.port, '/whoami', { host: 'globex.test' })).status, 200, 'globex served again');
});

t.test("shedding the organization that owns the node's host leaves probes, metrics and /control answering, so it can be ended over HTTP", async (t) => {
  const { server, acme } = await sharedServer();
  t.equal((await post(server.port, { method: 'shed', master: true, data: [acme.organization_id] }, { key: acme.adminKey })).status, 200);
  t.equal((await request(server.port, '/whoami', { host: 'localhost' })).status, 307, 'its requests get the fallback');
  for (const probe of ['/healthz', '/readyz']) t.equal((await request(server.port, probe, { host: 'localhost' })).status, 200, `${probe} still answers`);
  const ended = await post(server.port, { method: 'shed', master: true, data: false }, { key: acme.adminKey });
  t.equal(ended.status, 200, '/control still answers');
  t.equal((await request(server.port, '/whoami', { host: 'localhost' })).status, 200, 'served again');
});

t.test('server.state.shed([...]) in code sheds those organizations, and shed(false) ends it', async (t) => {
  const { server, globex } = await sharedServer();
  t.same(await server.command('shed', { organizations: [globex.organization_id] }), [globex.organization_id]);
  t.equal((await request(server.port, '/whoami', { host: 'globex.test' })).status, 307);
  t.same(await server.command('shed', { organizations: false }), []);
  t.equal((await request(server.port, '/whoami', { host: 'globex.test' })).status, 200);
});

t.test('shedding is in effect when /control answers, and a worker started later knows it', async (t) => {
  const { server, acme, globex } = await sharedServer();
  const shed = await post(server.port, { method: 'shed', master: true, data: [globex.organization_id] }, { key: acme.adminKey });
  t.equal(shed.status, 200);
  for (let i = 0; i < 4; i++) t.equal((await request(server.port, '/whoami', { host: 'globex.test' })).status, 307, 'no wait needed: every worker confirmed');

  // Worker 1 is replaced; with worker 2 cordoned, only the new process takes connections.
  const old = (await server.command<{ workers: Array<{ worker: number; pid: number }> }>('fleet')).workers.find((entry) => entry.worker === 1)!;
  const mark = server.events.length;
  process.kill(old.pid, 'SIGKILL');
  await server.waitFor((event) => event.event === 'worker:ready' && event.workerId === 1, 20_000, mark);
  t.equal((await post(server.port, { method: 'cordon', worker: 2, data: true }, { key: acme.adminKey })).status, 200);
  const fromNew = await request(server.port, '/whoami', { host: 'globex.test' });
  t.equal(fromNew.status, 307, 'the replacement turns the shed organization away');
  const acmeReply = await request(server.port, '/whoami', { host: 'localhost' });
  t.equal(acmeReply.status, 200);
  t.equal(acmeReply.json().worker, 1, 'served by the replacement');
  t.not(acmeReply.json().pid, old.pid);

  // Shedding is per server: asked of one worker, it is refused and nothing changes.
  const ofWorker = await post(server.port, { method: 'shed', worker: 1, data: false }, { key: acme.adminKey });
  t.equal(ofWorker.status, 400);
  t.equal(ofWorker.json.error.code, 'invalid_target', JSON.stringify(ofWorker.json));
  t.equal((await request(server.port, '/whoami', { host: 'globex.test' })).status, 307, 'still shed');
  const unshed = await post(server.port, { method: 'shed', master: true, data: false }, { key: acme.adminKey });
  t.equal(unshed.status, 200);
  t.ok(unshed.json.replies[0].ok, JSON.stringify(unshed.json));
  t.equal((await post(server.port, { method: 'cordon', worker: 2, data: false }, { key: acme.adminKey })).status, 200);
  const workers = new Set<number>();
  for (let i = 0; i < 6; i++) {
    const reply = await request(server.port, '/whoami', { host: 'globex.test' });
    t.equal(reply.status, 200, 'globex served again');
    workers.add(reply.json().worker);
  }
  t.same([...workers].sort(), [1, 2], 'by both workers');
});

t.test('worker restart through /control under load: zero failed requests', async (t) => {
  const { server, acme } = await sharedServer();
  const mark = server.events.length;
  const load = steadyLoad(server.port, '/whoami', 6);
  await until('the load to flow', () => (load.stats.ok >= 50 ? true : undefined));
  const restart = await post(server.port, { method: 'restart', worker: 1 }, { key: acme.adminKey });
  t.equal(restart.status, 200);
  t.ok(restart.json.replies[0].ok);
  await server.waitFor((event) => event.event === 'worker:exit' && event.workerId === 1, 20_000);
  const after = load.stats.ok;
  await until('requests served after the restart', () => (load.stats.ok >= after + 50 ? true : undefined));
  const stats = await load.stop();
  t.equal(stats.failed, 0, `no failed request (${stats.errors.slice(0, 3).join('; ')})`);
  t.equal(server.events.slice(mark).filter((event) => event.event === 'worker:crash').length, 0);
});

t.test('all workers cordoned: /control is served by the primary and uncordons', async (t) => {
  const { server, acme, globex } = await start();
  t.teardown(() => server.stop());
  t.equal((await post(server.port, { method: 'cordon', broadcast: true, data: true }, { key: acme.adminKey })).status, 200);
  t.equal((await request(server.port, '/whoami')).status, 503, 'fallback: no redirect target');
  const denied = await post(server.port, { method: 'cordon', master: true, data: false }, { key: 'fpk_bogus.key' });
  t.equal(denied.status, 403, 'the primary authorizes like the workers');
  // A tenant, even its admin, and a request without a key cannot uncordon the server the primary answers for.
  for (const [who, options] of [
    ['a tenant admin key on its own host', { key: globex.adminKey, host: 'globex.test' }],
    ["a tenant admin key on the platform's host", { key: globex.adminKey }],
    ['no key', {}],
  ] as const) {
    const refused = await post(server.port, { method: 'cordon', master: true, data: false }, options);
    t.equal(refused.status, 403, who);
  }
  t.equal((await request(server.port, '/whoami')).status, 503, 'still cordoned');
  const status = await post(server.port, { method: 'status', master: true }, { key: acme.adminKey });
  t.equal(status.status, 200);
  t.equal(status.json.replies[0].result.status, 'fallback');
  const uncordon = await post(server.port, { method: 'cordon', master: true, data: false }, { key: acme.adminKey });
  t.equal(uncordon.status, 200);
  t.equal((await request(server.port, '/whoami')).status, 200, 'workers serve again');
});

t.test('reboot: 400 without confirm, 403 without hostControl, with both stops the node and runs the configured command', async (t) => {
  const locked = await start();
  t.teardown(() => locked.server.stop());
  const id = locked.server.events[0]!.id as string;
  const forbidden = await post(locked.server.port, { method: 'reboot', master: true, confirm: id }, { key: locked.acme.adminKey });
  t.equal(forbidden.status, 403);
  t.match(forbidden.json.error.message, /lifecycle.hostControl/);

  const marker = path.join(tempDir(), 'rebooted');
  const open = await start({ lifecycle: { hostControl: true, rebootCommand: [process.execPath, '-e', `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'rebooted')`] } });
  t.teardown(() => open.server.stop());
  const openId = open.server.events[0]!.id as string;
  const unconfirmed = await post(open.server.port, { method: 'reboot', master: true }, { key: open.acme.adminKey });
  t.equal(unconfirmed.status, 400);
  t.match(unconfirmed.json.error.message, /confirm/);
  t.notOk(existsSync(marker), 'nothing ran');
  const confirmed = await post(open.server.port, { method: 'reboot', master: true, confirm: openId }, { key: open.acme.adminKey });
  t.equal(confirmed.status, 200);
  t.same(confirmed.json.replies[0].result, { command: 'reboot', accepted: true });
  t.equal(await open.server.exit(), 0, 'the node stopped gracefully, then the command ran and succeeded');
  t.equal(readFileSync(marker, 'utf8'), 'rebooted', 'the configured command ran');
});

t.test('bad control envelopes: 400 naming the field, 413 over the cap, 403 without permission', async (t) => {
  const { server, acme, globex } = await sharedServer();
  const mark = server.events.length;
  const unknown = await post(server.port, { method: 'status', wroker: 1 }, { key: acme.adminKey });
  t.equal(unknown.status, 400);
  t.equal(unknown.json.error.message, 'wroker: unknown field (did you mean "worker"?)');
  const wrongType = await post(server.port, { method: 'status', worker: 'one' }, { key: acme.adminKey });
  t.equal(wrongType.status, 400);
  t.match(wrongType.json.error.message, /^worker/);
  const huge = await post(server.port, { method: 'status', worker: Array.from({ length: 300 }, (_, i) => i % 100) }, { key: acme.adminKey });
  t.equal(huge.status, 400);
  t.match(huge.json.error.message, /^worker/);
  const noTarget = await post(server.port, { method: 'status' }, { key: acme.adminKey });
  t.equal(noTarget.status, 400);
  t.match(noTarget.json.error.message, /no target/);
  const tooLarge = await post(server.port, { method: 'status', master: true, data: 'x'.repeat(1024 * 1024) }, { key: acme.adminKey });
  t.equal(tooLarge.status, 413);
  const noKey = await post(server.port, { method: 'cordon', broadcast: true });
  t.equal(noKey.status, 403, 'no key, no default permission');
  const otherTenant = await post(server.port, { method: 'status', master: true }, { key: globex.adminKey });
  t.equal(otherTenant.status, 403, "another tenant's key on this host");
  const garbage = await post(server.port, undefined, { key: acme.adminKey, raw: '{"method": "status",' });
  t.equal(garbage.status, 400);
  t.equal(server.events.slice(mark).filter((event) => event.event === 'worker:crash').length, 0, 'no input crashed a worker');
});

t.test('organization scope across real processes: only the workers serving the organization get the envelope, once', async (t) => {
  const { server, acme, globex } = await start();
  t.teardown(() => server.stop());
  // An authorized request makes the worker that served it a worker of that organization.
  const first = await post(server.port, { method: 'status', master: true }, { key: acme.adminKey });
  t.equal(first.status, 200);
  const servedBy = await server.command<{ id: string; replies: Array<{ worker: number }> }>('request', { envelope: { method: 'probe', organization_id: acme.organization_id } });
  t.equal(servedBy.replies.length, 1, 'one worker has served acme so far');
  t.ok([1, 2].includes(servedBy.replies[0]!.worker));
  const none = await server.command<{ replies: unknown[]; missing: unknown[] }>('request', { envelope: { method: 'probe', organization_id: globex.organization_id } });
  t.same(none.replies, [], 'no worker serves globex: nobody is a target');
  t.same(none.missing, []);
  const counts = await server.command<{ replies: Array<{ result: { worker: number; primary: boolean; count: number } }> }>('request', {
    envelope: { method: 'probe.count', broadcast: true, master: true, data: { id: servedBy.id } },
  });
  const total = counts.replies.reduce((sum, reply) => sum + reply.result.count, 0);
  t.equal(total, 1, 'delivered exactly once in the whole server');
});
