import { mkdirSync } from 'node:fs';
import { ControlSocket, refuseRunningServer } from '../control/socket.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import type { FleetplaneConfig } from '../config/schema.js';
import { resolveWorkerCount } from '../config/sizing.js';
import { createLogger } from '../logging/logger.js';
import { resolveLogFormat } from '../logging/pretty.js';
import { serverEvents, type ServerEmitter } from '../runtime/events.js';
import { PrimaryRuntime } from '../runtime/primary.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import { PrimaryFacade } from '../runtime/process-facade.js';
import { resolveServerId } from '../runtime/identity.js';
import { PrimaryChannels, type WorkerEndpoint } from '../runtime/channels.js';
import type { PrimaryToWorker } from '../runtime/messages.js';
import { RpcChannel } from '../runtime/rpc.js';
import { primaryMethodChecks } from '../runtime/protocol.js';
import { StorageAuthority } from '../storage/index.js';
import { Server, type ServerIdentity } from '../server.js';
import { openKeyring, openServerData } from './data.js';
import { FAILURE_REPORT_METHOD } from '../auth/failure-limit.js';
import { primaryIpc, primaryState } from './ipc.js';
import { openNodeLifecycle } from './lifecycle.js';
import { openPrimaryMesh } from './mesh.js';
import { openPrimaryOverview, workerOverview } from './overview.js';
import { openPrimaryTls } from './tls.js';
import { bindParentKeys, openAutomationAndManager, openManagerConnection } from './manager.js';
import { REMOVAL_METHOD, removalHandler } from '../autoscaler/removal.js';
import type { InitOptions, PrimaryRoutes } from './options.js';
import { HandoverSuccessor, listeningAddresses, type PredecessorChannel } from '../runtime/handover-successor.js';
import { HANDOVER_ENV } from '../runtime/handover-messages.js';
import { removePidFile, writePidFile } from '../runtime/pid-file.js';
import { StartingSignals } from '../runtime/starting-signals.js';
import { meshSettings } from '../mesh/settings.js';
import { FLEETPLANE_VERSION } from '../version.js';

/**
 * The primary's boot, in order: config, identity and log; the keys that seal secrets (before anything is
 * bound); the store and the authorizer; the runtime (fleet or in-process worker); storage, IPC, state and
 * automation; the node lifecycle (identity, credential, checkouts); the mesh; the autoscaler (when enabled);
 * the server object over them; plugins; then the ports, the workers and the mesh join, and the autoscaler starts.
 */
export async function bootPrimary(config: FleetplaneConfig | LoadedConfig | undefined, options: InitOptions, env: NodeJS.ProcessEnv): Promise<Server> {
  const loaded = config && 'config' in config && 'warnings' in config ? (config as LoadedConfig) : loadConfig({ object: config, flags: options.flags, env, cwd: options.cwd });
  const resolved = loaded.config;
  const decision = resolveWorkerCount(resolved.workers.count, env);
  // A data directory another server runs on is refused before this start writes anything there (its id, its
  // store); a hand-over's new primary shares it with the old one by design.
  if (env[HANDOVER_ENV] === undefined) await refuseRunningServer(resolved.dataDir);
  const serverId = resolveServerId(resolved.server.id, resolved.dataDir);
  // Decided here, on this process's stdout, and handed to the workers in their config: a log destination given in
  // code is not a terminal.
  resolved.log.format = options.logDestination ? (resolved.log.format === 'pretty' ? 'pretty' : 'json') : resolveLogFormat(resolved.log.format);
  const log = createLogger({ level: resolved.log.level, base: { server: serverId, worker: 0 }, destination: options.logDestination, format: resolved.log.format });
  for (const warning of [...loaded.warnings, ...(decision.warning ? [decision.warning] : [])]) log.warn(warning);
  const identity: ServerIdentity = { id: serverId, workerId: 0, config: resolved, log };

  const secrets = openKeyring(resolved, env);
  const events = serverEvents(log);
  // After a rolling restart or a recycle, this line is how an operator tells which pids serve.
  events.on('worker:ready', ({ workerId, pid }) => log.info({ targetWorker: workerId, pid }, 'worker ready'));
  const starting = (options.handleSignals ?? true) ? new StartingSignals(log) : undefined;
  const data = await openServerData(resolved, log, secrets, { sealAtStart: true, ...(starting ? { stop: starting.stopped } : {}) });
  // Resolved once here: workers are handed it at fork and never look it up in the store themselves.
  const managerConnection = await openManagerConnection(resolved, serverId, data, log);

  const channels = new PrimaryChannels(log);
  const local = decision.count === 0 ? await inProcessWorker(identity, events, channels) : undefined;
  const primary = new PrimaryRuntime({ config: resolved, manager: managerConnection, serverId, workerCount: decision.count, log, events, exec: options.exec, channels, local });
  const facade = new PrimaryFacade(primary, local);
  primary.handleWorkerRpc(FAILURE_REPORT_METHOD, (report) => data.authorize.reportedFailure(report));
  const storage = new StorageAuthority(channels, primary.answerWorkers, log.child({ component: 'storage' }));
  const ipc = primaryIpc({ identity, events, authorize: data.authorize }, primary, channels, local);
  const { automation, managed, local: localServers } = await openAutomationAndManager(identity, { ...data, secrets }, events, ipc.envelopes.request, managerConnection);
  if (managed.fleet) await bindParentKeys(identity, data);
  // State mirrors its saves through the manager.
  const state = primaryState({ identity, events, authorize: data.authorize, facade, db: data.db, storage, manager: managed.manager }, primary, channels, ipc, local);
  events.on('organization.active', ({ organization_id }) => void managed.activation?.organizationActive(organization_id));
  const lifecycle = await openNodeLifecycle({
    config: resolved, serverId, log, db: data.db, secrets, platformOrganization: () => data.authorize.directory.platformOrganization(),
    automation, events: { on: (event, listener) => events.on(event, listener), off: (event, listener) => events.off(event, listener) }, primary,
    handle: (method, handler) => ipc.envelopes.handle(method, handler), manager: managed.manager,
  });
  // Started by a hand-over (SPEC 1.10): the old primary's state and sockets, as late as possible (it holds
  // storage writes from here until this primary takes over).
  const successor = await HandoverSuccessor.join(env, process as unknown as PredecessorChannel, FLEETPLANE_VERSION, (reason) => {
    log.fatal({ reason }, 'hand-over lost: exiting');
    process.exit(1);
  });
  const handed = await successor?.adopt(listeningAddresses(resolved, meshSettings(resolved).active), async (seed) => {
    storage.seed(seed.storage);
    if (seed.shed.length > 0) await state.applyShed(seed.shed);
  });
  const meshSocket = meshSettings(resolved).active ? handed?.get('mesh') : closeHandle(handed?.get('mesh'));
  const mesh = await openPrimaryMesh({
    identity, events, primary, router: ipc.router, db: data.db, authorize: data.authorize, state, organizations: ipc.organizations, inheritedSocket: meshSocket,
    secrets: data.secrets, handle: (method, handler) => ipc.envelopes.handle(method, handler),
  });
  // A cluster's autoscaler removes this server gracefully whether this server runs the autoscaler or not.
  const { autoscaler: scaling, lifecycle: hostSettings } = resolved;
  ipc.envelopes.handle(REMOVAL_METHOD, removalHandler({
    serverId, db: data.db, log: log.child({ component: 'autoscaler' }), stop: (reason) => primary.shutdown(reason), exit: (code) => process.exit(code),
    powerOff: { enabled: scaling.powerOffOnRemoval && hostSettings.hostControl, command: hostSettings.shutdownCommand },
  }));
  // Loaded only when enabled: a server that does not scale its cluster holds none of the autoscaler.
  const autoscaler = resolved.autoscaler.enabled
    ? (await import('./autoscaler.js')).openAutoscaler({
        config: resolved, serverId, log, db: data.db, platformOrganization: () => data.authorize.directory.platformOrganization(), manager: managed.manager,
        provider: managed.provider, request: (envelope, timeoutMs) => ipc.envelopes.request(envelope, timeoutMs),
        handle: (method, handler) => ipc.envelopes.handle(method, handler), events, metrics: primary.metrics,
        notify: (notice) => events.emitSafe('autoscaler:action', notice),
      })
    : undefined;
  openPrimaryOverview({
    identity, events, primary, state, presence: ipc.presence, mesh: mesh.mesh, db: data.db, envelopes: ipc.envelopes,
    platformOrganization: () => data.authorize.directory.platformOrganization(), ...(autoscaler ? { autoscaler } : {}),
  });
  if (local) workerOverview(ipc.envelopes.handle, local);
  const tls = openPrimaryTls({ config: resolved, log, primary, mesh: mesh.mesh, handle: (method, handler) => ipc.envelopes.handle(method, handler) });
  const server = new Server(identity, events, facade, { ...data, storage, envelopes: ipc.envelopes, organizations: ipc.organizations, state, automation, mesh: mesh.mesh, manager: managed.manager, repository: lifecycle.repository, https: tls.https });
  for (const plugin of options.plugins ?? []) server.use(plugin);

  const fallbackRoutes: PrimaryRoutes | undefined = options.primaryRoutes ? await options.primaryRoutes(server) : undefined;
  mkdirSync(resolved.dataDir, { recursive: true, mode: 0o700 });
  // A successor takes the control socket over once it serves; until then the old primary answers on it.
  const control = await ControlSocket.open({
    dataDir: resolved.dataDir, log, request: (envelope, timeoutMs) => server.request(envelope, { timeoutMs }), deferred: Boolean(successor), onRelease: () => removePidFile(resolved.dataDir),
  });
  const removeSocket = () => control.release();
  process.once('exit', removeSocket);
  primary.onShutdown(removeSocket);
  primary.handover.register({
    storage,
    shed: () => [...state.shedding],
    sockets: () => (mesh.mesh.listeningSocket ? [{ role: 'mesh', ...mesh.mesh.listeningSocket }] : []),
    committed: () => {
      control.handedOver();
      void autoscaler?.stop();
      mesh.mesh.close(1012);
    },
    // What the shutdown's stopped hooks release, minus what writes (checkpoints, the inventory, routing).
    release: async () => {
      await server.uninstallPlugins();
      await managed.close();
      await data.db.close();
    },
  });
  // No scaling decision while this server goes down: an action still before its provider request is cancelled.
  if (autoscaler) primary.onShutdown(() => autoscaler.stop());
  // The servers this primary started on this host with the built-in local provider (its autoscaler's) stop with it.
  primary.onShutdown(() => localServers.stopAll());
  // Plugins uninstall once the workers are gone, while the store is still open.
  primary.onStopped(() => server.uninstallPlugins());
  primary.onStopped(() => managed.close());
  // Last, when no worker is left: the embedded store's final close folds its WAL back into the file.
  primary.onStopped(() => data.db.close());
  // From here the runtime's own handlers answer signals; a stop asked for before is carried out once started.
  const earlyStop = starting?.handOver(() => primary.installSignalHandlers());
  try {
    // Before the ports are bound and the first worker is forked: plugins may shape the fleet.
    await server.installPlugins();
    await primary.start({ app: () => options.app(server), fallbackRoutes, peerUrl: () => mesh.mesh.peerUrl() }, successor);
    if (successor) {
      successor.acceptStorageWrites((draft) => storage.applyForwarded(draft));
      await control.takeOver();
    }
    writePidFile(resolved.dataDir);
    successor?.taken();
  } catch (error) {
    await successor?.failed((error as Error).message);
    removeSocket();
    tls.close();
    mesh.abort();
    await server.uninstallPlugins();
    throw error;
  }
  await mesh.join();
  autoscaler?.start();
  log.info({ ports: primary.ports, workers: primary.workerCount, plugins: server.pluginNames, dataDir: resolved.dataDir, config: loaded.file ?? null }, 'fleetplane started');
  if (earlyStop) primary.stopOnSignal(earlyStop);
  return server;
}

/** A handed socket this primary does not use: closed, so the port does not hang on in this process. */
function closeHandle(handle: unknown): undefined {
  (handle as { close?: () => void } | undefined)?.close?.();
  return undefined;
}

/**
 * Single-process mode: the primary serves the app itself. Its worker runtime talks to the primary's channels
 * through a loopback that keeps the asynchronous, ordered delivery of a real IPC channel.
 */
async function inProcessWorker(identity: ServerIdentity, events: ServerEmitter, channels: PrimaryChannels): Promise<WorkerRuntime> {
  // Loaded only here: a primary with workers never holds the worker runtime (nor its metrics library).
  const { WorkerRuntime } = await import('../runtime/worker.js');
  const toWorker = (message: PrimaryToWorker) => queueMicrotask(() => runtime.receive(message));
  const rpc = new RpcChannel(toWorker, { methods: primaryMethodChecks });
  const endpoint: WorkerEndpoint = { workerId: 0, pid: process.pid, connected: true, inProcess: true, rpc };
  const runtime = new WorkerRuntime(identity.config, 0, identity.log, events, (message) => {
    if (message.fp === 'listening') queueMicrotask(() => channels.listening(endpoint));
    else if (message.fp === 'rpc' || message.fp === 'reply') queueMicrotask(() => void rpc.receive(message));
  });
  channels.connected(endpoint);
  return runtime;
}
