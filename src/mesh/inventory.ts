import type { Document, Store } from '../db/types.js';
import type { PeerTarget } from './dialer.js';

export const SERVERS = 'servers';

/** Lifecycle states owned by other subsystems (scale-in, failure handling): a save must not overwrite them. */
const HELD_STATUSES = new Set(['terminating', 'failed']);

export interface InventorySaveResult {
  saved: boolean;
  /** Why nothing was written. */
  skipped?: string;
}

type ServerRecord = Document & { cluster_id?: string; master?: { status?: string; meshUrl?: unknown; startedAt?: unknown } };

/**
 * SPEC 7.4: writes one process's section of this server's `servers` document (the primary `master`, a worker
 * `workers.<id>`), merging field by field so sections written by others survive. A record another subsystem
 * marked terminating or failed is left as it is.
 */
export async function saveInventorySection(db: Store, serverId: string, cluster: string, section: string, fields: Record<string, unknown>): Promise<InventorySaveResult> {
  const servers = db.collection<ServerRecord>(SERVERS);
  const current = await servers.findOne({ _id: serverId }, { projection: { master: 1 } });
  const held = current?.master?.status;
  if (held && HELD_STATUSES.has(held)) return { saved: false, skipped: `the record is ${held}` };
  const set: Record<string, unknown> = { cluster_id: cluster };
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) set[`${section}.${name}`] = value;
  await servers.updateOne({ _id: serverId }, { $set: set }, { upsert: true });
  return { saved: true };
}

/** The peers this server dials: running servers of its cluster group with a smaller id (one link per pair). */
export async function runningPeers(db: Store, self: string, cluster: string): Promise<PeerTarget[]> {
  const records = await db.collection<ServerRecord>(SERVERS).find({ cluster_id: cluster, 'master.status': 'running' }, { sort: { _id: 1 } });
  const peers: PeerTarget[] = [];
  for (const record of records) {
    const url = record.master?.meshUrl;
    if (record._id >= self || typeof url !== 'string' || !/^wss?:\/\//.test(url)) continue;
    const startedAt = record.master?.startedAt;
    peers.push({ id: record._id, url, ...(typeof startedAt === 'string' ? { startedAt } : {}) });
  }
  return peers;
}
