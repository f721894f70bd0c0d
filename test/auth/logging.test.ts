import t from 'tap';
import { createKey, generateKey } from '../../src/auth/keys.js';
import { createLogger } from '../../src/logging/logger.js';
import type { FastifyPluginAsync } from 'fastify';
import { organization, testApp, testStore } from './fixtures/tenants.js';

/** A handler that logs what it received, as handlers do when debugging: headers, body and envelope. */
const loggingRoute: FastifyPluginAsync = async (app) => {
  app.post('/test/envelope', { preHandler: app.authorizeEnvelope }, async (request) => {
    request.log.info({ headers: request.headers, body: request.body, envelope: request.envelope }, 'received');
    return { ok: true };
  });
};

t.test('authorizing requests, allowed and refused, logs no key and no secret', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const org = await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const admin = await createKey(store, { organizationId: org._id, name: 'admin', admin: true });
  const limited = await createKey(store, { organizationId: org._id, name: 'limited', permissions: {} });
  const stranger = generateKey();

  const lines: string[] = [];
  const logger = createLogger({ level: 'trace', destination: { write: (line: string) => void lines.push(line) } });
  const { app } = await testApp(store, {
    routes: loggingRoute,
    logger,
    config: { log: { requests: true, level: 'trace' } },
    authorizer: { log: logger.child({ component: 'authorize' }) },
  });
  t.teardown(() => app.close());

  const send = (payload: object, authorization?: string) =>
    app.inject({ method: 'POST', url: '/test/envelope', headers: { host: 'acme.example', ...(authorization ? { authorization } : {}) }, payload });
  const statuses = [
    (await send({ method: 'status' }, `Bearer ${admin.key}`)).statusCode,
    (await send({ method: 'status', apikey: admin.key })).statusCode,
    (await send({ method: 'status', apikey: limited.key }, `Bearer ${admin.key}`)).statusCode,
    (await send({ method: 'status' }, `Bearer ${limited.key}`)).statusCode,
    (await send({ method: 'status' }, `Bearer ${stranger.key}`)).statusCode,
    (await send({ method: 'status' }, `Bearer ${admin.key_id}.${stranger.secret}`)).statusCode,
    (await send({ method: 'status' }, `Basic ${admin.key}`)).statusCode,
  ];
  t.same(statuses, [200, 200, 403, 403, 403, 403, 403]);

  const log = lines.join('');
  t.ok(lines.length >= statuses.length, 'the requests were logged');
  t.match(log, /authorization denied/, 'refusals are logged');
  t.match(log, /permission_denied/, 'with their code');
  t.match(log, /"msg":"received"/, 'handlers logged their requests');
  for (const secret of [admin.key, limited.key, stranger.key, admin.key.split('.')[1]!, limited.key.split('.')[1]!, stranger.secret]) {
    t.notOk(log.includes(secret), 'a key or secret is not in the log');
  }
});
