import type { ConnectionHandle } from './listeners.js';
import type { MetricsJson } from './metrics.js';
import type { PrimarySurface } from './primary-options.js';
import type { WorkerStatus } from './status.js';
import type { RestartWorkersOptions } from './fleet/rolling-restart.js';
import type { WorkerRecord } from './fleet/worker-record.js';

/** SPEC 1.4: the workers' side of `getFleetHealth()`. */
export interface FleetHealth {
  target: number;
  active: number;
  quarantined: number;
  breaker: { count: number; tripped: boolean };
  restartsPending: number;
  workers: Array<{
    worker: number;
    pid: number;
    status: WorkerStatus;
    retiring: NonNullable<WorkerRecord['retiring']> | null;
    uptimeMs: number;
    rss: number | null;
    heapUsed: number | null;
    eventLoopLagMs: number | null;
  }>;
}

/**
 * What serves the primary's connections, chosen once when the primary is built: the fleet of forked workers
 * (`fleet/fleet.ts`) or, in single-process mode (`workers: 0`), the worker runtime in the primary itself
 * (`in-process-pool.ts`). The primary keeps the ports, the fallback, readiness and the shutdown's order;
 * everything about the workers themselves is the pool's.
 */
export interface WorkerPool {
  /** Forked workers: the configured count or a plugin's override; 0 when the primary serves itself. */
  readonly workerCount: number;
  /** Workers the pool means to have serving; fewer active ones leave the server degraded. */
  readonly target: number;
  /** Workers taking traffic now. */
  readonly active: number;
  readonly breakerTripped: boolean;
  /** A rolling restart is running. */
  readonly restarting: boolean;
  /** Whether a new primary can take these workers' place (SPEC 1.10): forked workers can, the primary itself cannot. */
  readonly handsOver: boolean;
  /** The forked workers' records (none in the primary itself). */
  readonly records: readonly WorkerRecord[];

  /** Changes the worker count; only before `start`. */
  resize(count: number): void;
  /** Merges variables (already guarded) into the environment the workers start with. */
  patchEnv(env: Record<string, string>): void;
  start(surface: PrimarySurface): void | Promise<void>;
  /** Gives an accepted connection to a worker taking traffic; false when none does (the caller answers it). */
  serve(handle: ConnectionHandle, secure: boolean, retry: () => void): boolean;
  fleetHealth(): FleetHealth;
  /** Every serving worker's metrics (one that does not answer in time is left out). */
  metricsJson(): Promise<MetricsJson[]>;
  /** Tells every worker whether to report ready. */
  announceReadiness(ready: boolean): void;
  resetCircuitBreaker(): void;
  restartWorkers(options?: RestartWorkersOptions): Promise<void>;

  /** The worker numbers a cordon or drain addresses: `worker`, or every worker when it is undefined. */
  slots(worker?: number): number[];
  setWorkerState(slot: number, action: 'cordon' | 'drain', value: boolean): Promise<unknown[]>;
  /** Whether taking these slots out would leave no worker taking traffic while some does now (SPEC 1.3). */
  takesOutLast(slots: readonly number[]): boolean;
  statuses(slots: readonly number[]): WorkerStatus[];

  /** A shutdown began: no worker is restarted or replaced from now on; they still serve until `stop`. */
  beginShutdown(): void;
  /** Settles once no worker takes traffic; undefined when the pool cannot tell (the grace runs its length). */
  noneServing(): Promise<void> | undefined;
  /** Takes every worker out (`handover`: their WebSockets are told to reconnect). */
  stop(reason: 'shutdown' | 'handover', signal: string): Promise<void>;
}
