import cluster, { type Worker } from 'node:cluster';
import type { Logger } from '../logging/logger.js';
import type { ResolvedConfig } from '../config/schema.js';
import { assertSafeEnv } from '../config/guards.js';
import type { Clock } from './clock.js';
import { CrashTracker } from './crash-tracker.js';
import { RestartCoordinator } from './restart-coordinator.js';
import { judgeBeat, wedgedFor, type Beat, type BeatHistory } from './health-policy.js';
import { escalateUntilExit } from './escalation.js';
import { isInternalMessage, type PrimaryToWorker, type WorkerToPrimary } from './messages.js';
import { RpcChannel } from './rpc.js';
import type { RecycleReason, SafeEmitter } from './events.js';
import { acceptsTraffic, type WorkerStatus } from './status.js';
import type { PrimaryMetrics } from './metrics.js';
import type { PrimaryChannels, WorkerEndpoint } from './channels.js';
import type { ConnectionHandle } from './listeners.js';

export interface WorkerRecord {
  slot: number;
  pid: number;
  worker: Worker;
  status: WorkerStatus;
  forkedAt: number;
  readyAt?: number;
  lastBeatAt: number;
  health?: Beat;
  beats: BeatHistory;
  /** Why this worker is being taken out (recycle, rolling restart, shutdown); its exit is then graceful. */
  retiring?: RecycleReason | 'shutdown';
  /** A replacement is booting; this worker keeps serving until it is ready. */
  replacing?: RecycleReason;
  /** Connections sent to this worker whose hand-off has not completed, with how to re-route each. */
  handOffs: Map<ConnectionHandle, () => void>;
  acked: boolean;
  exited: Promise<void>;
  ready: Promise<boolean>;
  rpc: RpcChannel;
  endpoint: WorkerEndpoint;
  cancelAge?: () => void;
}

interface SlotState {
  bootFailures: number;
  quarantined: boolean;
}

export interface RestartWorkersOptions {
  env?: Record<string, string>;
  filter?: (workerId: number) => boolean;
  staggerMs?: number;
  reason?: string;
}

export interface FleetDeps {
  config: ResolvedConfig;
  serverId: string;
  target: number;
  log: Logger;
  events: SafeEmitter;
  clock: Clock;
  metrics: PrimaryMetrics;
  /** Script the workers run (default: the primary's own entry script). */
  exec?: string;
  channels: PrimaryChannels;
  /** The primary's handlers for calls workers make (metrics aggregation...). */
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
 * health recycling (replacement first), rolling restarts and the bounded retire path they all share.
 */
export class Fleet {
  readonly records: WorkerRecord[] = [];
  private readonly slots = new Map<number, SlotState>();
  private readonly crashes: CrashTracker;
  private readonly restarts: RestartCoordinator;
  private envOverlay: Record<string, string> = {};
  private stopping = false;
  private restartInProgress: Promise<void> | undefined;
  private degradedSince: number | undefined;
  private degradedNotified = false;
  private cancelDegraded: (() => void) | undefined;
  private cancelWedgedCheck: (() => void) | undefined;
  private forkEnvironmentDead = false;
  private wasComplete = false;
  private started = false;
  private targetCount: number;

  constructor(private readonly deps: FleetDeps) {
    this.targetCount = deps.target;
    const { restart } = deps.config;
    this.crashes = new CrashTracker(restart.crashThreshold, restart.crashWindowMs);
    this.restarts = new RestartCoordinator(
      {
        clock: deps.clock,
        fork: (slot) => this.fork(slot),
        onRestart: (slot, pid, attempt, delayMs) => {
          deps.metrics.restarts.inc();
          deps.events.emitSafe('worker:restart', { workerId: slot, pid, attempt, delayMs });
        },
        onForkError: (slot, error) => deps.log.error({ err: error, worker: slot }, 'forking a worker failed'),
        onForkExhausted: (error) => {
          this.forkEnvironmentDead = true;
          deps.log.fatal({ err: error }, 'three forks in a row failed: giving up on restarts');
          process.exitCode = 1;
          this.checkUnrecoverable('fork failures');
        },
      },
      restart,
    );
    this.resize(deps.target);
  }

  /** Number of workers the fleet keeps running. */
  get target(): number {
    return this.targetCount;
  }

  /** Changes the worker count; only before `start` (a plugin's `overrideWorkerCount`). */
  resize(target: number): void {
    if (this.started) throw new Error('the worker count cannot change once the workers were forked');
    this.targetCount = target;
    this.slots.clear();
    for (let slot = 1; slot <= target; slot++) this.slots.set(slot, { bootFailures: 0, quarantined: false });
    this.deps.metrics.workersTarget.set(target);
  }

  /** Merges variables (already guarded) into the environment of every worker forked from now on. */
  patchEnv(env: Record<string, string>): void {
    this.envOverlay = { ...this.envOverlay, ...env };
  }

  start(): void {
    this.started = true;
    for (const slot of this.slots.keys()) this.fork(slot);
    this.scheduleWedgedCheck();
  }

  get active(): number {
    return this.records.filter((record) => record.status === 'ready' && !record.retiring).length;
  }

  get breakerTripped(): boolean {
    return this.crashes.tripped;
  }

  /** Round-robin over workers that take traffic; undefined when none does (→ fallback). */
  private cursor = 0;
  pickForConnection(): WorkerRecord | undefined {
    const count = this.records.length;
    for (let step = 0; step < count; step++) {
      const record = this.records[(this.cursor + step) % count]!;
      if (acceptsTraffic(record.status) && !record.retiring && record.worker.isConnected()) {
        this.cursor = (this.cursor + step + 1) % count;
        return record;
      }
    }
    return undefined;
  }

  /**
   * Passes an accepted connection to the worker. Once the message carrying it is written, the worker has its
   * own copy and the primary closes its own, as Node's cluster round-robin does; if the send fails, the
   * connection is still only ours and `onFailure` serves it elsewhere.
   */
  handOff(record: WorkerRecord, handle: ConnectionHandle, secure: boolean, onFailure: () => void): void {
    const message: PrimaryToWorker = { fp: 'conn', secure };
    record.handOffs.set(handle, onFailure);
    record.worker.send(message, handle as never, (error) => {
      if (!record.handOffs.delete(handle)) return;
      if (error) onFailure();
      else handle.close();
    });
  }

  /**
   * Node sends one handle at a time and queues the rest; when the worker dies, queued handles are never sent
   * and their callbacks never run. They are still ours: give them to another worker.
   */
  private rerouteUnsent(record: WorkerRecord): void {
    const unsent = [...record.handOffs.values()];
    record.handOffs.clear();
    for (const reroute of unsent) reroute();
  }

  fleetHealth() {
    const now = this.deps.clock.now();
    return {
      target: this.targetCount,
      active: this.active,
      quarantined: [...this.slots.values()].filter((slot) => slot.quarantined).length,
      breaker: { count: this.crashes.count(now), tripped: this.crashes.tripped },
      restartsPending: this.restarts.pending.length,
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

  /** Whether taking these slots out would leave no worker taking traffic while some does now (SPEC 1.3). */
  takesOutLast(slots: readonly number[]): boolean {
    const serving = this.records.filter((record) => acceptsTraffic(record.status) && !record.retiring);
    return serving.length > 0 && serving.every((record) => slots.includes(record.slot));
  }

  /** Sets a worker's status from the primary's side (cordon through the server API) and tells the worker. */
  async setWorkerState(slot: number, action: 'cordon' | 'drain', value: boolean): Promise<unknown[]> {
    const targets = this.records.filter((record) => record.slot === slot && !record.retiring);
    if (targets.length === 0) throw new Error(`worker ${slot} does not exist`);
    return Promise.all(
      targets.map((record) => {
        // Mirror first: no connection may be handed over between the call and the worker's answer.
        if (value && record.status === 'ready') this.setStatus(record, action === 'cordon' ? 'cordoned' : 'draining');
        return record.rpc.call(`worker.${action}`, { value }, this.deps.config.shutdown.drainTimeoutMs + 5_000);
      }),
    );
  }

  fork(slot: number): { pid: number } {
    const env: Record<string, string> = {
      ...this.deps.config.workers.env,
      ...this.envOverlay,
      FLEETPLANE_INTERNAL_WORKER: String(slot),
      FLEETPLANE_INTERNAL_TOTAL_WORKERS: String(this.targetCount),
      FLEETPLANE_INTERNAL_CONFIG: JSON.stringify(this.deps.config),
      FLEETPLANE_INTERNAL_SERVER_ID: this.deps.serverId,
    };
    cluster.setupPrimary({ exec: this.deps.exec ?? process.argv[1], args: process.argv.slice(2), execArgv: this.deps.config.workers.execArgv, silent: false });
    const worker = cluster.fork(env);
    const now = this.deps.clock.now();
    let markReady: (ready: boolean) => void = () => {};
    let markExited: () => void = () => {};
    const record: WorkerRecord = {
      slot,
      pid: worker.process.pid ?? -1,
      worker,
      status: 'starting',
      forkedAt: now,
      lastBeatAt: now,
      beats: { laggyBeats: 0 },
      acked: false,
      handOffs: new Map(),
      ready: new Promise((resolve) => (markReady = resolve)),
      exited: new Promise((resolve) => (markExited = resolve)),
      rpc: new RpcChannel((message) => worker.send(message)),
      endpoint: {
        workerId: slot,
        pid: worker.process.pid ?? -1,
        get connected() {
          return worker.isConnected();
        },
        post: (message) => worker.send(message),
      },
    };
    this.deps.channels.connected(record.endpoint);
    this.deps.configureRpc(record.rpc, record);
    this.records.push(record);
    const readyTimeout = this.deps.clock.setTimeout(() => {
      if (record.readyAt === undefined && !record.retiring) {
        this.deps.log.error({ worker: slot, pid: record.pid }, 'worker not ready in time: killing it');
        worker.process.kill('SIGKILL');
      }
    }, this.deps.config.workers.readyTimeoutMs);
    worker.on('online', () => this.deps.events.emitSafe('worker:online', { workerId: slot, pid: record.pid }));
    worker.on('message', (message: unknown) => {
      if (isInternalMessage(message)) this.receive(record, message as WorkerToPrimary, markReady, readyTimeout);
    });
    worker.on('error', (error) => this.deps.log.warn({ err: error, worker: slot }, 'worker channel error'));
    worker.on('exit', (code, signal) => {
      readyTimeout();
      markReady(false);
      this.onExit(record, code, signal);
      markExited();
    });
    this.updateCapacity();
    return { pid: record.pid };
  }

  private receive(record: WorkerRecord, message: WorkerToPrimary, markReady: (ready: boolean) => void, cancelReadyTimeout: () => void): void {
    switch (message.fp) {
      case 'ready': {
        cancelReadyTimeout();
        record.readyAt = this.deps.clock.now();
        record.lastBeatAt = record.readyAt;
        const slot = this.slots.get(record.slot);
        if (slot) slot.bootFailures = 0;
        if (!record.retiring) this.setStatus(record, 'ready');
        if (this.stopping || !this.deps.fleetReady()) this.send(record, { fp: 'fleet', ready: false });
        this.deps.events.emitSafe('worker:ready', { workerId: record.slot, pid: record.pid });
        this.restarts.replacementReady();
        this.scheduleMaxAge(record);
        markReady(true);
        this.updateCapacity();
        break;
      }
      case 'status':
        // A retiring worker stays out of rotation whatever it reports.
        if (!record.retiring || message.status === 'stopping' || message.status === 'stopped') this.setStatus(record, message.status);
        this.updateCapacity();
        break;
      case 'health':
        this.onBeat(record, message);
        break;
      case 'ack':
        record.acked = true;
        break;
      case 'rpc':
      case 'reply':
        void record.rpc.receive(message);
        break;
      case 'ch':
        this.deps.channels.receive(record.endpoint, message);
        break;
    }
  }

  private onBeat(record: WorkerRecord, beat: Beat): void {
    record.lastBeatAt = this.deps.clock.now();
    record.health = { rss: beat.rss, heapUsed: beat.heapUsed, lagMs: beat.lagMs };
    this.deps.events.emitSafe('worker:health', { workerId: record.slot, pid: record.pid, rss: beat.rss, heapUsed: beat.heapUsed, eventLoopLagMs: beat.lagMs });
    if (record.retiring || record.replacing || this.stopping) return;
    const verdict = judgeBeat(this.policy(), record.beats, beat);
    if (verdict.recycle) {
      this.deps.log.warn({ worker: record.slot, pid: record.pid, detail: verdict.detail }, 'recycling worker');
      void this.recycle(record, verdict.reason);
    }
  }

  private policy() {
    const { workers, health } = this.deps.config;
    return { maxRssMb: workers.maxRssMb, maxEventLoopLagMs: health.maxEventLoopLagMs, lagRecycleBeats: health.lagRecycleBeats, lagSpikeMs: health.lagSpikeMs, wedgedTimeoutMs: health.wedgedTimeoutMs };
  }

  private scheduleWedgedCheck(): void {
    const { wedgedTimeoutMs, heartbeatMs } = this.deps.config.health;
    if (wedgedTimeoutMs <= 0) return;
    this.cancelWedgedCheck = this.deps.clock.setTimeout(() => {
      const now = this.deps.clock.now();
      for (const record of this.records) {
        if (record.retiring || record.replacing || record.readyAt === undefined) continue;
        const silentMs = wedgedFor(this.policy(), record.lastBeatAt, now);
        if (silentMs > 0) {
          this.deps.events.emitSafe('worker:wedged', { workerId: record.slot, pid: record.pid, silentMs });
          this.deps.log.warn({ worker: record.slot, pid: record.pid, silentMs }, 'worker wedged: recycling');
          void this.recycle(record, 'wedged');
        }
      }
      if (!this.stopping) this.scheduleWedgedCheck();
    }, Math.max(50, Math.min(heartbeatMs, wedgedTimeoutMs / 2)));
  }

  private scheduleMaxAge(record: WorkerRecord): void {
    const { maxAgeMs } = this.deps.config.workers;
    if (maxAgeMs <= 0) return;
    record.cancelAge = this.deps.clock.setTimeout(() => void this.recycle(record, 'maxAge'), maxAgeMs);
  }

  /**
   * Replacement first: fork the new worker and wait until it is ready while the old one keeps serving (a
   * wedged worker cannot, so it leaves rotation at once), then retire the old one.
   */
  async recycle(record: WorkerRecord, reason: RecycleReason): Promise<void> {
    if (record.retiring || record.replacing || this.stopping) return;
    record.replacing = reason;
    if (reason === 'wedged') record.retiring = reason;
    record.cancelAge?.();
    this.deps.metrics.recycles.inc({ reason });
    this.deps.events.emitSafe('worker:recycle', { workerId: record.slot, pid: record.pid, reason });
    let replacementReady = false;
    try {
      const { pid } = this.fork(record.slot);
      const replacement = this.records.find((candidate) => candidate.pid === pid);
      replacementReady = replacement ? await replacement.ready : false;
    } catch (error) {
      this.deps.log.error({ err: error, worker: record.slot }, 'forking the replacement failed');
    }
    if (!replacementReady && reason !== 'wedged' && reason !== 'restart') {
      this.deps.log.warn({ worker: record.slot, reason }, 'replacement did not become ready: keeping the old worker');
      record.replacing = undefined;
      record.retiring = undefined;
      return;
    }
    if (this.stopping) return;
    await this.retire(record, reason);
  }

  /**
   * The bounded drain every retirement goes through: out of rotation, IPC shutdown, wait for the ACK, give
   * the worker the shutdown budget to finish in-flight work, then SIGTERM → SIGINT → SIGKILL.
   */
  async retire(record: WorkerRecord, reason: RecycleReason | 'shutdown'): Promise<void> {
    record.retiring = reason;
    record.cancelAge?.();
    this.setStatus(record, 'draining');
    this.updateCapacity();
    this.deps.events.emitSafe('worker:draining', { workerId: record.slot, pid: record.pid, reason });
    this.send(record, { fp: 'shutdown', reason });
    const { ackTimeoutMs, timeoutMs, sigtermDelayMs, sigintDelayMs } = this.deps.config.shutdown;
    const acked = await Promise.race([
      record.exited.then(() => true),
      new Promise<boolean>((resolve) => {
        const started = this.deps.clock.now();
        const poll = () => {
          if (record.acked) return resolve(true);
          if (this.deps.clock.now() - started >= ackTimeoutMs) return resolve(false);
          this.deps.clock.setTimeout(poll, 20);
        };
        poll();
      }),
    ]);
    if (!acked) this.deps.log.warn({ worker: record.slot, pid: record.pid }, 'worker did not acknowledge shutdown: escalating');
    const signal = await escalateUntilExit(
      { kill: (sig) => record.worker.process.kill(sig) },
      record.exited,
      { graceMs: acked ? timeoutMs : 0, sigtermDelayMs, sigintDelayMs },
      this.deps.clock,
      (sig) => this.deps.log.warn({ worker: record.slot, pid: record.pid, signal: sig }, 'escalating worker stop'),
    );
    if (signal) this.deps.log.warn({ worker: record.slot, pid: record.pid, signal }, 'worker stopped by signal');
  }

  async restartWorkers(options: RestartWorkersOptions = {}): Promise<void> {
    if (this.restartInProgress) return this.restartInProgress;
    if (options.env) assertSafeEnv(options.env, 'env');
    this.restartInProgress = this.runRollingRestart(options).finally(() => {
      this.restartInProgress = undefined;
    });
    return this.restartInProgress;
  }

  private async runRollingRestart(options: RestartWorkersOptions): Promise<void> {
    const reason = options.reason ?? 'restart';
    const started = this.deps.clock.now();
    if (options.env) this.envOverlay = { ...this.envOverlay, ...options.env };
    const selected = this.records.filter((record) => !record.retiring && !record.replacing && (options.filter?.(record.slot) ?? true));
    const slots = selected.map((record) => record.slot);
    this.deps.events.emitSafe('restart:start', { workers: slots, reason });
    // A roll is the remedy for quarantine and for a tripped breaker: every slot gets a fresh boot.
    for (const [slot, state] of this.slots) {
      const wasOut = state.quarantined;
      state.quarantined = false;
      state.bootFailures = 0;
      if (wasOut && !this.records.some((record) => record.slot === slot)) this.fork(slot);
    }
    if (this.crashes.tripped) this.resetCircuitBreaker();
    for (const [index, record] of selected.entries()) {
      if (this.stopping) break;
      if (index > 0 && options.staggerMs) await new Promise((resolve) => this.deps.clock.setTimeout(() => resolve(undefined), options.staggerMs!));
      await this.recycle(record, 'restart');
    }
    this.deps.events.emitSafe('restart:complete', { workers: slots, reason, durationMs: this.deps.clock.now() - started });
  }

  /** After fixing a crash loop's cause: crash window cleared, restarts resumed, missing slots refilled. */
  resetCircuitBreaker(): void {
    // Refilling during a shutdown would fork workers into a server that is leaving.
    if (this.stopping) return;
    this.crashes.reset();
    this.deps.metrics.breakerTripped.set(0);
    this.restarts.resume();
    this.deps.onReadinessChange();
    for (const slot of this.missingSlots()) this.restarts.enqueue(slot);
  }

  /** Tells every worker whether to report ready; new workers ask `fleetReady` when they become ready. */
  announceReadiness(ready: boolean): void {
    for (const record of this.records) this.send(record, { fp: 'fleet', ready });
  }

  /** Stop restarting, retire every worker in parallel. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.restarts.stop();
    this.cancelWedgedCheck?.();
    this.cancelDegraded?.();
    for (const record of this.records) this.send(record, { fp: 'fleet', ready: false });
    await Promise.all(this.records.map((record) => (record.retiring === 'shutdown' ? record.exited : this.retire(record, 'shutdown'))));
  }

  private missingSlots(): number[] {
    return [...this.slots.entries()]
      .filter(([slot, state]) => !state.quarantined && !this.records.some((record) => record.slot === slot))
      .map(([slot]) => slot);
  }

  private onExit(record: WorkerRecord, code: number | null, signal: string | null): void {
    const index = this.records.indexOf(record);
    if (index >= 0) this.records.splice(index, 1);
    record.cancelAge?.();
    record.rpc.closeAll(`worker ${record.slot} exited`);
    this.deps.channels.disconnected(record.endpoint);
    this.rerouteUnsent(record);
    // A worker whose replacement is already booting needs no restart of its own.
    const graceful = record.retiring !== undefined || record.replacing !== undefined || this.stopping;
    this.setStatus(record, 'stopped');
    this.deps.events.emitSafe('worker:exit', { workerId: record.slot, pid: record.pid, code, signal, graceful });
    this.updateCapacity();
    if (graceful) {
      this.checkUnrecoverable('worker exited');
      return;
    }
    const bootFailure = record.readyAt === undefined;
    const slot = this.slots.get(record.slot)!;
    this.deps.log.error({ worker: record.slot, pid: record.pid, code, signal, bootFailure }, 'worker crashed');
    if (bootFailure) {
      slot.bootFailures++;
      const { bootFailQuarantine } = this.deps.config.restart;
      // Quarantine only while others serve: a fleet that cannot boot at all is a crash loop for the breaker.
      if (bootFailQuarantine > 0 && slot.bootFailures >= bootFailQuarantine && this.active > 0) {
        slot.quarantined = true;
        this.deps.log.error({ worker: record.slot, bootFailures: slot.bootFailures }, 'worker slot quarantined after repeated boot failures');
        this.deps.events.emitSafe('worker:quarantined', { workerId: record.slot, consecutiveBootFailures: slot.bootFailures });
        return;
      }
    }
    this.deps.metrics.crashes.inc();
    this.deps.events.emitSafe('worker:crash', { workerId: record.slot, pid: record.pid, code, signal, bootFailure });
    const now = this.deps.clock.now();
    if (this.crashes.tripped) {
      this.checkUnrecoverable('circuit breaker tripped');
      return;
    }
    if (this.crashes.record(now)) {
      this.restarts.stop();
      process.exitCode = 1;
      this.deps.metrics.breakerTripped.set(1);
      const { crashThreshold, crashWindowMs } = this.deps.config.restart;
      this.deps.log.fatal({ crashes: crashThreshold, windowMs: crashWindowMs }, 'crash loop: circuit breaker tripped, restarts stopped');
      process.emitWarning(`${crashThreshold} worker crashes within ${crashWindowMs} ms: restarts stopped`, { code: 'FleetplaneCrashLoop' });
      this.deps.events.emitSafe('circuit-breaker:tripped', { count: crashThreshold, windowMs: crashWindowMs });
      this.deps.onReadinessChange();
      this.checkUnrecoverable('circuit breaker tripped');
      return;
    }
    if (this.records.filter((other) => !other.retiring).length === 0) process.exitCode = 1;
    this.restarts.enqueue(record.slot);
  }

  private checkUnrecoverable(reason: string): void {
    if (this.stopping || this.records.length > 0) return;
    if (this.crashes.tripped || this.forkEnvironmentDead) this.deps.onUnrecoverable(reason);
  }

  private updateCapacity(): void {
    const active = this.active;
    this.deps.metrics.workersActive.set(active);
    const target = this.targetCount;
    if (this.stopping) return;
    if (active >= target) {
      this.wasComplete = true;
      if (this.crashes.tripped === false && process.exitCode === 1 && !this.forkEnvironmentDead) process.exitCode = 0;
      this.cancelDegraded?.();
      this.cancelDegraded = undefined;
      if (this.degradedNotified) {
        this.deps.events.emitSafe('fleet:recovered', { target, active, degradedDurationMs: this.deps.clock.now() - (this.degradedSince ?? 0) });
      }
      this.degradedSince = undefined;
      this.degradedNotified = false;
      return;
    }
    if (this.degradedSince !== undefined) return;
    // Starting up is not degraded: only count from the first time the fleet was complete.
    if (!this.wasComplete) return;
    this.degradedSince = this.deps.clock.now();
    this.cancelDegraded = this.deps.clock.setTimeout(() => {
      if (this.active < target && !this.stopping) {
        this.degradedNotified = true;
        this.deps.events.emitSafe('fleet:degraded', { target, active: this.active });
      }
    }, this.deps.config.health.degradedAfterMs);
  }

  private setStatus(record: WorkerRecord, status: WorkerStatus): void {
    if (record.status === status) return;
    const oldStatus = record.status;
    record.status = status;
    this.deps.events.emitSafe('status_change', { worker: record.slot, oldStatus, newStatus: status });
  }

  private send(record: WorkerRecord, message: PrimaryToWorker): void {
    if (!record.worker.isConnected()) return;
    try {
      record.worker.send(message);
    } catch (error) {
      this.deps.log.debug({ err: error, worker: record.slot }, 'message to worker not sent');
    }
  }
}
