import type { ResolvedConfig } from './config/schema.js';
import type { Logger } from './logging/logger.js';
import { EventSurface, type ServerEmitter } from './runtime/events.js';
import type { ProcessFacade } from './runtime/process-facade.js';
import type { ClusterStorage } from './storage/index.js';
import type { IpcHandler, RequestResult } from './ipc/handlers.js';
import type { ServerState } from './state/state.js';
import type { HttpsIdentity } from './tls/https-identity.js';
import type { Manager } from './manager/manager.js';
import type { OrganizationPresence } from './state/organizations.js';
import type { RestartWorkersOptions } from './runtime/fleet/fleet.js';
import type { Store } from './db/types.js';
import type { RepositoryService } from './repositories/service.js';
import type { Authorizer } from './auth/authorize.js';
import type { SecretKeyring } from './secrets/keyring.js';
import type { Automation } from './workflows/automation.js';
import type { MeshApi } from './mesh/mesh.js';
import { PluginHost, type Plugin } from './runtime/plugins.js';

/** SPEC 1.4: `{ name, install(server, log, config), uninstall?(server) }`, installed in the primary only. */
export type FleetplanePlugin = Plugin<Server>;

/** Who this process is within its server. */
export interface ServerIdentity {
  readonly id: string;
  /** 0 in the primary (and in single-process mode), else the worker's number. */
  readonly workerId: number;
  readonly config: ResolvedConfig;
  readonly log: Logger;
}

/** This process's envelope delivery (SPEC 5): the router in the primary, the IPC client in a worker. */
export interface Envelopes {
  send(envelope: unknown): Promise<void>;
  request(envelope: unknown, timeoutMs?: number): Promise<RequestResult>;
  /** Registers this process's handler of `method` (replaces an earlier one, built-ins included). */
  handle(method: string, handler: IpcHandler): void;
}

/** The services the boot code builds, in order, before the server object exists. */
export interface ServerServices {
  db: Store;
  secrets: SecretKeyring;
  authorize: Authorizer;
  storage: ClusterStorage;
  state: ServerState;
  organizations: OrganizationPresence;
  envelopes: Envelopes;
  automation: Automation;
  mesh: MeshApi;
  /** SPEC 14.3: the cluster's repositories (the primary's, when it has a platform organization). */
  repository?: RepositoryService;
  manager: Manager;
  /** This process's HTTPS certificate, when HTTPS is configured (reloaded without a restart). */
  https?: HttpsIdentity;
}

/**
 * SPEC 2: the server object, in the primary and in every worker: a typed facade over this process's runtime
 * (primary or worker) and the services built by the boot code, and an `EventEmitter`. Events of SPEC 1.7 are
 * emitted on it in the primary (supervision) and in workers (their own `status_change`); `cordon`, `drain` and
 * `shed` in the primary and in the workers they were applied to.
 */
export class Server extends EventSurface {
  readonly id: string;
  readonly workerId: number;
  readonly config: ResolvedConfig;
  readonly log: Logger;
  readonly isPrimary: boolean;
  /** SPEC 4: storage shared by every process of this server (primary: the authority; worker: a replica). */
  readonly storage: ClusterStorage;
  /** SPEC 7: this process's store (embedded SQLite or MongoDB). */
  readonly db: Store;
  /** The keys that seal provider and webhook secrets in `db` (never in the config, never logged). */
  readonly secrets: SecretKeyring;
  /** SPEC 8: request authorization over `db`. */
  readonly authorize: Authorizer;
  /** SPEC 3: cordon, drain, shed, restart, reboot, shutdown. */
  readonly state: ServerState;
  /** SPEC 5.5: where request handlers report the organizations they serve. */
  readonly organizations: OrganizationPresence;
  /** SPEC 10: API providers; `api.send(envelope)` is `POST /api` without HTTP. */
  readonly api: Automation['api'];
  /** SPEC 11: workflows; `workflow.register(name, definition)` adds one in code. */
  readonly workflow: Automation['workflow'];
  /** SPEC 12: webhook deliveries. */
  readonly webhooks: Automation['webhooks'];
  /** SPEC 6: the mesh between servers (links live in the primary; a worker's calls go through it). */
  readonly mesh: MeshApi;
  /** SPEC 14.3: `repositories` (each with its checkout) and `environment(url)`; primary only. */
  readonly repository: RepositoryService | undefined;
  /** SPEC 13: the parent connection (`send`, mirroring) and, on a platform server, `createServer` / `terminateServer`. */
  readonly manager: Manager;
  /** The HTTPS certificate this process presents, when HTTPS is configured. */
  readonly https: HttpsIdentity | undefined;
  private readonly envelopes: Envelopes;
  private readonly plugins = new PluginHost<Server>();

  constructor(
    identity: ServerIdentity,
    /** The event source of SPEC 1.7, shared with the runtime that emits supervision events. */
    events: ServerEmitter,
    private readonly facade: ProcessFacade,
    services: ServerServices,
  ) {
    super(events);
    ({ id: this.id, workerId: this.workerId, config: this.config, log: this.log } = identity);
    this.isPrimary = facade.isPrimary;
    ({ db: this.db, secrets: this.secrets, authorize: this.authorize, storage: this.storage, state: this.state } = services);
    ({ organizations: this.organizations, envelopes: this.envelopes, mesh: this.mesh, repository: this.repository, manager: this.manager, https: this.https } = services);
    ({ api: this.api, workflow: this.workflow, webhooks: this.webhooks } = services.automation);
  }

  /** Alias of `storage`. */
  get store(): ClusterStorage {
    return this.storage;
  }

  /** SPEC 5.1: deliver an envelope to its targets (validated now; delivery is not awaited). */
  send(envelope: unknown): Promise<void> {
    return this.envelopes.send(envelope);
  }

  /** SPEC 5.1: deliver and gather one reply per target; targets silent past `timeoutMs` are listed as missing. */
  request(envelope: unknown, options: { timeoutMs?: number } = {}): Promise<RequestResult> {
    return this.envelopes.request(envelope, options.timeoutMs);
  }

  /** Registers this process's handler of `method` (replaces an earlier one, built-ins included). */
  handle(method: string, handler: IpcHandler): void {
    this.envelopes.handle(method, handler);
  }

  /** The primary runtime (undefined in a forked worker). */
  get primaryRuntime() {
    return this.facade.primaryRuntime;
  }

  /** This process's worker runtime (single-process mode: the primary's own). */
  get workerRuntime() {
    return this.facade.workerRuntime;
  }

  /** Workers this server runs (the resolved count, or a plugin's override); 0 in single-process mode. */
  get totalWorkers(): number {
    return this.facade.totalWorkers;
  }

  /** Alias of `totalWorkers`. */
  get workerCount(): number {
    return this.totalWorkers;
  }

  get status() {
    return this.facade.status;
  }

  /** Bound ports (primary only). */
  get ports(): { http?: number; https?: number } {
    return this.facade.ports;
  }

  getHealth(): { ready: boolean; live: boolean; status: string } {
    return this.facade.getHealth();
  }

  getFleetHealth() {
    return this.facade.getFleetHealth();
  }

  getMetrics() {
    return this.facade.getMetrics();
  }

  /** Prometheus text aggregated over the primary and every worker. */
  metricsText(): Promise<string> {
    return this.facade.metricsText();
  }

  restartWorkers(options?: RestartWorkersOptions): Promise<void> {
    return this.facade.restartWorkers(options);
  }

  /**
   * Server-wide readiness: every worker's `/readyz` answers 503 (traffic is still served) until `setReady`.
   * From a worker, asks the primary.
   */
  setNotReady(): Promise<void> {
    return this.facade.setNotReady();
  }

  /** Undoes `setNotReady` (a no-op during shutdown; a tripped breaker keeps the server not ready). */
  setReady(): Promise<void> {
    return this.facade.setReady();
  }

  /** After fixing a crash loop's cause: restarts resume, missing workers are forked again, readiness returns. */
  resetCircuitBreaker(): Promise<void> {
    return this.facade.resetCircuitBreaker();
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
    if (!this.facade.forks) throw new Error('patchWorkerEnv(): only the primary forks workers');
    this.facade.forks.patchEnv(env);
    this.log.info({ plugin: this.plugins.current, keys: Object.keys(env) }, 'worker environment patched');
  }

  /** From a plugin's install(): run `count` workers (1 to 256) instead of the configured number. */
  overrideWorkerCount(count: number): void {
    this.plugins.assertOpen('overrideWorkerCount()');
    if (!this.facade.forks) throw new Error('overrideWorkerCount(): only the primary forks workers');
    const before = this.facade.totalWorkers;
    this.facade.forks.overrideCount(count);
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
    this.facade.onShutdown(hook);
  }

  /** Graceful shutdown of the whole server (from the primary) or of this worker. */
  shutdown(reason = 'shutdown'): Promise<void> {
    return this.facade.shutdown(reason);
  }
}
