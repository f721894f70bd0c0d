import { COLLECTION_SCHEMAS } from '../db/documents.js';
import { DuplicateKeyError } from '../db/errors.js';
import type { Store } from '../db/types.js';
import { CRUD_ERRORS } from './errors.js';

/** The store's own collections (write counters, this registry) and MongoDB's `system.*` are never tenant data. */
const INTERNAL_PREFIXES = ['fleetplane_', 'system'];
/** One document per organization listing the collections it created through CRUD (besides the SPEC 7.2 ones). */
const REGISTRY = 'fleetplane_tenant_collections';
export const DEFAULT_MAX_COLLECTIONS = 100;

/** 400 for a name CRUD must not reach: an internal or system collection. */
export function assertTenantCollectionName(name: string): void {
  const lower = name.toLowerCase();
  if (INTERNAL_PREFIXES.some((prefix) => lower.startsWith(prefix))) {
    throw CRUD_ERRORS.invalidCollection(name, INTERNAL_PREFIXES.map((p) => `"${p}"`).join(' or '));
  }
}

/**
 * Admits `name` as a collection of the organization before its first document is created: the SPEC 7.2
 * collections always, any other one while the organization has fewer than `limit`. A collection counts once
 * created (its documents deleted or not). The check and the claim are one conditional upsert, so concurrent
 * creations cannot overshoot: it matches only while slot `limit - 1` is free, and on a full list the insert it
 * falls back to collides with the existing document.
 */
export async function admitCollection(store: Store, organizationId: string, name: string, limit: number): Promise<void> {
  if (Object.hasOwn(COLLECTION_SCHEMAS, name)) return;
  const registry = store.collection(REGISTRY);
  if (await registry.findOne({ _id: organizationId, names: name }, { projection: { _id: 1 } })) return;
  try {
    await registry.updateOne({ _id: organizationId, [`names.${limit - 1}`]: { $exists: false } }, { $addToSet: { names: name } }, { upsert: true });
  } catch (error) {
    if (!(error instanceof DuplicateKeyError)) throw error;
    throw CRUD_ERRORS.collectionLimit(name, limit);
  }
}
