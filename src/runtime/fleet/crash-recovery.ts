import type { Logger } from '../../logging/logger.js';
import type { ResolvedConfig } from '../../config/schema.js';
import type { Clock } from '../clock.js';
import type { PrimaryMetrics } from '../primary-metrics.js';
import { CrashTracker } from './crash-tracker.js';
import { RestartCoordinator } from './restart-coordinator.js';
import type { ExitCodeSink } from './ports.js';
import type { FleetEvents, WorkerRecord } from './worker-record.js';

interface SlotState {
  bootFailures: number;
  quarantined: boolean;
}

export interface CrashRecoveryDeps {
  clock: Clock;
  log: Logger;
  events: FleetEvents;
  metrics: Pick<PrimaryMetrics, 'restarts' | 'crashes' | 'breakerTripped'>;
  restart: ResolvedConfig['restart'];
  records: readonly WorkerRecord[];
  target: number;
  exitCode: ExitCodeSink;
  /** Forks a worker for the slot; throws when the fork itself fails. */
  fork(slot: number): { pid: number };
  /** Workers serving now. */
  active(): number;
  /** The breaker tripped or was reset: workers must be told the new readiness. */
  onReadinessChange(): void;
  /** No more workers will come: breaker tripped or forks exhausted, and the fleet is empty. */
  onUnrecoverable(reason: string): void;
  /** Process warning for a crash loop (`FleetplaneCrashLoop`), for whoever watches the primary's warnings. */
  emitWarning(message: string, code: string): void;
}

/**
 * Keeps every worker slot filled after crashes: restarts with backoff, the crash circuit breaker, boot-loop
 * quarantine, and the exit code (1 while the fleet cannot serve and no worker is coming back).
 */
export class CrashRecovery {
  private readonly slots = new Map<number, SlotState>();
  private readonly crashes: CrashTracker;
  private readonly restarts: RestartCoordinator;
  private forkEnvironmentDead = false;
  private failing = false;
  private stopped = false;

  constructor(private readonly deps: CrashRecoveryDeps) {
    const { restart } = deps;
    this.crashes = new CrashTracker(restart.crashThreshold, restart.crashWindowMs);
    this.restarts = new RestartCoordinator(
      {
        clock: deps.clock,
        fork: (slot) => deps.fork(slot),
        onRestart: (slot, pid, attempt, delayMs) => {
          deps.metrics.restarts.inc();
          deps.events.emitSafe('worker:restart', { workerId: slot, pid, attempt, delayMs });
        },
        onForkError: (slot, error) => deps.log.error({ err: error, worker: slot }, 'forking a worker failed'),
        onForkExhausted: (error) => {
          this.forkEnvironmentDead = true;
          deps.log.fatal({ err: error }, 'three forks in a row failed: giving up on restarts');
          this.fail();
          this.checkUnrecoverable('fork failures');
        },
      },
      restart,
    );
    this.resize(deps.target);
  }

  /** One slot per worker, numbered from 1. */
  resize(target: number): void {
    this.slots.clear();
    for (let slot = 1; slot <= target; slot++) this.slots.set(slot, { bootFailures: 0, quarantined: false });
  }

  get slotNumbers(): number[] {
    return [...this.slots.keys()];
  }

  get breakerTripped(): boolean {
    return this.crashes.tripped;
  }

  /** The supervision figures of `fleetHealth`. */
  state(now: number) {
    return {
      quarantined: [...this.slots.values()].filter((slot) => slot.quarantined).length,
      breaker: { count: this.crashes.count(now), tripped: this.crashes.tripped },
      restartsPending: this.restarts.pending.length,
    };
  }

  /** A worker booted: its slot's boot failures are forgiven, and the restart backoff may settle. */
  workerReady(slot: number): void {
    const state = this.slots.get(slot);
    if (state) state.bootFailures = 0;
    this.restarts.replacementReady();
  }

  /** Every slot serves: a failure exit code set while it could not is withdrawn. */
  fleetComplete(): void {
    if (this.failing && !this.crashes.tripped && !this.forkEnvironmentDead) {
      this.failing = false;
      this.deps.exitCode.setExitCode(0);
    }
  }

  /** A worker is gone; `graceful` when it was taken out (or the fleet is stopping), a crash otherwise. */
  workerExited(record: WorkerRecord, code: number | null, signal: string | null, graceful: boolean): void {
    if (graceful) {
      this.checkUnrecoverable('worker exited');
      return;
    }
    const { log, events, restart } = this.deps;
    const bootFailure = record.readyAt === undefined;
    const slot = this.slots.get(record.slot)!;
    log.error({ worker: record.slot, pid: record.pid, code, signal, bootFailure }, 'worker crashed');
    if (bootFailure) {
      slot.bootFailures++;
      // Quarantine only while others serve: a fleet that cannot boot at all is a crash loop for the breaker.
      if (restart.bootFailQuarantine > 0 && slot.bootFailures >= restart.bootFailQuarantine && this.deps.active() > 0) {
        slot.quarantined = true;
        log.error({ worker: record.slot, bootFailures: slot.bootFailures }, 'worker slot quarantined after repeated boot failures');
        events.emitSafe('worker:quarantined', { workerId: record.slot, consecutiveBootFailures: slot.bootFailures });
        return;
      }
    }
    this.deps.metrics.crashes.inc();
    events.emitSafe('worker:crash', { workerId: record.slot, pid: record.pid, code, signal, bootFailure });
    if (this.crashes.tripped) {
      this.checkUnrecoverable('circuit breaker tripped');
      return;
    }
    if (this.crashes.record(this.deps.clock.now())) {
      this.tripBreaker();
      return;
    }
    if (this.deps.records.filter((other) => !other.retiring).length === 0) this.fail();
    this.restarts.enqueue(record.slot);
  }

  /**
   * A rolling restart is the remedy for quarantine and for a tripped breaker: every slot gets a fresh boot,
   * quarantined slots are forked again at once.
   */
  freshStart(): void {
    for (const [slot, state] of this.slots) {
      const wasOut = state.quarantined;
      state.quarantined = false;
      state.bootFailures = 0;
      if (wasOut && !this.deps.records.some((record) => record.slot === slot)) this.deps.fork(slot);
    }
    if (this.crashes.tripped) this.resetCircuitBreaker();
  }

  /** After fixing a crash loop's cause: crash window cleared, restarts resumed, missing slots refilled. */
  resetCircuitBreaker(): void {
    // Refilling during a shutdown would fork workers into a server that is leaving.
    if (this.stopped) return;
    this.crashes.reset();
    this.deps.metrics.breakerTripped.set(0);
    this.restarts.resume();
    this.deps.onReadinessChange();
    for (const slot of this.missingSlots()) this.restarts.enqueue(slot);
  }

  /** The fleet is shutting down: no restart any more. */
  stop(): void {
    this.stopped = true;
    this.restarts.stop();
  }

  private tripBreaker(): void {
    const { crashThreshold, crashWindowMs } = this.deps.restart;
    this.restarts.stop();
    this.fail();
    this.deps.metrics.breakerTripped.set(1);
    this.deps.log.fatal({ crashes: crashThreshold, windowMs: crashWindowMs }, 'crash loop: circuit breaker tripped, restarts stopped');
    this.deps.emitWarning(`${crashThreshold} worker crashes within ${crashWindowMs} ms: restarts stopped`, 'FleetplaneCrashLoop');
    this.deps.events.emitSafe('circuit-breaker:tripped', { count: crashThreshold, windowMs: crashWindowMs });
    this.deps.onReadinessChange();
    this.checkUnrecoverable('circuit breaker tripped');
  }

  private fail(): void {
    this.failing = true;
    this.deps.exitCode.setExitCode(1);
  }

  private missingSlots(): number[] {
    return [...this.slots.entries()]
      .filter(([slot, state]) => !state.quarantined && !this.deps.records.some((record) => record.slot === slot))
      .map(([slot]) => slot);
  }

  private checkUnrecoverable(reason: string): void {
    if (this.stopped || this.deps.records.length > 0) return;
    if (this.crashes.tripped || this.forkEnvironmentDead) this.deps.onUnrecoverable(reason);
  }
}
