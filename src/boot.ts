import cluster from 'node:cluster';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdirSync, unlinkSync } from 'node:fs';
import type { DestinationStream } from 'pino';
import { controlSocketPath, listenControlSocket } from './control/socket.js';
import { loadConfig, type ConfigFlags, type LoadedConfig } from './config/load.js';
import type { FleetplaneConfig, ResolvedConfig } from './config/schema.js';
import { resolveWorkerCount } from './config/sizing.js';
import { createLogger } from './logging/logger.js';
import { PrimaryRuntime } from './runtime/primary.js';
import { WorkerRuntime } from './runtime/worker.js';
import type { AppHost } from './runtime/app-host.js';
import { resolveServerId } from './runtime/identity.js';
import { PrimaryChannels, type WorkerEndpoint } from './runtime/channels.js';
import { StorageAuthority, StorageReplica } from './storage/index.js';
import { attachPrimaryServices, attachWorkerServices } from './services.js';
import { openDataServices } from './auth/services.js';
import { secretsKeyFile } from './secrets/key-file.js';
import { SecretKeyring } from './secrets/keyring.js';
import { SealedStore } from './secrets/sealed-store.js';
import { sealPlaintextAtStart } from './secrets/startup.js';
import { openAutomation } from './workflows/automation.js';
import { attachPrimaryMesh, workerMesh } from './mesh/primary-mesh.js';
import { Server, type FleetplanePlugin } from './server.js';

/*
 * The composition root: boots this process's part of the server and builds each service in order (config,
 * store, storage, runtime, mesh, control socket), handing each the narrow interfaces it needs.
 */

export type AppFactory = (server: Server) => Promise<AppHost>;

/** Requests the primary answers itself when no worker takes traffic; returns false for the rest. */
export type PrimaryRoutes = (request: IncomingMessage, response: ServerResponse) => boolean;

export interface InitOptions {
  /** Builds what each worker serves. */
  app: AppFactory;
  /** Builds the few routes the primary serves itself in fallback (`POST /control`). */
  primaryRoutes?: (server: Server) => Promise<PrimaryRoutes>;
  /** Script workers run (default: this process's entry script, which calls `init` again in the worker). */
  exec?: string;
  /** Install SIGTERM / SIGINT / SIGBREAK (graceful shutdown, then exit 0) and SIGHUP (rolling restart). */
  handleSignals?: boolean;
  flags?: ConfigFlags;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  logDestination?: DestinationStream;
  /** Installed in order in the primary before the workers are forked (ignored in workers). */
  plugins?: FleetplanePlugin[];
}

/** Environment the primary gives each worker; not part of the public configuration. */
export const INTERNAL_ENV = {
  worker: 'FLEETPLANE_INTERNAL_WORKER',
  total: 'FLEETPLANE_INTERNAL_TOTAL_WORKERS',
  config: 'FLEETPLANE_INTERNAL_CONFIG',
  serverId: 'FLEETPLANE_INTERNAL_SERVER_ID',
} as const;

/**
 * Boots this process's part of the server. In the primary: resolve config, bind ports, fork workers (or serve
 * in-process with `workers: 0`). In a worker: take the resolved config from the primary and serve the app.
 */
export async function init(config: FleetplaneConfig | LoadedConfig | undefined, options: InitOptions): Promise<Server> {
  const env = options.env ?? process.env;
  const forked = cluster.isWorker && env[INTERNAL_ENV.worker] !== undefined;
  if (forked) return initWorker(env, options);

  const loaded = config && 'config' in config && 'warnings' in config ? (config as LoadedConfig) : loadConfig({ object: config, flags: options.flags, env, cwd: options.cwd });
  const resolved = loaded.config;
  const decision = resolveWorkerCount(resolved.workers.count, env);
  const serverId = resolveServerId(resolved.server.id, resolved.dataDir);
  const log = createLogger({ level: resolved.log.level, base: { server: serverId, worker: 0 }, destination: options.logDestination });
  for (const warning of [...loaded.warnings, ...(decision.warning ? [decision.warning] : [])]) log.warn(warning);

  // Before anything is bound: a bad FLEETPLANE_SECRETS_KEY or key file stops the start with its reason.
  const secrets = SecretKeyring.fromEnvironment(secretsKeyFile(resolved), env);
  const server = new Server(serverId, 0, decision.count, resolved, log);
  // After a rolling restart or a recycle, this line is how an operator tells which pids serve.
  server.on('worker:ready', ({ workerId, pid }) => log.info({ targetWorker: workerId, pid }, 'worker ready'));
  for (const plugin of options.plugins ?? []) server.use(plugin);
  const data = await openDataServices(resolved, log.child({ component: 'authorize' }));
  await sealPlaintextAtStart(data.db, secrets, log.child({ component: 'secrets' }));
  Object.assign(server, data, { db: new SealedStore(data.db, secrets), secrets });
  Object.assign(server, openAutomation(server));
  const channels = new PrimaryChannels();
  server.storage = new StorageAuthority(channels, log.child({ component: 'storage' }));
  const local = decision.count === 0 ? inProcessWorker(server, channels) : undefined;
  const primary = new PrimaryRuntime({
    config: resolved,
    serverId,
    workerCount: decision.count,
    log,
    events: server,
    exec: options.exec,
    channels,
    local: local ? { runtime: local, build: () => options.app(server) } : undefined,
    fallbackRoutes: (request, response) => primaryRoutes?.(request, response) ?? false,
    peerUrl: () => mesh.mesh.peerUrl(),
  });
  let primaryRoutes: PrimaryRoutes | undefined;
  server.bind({ primary, worker: local });
  const mesh = await attachPrimaryMesh(server, primary, attachPrimaryServices(server, primary, channels, local));
  if (options.primaryRoutes) primaryRoutes = await options.primaryRoutes(server);
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
  // Plugins uninstall once the workers are gone, while the store is still open.
  primary.onStopped(() => server.uninstallPlugins());
  // Last, when no worker is left: the embedded store's final close folds its WAL back into the file.
  primary.onStopped(() => server.db?.close());
  if (options.handleSignals ?? true) primary.installSignalHandlers();
  try {
    // Before the ports are bound and the first worker is forked: plugins may shape the fleet.
    await server.installPlugins();
    await primary.start();
  } catch (error) {
    removeSocket();
    mesh.abort();
    await server.uninstallPlugins();
    throw error;
  }
  await mesh.join();
  log.info({ ports: primary.ports, workers: primary.workerCount, plugins: server.pluginNames, dataDir: resolved.dataDir, config: loaded.file ?? null }, 'fleetplane started');
  return server;
}

async function initWorker(env: NodeJS.ProcessEnv, options: InitOptions): Promise<Server> {
  const resolved = JSON.parse(env[INTERNAL_ENV.config]!) as ResolvedConfig;
  const workerId = Number(env[INTERNAL_ENV.worker]);
  const serverId = env[INTERNAL_ENV.serverId]!;
  const log = createLogger({ level: resolved.log.level, base: { server: serverId, worker: workerId }, destination: options.logDestination });
  const server = new Server(serverId, workerId, Number(env[INTERNAL_ENV.total]), resolved, log);
  // The same environment and key file as the primary's: the key itself never travels in the config.
  const secrets = SecretKeyring.fromEnvironment(secretsKeyFile(resolved), env);
  const data = await openDataServices(resolved, log.child({ component: 'authorize' }));
  Object.assign(server, data, { db: new SealedStore(data.db, secrets), secrets });
  Object.assign(server, openAutomation(server));
  const runtime = new WorkerRuntime(resolved, workerId, log, server);
  server.storage = new StorageReplica(runtime, log.child({ component: 'storage' }));
  server.bind({ worker: runtime });
  attachWorkerServices(server, runtime);
  server.mesh = workerMesh(runtime);
  runtime.onStopped(() => server.db?.close());
  await runtime.bind();
  runtime.attach(await options.app(server));
  return server;
}

/**
 * Single-process mode: the primary serves the app itself. Its worker runtime talks to the primary's channels
 * through a loopback that keeps the asynchronous, ordered delivery of a real IPC channel.
 */
function inProcessWorker(server: Server, channels: PrimaryChannels): WorkerRuntime {
  let endpoint!: WorkerEndpoint;
  const runtime = new WorkerRuntime(server.config, 0, server.log, server, (message) => {
    if (message.fp === 'ch') queueMicrotask(() => channels.receive(endpoint, message));
  });
  endpoint = { workerId: 0, pid: process.pid, connected: true, post: (message) => queueMicrotask(() => runtime.receive(message)) };
  channels.connected(endpoint);
  return runtime;
}
