import type { Collection, Document } from '../db/types.js';

/** SPEC 7.2: one document per server and one per cluster, kept by the platform organization. */
export const SERVERS = 'servers';
export const CLUSTERS = 'clusters';
/** The inventory's collections, as `/manager` and the platform-only rule name them. */
export const INVENTORY_COLLECTIONS = [SERVERS, CLUSTERS] as const;
export type InventoryCollection = (typeof INVENTORY_COLLECTIONS)[number];

/**
 * A server's lifecycle, as its record's `master.status` says it:
 * - `starting` (a provider was asked for it, SPEC 13.3) or `pending` (an older name of it): counts toward its
 *   cluster's size, not yet confirmed;
 * - `running`: its primary saved it; confirmed once `master.servingSince` is set (null: workers not serving yet);
 * - `stopped`: its primary stopped gracefully;
 * - `terminating`: a scale-in or a `terminateServer` is removing it; the sweep deletes the record afterwards;
 * - `failed`: a provider could not make or remove it.
 * `terminating` and `failed` are held: the server's own saves never overwrite them.
 */
export type ServerStatus = 'starting' | 'pending' | 'running' | 'stopped' | 'terminating' | 'failed';

const HELD_STATUSES: ReadonlySet<unknown> = new Set<ServerStatus>(['terminating', 'failed']);

/** Whether a status belongs to another subsystem (scale-in, failure handling), so a server's save must keep it. */
export const isHeldStatus = (status: unknown): boolean => HELD_STATUSES.has(status);

/** What a provider makes a server with: `cloud` names the provider API; the rest is the provider's business. */
export interface Deployment {
  cloud: string;
  [field: string]: unknown;
}

/** The primary's section of a server record (SPEC 7.4). Fields read from the store are checked where used. */
export interface MasterSection {
  status?: unknown;
  meshUrl?: unknown;
  pid?: unknown;
  createdAt?: unknown;
  startedAt?: unknown;
  /** When its workers first served; null while none has. */
  servingSince?: unknown;
  [field: string]: unknown;
}

/** A document of `servers`: written by the server itself (its sections), by the parent that made it, by the autoscaler. */
export interface ServerRecord extends Document {
  _id: string;
  cluster_id?: string;
  /** The organization that owns the server (its platform organization, or the tenant of a managed cluster). */
  organization_id?: string;
  /** Records written before `master.createdAt` existed. */
  createdAt?: unknown;
  master?: MasterSection;
  /** One section per worker slot, `workers.<id>`. */
  workers?: Record<string, unknown>;
  deployment?: Deployment;
  /** What the provider made: the cloud and its instance id, which a termination names. */
  infrastructure?: { cloud?: string; instanceId?: string };
  /**
   * The parent's side (`key_id`, `for`: the key it issued, the tenant) or the server's side (`organization_id`,
   * `host`, the sealed `apiKey`: the parent it reports to).
   */
  manager?: { key_id?: unknown; for?: unknown; organization_id?: unknown; host?: unknown; apiKey?: unknown };
}

/** A document of `clusters`: a cluster group of servers, its policies and, for a managed one, its tenant. */
export interface ClusterRecord extends Document {
  _id: string;
  organization_id: string;
  name?: string;
  /** Who manages it and for whom: the platform organization, the parent's host, the tenant organization. */
  manager?: { organization_id?: string; host?: string; for?: string };
  initialDeployment?: Deployment;
  /** The tenant cluster's own store: an embedded file or a MongoDB URL shared by its servers. */
  store?: { path?: string; mongodbUrl?: string; database?: string };
  mesh?: { secret?: string };
  /** The autoscaler's policy (SPEC 14.4), checked by the autoscaler. */
  autoscaler?: unknown;
  /** The repositories its servers check out (SPEC 14.3), checked by the repositories service. */
  repositories?: unknown;
}

/** A store, or one organization's scope of it. */
export interface InventoryScope {
  collection<T extends Document = Document>(name: string): Collection<T>;
}

export const serverRecords = (scope: InventoryScope): Collection<ServerRecord> => scope.collection<ServerRecord>(SERVERS);
export const clusterRecords = (scope: InventoryScope): Collection<ClusterRecord> => scope.collection<ClusterRecord>(CLUSTERS);

/**
 * The cluster document of a server's `server.cluster`: the one whose `_id` is the cluster id (a managed server's,
 * which the parent sets), or whose `name` is (a cluster written through `/crud`, which assigns the id); of one
 * organization when it is named.
 */
export const clusterOf = (cluster: string, organizationId?: string) => ({ $or: [{ _id: cluster }, { name: cluster }], ...(organizationId ? { organization_id: organizationId } : {}) });
