import t from 'tap';
import type { FastifyPluginAsync } from 'fastify';
import { testApp, testStore } from '../auth/fixtures/tenants.js';

/** An embedding application's own /healthz and POST /control, with the same methods and paths as built-ins. */
const custom: FastifyPluginAsync = async (app) => {
  app.get('/healthz', async () => ({ status: 'custom' }));
  app.post('/control', async () => ({ custom: true }));
};

t.test('a trusted custom route with the method and path of a built-in one takes precedence instead of failing the boot', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const { app } = await testApp(store, { routes: custom });
  t.teardown(() => app.close());
  const health = await app.inject({ method: 'GET', url: '/healthz' });
  t.same(health.json(), { status: 'custom' }, 'the custom GET /healthz answers');
  t.equal((await app.inject({ method: 'HEAD', url: '/healthz' })).statusCode, 200, 'and its HEAD');
  const control = await app.inject({ method: 'POST', url: '/control', payload: { method: 'status' } });
  t.same(control.json(), { custom: true }, 'the custom POST /control answers');
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'built-ins it did not replace still answer');
  t.equal((await app.inject({ method: 'POST', url: '/crud', headers: { host: 'nobody.example' }, payload: { method: 'object.read', collection: 'apis' } })).statusCode, 403);
});
