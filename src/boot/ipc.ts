import type { Store } from '../db/types.js';
import type { Authorizer } from '../auth/authorize.js';
import { customEvents, type ServerEmitter } from '../runtime/events.js';
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
import { primaryOrganizationMap, workerOrganizationReports } from '../state/organization-map.js';
import type { OrganizationPresence, OrganizationTracker } from '../state/organizations.js';
import type { Envelopes, ServerIdentity } from '../server.js';
import type { Manager } from '../manager/manager.js';
import { FLEETPLANE_VERSION } from '../version.js';

/** What the IPC layer of either process is built from. */
export interface IpcDeps {
  identity: ServerIdentity;
  events: ServerEmitter;
  authorize: Authorizer;
}

/** What the state controls of either process are built from, besides that process's IPC. */
export interface StateDeps extends IpcDeps {
  facade: ProcessFacade;
  db: Store;
  storage: ClusterStorage;
  /** SPEC 13.2: told of each saved inventory section, to mirror it to the parent. */
  manager?: Pick<Manager, 'mirrorSave'>;
}

/** A process's envelopes (SPEC 5) and its reports to the organization map (SPEC 5.5). */
export interface ProcessIpc {
  envelopes: Envelopes;
  organizations: OrganizationPresence;
  /** Where the built-in methods and the services' handlers are registered. */
  handlers: HandlerRegistry;
}

/** The state controls see the process through its facade, plus the store that records the inventory. */
function openState(deps: StateDeps, channels?: PrimaryChannels): ServerState {
  const { identity, facade, db, authorize, manager, events } = deps;
  return new ServerState(
    {
      id: identity.id,
      config: identity.config,
      log: identity.log,
      get status() {
        return facade.status;
      },
      primaryRuntime: facade.primaryRuntime,
      workerRuntime: facade.workerRuntime,
      db,
      authorize,
      manager,
      events,
    },
    channels,
  );
}

/** Every worker slot of the fleet, whether its worker is ready, starting, waiting for a restart or retiring. */
function workerSlots(primary: PrimaryRuntime): number[] {
  const slots = new Set(Array.from({ length: primary.workerCount }, (_, index) => index + 1));
  for (const record of primary.workers) slots.add(record.slot);
  return [...slots].sort((a, b) => a - b);
}

/** The primary's IPC router and organization map (SPEC 5, 5.5). */
export function primaryIpc(
  deps: IpcDeps,
  primary: PrimaryRuntime,
  channels: PrimaryChannels,
  local: WorkerRuntime | undefined,
): ProcessIpc & { router: IpcRouter; presence: OrganizationTracker['describe'] } {
  const { identity, events, authorize } = deps;
  const { id, config, log } = identity;
  const handlers = new HandlerRegistry(customEvents(events));
  const organizations = primaryOrganizationMap({
    channels, answer: primary.answerWorkers, clock: systemClock, graceMs: config.organizations.graceMs, log, events, forget: (organizationId) => authorize.directory.forgetOrganization(organizationId),
  });
  const { tracker } = organizations;

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
      existing: local ? [0] : workerSlots(primary),
    }),
    endpointOf: (workerId) => eligible().find((endpoint) => endpoint.workerId === workerId),
    answerWorkers: primary.answerWorkers,
  });
  // Single-process mode: the in-process worker answers deliveries to worker 0 with the same handlers.
  if (local) new IpcClient(local, handlers, config.ipc.maxEnvelopeBytes);

  return {
    router,
    handlers,
    presence: () => tracker.describe(),
    envelopes: {
      send: (envelope) => router.route(envelope, { wantReplies: false }).then(() => undefined),
      request: (envelope, timeoutMs) => router.route(envelope, { wantReplies: true, timeoutMs: timeoutMs ?? config.ipc.requestTimeoutMs }),
      handle: (method, handler) => handlers.handle(method, handler),
    },
    organizations: organizations.presence,
  };
}

/** The primary's state controls (SPEC 3): the built-in methods, and the workers' shed and state changes. */
export function primaryState(deps: StateDeps, primary: PrimaryRuntime, channels: PrimaryChannels, ipc: ProcessIpc, local: WorkerRuntime | undefined): ServerState {
  const { id } = deps.identity;
  const state = openState(deps, channels);
  primary.handleWorkerRpc('primary.shed', (params) => state.applyShed((params as { organizations: string[] }).organizations));
  primary.handleWorkerRpc('primary.workerState', (params, from) => {
    const { action, value, whenAccepted } = (params ?? {}) as { action?: unknown; value?: unknown; whenAccepted?: unknown };
    if ((action !== 'cordon' && action !== 'drain') || typeof value !== 'boolean') throw new IpcError('bad_request', 'a worker state change needs action cordon|drain and a boolean value');
    return whenAccepted === true ? primary.acceptWorkerState(action, value, from.slot) : primary.setWorkerState(action, value, from.slot);
  });
  registerBuiltins(ipc.handlers, {
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
  return state;
}

/** A worker's IPC client and organization reports. */
export function workerIpc(deps: IpcDeps, runtime: WorkerRuntime): ProcessIpc {
  const { identity, events, authorize } = deps;
  const { config } = identity;
  const handlers = new HandlerRegistry(customEvents(events));
  const client = new IpcClient(runtime, handlers, config.ipc.maxEnvelopeBytes);
  return {
    handlers,
    envelopes: {
      send: (envelope) => client.send(envelope),
      request: (envelope, timeoutMs) => client.request(envelope, timeoutMs ?? config.ipc.requestTimeoutMs),
      handle: (method, handler) => handlers.handle(method, handler),
    },
    organizations: workerOrganizationReports(runtime, { events, forget: (organizationId) => authorize.directory.forgetOrganization(organizationId) }),
  };
}

/** A worker's state controls (SPEC 3): the built-in methods over its own runtime. */
export function workerState(deps: StateDeps, runtime: WorkerRuntime, ipc: ProcessIpc): ServerState {
  const state = openState(deps);
  registerBuiltins(ipc.handlers, { id: deps.identity.id, workerId: runtime.workerId, isPrimary: false, state, storage: deps.storage, describe: () => runtime.describe() });
  return state;
}
