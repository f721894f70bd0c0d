import type { KeyDocument } from '../db/documents.js';
import { assertCollectionDocument } from '../db/documents.js';
import { applyUpdate } from '../db/updates.js';
import type { Filter, Store, Update } from '../db/types.js';
import type { AuthorizedUser } from '../auth/envelope.js';
import { INVENTORY_COLLECTIONS } from '../inventory/records.js';
import type { CrudEnvelope } from './envelope.js';
import { CRUD_ERRORS } from './errors.js';

/**
 * SPEC 8.5: collections that describe the platform itself (its tenants, servers, clusters and their
 * configuration): written only by keys of the platform organization. `organizations` has no tenant scope at
 * all and is read through `organizationsView` instead.
 */
export const PLATFORM_COLLECTIONS: ReadonlySet<string> = new Set(['organizations', ...INVENTORY_COLLECTIONS, 'servers_config', 'repository_upload_reservations']);

/** The caller of a CRUD envelope, as authorization resolved it. */
export interface CrudCaller {
  organization_id: string;
  user: AuthorizedUser | null;
}

const forbidden = CRUD_ERRORS.platformOnly;
const ADMIN_ONLY = 'keys are read and written only with an admin key of the organization';

/** Refuses what the caller's level may not do to the collection, before anything is read or written. */
export function assertCollectionAuthority(caller: CrudCaller, envelope: CrudEnvelope): void {
  const name = envelope.collection;
  const writing = envelope.method !== 'object.read';
  if (name === 'keys' && !caller.user?.admin) throw CRUD_ERRORS.forbidden(ADMIN_ONLY);
  if (writing && PLATFORM_COLLECTIONS.has(name) && !caller.user?.platform) throw forbidden(`${name} is written only by the platform organization`);
  if (writing && name === 'organizations') throw CRUD_ERRORS.readOnly();
  if (envelope.method === 'object.create') {
    const index = envelope.documents!.findIndex((document) => Object.hasOwn(document, '_id'));
    // Ids are global across organizations: a caller-chosen one that collided would reveal another tenant's
    // document. The store assigns them; names are unique per organization.
    if (index >= 0) throw CRUD_ERRORS.invalidEnvelope(`documents.${index}._id: assigned by the store, not by the caller`);
    if (name === 'keys') throw CRUD_ERRORS.invalidEnvelope('keys are created with "fleetplane keys create", which shows the secret once');
  }
}

/** A tenant reads its own organization document; the platform reads them all. */
export function organizationsFilter(caller: CrudCaller, filter: Filter | undefined): Filter {
  const own = filter ?? {};
  return caller.user?.platform ? own : { $and: [own, { _id: caller.organization_id }] };
}

/** What a key may be given when its writer holds `writer`: nothing the writer does not hold itself. */
function exceedsWriter(before: KeyDocument, after: KeyDocument, writer: KeyDocument): string | undefined {
  if (after.admin && !writer.admin) return 'admin: the writer is not an admin';
  if (before.disabled && !after.disabled) return 'disabled: a revoked key stays revoked; create a new key instead';
  if (writer.hosts) {
    if (!after.hosts) return 'hosts: the writer is limited to hosts, so the key must be too';
    const outside = after.hosts.find((host) => !writer.hosts!.includes(host));
    if (outside) return `hosts: "${outside}" is not one of the writer's hosts`;
  }
  if (writer.expiresAt) {
    if (!after.expiresAt) return 'expiresAt: the writer expires, so the key must too';
    if (Date.parse(after.expiresAt) > Date.parse(writer.expiresAt)) return "expiresAt: later than the writer's own expiry";
  }
  return undefined;
}

/**
 * `object.update` on `keys`: each matching key is updated only when the result is a valid key holding no more
 * than the writer (SPEC 8.5). The outcome is computed first for every match, so a refusal changes nothing.
 */
export async function updateKeys(store: Store, caller: CrudCaller, filter: Filter, update: Update): Promise<{ matchedCount: number; modifiedCount: number }> {
  for (const fields of Object.values(update)) {
    for (const path of Object.keys(isRecord(fields) ? fields : {})) {
      const field = path.split('.')[0]!;
      if (FIXED_KEY_FIELDS.has(field)) throw CRUD_ERRORS.forbidden(`${path}: ${field} of a key cannot be changed`);
    }
  }
  const keys = store.forOrganization(caller.organization_id).collection<KeyDocument>('keys');
  const writer = caller.user && (await keys.findOne({ _id: caller.user.key_id }));
  if (!writer) throw CRUD_ERRORS.forbidden(ADMIN_ONLY);
  const matched = await keys.find(filter, { limit: 0 });
  const changed: KeyDocument[] = [];
  for (const before of matched) {
    const after = structuredClone(before) as KeyDocument;
    if (!applyUpdate(after, update)) continue;
    try {
      // The stored document has its hash; the scoped read does not, so check with a stand-in of the right shape.
      assertCollectionDocument('keys', { ...after, secretHash: '0'.repeat(64) });
    } catch (error) {
      throw CRUD_ERRORS.invalidDocument(`key ${before._id}: ${(error as Error).message}`);
    }
    const excess = exceedsWriter(before, after, writer);
    if (excess) throw CRUD_ERRORS.forbidden(`key ${before._id}: ${excess}`);
    changed.push(after);
  }
  let modifiedCount = 0;
  for (const after of changed) {
    // What is written is exactly the checked result, not the update re-applied to whatever is stored by then.
    const { _id, organization_id: _scope, secretHash: _hidden, ...fields } = after;
    const unset = Object.fromEntries(OPTIONAL_KEY_FIELDS.filter((field) => fields[field] === undefined).map((field) => [field, '']));
    const result = await keys.updateOne({ _id }, { $set: fields, ...(Object.keys(unset).length > 0 ? { $unset: unset } : {}) } as Update);
    modifiedCount += result.modifiedCount;
  }
  return { matchedCount: matched.length, modifiedCount };
}

const OPTIONAL_KEY_FIELDS = ['hosts', 'expiresAt'] as const;
/** Identity, proof and binding of a key: set when it is created, never changed through CRUD. */
const FIXED_KEY_FIELDS: ReadonlySet<string> = new Set(['_id', 'organization_id', 'secretHash', 'createdAt', 'cluster_id']);
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
