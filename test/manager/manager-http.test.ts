import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import managerRoutes from '../../routes/manager.js';
import { createKey } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config/load.js';
import { ManagerCommands } from '../../src/manager/commands.js';
import { bindIssuedKeys } from '../../src/manager/server-keys.js';
import { Manager } from '../../src/manager/manager.js';
import { testApp } from '../auth/fixtures/tenants.js';
import { fleetSetup, logger, stubProvider } from './fixtures.js';

/** A parent of the platform server itself, counting what reaches it: the route must send it nothing. */
async function grandParent(t: Test) {
  let received = 0;
  const server = http.createServer((request, response) => {
    received++;
    request.resume();
    response.end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received: () => received };
}

async function setup(t: Test) {
  const base = await fleetSetup(stubProvider(async (_action, request) => ({ instanceId: `i-${String(request.data.server_id)}` })));
  t.teardown(base.close);
  const above = await grandParent(t);
  const config = loadConfig({ env: {}, object: { manager: { organizationId: 'grand', host: above.url, apiKey: 'fpk_grandparentkey0001.grand-secret' } } }).config.manager;
  const manager = new Manager({ config, connection: { organization_id: 'grand', host: above.url }, log: logger().log, fleet: base.fleet, commands: new ManagerCommands({ store: base.store, fleet: base.fleet, revokeKey: base.keys.revoke }) });
  t.teardown(() => manager.close());
  const { app } = await testApp(base.store, { routes: async (instance) => void (await instance.register(managerRoutes, { manager })) });
  t.teardown(() => app.close());
  const adminKey = (await createKey(base.store, { organizationId: base.platform, name: 'admin', admin: true })).key;
  const tenantKey = (await createKey(base.store, { organizationId: base.tenant, name: 'tenant admin', admin: true })).key;
  const crudOnlyKey = (await createKey(base.store, { organizationId: base.platform, name: 'crud', permissions: { object: true } })).key;
  // Another tenant's managed cluster on the same parent.
  const other = { _id: 'c2', name: 'other', manager: { organization_id: base.platform, host: 'x', for: 'other-tenant' }, initialDeployment: { cloud: 'local' } };
  await base.store.forOrganization(base.platform).collection('clusters').insertOne(other);
  return { ...base, app, adminKey, tenantKey, crudOnlyKey, above };
}

const post = (app: FastifyInstance, key: string | undefined, body: unknown, url = '/manager') =>
  app.inject({ method: 'POST', url, headers: { host: 'platform.test', 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, payload: JSON.stringify(body) });

/** Creates s1 in c1 with the admin key; answers the key the parent gave the new server. */
async function createS1(s: Awaited<ReturnType<typeof setup>>): Promise<string> {
  const response = await post(s.app, s.adminKey, { method: 'createServer', cluster: 'c1', server_id: 's1' });
  if (response.statusCode !== 200) throw new Error(response.body);
  const startup = s.provider.calls.at(-1)!.request.data.startup as { manager: { apiKey: string } };
  return startup.manager.apiKey;
}

t.test('createServer through POST /manager creates the server and starts its watchdog', async (t) => {
  const s = await setup(t);
  const response = await post(s.app, s.adminKey, { method: 'createServer', cluster: 'c1', server_id: 's1' });
  t.equal(response.statusCode, 200, response.body);
  t.same(response.json(), { server_id: 's1', cluster_id: 'c1', instanceId: 'i-s1', status: 'starting' });
  t.equal(response.headers['cache-control'], 'no-store');
  t.same(s.fleet.watchdog.pending, ['s1']);
});

t.test("the new server's own running update persists, confirms it, and is mirrored nowhere", async (t) => {
  const s = await setup(t);
  const serverKey = await createS1(s);
  const response = await post(s.app, serverKey, { method: 'object.update', collection: 'servers', filter: { _id: 's1' }, update: { $set: { 'master.status': 'running', 'master.pid': 7 } } });
  t.equal(response.statusCode, 200, response.body);
  t.same(response.json(), { matchedCount: 1, modifiedCount: 1 });
  t.equal((await s.store.collection<{ _id: string; master: { status: string } }>('servers').findOne({ _id: 's1' }))?.master.status, 'running');
  t.same(s.fleet.watchdog.pending, [], 'confirmed');
  t.equal(s.above.received(), 0, "nothing the route wrote went on to the parent's own manager");
});

t.test('a key the parent gave a server reaches only its own cluster; other clusters read as unknown', async (t) => {
  const s = await setup(t);
  const serverKey = await createS1(s);
  const unknown = await post(s.app, s.adminKey, { method: 'createServer', cluster: 'no-such-cluster' });
  const otherTenant = await post(s.app, serverKey, { method: 'createServer', cluster: 'c2' });
  t.equal(unknown.statusCode, 403);
  t.equal(otherTenant.statusCode, 403);
  t.equal(otherTenant.body, unknown.body, "another tenant's cluster answers exactly as an unknown one");
  await s.store.forOrganization(s.platform).collection('servers').insertOne({ _id: 'x1', cluster_id: 'c2', master: { status: 'running' } });
  const foreign = await post(s.app, serverKey, { method: 'object.update', collection: 'servers', filter: { _id: 'x1' }, update: { $set: { 'master.status': 'failed' } } });
  t.same(foreign.json(), { matchedCount: 0, modifiedCount: 0 });
  const protectedField = await post(s.app, serverKey, { method: 'object.update', collection: 'servers', filter: { _id: 's1' }, update: { $set: { cluster_id: 'c2' } } });
  t.equal(protectedField.statusCode, 403);
  t.match(protectedField.json(), { error: { code: 'protected_field' } });
  const deleteCluster = await post(s.app, serverKey, { method: 'object.delete', collection: 'clusters', filter: { _id: 'c1' } });
  t.equal(deleteCluster.statusCode, 403);
  t.equal(await s.store.collection('clusters').countDocuments(), 2);
  const own = await post(s.app, serverKey, { method: 'createServer', cluster: 'c1' });
  t.equal(own.statusCode, 200, 'its own cluster it may grow');
});

t.test("a server's key stays bound to its cluster when its record is gone, and deleting a record through /manager revokes the server's key", async (t) => {
  const s = await setup(t);
  const serverKey = await createS1(s);
  const unknown = await post(s.app, s.adminKey, { method: 'createServer', cluster: 'no-such-cluster' });
  const providerCalls = s.provider.calls.length;
  // The record goes some other way than through /manager (an operator cleaning up, a store restored from backup):
  // the key does not become a key of every cluster.
  await s.store.forOrganization(s.platform).collection('servers').deleteOne({ _id: 's1' });
  for (const body of [
    { method: 'createServer', cluster: 'c2' },
    { method: 'terminateServer', cluster: 'c2', server_id: 'x9' },
  ]) {
    const reply = await post(s.app, serverKey, body);
    t.equal(reply.statusCode, 403, `${body.method} in another tenant's cluster`);
    t.equal(reply.body, unknown.body, 'answered as an unknown cluster');
  }
  await s.store.forOrganization(s.platform).collection('servers').insertOne({ _id: 'x1', cluster_id: 'c2', master: { status: 'failed' } });
  const foreign = await post(s.app, serverKey, { method: 'object.delete', collection: 'servers', filter: { _id: 'x1' } });
  t.same(foreign.json(), { deletedCount: 0 }, "another tenant's server record is out of reach");
  t.equal(s.provider.calls.length, providerCalls, 'no provider was asked');

  // s2 deletes its own record through /manager, as the cluster's sweep does: its key is revoked with it.
  const created = await post(s.app, s.adminKey, { method: 'createServer', cluster: 'c1', server_id: 's2' });
  t.equal(created.statusCode, 200, created.body);
  const s2Key = (s.provider.calls.at(-1)!.request.data.startup as { manager: { apiKey: string } }).manager.apiKey;
  const removed = await post(s.app, s2Key, { method: 'object.delete', collection: 'servers', filter: { _id: 's2' } });
  t.same(removed.json(), { deletedCount: 1 }, removed.body);
  const after = await post(s.app, s2Key, { method: 'createServer', cluster: 'c1' });
  t.equal(after.statusCode, 403, 'the swept server\'s key no longer works');
  t.equal(await s.store.forOrganization(s.platform).collection('keys').countDocuments({ name: 'managed server s2', disabled: true }), 1);
  t.equal(await s.store.forOrganization(s.platform).collection('servers').countDocuments({ _id: 's2' }), 0);
});

t.test('a key issued before keys carried their cluster is bound at start from its server record, once; an operator key stays unbound', async (t) => {
  const s = await setup(t);
  const scope = s.store.forOrganization(s.platform);
  const earlier = await createKey(s.store, { organizationId: s.platform, name: 'managed server old', permissions: { manager: true } });
  const operator = await createKey(s.store, { organizationId: s.platform, name: 'operator', permissions: { manager: true } });
  await scope.collection('servers').insertOne({ _id: 'old', cluster_id: 'c1', master: { status: 'running' }, manager: { key_id: earlier.key_id } });
  t.equal(await bindIssuedKeys(s.store, s.platform), 1);
  t.equal((await scope.collection('keys').findOne({ _id: earlier.key_id }))?.cluster_id, 'c1');
  t.equal((await scope.collection('keys').findOne({ _id: operator.key_id }))?.cluster_id, undefined, "an operator's key is not bound");
  t.equal(await bindIssuedKeys(s.store, s.platform), 0, 'a second start binds nothing more');
  await scope.collection('servers').deleteOne({ _id: 'old' });
  const reply = await post(s.app, earlier.key, { method: 'createServer', cluster: 'c2' });
  t.equal(reply.statusCode, 403, "with its record gone, the key still reaches only its own cluster");
});

t.test('bad input: unknown method or collection named, wrong cloud, missing fields', async (t) => {
  const s = await setup(t);
  const method = await post(s.app, s.adminKey, { method: 'object.read', collection: 'servers' });
  t.equal(method.statusCode, 404, 'as an IPC target without a handler for the method answers');
  t.match(method.json(), { error: { code: 'unknown_method', message: /"object\.read"/ } });
  const collection = await post(s.app, s.adminKey, { method: 'object.delete', collection: 'keys', filter: {} });
  t.equal(collection.statusCode, 400);
  t.match(collection.json(), { error: { code: 'unknown_collection', message: /"keys"/ } });
  const cloud = await post(s.app, s.adminKey, { method: 'createServer', cluster: 'c1', api: 'local', deployment: { cloud: 'hetzner' } });
  t.equal(cloud.statusCode, 400);
  t.match(cloud.json(), { error: { code: 'cloud_mismatch' } });
  const serverless = await post(s.app, s.adminKey, { method: 'terminateServer', cluster: 'c1' });
  t.equal(serverless.statusCode, 400);
  t.equal(s.provider.calls.length, 0, 'no provider was asked');
  t.equal(await s.store.collection('servers').countDocuments(), 0, 'and nothing was written');
});

t.test('only platform keys holding manager.<method> are served', async (t) => {
  const s = await setup(t);
  const tenant = await s.app.inject({ method: 'POST', url: '/manager', headers: { host: 'tenant.test', 'content-type': 'application/json', authorization: `Bearer ${s.tenantKey}` }, payload: JSON.stringify({ method: 'createServer', cluster: 'c1' }) });
  t.equal(tenant.statusCode, 403);
  const crudOnly = await post(s.app, s.crudOnlyKey, { method: 'object.update', collection: 'servers', filter: {}, update: { $set: { a: 1 } } });
  t.equal(crudOnly.statusCode, 403, 'a grant of object.update for /crud is not a manager grant');
  t.match(crudOnly.json(), { error: { code: 'permission_denied', message: /manager\.object\.update/ } });
  const anonymous = await post(s.app, undefined, { method: 'createServer', cluster: 'c1' });
  t.equal(anonymous.statusCode, 403);
  t.equal(s.provider.calls.length, 0);
});

t.test('terminateServer and the path form /manager/<method>', async (t) => {
  const s = await setup(t);
  await createS1(s);
  const response = await post(s.app, s.adminKey, { cluster: 'c1', server_id: 's1' }, '/manager/terminateServer');
  t.equal(response.statusCode, 200, response.body);
  t.same(response.json(), { server_id: 's1', status: 'terminating', provider: { instanceId: 'i-s1' } });
  t.ok(s.fleet.cleanup.scheduled('s1'));
  const mismatch = await post(s.app, s.adminKey, { method: 'createServer', cluster: 'c1' }, '/manager/terminateServer');
  t.equal(mismatch.statusCode, 400);
  const unknownPath = await post(s.app, s.adminKey, { cluster: 'c1' }, '/manager/reboot');
  t.equal(unknownPath.statusCode, 404);
  t.match(unknownPath.json(), { error: { code: 'unknown_method', message: /"reboot"/ } });
  const managerial = await post(s.app, s.adminKey, { method: 'createServer' }, '/managerial');
  t.equal(managerial.statusCode, 404);
  const get = await s.app.inject({ method: 'GET', url: '/manager', headers: { host: 'platform.test' } });
  t.equal(get.statusCode, 405);
});

t.test('no reply carries a key', async (t) => {
  const s = await setup(t);
  const serverKey = await createS1(s);
  const secrets = [serverKey, s.adminKey].map((key) => key.split('.')[1]!);
  const replies = [
    await post(s.app, serverKey, { method: 'createServer', cluster: 'c2' }),
    await post(s.app, serverKey, { method: 'object.update', collection: 'keys', filter: {}, update: {} }),
    await post(s.app, s.adminKey, { method: 'createServer', cluster: 'c1', deployment: { cloud: 'local' }, api: 'x' }),
    await post(s.app, s.adminKey, { method: 'createServer', cluster: 'c1', server_id: 's2' }),
  ];
  for (const reply of replies) for (const secret of secrets) t.notOk(reply.body.includes(secret));
  const records = JSON.stringify(await s.store.collection('servers').find({}));
  for (const secret of secrets) t.notOk(records.includes(secret), 'nor does any inventory record');
});
