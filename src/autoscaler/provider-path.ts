import { FencedWriteRefused, type Fence } from '../db/fence.js';
import { newId } from '../db/ids.js';
import type { Collection } from '../db/types.js';
import type { DeciderWrites } from '../inventory/decider-writes.js';
import type { ClusterRecord, ServerRecord } from '../inventory/records.js';
import type { ProviderPort } from '../manager/provider-port.js';
import type { Clock } from '../runtime/clock.js';

export interface UnmanagedPathDeps {
  cluster: string;
  servers(): Collection<ServerRecord>;
  /** The writes to the new server's record, fenced by the term the scale-out was decided in. */
  records: DeciderWrites;
  provider: ProviderPort;
  platformOrganization(): Promise<string | null>;
  clusterDocument(): Promise<ClusterRecord | null>;
  /**
   * What a new server of this cluster needs besides its id, cluster and organization, as the deciding server
   * has it: the mesh secret, the store, the autoscaler settings.
   */
  startup(): Record<string, unknown>;
  clock: Clock;
}

/**
 * The provider path of a cluster no parent manages (SPEC 14.4): the platform's provider workflow for the
 * cluster's `initialDeployment.cloud`, or that provider's `create` / `terminate` endpoints, with what the
 * manager's `createServer` sends (SPEC 13.4): the new server's id, the cluster, the organization, the deployment
 * and its startup config. So the built-in `local` provider starts a server that joins this cluster.
 *
 * The new server's record is written `starting` before the provider is asked: it counts toward the cluster's
 * size at once, so the next evaluation does not ask again. A refused request deletes it (nothing was made);
 * an accepted one records the provider's `infrastructure` (cloud, instance id), which the termination names.
 * Those writes carry the scale-out's term: once a later holder of the lease claimed the record, they are refused,
 * and the instance the provider made is named in the error (the new holder sees a server that never confirms).
 */
export function unmanagedProviderPath(deps: UnmanagedPathDeps): { create(fence: Fence): Promise<string>; terminate(serverId: string): Promise<void> } {
  const platformOf = async () => {
    const platform = await deps.platformOrganization();
    if (!platform) throw new Error(`this server has no platform organization to ask a provider for cluster ${deps.cluster}`);
    return platform;
  };
  const deploymentOf = async () => {
    const deployment = (await deps.clusterDocument())?.initialDeployment;
    if (typeof deployment?.cloud !== 'string' || !deployment.cloud) throw new Error(`cluster ${deps.cluster} names no initialDeployment.cloud to ask a provider`);
    return { ...deployment, cloud: deployment.cloud };
  };

  return {
    async create(fence) {
      const [platform, deployment] = await Promise.all([platformOf(), deploymentOf()]);
      const serverId = newId();
      await deps.records.insertStarting(serverId, platform, new Date(deps.clock.now()).toISOString(), fence);
      let reply: unknown;
      try {
        reply = await deps.provider.create({
          organization_id: platform,
          cloud: deployment.cloud,
          data: {
            server_id: serverId,
            cluster_id: deps.cluster,
            organization_id: platform,
            deployment,
            startup: { ...deps.startup(), server: { id: serverId, cluster: deps.cluster, organization: platform } },
          },
        });
      } catch (error) {
        if ((await deps.records.deleteStarting(serverId, fence)) === 'refused') throw new FencedWriteRefused(fence, `deleting the record of ${serverId}, whose creation failed (${(error as Error).message}),`);
        throw error;
      }
      const instanceId = (reply as { instanceId?: unknown } | null)?.instanceId;
      const named = typeof instanceId === 'string' && instanceId !== '';
      const outcome = await deps.records.recordInfrastructure(serverId, { cloud: deployment.cloud, ...(named ? { instanceId } : {}) }, fence);
      if (outcome === 'refused') throw new FencedWriteRefused(fence, `recording instance ${named ? instanceId : '(unnamed)'} of provider "${deployment.cloud}" in the record of ${serverId}`);
      if (!named) throw new Error(`provider "${deployment.cloud}" answered the creation of ${serverId} without an instanceId`);
      return serverId;
    },

    async terminate(serverId) {
      const record = await deps.servers().findOne({ _id: serverId, cluster_id: deps.cluster }, { projection: { infrastructure: 1 } });
      const infrastructure = record?.infrastructure;
      const platform = await platformOf();
      // The cloud that made the server; the cluster's own for a record without one (a server started by hand).
      const cloud = typeof infrastructure?.cloud === 'string' && infrastructure.cloud ? infrastructure.cloud : (await deploymentOf()).cloud;
      const instanceId = typeof infrastructure?.instanceId === 'string' ? infrastructure.instanceId : undefined;
      await deps.provider.terminate({ organization_id: platform, cloud, data: { server_id: serverId, cluster_id: deps.cluster, ...(instanceId ? { instanceId } : {}) } });
    },
  };
}
