import type { ServerIdentity } from '../server.js';
import type { Store } from '../db/types.js';
import type { Authorizer } from '../auth/authorize.js';
import { customEvents, type ServerEmitter } from '../runtime/events.js';
import type { PrimaryRuntime } from '../runtime/primary.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import type { IpcRouter } from '../ipc/router.js';
import type { ServerState } from '../state/state.js';
import type { OrganizationPresence } from '../state/organizations.js';
import { Mesh, type MeshApi, type MeshMessage } from '../mesh/mesh.js';
import { SERVERS } from '../inventory/records.js';
import { runningPeers } from '../inventory/servers.js';
import { ServerMembership } from '../inventory/membership.js';
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
 * organization changes are advertised, the server's inventory record (`ServerMembership`) says where peers reach
 * it, and shutdown closes every link with 1000 (or 1012 for a restart) once the workers are gone.
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
  const cluster = config.server.cluster;
  const meshLog = log.child({ component: 'mesh' });
  const configured = meshSettings(config);
  // `mesh.tls.mode: "auto"`: the cluster's CA issues this server's certificate before the mesh port is bound.
  const certificates =
    configured.active && configured.auto
      ? await (await import('../tls/mesh-certificates.js')).MeshCertificates.start({
          store: db, secrets: deps.secrets, cluster, serverId: identity.id, lifetimeMs: config.mesh.tls.lifetimeMs, log: meshLog,
        })
      : undefined;
  const settings = certificates ? { ...configured, tls: certificates.material } : configured;
  deps.handle('tls.revoke', (serial) => {
    if (!certificates) throw new IpcError('bad_request', 'mesh certificates are revoked in mesh.tls.mode "auto" only (with files, take the certificate out of the CA you manage)');
    return certificates.revoke(serial).catch((error: unknown) => {
      throw error instanceof TypeError ? new IpcError('bad_request', error.message) : error;
    });
  });
  const mesh = new Mesh({
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
    events: customEvents(events),
  });
  if (certificates) {
    certificates.on('renewed', (material) => mesh.setTls(material));
    certificates.on('revocations', () => mesh.recheckLinks());
    primary.onShutdown(() => certificates.close());
  }
  router.forwarder = mesh;
  events.on('organization.active', ({ organization_id }) => mesh.organizationActive(organization_id));
  events.on('organization.inactive', ({ organization_id }) => mesh.organizationInactive(organization_id));
  primary.handleWorkerRpc('primary.mesh.send', (params) => mesh.send(params as MeshMessage));
  primary.handleWorkerRpc('primary.mesh.peers', () => mesh.peers());

  // This server's record in the inventory, which peers discover it by.
  const membership = new ServerMembership(
    {
      get status() {
        return primary.status;
      },
      get workerCount() {
        return primary.workerCount;
      },
      publicUrl: () => publicUrl(config, primary.ports) ?? null,
      meshUrl: () => mesh.url ?? null,
    },
    state,
    meshLog,
  );
  const stopListening = onFleetReady({ on: (event, listener) => events.on(event, listener), off: (event, listener) => events.off(event, listener), fleetHealth: () => primary.getFleetHealth() }, () => membership.serving());
  await mesh.listen(deps.inheritedSocket);
  primary.onShutdown(async () => {
    stopListening();
    // Peers stop dialing a server that is leaving.
    mesh.beginShutdown();
    await membership.leave();
  });
  // Last step of the shutdown (SPEC 1.5): links carried envelopes while workers drained.
  events.on('shutdown:complete', ({ signal }) => mesh.close(meshCloseCode(signal)));

  return {
    mesh,
    async join() {
      await membership.join();
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
