import { hostname } from 'node:os';
import type { ServerIdentity } from '../server.js';
import type { Store } from '../db/types.js';
import type { Authorizer } from '../auth/authorize.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { PrimaryRuntime } from '../runtime/primary.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import type { IpcRouter } from '../ipc/router.js';
import type { ServerState } from '../state/state.js';
import type { OrganizationPresence } from '../state/organizations.js';
import { Mesh, type MeshApi, type MeshMessage } from '../mesh/mesh.js';
import { SERVERS } from '../inventory/records.js';
import { runningPeers } from '../inventory/servers.js';
import { meshCloseCode, meshSettings, meshUrl, publicUrl } from '../mesh/settings.js';
import { onFleetReady } from '../lifecycle/startup-readiness.js';
import { IpcError } from '../ipc/envelope.js';
import type { SecretKeyring } from '../secrets/keyring.js';

export interface PrimaryMesh {
  readonly mesh: Mesh;
  /** After the HTTP ports are bound: record this server as running and start discovery. */
  join(): Promise<void>;
  /** Start-up failed after the mesh port was bound. */
  abort(): void;
}

/**
 * Builds the primary's mesh and wires it in: the router forwards through it, workers reach it over RPC,
 * organization changes are advertised, `state.save` writes the `master` inventory section it announces,
 * and shutdown closes every link with 1000 (or 1012 for a restart) once the workers are gone.
 */
export interface PrimaryMeshDeps {
  identity: ServerIdentity;
  events: ServerEmitter;
  primary: PrimaryRuntime;
  router: IpcRouter;
  db: Store;
  authorize: Authorizer;
  state: ServerState;
  organizations: OrganizationPresence;
  /** The mesh socket a hand-over passed: listened on rather than bound (SPEC 1.10). */
  inheritedSocket?: unknown;
  /** The keyring that seals the cluster CA's key (`mesh.tls.mode: "auto"`). */
  secrets: SecretKeyring;
  handle(method: string, handler: (data: unknown) => unknown): void;
}

export async function openPrimaryMesh(deps: PrimaryMeshDeps): Promise<PrimaryMesh> {
  const { identity, events, primary, router, db, authorize, state, organizations } = deps;
  const { config, log } = identity;
  let settings = meshSettings(config);
  const cluster = config.server.cluster;
  const startedAt = new Date().toISOString();
  const meshLog = log.child({ component: 'mesh' });
  // `mesh.tls.mode: "auto"`: the cluster's CA issues this server's certificate before the mesh port is bound.
  let mesh: Mesh | undefined;
  const certificates =
    settings.active && settings.auto
      ? await (await import('../tls/mesh-certificates.js')).MeshCertificates.start({
          store: db, secrets: deps.secrets, cluster, serverId: identity.id, lifetimeMs: config.mesh.tls.lifetimeMs, log: meshLog,
          renewed: (material) => mesh?.setTls(material),
          revocations: () => mesh?.recheckLinks(),
        })
      : undefined;
  if (certificates) {
    settings = { ...settings, tls: certificates.material };
    primary.onShutdown(() => certificates.close());
  }
  deps.handle('tls.revoke', (serial) => {
    if (!certificates) throw new IpcError('bad_request', 'mesh certificates are revoked in mesh.tls.mode "auto" only (with files, take the certificate out of the CA you manage)');
    return certificates.revoke(serial).catch((error: unknown) => {
      throw error instanceof TypeError ? new IpcError('bad_request', error.message) : error;
    });
  });
  mesh = new Mesh({
    serverId: identity.id,
    cluster,
    config: config.mesh,
    settings,
    log: meshLog,
    route: (envelope, options) => router.route(envelope, options),
    organizations: () => organizations.active(),
    publicUrl: () => publicUrl(config, primary.ports),
    advertisedUrl: (port) => meshUrl(config, port, Boolean(settings.tls)),
    discover: async () => runningPeers(db, identity.id, cluster, await authorize.directory.platformOrganization()),
    inventoryToken: () => db.changeToken([SERVERS]),
    peerCheck: certificates?.peerCheck,
  });
  router.forwarder = mesh;
  events.on('organization.active', ({ organization_id }) => mesh.organizationActive(organization_id));
  events.on('organization.inactive', ({ organization_id }) => mesh.organizationInactive(organization_id));
  primary.handleWorkerRpc('primary.mesh.send', (params) => mesh.send(params as MeshMessage));
  primary.handleWorkerRpc('primary.mesh.peers', () => mesh.peers());

  let leaving = false;
  let joined = false;
  // When the workers first all served: a `running` record may be seen before, while they still boot. The
  // autoscaler counts a server as confirmed from here (null until then; a record without it predates it).
  let servingSince: string | null = null;
  const stopListening = onFleetReady({ on: (event, listener) => events.on(event, listener), off: (event, listener) => events.off(event, listener), fleetHealth: () => primary.getFleetHealth() }, () => {
    if (servingSince !== null || leaving) return;
    servingSince = new Date().toISOString();
    if (joined) void state.save().catch((error: unknown) => meshLog.error({ err: error }, 'inventory record not marked serving'));
  });
  await mesh.listen(deps.inheritedSocket);
  state.describeInventory(() => ({
    // `stopping` covers the whole graceful shutdown: peers stop dialing a server that is leaving.
    status: leaving || primary.status === 'stopping' ? 'stopped' : 'running',
    pid: process.pid,
    hostname: hostname(),
    publicUrl: publicUrl(config, primary.ports),
    meshUrl: mesh.url ?? null,
    workers: primary.workerCount,
    startedAt,
    servingSince,
    updatedAt: new Date().toISOString(),
  }));

  primary.onShutdown(async () => {
    leaving = true;
    stopListening();
    mesh.beginShutdown();
    try {
      await state.save();
    } catch (error) {
      meshLog.error({ err: error }, 'inventory record not marked stopped');
    }
  });
  // Last step of the shutdown (SPEC 1.5): links carried envelopes while workers drained.
  events.on('shutdown:complete', ({ signal }) => mesh.close(meshCloseCode(signal)));

  return {
    mesh,
    async join() {
      joined = true;
      try {
        await state.save();
      } catch (error) {
        meshLog.error({ err: error }, 'inventory record not written: peers will not discover this server');
      }
      mesh.join();
      if (mesh.url) meshLog.info({ url: mesh.url, cluster }, 'mesh listening');
    },
    abort: () => mesh.close(1001),
  };
}

/** A worker's `server.mesh`: sends go through its primary, which holds the links; handlers live there too. */
export function workerMesh(runtime: WorkerRuntime): MeshApi {
  return {
    // The primary validates the message; the worker only needs a wait a little longer than the call's.
    send: (message) => runtime.rpc.call('primary.mesh.send', message, (typeof message?.timeoutMs === 'number' && message.timeoutMs > 0 ? Math.min(message.timeoutMs, 120_000) : 5_000) + 1_000),
    handle: () => {
      throw new Error('mesh handlers run in the primary: register them where server.isPrimary is true');
    },
    peers: () => runtime.rpc.call('primary.mesh.peers'),
  };
}
