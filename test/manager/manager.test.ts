import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { managerUrl, resolveConnection } from '../../src/manager/connection.js';
import { ManagerError } from '../../src/manager/errors.js';
import { Manager } from '../../src/manager/manager.js';
import { testStore } from '../auth/fixtures/tenants.js';
import { logger } from './fixtures.js';
import { until } from '../helpers/wait.js';

const KEY = 'fpk_managerkey000001.super-secret-manager-key-value';

interface Received {
  headers: http.IncomingHttpHeaders;
  url: string;
  body: Record<string, unknown>;
}

/** A stand-in parent: records what reaches `/manager` and answers with `answer`. */
async function parent(t: Test, answer: (request: Received, response: http.ServerResponse) => void = (_request, response) => response.end('{"matchedCount":1}')) {
  const received: Received[] = [];
  const server = http.createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => {
      const entry = { headers: request.headers, url: request.url!, body: JSON.parse(text) as Record<string, unknown> };
      received.push(entry);
      answer(entry, response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  t.teardown(() => server.closeAllConnections());
  return { received, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function manager(t: Test, host: string | null, overrides: Record<string, unknown> = {}) {
  const config = loadConfig({ env: {}, object: { manager: { apiKey: KEY, timeoutMs: 3_000, ...overrides } } }).config.manager;
  const { lines, log } = logger();
  const created = new Manager({ config, connection: { organization_id: host ? 'platform-org' : null, host }, log });
  t.teardown(() => created.close());
  return { manager: created, lines };
}

t.test('the key and the runtime functions never serialize', async (t) => {
  const { manager: m } = manager(t, 'parent.example.com');
  const text = JSON.stringify(m);
  t.same(JSON.parse(text), { organization_id: 'platform-org', host: 'parent.example.com' });
  t.notOk(text.includes('super-secret'));
  for (const name of ['apiKey', 'send', 'createServer', 'terminateServer', 'http', 'config']) {
    t.equal(Object.getOwnPropertyDescriptor(m, name)?.enumerable, false, `${name} is not enumerable`);
  }
  t.same(Object.keys(m), ['organization_id', 'host']);
  t.equal(m.apiKey, KEY, 'but the manager can read it');
});

t.test('send POSTs to <host>/manager with the key as Bearer and without the caller scope', async (t) => {
  const stand = await parent(t);
  const { manager: m } = manager(t, stand.url);
  const reply = await m.send({ method: 'object.update', collection: 'servers', filter: { _id: 's1' }, update: { $set: { a: 1 } }, organization_id: 'tenant', host: 'tenant.example', user: { key_id: 'x' }, socket: {}, apikey: 'other' });
  t.same(reply, { matchedCount: 1 });
  t.equal(stand.received.length, 1);
  const [request] = stand.received;
  t.equal(request!.url, '/manager');
  t.equal(request!.headers.authorization, `Bearer ${KEY}`);
  t.same(request!.body, { method: 'object.update', collection: 'servers', filter: { _id: 's1' }, update: { $set: { a: 1 } } });
});

t.test('a refusal of the parent is an error that names its status and code, never the key', async (t) => {
  const stand = await parent(t, (_request, response) => {
    response.statusCode = 403;
    response.end('{"error":{"code":"forbidden","message":"no"}}');
  });
  const { manager: m } = manager(t, stand.url);
  const error = await m.send({ method: 'createServer' }).catch((caught: unknown) => caught);
  t.ok(error instanceof ManagerError);
  t.match((error as ManagerError).message, /403 \(forbidden\)/);
  t.notOk(JSON.stringify({ ...(error as object), message: (error as Error).message }).includes('super-secret'));
});

t.test('a parent that does not answer in time fails the send with a timeout', async (t) => {
  const stand = await parent(t, () => undefined);
  const { manager: m } = manager(t, stand.url, { timeoutMs: 150 });
  const error = await m.send({ method: 'createServer' }).catch((caught: unknown) => caught);
  t.equal((error as ManagerError).code, 'parent_timeout');
  t.equal(stand.received.length, 1);
});

t.test('a send given up by its caller ends at once, before the parent answers and before the timeout', async (t) => {
  const stand = await parent(t, () => undefined);
  const { manager: m } = manager(t, stand.url, { timeoutMs: 60_000 });
  const controller = new AbortController();
  const sent = m.send({ method: 'terminateServer' }, { signal: controller.signal }).catch((caught: unknown) => caught);
  await waitFor(() => stand.received.length > 0);
  controller.abort();
  t.match(await sent, { code: 'parent_abandoned', message: /given up before its answer/ });
});

t.test('an unmanaged server sends nothing and mirrors nothing', async (t) => {
  const { manager: m, lines } = manager(t, null);
  t.equal(m.managed, false);
  await t.rejects(m.send({ method: 'createServer' }), { code: 'unmanaged' });
  m.mirrorSave('s1', 'c1', 'master', { status: 'running' });
  t.same(lines, []);
});

t.test('a save is mirrored once as an update of the server record', async (t) => {
  const stand = await parent(t);
  const { manager: m, lines } = manager(t, stand.url);
  m.mirrorSave('s1', 'c1', 'master', { status: 'running', pid: 42, gone: undefined });
  await t.resolveMatch(waitFor(() => stand.received.length === 1), true);
  t.same(stand.received[0]!.body, { method: 'object.update', collection: 'servers', filter: { _id: 's1' }, update: { $set: { 'master.status': 'running', 'master.pid': 42 } } });
  t.same(lines, []);
});

t.test('a failed mirror is logged once and never retried', async (t) => {
  const stand = await parent(t, (_request, response) => {
    response.statusCode = 500;
    response.end();
  });
  const { manager: m, lines } = manager(t, stand.url);
  m.mirrorSave('s1', 'c1', 'master', { status: 'running' });
  await waitFor(() => lines.length === 1);
  t.equal(lines[0]!.level, 'warn');
  t.equal(lines[0]!.details.server, 's1');
  t.notOk(JSON.stringify(lines).includes('super-secret'), 'the warning does not carry the key');
  // Another round trip to the stand-in: had a retry been scheduled, it would have arrived by now.
  await m.send({ method: 'createServer' }).catch(() => undefined);
  t.equal(stand.received.length, 2, 'the mirror and the probe, no replay');
  t.equal(lines.length, 1);
});

t.test('the parent URL: https for a host name, an explicit URL as given', async (t) => {
  t.equal(managerUrl('parent.example.com'), 'https://parent.example.com/manager');
  t.equal(managerUrl('http://127.0.0.1:9000/'), 'http://127.0.0.1:9000/manager');
  t.throws(() => managerUrl('https://user:pw@parent.example.com'));
});

t.test('the connection comes from config, else from the server inventory record, else none', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const base = loadConfig({ env: {}, object: {} }).config.manager;
  t.same(await resolveConnection({ ...base, organizationId: 'p', host: 'h' }, store, 's1'), { organization_id: 'p', host: 'h' });
  t.same(await resolveConnection(base, store, 's1'), { organization_id: null, host: null });
  await store.collection('servers').insertOne({ _id: 's1', manager: { organization_id: 'p2', host: 'parent.example' } });
  t.same(await resolveConnection(base, store, 's1'), { organization_id: 'p2', host: 'parent.example' });
});

function waitFor(condition: () => boolean, budgetMs = 5_000): Promise<boolean> {
  return until(String(condition), () => (condition() ? true : undefined), budgetMs, { everyMs: 1 });
}

t.test('a parent that does not answer holds at most 64 mirrors; later saves are skipped with a bounded number of warnings', async (t) => {
  const stand = await parent(t, () => undefined);
  const { manager: m, lines } = manager(t, stand.url, { timeoutMs: 3_000 });
  for (let index = 0; index < 100; index++) m.mirrorSave('s1', 'c1', 'master', { status: 'running', index });
  t.ok(lines.length >= 10 && lines.length <= 11, `warnings are rate-limited (${lines.length})`);
  t.ok(lines.every((line) => line.details.code === 'parent_busy'));
  await waitFor(() => stand.received.length >= 8);
  t.ok(stand.received.length <= 64, 'never more than 64 sent while none is answered');
});
