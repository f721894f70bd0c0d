import { ApiError } from '../api/errors.js';
import type { Store } from '../db/types.js';
import { newId } from '../db/ids.js';
import { clusterRecords, serverRecords, type ClusterRecord, type Deployment } from '../inventory/records.js';
import { serverStatus } from '../inventory/servers.js';
import type { Clock } from '../runtime/clock.js';
import { TerminationCleanup } from './cleanup.js';
import { MANAGER_ERRORS, ManagerError } from './errors.js';
import type { ManagerLog } from './log.js';
import type { ProviderPort } from './provider-port.js';
import { StartupWatchdog } from './watchdog.js';

export interface CreateServerInput {
  cluster: ClusterRecord;
  deployment?: Deployment;
  /** Default: a new id. */
  serverId?: string;
}

export interface CreateServerResult {
  server_id: string;
  cluster_id: string;
  instanceId: string;
  status: string;
}

export interface TerminateServerInput {
  cluster: ClusterRecord;
  serverId: string;
  deployment?: Deployment;
}

export interface TerminateServerResult {
  server_id: string;
  status: 'terminating';
  /** The provider's answer (the local provider's names the exit code). */
  provider: unknown;
}

/** Keys the parent gives the servers it creates, so their envelopes to `/manager` are bound to their cluster. */
export interface ServerKeys {
  issue(serverId: string, clusterId: string): Promise<{ key_id: string; key: string }>;
  revoke(keyId: string): Promise<void>;
}

export interface FleetDeps {
  /** The parent's own store; records are written in the platform organization's scope. */
  store: Store;
  platformOrganization: string;
  /** The host (or URL) the created servers reach the parent at. */
  parentHost: string;
  /** The tenant cluster's store, where the tenant copy lives; undefined when the cluster names none. */
  tenantStore(cluster: ClusterRecord): Promise<Store | undefined>;
  provider: ProviderPort;
  keys: ServerKeys;
  clock: Clock;
  log: ManagerLog;
  startupTimeoutMs: number;
  cleanupDelayMs: number;
}

/**
 * SPEC 13.3: the parent's `createServer` and `terminateServer`. Both inventories (the platform's and the tenant
 * cluster's) hold the same server and cluster ids; every lifecycle status is written to both before the
 * provider is asked, so a provider that hangs or fails leaves records an operator can read.
 */
export class ManagedFleet {
  readonly watchdog: StartupWatchdog;
  readonly cleanup: TerminationCleanup;

  constructor(private readonly deps: FleetDeps) {
    this.watchdog = new StartupWatchdog({
      clock: deps.clock,
      timeoutMs: deps.startupTimeoutMs,
      log: deps.log,
      persistedStatus: (serverId) => serverStatus(this.platformScope(), serverId),
    });
    this.cleanup = new TerminationCleanup({ clock: deps.clock, delayMs: deps.cleanupDelayMs, log: deps.log, deleteServer: (serverId) => this.deleteServer(serverId) });
  }

  async createServer(input: CreateServerInput): Promise<CreateServerResult> {
    const { cluster } = input;
    const deployment = input.deployment ?? cluster.initialDeployment;
    if (!deployment || typeof deployment.cloud !== 'string' || !deployment.cloud) {
      throw MANAGER_ERRORS.invalidEnvelope('deployment: is required (or the cluster\'s initialDeployment), with a "cloud"');
    }
    const tenant = cluster.manager?.for;
    if (!tenant) throw MANAGER_ERRORS.invalidEnvelope(`cluster ${cluster._id} has no manager.for (the tenant organization it serves)`);
    const serverId = input.serverId ?? newId();
    const key = await this.deps.keys.issue(serverId, cluster._id);
    const startedAt = new Date(this.deps.clock.now()).toISOString();
    try {
      await this.createRecords(serverId, cluster, tenant, key.key_id, deployment, startedAt);
    } catch (error) {
      await this.deps.keys.revoke(key.key_id).catch(() => undefined);
      throw error;
    }
    let instanceId: string;
    try {
      const reply = await this.deps.provider.create({
        organization_id: this.deps.platformOrganization,
        cloud: deployment.cloud,
        data: {
          server_id: serverId,
          cluster_id: cluster._id,
          organization_id: tenant,
          deployment,
          startup: this.startupConfig(serverId, cluster, tenant, key.key),
        },
      });
      instanceId = instanceIdOf(reply);
    } catch (error) {
      await this.markBoth(serverId, cluster, { 'master.status': 'failed' });
      await this.deps.keys.revoke(key.key_id).catch(() => undefined);
      throw this.providerFailure('create', serverId, deployment.cloud, error);
    }
    const patch = { 'infrastructure.cloud': deployment.cloud, 'infrastructure.instanceId': instanceId };
    await this.markBoth(serverId, cluster, patch);
    this.watchdog.watch(serverId);
    this.deps.log.info({ server: serverId, cluster: cluster._id, cloud: deployment.cloud, instanceId }, 'managed server created; waiting for it to confirm');
    return { server_id: serverId, cluster_id: cluster._id, instanceId, status: 'starting' };
  }

  async terminateServer(input: TerminateServerInput): Promise<TerminateServerResult> {
    const { cluster, serverId } = input;
    const record = await this.platformServers().findOne({ _id: serverId, cluster_id: cluster._id });
    if (!record) throw MANAGER_ERRORS.unknownServer(`cluster ${cluster._id} has no server ${serverId}`);
    const cloud = input.deployment?.cloud ?? record.infrastructure?.cloud;
    const instanceId = record.infrastructure?.instanceId;
    if (!cloud || !instanceId) throw MANAGER_ERRORS.unknownServer(`server ${serverId} has no provider instance to terminate`);
    await this.markBoth(serverId, cluster, { 'master.status': 'terminating' });
    let answer: unknown;
    try {
      answer = await this.deps.provider.terminate({
        organization_id: this.deps.platformOrganization,
        cloud,
        data: { server_id: serverId, cluster_id: cluster._id, instanceId, ...(input.deployment ? { deployment: input.deployment } : {}) },
      });
    } catch (error) {
      await this.markBoth(serverId, cluster, { 'master.status': 'failed' });
      this.cleanup.failed(serverId);
      throw this.providerFailure('terminate', serverId, cloud, error);
    }
    this.cleanup.terminating(serverId);
    this.deps.log.info({ server: serverId, cluster: cluster._id, cloud, instanceId }, 'managed server terminating');
    return { server_id: serverId, status: 'terminating', provider: answer ?? null };
  }

  /** A `/manager` update of a server's `master.status` persisted on the parent. */
  statusPersisted(serverId: string, status: unknown): void {
    if (status === 'running') this.watchdog.confirmed(serverId);
    else if (status === 'terminating') this.cleanup.terminating(serverId);
    else if (status === 'failed') this.cleanup.failed(serverId);
  }

  close(): void {
    this.watchdog.close();
    this.cleanup.close();
  }

  /** Deletes both copies of a server's record and its key; records already gone count as deleted. */
  async deleteServer(serverId: string): Promise<void> {
    const record = await this.platformServers().findOne({ _id: serverId });
    if (!record) return;
    const cluster = record.cluster_id ? await this.clusters().findOne({ _id: record.cluster_id }) : null;
    const tenantStore = cluster ? await this.deps.tenantStore(cluster) : undefined;
    if (tenantStore) await serverRecords(tenantStore).deleteOne({ _id: serverId });
    await this.platformServers().deleteOne({ _id: serverId });
    const keyId = record.manager?.key_id;
    if (typeof keyId === 'string' && keyId) await this.deps.keys.revoke(keyId);
  }

  /** The platform copy and the tenant copy (same ids), both `starting`, before any provider is asked. */
  private async createRecords(serverId: string, cluster: ClusterRecord, tenant: string, keyId: string, deployment: Deployment, startedAt: string): Promise<void> {
    const tenantStore = await this.deps.tenantStore(cluster);
    await this.platformServers().insertOne({
      _id: serverId,
      cluster_id: cluster._id,
      master: { status: 'starting', createdAt: startedAt },
      deployment,
      manager: { key_id: keyId, for: tenant },
    });
    if (!tenantStore) return;
    await serverRecords(tenantStore).updateOne(
      { _id: serverId },
      { $set: { organization_id: tenant, cluster_id: cluster._id, 'master.status': 'starting', 'master.createdAt': startedAt, manager: { organization_id: this.deps.platformOrganization, host: this.deps.parentHost } } },
      { upsert: true },
    );
  }

  /**
   * The new server's configuration, in the shape of a Fleetplane config file: a provider writes it as the
   * server's `fleetplane.config.json` (mode 0600). It holds the server's key and the mesh secret.
   */
  private startupConfig(serverId: string, cluster: ClusterRecord, tenant: string, apiKey: string): Record<string, unknown> {
    const store = cluster.store;
    return {
      server: { id: serverId, cluster: cluster._id, organization: tenant },
      manager: { organizationId: this.deps.platformOrganization, host: this.deps.parentHost, apiKey },
      ...(cluster.mesh?.secret ? { mesh: { secret: cluster.mesh.secret } } : {}),
      ...(store?.mongodbUrl ? { mongodb: { url: store.mongodbUrl, ...(store.database ? { database: store.database } : {}) } } : store?.path ? { db: { path: store.path } } : {}),
    };
  }

  private async markBoth(serverId: string, cluster: ClusterRecord, set: Record<string, unknown>): Promise<void> {
    await this.platformServers().updateOne({ _id: serverId }, { $set: set });
    const tenantStore = await this.deps.tenantStore(cluster);
    if (tenantStore) await serverRecords(tenantStore).updateOne({ _id: serverId }, { $set: set });
  }

  private providerFailure(action: string, serverId: string, cloud: string, error: unknown): ManagerError {
    const reason = error instanceof Error ? error.message : String(error);
    this.deps.log.error({ server: serverId, cloud, action, reason }, `the provider did not ${action} the managed server`);
    if (error instanceof ManagerError) return error;
    // The provider's own refusals are the platform's configuration to read; anything else stays in the log.
    const shown = error instanceof ApiError ? `: ${reason}` : '';
    return MANAGER_ERRORS.providerFailed(`provider "${cloud}" could not ${action} server ${serverId}${shown}`).withCause(error);
  }

  private platformScope() {
    return this.deps.store.forOrganization(this.deps.platformOrganization);
  }

  private platformServers() {
    return serverRecords(this.platformScope());
  }

  private clusters() {
    return clusterRecords(this.platformScope());
  }
}

/** The provider's reply must name the instance it made; anything else is a failed creation. */
function instanceIdOf(reply: unknown): string {
  const given = typeof reply === 'object' && reply !== null ? (reply as { instanceId?: unknown }).instanceId : undefined;
  // Clouds number their servers; the id is kept as text either way.
  const id = typeof given === 'number' && Number.isSafeInteger(given) && given >= 0 ? String(given) : given;
  if (typeof id !== 'string' || id.length === 0 || id.length > 256) {
    throw MANAGER_ERRORS.providerInvalidReply();
  }
  return id;
}
