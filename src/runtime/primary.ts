import { readFileSync } from 'node:fs';
import { systemClock, type Clock } from './clock.js';
import { Fleet, type RestartWorkersOptions, type WorkerRecord } from './fleet/fleet.js';
import { clusterForkPort } from './fleet/cluster-fork.js';
import { FallbackResponder } from './fallback.js';
import { Listeners, servedHere, type ConnectionHandle } from './listeners.js';
import { PrimaryMetrics } from './primary-metrics.js';
import { InProcessPool } from './in-process-pool.js';
import type { FleetHealth, WorkerPool } from './pool.js';
import type { RpcChannel } from './rpc.js';
import type { AnswerWorkers } from './channels.js';
import type { PrimaryMethod } from './protocol.js';
import type { ServerStatus } from './status.js';
import { runStoppedHooks, type StoppedHook } from './stopped-hooks.js';
import { ReadinessGrace, type AcceptedAfterGrace } from './readiness-grace.js';
import { WORKER_NODE_FLAGS, type PrimaryOptions, type PrimarySurface, type ShutdownHook } from './primary-options.js';
import { assertSafeEnv, nodeOptionsWarning } from '../config/guards.js';
import { handoverRefusal, type Handover } from './handover.js';
import { primaryHandover } from './handover-process.js';
import type { HandoverSuccessor } from './handover-successor.js';

export { WORKER_NODE_FLAGS, type PrimaryOptions, type PrimarySurface, type ShutdownHook } from './primary-options.js';

/**
 * The primary process: owns the listening sockets, hands each connection to its worker pool (or answers it
 * with the fallback), keeps readiness and coordinates graceful shutdown. The pool — the fleet of forked
 * workers, or the worker runtime in this process in single-process mode — is chosen once, here.
 */
export class PrimaryRuntime {
  readonly metrics = new PrimaryMetrics();
  readonly fallback: FallbackResponder;
  private readonly pool: WorkerPool;
  readonly startedAt = Date.now();
  /** SPEC 1.10: hands this primary's sockets to a new one started from the code on disk (`upgrade`, SIGUSR2). */
  readonly handover: Handover;
  ports: { http?: number; https?: number } = {};
  private readonly listeners: Listeners;
  private readonly shutdownHooks: ShutdownHook[] = [];
  private readonly stoppedHooks: StoppedHook[] = [];
  /** `setReady` / `setNotReady`: the operator's word, kept apart from the breaker and the shutdown. */
  private operatorReady = true;
  /** Set first thing in a shutdown, before any hook or listener runs (`shuttingDown` is assigned after). */
  private leaving = false;
  /** Set once a shutdown's readiness grace is over: new connections get the fallback from then on. */
  private closing = false;
  private started = false;
  private shuttingDown: Promise<void> | undefined;
  private readonly clock: Clock;

  constructor(private readonly options: PrimaryOptions) {
    const { config, log } = options;
    this.clock = options.clock ?? systemClock;
    this.grace = new ReadinessGrace(config.lifecycle.readinessGraceMs, this.clock, () => this.announceReadiness());
    const tls = config.https.key && config.https.cert ? { key: readFileSync(config.https.key), cert: readFileSync(config.https.cert) } : undefined;
    this.fallback = new FallbackResponder({
      serverId: options.serverId,
      redirect: config.fallback.redirect,
      retryAfterS: config.fallback.retryAfterS,
      status: () => this.status,
      tls,
      onAnswer: (status) => this.metrics.fallbackResponses.inc({ status: String(status) }),
    });
    this.listeners = new Listeners((socket, secure) => this.onConnection(socket, secure));
    this.pool = options.local ? new InProcessPool(options.local) : this.forkedPool();
    this.tlsEnabled = Boolean(tls);
    this.handover = primaryHandover(config, log, this.clock, this.listeners, {
      refusal: () => handoverRefusal({ fleet: this.pool.handsOver, started: this.started, stopping: Boolean(this.shuttingDown), rolling: this.pool.restarting }),
      retire: () => this.retire(),
    });
  }

  /** The workers this primary forks and supervises; its own process metrics are tracked beside theirs. */
  private forkedPool(): WorkerPool {
    const { config, log } = this.options;
    this.metrics.trackProcess();
    return new Fleet({
      config,
      manager: this.options.manager,
      serverId: this.options.serverId,
      target: this.options.workerCount,
      log,
      events: this.options.events,
      clock: this.clock,
      metrics: this.metrics,
      forkWorker: clusterForkPort({ exec: this.options.exec ?? process.argv[1], args: process.argv.slice(2), execArgv: [...WORKER_NODE_FLAGS, ...config.workers.execArgv] }),
      exitCode: {
        setExitCode: (code) => {
          process.exitCode = code;
        },
      },
      channels: this.options.channels,
      configureRpc: (rpc, record) => this.configureWorkerRpc(rpc, record),
      onUnrecoverable: (reason) => void this.exitUnrecoverable(reason),
      fleetReady: () => this.fleetReady,
      onReadinessChange: () => this.announceReadiness(),
    });
  }

  private readonly tlsEnabled: boolean;
  private readonly grace: ReadinessGrace;

  get status(): ServerStatus {
    if (this.shuttingDown) return 'stopping';
    if (!this.started) return 'starting';
    const { active, target } = this.pool;
    if (active === 0) return 'fallback';
    if (!this.fleetReady) return 'degraded';
    return active < target ? 'degraded' : 'ready';
  }

  /** Workers to run: the configured count, or a plugin's override; 0 in single-process mode. */
  get workerCount(): number {
    return this.pool.workerCount;
  }

  /** The forked workers, retiring ones included (none in single-process mode). */
  get workers(): readonly WorkerRecord[] {
    return this.pool.records;
  }

  /**
   * Whether serving workers answer `/readyz` 200: not set not-ready, breaker not tripped, not shutting down,
   * no readiness grace running.
   */
  private get fleetReady(): boolean {
    return this.operatorReady && !this.leaving && !this.pool.breakerTripped && !this.grace.active;
  }

  private announceReadiness(): void {
    this.pool.announceReadiness(this.fleetReady);
  }

  /** Before the workers are forked (plugins): a different number of workers, 1 to 256. */
  overrideWorkerCount(count: number): void {
    if (!Number.isInteger(count) || count < 1 || count > 256) {
      throw new RangeError(`overrideWorkerCount(${String(count)}): the worker count must be an integer from 1 to 256 (single-process mode, 0, is chosen by config.workers only)`);
    }
    if (this.started) throw new Error('overrideWorkerCount(): the workers were already forked');
    this.pool.resize(count);
  }

  /**
   * Before the workers are forked (plugins): variables merged into every worker's environment. In
   * single-process mode the app runs in this process, so they are set on `process.env` before it is built.
   */
  patchWorkerEnv(env: Record<string, string>): void {
    if (typeof env !== 'object' || env === null || Array.isArray(env)) throw new TypeError('patchWorkerEnv(): pass an object of environment variables');
    assertSafeEnv(env, 'patchWorkerEnv');
    if (this.started) throw new Error('patchWorkerEnv(): the workers were already forked');
    const warning = nodeOptionsWarning(env);
    if (warning) this.options.log.warn(warning.replace('workers.env', 'patchWorkerEnv'));
    this.pool.patchEnv(env);
  }

  /** Binds the public ports first (a port in use fails before any worker is forked), then starts the pool. */
  async start(surface: PrimarySurface = {}, successor?: HandoverSuccessor): Promise<void> {
    const { http, https } = this.options.config;
    this.fallback.serveAlso(surface);
    if (successor && this.pool.handsOver) {
      // After a hand-over (SPEC 1.10): the workers first, then the sockets handed over, once every worker is ready.
      await this.pool.start(surface);
      for (const socket of await successor.whenWorkersReady(this.pool, this.options.events)) this.ports[socket.role] = this.listeners.adopt(socket.handle, socket.role === 'https');
      this.started = true;
      return;
    }
    this.ports.http = await this.listeners.listen(http.port, http.host, false);
    if (this.tlsEnabled) this.ports.https = await this.listeners.listen(https.port, http.host, true);
    await this.pool.start(surface);
    this.started = true;
  }

  private onConnection(handle: ConnectionHandle, secure: boolean): void {
    // The worker went away between the pick and the send: the connection is still ours to answer.
    if (this.closing || !this.pool.serve(handle, secure, () => this.onConnection(handle, secure))) this.fallback.serve(servedHere(handle), secure);
  }

  /** Calls workers may make of the primary, for subsystems composed on top of the runtime. */
  handleWorkerRpc(method: PrimaryMethod, handler: (params: unknown, from: WorkerRecord) => unknown): void {
    this.workerRpc.set(method, handler);
    for (const record of this.pool.records) record.rpc.handle(method, (params) => handler(params, record));
  }

  private readonly workerRpc = new Map<PrimaryMethod, (params: unknown, from: WorkerRecord) => unknown>();

  /** `handleWorkerRpc` for subsystems that know a worker by its endpoint (storage, IPC, the organization map). */
  readonly answerWorkers: AnswerWorkers = (method, handler) => this.handleWorkerRpc(method, (params, from) => handler(params, from.endpoint));

  private configureWorkerRpc(rpc: RpcChannel, record: WorkerRecord): void {
    for (const [method, handler] of this.workerRpc) rpc.handle(method, (params) => handler(params, record));
    rpc.handle('primary.metrics', () => this.metricsText());
    rpc.handle('primary.restartWorkers', (params) => {
      const reason = typeof (params as { reason?: unknown })?.reason === 'string' ? (params as { reason: string }).reason : `requested by worker ${record.slot}`;
      // Answer at once: the caller may itself be replaced by this roll.
      void this.restartWorkers({ reason }).catch((error) => this.options.log.error({ err: error }, 'rolling restart failed'));
      return { started: true };
    });
    rpc.handle('primary.health', () => ({ ...this.getHealth(), fleet: this.getFleetHealth(), from: record.slot }));
    rpc.handle('primary.setReady', () => this.setReady());
    rpc.handle('primary.setNotReady', () => this.setNotReady());
    rpc.handle('primary.resetCircuitBreaker', () => this.resetCircuitBreaker());
  }

  onShutdown(hook: ShutdownHook): void {
    this.shutdownHooks.push(hook);
  }

  /** Runs last in a graceful shutdown, once every worker is gone: releasing what they shared (the store). */
  onStopped(hook: StoppedHook): void {
    this.stoppedHooks.push(hook);
  }

  getHealth() {
    return { ready: this.fleetReady && this.status !== 'fallback' && this.status !== 'starting', live: true, status: this.status };
  }

  getFleetHealth(): FleetHealth {
    return this.pool.fleetHealth();
  }

  getMetrics() {
    return {
      uptimeMs: this.clock.now() - this.startedAt,
      status: this.status,
      ...this.getFleetHealth(),
    };
  }

  /** Prometheus text over the primary and every worker (a worker that does not answer in 2 s is left out). */
  async metricsText(): Promise<string> {
    return this.metrics.text(await this.pool.metricsJson());
  }

  /** Every serving worker's `/readyz` answers 503 until `setReady` (traffic is still served). */
  setNotReady(): void {
    this.operatorReady = false;
    this.announceReadiness();
  }

  /** Undoes `setNotReady`; a no-op during shutdown. A tripped breaker keeps readiness off until it is reset. */
  setReady(): void {
    if (this.leaving) return;
    this.operatorReady = true;
    this.announceReadiness();
  }

  /** After fixing a crash loop's cause: restarts resume and missing workers are forked again. */
  resetCircuitBreaker(): void {
    if (this.leaving) return;
    this.pool.resetCircuitBreaker();
  }

  restartWorkers(options?: RestartWorkersOptions): Promise<void> {
    return this.pool.restartWorkers(options);
  }

  /**
   * Cordon or drain one worker (by number) or, without one, every worker of this server. When that takes out
   * the last workers serving, `/readyz` answers 503 for `lifecycle.readinessGraceMs` first while they still
   * serve, and the call resolves after it. Undoing (`value` false) cancels a grace still running: the
   * cordon or drain waiting for it is not applied.
   */
  async setWorkerState(action: 'cordon' | 'drain', value: boolean, worker?: number): Promise<unknown[]> {
    const change = this.beginWorkerState(action, value, worker);
    return (await change.done) ?? this.pool.statuses(change.slots);
  }

  /**
   * `setWorkerState` as a control envelope asks for it: answered once accepted. A change that waits for the
   * readiness grace answers `{ accepted: true, effectiveInMs }` as the grace begins and is applied when it ends.
   * An envelope's caller waits no longer than its timeout (5 s by default, as long as the default grace, and a
   * peer is given less), so an answer given after the grace came too late to count: the change was reported
   * failed ("no answer") while it was being carried out.
   */
  async acceptWorkerState(action: 'cordon' | 'drain', value: boolean, worker?: number): Promise<unknown[] | AcceptedAfterGrace> {
    const change = this.beginWorkerState(action, value, worker);
    if (!change.afterGrace) return (await change.done) ?? [];
    change.done.catch((error: unknown) => this.options.log.error({ err: error, action, value, worker }, `${action} after the readiness grace failed`));
    return { accepted: true, effectiveInMs: this.grace.graceMs };
  }

  private beginWorkerState(action: 'cordon' | 'drain', value: boolean, worker?: number): { slots: number[]; afterGrace: boolean; done: Promise<unknown[] | undefined> } {
    if (!value) this.grace.cancel();
    const slots = this.pool.slots(worker);
    const applyTo = async (slot: number) => {
      const results = await this.pool.setWorkerState(slot, action, value);
      // Announced once applied (a cordon the readiness grace cancelled never was); the worker announces its own.
      this.options.events.emitSafe(action, { value, worker: slot });
      return results;
    };
    const apply = async () => (await Promise.all(slots.map(applyTo))).flat();
    if (!value || !this.pool.takesOutLast(slots) || this.grace.graceMs <= 0) return { slots, afterGrace: false, done: apply() };
    return { slots, afterGrace: true, done: this.grace.hold(apply) };
  }

  installSignalHandlers(): void {
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGBREAK'] as const) process.on(signal, () => this.stopOnSignal(signal));
    process.on('SIGHUP', () => {
      this.options.log.info('SIGHUP: rolling restart of all workers');
      this.restartWorkers({ reason: 'SIGHUP' }).catch((error) => this.options.log.error({ err: error }, 'rolling restart failed'));
    });
    process.on('SIGUSR2', () => void this.handover.start('SIGUSR2').catch((error: Error) => this.options.log.warn({ reason: error.message }, 'SIGUSR2: no hand-over')));
  }

  /** A graceful shutdown, then exit 0 whatever the fleet went through before. */
  stopOnSignal(signal: NodeJS.Signals): void {
    void this.shutdown(signal).then(() => process.exit(0));
  }

  shutdown(signal = 'shutdown'): Promise<void> {
    this.shuttingDown ??= this.runShutdown(signal);
    return this.shuttingDown;
  }

  private async runShutdown(signal: string): Promise<void> {
    const { log, events } = this.options;
    const started = this.clock.now();
    this.leaving = true;
    // First, before any await: a worker that stops on the same signal (sent to the whole group) is no crash.
    this.pool.beginShutdown();
    log.info({ signal }, 'shutting down');
    events.emitSafe('shutdown:start', { signal });
    // Readiness off while the workers still serve, so load balancers stop sending before the fallback answers;
    // over early once none serves (they got the signal too): the fallback answers from then on either way.
    const serving = this.pool.active > 0;
    this.grace.cancel();
    if (serving) await this.grace.hold(async () => {}, this.pool.noneServing());
    this.closing = true;
    for (const hook of this.shutdownHooks) {
      try {
        await hook(signal);
      } catch (error) {
        log.error({ err: error }, 'shutdown hook failed');
      }
    }
    await this.pool.stop('shutdown', signal);
    this.listeners.close();
    await runStoppedHooks(this.stoppedHooks, log);
    events.emitSafe('shutdown:complete', { signal, durationMs: this.clock.now() - started });
    log.info({ signal, durationMs: this.clock.now() - started }, 'shutdown complete');
  }

  /** Hand-over committed: the new primary accepts; stop accepting here, drain the workers (WebSockets get 1012). */
  private retire(): Promise<void> {
    this.shuttingDown ??= (async () => {
      this.leaving = this.closing = true;
      this.listeners.close();
      this.grace.cancel();
      this.announceReadiness();
      await this.pool.stop('handover', 'handover');
    })();
    return this.shuttingDown;
  }

  private async exitUnrecoverable(reason: string): Promise<void> {
    this.options.log.fatal({ reason }, 'no worker left and none coming: exiting with code 1');
    this.listeners.close();
    process.exit(1);
  }
}
