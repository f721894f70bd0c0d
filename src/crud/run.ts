import { DocumentTooLargeError, DuplicateKeyError, ScopeError, StoreError } from '../db/errors.js';
import type { Collection, Document, Filter, Store, Update } from '../db/types.js';
import { serializeDocument } from '../db/validate.js';
import { assertCollectionDocument } from '../db/documents.js';
import { DEFAULT_READ_LIMIT, parseCrudEnvelope, type CrudEnvelope } from './envelope.js';
import { admitCollection, assertTenantCollectionName, DEFAULT_MAX_COLLECTIONS } from './collections.js';
import { CRUD_ERRORS, CrudError, storeRefusal } from './errors.js';
import { assertNoSecretPaths, redactSecrets } from './secrets.js';
import { assertCollectionAuthority, organizationsFilter, updateKeys, type CrudCaller } from './authority.js';
import { assertWritable, checksWrites, updateChecked } from './checked-writes.js';

export type CrudResult =
  | { insertedIds: string[] }
  | { documents: Record<string, unknown>[] }
  | { matchedCount: number; modifiedCount: number }
  | { deletedCount: number };

/** The store's refusals, mapped to what the caller did wrong; anything else is a server failure. */
function asCrudError(error: unknown): unknown {
  if (error instanceof DuplicateKeyError) return CRUD_ERRORS.duplicateKey(error.index);
  if (error instanceof DocumentTooLargeError) return CRUD_ERRORS.documentTooLarge(error.message);
  if (error instanceof ScopeError) return CRUD_ERRORS.forbidden(error.message);
  // Down, busy or closed: the write may or may not have happened, and a retry is the caller's to decide.
  if (error instanceof StoreError && error.statusCode === 503) return CRUD_ERRORS.storeUnavailable().withCause(error);
  if (error instanceof StoreError && error.statusCode < 500) return storeRefusal(error);
  return error;
}

/**
 * Inserts all documents or none: each is checked first (see `assertWritable`), then the collection admitted (see
 * `admitCollection`), and a write that fails half-way (a duplicate name) removes the documents this call
 * inserted before it.
 */
async function create(
  collection: Collection<Document>,
  name: string,
  documents: Record<string, unknown>[],
  admit: () => Promise<void>,
): Promise<{ insertedIds: string[] }> {
  for (const [index, document] of documents.entries()) {
    try {
      serializeDocument(document);
      assertWritable(name, document);
      assertCollectionDocument(name, { _id: 'checked', ...document, organization_id: 'checked' });
    } catch (error) {
      const mapped = asCrudError(error);
      if (mapped instanceof CrudError) throw mapped.within(`documents.${index}: `);
      throw error;
    }
  }
  await admit();
  const insertedIds: string[] = [];
  try {
    for (const document of documents) insertedIds.push((await collection.insertOne(document)).insertedId);
  } catch (error) {
    if (insertedIds.length > 0) await collection.deleteMany({ _id: { $in: insertedIds } });
    throw error;
  }
  return { insertedIds };
}

export interface CrudOptions {
  /** Collections an organization may create besides the SPEC 7.2 ones (`db.maxCollectionsPerOrganization`). */
  maxCollections?: number;
  /** The envelope's own fields already passed the `CrudEnvelope` schema (see `parseCrudEnvelope`). */
  schemaChecked?: boolean;
}

async function execute(store: Store, caller: CrudCaller, envelope: CrudEnvelope, options: CrudOptions): Promise<CrudResult> {
  const name = envelope.collection;
  assertTenantCollectionName(name);
  assertCollectionAuthority(caller, envelope);
  assertNoSecretPaths(name, envelope.filter, envelope.sort);
  if (name === 'organizations') {
    const found = await store.collection('organizations').find(organizationsFilter(caller, envelope.filter as Filter | undefined), { sort: envelope.sort, limit: envelope.limit ?? DEFAULT_READ_LIMIT });
    return { documents: found };
  }
  if (name === 'keys' && envelope.method === 'object.update') return updateKeys(store, caller, envelope.filter as Filter, envelope.update as Update);
  const collection = store.forOrganization(caller.organization_id).collection(name);
  switch (envelope.method) {
    case 'object.create':
      return create(collection, name, envelope.documents!, () => admitCollection(store, caller.organization_id, name, options.maxCollections ?? DEFAULT_MAX_COLLECTIONS));
    case 'object.read': {
      const found = await collection.find(envelope.filter as Filter | undefined, { sort: envelope.sort, limit: envelope.limit ?? DEFAULT_READ_LIMIT });
      return { documents: found.map((document) => redactSecrets(name, document)) };
    }
    case 'object.update': {
      if (checksWrites(name)) return updateChecked(collection, envelope.filter as Filter, envelope.update as Update);
      const { matchedCount, modifiedCount } = await collection.updateMany(envelope.filter as Filter, envelope.update as Update);
      return { matchedCount, modifiedCount };
    }
    case 'object.delete':
      return { deletedCount: (await collection.deleteMany(envelope.filter as Filter)).deletedCount };
  }
}

/**
 * SPEC 7.3: an authorized CRUD envelope against the caller's organization. The scope comes from authorization
 * (`organization_id` of the envelope is the resolved one, never the caller's), through `store.forOrganization`.
 */
export async function runCrud(store: Store | undefined, authorized: Readonly<Record<string, unknown>> & CrudCaller, options: CrudOptions = {}): Promise<CrudResult> {
  if (!store) throw CRUD_ERRORS.unavailable();
  const envelope = parseCrudEnvelope(authorized, { schemaChecked: options.schemaChecked });
  try {
    return await execute(store, authorized, envelope, options);
  } catch (error) {
    throw asCrudError(error);
  }
}
