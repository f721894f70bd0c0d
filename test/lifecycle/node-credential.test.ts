import t, { type Test } from 'tap';
import { NODE_CREDENTIAL_ENV, credentialEnvironment, isAdminFlag, loadNodeCredential } from '../../src/lifecycle/node-credential.js';
import type { Store } from '../../src/db/types.js';
import { memoryLog, openTempStore } from './helpers.js';

const ORG = 'org_platform';
const SECRET = 'fpk_NodeUploadKey000.s3cr3t-value-that-must-not-leak';

async function withRecords(t: Test, records: Array<Record<string, unknown>>) {
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  for (const record of records) await store.collection('servers_config').insertOne({ organization_id: ORG, type: 'key', ...record } as never);
  const log = memoryLog();
  return { credential: await loadNodeCredential({ store, organizationId: ORG, log }), log };
}

for (const admin of [true, 'true', 'TRUE', 1, '1']) {
  t.test(`an upload-capable key with admin ${JSON.stringify(admin)} is the node credential`, async (t) => {
    const { credential, log } = await withRecords(t, [{ _id: 'k1', name: 'node-upload', admin, key: SECRET }]);
    t.equal(credential, SECRET);
    t.same(credentialEnvironment(credential), { [NODE_CREDENTIAL_ENV]: SECRET }, 'workers inherit it through their environment');
    t.notMatch(log.text(), SECRET);
  });
}

t.test('no admin key: nothing is loaded or generated, and the environment gets nothing', async (t) => {
  const { credential, log } = await withRecords(t, [
    { _id: 'k1', name: 'reader', admin: false, key: 'fpk_reader' },
    { _id: 'k2', name: 'reader-2', admin: 'false', key: 'fpk_reader2' },
    { _id: 'k3', name: 'zero', admin: 0, key: 'fpk_zero' },
  ]);
  t.equal(credential, undefined);
  t.same(credentialEnvironment(credential), {});
  t.same(log.lines, []);
});

t.test('several admin keys: the first by id, whatever the insertion order; other organizations never count', async (t) => {
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  const configs = store.collection('servers_config');
  await configs.insertOne({ _id: 'k9', organization_id: ORG, name: 'late', type: 'key', admin: true, key: 'fpk_late' });
  await configs.insertOne({ _id: 'k2', organization_id: ORG, name: 'early', type: 'key', admin: '1', key: 'fpk_early' });
  await configs.insertOne({ _id: 'k1', organization_id: 'org_tenant', name: 'tenant', type: 'key', admin: true, key: 'fpk_tenant' });
  await configs.insertOne({ _id: 'k0', organization_id: ORG, name: 'routing', type: 'routing', admin: true, key: 'fpk_wrong_type' });
  t.equal(await loadNodeCredential({ store, organizationId: ORG, log: memoryLog() }), 'fpk_early');
});

t.test('a store that fails to read gives one generic diagnostic without the store message, and no credential', async (t) => {
  const log = memoryLog();
  const failing = {
    collection: () => ({
      find: async () => {
        throw Object.assign(new Error(`SQLITE_CORRUPT near key=${SECRET}`), { code: 'store_error' });
      },
    }),
  } as unknown as Store;
  t.equal(await loadNodeCredential({ store: failing, organizationId: ORG, log }), undefined);
  t.equal(log.lines.length, 1);
  t.match(log.lines[0], { level: 'warn', details: { code: 'store_error' }, message: 'the node credential could not be loaded; the server starts without it' });
  t.notMatch(log.text(), SECRET);
});

t.test('a sealed key is opened through the secrets opener, at its own place', async (t) => {
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  await store.collection('servers_config').insertOne({ _id: 'k1', organization_id: ORG, name: 'node', type: 'key', admin: true, key: 'fpsec:sealed' });
  const places: unknown[] = [];
  const secrets = { open: (value: string, place: unknown) => (places.push(place), value === 'fpsec:sealed' ? SECRET : 'wrong') };
  t.equal(await loadNodeCredential({ store, organizationId: ORG, log: memoryLog(), secrets }), SECRET);
  t.same(places, [{ organizationId: ORG, collection: 'servers_config', path: ['key'] }]);
});

t.test('admin flag forms', async (t) => {
  t.same([true, 'true', ' True ', 1, '1'].map(isAdminFlag), [true, true, true, true, true]);
  t.same([false, 'false', 0, '0', 2, 'yes', null, undefined, {}].map(isAdminFlag), [false, false, false, false, false, false, false, false, false]);
});

t.test('written through the sealing store the credential is sealed at rest, redacted in reads, and opens for the node', async (t) => {
  const { SealedStore } = await import('../../src/secrets/sealed-store.js');
  const { SecretKeyring } = await import('../../src/secrets/keyring.js');
  const { redactSecrets } = await import('../../src/crud/secrets.js');
  const { randomBytes } = await import('node:crypto');
  const { store: raw } = await openTempStore();
  t.teardown(() => raw.close());
  const keyring = SecretKeyring.fromKeys([randomBytes(32)]);
  const sealed = new SealedStore(raw, keyring);
  await sealed.forOrganization(ORG).collection('servers_config').insertOne({ _id: 'k1', name: 'node-upload', type: 'key', admin: true, key: SECRET });
  const stored = await raw.collection('servers_config').findOne({ _id: 'k1' });
  t.match(stored?.key, /^fpsec:v1:/, 'sealed in the store');
  t.equal(redactSecrets('servers_config', stored!).key, '[redacted]');
  t.equal(await loadNodeCredential({ store: sealed, organizationId: ORG, log: memoryLog(), secrets: keyring }), SECRET);
  const routing = { _id: 'r1', organization_id: ORG, name: 'routing', type: 'routing', config: { enabled: false } };
  await sealed.collection('servers_config').insertOne(routing);
  t.same(await raw.collection('servers_config').findOne({ _id: 'r1' }), routing, 'records without a key are stored as they are');
});
