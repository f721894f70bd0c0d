import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { Sample } from '../autoscaler/decide.js';
import { clusterNode } from '../autoscaler/inventory.js';
import { unmanagedProviderPath } from '../autoscaler/provider-path.js';
import { scaleActions } from '../autoscaler/actions.js';
import { Autoscaler } from '../autoscaler/service.js';
import { ServerSampler } from '../autoscaler/signals.js';
import type { ResolvedConfig } from '../config/schema.js';
import { StoreLease } from '../db/lease.js';
import { embeddedStorePath } from '../db/open.js';
import type { Store } from '../db/types.js';
import { deciderWrites } from '../inventory/decider-writes.js';
import { clusterOf, clusterRecords, serverRecords, type ClusterRecord } from '../inventory/records.js';
import { IpcError } from '../ipc/envelope.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { Manager } from '../manager/manager.js';
import type { ProviderPort } from '../manager/provider-port.js';
import type { Logger } from '../logging/logger.js';
import { systemClock } from '../runtime/clock.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { PrimaryMetrics } from '../runtime/primary-metrics.js';

export interface AutoscalerBootDeps {
  config: ResolvedConfig;
  serverId: string;
  log: Logger;
  db: Store;
  platformOrganization: () => Promise<string | null>;
  manager: Manager;
  /** The provider path an unmanaged cluster asks for servers (the manager services' one). */
  provider: ProviderPort;
  request: (envelope: unknown, timeoutMs?: number) => Promise<RequestResult>;
  handle: (method: string, handler: (data: unknown) => unknown) => void;
  events: Pick<ServerEmitter, 'on'>;
  metrics: Pick<PrimaryMetrics, 'autoscalerActions' | 'clusterSizeCurrent' | 'clusterSizeDesired'>;
  /** Told of each action decided and each pause or resume (the server's event journal). */
  notify?: (notice: { action: string; reason?: string }) => void;
}

/**
 * The decider lease lasts three intervals, and at least this long: a holder whose renewal is slowed by a busy host
 * or store keeps it; a holder that stops gracefully releases it at once, so only a crashed one is waited out.
 */
const LEASE_MIN_TTL_MS = 5_000;

const Samples = Type.Array(Type.Object({ at: Type.Number(), cpu: Type.Number(), memory: Type.Number() }), { maxItems: 3_600 });

/**
 * SPEC 14.4 in the primary: the `Autoscaler` over this server's store and the cluster's decider lease in it, the
 * envelope router (peers' signals, drain and removal of a node, answered through the mesh) and the provider
 * path: the parent's `createServer` / `terminateServer` when the server is managed, else the platform's provider
 * workflows or endpoints (`src/autoscaler/provider-path.ts`). Its envelope methods
 * (`autoscaler.signals|status|pause|resume`) are platform-only server methods; `autoscaler.remove`, which every
 * primary answers, is registered at boot whether the autoscaler runs or not (`src/autoscaler/removal.ts`).
 */
export function openAutoscaler(deps: AutoscalerBootDeps): Autoscaler {
  const { config, serverId, db, manager } = deps;
  const cluster = config.server.cluster;
  const log = deps.log.child({ component: 'autoscaler' });
  const pids = new Map<number, number>();
  deps.events.on('worker:ready', ({ workerId, pid }) => pids.set(workerId, pid));
  deps.events.on('worker:exit', ({ workerId, pid }) => {
    if (pids.get(workerId) === pid) pids.delete(workerId);
  });
  const sampler = new ServerSampler();
  const servers = () => serverRecords(db);
  const records = deciderWrites(db, cluster);
  const clusters = async () => {
    const platform = await deps.platformOrganization();
    return platform ? clusterRecords(db.forOrganization(platform)) : undefined;
  };
  const clusterDocument = async (): Promise<ClusterRecord | null> => (await (await clusters())?.findOne(clusterOf(cluster))) ?? null;
  const setPaused = async (paused: boolean) => {
    const document = await clusterDocument();
    if (!document || document.autoscaler === undefined) throw new IpcError('bad_request', `cluster ${cluster} has no autoscaler section in its document: there is nothing to ${paused ? 'pause' : 'resume'}`);
    await (await clusters())!.updateOne({ _id: document._id }, { $set: { 'autoscaler.paused': paused } });
  };

  // Scale to zero (SPEC 14.4) hears of the cluster's own organization only: the tenant a managed cluster serves,
  // else this server's platform organization. The organization map confirms it inactive once its last
  // WebSocket here closed and the grace period passed; any request or socket of it afterwards makes it active.
  let organizationInactive = false;
  const organizationChanged = (inactive: boolean) => ({ organization_id }: { organization_id: string }) => {
    // Read when an event comes (the platform organization is cached); a failed read is logged, never thrown.
    const own = config.server.organization ? Promise.resolve(config.server.organization) : deps.platformOrganization();
    void own.then(
      (organization) => {
        if (organization_id !== organization || organizationInactive === inactive) return;
        organizationInactive = inactive;
        log.info({ organization: organization_id }, `autoscaler: the cluster's organization is ${inactive ? 'inactive' : 'active again'}`);
      },
      (error: unknown) => log.warn({ err: error }, `autoscaler: the cluster's organization could not be read: ${(error as Error).message}`),
    );
  };
  deps.events.on('organization.inactive', organizationChanged(true));
  deps.events.on('organization.active', organizationChanged(false));
  const provider = unmanagedProviderPath({
    cluster,
    servers,
    records,
    provider: deps.provider,
    platformOrganization: deps.platformOrganization,
    clusterDocument,
    startup: () => newServerStartup(config),
    clock: systemClock,
  });
  const actions = scaleActions({
    cluster,
    manager,
    provider,
    request: deps.request,
    records,
    // A drain waits out the readiness grace and the connections' drain, as the node's own state does.
    drainTimeoutMs: config.lifecycle.readinessGraceMs + config.shutdown.drainTimeoutMs + 10_000,
    log,
  });

  // One decider per cluster, whatever each server's mesh sees (SPEC 14.4): renewed every third of its TTL.
  const lease = new StoreLease({
    store: db,
    name: `decider:${cluster}`,
    owner: serverId,
    ttlMs: Math.max(3 * config.autoscaler.intervalMs, LEASE_MIN_TTL_MS),
    maxClockSkewMs: config.autoscaler.maxClockSkewMs,
    clock: systemClock,
  });
  const scaler = new Autoscaler({
    serverId,
    clock: systemClock,
    lease,
    intervalMs: config.autoscaler.intervalMs,
    sweepIntervalMs: config.autoscaler.sweepIntervalMs,
    // As long as load balancers are given to notice a draining node, so are clients told by the inventory.
    removalNoticeMs: config.lifecycle.readinessGraceMs,
    sample: () => sampler.sample([process.pid, ...pids.values()]),
    inventory: {
      nodes: async () => (await servers().find({ cluster_id: cluster }, { limit: 0 })).map(clusterNode),
      policy: async () => (await clusterDocument())?.autoscaler,
      setPaused,
      organizationInactive: () => organizationInactive,
    },
    gather: async (ids) => {
      const result = await deps.request({ method: 'autoscaler.signals', server: [...ids], master: true }, Math.max(1_000, config.autoscaler.intervalMs));
      const signals = new Map<string, Sample[]>();
      // A peer whose answer is missing or malformed is left out: decide() then neither removes it nor scales out.
      for (const reply of result.replies) if (reply.ok && Value.Check(Samples, reply.result)) signals.set(reply.server, reply.result);
      return signals;
    },
    actions,
    log,
    metrics: {
      action: (action, reason) => {
        deps.metrics.autoscalerActions.inc({ action, reason });
        deps.notify?.({ action, reason });
      },
      size: (current, desired) => {
        deps.metrics.clusterSizeCurrent.set(current);
        deps.metrics.clusterSizeDesired.set(desired);
      },
    },
  });
  deps.handle('autoscaler.signals', () => scaler.signals());
  deps.handle('autoscaler.status', () => scaler.status());
  deps.handle('autoscaler.pause', async () => {
    const status = await scaler.pause();
    deps.notify?.({ action: 'paused' });
    return status;
  });
  deps.handle('autoscaler.resume', async () => {
    const status = await scaler.resume();
    deps.notify?.({ action: 'resumed' });
    return status;
  });
  return scaler;
}

/**
 * What a server this one asks a provider for needs to join its cluster: the mesh secret, the store (the file's
 * absolute path, or the PostgreSQL or MongoDB connection) and this server's autoscaler settings.
 */
function newServerStartup(config: ResolvedConfig): Record<string, unknown> {
  const { url, database } = config.mongodb;
  // Powering a host off is the operator's choice for each host, never handed on (it also needs host control there).
  const { powerOffOnRemoval: _hostChoice, ...autoscaler } = config.autoscaler;
  const store = config.postgres.url
    ? { postgres: { url: config.postgres.url } }
    : url
      ? { mongodb: { url, ...(database ? { database } : {}) } }
      : { db: { path: embeddedStorePath(config) } };
  return {
    ...(config.mesh.secret ? { mesh: { secret: config.mesh.secret } } : {}),
    ...store,
    autoscaler,
  };
}
