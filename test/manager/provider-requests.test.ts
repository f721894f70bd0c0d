import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import managerRoutes from '../../routes/manager.js';
import { EgressPolicy } from '../../src/api/egress.js';
import { ApiService } from '../../src/api/service.js';
import { createKey } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config/load.js';
import { ManagerCommands } from '../../src/manager/commands.js';
import { Manager } from '../../src/manager/manager.js';
import { testApp } from '../auth/fixtures/tenants.js';
import { fleetSetup, logger } from './fixtures.js';

/** A provider's upstream: records every request that reaches it, answers 201 with the instance it "made". */
async function upstream(t: Test) {
  const received: Array<{ method: string; url: string; body: unknown }> = [];
  const server = http.createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => {
      received.push({ method: request.method!, url: request.url!, body: text ? JSON.parse(text) : undefined });
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ instanceId: 'vm-42' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { received, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const provider = (baseUrl: string) => ({
  name: 'cloud',
  baseUrl,
  endpoints: { 'create-instance': { method: 'post', path: '/instances' }, 'delete-instance': { method: 'post', path: '/instances/{id}/delete' } },
});

async function setup(t: Test) {
  const base = await fleetSetup();
  t.teardown(base.close);
  const cloud = await upstream(t);
  const tenantCloud = await upstream(t);
  await base.store.forOrganization(base.platform).collection('apis').insertOne(provider(cloud.url));
  // The tenant has a provider of the same name: /manager must never reach it, nor the platform's for the tenant.
  await base.store.forOrganization(base.tenant).collection('apis').insertOne(provider(tenantCloud.url));
  // As a server's own: the platform's providers are exempt from the egress policy, the tenant's are not.
  const api = new ApiService(base.store, undefined, undefined, { policy: new EgressPolicy(), exempt: (organization) => organization === base.platform });
  t.teardown(() => api.close());
  const commands = new ManagerCommands({ store: base.store, fleet: base.fleet, revokeKey: base.keys.revoke, api: (envelope, options) => api.send(envelope, options) });
  const config = loadConfig({ env: {}, object: {} }).config.manager;
  const manager = new Manager({ config, connection: { organization_id: null, host: null }, log: logger().log, fleet: base.fleet, commands });
  t.teardown(() => manager.close());
  const { app } = await testApp(base.store, { routes: async (instance) => void (await instance.register(managerRoutes, { manager })) });
  t.teardown(() => app.close());
  const make = async (organizationId: string, name: string, extra: Record<string, unknown>) => (await createKey(base.store, { organizationId, name, ...extra })).key;
  const keys = {
    platformAdmin: await make(base.platform, 'platform admin', { admin: true }),
    // What a platform grants a server for managed scaling: one provider's instance endpoints, nothing else.
    scaling: await make(base.platform, 'scaling', { permissions: { post: { api: ['cloud'], endpoint: ['create-instance'] } } }),
    managerOnly: await make(base.platform, 'manager only', { permissions: { manager: true } }),
    boundToC1: await make(base.platform, 'server of c1', { permissions: { post: { api: ['cloud'] } }, clusterId: 'c1' }),
    tenantAdmin: await make(base.tenant, 'tenant admin', { admin: true }),
    tenantPoster: await make(base.tenant, 'tenant poster', { permissions: { post: true, manager: true } }),
  };
  return { ...base, app, keys, cloud, tenantCloud };
}

const post = (app: FastifyInstance, key: string | undefined, body: unknown, host = 'platform.test') =>
  app.inject({ method: 'POST', url: '/manager', headers: { host, 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, payload: JSON.stringify(body) });

const CREATE = { api: 'cloud', endpoint: 'create-instance', method: 'post', data: { cluster_id: 'c1', server_type: 'cx22' } };

t.test('a provider request posted to /manager by an allowed server key goes through api.send in the platform scope', async (t) => {
  const s = await setup(t);
  const reply = await post(s.app, s.keys.scaling, CREATE);
  t.equal(reply.statusCode, 200, reply.body);
  t.same(reply.json(), { status: 201, data: { instanceId: 'vm-42' } }, "the provider's own answer");
  t.equal(reply.headers['cache-control'], 'no-store');
  t.same(s.cloud.received, [{ method: 'POST', url: '/instances', body: { cluster_id: 'c1', server_type: 'cx22' } }], "the platform's provider, once, at its baseUrl");
  t.same(s.tenantCloud.received, [], "the tenant's provider of that name is not the platform's");
  const byAdmin = await post(s.app, s.keys.platformAdmin, { ...CREATE, endpoint: 'delete-instance', data: { id: 'vm-42' } });
  t.equal(byAdmin.statusCode, 200, byAdmin.body);
  t.equal(s.cloud.received.at(-1)?.url, '/instances/vm-42/delete');
});

t.test('refusals send nothing upstream: a restriction, a key without the right, a tenant key (admin and not), no key', async (t) => {
  const s = await setup(t);
  const cases: Array<[string, string | undefined, Record<string, unknown>, string?]> = [
    ['an endpoint outside the key restriction', s.keys.scaling, { ...CREATE, endpoint: 'delete-instance', data: { id: 'vm-1' } }],
    ['an api outside the key restriction', s.keys.scaling, { ...CREATE, api: 'other' }],
    ['a platform key holding only manager', s.keys.managerOnly, CREATE],
    ["a tenant admin key on the platform's host", s.keys.tenantAdmin, CREATE],
    ['a tenant admin key on its own host', s.keys.tenantAdmin, CREATE, 'tenant.test'],
    ['a tenant key holding post, on its own host', s.keys.tenantPoster, CREATE, 'tenant.test'],
    ['no key', undefined, CREATE],
  ];
  for (const [name, key, body, host] of cases) {
    const reply = await post(s.app, key, body, host);
    t.equal(reply.statusCode, 403, `${name}: 403`);
    t.match(reply.json(), { error: { code: String, message: String } }, `${name}: one error shape`);
  }
  t.same(s.cloud.received, [], "the platform's upstream saw nothing");
  t.same(s.tenantCloud.received, [], "the tenant's upstream saw nothing");
});

t.test('a provider request naming another cloud, another cluster, or an unknown api is refused before any upstream', async (t) => {
  const s = await setup(t);
  const mismatch = await post(s.app, s.keys.platformAdmin, { ...CREATE, data: { deployment: { cloud: 'aws' } } });
  t.equal(mismatch.statusCode, 400);
  t.match(mismatch.json(), { error: { code: 'cloud_mismatch', message: /"aws" is not the authorized api "cloud"/ } });
  const flat = await post(s.app, s.keys.platformAdmin, { ...CREATE, data: { cloud: 'aws' } });
  t.equal(flat.statusCode, 400, 'a top-level cloud too');
  const unknown = await post(s.app, s.keys.platformAdmin, { ...CREATE, api: 'nope' });
  t.equal(unknown.statusCode, 404, 'answered as /api answers it');
  t.match(unknown.json(), { error: { code: 'unknown_api' } });
  const unknownEndpoint = await post(s.app, s.keys.platformAdmin, { ...CREATE, endpoint: 'reboot-instance' });
  t.equal(unknownEndpoint.statusCode, 404);
  t.match(unknownEndpoint.json(), { error: { code: 'unknown_endpoint' } });
  const foreign = await post(s.app, s.keys.boundToC1, { ...CREATE, data: { cluster_id: 'c2' } });
  const unknownCluster = await post(s.app, s.keys.platformAdmin, { method: 'createServer', cluster: 'no-such-cluster' });
  t.equal(foreign.statusCode, 403, "a key bound to c1 names c2");
  t.equal(foreign.body, unknownCluster.body, 'answered as an unknown cluster is');
  t.same(s.cloud.received, [], 'nothing reached the upstream');
  const own = await post(s.app, s.keys.boundToC1, CREATE);
  t.equal(own.statusCode, 200, 'its own cluster it may name');
  t.equal(s.cloud.received.length, 1);
});

t.test("a provider request whose upstream fails is answered 502 upstream_failed with the upstream's status", async (t) => {
  const s = await setup(t);
  const failing = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(500, { 'content-type': 'application/json' }).end('{"oops":true}'));
  });
  await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => failing.close(resolve)));
  await s.store.forOrganization(s.platform).collection('apis').insertOne({ ...provider(`http://127.0.0.1:${(failing.address() as AddressInfo).port}`), name: 'broken' });
  const reply = await post(s.app, s.keys.platformAdmin, { ...CREATE, api: 'broken' });
  t.equal(reply.statusCode, 502, reply.body);
  t.same(reply.json(), { error: { code: 'upstream_failed', message: 'provider "broken" answered 500', upstreamStatus: 500 } }, 'as the documented example shows it');
});
