import { servedHere, type ConnectionHandle } from './listeners.js';
import type { MetricsJson } from './metrics.js';
import type { PrimarySurface } from './primary-options.js';
import type { FleetHealth, WorkerPool } from './pool.js';
import type { WorkerStatus } from './status.js';
import type { WorkerRecord } from './fleet/worker-record.js';
import type { WorkerRuntime } from './worker.js';

/**
 * Single-process mode (`workers: 0`): the primary serves the app itself with one worker runtime, worker 0.
 * Nothing is forked, so nothing restarts, recycles, rolls or hands over.
 */
export class InProcessPool implements WorkerPool {
  readonly workerCount = 0;
  readonly target = 1;
  readonly breakerTripped = false;
  readonly restarting = false;
  readonly handsOver = false;
  readonly records: readonly WorkerRecord[] = [];

  constructor(private readonly worker: WorkerRuntime) {}

  get active(): number {
    return this.worker.status === 'ready' ? 1 : 0;
  }

  resize(): void {
    throw new Error('overrideWorkerCount(): this server runs in single-process mode (workers: 0), chosen when the config was resolved; set config.workers to a number instead');
  }

  /** The app runs in this process: the variables are set on `process.env` before it is built. */
  patchEnv(env: Record<string, string>): void {
    Object.assign(process.env, env);
  }

  async start(surface: PrimarySurface): Promise<void> {
    if (!surface.app) throw new Error('start(): single-process mode needs the app to serve');
    await this.worker.bind(true);
    this.worker.attach(await surface.app());
  }

  serve(handle: ConnectionHandle, secure: boolean): boolean {
    if (this.worker.status !== 'ready') return false;
    this.worker.accept(servedHere(handle), secure);
    return true;
  }

  fleetHealth(): FleetHealth {
    return { target: 1, active: this.active, quarantined: 0, breaker: { count: 0, tripped: false }, restartsPending: 0, workers: [] };
  }

  async metricsJson(): Promise<MetricsJson[]> {
    return [await this.worker.metricsJson()];
  }

  /** `/readyz` here is answered from the primary's own `getHealth()`: no worker to tell. */
  announceReadiness(): void {}

  resetCircuitBreaker(): void {}

  async restartWorkers(): Promise<void> {}

  slots(_worker?: number): number[] {
    return [0];
  }

  async setWorkerState(_slot: number, action: 'cordon' | 'drain', value: boolean): Promise<unknown[]> {
    return [action === 'cordon' ? this.worker.cordon(value) : await this.worker.drain(value)];
  }

  takesOutLast(_slots: readonly number[]): boolean {
    return this.worker.status === 'ready';
  }

  statuses(_slots: readonly number[]): WorkerStatus[] {
    return [this.worker.status];
  }

  beginShutdown(): void {}

  noneServing(): undefined {
    return undefined;
  }

  stop(_reason: 'shutdown' | 'handover', signal: string): Promise<void> {
    return this.worker.shutdown(signal);
  }
}
