import { fencedFilter, fenceMark, laterFenceFilter, type Fence } from '../db/fence.js';
import { serverRecords, type InventoryScope } from './records.js';
import { terminatingServers } from './servers.js';

/**
 * How a fenced write to a server record ended: written; refused (a later term wrote the record); or nothing to
 * write (no such record of the cluster, or not in the state the write expects).
 */
export type FencedOutcome = 'written' | 'refused' | 'missing';

/** The statuses a cluster's decider writes: a scale-in's `terminating`, a refused removal's `failed`, a cancelled one's `running`. */
export type DecidedStatus = 'running' | 'terminating' | 'failed';

/**
 * The writes a cluster's decider (the holder of its decider lease) makes to the records of its servers, each fenced
 * by the term it was decided in (`src/db/fence.ts`): the record keeps the highest term that wrote it, and a write
 * of an older term matches nothing. `claim` stamps a new holder's term on every record of the cluster when it takes
 * the lease over, so from then on no write of an earlier holder lands on any of them, whichever it touches.
 */
export interface DeciderWrites {
  /** Stamps `fence` on every record of the cluster; false when a later term already claimed them (refused). */
  claim(fence: Fence): Promise<boolean>;
  /** Stamps `fence` on one server's record again: refused once a later term claimed the cluster. */
  claimServer(serverId: string, fence: Fence): Promise<FencedOutcome>;
  setStatus(serverId: string, status: DecidedStatus, fence: Fence): Promise<FencedOutcome>;
  /** The record of a server a provider is asked for: `starting`, counted toward the size at once. */
  insertStarting(serverId: string, organizationId: string, createdAt: string, fence: Fence): Promise<void>;
  /** What the provider made (its cloud and instance id), or `failed` with the cloud when it answered no instance id. */
  recordInfrastructure(serverId: string, infrastructure: { cloud: string; instanceId?: string }, fence: Fence): Promise<FencedOutcome>;
  /** Deletes a `starting` record whose creation the provider refused. */
  deleteStarting(serverId: string, fence: Fence): Promise<FencedOutcome>;
  /** Deletes the cluster's `terminating` records that no later term wrote; `refused` when some remain for that reason. */
  deleteTerminating(fence: Fence): Promise<{ deleted: number; refused: boolean }>;
}

export function deciderWrites(scope: InventoryScope, cluster: string): DeciderWrites {
  const servers = () => serverRecords(scope);
  /** Why a fenced write to one record matched nothing: a later term holds it, or there was nothing to write. */
  const unmatched = async (serverId: string, fence: Fence): Promise<FencedOutcome> =>
    (await servers().findOne(laterFenceFilter({ _id: serverId, cluster_id: cluster }, fence), { projection: { _id: 1 } })) ? 'refused' : 'missing';
  const update = async (serverId: string, set: Record<string, unknown>, fence: Fence): Promise<FencedOutcome> => {
    const result = await servers().updateOne(fencedFilter({ _id: serverId, cluster_id: cluster }, fence), { $set: { ...set, ...fenceMark(fence) } });
    return result.matchedCount === 1 ? 'written' : unmatched(serverId, fence);
  };
  return {
    async claim(fence) {
      const mine = { cluster_id: cluster };
      await servers().updateMany(fencedFilter(mine, fence), { $set: fenceMark(fence) });
      return (await servers().countDocuments(laterFenceFilter(mine, fence))) === 0;
    },
    claimServer: (serverId, fence) => update(serverId, {}, fence),
    setStatus: (serverId, status, fence) => update(serverId, { 'master.status': status }, fence),
    async insertStarting(serverId, organizationId, createdAt, fence) {
      await servers().insertOne({ _id: serverId, cluster_id: cluster, organization_id: organizationId, master: { status: 'starting', createdAt }, ...fenceMark(fence) });
    },
    recordInfrastructure: (serverId, infrastructure, fence) =>
      update(
        serverId,
        {
          'infrastructure.cloud': infrastructure.cloud,
          // Something may have been made that nobody can name: the record stays, failed, for an operator.
          ...(infrastructure.instanceId ? { 'infrastructure.instanceId': infrastructure.instanceId } : { 'master.status': 'failed' }),
        },
        fence,
      ),
    async deleteStarting(serverId, fence) {
      const result = await servers().deleteOne(fencedFilter({ _id: serverId, cluster_id: cluster, 'master.status': 'starting' }, fence));
      return result.deletedCount === 1 ? 'written' : unmatched(serverId, fence);
    },
    async deleteTerminating(fence) {
      const terminating = terminatingServers(cluster);
      const { deletedCount } = await servers().deleteMany(fencedFilter(terminating, fence));
      return { deleted: deletedCount, refused: (await servers().countDocuments(laterFenceFilter(terminating, fence))) > 0 };
    },
  };
}
