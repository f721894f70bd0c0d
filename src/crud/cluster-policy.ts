import { parsePolicy, PolicyError } from '../autoscaler/policy.js';
import type { Collection, Document, Filter, Update } from '../db/types.js';
import { applyUpdate } from '../db/updates.js';
import { CRUD_ERRORS } from './errors.js';

/**
 * SPEC 14.4: the `autoscaler` section of a cluster document is the cluster's scaling policy. A bad one is
 * refused where it is written (400 naming the field), so the policy in force is always a valid one.
 */
export function assertClusterPolicy(document: Record<string, unknown>, where = ''): void {
  if (!Object.hasOwn(document, 'autoscaler')) return;
  try {
    parsePolicy(document.autoscaler);
  } catch (error) {
    if (!(error instanceof PolicyError)) throw error;
    throw CRUD_ERRORS.invalidPolicy(`${where}autoscaler.${error.message}`);
  }
}

/**
 * `object.update` on `clusters`: the result of the update is computed and its policy checked for every matching
 * document first, so a refusal changes nothing; then the store applies the update itself, with its own rules.
 * Two platform writes racing could still combine into a bad policy: the autoscaler parses the policy again
 * when it reads it and keeps the last valid one.
 */
export async function updateClusters(clusters: Collection<Document>, filter: Filter, update: Update): Promise<{ matchedCount: number; modifiedCount: number }> {
  for (const before of await clusters.find(filter, { limit: 0 })) {
    const after = structuredClone(before);
    if (applyUpdate(after, update)) assertClusterPolicy(after, `cluster ${before._id}: `);
  }
  const { matchedCount, modifiedCount } = await clusters.updateMany(filter, update);
  return { matchedCount, modifiedCount };
}
