import type { ServerRecord } from '../inventory/records.js';
import type { ClusterNode } from './decide.js';

/** `starting`: created by a provider, not yet confirmed; it counts toward the size (SPEC 14.4). */
function nodeStatus(status: unknown): ClusterNode['status'] {
  if (status === 'running' || status === 'terminating' || status === 'failed') return status;
  return status === 'starting' || status === 'pending' ? 'pending' : 'stopped';
}

const timeOf = (value: unknown): number => (typeof value === 'number' ? value : typeof value === 'string' ? Date.parse(value) : Number.NaN);

function createdAt(record: ServerRecord): number {
  for (const value of [record.master?.createdAt, record.master?.startedAt, record.createdAt]) {
    const at = timeOf(value);
    if (Number.isFinite(at)) return at;
  }
  return 0;
}

/**
 * A server record as the decision sees it. A `running` record whose workers have not served yet
 * (`servingSince: null`) is not confirmed: it counts toward the size and holds the next action, as a created one
 * does. A record without the field predates it: it has served since it started.
 */
export function clusterNode(record: ServerRecord): ClusterNode {
  const status = nodeStatus(record.master?.status);
  const serving = record.master?.servingSince;
  const servingSince = timeOf(serving === undefined ? record.master?.startedAt : serving);
  return {
    id: record._id,
    status: status === 'running' && serving === null ? 'pending' : status,
    createdAt: createdAt(record),
    ...(Number.isFinite(servingSince) ? { servingSince } : {}),
  };
}
