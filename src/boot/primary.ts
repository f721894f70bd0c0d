import { mkdirSync, unlinkSync } from 'node:fs';
import { controlSocketPath, listenControlSocket } from '../control/socket.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import type { FleetplaneConfig } from '../config/schema.js';
import { resolveWorkerCount } from '../config/sizing.js';
import { createLogger } from '../logging/logger.js';
import { serverEvents, type ServerEmitter } from '../runtime/events.js';
import { PrimaryRuntime } from '../runtime/primary.js';
import { WorkerRuntime } from '../runtime/worker.js';
import { PrimaryHost } from '../runtime/host.js';
import { resolveServerId } from '../runtime/identity.js';
import { PrimaryChannels, type WorkerEndpoint } from '../runtime/channels.js';
import { StorageAuthority } from '../storage/index.js';
import { Server, type ServerIdentity } from '../server.js';
import { openKeyring, openServerData } from './data.js';
import { FAILURE_REPORT_METHOD } from '../auth/failure-limit.js';
import { primaryIpc } from './ipc.js';
import { openNodeLifecycle } from './lifecycle.js';
import { openPrimaryMesh } from './mesh.js';
import { openPrimaryTls } from './tls.js';
import { bindParentKeys, openAutomationAndManager } from './manager.js';
import { resolveConnection } from '../manager/connection.js';
import type { InitOptions, PrimaryRoutes } from './options.js';

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
  const serverId = resolveServerId(resolved.server.id, resolved.dataDir);
  const log = createLogger({ level: resolved.log.level, base: { server: serverId, worker: 0 }, destination: options.logDestination });
  for (const warning of [...loaded.warnings, ...(decision.warning ? [decision.warning] : [])]) log.warn(warning);
  const identity: ServerIdentity = { id: serverId, workerId: 0, config: resolved, log };

  const secrets = openKeyring(resolved, env);
  const events = serverEvents(log);
  // After a rolling restart or a recycle, this line is how an operator tells which pids serve.
  events.on('worker:ready', ({ workerId, pid }) => log.info({ targetWorker: workerId, pid }, 'worker ready'));
  const data = await openServerData(resolved, log, secrets, { sealAtStart: true });
  // Resolved once here: workers are handed it at fork and never look it up in the store themselves.
  const managerConnection = await resolveConnection(resolved.manager, data.db, serverId);

  const channels = new PrimaryChannels();
  const local = decision.count === 0 ? inProcessWorker(identity, events, channels) : undefined;
  const primary = new PrimaryRuntime({ config: resolved, manager: managerConnection, serverId, workerCount: decision.count, log, events, exec: options.exec, channels, local });
  const host = new PrimaryHost(primary, local);
  primary.handleWorkerRpc(FAILURE_REPORT_METHOD, (report) => data.authorize.reportedFailure(report));
  const storage = new StorageAuthority(channels, log.child({ component: 'storage' }));
  // Automation reaches IPC only when a workflow runs: it comes first, so the manager it serves exists for state.
  const { automation, managed } = await openAutomationAndManager(identity, { ...data, secrets }, events, (envelope, timeoutMs) => ipc.envelopes.request(envelope, timeoutMs), managerConnection);
  if (managed.fleet) await bindParentKeys(identity, data);
  const ipc = primaryIpc({ identity, events, host, db: data.db, authorize: data.authorize, storage, manager: managed.manager }, primary, channels, local);
  events.on('organization.active', ({ organization_id }) => void managed.activation?.organizationActive(organization_id));
  const lifecycle = await openNodeLifecycle({
    config: resolved, serverId, log, db: data.db, secrets, platformOrganization: () => data.authorize.directory.platformOrganization(),
    automation, events: { on: (event, listener) => events.on(event, listener), off: (event, listener) => events.off(event, listener) }, primary,
    handle: (method, handler) => ipc.envelopes.handle(method, handler),
  });
  const mesh = await openPrimaryMesh({
    identity, events, primary, router: ipc.router, db: data.db, authorize: data.authorize, state: ipc.state, organizations: ipc.organizations, secrets: data.secrets,
    handle: (method, handler) => ipc.envelopes.handle(method, handler),
  });
  // Loaded only when enabled: a server that does not scale its cluster holds none of the autoscaler.
  const autoscaler = resolved.autoscaler.enabled
    ? (await import('./autoscaler.js')).openAutoscaler({
        config: resolved, serverId, log, db: data.db, platformOrganization: () => data.authorize.directory.platformOrganization(), manager: managed.manager,
        api: automation.providers, workflows: automation.workflow, request: (envelope, timeoutMs) => ipc.envelopes.request(envelope, timeoutMs),
        handle: (method, handler) => ipc.envelopes.handle(method, handler), events, metrics: primary.metrics,
      })
    : undefined;
  const tls = openPrimaryTls({ config: resolved, log, primary, mesh: mesh.mesh, handle: (method, handler) => ipc.envelopes.handle(method, handler) });
  const server = new Server(identity, events, host, { ...data, storage, ...ipc, automation, mesh: mesh.mesh, manager: managed.manager, repository: lifecycle.repository, https: tls.https });
  for (const plugin of options.plugins ?? []) server.use(plugin);

  const fallbackRoutes: PrimaryRoutes | undefined = options.primaryRoutes ? await options.primaryRoutes(server) : undefined;
  mkdirSync(resolved.dataDir, { recursive: true, mode: 0o700 });
  const control = await listenControlSocket(resolved.dataDir, log, (envelope, timeoutMs) => server.request(envelope, { timeoutMs }));
  const removeSocket = () => {
    control.close();
    try {
      unlinkSync(controlSocketPath(resolved.dataDir));
    } catch {
      // already gone
    }
  };
  process.once('exit', removeSocket);
  primary.onShutdown(removeSocket);
  // No scaling decision while this server goes down: an action still before its provider request is cancelled.
  if (autoscaler) primary.onShutdown(() => autoscaler.stop());
  // Plugins uninstall once the workers are gone, while the store is still open.
  primary.onStopped(() => server.uninstallPlugins());
  primary.onStopped(() => managed.close());
  // Last, when no worker is left: the embedded store's final close folds its WAL back into the file.
  primary.onStopped(() => data.db.close());
  if (options.handleSignals ?? true) primary.installSignalHandlers();
  try {
    // Before the ports are bound and the first worker is forked: plugins may shape the fleet.
    await server.installPlugins();
    await primary.start({ app: () => options.app(server), fallbackRoutes, peerUrl: () => mesh.mesh.peerUrl() });
  } catch (error) {
    removeSocket();
    tls.close();
    mesh.abort();
    await server.uninstallPlugins();
    throw error;
  }
  await mesh.join();
  autoscaler?.start();
  log.info({ ports: primary.ports, workers: primary.workerCount, plugins: server.pluginNames, dataDir: resolved.dataDir, config: loaded.file ?? null }, 'fleetplane started');
  return server;
}

/**
 * Single-process mode: the primary serves the app itself. Its worker runtime talks to the primary's channels
 * through a loopback that keeps the asynchronous, ordered delivery of a real IPC channel.
 */
function inProcessWorker(identity: ServerIdentity, events: ServerEmitter, channels: PrimaryChannels): WorkerRuntime {
  const endpoint: WorkerEndpoint = { workerId: 0, pid: process.pid, connected: true, post: (message) => queueMicrotask(() => runtime.receive(message)) };
  const runtime = new WorkerRuntime(identity.config, 0, identity.log, events, (message) => {
    if (message.fp === 'ch') queueMicrotask(() => channels.receive(endpoint, message));
  });
  channels.connected(endpoint);
  return runtime;
}
