import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { Store } from '../db/types.js';
import type { Authorizer } from '../auth/authorize.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { ProcessFacade } from '../runtime/process-facade.js';
import type { PrimaryRuntime } from '../runtime/primary.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import type { PrimaryChannels, WorkerEndpoint } from '../runtime/channels.js';
import type { ClusterStorage } from '../storage/index.js';
import { systemClock } from '../runtime/clock.js';
import { HandlerRegistry } from '../ipc/handlers.js';
import { IpcError } from '../ipc/envelope.js';
import { IpcRouter } from '../ipc/router.js';
import { IpcClient } from '../ipc/client.js';
import { ServerState } from '../state/state.js';
import { registerBuiltins } from '../state/builtins.js';
import { OrganizationTracker, type OrganizationPresence } from '../state/organizations.js';
import type { Envelopes, ServerIdentity } from '../server.js';
import type { Manager } from '../manager/manager.js';
import { FLEETPLANE_VERSION } from '../version.js';

const ORG_CHANNEL = 'org';
const OrgReport = Type.Object({ kind: Type.Union([Type.Literal('touch'), Type.Literal('open'), Type.Literal('close')]), organization_id: Type.String({ minLength: 1, maxLength: 128 }) });
const OrgNotice = Type.Object({ kind: Type.Union([Type.Literal('active'), Type.Literal('inactive')]), organization_id: Type.String() });

/** What the IPC layer of either process is built from. */
export interface IpcDeps {
  identity: ServerIdentity;
  events: ServerEmitter;
  host: ProcessFacade;
  db: Store;
  authorize: Authorizer;
  storage: ClusterStorage;
  /** SPEC 13.2: told of each saved inventory section, to mirror it to the parent. */
  manager?: Pick<Manager, 'mirrorSave'>;
}

export interface ProcessIpc {
  envelopes: Envelopes;
  organizations: OrganizationPresence;
  state: ServerState;
}

/** The state controls see the process through its host, plus the store that records the inventory. */
function openState(deps: IpcDeps, channels?: PrimaryChannels): ServerState {
  const { identity, host, db, authorize, manager, events } = deps;
  return new ServerState(
    {
      id: identity.id,
      config: identity.config,
      log: identity.log,
      get status() {
        return host.status;
      },
      primaryRuntime: host.primaryRuntime,
      workerRuntime: host.workerRuntime,
      db,
      authorize,
      manager,
      events,
    },
    channels,
  );
}

/** The primary's IPC router, state controls and organization map (SPEC 5, 3, 5.5). */
export function primaryIpc(
  deps: IpcDeps,
  primary: PrimaryRuntime,
  channels: PrimaryChannels,
  local: WorkerRuntime | undefined,
): ProcessIpc & { router: IpcRouter; presence: OrganizationTracker['describe'] } {
  const { identity, events, authorize } = deps;
  const { id, config, log } = identity;
  const handlers = new HandlerRegistry();
  const tracker = new OrganizationTracker(systemClock, config.organizations.graceMs, {
    active: (organization_id) => {
      events.emitSafe('organization.active', { organization_id });
      channels.broadcast(ORG_CHANNEL, { kind: 'active', organization_id });
    },
    inactive: (organization_id) => {
      log.info({ organization: organization_id }, 'organization inactive');
      authorize.directory.forgetOrganization(organization_id);
      events.emitSafe('organization.inactive', { organization_id });
      channels.broadcast(ORG_CHANNEL, { kind: 'inactive', organization_id });
    },
  });
  channels.on(ORG_CHANNEL, (from, payload) => {
    if (!Value.Check(OrgReport, payload)) return;
    if (payload.kind === 'touch') tracker.touch(payload.organization_id, from.workerId);
    else if (payload.kind === 'open') tracker.socketOpened(payload.organization_id, from.workerId);
    else tracker.socketClosed(payload.organization_id, from.workerId);
  });
  channels.onDisconnect((endpoint) => tracker.workerGone(endpoint.workerId));

  // Endpoints that take envelopes: started, not retiring. Recomputed per envelope from a short list.
  const eligible = (): WorkerEndpoint[] => {
    if (local) return channels.endpoints();
    const endpoints: WorkerEndpoint[] = [];
    for (const record of primary.workers) {
      if (record.readyAt !== undefined && !record.retiring && record.endpoint.connected) endpoints.push(record.endpoint);
    }
    return endpoints;
  };
  const router = new IpcRouter({
    serverId: id,
    cluster: config.server.cluster,
    channels,
    handlers,
    log,
    maxEnvelopeBytes: config.ipc.maxEnvelopeBytes,
    view: () => ({
      serverId: id,
      cluster: config.server.cluster,
      singleProcess: Boolean(local),
      workers: eligible()
        .map((endpoint) => endpoint.workerId)
        .sort((a, b) => a - b),
      serves: (workerId, organizationId) => tracker.workersServing(organizationId).has(workerId),
    }),
    endpointOf: (workerId) => eligible().find((endpoint) => endpoint.workerId === workerId),
  });

  const state = openState(deps, channels);
  primary.handleWorkerRpc('primary.shed', (params) => state.applyShed((params as { organizations: string[] }).organizations));
  primary.handleWorkerRpc('primary.workerState', (params, from) => {
    const { action, value } = (params ?? {}) as { action?: unknown; value?: unknown };
    if ((action !== 'cordon' && action !== 'drain') || typeof value !== 'boolean') throw new IpcError('bad_request', 'a worker state change needs action cordon|drain and a boolean value');
    return primary.setWorkerState(action, value, from.slot);
  });
  registerBuiltins(handlers, {
    id,
    workerId: 0,
    isPrimary: true,
    state,
    storage: deps.storage,
    describe: () => ({
      worker: 0,
      pid: process.pid,
      status: String(primary.status),
      uptimeMs: Date.now() - primary.startedAt,
      connections: local?.connections.size ?? 0,
      // The code this primary runs and since when: after a hand-over, the new version and its start.
      version: FLEETPLANE_VERSION,
      startedAt: new Date(primary.startedAt).toISOString(),
    }),
  });
  // Single-process mode: the in-process worker answers deliveries to worker 0 with the same handlers.
  if (local) new IpcClient(local, handlers, config.ipc.maxEnvelopeBytes);

  return {
    router,
    state,
    presence: () => tracker.describe(),
    envelopes: {
      send: (envelope) => router.route(envelope, { wantReplies: false }).then(() => undefined),
      request: (envelope, timeoutMs) => router.route(envelope, { wantReplies: true, timeoutMs: timeoutMs ?? config.ipc.requestTimeoutMs }),
      handle: (method, handler) => handlers.handle(method, handler),
    },
    organizations: {
      touch: (organizationId) => tracker.touch(organizationId, 0),
      socketOpened: (organizationId) => tracker.socketOpened(organizationId, 0),
      socketClosed: (organizationId) => tracker.socketClosed(organizationId, 0),
      active: () => tracker.active(),
    },
  };
}

/** A worker's IPC client, state controls and organization reports. */
export function workerIpc(deps: IpcDeps, runtime: WorkerRuntime): ProcessIpc {
  const { identity, events, authorize } = deps;
  const { config } = identity;
  const handlers = new HandlerRegistry();
  const client = new IpcClient(runtime, handlers, config.ipc.maxEnvelopeBytes);
  const state = openState(deps);
  registerBuiltins(handlers, { id: identity.id, workerId: runtime.workerId, isPrimary: false, state, storage: deps.storage, describe: () => runtime.describe() });

  const seen = new Set<string>();
  const report = (kind: 'touch' | 'open' | 'close', organization_id: string) => runtime.sendChannel(ORG_CHANNEL, { kind, organization_id });
  runtime.onChannel(ORG_CHANNEL, (payload) => {
    if (!Value.Check(OrgNotice, payload)) return;
    if (payload.kind === 'inactive') {
      // Report again on the next request: the primary forgot the organization with its grace period.
      seen.delete(payload.organization_id);
      authorize.directory.forgetOrganization(payload.organization_id);
      events.emitSafe('organization.inactive', { organization_id: payload.organization_id });
    } else {
      events.emitSafe('organization.active', { organization_id: payload.organization_id });
    }
  });

  return {
    state,
    envelopes: {
      send: (envelope) => client.send(envelope),
      request: (envelope, timeoutMs) => client.request(envelope, timeoutMs ?? config.ipc.requestTimeoutMs),
      handle: (method, handler) => handlers.handle(method, handler),
    },
    organizations: {
      touch: (organizationId) => {
        if (seen.has(organizationId)) return;
        seen.add(organizationId);
        report('touch', organizationId);
      },
      socketOpened: (organizationId) => {
        seen.add(organizationId);
        report('open', organizationId);
      },
      socketClosed: (organizationId) => report('close', organizationId),
      active: () => [...seen],
    },
  };
}
