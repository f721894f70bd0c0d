import t from 'tap';
import { CrudError } from '../../src/crud/errors.js';
import { runCrud } from '../../src/crud/run.js';
import { StoreUnavailableError } from '../../src/db/errors.js';
import type { Store } from '../../src/db/types.js';
import { testStore } from '../auth/fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
const caller = (organization_id: string) => ({ organization_id, user: { key_id: 'fpk_0000000000000000', name: 'admin', admin: true, platform: false } });
const create = (organization: string, collection: string, options = {}, on: Store = store) =>
  runCrud(on, { ...caller(organization), method: 'object.create', collection, documents: [{ name: 'x' }] }, options);

async function refusal(promise: Promise<unknown>): Promise<CrudError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof CrudError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

t.test('internal and system collection names are refused with 400 naming them, for every method', async (t) => {
  for (const collection of ['fleetplane_collection_versions', 'fleetplane_tenant_collections', 'Fleetplane_x', 'system', 'systemJs']) {
    for (const envelope of [
      { method: 'object.read', filter: {} },
      { method: 'object.create', documents: [{ _id: 'counter', version: 1 }] },
      { method: 'object.update', filter: {}, update: { $set: { version: 0 } } },
      { method: 'object.delete', filter: {} },
    ]) {
      const error = await refusal(runCrud(store, { ...caller('org-a'), collection, ...envelope }));
      t.match(error, { statusCode: 400, code: 'invalid_collection', message: new RegExp(`"${collection}"`) }, `${envelope.method} ${collection}`);
    }
  }
  t.equal(await store.collection('fleetplane_collection_versions').countDocuments({ version: 1, _id: 'counter' }), 0, 'nothing planted among the counters');
});

t.test('an organization creates collections up to its limit; the next one is 400 naming it; others are unaffected', async (t) => {
  for (const name of ['c1', 'c2', 'c3']) await create('org-limit', name, { maxCollections: 3 });
  await create('org-limit', 'c2', { maxCollections: 3 });
  await runCrud(store, { ...caller('org-limit'), method: 'object.create', collection: 'workflows', documents: [{ name: 'w', steps: [] }] }, { maxCollections: 3 });
  const error = await refusal(create('org-limit', 'c4', { maxCollections: 3 }));
  t.match(error, { statusCode: 400, code: 'collection_limit', message: /"c4".*limit of 3 collections/ }, 'the standard collections do not count');
  t.equal(await store.collection('c4').countDocuments(), 0, 'nothing written');
  await create('org-limit', 'c1', { maxCollections: 3 });
  t.equal(await store.forOrganization('org-limit').collection('c1').countDocuments(), 2, 'a known collection still takes documents');
  await create('org-other', 'c4', { maxCollections: 3 });
  t.equal(await store.forOrganization('org-other').collection('c4').countDocuments(), 1, 'the limit is per organization');
});

t.test('concurrent creations of new collections do not overshoot the limit', async (t) => {
  const names = Array.from({ length: 8 }, (_, i) => `race${i}`);
  const outcomes = await Promise.allSettled(names.map((name) => create('org-race', name, { maxCollections: 5 })));
  t.equal(outcomes.filter((outcome) => outcome.status === 'fulfilled').length, 5);
  t.ok(outcomes.every((outcome) => outcome.status === 'fulfilled' || (outcome.reason as CrudError).code === 'collection_limit'));
});

t.test('a create whose documents are invalid claims no collection slot', async (t) => {
  await refusal(runCrud(store, { ...caller('org-invalid'), method: 'object.create', collection: 'bad', documents: [{ $x: 1 }] }, { maxCollections: 1 }));
  await create('org-invalid', 'good', { maxCollections: 1 });
  t.pass('the one slot was still free');
});

t.test('a store outage is 503 store_unavailable, not a 400 or a 500', async (t) => {
  const unavailable = () => Promise.reject(new StoreUnavailableError('MongoDB things is unavailable: Server selection timed out'));
  const down = { ...store, forOrganization: () => ({ collection: () => ({ find: unavailable }) }) } as unknown as Store;
  const error = await refusal(runCrud(down, { ...caller('org-a'), method: 'object.read', collection: 'things', filter: {} }));
  t.match(error, { statusCode: 503, code: 'store_unavailable', message: 'the data store is unavailable; try again later' });
});
