import type { Logger } from '../../logging/logger.js';
import type { Clock } from '../clock.js';
import type { RecycleReason } from '../events.js';
import type { Beat } from '../heartbeat.js';
import { judgeBeat, wedgedFor, type HealthPolicy } from './health-policy.js';
import type { FleetEvents, WorkerRecord } from './worker-record.js';

export interface HealthMonitorDeps {
  clock: Clock;
  log: Logger;
  events: FleetEvents;
  records: readonly WorkerRecord[];
  policy: HealthPolicy;
  /** Interval of the workers' heartbeats (the wedged check runs at least this often). */
  heartbeatMs: number;
  /** A worker older than this is recycled (0 = never). */
  maxAgeMs: number;
  /** Replaces the worker (replacement first). */
  recycle(record: WorkerRecord, reason: RecycleReason): void;
}

/** Reads the workers' heartbeats and decides when one must be recycled: memory, lag, silence, age. */
export class HealthMonitor {
  private cancelWedgedCheck: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly deps: HealthMonitorDeps) {}

  start(): void {
    this.scheduleWedgedCheck();
  }

  /** A worker reached ready: its silence counts from now, and its age limit starts. */
  workerReady(record: WorkerRecord): void {
    record.lastBeatAt = record.readyAt ?? this.deps.clock.now();
    const { maxAgeMs } = this.deps;
    if (maxAgeMs <= 0) return;
    record.cancelAge = this.deps.clock.setTimeout(() => this.deps.recycle(record, 'maxAge'), maxAgeMs);
  }

  onBeat(record: WorkerRecord, beat: Beat): void {
    record.lastBeatAt = this.deps.clock.now();
    record.health = { rss: beat.rss, heapUsed: beat.heapUsed, lagMs: beat.lagMs };
    this.deps.events.emitSafe('worker:health', { workerId: record.slot, pid: record.pid, rss: beat.rss, heapUsed: beat.heapUsed, eventLoopLagMs: beat.lagMs });
    if (record.retiring || record.replacing || this.stopped) return;
    const verdict = judgeBeat(this.deps.policy, record.beats, beat);
    if (verdict.recycle) {
      this.deps.log.warn({ worker: record.slot, pid: record.pid, detail: verdict.detail }, 'recycling worker');
      this.deps.recycle(record, verdict.reason);
    }
  }

  stop(): void {
    this.stopped = true;
    this.cancelWedgedCheck?.();
  }

  private scheduleWedgedCheck(): void {
    const { heartbeatMs, policy } = this.deps;
    if (policy.wedgedTimeoutMs <= 0) return;
    this.cancelWedgedCheck = this.deps.clock.setTimeout(() => {
      const now = this.deps.clock.now();
      for (const record of this.deps.records) {
        if (record.retiring || record.replacing || record.readyAt === undefined) continue;
        const silentMs = wedgedFor(policy, record.lastBeatAt, now);
        if (silentMs > 0) {
          this.deps.events.emitSafe('worker:wedged', { workerId: record.slot, pid: record.pid, silentMs });
          this.deps.log.warn({ worker: record.slot, pid: record.pid, silentMs }, 'worker wedged: recycling');
          this.deps.recycle(record, 'wedged');
        }
      }
      if (!this.stopped) this.scheduleWedgedCheck();
    }, Math.max(50, Math.min(heartbeatMs, policy.wedgedTimeoutMs / 2)));
  }
}
