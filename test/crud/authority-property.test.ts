import t from 'tap';
import fc from 'fast-check';
import { Authorizer } from '../../src/auth/authorize.js';
import { AuthorizationError } from '../../src/auth/errors.js';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import type { KeyDocument } from '../../src/db/documents.js';
import type { Permissions } from '../../src/schema/permissions.js';
import { CrudError } from '../../src/crud/errors.js';
import { runCrud } from '../../src/crud/run.js';
import { organization, testStore } from '../auth/fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
// The first organization of a store is the platform organization.
const platform = await organization(store, { name: 'platform', hosts: ['p.example'] });
const tenantA = await organization(store, { name: 'a', hosts: ['a.example', 'a2.example'] });
const tenantB = await organization(store, { name: 'b', hosts: ['b.example'] });
const organizations = [platform, tenantA, tenantB];
const hostOf = new Map(organizations.map((org) => [org._id, org.hosts[0]!]));

// Every organization starts with keys of every kind, and some documents in the system collections.
const existingKeyIds: string[] = [];
for (const org of organizations) {
  for (const input of [
    { name: 'admin', admin: true },
    { name: 'objects', permissions: { object: true } },
    { name: 'bound', admin: true, hosts: [org.hosts[0]!] },
    { name: 'expiring', admin: true, expiresAt: '2999-01-01T00:00:00Z' },
  ]) {
    existingKeyIds.push((await createKey(store, { organizationId: org._id, ...input })).key_id);
  }
  const revoked = await createKey(store, { organizationId: org._id, name: 'revoked', permissions: { status: true } });
  await revokeKey(store, org._id, revoked.key_id);
  existingKeyIds.push(revoked.key_id);
  const scoped = store.forOrganization(org._id);
  await scoped.collection('clusters').insertOne({ name: `${org.name}-cluster` });
  await scoped.collection('servers_config').insertOne({ name: 'routing', type: 'routing' });
}
await store.collection('servers').insertOne({ _id: 'server-1', cluster_id: 'default', master: { status: 'running', meshUrl: 'ws://127.0.0.1:8090' } });

const COLLECTIONS = ['keys', 'organizations', 'servers', 'clusters', 'servers_config', 'repository_upload_reservations', 'apis'] as const;
const PLATFORM_COLLECTIONS = new Set(['organizations', 'servers', 'clusters', 'servers_config', 'repository_upload_reservations']);

async function snapshot(): Promise<Map<string, Record<string, unknown>>> {
  const all = new Map<string, Record<string, unknown>>();
  for (const name of COLLECTIONS) for (const document of await store.collection(name).find({}, { limit: 0 })) all.set(`${name}/${document._id}`, document);
  return all;
}

const anyOrganization = fc.constantFrom(...organizations.map((org) => org._id));
const writerRights = fc.record({
  organizationId: anyOrganization,
  admin: fc.boolean(),
  permissions: fc.constantFrom<Permissions>({}, { object: true }, { 'object.update': { collection: ['keys'] } }, { '*': true }, { 'object.read': true }),
  hosts: fc.option(fc.constant('own'), { nil: undefined }),
  expiresAt: fc.option(fc.constantFrom('2998-01-01T00:00:00.000Z', '2999-06-01T00:00:00.000Z'), { nil: undefined }),
});
const keyFilter = fc.oneof(
  fc.constant({}),
  fc.constantFrom(...existingKeyIds).map((_id) => ({ _id })),
  fc.constant({ admin: false }),
  fc.constant({ disabled: true }),
  anyOrganization.map((organization_id) => ({ organization_id })),
);
const update = fc.constantFrom<Record<string, Record<string, unknown>>>(
  { $set: { admin: true } },
  { $set: { admin: false } },
  { $set: { disabled: false } },
  { $set: { disabled: true } },
  { $set: { permissions: { '*': true } } },
  { $unset: { hosts: '' } },
  { $unset: { expiresAt: '' } },
  { $set: { hosts: ['a.example', 'b.example', 'p.example'] } },
  { $set: { expiresAt: '3100-01-01T00:00:00.000Z' } },
  { $set: { secretHash: 'f'.repeat(64) } },
  { $set: { organization_id: tenantA._id } },
  { $set: { name: 'renamed' } },
  { $set: { 'master.status': 'running', 'master.meshUrl': 'ws://attacker.example:1' } },
  { $push: { hosts: 'b.example' } },
);
const documents = fc.constantFrom<Record<string, unknown>[]>(
  [{ name: 'planted', cluster_id: 'default', master: { status: 'running', meshUrl: 'ws://attacker.example:1' } }],
  [{ _id: 'server-1', name: 'collide' }],
  [{ _id: existingKeyIds[0]!, name: 'collide' }],
  [{ name: 'minted', admin: true, permissions: {}, disabled: false, secretHash: '0'.repeat(64), createdAt: '2020-01-01T00:00:00Z' }],
  [{ name: 'org', hosts: ['new.example'] }],
);
const envelope = fc.oneof(
  fc.record({ method: fc.constant('object.read'), collection: fc.constantFrom(...COLLECTIONS), filter: keyFilter }),
  fc.record({ method: fc.constant('object.update'), collection: fc.constantFrom(...COLLECTIONS), filter: keyFilter, update }),
  fc.record({ method: fc.constant('object.delete'), collection: fc.constantFrom(...COLLECTIONS), filter: keyFilter }),
  fc.record({ method: fc.constant('object.create'), collection: fc.constantFrom(...COLLECTIONS), documents }),
);

t.test('random key rights × random object.* envelopes on keys and the system collections: no key ends up above its writer, no other organization is touched', async (t) => {
  const authorizer = new Authorizer(store, { revalidateMs: 0 });
  t.teardown(() => authorizer.close());
  const outcomes: Record<string, number> = {};
  await fc.assert(
    fc.asyncProperty(writerRights, envelope, async (rights, sent) => {
      const writer = await createKey(store, {
        organizationId: rights.organizationId,
        name: 'writer',
        admin: rights.admin,
        permissions: rights.permissions,
        ...(rights.hosts ? { hosts: [hostOf.get(rights.organizationId)!] } : {}),
        ...(rights.expiresAt ? { expiresAt: rights.expiresAt } : {}),
      });
      const writerRecord = (await store.collection<KeyDocument>('keys').findOne({ _id: writer.key_id }))!;
      const before = await snapshot();
      let outcome = 'allowed';
      try {
        const authorized = await authorizer.request({ host: hostOf.get(rights.organizationId), headers: { authorization: `Bearer ${writer.key}` } }, sent);
        await runCrud(store, authorized);
      } catch (error) {
        if (!(error instanceof AuthorizationError || error instanceof CrudError)) throw error;
        if (error.statusCode === 409) throw new Error(`a write revealed an existing document: ${error.message}`);
        outcome = `${error.statusCode} ${error.code}`;
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      const after = await snapshot();
      before.delete(`keys/${writer.key_id}`);
      const writerAfter = after.get(`keys/${writer.key_id}`) as KeyDocument | undefined;
      after.delete(`keys/${writer.key_id}`);
      const platformWriter = rights.organizationId === platform._id;
      for (const [id, document] of after) {
        const previous = before.get(id);
        if (previous === undefined) {
          // Anything new is the writer's organization's own, in a collection it may write.
          if (document.organization_id !== rights.organizationId) return false;
          if (id.startsWith('keys/')) return false;
          if (PLATFORM_COLLECTIONS.has(id.split('/')[0]!) && !platformWriter) return false;
          continue;
        }
        if (JSON.stringify(previous) === JSON.stringify(document)) continue;
        const collection = id.split('/')[0]!;
        if (previous.organization_id !== rights.organizationId || document.organization_id !== rights.organizationId) return false;
        if (collection === 'organizations') return false;
        if (PLATFORM_COLLECTIONS.has(collection) && !platformWriter) return false;
        if (collection === 'keys') {
          const was = previous as unknown as KeyDocument;
          const key = document as unknown as KeyDocument;
          if (!writerRecord.admin || was.secretHash !== key.secretHash || was._id !== key._id) return false;
          if (was.disabled && !key.disabled) return false;
          if (writerRecord.hosts && (!key.hosts || key.hosts.some((host) => !writerRecord.hosts!.includes(host)))) return false;
          if (writerRecord.expiresAt && (!key.expiresAt || Date.parse(key.expiresAt) > Date.parse(writerRecord.expiresAt))) return false;
        }
      }
      for (const id of before.keys()) {
        if (after.has(id)) continue;
        // Deleted: only the writer's own organization's documents, and keys only by its admin.
        const previous = before.get(id)!;
        if (previous.organization_id !== rights.organizationId) return false;
        if (id.startsWith('keys/') && !writerRecord.admin) return false;
        if (PLATFORM_COLLECTIONS.has(id.split('/')[0]!) && !platformWriter) return false;
      }
      // The writer itself is held to the same rule when it is among the matches.
      if (writerAfter && (writerAfter.admin && !writerRecord.admin)) return false;
      await store.collection('keys').deleteOne({ _id: writer.key_id });
      return true;
    }),
    { numRuns: 400 },
  );
  t.ok(outcomes.allowed! > 20, `allowed envelopes were exercised (${JSON.stringify(outcomes)})`);
  for (const refusal of ['403 platform_only', '403 forbidden']) t.ok(outcomes[refusal], `${refusal} was exercised`);
});
