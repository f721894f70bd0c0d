import t from 'tap';
import type { FastifyPluginAsync } from 'fastify';
import { generateKey, revokeKey } from '../../src/auth/keys.js';
import { echoRoute, key, organization, testApp, testStore } from './fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
const orgA = await organization(store, { name: 'Acme', hosts: ['a.example', 'a2.example'], defaultPermissions: { status: true } });
const orgB = await organization(store, { name: 'Beta Secret Corp', hosts: ['b.example'] });
const adminA = await key(store, { organizationId: orgA._id, name: 'admin', admin: true });
const limitedA = await key(store, { organizationId: orgA._id, name: 'reader', permissions: { 'object.read': { collection: ['apis'] } } });
const boundA = await key(store, { organizationId: orgA._id, name: 'bound', admin: true, hosts: ['a.example'] });
const revokedA = await key(store, { organizationId: orgA._id, name: 'revoked', admin: true });
const expiredA = await key(store, { organizationId: orgA._id, name: 'expired', admin: true, expiresAt: '2001-01-01T00:00:00Z' });
const adminB = await key(store, { organizationId: orgB._id, name: 'admin', admin: true });
await revokeKey(store, orgA._id, revokedA.split('.')[0]!);

/** Tries to change what authorization settled, and reports which attempts the envelope refused. */
const tamperRoute: FastifyPluginAsync = async (app) => {
  app.post('/test/tamper', { preHandler: app.authorizeEnvelope }, async (request) => {
    const attempts: Record<string, () => void> = {
      organization_id: () => ((request.envelope as Record<string, unknown>).organization_id = orgB._id),
      method: () => ((request.envelope as Record<string, unknown>).method = 'shutdown'),
      addTarget: () => (request.envelope!.server as string[]).push('evil'),
      user: () => ((request.envelope!.user as unknown as Record<string, unknown>).admin = true),
      deleteHost: () => delete (request.envelope as Record<string, unknown>).host,
      swap: () => ((request as unknown as Record<string, unknown>).envelope = { method: 'shutdown', organization_id: orgB._id }),
    };
    const refused = Object.entries(attempts).filter(([, attempt]) => {
      try {
        attempt();
        return false;
      } catch {
        return true;
      }
    });
    return { refused: refused.map(([name]) => name), envelope: request.envelope };
  });
};

const routes: FastifyPluginAsync = async (app) => {
  await app.register(echoRoute);
  await app.register(tamperRoute);
};
const { app } = await testApp(store, { routes });
t.teardown(() => app.close());

const post = (body: unknown, options: { key?: string; host?: string; authorization?: string } = {}) =>
  app.inject({
    method: 'POST',
    url: '/test/envelope',
    headers: {
      host: options.host ?? 'a.example',
      ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
      ...(options.authorization !== undefined ? { authorization: options.authorization } : {}),
    },
    payload: body as object,
  });

t.test('a Bearer key authorizes and the handler sees who called', async (t) => {
  const reply = await post({ method: 'object.read', collection: 'keys' }, { key: adminA });
  t.equal(reply.statusCode, 200);
  t.match(reply.json().envelope, { method: 'object.read', organization_id: orgA._id, host: 'a.example', user: { key_id: adminA.split('.')[0], name: 'admin', admin: true } });
});

t.test('the envelope apikey authorizes and is removed from what the handler sees', async (t) => {
  const reply = await post({ method: 'object.read', apikey: adminA });
  t.equal(reply.statusCode, 200);
  t.notOk('apikey' in reply.json().envelope);
  t.notMatch(reply.body, adminA.split('.')[1]!);
  t.equal((await post({ method: 'object.read', apikey: adminA }, { key: adminA })).statusCode, 200, 'the same key in both places is fine');
});

t.test('a Bearer key and a different envelope apikey are refused with 403', async (t) => {
  const reply = await post({ method: 'status', apikey: limitedA }, { key: adminA });
  t.equal(reply.statusCode, 403);
  t.same(reply.json(), { error: { code: 'conflicting_keys', message: 'the Authorization header and the envelope carry different keys' } });
});

t.test('unknown, revoked and expired keys are refused with 403', async (t) => {
  const unknown = await post({ method: 'status' }, { key: generateKey().key });
  t.equal(unknown.statusCode, 403);
  t.equal(unknown.json().error.code, 'forbidden');
  const wrongSecret = await post({ method: 'status' }, { key: `${adminA.split('.')[0]}.${generateKey().secret}` });
  t.same(wrongSecret.json(), unknown.json(), 'a known id with a wrong secret answers like an unknown key');
  const revoked = await post({ method: 'status' }, { key: revokedA });
  t.equal(revoked.statusCode, 403);
  t.equal(revoked.json().error.code, 'key_revoked');
  const expired = await post({ method: 'status' }, { key: expiredA });
  t.equal(expired.statusCode, 403);
  t.equal(expired.json().error.code, 'key_expired');
});

t.test('a key is refused on a host of its organization that is not in its hosts', async (t) => {
  t.equal((await post({ method: 'status' }, { key: boundA, host: 'a.example' })).statusCode, 200);
  const elsewhere = await post({ method: 'status' }, { key: boundA, host: 'a2.example' });
  t.equal(elsewhere.statusCode, 403);
  const unknown = await post({ method: 'status' }, { key: generateKey().key, host: 'a2.example' });
  t.equal(elsewhere.body, unknown.body, 'the same answer as for a key that does not exist');
});

t.test("another tenant's key on this tenant's host is refused without revealing that tenant", async (t) => {
  const foreign = await post({ method: 'status' }, { key: adminB, host: 'a.example' });
  const unknown = await post({ method: 'status' }, { key: generateKey().key, host: 'a.example' });
  t.equal(foreign.statusCode, 403);
  t.equal(foreign.body, unknown.body, 'the same answer as for a key that does not exist');
  t.notMatch(foreign.body, orgB._id);
  t.notMatch(foreign.body, /Beta/);
  t.equal((await post({ method: 'status' }, { key: adminB, host: 'b.example' })).statusCode, 200, 'the key works on its own host');
});

t.test("no key: the organization's default permissions, and nothing where there are none", async (t) => {
  const allowed = await post({ method: 'status' });
  t.equal(allowed.statusCode, 200);
  t.equal(allowed.json().envelope.user, null);
  const denied = await post({ method: 'object.read', collection: 'apis' });
  t.equal(denied.statusCode, 403);
  const noDefaults = await post({ method: 'status' }, { host: 'b.example' });
  t.equal(noDefaults.statusCode, 403, 'organization B has no defaults');
  const unknownHost = await post({ method: 'status' }, { host: 'nobody.example' });
  t.equal(denied.body, unknownHost.body, 'a host that refuses a request without a key answers as a host that does not exist');
  t.equal(noDefaults.body, unknownHost.body);
  t.same(unknownHost.json(), { error: { code: 'forbidden', message: 'this request is not authorized here' } });
});

t.test("an internal method is refused to every key, an admin's and another organization's included; without a key it reads as any refusal", async (t) => {
  const internal = { error: { code: 'forbidden', message: '"overview.emit" is internal: only the server\'s own processes send it, and no key may' } };
  const emit = { method: 'overview.emit', broadcast: true, data: { kind: 'crash', message: 'made up' } };
  for (const [who, key, host] of [['the platform admin', adminA, 'a.example'], ['a restricted key', limitedA, 'a.example'], ["a tenant's admin", adminB, 'b.example']] as const) {
    const reply = await post(emit, { key, host });
    t.equal(reply.statusCode, 403, `${who} is refused`);
    t.same(reply.json(), internal, `${who} is told the method is internal`);
  }
  const anonymous = await post(emit);
  t.equal(anonymous.body, (await post({ method: 'status' }, { host: 'nobody.example' })).body, 'no key: the uniform refusal');
});

t.test('a restricted key is allowed only the listed values', async (t) => {
  t.equal((await post({ method: 'object.read', collection: 'apis' }, { key: limitedA })).statusCode, 200);
  t.equal((await post({ method: 'object.read', collection: 'keys' }, { key: limitedA })).statusCode, 403);
  t.equal((await post({ method: 'object.read' }, { key: limitedA })).statusCode, 403, 'the restricted field is missing');
  t.equal((await post({ method: 'object.delete', collection: 'apis' }, { key: limitedA })).statusCode, 403);
});

t.test('caller-supplied organization_id, host, user and socket are replaced by the resolved ones', async (t) => {
  const reply = await post(
    { method: 'object.read', organization_id: orgB._id, host: 'b.example', user: { key_id: 'root', admin: true }, socket: { remoteAddress: '10.6.6.6', encrypted: true } },
    { key: adminA, host: 'A.Example:8080' },
  );
  t.equal(reply.statusCode, 200);
  const { envelope } = reply.json();
  t.equal(envelope.organization_id, orgA._id);
  t.equal(envelope.host, 'a.example');
  t.same(envelope.user, { key_id: adminA.split('.')[0], name: 'admin', admin: true, platform: true });
  t.equal(envelope.socket.remoteAddress, '127.0.0.1', 'the transport address, not the claimed one');
  t.equal(envelope.socket.encrypted, false);
});

t.test('a handler cannot change scope or targets after authorization', async (t) => {
  const reply = await app.inject({
    method: 'POST',
    url: '/test/tamper',
    headers: { host: 'a.example', authorization: `Bearer ${adminA}` },
    payload: { method: 'cordon', server: ['s1'] },
  });
  t.equal(reply.statusCode, 200);
  const { refused, envelope } = reply.json();
  t.same(refused.sort(), ['addTarget', 'deleteHost', 'method', 'organization_id', 'swap', 'user']);
  t.match(envelope, { method: 'cordon', server: ['s1'], organization_id: orgA._id, host: 'a.example', user: { admin: true } });
});

t.test('malformed Authorization headers and keys get a 403 JSON answer, never a 500', async (t) => {
  const cases: Array<[string, { authorization?: string; body?: unknown }]> = [
    ['Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['Bearer without a token', { authorization: 'Bearer' }],
    ['Bearer with two tokens', { authorization: 'Bearer a b' }],
    ['empty header', { authorization: '' }],
    ['not a fleetplane key', { authorization: 'Bearer not-a-key' }],
    ['key with a short secret', { authorization: `Bearer ${adminA.slice(0, -3)}` }],
    ['numeric apikey', { body: { method: 'status', apikey: 42 } }],
    ['object apikey', { body: { method: 'status', apikey: { $gt: '' } } }],
    ['empty apikey', { body: { method: 'status', apikey: '' } }],
  ];
  for (const [name, { authorization, body }] of cases) {
    const reply = await post(body ?? { method: 'status' }, { authorization });
    t.equal(reply.statusCode, 403, name);
    t.match(reply.json(), { error: { code: /^malformed_/, message: String } }, name);
    t.equal(reply.headers['cache-control'], 'no-store', name);
  }
});

t.test('an unknown host is refused with 403 as an unknown key is; an envelope without a method with 400', async (t) => {
  const unknownHost = await post({ method: 'status' }, { key: adminA, host: 'nobody.example' });
  t.equal(unknownHost.statusCode, 403);
  const unknownKey = await post({ method: 'status' }, { key: generateKey().key });
  t.equal(unknownHost.body, unknownKey.body, 'a host that does not exist answers as a key that does not exist');
  for (const body of [{}, { method: '' }, { method: 'a..b' }, { method: 42 }, [1, 2]]) {
    const reply = await post(body, { key: adminA });
    t.equal(reply.statusCode, 400, JSON.stringify(body));
    t.equal(reply.json().error.code, 'invalid_envelope');
  }
});

t.test('a failure inside the authorizer is a 403, not a 500', async (t) => {
  const failing = await testStore();
  const { app: broken } = await testApp(failing, { routes: echoRoute });
  t.teardown(() => broken.close());
  await failing.close();
  const reply = await broken.inject({ method: 'POST', url: '/test/envelope', headers: { host: 'a.example' }, payload: { method: 'status' } });
  t.equal(reply.statusCode, 403);
  t.same(reply.json(), { error: { code: 'authorization_failed', message: 'the request could not be authorized' } });
});
