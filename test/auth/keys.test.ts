import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { createKey, generateKey, hashSecret, listKeys, parseKey, revokeKey, sameSecret, secretMatches } from '../../src/auth/keys.js';
import { TenancyError } from '../../src/auth/errors.js';
import { organization, tempDir, testStore } from './fixtures/tenants.js';

t.test('a key is "<key id>.<secret>" with a 32-byte base64url secret, and parses back', async (t) => {
  const { key, keyId, secret } = generateKey();
  t.match(key, /^fpk_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}$/);
  t.equal(Buffer.from(secret, 'base64url').length, 32);
  t.same(parseKey(key), { keyId, secret });
  t.not(generateKey().key, key, 'keys are random');
  for (const bad of ['', key.replace('.', ''), `${key}x`, `Bearer ${key}`, key.replace('fpk_', 'xyz_'), `${keyId}.${secret.slice(1)}`]) t.equal(parseKey(bad), undefined, bad);
});

t.test('secrets are compared with their stored hash', async (t) => {
  const { secret } = generateKey();
  const stored = Buffer.from(hashSecret(secret), 'hex');
  t.equal(secretMatches(secret, stored), true);
  t.equal(secretMatches(generateKey().secret, stored), false);
  t.equal(secretMatches(secret, Buffer.alloc(16)), false, 'a hash of the wrong length never matches');
});

t.test('sameSecret compares whole secrets', async (t) => {
  const { secret } = generateKey();
  t.equal(sameSecret(secret, `${secret}`), true);
  t.equal(sameSecret(secret, `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`), false, 'the last character differs');
  t.equal(sameSecret(secret, `${secret[0] === 'A' ? 'B' : 'A'}${secret.slice(1)}`), false, 'the first character differs');
  t.equal(sameSecret(secret, secret.slice(0, -1)), false, 'a prefix');
  t.equal(sameSecret('', ''), true);
});

t.test('the stored key row and the database files hold the hash, never the secret', async (t) => {
  const dir = tempDir();
  const file = path.join(dir, 'fleetplane.db');
  const store = await testStore(file);
  const org = await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const created = await createKey(store, { organizationId: org._id, name: 'ci', permissions: { 'metrics.read': true } });
  const { secret } = parseKey(created.key)!;
  const raw = new Database(file, { readonly: true });
  const row = raw.prepare("SELECT doc FROM documents WHERE collection = 'keys' AND id = ?").pluck().get(created.key_id) as string;
  raw.close();
  t.ok(row, 'the row exists');
  t.notMatch(row, secret);
  t.match(JSON.parse(row), { _id: created.key_id, organization_id: org._id, secretHash: hashSecret(secret), admin: false, disabled: false });
  await store.close();
  for (const name of readdirSync(dir)) t.notOk(readFileSync(path.join(dir, name)).includes(secret), `${name} does not contain the secret`);
});

t.test('createKey validates its input and writes nothing when it is invalid', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const org = await organization(store, { name: 'acme', hosts: ['acme.example'] });
  const invalid: Array<[string, Record<string, unknown>, RegExp]> = [
    ['permission value', { permissions: { status: 'yes' } }, /permissions/],
    ['method name', { permissions: { 'bad method': true } }, /permissions/],
    ['host', { hosts: ['not a host'] }, /hosts/],
    ['expiry', { expiresAt: 'next tuesday' }, /expiresAt/],
    ['unknown field', { owner: 'me' }, /owner|additional/i],
  ];
  for (const [name, extra, message] of invalid) {
    await t.rejects(createKey(store, { organizationId: org._id, name: 'k', ...extra } as never), TenancyError, name);
    await t.rejects(createKey(store, { organizationId: org._id, name: 'k', ...extra } as never), { message }, name);
  }
  await t.rejects(createKey(store, { organizationId: 'missing', name: 'k' }), { message: /no organization missing/ });
  t.equal(await store.collection('keys').countDocuments(), 0);
});

t.test('listKeys never returns hashes; revokeKey disables only its own organization\'s key', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const a = await organization(store, { name: 'a', hosts: ['a.example'] });
  const b = await organization(store, { name: 'b', hosts: ['b.example'] });
  const first = await createKey(store, { organizationId: a._id, name: 'first', hosts: ['A.example:443'], expiresAt: '2099-01-01T00:00:00+02:00' });
  const other = await createKey(store, { organizationId: b._id, name: 'other' });
  const listed = await listKeys(store, a._id);
  t.same(listed.map((key) => key.name), ['first']);
  t.notOk('secretHash' in listed[0]!);
  t.same(listed[0]!.hosts, ['a.example'], 'hosts are stored normalized');
  t.equal(listed[0]!.expiresAt, '2098-12-31T22:00:00.000Z', 'expiry is stored in UTC');
  t.equal(await revokeKey(store, a._id, other.key_id), false, "another organization's key is not found");
  t.equal((await store.collection('keys').findOne({ _id: other.key_id }))?.disabled, false);
  t.equal(await revokeKey(store, a._id, first.key_id), true);
  t.equal((await listKeys(store, a._id))[0]!.disabled, true);
});
