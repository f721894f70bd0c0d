import type { Store } from '../db/types.js';
import { clusterRecords } from '../inventory/records.js';
import { countRunning } from '../inventory/servers.js';
import type { CreateServerInput } from './fleet.js';
import type { ManagerLog } from './log.js';

export interface ActivationDeps {
  store: Store;
  platformOrganization: string;
  createServer(input: CreateServerInput): Promise<unknown>;
  log: ManagerLog;
}

/**
 * "Platform organization activation": when a tenant organization becomes active on the platform, its
 * organization cluster (`manager.for` = the tenant, `manager.organization_id` = the platform) gets a server
 * unless one of its servers is `running`. Servers in any other state (starting, failed, terminating) do not
 * count and are left alone. One creation per cluster at a time in this process: a burst of activations while
 * the first creation runs adds none.
 */
export class PlatformActivation {
  private readonly creating = new Set<string>();

  constructor(private readonly deps: ActivationDeps) {}

  /** For `organization.active`; never throws (an event listener must not take the process down). */
  async organizationActive(organizationId: string): Promise<'created' | 'running' | 'unmanaged' | 'busy' | 'failed'> {
    const scope = this.deps.store.forOrganization(this.deps.platformOrganization);
    try {
      if (organizationId === this.deps.platformOrganization) return 'unmanaged';
      const cluster = await clusterRecords(scope).findOne({ 'manager.for': organizationId, 'manager.organization_id': this.deps.platformOrganization });
      if (!cluster) return 'unmanaged';
      if (this.creating.has(cluster._id)) return 'busy';
      const running = await countRunning(scope, cluster._id);
      if (running > 0) return 'running';
      this.creating.add(cluster._id);
      try {
        await this.deps.createServer({ cluster });
      } finally {
        this.creating.delete(cluster._id);
      }
      return 'created';
    } catch (error) {
      this.deps.log.warn({ organization: organizationId, reason: error instanceof Error ? error.message : String(error) }, 'creating a server for an activated organization failed');
      return 'failed';
    }
  }
}
