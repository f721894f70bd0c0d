import { providerViolation } from '../api/provider.js';
import type { Collection, Document, Filter, Update } from '../db/types.js';
import { applyUpdate } from '../db/updates.js';
import { assertUpdate } from '../db/validate.js';
import { CLUSTERS } from '../inventory/records.js';
import { isSealed } from '../secrets/box.js';
import { transformDocument, transformUpdate } from '../secrets/fields.js';
import { webhookViolation } from '../webhooks/definition.js';
import { workflowViolation } from '../workflows/definition.js';
import { assertClusterPolicy } from './cluster-policy.js';
import { CRUD_ERRORS } from './errors.js';

/** Fields the store keeps on a tenant's document; the runtime leaves them out of the definition it compiles. */
export const STORE_FIELDS: ReadonlySet<string> = new Set(['_id', 'organization_id', 'createdAt', 'updatedAt']);

/**
 * SPEC 10.1, 11.2, 12.1: the documents the runtime compiles when they are used, with the very check it compiles
 * them with, so a write that would break one is refused where it is made rather than when it is called.
 */
const DEFINITIONS: Readonly<Record<string, { noun: string; violation: (value: unknown, prefix?: string) => string | undefined }>> = {
  apis: { noun: 'provider', violation: providerViolation },
  workflows: { noun: 'workflow', violation: workflowViolation },
  webhooks: { noun: 'webhook', violation: webhookViolation },
};

/**
 * A secret stored sealed was checked in its plain form when written; its sealed text (longer than the plain
 * limit) stands in as this.
 */
const SEALED_SECRET = 'sealed';
/** A secret as it is: the transforms below are run for the refusals they make, not for their result. */
const keep = (value: string) => value;

/**
 * Why `document` (as it is or would be stored: store fields, sealed secrets) is not a valid definition of its
 * collection, as `field: problem`; undefined when it is one, or when the collection holds no definitions.
 */
export function definitionViolation(collection: string, document: Record<string, unknown>, prefix = ''): string | undefined {
  const definition = DEFINITIONS[collection];
  if (!definition) return undefined;
  const own = Object.fromEntries(Object.entries(document).filter(([field]) => !STORE_FIELDS.has(field)));
  return definition.violation(transformDocument(collection, own, (value) => (isSealed(value) ? SEALED_SECRET : value), false), prefix);
}

/** Whether documents of `collection` are checked before a write (see `assertWritable`). */
export const checksWrites = (collection: string): boolean => Object.hasOwn(DEFINITIONS, collection) || collection === CLUSTERS;

/**
 * Refuses (400 naming the field, prefixed by `where`) a document a CRUD write would leave in `collection`: a
 * provider, workflow or webhook the runtime could not use, a cluster with an invalid scaling policy.
 */
export function assertWritable(collection: string, document: Record<string, unknown>, where = ''): void {
  // A secret that is not one string is the sealing store's refusal (`secret_field`), more telling than the schema's.
  transformDocument(collection, document, keep);
  const violation = definitionViolation(collection, document);
  if (violation) throw CRUD_ERRORS.invalidDocument(`${where}${violation}`);
  if (collection === CLUSTERS) assertClusterPolicy(document, where);
}

const label = (collection: string, id: string) => `${DEFINITIONS[collection]?.noun ?? 'cluster'} ${id}: `;

/**
 * `object.update` on a collection whose documents are checked: the result of the update is computed for every
 * matching document and checked first, so a refusal changes nothing (all or nothing, as `updateMany` itself);
 * then the store applies the update, with its own rules, to those documents only. A write racing in between
 * could still combine into an invalid document: the runtime checks again when it uses one (422).
 */
export async function updateChecked(collection: Collection<Document>, filter: Filter, update: Update): Promise<{ matchedCount: number; modifiedCount: number }> {
  // The store's own refusals of a malformed update or of a secret written in pieces, before it is applied here.
  assertUpdate(update);
  transformUpdate(collection.name, update, keep);
  const matched = await collection.find(filter, { limit: 0 });
  for (const before of matched) {
    const after = structuredClone(before);
    if (applyUpdate(after, update)) assertWritable(collection.name, after, label(collection.name, before._id));
  }
  // Sent even when nothing matched, so the write meets every rule of the store (and its scope) as any other.
  const ids = matched.map((document) => document._id);
  const { matchedCount, modifiedCount } = await collection.updateMany({ $and: [filter, { _id: { $in: ids } }] }, update);
  return { matchedCount, modifiedCount };
}
