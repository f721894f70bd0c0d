import t from 'tap';
import path from 'node:path';
import { Authorizer } from '../../src/auth/authorize.js';
import { AUTH_ERRORS } from '../../src/auth/errors.js';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { organization, tempDir, testStore } from './fixtures/tenants.js';

/** Two store instances on one file: each is what a separate worker process has. */
async function twoProcesses() {
  const file = path.join(tempDir(), 'fleetplane.db');
  const writer = await testStore(file);
  const worker = await EmbeddedStore.open(file);
  return { writer, worker };
}

const request = (host: string, key?: string) => ({ host, headers: key ? { authorization: `Bearer ${key}` } : {} });

t.test('a key revoked by another process stops working once the revalidation interval passes', async (t) => {
  const { writer, worker } = await twoProcesses();
  t.teardown(async () => {
    await writer.close();
    await worker.close();
  });
  const org = await organization(writer, { name: 'acme', hosts: ['acme.example'] });
  const { key, key_id } = await createKey(writer, { organizationId: org._id, name: 'ops', admin: true });
  let now = 1_000_000;
  const authorizer = new Authorizer(worker, { revalidateMs: 250, now: () => now });
  await authorizer.request(request('acme.example', key), { method: 'status' });
  await revokeKey(writer, org._id, key_id);
  now += 100;
  t.ok(await authorizer.request(request('acme.example', key), { method: 'status' }), 'inside the interval the cached key still answers');
  now += 200;
  await t.rejects(authorizer.request(request('acme.example', key), { method: 'status' }), AUTH_ERRORS.keyRevoked());
});

t.test('a host added to an organization by another process is served after the interval', async (t) => {
  const { writer, worker } = await twoProcesses();
  t.teardown(async () => {
    await writer.close();
    await worker.close();
  });
  const org = await organization(writer, { name: 'acme', hosts: ['acme.example'], defaultPermissions: { status: true } });
  let now = 0;
  const authorizer = new Authorizer(worker, { revalidateMs: 250, now: () => now });
  await t.rejects(authorizer.request(request('new.example'), { method: 'status' }), { code: 'forbidden' });
  await writer.collection('organizations').updateOne({ _id: org._id }, { $addToSet: { hosts: 'new.example' } });
  now += 250;
  t.match(await authorizer.request(request('new.example'), { method: 'status' }), { organization_id: org._id, host: 'new.example' });
});

t.test('writes through the same store clear the cache at once', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const org = await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const { key, key_id } = await createKey(store, { organizationId: org._id, name: 'ops', admin: true });
  const authorizer = new Authorizer(store, { revalidateMs: 3_600_000 });
  await authorizer.request(request('acme.example', key), { method: 'status' });
  await revokeKey(store, org._id, key_id);
  await t.rejects(authorizer.request(request('acme.example', key), { method: 'status' }), { code: 'key_revoked' });
});

t.test('the warm path reads nothing from the store', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const org = await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const { key } = await createKey(store, { organizationId: org._id, name: 'ops', admin: true });
  const now = 5_000;
  const authorizer = new Authorizer(store, { revalidateMs: 250, now: () => now });
  await authorizer.request(request('acme.example', key), { method: 'status' });
  let reads = 0;
  const original = store.read.bind(store);
  store.read = (operation) => {
    reads += 1;
    return original(operation);
  };
  for (let i = 0; i < 100; i += 1) await authorizer.request(request('acme.example', key), { method: 'status' });
  t.equal(reads, 0);
});

t.test('host and key caches stay bounded under requests for names that do not exist', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const authorizer = new Authorizer(store, { maxEntries: 10, revalidateMs: 3_600_000 });
  for (let i = 0; i < 50; i += 1) await t.rejects(authorizer.request(request(`h${i}.example`), { method: 'status' }));
  const hosts = (authorizer.directory as unknown as { organizations: Map<string, unknown> }).organizations;
  t.equal(hosts.size, 10);
  t.ok(hosts.has('h49.example'), 'the newest names are kept');
});

t.test('a key already used is still checked: another secret under its id is refused, a revocation applies', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const org = await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const { key, key_id } = await createKey(store, { organizationId: org._id, name: 'ops', admin: true });
  const authorizer = new Authorizer(store, { revalidateMs: 3_600_000 });
  t.ok(await authorizer.request(request('acme.example', key), { method: 'status' }), 'first use');
  t.ok(await authorizer.request(request('acme.example', key), { method: 'status' }), 'second use, from the cache');
  const secret = key.split('.')[1]!;
  const forged = `${key_id}.${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
  await t.rejects(authorizer.request(request('acme.example', forged), { method: 'status' }), { code: 'forbidden' }, 'one character off');
  t.ok(await authorizer.request(request('acme.example', key), { method: 'status' }), 'the real key still works after the forgery');
  await revokeKey(store, org._id, key_id);
  await t.rejects(authorizer.request(request('acme.example', key), { method: 'status' }), { code: 'key_revoked' });
});

t.test("forgetOrganization releases that organization's hosts and keys from the cache, and no other's", async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const acme = await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const beta = await organization(store, { name: 'beta', hosts: ['beta.example'] });
  const acmeKey = await createKey(store, { organizationId: acme._id, name: 'ops', admin: true });
  const betaKey = await createKey(store, { organizationId: beta._id, name: 'ops', admin: true });
  const authorizer = new Authorizer(store, { revalidateMs: 3_600_000 });
  t.teardown(() => authorizer.close());
  await authorizer.request(request('acme.example', acmeKey.key), { method: 'status' });
  await authorizer.request(request('beta.example', betaKey.key), { method: 'status' });
  authorizer.directory.forgetOrganization(acme._id);
  t.equal(authorizer.directory.cachedOrganization('acme.example'), undefined, "acme's host is no longer cached");
  t.equal(authorizer.directory.cachedKey(acmeKey.key_id), undefined, "nor its key");
  t.equal(authorizer.directory.cachedOrganization('beta.example')?._id, beta._id, "beta's host still is");
  t.equal(authorizer.directory.cachedKey(betaKey.key_id)?.record._id, betaKey.key_id, 'and its key');
  t.match(await authorizer.request(request('acme.example', acmeKey.key), { method: 'status' }), { organization_id: acme._id }, 'acme is served again, read anew');
});
