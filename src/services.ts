import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { Server } from './server.js';
import type { PrimaryRuntime } from './runtime/primary.js';
import type { WorkerRuntime } from './runtime/worker.js';
import type { PrimaryChannels, WorkerEndpoint } from './runtime/channels.js';
import { systemClock } from './runtime/clock.js';
import { HandlerRegistry } from './ipc/handlers.js';
import { IpcError } from './ipc/envelope.js';
import { IpcRouter } from './ipc/router.js';
import { IpcClient } from './ipc/client.js';
import { ServerState } from './state/state.js';
import { registerBuiltins } from './state/builtins.js';
import { OrganizationTracker } from './state/organizations.js';

const ORG_CHANNEL = 'org';
const OrgReport = Type.Object({ kind: Type.Union([Type.Literal('touch'), Type.Literal('open'), Type.Literal('close')]), organization_id: Type.String({ minLength: 1, maxLength: 128 }) });
const OrgNotice = Type.Object({ kind: Type.Union([Type.Literal('active'), Type.Literal('inactive')]), organization_id: Type.String() });

/** How request handlers report organizations to the primary's organization map (SPEC 5.5). */
export interface OrganizationPresence {
  /** A request of this organization was served here. */
  touch(organizationId: string): void;
  socketOpened(organizationId: string): void;
  socketClosed(organizationId: string): void;
  /** Organizations active on this server (primary) or seen by this worker. */
  active(): string[];
}

/** The primary's IPC router, state controls and organization map, wired onto the server object. */
export function attachPrimaryServices(server: Server, primary: PrimaryRuntime, channels: PrimaryChannels, local?: WorkerRuntime): IpcRouter {
  const { config } = server;
  const handlers = new HandlerRegistry();
  const tracker = new OrganizationTracker(systemClock, config.organizations.graceMs, {
    active: (organization_id) => {
      server.emitSafe('organization.active', { organization_id });
      channels.broadcast(ORG_CHANNEL, { kind: 'active', organization_id });
    },
    inactive: (organization_id) => {
      server.log.info({ organization: organization_id }, 'organization inactive');
      server.authorize?.directory.forgetOrganization(organization_id);
      server.emitSafe('organization.inactive', { organization_id });
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
    for (const record of primary.fleet!.records) {
      if (record.readyAt !== undefined && !record.retiring && record.endpoint.connected) endpoints.push(record.endpoint);
    }
    return endpoints;
  };
  const router = new IpcRouter({
    serverId: server.id,
    cluster: config.server.cluster,
    channels,
    handlers,
    log: server.log,
    maxEnvelopeBytes: config.ipc.maxEnvelopeBytes,
    view: () => ({
      serverId: server.id,
      cluster: config.server.cluster,
      singleProcess: Boolean(local),
      workers: eligible()
        .map((endpoint) => endpoint.workerId)
        .sort((a, b) => a - b),
      serves: (workerId, organizationId) => tracker.workersServing(organizationId).has(workerId),
    }),
    endpointOf: (workerId) => eligible().find((endpoint) => endpoint.workerId === workerId),
  });

  const state = new ServerState(server, channels);
  primary.handleWorkerRpc('primary.shed', (params) => state.applyShed((params as { organizations: string[] }).organizations));
  primary.handleWorkerRpc('primary.workerState', (params, from) => {
    const { action, value } = (params ?? {}) as { action?: unknown; value?: unknown };
    if ((action !== 'cordon' && action !== 'drain') || typeof value !== 'boolean') throw new IpcError('bad_request', 'a worker state change needs action cordon|drain and a boolean value');
    return primary.setWorkerState(action, value, from.slot);
  });
  registerBuiltins(handlers, {
    id: server.id,
    workerId: 0,
    isPrimary: true,
    state,
    storage: server.storage,
    describe: () => ({
      worker: 0,
      pid: process.pid,
      status: String(primary.status),
      uptimeMs: Date.now() - primary.startedAt,
      connections: local?.connections.size ?? 0,
    }),
  });
  // Single-process mode: the in-process worker answers deliveries to worker 0 with the same handlers.
  if (local) new IpcClient(local, handlers, config.ipc.maxEnvelopeBytes);

  server.attachServices({
    handlers,
    state,
    send: (envelope) => router.route(envelope, { wantReplies: false }).then(() => undefined),
    request: (envelope, timeoutMs) => router.route(envelope, { wantReplies: true, timeoutMs: timeoutMs ?? config.ipc.requestTimeoutMs }),
    organizations: {
      touch: (id) => tracker.touch(id, 0),
      socketOpened: (id) => tracker.socketOpened(id, 0),
      socketClosed: (id) => tracker.socketClosed(id, 0),
      active: () => tracker.active(),
    },
  });
  return router;
}

/** A worker's IPC client, state controls and organization reports. */
export function attachWorkerServices(server: Server, runtime: WorkerRuntime): void {
  const { config } = server;
  const handlers = new HandlerRegistry();
  const client = new IpcClient(runtime, handlers, config.ipc.maxEnvelopeBytes);
  const state = new ServerState(server);
  registerBuiltins(handlers, { id: server.id, workerId: runtime.workerId, isPrimary: false, state, storage: server.storage, describe: () => runtime.describe() });

  const seen = new Set<string>();
  const report = (kind: 'touch' | 'open' | 'close', organization_id: string) => runtime.sendChannel(ORG_CHANNEL, { kind, organization_id });
  runtime.onChannel(ORG_CHANNEL, (payload) => {
    if (!Value.Check(OrgNotice, payload)) return;
    if (payload.kind === 'inactive') {
      // Report again on the next request: the primary forgot the organization with its grace period.
      seen.delete(payload.organization_id);
      server.authorize?.directory.forgetOrganization(payload.organization_id);
      server.emitSafe('organization.inactive', { organization_id: payload.organization_id });
    } else {
      server.emitSafe('organization.active', { organization_id: payload.organization_id });
    }
  });

  server.attachServices({
    handlers,
    state,
    send: (envelope) => client.send(envelope),
    request: (envelope, timeoutMs) => client.request(envelope, timeoutMs ?? config.ipc.requestTimeoutMs),
    organizations: {
      touch: (id) => {
        if (seen.has(id)) return;
        seen.add(id);
        report('touch', id);
      },
      socketOpened: (id) => {
        seen.add(id);
        report('open', id);
      },
      socketClosed: (id) => report('close', id),
      active: () => [...seen],
    },
  });
}
