import type { Store } from '../db/types.js';
import { isHeldStatus, serverRecords, type InventoryScope } from './records.js';

export interface InventorySaveResult {
  saved: boolean;
  /** Why nothing was written. */
  skipped?: string;
}

/** A server this one may dial: its id, its mesh URL and when its primary started. */
export interface RunningPeer {
  id: string;
  url: string;
  startedAt?: string;
}

/**
 * SPEC 7.4: writes one process's section of this server's `servers` document (the primary `master`, a worker
 * `workers.<id>`), merging field by field so sections written by others survive. A record another subsystem
 * marked terminating or failed is left as it is, and a stopping server does not create its record again.
 */
export async function saveInventorySection(db: Store, serverId: string, cluster: string, section: string, fields: Record<string, unknown>, owner?: string): Promise<InventorySaveResult> {
  const servers = serverRecords(db);
  const current = await servers.findOne({ _id: serverId }, { projection: { master: 1 } });
  const held = current?.master?.status;
  if (held && isHeldStatus(held)) return { saved: false, skipped: `the record is ${held}` };
  // A server going down never creates its record: one deleted under it (swept once its termination was
  // accepted) stays deleted rather than coming back as a `stopped` record nobody removes.
  if (!current && section === 'master' && fields.status === 'stopped') return { saved: false, skipped: 'the record is gone and this server is stopping' };
  const set: Record<string, unknown> = { cluster_id: cluster, ...(owner ? { organization_id: owner } : {}) };
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) set[`${section}.${name}`] = value;
  await servers.updateOne({ _id: serverId }, { $set: set }, { upsert: true });
  return { saved: true };
}

/**
 * A URL the primary may dial: ws or wss, a host, no credentials, no fragment. The record is the platform's
 * (only it writes `servers`), but a URL is still input: a malformed one is skipped, never dialed.
 */
export function dialableMeshUrl(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 2048 || !/^wss?:\/\//.test(value)) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if ((url.protocol !== 'ws:' && url.protocol !== 'wss:') || !url.hostname || url.username || url.password || url.hash) return undefined;
  return value;
}

/**
 * The peers this server dials (SPEC 6.1, 8.5): running servers of its cluster group with a smaller id (one link
 * per pair), from records of its platform organization only (or written before owners were recorded, when no
 * tenant could be told apart), with a dialable mesh URL.
 */
export async function runningPeers(db: Store, self: string, cluster: string, owner?: string | null): Promise<RunningPeer[]> {
  const filter = { cluster_id: cluster, 'master.status': 'running', ...(owner ? { $or: [{ organization_id: owner }, { organization_id: { $exists: false } }] } : {}) };
  const records = await serverRecords(db).find(filter, { sort: { _id: 1 } });
  const peers: RunningPeer[] = [];
  for (const record of records) {
    const url = dialableMeshUrl(record.master?.meshUrl);
    if (record._id >= self || !url) continue;
    const startedAt = record.master?.startedAt;
    peers.push({ id: record._id, url, ...(typeof startedAt === 'string' ? { startedAt } : {}) });
  }
  return peers;
}

/** A server's `master.status` as its record holds it; undefined when there is no record or no status. */
export async function serverStatus(scope: InventoryScope, serverId: string): Promise<unknown> {
  return (await serverRecords(scope).findOne({ _id: serverId }, { projection: { master: 1 } }))?.master?.status;
}

/** How many servers of a cluster are `running`. */
export function countRunning(scope: InventoryScope, clusterId: string): Promise<number> {
  return serverRecords(scope).countDocuments({ cluster_id: clusterId, 'master.status': 'running' });
}

/** The records of a cluster's servers that a scale-in marked `terminating`: the sweep deletes them. */
export const terminatingServers = (cluster: string) => ({ cluster_id: cluster, 'master.status': 'terminating' });

/** The cluster of the server a parent issued a key to (its record names the key), or null when none does. */
export async function clusterOfIssuedKey(scope: InventoryScope, keyId: string): Promise<string | null> {
  const record = await serverRecords(scope).findOne({ 'manager.key_id': keyId }, { projection: { cluster_id: 1 } });
  return record ? String(record.cluster_id) : null;
}

/** Every server record naming a key its parent issued: the key id and the record's cluster. */
export async function issuedKeys(scope: InventoryScope): Promise<Array<{ keyId: unknown; clusterId: unknown }>> {
  const records = await serverRecords(scope).find({ 'manager.key_id': { $exists: true } }, { projection: { cluster_id: 1, manager: 1 }, limit: 0 });
  return records.map((record) => ({ keyId: record.manager?.key_id, clusterId: record.cluster_id }));
}
