import t from 'tap';
import { key, organization, testApp, testStore } from './fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
const org = await organization(store, { name: 'acme', hosts: ['acme.example'] });
const reader = await key(store, { organizationId: org._id, name: 'prometheus', permissions: { 'metrics.read': true } });
const other = await key(store, { organizationId: org._id, name: 'deployer', permissions: { workflow: true } });
const tenant = await organization(store, { name: 'tenant', hosts: ['tenant.example'] });
const tenantAdmin = await key(store, { organizationId: tenant._id, name: 'admin', admin: true });

const scrape = async (app: Awaited<ReturnType<typeof testApp>>['app'], bearer?: string) =>
  app.inject({ method: 'GET', url: '/metrics', headers: { host: 'acme.example', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) } });

t.test('/metrics needs a key with metrics.read', async (t) => {
  const { app } = await testApp(store);
  t.teardown(() => app.close());
  const anonymous = await scrape(app);
  t.equal(anonymous.statusCode, 403);
  t.equal(anonymous.json().error.code, 'forbidden');
  t.equal((await scrape(app, other)).statusCode, 403, 'a key without metrics.read');
  const allowed = await scrape(app, reader);
  t.equal(allowed.statusCode, 200);
  t.match(allowed.body, /fleetplane_test/);
  t.equal((await scrape(app, 'garbage')).statusCode, 403, 'a malformed key');
  const fromTenant = await app.inject({ method: 'GET', url: '/metrics', headers: { host: 'tenant.example', authorization: `Bearer ${tenantAdmin}` } });
  t.equal(fromTenant.statusCode, 403, "a tenant's admin: the whole server's figures are the platform's");
  t.equal(fromTenant.json().error.code, 'platform_only');
});

t.test('/metrics is open to everyone with metrics.public: true', async (t) => {
  const { app } = await testApp(store, { config: { metrics: { public: true } } });
  t.teardown(() => app.close());
  t.equal((await scrape(app)).statusCode, 200);
});

t.test('without an authorization service /metrics answers 403', async (t) => {
  const { buildApp } = await import('../../app.js');
  const { loadConfig } = await import('../../src/config/load.js');
  const config = loadConfig({ env: {}, object: {} }).config;
  const { standInServer } = await import('../helpers/route-context.js');
  const { app } = await buildApp({ server: standInServer(config, { metricsText: async () => 'x' }), logger: false });
  t.teardown(() => app.close());
  const reply = await scrape(app, reader);
  t.equal(reply.statusCode, 403);
  t.equal(reply.json().error.code, 'authorization_unavailable');
});
