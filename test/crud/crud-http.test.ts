import Fastify from 'fastify';
import t from 'tap';
import type { AddressInfo } from 'node:net';
import { key } from '../auth/fixtures/tenants.js';
import { automationApp, postJson } from '../api/fixtures/app.js';
import crudRoutes from '../../routes/crud.js';
import { CrudEnvelope, parseCrudEnvelope } from '../../src/crud/envelope.js';
import { envelopeSocket } from '../helpers/envelope-socket.js';

const fixture = await automationApp();
t.teardown(() => fixture.close());
const { app, store, acme, globex } = fixture;
const crud = (body: Record<string, unknown>, options: { key?: string | null; tenant?: typeof acme } = {}) =>
  postJson(app, '/crud', body, { tenant: options.tenant ?? acme, key: options.key });

const provider = { name: 'items', baseUrl: 'https://items.example', headers: { authorization: { secret: 'Bearer upstream-secret' }, accept: 'application/json' }, endpoints: { list: { method: 'get', path: '/items' } } };
const webhook = { name: 'github', verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: 'hook-secret' }, workflows: { '*': 'w' } };

t.test('create, read, update, delete within the caller organization', async (t) => {
  const planted = await crud({ method: 'object.create', collection: 'apis', documents: [{ ...provider, organization_id: globex.organization_id }] });
  t.match({ status: planted.statusCode, error: planted.json().error }, { status: 400, error: { code: 'invalid_input', message: /^organization_id cannot be set to another organization/ } }, "another organization's id is refused, not replaced");
  const created = await crud({ method: 'object.create', collection: 'apis', documents: [provider] });
  t.equal(created.statusCode, 200);
  t.equal(created.json().insertedIds.length, 1);
  t.equal(created.headers['cache-control'], 'no-store');
  const stored = await store.collection('apis').findOne({ _id: created.json().insertedIds[0] });
  t.equal(stored?.organization_id, acme.organization_id, "the organization is the caller's, never the document's");

  const read = await crud({ method: 'object.read', collection: 'apis', filter: { name: 'items' } });
  t.equal(read.json().documents.length, 1);
  t.same(read.json().documents[0].headers, { authorization: { secret: '[redacted]' }, accept: 'application/json' }, 'header secrets are redacted, plain headers shown');
  t.notMatch(read.body, /upstream-secret/);

  t.same((await crud({ method: 'object.read', collection: 'apis' }, { tenant: globex })).json(), { documents: [] }, 'invisible to another organization');
  t.same((await crud({ method: 'object.update', collection: 'apis', filter: {}, update: { $set: { timeoutMs: 1 } } }, { tenant: globex })).json(), { matchedCount: 0, modifiedCount: 0 });
  t.same((await crud({ method: 'object.delete', collection: 'apis', filter: {} }, { tenant: globex })).json(), { deletedCount: 0 });

  const updated = await crud({ method: 'object.update', collection: 'apis', filter: { name: 'items' }, update: { $set: { timeoutMs: 3000 } } });
  t.same(updated.json(), { matchedCount: 1, modifiedCount: 1 });
  const sorted = await crud({ method: 'object.read', collection: 'apis', sort: { name: -1 }, limit: 1 });
  t.equal(sorted.json().documents[0].timeoutMs, 3000);
  t.same((await crud({ method: 'object.delete', collection: 'apis', filter: { name: 'items' } })).json(), { deletedCount: 1 });
});

t.test('secrets can never be read back or queried', async (t) => {
  await crud({ method: 'object.create', collection: 'webhooks', documents: [webhook] });
  const read = await crud({ method: 'object.read', collection: 'webhooks' });
  t.equal(read.json().documents[0].verify.secret, '[redacted]');
  t.notMatch(read.body, /hook-secret/);
  for (const body of [
    { method: 'object.read', collection: 'webhooks', filter: { 'verify.secret': { $gt: 'a' } } },
    { method: 'object.read', collection: 'webhooks', filter: { $or: [{ verify: { scheme: 'x' } }] } },
    { method: 'object.read', collection: 'webhooks', sort: { 'verify.secret': 1 } },
    { method: 'object.delete', collection: 'webhooks', filter: { 'verify.secret': 'hook-secret' } },
    { method: 'object.read', collection: 'apis', filter: { 'headers.authorization.secret': { $exists: true } } },
  ]) {
    const reply = await crud(body);
    t.equal(reply.statusCode, 400, JSON.stringify(body));
    t.equal(reply.json().error.code, 'secret_field');
  }
  const keys = await crud({ method: 'object.read', collection: 'keys' });
  t.equal(keys.statusCode, 200);
  t.ok(keys.json().documents.length >= 1);
  for (const document of keys.json().documents) t.notOk('secretHash' in document, 'no key hash');
  t.equal((await crud({ method: 'object.read', collection: 'keys', filter: { secretHash: { $gt: '0' } } })).statusCode, 403);
  t.equal((await crud({ method: 'object.update', collection: 'keys', filter: {}, update: { $set: { secretHash: 'f'.repeat(64) } } })).statusCode, 403);
  for (const update of [{ $set: { cluster_id: 'another-cluster' } }, { $unset: { cluster_id: '' } }]) {
    const reply = await crud({ method: 'object.update', collection: 'keys', filter: {}, update });
    t.equal(reply.statusCode, 403, `a key's cluster binding never changes: ${JSON.stringify(update)}`);
  }
});

t.test('authorized per method with a collection restriction', async (t) => {
  const reader = await key(store, { organizationId: acme.organization_id, name: 'reader', permissions: { 'object.read': { collection: ['workflows'] } } });
  t.equal((await crud({ method: 'object.read', collection: 'workflows' }, { key: reader })).statusCode, 200);
  t.equal((await crud({ method: 'object.read', collection: 'apis' }, { key: reader })).statusCode, 403);
  t.equal((await crud({ method: 'object.create', collection: 'workflows', documents: [{ name: 'x', steps: [] }] }, { key: reader })).statusCode, 403);
  t.equal((await crud({ method: 'object.read', collection: 'workflows' }, { key: null })).statusCode, 403);
});

t.test('bad envelopes are 4xx naming the problem and change nothing', async (t) => {
  const cases: Array<[Record<string, unknown>, number, RegExp]> = [
    [{ method: 'object.create', collection: 'apis' }, 400, /^documents: is required by object.create/],
    [{ method: 'object.create', collection: 'apis', documents: [provider], filter: {} }, 400, /^filter: not used by object.create/],
    [{ method: 'object.update', collection: 'apis', filter: {} }, 400, /^update: is required/],
    [{ method: 'object.delete', collection: 'apis' }, 400, /^filter: is required/],
    [{ method: 'object.read', collection: 'apis', filter: { $where: 'x' } }, 400, /\$where/],
    [{ method: 'object.read', collection: 'apis', limit: 0 }, 400, /^limit/],
    [{ method: 'object.read', collection: 'a b' }, 400, /^collection/],
    [{ method: 'object.read', collection: 'apis', colection: 'x' }, 400, /^colection: unknown field \(did you mean "collection"\?\)$/],
    [{ method: 'object.read', colection: 'apis' }, 400, /^colection: unknown field \(did you mean "collection"\?\)$/],
    [{ method: 'object.read', collection: 'apis', bogus: 1 }, 400, /^bogus: unknown field$/],
    [{ method: 'object.drop', collection: 'apis' }, 400, /^method/],
    [{ method: 'object.update', collection: 'apis', filter: {}, update: { name: 'x' } }, 400, /operators/],
    [{ method: 'object.update', collection: 'organizations', filter: {}, update: { $set: { name: 'x' } } }, 400, /organizations are changed with "fleetplane apply"/],
    [{ method: 'object.read', collection: 'apis', sort: {} }, 400, /^sort: must name at least one field/],
    [{ method: 'object.read', collection: 'apis', sort: { $natural: 1 } }, 400, /\$natural/],
    [{ method: 'object.read', collection: 'keys', sort: { secretHash: 1 } }, 403, /sort\.secretHash/],
    [{ method: 'object.create', collection: 'workflows', documents: [{ _id: 'chosen', name: 'x', steps: [] }] }, 400, /^documents\.0\._id: assigned by the store/],
    [{ method: 'object.create', collection: 'apis', documents: [{ name: 'no-base-url' }] }, 400, /^documents\.0: baseUrl: is required/],
    [{ method: 'object.create', collection: 'things', documents: [{ $bad: 1 }] }, 400, /^documents\.0: /],
  ];
  for (const [body, status, message] of cases) {
    const reply = await crud(body);
    t.equal(reply.statusCode, status, JSON.stringify(body));
    t.match(reply.json().error.message, message);
  }
  const before = await store.forOrganization(acme.organization_id).collection('workflows').countDocuments();
  const duplicate = await crud({ method: 'object.create', collection: 'workflows', documents: [{ name: 'fresh', steps: [] }, { name: 'twin', steps: [] }, { name: 'twin', steps: [] }] });
  t.equal(duplicate.statusCode, 409);
  t.equal(await store.forOrganization(acme.organization_id).collection('workflows').countDocuments(), before, 'all or nothing: no document of the batch stays');
});

t.test('the same envelopes over the WebSocket', async (t) => {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const { ask, socket } = await envelopeSocket(t, `ws://127.0.0.1:${port}/ws`, { host: acme.host, authorization: `Bearer ${acme.adminKey}` });
  t.match(await ask({ requestId: 1, method: 'object.create', collection: 'servers_config', documents: [{ name: 'routing', type: 'routing' }] }), { ok: true, result: { insertedIds: [String] } });
  t.match(await ask({ requestId: 2, method: 'object.read', collection: 'servers_config' }), { ok: true, result: { documents: [{ name: 'routing', organization_id: acme.organization_id }] } });
  t.match(await ask({ requestId: 3, method: 'object.read', collection: 'webhooks' }), { ok: true, result: { documents: [{ verify: { secret: '[redacted]' } }] } });
  for (let i = 0; i < 6; i++) t.match(await ask({ requestId: `dup-${i}`, method: 'object.create', collection: 'servers_config', documents: [{ name: 'routing', type: 'routing' }] }), { ok: false, error: { code: 'duplicate_key' } });
  t.equal(socket.readyState, socket.OPEN, 'refused CRUD envelopes do not count as abuse');
  t.match(await ask({ requestId: 4, method: 'object.read', collection: 'x', bogus: 1 }), { ok: false, error: { code: 'invalid_envelope', message: /^bogus: unknown field/ } });
  t.match(await ask({ requestId: 5, method: 'object.read', colection: 'x' }), { ok: false, error: { code: 'invalid_envelope', message: 'colection: unknown field (did you mean "collection"?)' } });
});

t.test('the route checks its body against the very CrudEnvelope schema the engine then trusts', async (t) => {
  const bare = Fastify({ ajv: { customOptions: { removeAdditional: false, coerceTypes: false } } });
  t.teardown(() => bare.close());
  const schemas: unknown[] = [];
  bare.addHook('onRoute', (route) => {
    if (route.url === '/crud') schemas.push(route.schema?.body);
  });
  bare.decorate('authorizeEnvelope', async () => {});
  await bare.register(crudRoutes);
  t.same(schemas.length, 1);
  t.equal(schemas[0], CrudEnvelope);
});

t.test('an envelope whose schema was checked still meets the per-method rules, resolved fields aside', async (t) => {
  const resolved = { organization_id: 'o', host: 'h', user: null, socket: null };
  t.throws(() => parseCrudEnvelope({ ...resolved, method: 'object.read', collection: 'apis', documents: [{}] }, { schemaChecked: true }), { code: 'invalid_envelope', message: /^documents: not used by object.read/ });
  t.throws(() => parseCrudEnvelope({ ...resolved, method: 'object.delete', collection: 'apis' }, { schemaChecked: true }), { code: 'invalid_envelope', message: /^filter: is required/ });
  t.same(parseCrudEnvelope({ ...resolved, method: 'object.read', collection: 'apis', filter: {} }, { schemaChecked: true }).filter, {});
});
