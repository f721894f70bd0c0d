import t from 'tap';
import { CrudError } from '../../src/crud/errors.js';
import { runCrud } from '../../src/crud/run.js';
import { organization, testStore } from '../auth/fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
// The first organization of a store is the platform organization: clusters are written with its keys.
const platform = await organization(store, { name: 'platform', hosts: ['p.example'] });
const caller = { organization_id: platform._id, user: { key_id: 'fpk_0000000000000000', name: 'admin', admin: true, platform: true } };
const crud = (envelope: Record<string, unknown>) => runCrud(store, { ...caller, ...envelope });
const valid = { minClusterSize: 1, maxClusterSize: 3, cooldownMs: 60_000 };

const created = (await crud({ method: 'object.create', collection: 'clusters', documents: [{ name: 'main', autoscaler: valid }] })) as { insertedIds: string[] };
const clusterId = created.insertedIds[0]!;
const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error);
const stored = async () => (await store.collection('clusters').findOne({ _id: clusterId }))?.autoscaler;

const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
  ['min above max', { minClusterSize: 4, maxClusterSize: 3 }, /autoscaler\.minClusterSize: must not exceed maxClusterSize/],
  ['a negative threshold', { ...valid, cpu: { scaleOutAbove: 80, scaleInBelow: -1 } }, /autoscaler\.cpu\.scaleInBelow:/],
  ['a cooldown of 0', { ...valid, cooldownMs: 0 }, /autoscaler\.cooldownMs:/],
  ['an unknown field', { ...valid, maxNodes: 5 }, /autoscaler\.maxNodes: unknown field/],
];

for (const [what, policy, message] of refusals) {
  t.test(`a policy with ${what} is refused with 400 naming the field, and the old policy stays`, async (t) => {
    const update = crud({ method: 'object.update', collection: 'clusters', filter: { _id: clusterId }, update: { $set: { autoscaler: policy } } });
    const error = await refusal(update);
    t.ok(error instanceof CrudError, 'refused by CRUD');
    t.match(error, { statusCode: 400, code: 'invalid_policy', message });
    t.same(await stored(), valid, 'the stored policy is unchanged');
    const create = crud({ method: 'object.create', collection: 'clusters', documents: [{ name: `bad-${what}`, autoscaler: policy }] });
    t.match(await refusal(create), { statusCode: 400, code: 'invalid_policy', message: /^documents\.0: autoscaler\./ });
    t.equal(await store.collection('clusters').findOne({ name: `bad-${what}` }), null, 'no cluster is created');
  });
}

t.test('a dotted update is checked against the whole resulting policy', async (t) => {
  await t.rejects(crud({ method: 'object.update', collection: 'clusters', filter: { _id: clusterId }, update: { $set: { 'autoscaler.minClusterSize': 9 } } }), /autoscaler\.minClusterSize/);
  t.same(await stored(), valid);
  t.same(await crud({ method: 'object.update', collection: 'clusters', filter: { _id: clusterId }, update: { $set: { 'autoscaler.maxClusterSize': 5 } } }), { matchedCount: 1, modifiedCount: 1 });
  t.same(await stored(), { ...valid, maxClusterSize: 5 }, 'a valid change is written');
});

t.test('other fields of a cluster are written as before', async (t) => {
  t.same(await crud({ method: 'object.update', collection: 'clusters', filter: { _id: clusterId }, update: { $set: { label: 'x' } } }), { matchedCount: 1, modifiedCount: 1 });
  t.same(await crud({ method: 'object.update', collection: 'clusters', filter: { _id: clusterId }, update: { $unset: { autoscaler: '' } } }), { matchedCount: 1, modifiedCount: 1 });
  t.equal(await stored(), undefined, 'removing the policy is allowed');
});
