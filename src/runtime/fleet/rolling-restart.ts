import { assertSafeEnv } from '../../config/guards.js';
import { sleep, type Clock } from '../clock.js';
import type { RecycleReason } from '../events.js';
import type { FleetEvents, WorkerRecord } from './worker-record.js';

export interface RestartWorkersOptions {
  env?: Record<string, string>;
  filter?: (workerId: number) => boolean;
  staggerMs?: number;
  reason?: string;
}

export interface RollingRestartDeps {
  clock: Clock;
  events: FleetEvents;
  records: readonly WorkerRecord[];
  isStopping(): boolean;
  /** Merges variables into the environment of every worker forked from now on. */
  patchEnv(env: Record<string, string>): void;
  /** Quarantined slots and a tripped breaker get a fresh start. */
  freshStart(): void;
  /** Resolves false when the old worker was kept because its replacement never became ready. */
  recycle(record: WorkerRecord, reason: RecycleReason): Promise<boolean>;
  log: { warn(fields: object, message: string): void };
}

/**
 * Replaces the selected workers one after the other, each replacement first; one roll at a time. A replacement
 * that does not become ready stops the roll: the old worker and the ones not yet rolled keep serving.
 */
export class RollingRestart {
  private inProgress: Promise<void> | undefined;

  constructor(private readonly deps: RollingRestartDeps) {}

  get running(): boolean {
    return this.inProgress !== undefined;
  }

  /** A roll asked for while one runs joins it. */
  restartWorkers(options: RestartWorkersOptions = {}): Promise<void> {
    if (this.inProgress) return this.inProgress;
    if (options.env) assertSafeEnv(options.env, 'env');
    this.inProgress = this.roll(options).finally(() => {
      this.inProgress = undefined;
    });
    return this.inProgress;
  }

  private async roll(options: RestartWorkersOptions): Promise<void> {
    const { clock, events } = this.deps;
    const reason = options.reason ?? 'restart';
    const started = clock.now();
    if (options.env) this.deps.patchEnv(options.env);
    const selected = this.deps.records.filter((record) => !record.retiring && !record.replacing && (options.filter?.(record.slot) ?? true));
    const slots = selected.map((record) => record.slot);
    events.emitSafe('restart:start', { workers: slots, reason });
    this.deps.freshStart();
    for (const [index, record] of selected.entries()) {
      if (this.deps.isStopping()) break;
      if (index > 0 && options.staggerMs) await sleep(clock, options.staggerMs);
      if (!record.retiring && !record.replacing && !(await this.deps.recycle(record, 'restart'))) {
        if (this.deps.isStopping()) break;
        const kept = selected.slice(index).map((left) => left.slot);
        this.deps.log.warn({ worker: record.slot, kept }, 'rolling restart stopped: the replacement did not become ready, the old workers keep serving');
        break;
      }
    }
    events.emitSafe('restart:complete', { workers: slots, reason, durationMs: clock.now() - started });
  }
}
