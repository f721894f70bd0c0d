import type { PrimaryRuntime } from './primary.js';
import type { WorkerRuntime } from './worker.js';
import type { RestartWorkersOptions } from './fleet/fleet.js';
import type { ServerStatus, WorkerStatus } from './status.js';

import type { FleetHealth } from './pool.js';

/**
 * The process facade: what the server object asks of the process it runs in. The primary answers from its
 * own runtime; a worker answers what it knows itself and asks the primary for the rest over RPC.
 */
export interface ProcessFacade {
  readonly isPrimary: boolean;
  /** The primary runtime (undefined in a forked worker). */
  readonly primaryRuntime: PrimaryRuntime | undefined;
  /** This process's worker runtime (single-process mode: the primary's own). */
  readonly workerRuntime: WorkerRuntime | undefined;
  readonly totalWorkers: number;
  readonly status: ServerStatus | WorkerStatus;
  readonly ports: { http?: number; https?: number };
  getHealth(): { ready: boolean; live: boolean; status: string };
  getFleetHealth(): Promise<FleetHealth>;
  getMetrics(): ReturnType<PrimaryRuntime['getMetrics']> | ReturnType<WorkerRuntime['describe']>;
  metricsText(): Promise<string>;
  restartWorkers(options?: RestartWorkersOptions): Promise<void>;
  setNotReady(): Promise<void>;
  setReady(): Promise<void>;
  resetCircuitBreaker(): Promise<void>;
  onShutdown(hook: (reason: string) => void | Promise<void>): void;
  shutdown(reason: string): Promise<void>;
  /** The primary's fork settings, which plugins may shape before the workers are forked. */
  readonly forks: { patchEnv(env: Record<string, string>): void; overrideCount(count: number): void } | undefined;
}

/** The primary process: everything is answered here. */
export class PrimaryFacade implements ProcessFacade {
  readonly isPrimary = true;
  readonly forks;

  constructor(
    private readonly primary: PrimaryRuntime,
    private readonly local: WorkerRuntime | undefined,
  ) {
    this.forks = {
      patchEnv: (env: Record<string, string>) => primary.patchWorkerEnv(env),
      overrideCount: (count: number) => primary.overrideWorkerCount(count),
    };
  }

  get primaryRuntime(): PrimaryRuntime {
    return this.primary;
  }

  get workerRuntime(): WorkerRuntime | undefined {
    return this.local;
  }

  get totalWorkers(): number {
    return this.primary.workerCount;
  }

  get status(): ServerStatus {
    return this.primary.status;
  }

  get ports() {
    return this.primary.ports;
  }

  getHealth() {
    return this.primary.getHealth();
  }

  async getFleetHealth(): Promise<FleetHealth> {
    return this.primary.getFleetHealth();
  }

  getMetrics() {
    return this.primary.getMetrics();
  }

  metricsText(): Promise<string> {
    return this.primary.metricsText();
  }

  restartWorkers(options?: RestartWorkersOptions): Promise<void> {
    return this.primary.restartWorkers(options);
  }

  async setNotReady(): Promise<void> {
    this.primary.setNotReady();
  }

  async setReady(): Promise<void> {
    this.primary.setReady();
  }

  async resetCircuitBreaker(): Promise<void> {
    this.primary.resetCircuitBreaker();
  }

  onShutdown(hook: (reason: string) => void | Promise<void>): void {
    this.primary.onShutdown(hook);
  }

  shutdown(reason: string): Promise<void> {
    return this.primary.shutdown(reason);
  }
}

/** A forked worker: its own status and health; server-wide questions and actions go to the primary. */
export class WorkerFacade implements ProcessFacade {
  readonly isPrimary = false;
  readonly primaryRuntime = undefined;
  readonly ports = {};
  readonly forks = undefined;

  constructor(
    private readonly worker: WorkerRuntime,
    /** The number of workers when this one was forked. */
    readonly totalWorkers: number,
  ) {}

  get workerRuntime(): WorkerRuntime {
    return this.worker;
  }

  get status(): WorkerStatus {
    return this.worker.status;
  }

  getHealth() {
    return { ready: this.worker.ready, live: true, status: this.worker.status };
  }

  async getFleetHealth(): Promise<FleetHealth> {
    const reply = await this.worker.rpc.call('primary.health');
    return reply.fleet;
  }

  getMetrics() {
    return this.worker.describe();
  }

  metricsText(): Promise<string> {
    return this.worker.rpc.call('primary.metrics', undefined, 5_000);
  }

  async restartWorkers(options?: RestartWorkersOptions): Promise<void> {
    await this.worker.rpc.call('primary.restartWorkers', { reason: options?.reason });
  }

  async setNotReady(): Promise<void> {
    await this.worker.rpc.call('primary.setNotReady');
  }

  async setReady(): Promise<void> {
    await this.worker.rpc.call('primary.setReady');
  }

  async resetCircuitBreaker(): Promise<void> {
    await this.worker.rpc.call('primary.resetCircuitBreaker');
  }

  onShutdown(hook: (reason: string) => void | Promise<void>): void {
    this.worker.onShutdown(hook);
  }

  shutdown(reason: string): Promise<void> {
    return this.worker.shutdown(reason);
  }
}
