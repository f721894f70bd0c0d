import t from 'tap';
import type { FastifyPluginAsync } from 'fastify';
import { buildApp } from '../../app.js';
import type { RouteContext } from '../../plugins/services.js';
import { Authorizer } from '../../src/auth/authorize.js';
import { loadConfig } from '../../src/config/load.js';
import { FleetplaneError } from '../../src/errors.js';
import { key, organization, tempDir, testStore } from '../auth/fixtures/tenants.js';
import { standInServer } from '../helpers/route-context.js';

const store = await testStore();
t.teardown(() => store.close());
const acme = await organization(store, { name: 'acme', hosts: ['acme.test'] });
const adminKey = await key(store, { organizationId: acme._id, name: 'admin', admin: true });
const config = loadConfig({ env: {}, object: { dataDir: tempDir() } }).config;

/** Routes of an embedding application: what they throw reaches the one error handler. */
const throwing: FastifyPluginAsync = async (app) => {
  app.get('/test/refused', async () => {
    throw new FleetplaneError('not_yours', 'this thing is not yours', 409);
  });
  app.get('/test/hidden', async () => {
    throw new FleetplaneError('disk_on_fire', 'the disk /dev/sda1 is on fire', 503);
  });
  app.get('/test/organization', async (request) => ({ organization: (await app.organizationOf(request))?._id ?? null }));
};

const withAuthorizer = standInServer(config, { db: store, authorize: new Authorizer(store) });
const { app } = await buildApp({ server: withAuthorizer, logger: false, extend: throwing });
t.teardown(() => app.close());

t.test('a stand-in without a capability every server has is a type error', async (t) => {
  // @ts-expect-error `request` is missing: POST /control and the WebSocket hand envelopes on with it.
  const missing: RouteContext = {
    id: 'srv',
    workerId: 1,
    config,
    status: 'ready',
    state: { shedding: new Set(), isShed: () => false },
    getHealth: () => ({ ready: true, live: true, status: 'ready' }),
    metricsText: async () => '',
    send: async () => undefined,
  };
  t.equal(missing.id, 'srv');
});

t.test('a domain error thrown by a route answers with its status, code and message, not cached', async (t) => {
  const reply = await app.inject({ method: 'GET', url: '/test/refused', headers: { host: 'acme.test' } });
  t.equal(reply.statusCode, 409);
  t.equal(reply.headers['cache-control'], 'no-store');
  t.same(reply.json(), { error: { code: 'not_yours', message: 'this thing is not yours' } });
});

t.test('a domain error whose message is not to be shown answers as a server failure', async (t) => {
  const reply = await app.inject({ method: 'GET', url: '/test/hidden', headers: { host: 'acme.test' } });
  t.equal(reply.statusCode, 503);
  t.same(reply.json(), { error: { code: 'unavailable', message: 'internal error' } });
});

t.test("organizationOf answers the organization of the request's host, null for a host no organization serves", async (t) => {
  const known = await app.inject({ method: 'GET', url: '/test/organization', headers: { host: 'ACME.test:8080' } });
  t.same(known.json(), { organization: acme._id });
  const unknown = await app.inject({ method: 'GET', url: '/test/organization', headers: { host: 'nobody.test' } });
  t.same(unknown.json(), { organization: null });
});

t.test('without the automation services their routes answer 503 in the one error shape', async (t) => {
  const headers = { host: 'acme.test', authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' };
  const api = await app.inject({ method: 'POST', url: '/api', headers, payload: { method: 'get', api: 'items', endpoint: 'list' } });
  t.equal(api.statusCode, 503);
  t.same(api.json(), { error: { code: 'unavailable', message: 'API providers are not available on this server' } });
  const workflow = await app.inject({ method: 'POST', url: '/workflows/make-item', headers, payload: { 'make-item': [{}] } });
  t.equal(workflow.statusCode, 503);
  t.same(workflow.json(), { error: { code: 'unavailable', message: 'workflows are not available on this server' } });
  const webhook = await app.inject({ method: 'POST', url: '/webhooks/github', headers, payload: {} });
  t.equal(webhook.statusCode, 503);
  t.same(webhook.json(), { error: { code: 'webhook_unavailable', message: 'webhooks are not available on this server' } });
});

t.test('without an authorization service no host has an organization', async (t) => {
  const bare = await buildApp({ server: standInServer(config, { db: store }), logger: false, extend: throwing });
  t.teardown(() => bare.app.close());
  const reply = await bare.app.inject({ method: 'GET', url: '/test/organization', headers: { host: 'acme.test' } });
  t.same(reply.json(), { organization: null });
});
