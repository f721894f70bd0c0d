import type { Logger } from '../../logging/logger.js';
import type { ResolvedConfig } from '../../config/schema.js';
import type { Clock } from '../clock.js';
import type { RecycleReason } from '../events.js';
import type { PrimaryMetrics } from '../primary-metrics.js';
import { escalateUntilExit } from './escalation.js';
import { sendTo, setStatus, type FleetEvents, type WorkerRecord } from './worker-record.js';

export interface RetirementDeps {
  clock: Clock;
  log: Logger;
  events: FleetEvents;
  metrics: Pick<PrimaryMetrics, 'recycles'>;
  shutdown: Pick<ResolvedConfig['shutdown'], 'ackTimeoutMs' | 'timeoutMs' | 'sigtermDelayMs' | 'sigintDelayMs' | 'messagePrefix'>;
  /** The whole fleet is shutting down: no replacement is forked any more. */
  isStopping(): boolean;
  /** Forks a worker for the slot (throws when the fork fails). */
  forkReplacement(slot: number): WorkerRecord;
  /** A worker left rotation. */
  onLeftRotation(): void;
}

/** How workers are taken out: replaced first when they can keep serving meanwhile, always by a bounded drain. */
export class Retirement {
  constructor(private readonly deps: RetirementDeps) {}

  /**
   * Replacement first: fork the new worker and wait until it is ready while the old one keeps serving (a
   * wedged worker cannot, so it leaves rotation at once), then retire the old one. Resolves false when the old
   * worker was kept (its replacement never became ready: a restart or recycle never costs a serving worker).
   */
  async recycle(record: WorkerRecord, reason: RecycleReason): Promise<boolean> {
    if (record.retiring || record.replacing || this.deps.isStopping()) return false;
    record.replacing = reason;
    if (reason === 'wedged') record.retiring = reason;
    record.cancelAge?.();
    this.deps.metrics.recycles.inc({ reason });
    let replacementReady = false;
    try {
      replacementReady = await this.deps.forkReplacement(record.slot).ready;
    } catch (error) {
      this.deps.log.error({ err: error, worker: record.slot }, 'forking the replacement failed');
    }
    if (!replacementReady && reason !== 'wedged') {
      this.deps.log.warn({ worker: record.slot, reason }, 'replacement did not become ready: keeping the old worker');
      record.replacing = undefined;
      record.retiring = undefined;
      return false;
    }
    if (this.deps.isStopping()) return false;
    // clusterkit's order: `worker:draining` as the old worker leaves rotation, then `worker:recycle`, its drain
    // under way. Neither is announced while it still serves (nor at all when it is kept).
    this.takeOut(record, reason);
    this.deps.events.emitSafe('worker:recycle', { workerId: record.slot, pid: record.pid, reason });
    await this.stopped(record);
    return true;
  }

  /**
   * The bounded drain every retirement goes through: out of rotation, IPC shutdown, wait for the ACK, give
   * the worker the shutdown budget to finish in-flight work, then SIGTERM → SIGINT → SIGKILL. `told`: the
   * reason the worker hears (a hand-over's workers close their WebSockets with 1012 rather than 1001).
   */
  async retire(record: WorkerRecord, reason: RecycleReason | 'shutdown', told: string = reason): Promise<void> {
    this.takeOut(record, reason, told);
    await this.stopped(record);
  }

  /** Out of rotation (`worker:draining`) and asked to shut down. */
  private takeOut(record: WorkerRecord, reason: RecycleReason | 'shutdown', told: string = reason): void {
    record.retiring = reason;
    record.cancelAge?.();
    setStatus(record, 'draining', this.deps.events);
    this.deps.onLeftRotation();
    this.deps.events.emitSafe('worker:draining', { workerId: record.slot, pid: record.pid, reason });
    // `fp` marks it for the worker runtime; `type` is clusterkit's spelling, for worker code that watches for it.
    sendTo(record, { fp: 'shutdown', reason: told, type: `${this.deps.shutdown.messagePrefix}:shutdown` }, this.deps.log);
  }

  /** Waits for the ACK, gives the worker the shutdown budget, then escalates until it has exited. */
  private async stopped(record: WorkerRecord): Promise<void> {
    const { clock, log } = this.deps;
    const { ackTimeoutMs, timeoutMs, sigtermDelayMs, sigintDelayMs } = this.deps.shutdown;
    const acked = await Promise.race([record.exited.then(() => true), this.acknowledged(record, ackTimeoutMs)]);
    if (!acked) log.warn({ worker: record.slot, pid: record.pid }, 'worker did not acknowledge shutdown: escalating');
    const signal = await escalateUntilExit(
      { kill: (sig) => record.worker.kill(sig) },
      record.exited,
      { graceMs: acked ? timeoutMs : 0, sigtermDelayMs, sigintDelayMs },
      clock,
      (sig) => log.warn({ worker: record.slot, pid: record.pid, signal: sig }, 'escalating worker stop'),
    );
    if (signal) log.warn({ worker: record.slot, pid: record.pid, signal }, 'worker stopped by signal');
  }

  /** Resolves true once the worker acknowledged the shutdown, false after `ackTimeoutMs` without. */
  private acknowledged(record: WorkerRecord, ackTimeoutMs: number): Promise<boolean> {
    const { clock } = this.deps;
    return new Promise((resolve) => {
      const started = clock.now();
      const poll = () => {
        if (record.acked) return resolve(true);
        if (clock.now() - started >= ackTimeoutMs) return resolve(false);
        clock.setTimeout(poll, 20);
      };
      poll();
    });
  }
}
