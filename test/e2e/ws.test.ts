import t from 'tap';
import WebSocket from 'ws';
import http from 'node:http';
import { ServerProcess } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { past, scaled, until } from '../helpers/wait.js';

function connect(port: number, options: { key?: string; host?: string } = {}): Promise<{ socket: WebSocket; frames: any[]; closed: Promise<{ code: number; reason: string }> }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host: options.host ?? 'localhost' };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers, perMessageDeflate: false });
    const frames: any[] = [];
    socket.on('message', (data) => frames.push(JSON.parse(String(data))));
    const closed = new Promise<{ code: number; reason: string }>((done) => socket.on('close', (code, reason) => done({ code, reason: String(reason) })));
    socket.once('open', () => resolve({ socket, frames, closed }));
    socket.once('error', reject);
  });
}

function nextFrame(frames: any[], predicate: (frame: any) => boolean, budgetMs = 10_000): Promise<any> {
  return until(`a frame ${String(predicate)}`, () => frames.find(predicate), budgetMs, { last: () => frames });
}

async function start(config: Record<string, unknown> = {}) {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'acme', hosts: ['localhost'] },
    { name: 'globex', hosts: ['globex.test'] },
  ]);
  const server = await ServerProcess.start({ workers: 2, dataDir, ...config });
  await server.readyWorkers(2);
  return { server, acme: tenants[0]!, globex: tenants[1]! };
}

let shared: ReturnType<typeof start> | undefined;
/** One server for the tests that change nothing on it beyond their own sockets and store documents. */
function sharedServer(): ReturnType<typeof start> {
  shared ??= start();
  return shared;
}
t.teardown(async () => (await shared)?.server.stop());

t.test('WebSocket: authorized envelopes in, replies with the request id out', async (t) => {
  const { server, acme } = await sharedServer();
  const { socket, frames } = await connect(server.port, { key: acme.adminKey });
  t.teardown(() => socket.terminate());
  socket.send(JSON.stringify({ requestId: 7, method: 'status', broadcast: true }));
  const reply = await nextFrame(frames, (frame) => frame.id === 7);
  t.equal(reply.ok, true);
  t.equal(reply.result.replies.length, 2);
  const anonymous = await connect(server.port);
  t.teardown(() => anonymous.socket.terminate());
  anonymous.socket.send(JSON.stringify({ requestId: 'a', method: 'cordon', broadcast: true }));
  const denied = await nextFrame(anonymous.frames, (frame) => frame.id === 'a');
  t.match(denied, { ok: false, error: { code: 'forbidden' } });
  anonymous.socket.send(JSON.stringify({ requestId: 'b', method: 'status', master: true, apikey: acme.adminKey }));
  t.match(await nextFrame(anonymous.frames, (frame) => frame.id === 'b'), { ok: true }, 'the envelope may carry the key');
});

t.test('garbage frames get an error frame and the socket stays up; repeated abuse closes it with 1008', async (t) => {
  const { server, acme } = await sharedServer();
  const { socket, frames, closed } = await connect(server.port, { key: acme.adminKey });
  socket.send('not json');
  const error = await nextFrame(frames, (frame) => frame.error);
  t.match(error, { ok: false, error: { code: 'bad_frame' } });
  socket.send(JSON.stringify({ requestId: 1, method: 'status', master: true }));
  t.match(await nextFrame(frames, (frame) => frame.id === 1), { ok: true }, 'still serving after a bad frame');
  for (let i = 0; i < 5; i++) socket.send(`garbage ${i}`);
  const { code } = await closed;
  t.equal(code, 1008);
  t.equal(server.count((event) => event.event === 'worker:crash'), 0);
});

t.test('organization grace: the last socket closing makes the organization inactive once; a reconnect within the grace cancels it', async (t) => {
  // Long enough that a reconnect lands inside it on a busy machine; the exact timings are test/state/organizations.test.ts's.
  const graceMs = scaled(1_500);
  const { server, acme } = await start({ organizations: { graceMs } });
  t.teardown(() => server.stop());
  const isActive = (event: { event?: string; organization_id?: unknown }) => event.event === 'organization.active' && event.organization_id === acme.organization_id;
  const first = await connect(server.port, { key: acme.adminKey });
  const active = await server.waitFor(isActive);
  t.ok(active);

  first.socket.close(1000);
  await first.closed;
  const firstClosedAt = Date.now();
  const second = await connect(server.port, { key: acme.adminKey });
  t.teardown(() => second.socket.terminate());
  t.ok(Date.now() - firstClosedAt < graceMs, 'reconnected within the grace');
  // Past the first close's grace: had the reconnect not cancelled it, the organization would be inactive by now.
  await past(firstClosedAt + graceMs + scaled(500));
  t.equal(server.count((event) => event.event === 'organization.inactive'), 0, 'reconnect within the grace: still active');

  const secondClosingAt = Date.now();
  second.socket.close(1000);
  await second.closed;
  const inactive = await server.waitFor((event) => event.event === 'organization.inactive', 5_000);
  t.equal(inactive.organization_id, acme.organization_id);
  t.ok((inactive.at as number) - secondClosingAt >= graceMs, `inactive no sooner than the grace after the last close (${(inactive.at as number) - secondClosingAt} ms ≥ ${graceMs} ms)`);
  // A new socket makes the organization active again: every event before that one is in the stream.
  const third = await connect(server.port, { key: acme.adminKey });
  t.teardown(() => third.socket.terminate());
  await server.waitFor(isActive, 15_000, server.events.indexOf(inactive) + 1);
  t.equal(server.count((event) => event.event === 'organization.inactive'), 1, 'fired once');
});

t.test('targeted events reach the organization’s sockets; shedding closes them with 1013', async (t) => {
  const { server, acme, globex } = await start();
  t.teardown(() => server.stop());
  const acmeSocket = await connect(server.port, { key: acme.adminKey });
  const globexSocket = await connect(server.port, { host: 'globex.test', key: globex.adminKey });
  t.teardown(() => acmeSocket.socket.terminate());
  await server.waitFor((event) => event.event === 'organization.active' && event.organization_id === globex.organization_id);
  const result = await server.command<{ replies: Array<{ result: { delivered: number } }> }>('request', {
    envelope: { method: 'socket.emit', organization_id: globex.organization_id, data: { event: 'hello', payload: { n: 1 } } },
  });
  t.equal(result.replies.reduce((sum, reply) => sum + reply.result.delivered, 0), 1, 'only the worker holding the socket delivered');
  t.same(await nextFrame(globexSocket.frames, (frame) => frame.event === 'hello'), { event: 'hello', data: { n: 1 } });
  t.equal(acmeSocket.frames.filter((frame) => frame.event).length, 0, 'other organizations see nothing');

  await server.command('request', { envelope: { method: 'shed', master: true, data: [globex.organization_id] } });
  t.equal((await globexSocket.closed).code, 1013);
  t.equal(acmeSocket.socket.readyState, WebSocket.OPEN, 'other organizations keep their sockets');
});

t.test('graceful shutdown closes WebSockets with 1001', async (t) => {
  const { server, acme } = await start();
  t.teardown(() => server.stop());
  const { closed } = await connect(server.port, { key: acme.adminKey });
  server.signal('SIGTERM');
  t.equal((await closed).code, 1001);
  t.equal(await server.exit(), 0);
});

/** The HTTP answer to an upgrade that was refused (the socket never opened). */
function refusedUpgrade(port: number, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers, perMessageDeflate: false });
    socket.once('open', () => {
      socket.terminate();
      reject(new Error('the upgrade was accepted'));
    });
    socket.once('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(text) }));
    });
    socket.once('error', () => {});
  });
}

t.test('the WebSocket serves every envelope an HTTP route serves: custom handlers, storage, workflows and API providers', async (t) => {
  const upstream = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => response.setHeader('content-type', 'application/json').end(JSON.stringify({ path: request.url, body: body ? JSON.parse(body) : null })));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  t.teardown(() => upstream.close());
  const { server, acme, globex } = await sharedServer();
  const { socket, frames } = await connect(server.port, { key: acme.adminKey });
  t.teardown(() => socket.terminate());
  const ask = async (id: string, envelope: Record<string, unknown>) => {
    socket.send(JSON.stringify({ requestId: id, ...envelope }));
    return nextFrame(frames, (frame) => frame.id === id);
  };

  const probe = await ask('probe', { method: 'probe', broadcast: true, data: 'x' });
  t.equal(probe.ok, true);
  t.equal(probe.result.replies.length, 2, 'a custom handler answered on each worker');
  t.match(await ask('set', { method: 'storage.set', master: true, data: { key: 'k', value: 1 } }), { ok: true });
  t.same((await ask('get', { method: 'storage.get', master: true, data: { key: 'k' } })).result.replies[0].result, { key: 'k', value: 1 });

  t.match(await ask('wf-create', { method: 'object.create', collection: 'workflows', documents: [{ name: 'echo', steps: [], output: { got: '${input}' } }] }), { ok: true });
  t.same((await ask('wf', { method: 'workflow.echo', echo: [1, 'two'] })).result, { echo: [{ got: 1 }, { got: 'two' }] });
  t.match(await ask('wf-missing', { method: 'workflow.echo' }), { ok: false, error: { code: 'invalid_request' } });

  const baseUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  t.match(await ask('api-create', { method: 'object.create', collection: 'apis', documents: [{ name: 'items', baseUrl, endpoints: { create: { method: 'post', path: '/items/{id}' } } }] }), { ok: true });
  t.same((await ask('api', { method: 'post', api: 'items', endpoint: 'create', data: { id: '7', title: 'hi' } })).result, { status: 200, data: { path: '/items/7', body: { title: 'hi' } } });

  const tenant = await connect(server.port, { host: 'globex.test', key: globex.adminKey });
  t.teardown(() => tenant.socket.terminate());
  tenant.socket.send(JSON.stringify({ requestId: 's', method: 'storage.get', master: true, data: { key: 'k' } }));
  t.match(await nextFrame(tenant.frames, (frame) => frame.id === 's'), { ok: false, error: { code: 'platform_only' } }, "a tenant's socket is held to the same authority");
});

t.test('refused envelopes are answers and do not close the socket; only malformed frames count toward 1008', async (t) => {
  const { server, globex } = await sharedServer();
  const { socket, frames } = await connect(server.port, { host: 'globex.test', key: globex.adminKey });
  t.teardown(() => socket.terminate());
  for (let i = 0; i < 12; i++) socket.send(JSON.stringify({ requestId: i, method: 'cordon', master: true }));
  for (let i = 0; i < 12; i++) t.match(await nextFrame(frames, (frame) => frame.id === i), { ok: false, error: { code: 'platform_only' } });
  socket.send(JSON.stringify({ requestId: 'last', method: 'object.read', collection: 'apis' }));
  t.match(await nextFrame(frames, (frame) => frame.id === 'last'), { ok: true }, 'still open and serving');
  t.equal(socket.readyState, WebSocket.OPEN);
});

t.test('an upgrade with a malformed, unknown or foreign key, or on an unknown host, is refused with 403 before the socket opens', async (t) => {
  const { server, acme, globex } = await sharedServer();
  const uniform = { error: { code: 'forbidden', message: 'this request is not authorized here' } };
  const unknownHost = await refusedUpgrade(server.port, { host: 'nobody.test' });
  t.same(unknownHost, { status: 403, body: uniform });
  const unknownKey = await refusedUpgrade(server.port, { host: 'localhost', authorization: `Bearer fpk_AAAAAAAAAAAAAAAA.${'A'.repeat(43)}` });
  t.same(unknownKey, { status: 403, body: uniform });
  t.same(await refusedUpgrade(server.port, { host: 'localhost', authorization: `Bearer ${globex.adminKey}` }), { status: 403, body: uniform }, "another organization's key");
  t.match(await refusedUpgrade(server.port, { host: 'localhost', authorization: 'Bearer not-a-key' }), { status: 403, body: { error: { code: 'malformed_key' } } });
  const fine = await connect(server.port, { key: acme.adminKey });
  fine.socket.terminate();
  t.pass('a valid key upgrades');
});
