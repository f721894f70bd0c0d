import t, { type Test } from 'tap';
import http from 'node:http';
import path from 'node:path';
import WebSocket from 'ws';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ServerProcess, isAlive } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { scaled, until as waitUntil } from '../helpers/wait.js';

t.setTimeout(scaled(240_000));

interface Reply {
  status: number;
  json: any;
}

function post(port: number, url: string, body: unknown, options: { key?: string; host: string }): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), host: options.host };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    const req = http.request({ host: '127.0.0.1', port, path: url, method: 'POST', agent: false, headers }, (res) => {
      let data = '';
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, json: data ? JSON.parse(data) : undefined }));
    });
    req.setTimeout(scaled(20_000), () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(text);
  });
}

/** Refused by authorization (SPEC 8.4, 8.7), as opposed to accepted and then answered with an error by a handler. */
function refusedByAuthorization(reply: Reply): boolean {
  if (reply.status !== 403) return false;
  const { code, message } = reply.json.error;
  return code === 'platform_only' || code === 'permission_denied' || (code === 'forbidden' && message === 'this request is not authorized here');
}

/**
 * A server owned by a platform organization (the first one made), with two tenant organizations, and the keys
 * the matrix uses: each organization's admin, a restricted platform key, and a tenant key its own admin gave
 * every permission it could.
 */
async function start(config: Record<string, unknown> = {}) {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'platform', hosts: ['localhost', '127.0.0.1'] },
    { name: 'tenant-a', hosts: ['a.test'] },
    { name: 'tenant-b', hosts: ['b.test'] },
  ]);
  const [platform, tenantA, tenantB] = tenants as [(typeof tenants)[0], (typeof tenants)[0], (typeof tenants)[0]];
  const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
  const platformRestricted = await createKey(store, { organizationId: platform.organization_id, name: 'ops', permissions: { status: true, 'storage.get': true, 'socket.emit': true } });
  const platformViewer = await createKey(store, { organizationId: platform.organization_id, name: 'viewer', permissions: { overview: true } });
  const tenantRestricted = await createKey(store, { organizationId: tenantB.organization_id, name: 'everything', permissions: { '*': true } });
  const tenantObjects = await createKey(store, { organizationId: tenantB.organization_id, name: 'objects', permissions: { object: true } });
  const revoked = await createKey(store, { organizationId: tenantB.organization_id, name: 'revoked', permissions: { status: true } });
  await revokeKey(store, tenantB.organization_id, revoked.key_id);
  await store.close();
  const server = await ServerProcess.start({ workers: 2, dataDir, ...config });
  await server.readyWorkers(2);
  const serverId = String(server.events.find((event) => event.event === 'started')!.id);
  // A token in the cluster storage that only the platform may read or change.
  const stored = await post(server.port, '/control', { method: 'storage.set', master: true, data: { key: 'token-a', value: 'secret-a' } }, { key: platform.adminKey, host: 'localhost' });
  if (stored.status !== 200) throw new Error(`storage.set: ${JSON.stringify(stored.json)}`);
  return { server, serverId, platform, tenantA, tenantB, platformRestricted, platformViewer, tenantRestricted, tenantObjects, revoked };
}

type Started = Awaited<ReturnType<typeof start>>;

let shared: Promise<Started> | undefined;
/**
 * One server for every test here: each leaves it as it found it, which `assertUntouched` checks. Its info
 * log carries the audit lines the matrix reads.
 */
function sharedServer(): Promise<Started> {
  shared ??= start({ log: { level: 'info' } });
  return shared;
}
t.teardown(async () => (await shared)?.server.stop());

/** What every organization must still have after the attempts: its host served, the storage as it was, every worker up and uncordoned. */
async function assertUntouched(t: Test, started: Started) {
  const { server, platform, tenantA, tenantB } = started;
  t.ok(isAlive(server.child.pid!), 'the server is still running');
  const token = await post(server.port, '/control', { method: 'storage.get', master: true, data: { key: 'token-a' } }, { key: platform.adminKey, host: 'localhost' });
  t.same(token.json.replies[0].result, { key: 'token-a', value: 'secret-a' }, 'the stored token is unchanged');
  const workers = await post(server.port, '/control', { method: 'status', broadcast: true }, { key: platform.adminKey, host: 'localhost' });
  t.same(workers.json.replies.map((reply: any) => reply.result.status).sort(), ['ready', 'ready'], 'both workers ready, none cordoned or draining');
  for (const [tenant, host] of [[tenantA, 'a.test'], [tenantB, 'b.test'], [platform, 'localhost']] as const) {
    const reply = await post(server.port, '/crud', { method: 'object.read', collection: 'apis' }, { key: tenant.adminKey, host });
    t.equal(reply.status, 200, `${host} is still served`);
  }
}

const METHODS = ['status', 'cordon', 'drain', 'shed', 'restart', 'reboot', 'shutdown', 'storage.get', 'storage.set', 'storage.keys', 'storage.delete', 'socket.emit'] as const;
const SERVER_METHODS = new Set(['cordon', 'drain', 'shed', 'restart', 'reboot', 'shutdown', 'storage.get', 'storage.set', 'storage.keys', 'storage.delete']);
const FORMS = ['scope', 'organization_id', 'master', 'worker', 'server', 'cluster', 'broadcast'] as const;
const KINDS = ['platform admin', 'platform restricted', 'tenant admin', 'tenant restricted', 'no key'] as const;

interface Caller {
  key?: string;
  host: string;
  organization_id: string;
}

/** Each key kind, on its organization's host: tenants are tenant B, the restricted platform key lacks `overview`. */
function callersOf(started: Started): Record<(typeof KINDS)[number] | 'platform viewer', Caller> {
  const { platform, tenantB, platformRestricted, platformViewer, tenantRestricted } = started;
  return {
    'platform admin': { key: platform.adminKey, host: 'localhost', organization_id: platform.organization_id },
    'platform viewer': { key: platformViewer.key, host: 'localhost', organization_id: platform.organization_id },
    'platform restricted': { key: platformRestricted.key, host: 'localhost', organization_id: platform.organization_id },
    'tenant admin': { key: tenantB.adminKey, host: 'b.test', organization_id: tenantB.organization_id },
    'tenant restricted': { key: tenantRestricted.key, host: 'b.test', organization_id: tenantB.organization_id },
    'no key': { host: 'b.test', organization_id: tenantB.organization_id },
  };
}

/**
 * Harmless arguments: whatever an allowed caller does here leaves the server as it was (uncordon, undrain, end no
 * shedding, touch only a scratch storage key). A restart is aimed at a server that does not exist, so an allowed
 * one is routed (and reported missing) without restarting anything; reboot and shutdown carry no confirmation.
 */
function envelopeFor(method: (typeof METHODS)[number], form: (typeof FORMS)[number], serverId: string, organizationId: string): Record<string, unknown> {
  const data: Record<string, unknown> = {
    cordon: false,
    drain: false,
    shed: false,
    restart: { isPrimary: true },
    'storage.get': { key: 'token-a' },
    'storage.set': { key: 'token-a', value: 'overwritten' },
    'storage.delete': { key: 'token-a' },
    'socket.emit': { event: 'matrix', payload: 1 },
  };
  const targets: Record<(typeof FORMS)[number], Record<string, unknown>> = {
    scope: {},
    organization_id: { organization_id: organizationId },
    master: { master: true },
    worker: { worker: [1] },
    server: { server: serverId },
    cluster: { cluster: 'default' },
    broadcast: { broadcast: true },
  };
  const envelope: Record<string, unknown> = { method, ...targets[form], ...(data[method] !== undefined ? { data: data[method] } : {}) };
  if (method === 'restart') envelope.server = 'absent-server';
  // The platform's own allowed writes go to a scratch key, so the token shows only what others did.
  return envelope;
}

function expectedAllowed(kind: (typeof KINDS)[number], method: (typeof METHODS)[number], form: (typeof FORMS)[number]): boolean {
  const serverLevel = SERVER_METHODS.has(method) || !['scope', 'organization_id'].includes(form) || method === 'restart';
  switch (kind) {
    case 'platform admin':
      return true;
    case 'platform restricted':
      return method === 'status' || method === 'storage.get' || method === 'socket.emit';
    case 'tenant admin':
    case 'tenant restricted':
      return !serverLevel;
    case 'no key':
      return false;
  }
}

t.test('tenant isolation matrix: every control method × target form × key kind gets the expected answer, and nothing outside the caller reaches is changed', async (t) => {
  const started = await sharedServer();
  const { server, serverId, platform, platformRestricted } = started;
  const callers = callersOf(started);
  const mismatches: string[] = [];
  let allowed = 0;
  let refused = 0;
  for (const kind of KINDS) {
    const caller = callers[kind];
    for (const method of METHODS) {
      for (const form of FORMS) {
        const envelope = envelopeFor(method, form, serverId, caller.organization_id);
        if (kind.startsWith('platform') && (method === 'storage.set' || method === 'storage.delete')) envelope.data = { key: 'scratch', value: 1 };
        const reply = await post(server.port, '/control', envelope, caller);
        const expected = expectedAllowed(kind, method, form);
        const wasRefused = refusedByAuthorization(reply);
        if (wasRefused === expected || reply.status >= 500) mismatches.push(`${kind} ${method} ${form}: expected ${expected ? 'allowed' : 'refused'}, got ${reply.status} ${JSON.stringify(reply.json)}`);
        if (wasRefused) refused += 1;
        else allowed += 1;
      }
    }
  }
  t.same(mismatches, [], 'every cell as expected');
  t.equal(allowed + refused, KINDS.length * METHODS.length * FORMS.length);
  t.ok(allowed > 50 && refused > 200, `both answers exercised (${allowed} allowed, ${refused} refused)`);
  await assertUntouched(t, started);
  // SPEC 3.6: the audit line names the key by its id (never the key), the organization and the target.
  const audit = server.events.filter((event) => event.msg === 'control request');
  t.ok(audit.some((event) => event.key_id === platformRestricted.key_id && event.organization === platform.organization_id), 'control requests are logged with the key id');
  t.notOk(audit.some((event) => JSON.stringify(event).includes('[redacted]')), 'the key id is not redacted');
});

t.test("regressions: a tenant's keys cannot escalate, shed or restart the server, reach the storage or plant inventory", async (t) => {
  const started = await sharedServer();
  const { server, tenantA, tenantB, tenantObjects, revoked } = started;
  const asB = (url: string, body: unknown, key = tenantB.adminKey) => post(server.port, url, body, { key, host: 'b.test' });
  const objectsKeyId = tenantObjects.key_id;

  await t.test('a non-admin key with object rights cannot make itself admin', async (t) => {
    const escalate = await asB('/crud', { method: 'object.update', collection: 'keys', filter: { _id: objectsKeyId }, update: { $set: { admin: true } } }, tenantObjects.key);
    t.equal(escalate.status, 403);
    const own = await asB('/crud', { method: 'object.read', collection: 'keys', filter: { _id: objectsKeyId } });
    t.equal(own.json.documents[0].admin, false, 'the key is still not admin');
    t.ok(refusedByAuthorization(await asB('/control', { method: 'status', master: true }, tenantObjects.key)), 'and still cannot reach the primary');
  });

  await t.test("even the tenant's admin cannot re-enable a revoked key", async (t) => {
    const reenable = await asB('/crud', { method: 'object.update', collection: 'keys', filter: { _id: revoked.key_id }, update: { $set: { disabled: false, permissions: { '*': true } } } });
    t.equal(reenable.status, 403);
    t.equal((await post(server.port, '/control', { method: 'status' }, { key: revoked.key, host: 'b.test' })).json.error?.code, 'key_revoked');
  });

  await t.test('shedding another tenant is refused, and that tenant is served', async (t) => {
    t.ok(refusedByAuthorization(await asB('/control', { method: 'shed', master: true, data: [tenantA.organization_id] })));
    t.equal((await post(server.port, '/crud', { method: 'object.read', collection: 'apis' }, { key: tenantA.adminKey, host: 'a.test' })).status, 200);
  });

  await t.test('restarting the server is refused', async (t) => {
    t.ok(refusedByAuthorization(await asB('/control', { method: 'restart', master: true, data: { isPrimary: true } })));
    t.ok(isAlive(server.child.pid!));
  });

  await t.test('the cluster storage is out of reach', async (t) => {
    t.ok(refusedByAuthorization(await asB('/control', { method: 'storage.get', master: true, data: { key: 'token-a' } })), 'read');
    t.ok(refusedByAuthorization(await asB('/control', { method: 'storage.set', master: true, data: { key: 'token-a', value: 'mine' } })), 'write');
    t.ok(refusedByAuthorization(await asB('/control', { method: 'storage.keys', master: true })), 'list');
  });

  await t.test('a tenant cannot plant a server in the inventory for the primary to dial', async (t) => {
    const planted = await asB('/crud', {
      method: 'object.create',
      collection: 'servers',
      documents: [{ name: 'evil', cluster_id: 'default', master: { status: 'running', meshUrl: 'ws://127.0.0.1:9/' } }],
    });
    t.equal(planted.status, 403);
    t.equal(planted.json.error?.code, 'platform_only');
  });

  await assertUntouched(t, started);
});

function connect(port: number, host: string, key?: string): Promise<{ socket: WebSocket; frames: any[] }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host, ...(key ? { authorization: `Bearer ${key}` } : {}) }, perMessageDeflate: false });
    const frames: any[] = [];
    socket.on('message', (data) => frames.push(JSON.parse(String(data))));
    socket.once('open', () => resolve({ socket, frames }));
    socket.once('error', reject);
  });
}

const until = <T>(read: () => T | undefined, what: string, budgetMs = 10_000): Promise<T> => waitUntil(what, read, budgetMs);

t.test('regression: a WebSocket without a key receives none of its host’s events; one granted socket.subscribe does', async (t) => {
  const { server, tenantA } = await sharedServer();
  const keyless = await connect(server.port, 'a.test');
  const keyed = await connect(server.port, 'a.test', tenantA.adminKey);
  t.teardown(() => {
    keyless.socket.terminate();
    keyed.socket.terminate();
  });
  const emit = async (n: number) => {
    const reply = await post(server.port, '/control', { method: 'socket.emit', organization_id: tenantA.organization_id, data: { event: 'news', payload: n } }, { key: tenantA.adminKey, host: 'a.test' });
    t.equal(reply.status, 200);
  };
  // The keyed socket's subscription is settled asynchronously after the upgrade: emit until it has one.
  for (let n = 1; n <= 100 && !keyed.frames.some((frame) => frame.event === 'news'); n++) {
    await emit(n);
    await until(() => (keyed.frames.some((frame) => frame.event === 'news') ? true : undefined), 'an event', 200).catch(() => undefined);
  }
  t.ok(keyed.frames.some((frame) => frame.event === 'news'), 'the socket whose key grants socket.subscribe receives events');
  t.same(keyless.frames.filter((frame) => frame.event), [], 'the socket without a key received nothing');

  keyless.socket.send(JSON.stringify({ requestId: 's', method: 'socket.subscribe', apikey: tenantA.adminKey }));
  t.match(await until(() => keyless.frames.find((frame) => frame.id === 's'), 'the subscribe reply'), { ok: true, result: { subscribed: true } });
  await emit(999);
  t.same(await until(() => keyless.frames.find((frame) => frame.event === 'news'), 'an event after subscribing'), { event: 'news', data: 999 });
});

const OVERVIEW_METHODS = ['overview.server', 'overview.cluster', 'overview.events', 'overview.worker', 'overview.emit'] as const;
const OVERVIEW_KINDS = ['platform admin', 'platform viewer', 'platform restricted', 'tenant admin', 'tenant restricted', 'no key'] as const;
const UNIFORM = { code: 'forbidden', message: 'this request is not authorized here' };
const INTERNAL = { code: 'forbidden', message: '"overview.emit" is internal: only the server\'s own processes send it, and no key may' };
const FAKE_CRASH = 'worker 1 (pid 1) crashed: made up by a caller';

/** The method's own target (`target`), or the caller's organization (`scope`); `overview.emit` carries a well-formed entry. */
function overviewEnvelope(method: (typeof OVERVIEW_METHODS)[number], form: 'target' | 'scope', caller: Caller, serverId: string): Record<string, unknown> {
  const target = form === 'scope' ? { organization_id: caller.organization_id } : method === 'overview.worker' || method === 'overview.emit' ? { broadcast: true } : { master: true };
  const data: Partial<Record<(typeof OVERVIEW_METHODS)[number], unknown>> = {
    'overview.server': { processes: false },
    'overview.cluster': { timeoutMs: 2_000 },
    'overview.events': { since: 0, limit: 1 },
    'overview.emit': { server: serverId, seq: 99_999, at: Date.now(), kind: 'crash', worker: 1, message: FAKE_CRASH },
  };
  return { method, ...target, ...(data[method] === undefined ? {} : { data: data[method] }) };
}

/**
 * The platform's overview is for platform keys holding `overview` (admin keys hold it); a tenant's keys get
 * `platform_only` even with every permission, a platform key without it `permission_denied`, no key the uniform
 * refusal. `overview.emit` is internal: refused to every key.
 */
function expectedOverview(kind: (typeof OVERVIEW_KINDS)[number], method: string): { status: number; error?: { code: string; message?: string } } {
  if (kind === 'no key') return { status: 403, error: UNIFORM };
  if (method === 'overview.emit') return { status: 403, error: INTERNAL };
  if (kind === 'platform admin' || kind === 'platform viewer') return { status: 200 };
  return { status: 403, error: { code: kind === 'platform restricted' ? 'permission_denied' : 'platform_only' } };
}

t.test('overview matrix: every overview method × target form × key kind, on /control and /ws, gets the expected answer; no made-up event reaches a dashboard', async (t) => {
  const started = await sharedServer();
  const { server, serverId, platform } = started;
  const callers = callersOf(started);
  const sockets = { localhost: await connect(server.port, 'localhost'), 'b.test': await connect(server.port, 'b.test') };
  t.teardown(() => Object.values(sockets).forEach((entry) => entry.socket.terminate()));
  const mismatches: string[] = [];
  const cell = (name: string, got: { status: number; error?: any }, expected: ReturnType<typeof expectedOverview>) => {
    const matches = got.status === expected.status && (!expected.error || (got.error?.code === expected.error.code && (expected.error.message === undefined || got.error.message === expected.error.message)));
    if (!matches) mismatches.push(`${name}: expected ${JSON.stringify(expected)}, got ${got.status} ${JSON.stringify(got.error ?? null)}`);
  };

  // /ws first: the platform admin's frame makes the localhost socket a dashboard, which the attempts below must not reach.
  let frameId = 0;
  for (const kind of OVERVIEW_KINDS) {
    const caller = callers[kind];
    const { socket, frames } = sockets[caller.host as keyof typeof sockets];
    for (const method of ['overview.subscribe', 'overview.emit'] as const) {
      const requestId = `overview-${++frameId}`;
      const envelope = method === 'overview.subscribe' ? { method } : overviewEnvelope(method, 'target', caller, serverId);
      socket.send(JSON.stringify({ requestId, ...envelope, ...(caller.key ? { apikey: caller.key } : {}) }));
      const answer = await until(() => frames.find((frame) => frame.id === requestId), `the answer to ${kind}'s ${method} frame`);
      cell(`/ws ${kind} ${method}`, { status: answer.ok ? 200 : 403, error: answer.error }, expectedOverview(kind, method));
    }
  }

  for (const kind of OVERVIEW_KINDS) {
    const caller = callers[kind];
    for (const method of OVERVIEW_METHODS) {
      for (const form of ['target', 'scope'] as const) {
        const reply = await post(server.port, '/control', overviewEnvelope(method, form, caller, serverId), caller);
        const expected = expectedOverview(kind, method);
        cell(`/control ${kind} ${method} ${form}`, { status: reply.status, error: reply.json?.error }, expected);
        // The method's own target answers in full; an organization scope reaches whichever workers serve it.
        if (expected.status === 200 && form === 'target' && !(reply.json.replies.length > 0 && reply.json.replies.every((entry: any) => entry.ok))) {
          mismatches.push(`/control ${kind} ${method} target: replies ${JSON.stringify(reply.json.replies)}`);
        }
      }
    }
  }
  t.same(mismatches, [], 'every cell as expected');

  // A real event after the attempts reaches the dashboard; no made-up one came with it.
  const dashboard = sockets.localhost.frames;
  for (const value of [true, false]) await post(server.port, '/control', { method: 'cordon', server: serverId, worker: 1, data: value }, { key: platform.adminKey, host: 'localhost' });
  await until(() => (dashboard.some((frame) => frame.event === 'overview.event' && /worker 1: cordoned → ready/.test(frame.data.message)) ? true : undefined), 'the real cordon event on the dashboard');
  t.notOk(dashboard.some((frame) => frame.event === 'overview.event' && frame.data.message === FAKE_CRASH), 'no made-up event reached the dashboard');
  await assertUntouched(t, started);
});
