import type { Logger } from '../../logging/logger.js';
import type { ResolvedConfig } from '../../config/schema.js';
import type { Clock } from '../clock.js';
import type { WorkerBoot, WorkerToPrimary } from '../messages.js';
import type { RpcChannel } from '../rpc.js';
import type { RecycleReason, ServerEmitter } from '../events.js';
import type { PrimaryMetrics } from '../primary-metrics.js';
import type { PrimaryChannels } from '../channels.js';
import type { ConnectionHandle } from '../listeners.js';
import type { MetricsJson } from '../metrics.js';
import type { FleetHealth, WorkerPool } from '../pool.js';
import type { WorkerStatus } from '../status.js';
import type { ExitCodeSink, ForkPort } from './ports.js';
import { sendTo, setStatus, type WorkerRecord } from './worker-record.js';
import { WorkerSpawner } from './spawner.js';
import { ConnectionBalancer } from './balancer.js';
import { Capacity } from './capacity.js';
import { HealthMonitor } from './health-monitor.js';
import { Retirement } from './retiring.js';
import { CrashRecovery } from './crash-recovery.js';
import { RollingRestart, type RestartWorkersOptions } from './rolling-restart.js';

export type { WorkerRecord } from './worker-record.js';
export type { RestartWorkersOptions } from './rolling-restart.js';

export interface WorkerFleetDeps {
  config: ResolvedConfig;
  /** The manager's connection the primary resolved, handed to each worker at fork. */
  manager: WorkerBoot['manager'];
  serverId: string;
  target: number;
  log: Logger;
  events: ServerEmitter;
  clock: Clock;
  metrics: PrimaryMetrics;
  /** How worker processes are started. */
  forkWorker: ForkPort;
  /** Where the exit code the primary should end with is kept. */
  exitCode: ExitCodeSink;
  channels: PrimaryChannels;
  /** The primary's handlers for calls workers make (metrics aggregation...); the fleet adds its own. */
  configureRpc(rpc: RpcChannel, record: WorkerRecord): void;
  /** No more workers will come: breaker tripped or forks exhausted, and the fleet is empty. */
  onUnrecoverable(reason: string): void;
  /** Whether workers should report ready (`/readyz` 200): asked when a worker becomes ready. */
  fleetReady(): boolean;
  /** The breaker tripped or was reset: workers must be told the new readiness. */
  onReadinessChange(): void;
}

/**
 * The supervised workers: forking, crash restarts with backoff and the circuit breaker, boot-loop quarantine,
 * health recycling (replacement first), rolling restarts and the bounded retire path they all share. Each of
 * those is a coordinator of its own; the fleet routes the workers' messages and exits between them.
 */
export class Fleet implements WorkerPool {
  readonly handsOver = true;
  readonly records: WorkerRecord[] = [];
  private readonly spawner: WorkerSpawner;
  private readonly balancer: ConnectionBalancer;
  private readonly capacity: Capacity;
  private readonly health: HealthMonitor;
  private readonly retirement: Retirement;
  private readonly recovery: CrashRecovery;
  private readonly rolling: RollingRestart;
  private stopping = false;
  private started = false;
  private servingWaiters: Array<() => void> = [];

  constructor(private readonly deps: WorkerFleetDeps) {
    const { config, clock, log, events, metrics, target } = deps;
    const records = this.records;
    const isStopping = () => this.stopping;
    this.spawner = new WorkerSpawner({
      config,
      manager: deps.manager,
      serverId: deps.serverId,
      fork: deps.forkWorker,
      clock,
      log,
      events,
      channels: deps.channels,
      target: () => this.capacity.target,
      configureRpc: (rpc, record) => this.configureRpc(rpc, record),
      receive: (record, message) => this.receive(record, message),
      exited: (record, code, signal) => this.onExit(record, code, signal),
      disconnected: (record) => this.balancer.rerouteUntaken(record),
    });
    this.balancer = new ConnectionBalancer(records);
    this.recovery = new CrashRecovery({
      clock,
      log,
      events,
      metrics,
      restart: config.restart,
      records,
      target,
      exitCode: deps.exitCode,
      fork: (slot) => this.spawn(slot),
      active: () => this.capacity.active,
      onReadinessChange: deps.onReadinessChange,
      onUnrecoverable: deps.onUnrecoverable,
      emitWarning: (message, code) => process.emitWarning(message, { code }),
    });
    this.capacity = new Capacity({
      clock,
      log,
      events,
      metrics,
      records,
      degradedAfterMs: config.health.degradedAfterMs,
      target,
      onComplete: () => this.recovery.fleetComplete(),
    });
    this.retirement = new Retirement({
      clock,
      log,
      events,
      metrics,
      shutdown: config.shutdown,
      isStopping,
      forkReplacement: (slot) => this.spawn(slot),
      onLeftRotation: () => this.capacityChanged(),
    });
    const { workers, health } = config;
    this.health = new HealthMonitor({
      clock,
      log,
      events,
      records,
      policy: { maxRssMb: workers.maxRssMb, maxEventLoopLagMs: health.maxEventLoopLagMs, lagRecycleBeats: health.lagRecycleBeats, lagSpikeMs: health.lagSpikeMs, wedgedTimeoutMs: health.wedgedTimeoutMs },
      heartbeatMs: health.heartbeatMs,
      maxAgeMs: workers.maxAgeMs,
      recycle: (record, reason) => void this.recycle(record, reason),
    });
    this.rolling = new RollingRestart({
      clock,
      events,
      records,
      isStopping,
      patchEnv: (env) => this.spawner.patchEnv(env),
      freshStart: () => this.recovery.freshStart(),
      recycle: (record, reason) => this.recycle(record, reason),
      log,
    });
  }

  /** Number of workers the fleet keeps running. */
  get target(): number {
    return this.capacity.target;
  }

  get workerCount(): number {
    return this.capacity.target;
  }

  /** Changes the worker count; only before `start` (a plugin's `overrideWorkerCount`). */
  resize(target: number): void {
    if (this.started) throw new Error('the worker count cannot change once the workers were forked');
    this.capacity.resize(target);
    this.recovery.resize(target);
  }

  /** Merges variables (already guarded) into the environment of every worker forked from now on. */
  patchEnv(env: Record<string, string>): void {
    this.spawner.patchEnv(env);
  }

  start(): void {
    this.started = true;
    for (const slot of this.recovery.slotNumbers) this.spawn(slot);
    this.health.start();
  }

  get active(): number {
    return this.capacity.active;
  }

  get breakerTripped(): boolean {
    return this.recovery.breakerTripped;
  }

  /** A rolling restart is running. */
  get restarting(): boolean {
    return this.rolling.running;
  }

  /** Round-robin over workers that take traffic; undefined when none does (→ fallback). */
  pickForConnection(): WorkerRecord | undefined {
    return this.balancer.pickForConnection();
  }

  /** Passes an accepted connection to the worker; `onFailure` serves it elsewhere if it could not be sent. */
  handOff(record: WorkerRecord, handle: ConnectionHandle, secure: boolean, onFailure: () => void): void {
    this.balancer.handOff(record, handle, secure, onFailure);
  }

  /** Picks a worker taking traffic and hands it the connection; `retry` when it went away before taking it. */
  serve(handle: ConnectionHandle, secure: boolean, retry: () => void): boolean {
    const record = this.pickForConnection();
    if (!record) return false;
    this.deps.metrics.handedConnections.inc();
    this.handOff(record, handle, secure, retry);
    return true;
  }

  fleetHealth(): FleetHealth {
    const now = this.deps.clock.now();
    return {
      target: this.capacity.target,
      active: this.capacity.active,
      ...this.recovery.state(now),
      workers: this.records.map((record) => ({
        worker: record.slot,
        pid: record.pid,
        status: record.status,
        retiring: record.retiring ?? null,
        uptimeMs: now - record.forkedAt,
        rss: record.health?.rss ?? null,
        heapUsed: record.health?.heapUsed ?? null,
        eventLoopLagMs: record.health?.lagMs ?? null,
      })),
    };
  }

  /** Every serving worker's metrics; one that does not answer in 2 s is left out. */
  async metricsJson(): Promise<MetricsJson[]> {
    const serving = this.records.filter((record) => record.readyAt !== undefined && !record.retiring);
    const results = await Promise.allSettled(serving.map((record) => record.rpc.call('worker.metrics', undefined, 2_000)));
    return results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  }

  slots(worker?: number): number[] {
    if (worker !== undefined) return [worker];
    return [...new Set(this.records.filter((record) => !record.retiring).map((record) => record.slot))];
  }

  statuses(slots: readonly number[]): WorkerStatus[] {
    return this.records.filter((record) => slots.includes(record.slot)).map((record) => record.status);
  }

  /** Whether taking these slots out would leave no worker taking traffic while some does now (SPEC 1.3). */
  takesOutLast(slots: readonly number[]): boolean {
    return this.capacity.takesOutLast(slots);
  }

  /** Sets a worker's status from the primary's side (cordon through the server API) and tells the worker. */
  async setWorkerState(slot: number, action: 'cordon' | 'drain', value: boolean): Promise<unknown[]> {
    const targets = this.records.filter((record) => record.slot === slot && !record.retiring);
    if (targets.length === 0) throw new Error(`worker ${slot} does not exist`);
    return Promise.all(
      targets.map((record) => {
        // Mirror first: no connection may be handed over between the call and the worker's answer.
        if (value && record.status === 'ready') setStatus(record, action === 'cordon' ? 'cordoned' : 'draining', this.deps.events);
        return record.rpc.call(`worker.${action}`, { value }, this.deps.config.shutdown.drainTimeoutMs + 5_000);
      }),
    );
  }

  /** Replacement first, then the bounded retire path; false when the old worker was kept. */
  recycle(record: WorkerRecord, reason: RecycleReason): Promise<boolean> {
    return this.retirement.recycle(record, reason);
  }

  restartWorkers(options: RestartWorkersOptions = {}): Promise<void> {
    return this.rolling.restartWorkers(options);
  }

  /** After fixing a crash loop's cause: crash window cleared, restarts resumed, missing slots refilled. */
  resetCircuitBreaker(): void {
    this.recovery.resetCircuitBreaker();
  }

  /** Tells every worker whether to report ready; new workers ask `fleetReady` when they become ready. */
  announceReadiness(ready: boolean): void {
    this.capacity.announceReadiness(ready);
  }

  /**
   * A shutdown began: from now on no worker is restarted, recycled or replaced, and a worker that leaves is
   * not a crash (Ctrl-C and a service manager's stop signal every worker too). The workers still serve while
   * the readiness grace runs; `stop` takes them out.
   */
  beginShutdown(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.recovery.stop();
    this.health.stop();
    this.capacity.stop();
  }

  /** Resolves once no worker takes traffic (at once when none does now). */
  noneServing(): Promise<void> {
    if (this.capacity.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.servingWaiters.push(resolve));
  }

  /** Stop restarting, retire every worker in parallel (`handover`: their WebSockets are told to reconnect, 1012). */
  async stop(reason: 'shutdown' | 'handover' = 'shutdown'): Promise<void> {
    this.beginShutdown();
    this.capacity.announceReadiness(false);
    await Promise.all(this.records.map((record) => (record.retiring === 'shutdown' ? record.exited : this.retirement.retire(record, 'shutdown', reason))));
  }

  private configureRpc(rpc: RpcChannel, record: WorkerRecord): void {
    this.deps.configureRpc(rpc, record);
    rpc.handle('primary.recycleWorker', () => {
      // Answer first: the caller is the worker being replaced.
      setImmediate(() => void this.recycle(record, 'restart'));
      return { recycling: record.slot };
    });
  }

  private spawn(slot: number): WorkerRecord {
    const record = this.spawner.spawn(slot);
    this.records.push(record);
    this.capacityChanged();
    return record;
  }

  private capacityChanged(): void {
    this.capacity.update();
    if (this.servingWaiters.length === 0 || this.capacity.active > 0) return;
    for (const resolve of this.servingWaiters.splice(0)) resolve();
  }

  private receive(record: WorkerRecord, message: WorkerToPrimary): void {
    const { events, log } = this.deps;
    switch (message.fp) {
      case 'ready':
        record.readyAt = this.deps.clock.now();
        this.recovery.workerReady(record.slot);
        if (!record.retiring) setStatus(record, 'ready', events);
        if (this.stopping || !this.deps.fleetReady()) sendTo(record, { fp: 'fleet', ready: false }, log);
        events.emitSafe('worker:ready', { workerId: record.slot, pid: record.pid });
        this.health.workerReady(record);
        this.capacityChanged();
        break;
      case 'status':
        // A retiring worker stays out of rotation whatever it reports.
        if (!record.retiring || message.status === 'stopping' || message.status === 'stopped') setStatus(record, message.status, events);
        this.capacityChanged();
        break;
      case 'health':
        this.health.onBeat(record, message);
        break;
      case 'taken':
        this.balancer.taken(record, message.id);
        break;
      case 'ack':
        record.acked = true;
        if (message.signal) record.stoppedOnSignal = message.signal;
        break;
      case 'rpc':
      case 'reply':
        void record.rpc.receive(message);
        break;
      case 'listening':
        this.deps.channels.listening(record.endpoint);
        break;
      case 'boot':
        // Answered by the spawner.
        break;
    }
  }

  private onExit(record: WorkerRecord, code: number | null, signal: string | null): void {
    const index = this.records.indexOf(record);
    if (index >= 0) this.records.splice(index, 1);
    record.cancelAge?.();
    record.rpc.closeAll(`worker ${record.slot} exited`);
    this.deps.channels.disconnected(record.endpoint);
    this.balancer.rerouteUntaken(record);
    setStatus(record, 'stopped', this.deps.events);
    const judge = () => {
      // A worker whose replacement is already booting needs no restart of its own.
      const graceful = record.retiring !== undefined || record.replacing !== undefined || this.stopping;
      this.deps.events.emitSafe('worker:exit', { workerId: record.slot, pid: record.pid, code, signal, graceful });
      this.capacityChanged();
      this.recovery.workerExited(record, code, signal, graceful);
    };
    if (this.stopping || record.retiring || record.replacing || !stoppedBySignal(record, code, signal)) return judge();
    // Ctrl-C and a service manager's stop signal the whole process group: the primary may not have handled
    // its own copy yet. Judge the exit once that copy has had the time to arrive.
    this.capacityChanged();
    this.deps.clock.setTimeout(judge, GROUP_SIGNAL_SETTLE_MS);
  }
}

/** How long a worker that stopped on a signal waits to be judged, in case the primary got the same signal. */
export const GROUP_SIGNAL_SETTLE_MS = 500;

/** The worker left on a stop signal: ended by it before it could handle it, or shut down cleanly after it. */
function stoppedBySignal(record: WorkerRecord, code: number | null, signal: string | null): boolean {
  return signal === 'SIGTERM' || signal === 'SIGINT' || (code === 0 && record.stoppedOnSignal !== undefined);
}
