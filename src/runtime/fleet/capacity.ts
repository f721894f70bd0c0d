import type { Logger } from '../../logging/logger.js';
import type { Clock } from '../clock.js';
import type { PrimaryMetrics } from '../primary-metrics.js';
import { acceptsTraffic } from '../status.js';
import { sendTo, type FleetEvents, type WorkerRecord } from './worker-record.js';

export interface CapacityDeps {
  clock: Clock;
  log: Logger;
  events: FleetEvents;
  metrics: Pick<PrimaryMetrics, 'workersActive' | 'workersTarget'>;
  records: readonly WorkerRecord[];
  /** Fewer workers than the target for this long fires `fleet:degraded`. */
  degradedAfterMs: number;
  target: number;
  /** Every slot serves again (at start, or after being degraded). */
  onComplete(): void;
}

/**
 * How many workers serve against how many should: the gauges, `fleet:degraded` once the fleet has been short
 * for `degradedAfterMs`, `fleet:recovered` when it is whole again, and the readiness workers report.
 */
export class Capacity {
  private targetCount: number;
  private degradedSince: number | undefined;
  private degradedNotified = false;
  private cancelDegraded: (() => void) | undefined;
  private wasComplete = false;
  private stopped = false;

  constructor(private readonly deps: CapacityDeps) {
    this.targetCount = deps.target;
    deps.metrics.workersTarget.set(deps.target);
  }

  /** Number of workers the fleet keeps running. */
  get target(): number {
    return this.targetCount;
  }

  resize(target: number): void {
    this.targetCount = target;
    this.deps.metrics.workersTarget.set(target);
  }

  /** Workers ready and not being taken out. */
  get active(): number {
    return this.deps.records.filter((record) => record.status === 'ready' && !record.retiring).length;
  }

  /** Whether taking these slots out would leave no worker taking traffic while some does now (SPEC 1.3). */
  takesOutLast(slots: readonly number[]): boolean {
    const serving = this.deps.records.filter((record) => acceptsTraffic(record.status) && !record.retiring);
    return serving.length > 0 && serving.every((record) => slots.includes(record.slot));
  }

  /** Tells every worker whether to report ready; new workers ask the primary when they become ready. */
  announceReadiness(ready: boolean): void {
    for (const record of this.deps.records) sendTo(record, { fp: 'fleet', ready }, this.deps.log);
  }

  /** Called after anything that may change the number of serving workers. */
  update(): void {
    const active = this.active;
    this.deps.metrics.workersActive.set(active);
    const target = this.targetCount;
    if (this.stopped) return;
    if (active >= target) {
      this.wasComplete = true;
      this.deps.onComplete();
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
      if (this.active < target && !this.stopped) {
        this.degradedNotified = true;
        this.deps.events.emitSafe('fleet:degraded', { target, active: this.active });
      }
    }, this.deps.degradedAfterMs);
  }

  /** A shutdown is not a degradation: no more events. */
  stop(): void {
    this.stopped = true;
    this.cancelDegraded?.();
  }
}
