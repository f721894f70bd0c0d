import cluster from 'node:cluster';
import type { ResolvedConfig } from './config/schema.js';
import type { Logger } from './logging/logger.js';
import { SafeEmitter, type ServerEventName, type ServerEvents } from './runtime/events.js';
import type { PrimaryRuntime } from './runtime/primary.js';
import type { WorkerRuntime } from './runtime/worker.js';
import type { ClusterStorage } from './storage/index.js';
import type { HandlerRegistry, IpcHandler, RequestResult } from './ipc/handlers.js';
import type { ServerState } from './state/state.js';
import type { OrganizationPresence } from './services.js';
import type { RestartWorkersOptions } from './runtime/fleet.js';
import type { ServerStatus, WorkerStatus } from './runtime/status.js';
import type { Store } from './db/types.js';
import type { Authorizer } from './auth/authorize.js';
import type { SecretKeyring } from './secrets/keyring.js';
import type { Automation } from './workflows/automation.js';
import type { MeshApi } from './mesh/mesh.js';
import { PluginHost, type Plugin } from './runtime/plugins.js';

/** SPEC 1.4: `{ name, install(server, log, config), uninstall?(server) }`, installed in the primary only. */
export type FleetplanePlugin = Plugin<Server>;

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
  private readonly plugins = new PluginHost<Server>();

  constructor(
    readonly id: string,
    readonly workerId: number,
    private readonly workersAtStart: number,
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

  /** Workers this server runs (the resolved count, or a plugin's override); 0 in single-process mode. */
  get totalWorkers(): number {
    return this.primary ? this.primary.workerCount : this.workersAtStart;
  }

  /** Alias of `totalWorkers`. */
  get workerCount(): number {
    return this.totalWorkers;
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

  /**
   * Server-wide readiness: every worker's `/readyz` answers 503 (traffic is still served) until `setReady`.
   * From a worker, asks the primary.
   */
  async setNotReady(): Promise<void> {
    if (this.primary) this.primary.setNotReady();
    else await this.worker!.rpc.call('primary.setNotReady');
  }

  /** Undoes `setNotReady` (a no-op during shutdown; a tripped breaker keeps the server not ready). */
  async setReady(): Promise<void> {
    if (this.primary) this.primary.setReady();
    else await this.worker!.rpc.call('primary.setReady');
  }

  /** After fixing a crash loop's cause: restarts resume, missing workers are forked again, readiness returns. */
  async resetCircuitBreaker(): Promise<void> {
    if (this.primary) this.primary.resetCircuitBreaker();
    else await this.worker!.rpc.call('primary.resetCircuitBreaker');
  }

  /** Registers a plugin (chainable); only before the workers are forked, i.e. from init options or an install(). */
  use(plugin: FleetplanePlugin): this {
    if (!this.isPrimary) throw new Error('use(): plugins are installed in the primary only');
    this.plugins.register(plugin);
    return this;
  }

  /** From a plugin's install(): variables merged into every worker's environment (guarded like workers.env). */
  patchWorkerEnv(env: Record<string, string>): void {
    this.plugins.assertOpen('patchWorkerEnv()');
    if (!this.primary) throw new Error('patchWorkerEnv(): only the primary forks workers');
    this.primary.patchWorkerEnv(env);
    this.log.info({ plugin: this.plugins.current, keys: Object.keys(env) }, 'worker environment patched');
  }

  /** From a plugin's install(): run `count` workers (1 to 256) instead of the configured number. */
  overrideWorkerCount(count: number): void {
    this.plugins.assertOpen('overrideWorkerCount()');
    if (!this.primary) throw new Error('overrideWorkerCount(): only the primary forks workers');
    const before = this.primary.workerCount;
    this.primary.overrideWorkerCount(count);
    this.log.info({ plugin: this.plugins.current, from: before, to: count }, 'worker count overridden');
  }

  /** @internal Installs the registered plugins, then closes registration: the workers are forked next. */
  async installPlugins(): Promise<void> {
    try {
      await this.plugins.installAll(this, this.log, this.config);
    } finally {
      this.plugins.close();
    }
  }

  /** Names of the registered plugins, in installation order. */
  get pluginNames(): string[] {
    return this.plugins.names;
  }

  /** @internal */
  uninstallPlugins(): Promise<void> {
    return this.plugins.uninstallAll(this, this.log);
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
