import type { Socket } from 'node:net';
import type { Logger } from '../logging/logger.js';
import type { ResolvedConfig } from '../config/schema.js';
import type { ServedApp } from './served-app.js';
import { ConnectionTracker } from './connections.js';
import { startHeartbeat } from './heartbeat.js';
import { isInternalMessage, type PrimaryToWorker, type WorkerToPrimary } from './messages.js';
import { RpcChannel, type WorkerEnd } from './rpc.js';
import { primaryResultChecks, refuseFromPrimary, workerMethodChecks } from './protocol.js';
import { RateLimitedWarnings } from '../logging/rate-limited.js';
import type { ServerEmitter } from './events.js';
import type { WorkerStatus } from './status.js';
import type { MetricsJson } from './metrics.js';
import { HttpMetrics } from './http-metrics.js';
import { runStoppedHooks, type StoppedHook } from './stopped-hooks.js';
import { socketOf, type ConnectionHandle } from './listeners.js';
import { IncompleteHeaders } from './incomplete-headers.js';
import { IncompleteBodies } from './incomplete-bodies.js';
import { TrustedProxies, normalizeAddress } from '../auth/client-address.js';
import { settleWhenQuiet, takeCollector, type Collector } from './settle-memory.js';
import { systemClock } from './clock.js';

export type ShutdownHook = (reason: string) => void | Promise<void>;

/**
 * The worker side of the runtime: serves the connections the primary hands over, reports health and status,
 * cordons and drains on request, and shuts down gracefully when told (or when the primary disappears).
 */
export class WorkerRuntime {
  readonly rpc: WorkerEnd;
  readonly connections = new ConnectionTracker();
  readonly incompleteHeaders: IncompleteHeaders;
  readonly incompleteBodies: IncompleteBodies;
  private currentStatus: WorkerStatus = 'starting';
  private app: ServedApp | undefined;
  private fleetReady = true;
  private stopping: Promise<void> | undefined;
  private inProcess = false;
  private readonly readyGates: Array<() => Promise<void>> = [];
  private stopHeartbeat: () => void = () => {};
  /** The full collection a forked worker may ask for once, when quiet after it is ready (see settle-memory.ts). */
  private collector: Collector | undefined;
  private stopSettling: () => void = () => {};
  private readonly shutdownHooks: ShutdownHook[] = [];
  private readonly refused = new RateLimitedWarnings({ max: 5, windowMs: 60_000, what: 'malformed messages from the primary', log: { warn: (fields, message) => this.log.warn(fields, message) } });
  private readonly stoppedHooks: StoppedHook[] = [];
  readonly startedAt = Date.now();
  /** Requests this process answered, by route pattern (counted by the HTTP layer, with plain numbers). */
  readonly httpMetrics = new HttpMetrics();
  /** The metrics library's registry of this process, built by the first scrape (see `metricsJson`). */
  private registry: Promise<{ getMetricsAsJSON(): Promise<unknown> }> | undefined;

  constructor(
    readonly config: ResolvedConfig,
    readonly workerId: number,
    private readonly log: Logger,
    private readonly events: ServerEmitter,
    private readonly post: (message: WorkerToPrimary) => void = (message) => process.send?.(message),
  ) {
    this.rpc = new RpcChannel((message) => this.post(message), {
      methods: workerMethodChecks,
      results: primaryResultChecks,
      refused: (reason) => this.refused.warn(this.log, { reason }, 'refused a malformed message from the primary'),
    });
    // The primary's cordon or drain of this worker, announced here once applied (the primary announces its own).
    this.rpc.handle('worker.cordon', (params) => this.announced('cordon', params, (value) => this.cordon(value)));
    this.rpc.handle('worker.drain', (params) => this.announced('drain', params, (value) => this.drain(value)));
    this.rpc.handle('worker.status', () => this.describe());
    this.rpc.handle('worker.metrics', () => this.metricsJson());
    const proxies = new TrustedProxies(config.http.trustProxy);
    const exempt = (address: string) => proxies.trusts(normalizeAddress(address));
    this.incompleteHeaders = new IncompleteHeaders({ maxPerAddress: config.http.maxIncompletePerAddress, exempt });
    this.incompleteBodies = new IncompleteBodies({ timeoutMs: config.http.bodyTimeoutMs, maxPerAddress: config.http.maxIncompletePerAddress, exempt });
  }

  get status(): WorkerStatus {
    return this.currentStatus;
  }

  /** Ready to serve and the fleet is not out of service (breaker tripped, shutting down). */
  get ready(): boolean {
    return this.currentStatus === 'ready' && this.fleetReady;
  }

  describe() {
    return {
      worker: this.workerId,
      pid: process.pid,
      status: this.currentStatus,
      uptimeMs: Date.now() - this.startedAt,
      connections: this.connections.size,
    };
  }

  /**
   * This process's metrics as they travel to the primary. The metrics library is loaded by the first scrape,
   * so a worker nobody scrapes never holds it: its process series (CPU, memory, event loop, GC) start then, the
   * request counts were kept from the start. prom-client declares `type` an enum; it is the type's name.
   */
  async metricsJson(): Promise<MetricsJson> {
    this.registry ??= import('./metrics.js').then(({ createWorkerRegistry }) => {
      const registry = createWorkerRegistry({ worker: String(this.workerId) });
      this.httpMetrics.register(registry);
      return registry;
    });
    return (await (await this.registry).getMetricsAsJSON()) as MetricsJson;
  }

  onShutdown(hook: ShutdownHook): void {
    this.shutdownHooks.push(hook);
  }

  /** Runs last in a graceful shutdown, once the app is closed: releasing what the app used (the store). */
  onStopped(hook: StoppedHook): void {
    this.stoppedHooks.push(hook);
  }

  /** Work that must finish before this worker reports ready (e.g. the storage snapshot). */
  beforeReady(gate: () => Promise<void>): void {
    this.readyGates.push(gate);
  }

  /**
   * Binds this process before the app is built. In a forked worker (`inProcess` false): messages from the
   * primary, signals, heartbeats, and exit at the end of shutdown; in single-process mode the primary owns
   * all of that and calls `accept` and `receive` itself. Then tells the primary that this worker listens (every
   * subsystem registered its handlers before), and runs the ready gates.
   */
  async bind(inProcess = false): Promise<void> {
    this.inProcess = inProcess;
    if (!inProcess) this.bindProcess();
    this.post({ fp: 'listening' });
    for (const gate of this.readyGates) await gate();
  }

  /** Starts serving `app` and tells the primary this worker is ready. */
  attach(app: ServedApp): void {
    this.app = app;
    for (const server of [app.http, app.https]) {
      if (!server) continue;
      server.keepAliveTimeout = this.config.http.keepAliveTimeoutMs;
      // Read by Node's connection check on each round (armed by `armConnectionChecks`).
      server.headersTimeout = this.config.http.headersTimeoutMs;
      this.connections.track(server);
      this.incompleteHeaders.track(server);
      this.incompleteBodies.track(server);
    }
    this.setStatus('ready');
    this.post({ fp: 'ready' });
    if (this.collector) this.stopSettling = settleWhenQuiet({ collect: this.collector, clock: systemClock });
  }

  private bindProcess(): void {
    // The fleet starts workers with `--expose-gc` (WORKER_NODE_FLAGS); the global stays only if the operator asked for it.
    this.collector = takeCollector(this.config.workers.execArgv.some((flag) => /^--expose[-_]gc$/.test(flag)));
    process.on('message', (message: unknown, handle: unknown) => this.receive(message, handle as ConnectionHandle | undefined));
    // The primary is gone (killed, crashed): serve what is in flight and leave rather than linger as an orphan.
    process.on('disconnect', () => void this.shutdown('primary disconnected'));
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.on(signal, () => {
        if (this.stopping) {
          // A second signal is the primary escalating: stop waiting.
          process.exit(1);
        }
        void this.shutdown(signal, signal);
      });
    }
    // SIGHUP is the primary's rolling restart; a terminal hang-up sends it to the whole group, and its default
    // action would end every worker at once. The primary replaces this worker in turn.
    process.on('SIGHUP', () => {});
    if (this.config.health.heartbeatMs > 0) {
      this.stopHeartbeat = startHeartbeat(this.config.health.heartbeatMs, (beat) => this.post({ fp: 'health', ...beat }));
    }
  }

  private async announced<T>(action: 'cordon' | 'drain', params: unknown, apply: (value: boolean) => T | Promise<T>): Promise<T> {
    const value = Boolean((params as { value?: unknown })?.value);
    const result = await apply(value);
    this.events.emitSafe(action, { value, worker: this.workerId });
    return result;
  }

  /** SPEC 3.2: a cordoned worker gets no new connections; open ones keep being served. */
  cordon(value: boolean): WorkerStatus {
    if (this.stopping) return this.currentStatus;
    if (value && this.currentStatus === 'ready') this.setStatus('cordoned');
    if (!value && (this.currentStatus === 'cordoned' || this.currentStatus === 'draining')) {
      this.connections.stopClosing();
      this.setStatus('ready');
    }
    return this.currentStatus;
  }

  /** SPEC 3.3: cordon, then end connections gracefully; resolves when none remain or the drain timeout passes. */
  async drain(value: boolean): Promise<{ status: WorkerStatus; remaining: number }> {
    if (!value) {
      this.cordon(false);
      return { status: this.currentStatus, remaining: this.connections.size };
    }
    if (!this.stopping) this.setStatus('draining');
    await this.connections.drain(this.config.shutdown.drainTimeoutMs);
    return { status: this.currentStatus, remaining: this.connections.size };
  }

  /** `signal`: the shutdown was started by a signal this process received (not by the primary's request). */
  shutdown(reason: string, signal?: NodeJS.Signals): Promise<void> {
    this.stopping ??= this.runShutdown(reason, signal);
    return this.stopping;
  }

  private async runShutdown(reason: string, signal?: NodeJS.Signals): Promise<void> {
    // The primary tells a group signal (Ctrl-C, a service manager's stop) from a crash by this.
    this.post(signal ? { fp: 'ack', signal } : { fp: 'ack' });
    this.setStatus('stopping', reason);
    this.stopHeartbeat();
    this.stopSettling();
    this.log.info({ reason }, 'worker shutting down');
    const budget = Math.min(this.config.shutdown.drainTimeoutMs, this.config.shutdown.timeoutMs);
    const drained = await this.connections.drain(budget);
    if (!drained) this.log.warn({ remaining: this.connections.size }, 'connections still open at the shutdown deadline');
    for (const hook of this.shutdownHooks) {
      try {
        await hook(reason);
      } catch (error) {
        this.log.error({ err: error }, 'shutdown hook failed');
      }
    }
    try {
      await this.app?.close();
    } catch (error) {
      this.log.error({ err: error }, 'closing the application failed');
    }
    this.connections.destroyAll();
    await runStoppedHooks(this.stoppedHooks, this.log);
    this.setStatus('stopped');
    if (!this.inProcess) process.exit(0);
  }

  receive(message: unknown, handle?: ConnectionHandle | Socket): void {
    if (!isInternalMessage(message)) return;
    const refused = refuseFromPrimary(message);
    if (refused) {
      this.refused.warn(this.log, { reason: refused }, 'refused a malformed message from the primary');
      // A connection that came with it is nobody's: closed rather than leaked.
      if (handle) socketOf(handle).destroy();
      return;
    }
    const internal = message as PrimaryToWorker;
    switch (internal.fp) {
      case 'conn':
        // The primary passes the accepted connection's raw handle (see `Listeners`), and keeps its own copy
        // until told it arrived: confirmed before a byte is read, so the primary can re-route it if this
        // process dies with the message unread.
        if (!handle) break;
        this.post({ fp: 'taken', id: internal.id });
        this.accept(socketOf(handle), internal.secure);
        break;
      case 'shutdown':
        void this.shutdown(internal.reason);
        break;
      case 'fleet':
        this.fleetReady = internal.ready;
        break;
      case 'rpc':
      case 'reply':
        void this.rpc.receive(internal);
        break;
    }
  }

  accept(socket: Socket | undefined, secure: boolean): void {
    if (!socket) return;
    const server = secure ? this.app?.https : this.app?.http;
    if (!server) {
      socket.destroy();
      return;
    }
    server.emit('connection', socket);
    socket.resume();
  }

  private setStatus(status: WorkerStatus, reason?: string): void {
    if (status === this.currentStatus) return;
    const oldStatus = this.currentStatus;
    this.currentStatus = status;
    this.events.emitSafe('status_change', { worker: this.workerId, oldStatus, newStatus: status, ...(reason ? { reason } : {}) });
    try {
      this.post({ fp: 'status', status });
    } catch {
      // the primary is gone; `disconnect` handles that
    }
  }
}
