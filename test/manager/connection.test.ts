import { randomBytes } from 'node:crypto';
import path from 'node:path';
import t, { type Test } from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { assertNoSecretPaths, redactSecrets } from '../../src/crud/secrets.js';
import { persistConnection, resolveConnection } from '../../src/manager/connection.js';
import { Manager } from '../../src/manager/manager.js';
import { SecretKeyring } from '../../src/secrets/keyring.js';
import { rotateSecrets } from '../../src/secrets/rotate.js';
import { SealedStore } from '../../src/secrets/sealed-store.js';
import { tempDir, testStore } from '../auth/fixtures/tenants.js';
import { logger } from './fixtures.js';

const KEY = 'fpk_parentkey0000001.the-secret-half-of-the-parent-key';
const SECRET_HALF = 'the-secret-half-of-the-parent-key';
const OWNER = 'org-tenant';
const PARENT = { organizationId: 'org-platform', host: 'http://parent.example:8080' };
const managerConfig = (manager: Record<string, unknown>) => loadConfig({ env: {}, object: { manager } }).config.manager;

async function world(t: Test, keyring = SecretKeyring.fromKeys([randomBytes(32)])) {
  const raw = await testStore();
  t.teardown(() => raw.close());
  return { raw, store: new SealedStore(raw, keyring), keyring };
}

t.test('the key config gave is kept in the record sealed; a start without it hydrates the key from the record', async (t) => {
  const { raw, store, keyring } = await world(t);
  const first = await resolveConnection(managerConfig({ ...PARENT, apiKey: KEY }), store, 's1', { secrets: keyring });
  t.same(first, { organization_id: PARENT.organizationId, host: PARENT.host, apiKey: KEY });
  t.equal(await persistConnection(store, 's1', OWNER, first, keyring), true, 'written');
  t.equal(await persistConnection(store, 's1', OWNER, first, keyring), false, 'an unchanged key is not written again');

  const record = (await raw.collection('servers').findOne({ _id: 's1' }))!;
  const stored = (record.manager as { apiKey: string }).apiKey;
  t.match(record, { organization_id: OWNER, manager: { organization_id: PARENT.organizationId, host: PARENT.host } });
  t.match(stored, /^fpsec:/, 'sealed with the keyring');
  t.notOk(JSON.stringify(record).includes(SECRET_HALF), 'the stored record holds no plain key');

  const { lines, log } = logger();
  const later = await resolveConnection(managerConfig({}), store, 's1', { secrets: keyring, log });
  t.same(later, first, 'organization_id, host and apiKey hydrated from the record');
  t.same(lines, [], 'no warning');
  const manager = new Manager({ config: managerConfig({}), connection: later, log });
  t.teardown(() => manager.close());
  t.equal(manager.managed, true, 'a managed server again');
  t.equal(manager.apiKey, KEY);
  t.notOk(JSON.stringify(manager).includes(SECRET_HALF), 'never in JSON.stringify');
  t.same(Object.keys(manager), ['organization_id', 'host']);

  // Through /crud the field is redacted and cannot be filtered on.
  t.same((redactSecrets('servers', record).manager as { apiKey: string }).apiKey, '[redacted]');
  t.throws(() => assertNoSecretPaths('servers', { 'manager.apiKey': { $exists: true } }), /holds secrets/);
});

t.test('a record naming a manager without a usable key is one warning at start, never the key', async (t) => {
  const { raw, store, keyring } = await world(t);
  await raw.collection('servers').insertOne({ _id: 'bare', organization_id: OWNER, manager: { organization_id: PARENT.organizationId, host: PARENT.host } });
  const other = SecretKeyring.fromKeys([randomBytes(32)]);
  const elsewhere = new SealedStore(raw, other);
  await persistConnection(elsewhere, 'foreign', OWNER, { organization_id: PARENT.organizationId, host: PARENT.host, apiKey: KEY }, other);

  for (const [id, stored] of [['bare', false], ['foreign', true]] as const) {
    const { lines, log } = logger();
    const connection = await resolveConnection(managerConfig({}), store, id, { secrets: keyring, log });
    t.same(connection, { organization_id: PARENT.organizationId, host: PARENT.host }, `${id}: no key`);
    t.equal(lines.length, 1, `${id}: one warning`);
    t.match(lines[0], { level: 'warn', details: { server: id, stored }, message: /names a manager but holds no usable key/ });
    t.notOk(JSON.stringify(lines).includes(SECRET_HALF));
    const manager = new Manager({ config: managerConfig({}), connection, log });
    t.teardown(() => manager.close());
    t.equal(manager.managed, false, `${id}: nothing is mirrored`);
  }
  const { lines, log } = logger();
  t.same(await resolveConnection(managerConfig({}), store, 'unmanaged', { secrets: keyring, log }), { organization_id: null, host: null });
  t.same(lines, [], 'an unmanaged server warns of nothing');
});

t.test('a stored key is used only for the parent it was stored with', async (t) => {
  const { store, keyring } = await world(t);
  await persistConnection(store, 's1', OWNER, { organization_id: PARENT.organizationId, host: PARENT.host, apiKey: KEY }, keyring);
  const { lines, log } = logger();
  const moved = await resolveConnection(managerConfig({ organizationId: PARENT.organizationId, host: 'https://another-parent.example' }), store, 's1', { secrets: keyring, log });
  t.same(moved, { organization_id: PARENT.organizationId, host: 'https://another-parent.example' }, "the other parent does not get this parent's key");
  t.equal(lines.length, 1, 'and that is the one warning');
});

t.test('rotating the secrets key seals the stored manager key again; it still opens', async (t) => {
  const dir = tempDir();
  const keyFile = path.join(dir, 'secrets.key');
  const raw = await testStore(path.join(dir, 'fleetplane.db'));
  t.teardown(() => raw.close());
  const before = SecretKeyring.fromEnvironment(keyFile, {});
  await persistConnection(new SealedStore(raw, before), 's1', OWNER, { organization_id: PARENT.organizationId, host: PARENT.host, apiKey: KEY }, before);
  const oldKeyId = before.sealingKeyId();
  const rotated = await rotateSecrets(raw, { keyFile, env: {} });
  t.ok(rotated.resealed >= 1, 'the manager key was among the secrets sealed again');
  const after = SecretKeyring.fromEnvironment(keyFile, {});
  t.not(after.sealingKeyId(), oldKeyId);
  t.same(after.keyIds(), [after.sealingKeyId()], 'the old key is gone from the file');
  const connection = await resolveConnection(managerConfig({}), new SealedStore(raw, after), 's1', { secrets: after });
  t.equal(connection.apiKey, KEY, 'hydrated with the new key only');
});

t.test("an unmanaged server's manager methods name what they lack: the manager's settings, the platform organization", async (t) => {
  const manager = new Manager({ config: managerConfig({}), connection: { organization_id: null, host: null }, log: logger().log });
  t.teardown(() => manager.close());
  await t.rejects(manager.send({ method: 'object.update' }), { code: 'unmanaged', message: /manager\.organizationId, manager\.host and manager\.apiKey/ });
  await t.rejects(manager.createServer({ cluster: { _id: 'c1', organization_id: 'p' } }), { code: 'unavailable', message: /no platform organization \(set server\.organization/ });
  await t.rejects(manager.handle({ method: 'manager.createServer' } as never), { code: 'unavailable', message: /server\.organization/ });
});
