import t from 'tap';
import { StoreError, StoreUnavailableError } from '../../src/db/errors.js';
import type { EmbeddedStore } from '../../src/db/embedded/store.js';
import { createLogger } from '../../src/logging/logger.js';
import { key, organization, testApp, testStore } from '../auth/fixtures/tenants.js';

/**
 * The real app over a store the test switches: `up`, `away` (every call rejects with 503 store_unavailable, as
 * PostgreSQL stopped or past the operation deadline) or `refusing` (500 store_misconfigured, as PostgreSQL
 * refusing the role's password). What each route answers then: docs/postgres.md, "When the store is away".
 */
const real = await testStore();
t.teardown(() => real.close());
let mode: 'up' | 'away' | 'refusing' = 'up';
const failure = () =>
  Promise.reject(
    mode === 'away'
      ? new StoreUnavailableError('PostgreSQL keys is unavailable: connect ECONNREFUSED 127.0.0.1:5432')
      : new StoreError('PostgreSQL keys: password authentication failed for user "fleet" (28P01)', 'store_misconfigured'),
  );
const wrapCollection = (collection: object) =>
  new Proxy(collection, {
    get(target, method) {
      const value = Reflect.get(target, method, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => (mode !== 'up' ? failure() : value.apply(target, args));
    },
  });
const switchable = new Proxy(real, {
  get(target, property) {
    if (property === 'collection') return (name: string) => wrapCollection(target.collection(name));
    if (property === 'forOrganization') return (id: string) => ({ organizationId: id, collection: (name: string) => wrapCollection(target.forOrganization(id).collection(name)) });
    if (property === 'changeToken') return (names: string[]) => (mode !== 'up' ? failure() : target.changeToken(names));
    const value = Reflect.get(target, property, target);
    return typeof value === 'function' ? value.bind(target) : value;
  },
}) as EmbeddedStore;

const lines: Array<Record<string, any>> = [];
const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void lines.push(JSON.parse(line)) } });
const acme = await organization(real, { name: 'Acme', hosts: ['acme.example'] });
const admin = await key(real, { organizationId: acme._id, name: 'admin', admin: true });
const other = await key(real, { organizationId: acme._id, name: 'other', admin: true });
const { app, authorizer } = await testApp(switchable, { logger, authorizer: { revalidateMs: 0 } });
t.teardown(async () => {
  authorizer.close();
  await app.close();
});
const post = (url: string, body: Record<string, unknown>, bearer = admin) =>
  app.inject({ method: 'POST', url, headers: { host: 'acme.example', authorization: `Bearer ${bearer}`, 'content-type': 'application/json' }, payload: body });
const get = (url: string, bearer?: string) => app.inject({ method: 'GET', url, headers: { host: 'acme.example', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) } });
const write = { method: 'object.create', collection: 'things', documents: [{ v: 1 }] };

t.test('with the store away: writes and reads 503 store_unavailable with Retry-After, a key read before keeps working where no store is needed, probes 200', async (t) => {
  t.equal((await post('/crud', write)).statusCode, 200, 'before: the admin key is read and cached');
  mode = 'away';
  t.teardown(() => void (mode = 'up'));
  for (const body of [write, { method: 'object.read', collection: 'things' }]) {
    const reply = await post('/crud', body);
    t.equal(reply.statusCode, 503, body.method);
    t.equal(reply.headers['retry-after'], '5');
    t.same(reply.json(), { error: { code: 'store_unavailable', message: 'the data store is unavailable; try again later' } }, 'no internals');
  }
  const metrics = await get('/metrics', admin);
  t.equal(metrics.statusCode, 200, '/metrics with the cached key: served');
  const unseen = await get('/metrics', other);
  t.equal(unseen.statusCode, 503, 'a key never read: no verdict, 503');
  t.equal(unseen.json().error.code, 'store_unavailable');
  t.equal(unseen.headers['retry-after'], '5');
  t.equal((await get('/healthz')).statusCode, 200, '/healthz');
  t.equal((await get('/readyz')).statusCode, 200, '/readyz: other servers share the store, taking this one out would help no one');
  mode = 'up';
  t.equal((await post('/crud', write)).statusCode, 200, 'writes succeed again once it is back');
});

t.test('with the store refusing the server (password, rights): 500 store_misconfigured without internals, and one log line a minute naming why', async (t) => {
  mode = 'refusing';
  t.teardown(() => void (mode = 'up'));
  const from = lines.length;
  for (let attempt = 0; attempt < 15; attempt++) {
    const reply = await post('/crud', write, attempt % 2 === 0 ? admin : other);
    t.equal(reply.statusCode, 500);
    t.same(reply.json(), { error: { code: 'store_misconfigured', message: "the data store refused this server (credentials, database or rights); the server log says why" } });
  }
  const logged = lines.slice(from);
  t.same([...new Set(logged.map((line) => line.msg))], ['the data store refused this server'], 'one kind of line, no stack of "request failed" or "authorization failed"');
  t.equal(logged.length, 1, 'one line a minute: the refusal stays the same until an operator acts');
  t.match(logged[0], { level: 40, err: { message: /password authentication failed for user "fleet"/ } }, 'the line names the reason');
  t.notMatch(JSON.stringify(logged), admin, 'never the key');
});
