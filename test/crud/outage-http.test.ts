import t from 'tap';
import { StoreUnavailableError } from '../../src/db/errors.js';
import type { EmbeddedStore } from '../../src/db/embedded/store.js';
import { key, organization, testApp, testStore } from '../auth/fixtures/tenants.js';

/**
 * The real app over a store that can be switched off: while it is, every read, write and change-token check
 * rejects at once with `StoreUnavailableError`, as the MongoDB backend does when no primary is reachable.
 */
const real = await testStore();
t.teardown(() => real.close());
let down = false;
const unavailable = () => Promise.reject(new StoreUnavailableError('MongoDB is unavailable: Server selection timed out after 5000 ms'));
const wrapCollection = (collection: object) =>
  new Proxy(collection, {
    get(target, method) {
      const value = Reflect.get(target, method, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => (down ? unavailable() : value.apply(target, args));
    },
  });
const switchable = new Proxy(real, {
  get(target, property) {
    if (property === 'collection') return (name: string) => wrapCollection(target.collection(name));
    if (property === 'forOrganization') return (id: string) => ({ organizationId: id, collection: (name: string) => wrapCollection(target.forOrganization(id).collection(name)) });
    if (property === 'changeToken') return (names: string[]) => (down ? unavailable() : target.changeToken(names));
    const value = Reflect.get(target, property, target);
    return typeof value === 'function' ? value.bind(target) : value;
  },
}) as EmbeddedStore;

const acme = await organization(real, { name: 'Acme', hosts: ['acme.example'] });
const admin = await key(real, { organizationId: acme._id, name: 'admin', admin: true });
const { app, authorizer } = await testApp(switchable, { authorizer: { revalidateMs: 0 } });
t.teardown(async () => {
  authorizer.close();
  await app.close();
});
const crud = (body: Record<string, unknown>) =>
  app.inject({ method: 'POST', url: '/crud', headers: { host: 'acme.example', authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, payload: body });

t.test('a store outage mid-run answers 503 store_unavailable at once, writes nothing, and the server serves again after it', async (t) => {
  t.equal((await crud({ method: 'object.create', collection: 'things', documents: [{ v: 1 }] })).statusCode, 200, 'before the outage');
  down = true;
  for (const body of [
    { method: 'object.read', collection: 'things' },
    { method: 'object.create', collection: 'things', documents: [{ v: 2 }] },
    { method: 'object.update', collection: 'things', filter: {}, update: { $set: { v: 3 } } },
  ]) {
    const reply = await crud(body);
    t.equal(reply.statusCode, 503, body.method);
    t.same(reply.json(), { error: { code: 'store_unavailable', message: 'the data store is unavailable; try again later' } }, `${body.method}: no internals`);
  }
  down = false;
  const read = await crud({ method: 'object.read', collection: 'things' });
  t.equal(read.statusCode, 200, 'after the outage');
  t.same(read.json().documents.map((document: { v: number }) => document.v), [1], 'nothing half-written');
});
