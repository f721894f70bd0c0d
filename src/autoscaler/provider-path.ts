import { newId } from '../db/ids.js';
import type { Collection } from '../db/types.js';
import type { ClusterRecord, ServerRecord } from '../inventory/records.js';
import type { ProviderPort } from '../manager/provider-port.js';
import type { Clock } from '../runtime/clock.js';

export interface UnmanagedPathDeps {
  cluster: string;
  servers(): Collection<ServerRecord>;
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
 */
export function unmanagedProviderPath(deps: UnmanagedPathDeps): { create(): Promise<string>; terminate(serverId: string): Promise<void> } {
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
    async create() {
      const [platform, deployment] = await Promise.all([platformOf(), deploymentOf()]);
      const serverId = newId();
      const servers = deps.servers();
      await servers.insertOne({ _id: serverId, cluster_id: deps.cluster, organization_id: platform, master: { status: 'starting', createdAt: new Date(deps.clock.now()).toISOString() } });
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
        await servers.deleteOne({ _id: serverId, 'master.status': 'starting' });
        throw error;
      }
      const instanceId = (reply as { instanceId?: unknown } | null)?.instanceId;
      if (typeof instanceId !== 'string' || !instanceId) {
        // Something may have been made that nobody can name: the record stays, failed, for an operator.
        await servers.updateOne({ _id: serverId }, { $set: { 'master.status': 'failed', 'infrastructure.cloud': deployment.cloud } });
        throw new Error(`provider "${deployment.cloud}" answered the creation of ${serverId} without an instanceId`);
      }
      await servers.updateOne({ _id: serverId }, { $set: { 'infrastructure.cloud': deployment.cloud, 'infrastructure.instanceId': instanceId } });
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
