import type { Clock } from '../clock.js';
import { Backoff, type BackoffOptions } from './backoff.js';

export interface RestartDeps {
  clock: Clock;
  /** Forks a replacement for the slot; throws when the fork itself fails (EMFILE, ENOMEM...). */
  fork(slot: number): { pid: number };
  onRestart(slot: number, pid: number, attempt: number, delayMs: number): void;
  /** Three forks in a row failed: the environment cannot fork any more. */
  onForkExhausted(error: unknown): void;
  onForkError(slot: number, error: unknown): void;
}

export const MAX_CONSECUTIVE_FORK_FAILURES = 3;

/**
 * Replaces crashed workers one at a time through a queue, waiting the current backoff before each fork.
 * The backoff is cluster-wide and resets only after a replacement stayed up for the stability window without
 * another crash, so a flapping fleet stays conservative.
 */
export class RestartCoordinator {
  private readonly queue: number[] = [];
  private readonly backoff: Backoff;
  private busy = false;
  private stopped = false;
  private forkFailures = 0;
  private cancelStability: (() => void) | undefined;
  private cancelPending: (() => void) | undefined;

  private readonly stabilityWindowMs: number;

  constructor(
    private readonly deps: RestartDeps,
    options: BackoffOptions & { stabilityWindowMs: number },
  ) {
    this.backoff = new Backoff(options);
    this.stabilityWindowMs = options.stabilityWindowMs;
  }

  get pending(): readonly number[] {
    return this.queue;
  }

  get currentAttempt(): number {
    return this.backoff.attempt;
  }

  enqueue(slot: number): void {
    if (this.stopped || this.queue.includes(slot)) return;
    this.queue.push(slot);
    this.cancelStability?.();
    this.cancelStability = undefined;
    this.pump();
  }

  /** A replacement reached ready: start the stability window that resets the backoff. */
  replacementReady(): void {
    this.cancelStability?.();
    if (this.stabilityWindowMs === 0) {
      this.backoff.reset();
      return;
    }
    this.cancelStability = this.deps.clock.setTimeout(() => {
      this.cancelStability = undefined;
      if (this.queue.length === 0) this.backoff.reset();
    }, this.stabilityWindowMs);
  }

  /** Drops queued restarts and refuses new ones (breaker tripped, shutdown). */
  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    this.cancelPending?.();
    this.cancelStability?.();
    this.busy = false;
  }

  resume(): void {
    this.stopped = false;
    this.forkFailures = 0;
  }

  private pump(): void {
    if (this.busy || this.stopped || this.queue.length === 0) return;
    this.busy = true;
    const delayMs = this.backoff.next();
    const attempt = this.backoff.attempt;
    this.cancelPending = this.deps.clock.setTimeout(() => {
      this.cancelPending = undefined;
      const slot = this.queue.shift();
      if (slot === undefined || this.stopped) {
        this.busy = false;
        return;
      }
      try {
        const { pid } = this.deps.fork(slot);
        this.forkFailures = 0;
        this.deps.onRestart(slot, pid, attempt, delayMs);
      } catch (error) {
        this.forkFailures++;
        this.deps.onForkError(slot, error);
        if (this.forkFailures >= MAX_CONSECUTIVE_FORK_FAILURES) {
          this.stop();
          this.deps.onForkExhausted(error);
          return;
        }
        this.queue.unshift(slot);
      }
      this.busy = false;
      this.pump();
    }, delayMs);
  }
}
