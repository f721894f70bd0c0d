import cluster from 'node:cluster';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdirSync, unlinkSync } from 'node:fs';
import { controlSocketPath, listenControlSocket } from './control/socket.js';
import type { DestinationStream } from 'pino';
import { loadConfig, type ConfigFlags, type LoadedConfig } from './config/load.js';
import type { FleetplaneConfig, ResolvedConfig } from './config/schema.js';
import { resolveWorkerCount } from './config/sizing.js';
import { createLogger, type Logger } from './logging/logger.js';
import { SafeEmitter, type ServerEventName, type ServerEvents } from './runtime/events.js';
import { PrimaryRuntime } from './runtime/primary.js';
import { WorkerRuntime } from './runtime/worker.js';
import type { AppHost } from './runtime/app-host.js';
import { resolveServerId } from './runtime/identity.js';
import { PrimaryChannels, type WorkerEndpoint } from './runtime/channels.js';
import { StorageAuthority, StorageReplica, type ClusterStorage } from './storage/index.js';
import type { HandlerRegistry, IpcHandler, RequestResult } from './ipc/handlers.js';
import type { ServerState } from './state/state.js';
import { attachPrimaryServices, attachWorkerServices, type OrganizationPresence } from './services.js';
import type { RestartWorkersOptions } from './runtime/fleet.js';
import type { ServerStatus, WorkerStatus } from './runtime/status.js';
import type { Store } from './db/types.js';
import type { Authorizer } from './auth/authorize.js';
import { openDataServices } from './auth/services.js';
import { secretsKeyFile } from './secrets/key-file.js';
import { SecretKeyring } from './secrets/keyring.js';
import { SealedStore } from './secrets/sealed-store.js';
import { sealPlaintextAtStart } from './secrets/startup.js';
import { openAutomation, type Automation } from './workflows/automation.js';
import type { MeshApi } from './mesh/mesh.js';
import { attachPrimaryMesh, workerMesh } from './mesh/primary-mesh.js';

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
}

type Listener<E extends ServerEventName> = (payload: ServerEvents[E]) => void;

/**
 * SPEC 2: the server object, in the primary and in every worker. Events of SPEC 1.7 are emitted here in the
 * primary (supervision) and in workers (their own `status_change`).
 */
export class Server extends SafeEmitter {
  readonly isPrimary: boolean;
  /** SPEC 4: storage shared by every process of this server (primary: the authority; worker: a replica). */
  storage!: ClusterStorage;
  /** Alias of `storage`. */
  get store(): ClusterStorage {
    return this.storage;
  }
  /** SPEC 7: this process's store (embedded SQLite or MongoDB). */
  db!: Store;
  /** The keys that seal provider and webhook secrets in `db` (never in the config, never logged). */
  secrets!: SecretKeyring;
  /** SPEC 8: request authorization over `db`. */
  authorize!: Authorizer;
  /** SPEC 3: cordon, drain, shed, restart, reboot, shutdown. */
  state!: ServerState;
  /** SPEC 5.5: where request handlers report the organizations they serve. */
  organizations!: OrganizationPresence;
  /** SPEC 10: API providers; `api.send(envelope)` is `POST /api` without HTTP. */
  api!: Automation['api'];
  /** SPEC 11: workflows; `workflow.register(name, definition)` adds one in code. */
  workflow!: Automation['workflow'];
  /** SPEC 12: webhook deliveries. */
  webhooks!: Automation['webhooks'];
  /** SPEC 6: the mesh between servers (links live in the primary; a worker's calls go through it). */
  mesh!: MeshApi;
  private handlers!: HandlerRegistry;
  private sendEnvelope!: (envelope: unknown) => Promise<void>;
  private requestEnvelope!: (envelope: unknown, timeoutMs?: number) => Promise<RequestResult>;
  private primary?: PrimaryRuntime;
  private worker?: WorkerRuntime;

  constructor(
    readonly id: string,
    readonly workerId: number,
    readonly totalWorkers: number,
    readonly config: ResolvedConfig,
    readonly log: Logger,
  ) {
    super((event, error) => log.error({ err: error, event }, 'event listener failed'));
    this.isPrimary = workerId === 0 || !cluster.isWorker;
  }

  /** @internal */
  attachServices(services: {
    handlers: HandlerRegistry;
    state: ServerState;
    send: (envelope: unknown) => Promise<void>;
    request: (envelope: unknown, timeoutMs?: number) => Promise<RequestResult>;
    organizations: OrganizationPresence;
  }): void {
    this.handlers = services.handlers;
    this.state = services.state;
    this.sendEnvelope = services.send;
    this.requestEnvelope = services.request;
    this.organizations = services.organizations;
  }

  /** SPEC 5.1: deliver an envelope to its targets (validated now; delivery is not awaited). */
  send(envelope: unknown): Promise<void> {
    return this.sendEnvelope(envelope);
  }

  /** SPEC 5.1: deliver and gather one reply per target; targets silent past `timeoutMs` are listed as missing. */
  request(envelope: unknown, options: { timeoutMs?: number } = {}): Promise<RequestResult> {
    return this.requestEnvelope(envelope, options.timeoutMs);
  }

  /** Registers this process's handler of `method` (replaces an earlier one, built-ins included). */
  handle(method: string, handler: IpcHandler): void {
    this.handlers.handle(method, handler);
  }

  override on<E extends ServerEventName>(event: E, listener: Listener<E>): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.on(event, listener);
  }

  override once<E extends ServerEventName>(event: E, listener: Listener<E>): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.once(event, listener);
  }

  /** @internal */
  bind(runtime: { primary?: PrimaryRuntime; worker?: WorkerRuntime }): void {
    this.primary = runtime.primary;
    this.worker = runtime.worker;
  }

  /** The primary runtime (undefined in a forked worker). */
  get primaryRuntime(): PrimaryRuntime | undefined {
    return this.primary;
  }

  /** This process's worker runtime (single-process mode: the primary's own). */
  get workerRuntime(): WorkerRuntime | undefined {
    return this.worker;
  }

  get status(): ServerStatus | WorkerStatus {
    return this.primary ? this.primary.status : this.worker!.status;
  }

  /** Bound ports (primary only). */
  get ports(): { http?: number; https?: number } {
    return this.primary?.ports ?? {};
  }

  getHealth(): { ready: boolean; live: boolean; status: string } {
    if (this.primary) return this.primary.getHealth();
    return { ready: this.worker!.ready, live: true, status: this.worker!.status };
  }

  async getFleetHealth(): Promise<ReturnType<PrimaryRuntime['getFleetHealth']>> {
    if (this.primary) return this.primary.getFleetHealth();
    const reply = await this.worker!.rpc.call<{ fleet: ReturnType<PrimaryRuntime['getFleetHealth']> }>('primary.health');
    return reply.fleet;
  }

  getMetrics() {
    if (this.primary) return this.primary.getMetrics();
    return this.worker!.describe();
  }

  /** Prometheus text aggregated over the primary and every worker. */
  metricsText(): Promise<string> {
    if (this.primary) return this.primary.metricsText();
    return this.worker!.rpc.call<string>('primary.metrics', undefined, 5_000);
  }

  restartWorkers(options?: RestartWorkersOptions): Promise<void> {
    if (!this.primary) return this.worker!.rpc.call('primary.restartWorkers', { reason: options?.reason }).then(() => undefined);
    return this.primary.restartWorkers(options);
  }

  /** Work to do before this process stops (routing withdrawal, checkpoints...). */
  onShutdown(hook: (reason: string) => void | Promise<void>): void {
    if (this.primary) this.primary.onShutdown(hook);
    else this.worker!.onShutdown(hook);
  }

  /** Graceful shutdown of the whole server (from the primary) or of this worker. */
  shutdown(reason = 'shutdown'): Promise<void> {
    return this.primary ? this.primary.shutdown(reason) : this.worker!.shutdown(reason);
  }
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
  // Last, when no worker is left: the embedded store's final close folds its WAL back into the file.
  primary.onStopped(() => server.db?.close());
  if (options.handleSignals ?? true) primary.installSignalHandlers();
  try {
    await primary.start();
  } catch (error) {
    removeSocket();
    mesh.abort();
    throw error;
  }
  await mesh.join();
  log.info({ ports: primary.ports, workers: decision.count, dataDir: resolved.dataDir, config: loaded.file ?? null }, 'fleetplane started');
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
