import type { Clock } from './clock.js';

/**
 * A cordon or drain a control envelope asked for that waits for the readiness grace: the caller is answered
 * as the grace begins, and the change is applied when it ends (unless an undo cancels it meanwhile).
 */
export interface AcceptedAfterGrace {
  accepted: true;
  /** How long until it is applied: the readiness grace. */
  effectiveInMs: number;
}

export const isAcceptedAfterGrace = (value: unknown): value is AcceptedAfterGrace =>
  typeof value === 'object' && value !== null && (value as { accepted?: unknown }).accepted === true && typeof (value as { effectiveInMs?: unknown }).effectiveInMs === 'number';

/**
 * SPEC 1.3, the "pre-stop" pattern: before the last serving workers are taken out (cordon, drain, shutdown),
 * readiness turns off for `graceMs` while traffic is still served, so a load balancer polling `/readyz`
 * removes the node before any client meets the fallback's redirect. `graceMs` 0 turns it off.
 */
export class ReadinessGrace {
  private readonly waiting = new Set<{ settle: (elapsed: boolean) => void; cancelTimer: () => void }>();

  constructor(
    readonly graceMs: number,
    private readonly clock: Clock,
    /** Called when readiness flips (the first grace starts, the last one ends). */
    private readonly onChange: () => void,
  ) {}

  /** A grace (or the action after it) is running: every worker and the primary answer `/readyz` 503. */
  get active(): boolean {
    return this.holds > 0;
  }

  private holds = 0;

  /**
   * Turns readiness off, waits `graceMs` (nothing when it is off), runs `action` and turns readiness back on
   * once it is done. Resolves `undefined` without running `action` when `cancel()` came during the wait (the
   * operator changed their mind). `over`: the wait ends early when it settles (nothing left to protect).
   */
  async hold<T>(action: () => Promise<T>, over?: Promise<unknown>): Promise<T | undefined> {
    if (this.graceMs <= 0) return action();
    this.take();
    try {
      if (!(await this.wait(over))) return undefined;
      return await action();
    } finally {
      this.release();
    }
  }

  /** Ends every running wait without its action (an uncordon or undrain arrived meanwhile). */
  cancel(): void {
    for (const entry of [...this.waiting]) entry.settle(false);
  }

  private wait(over?: Promise<unknown>): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const entry = {
        settle: (elapsed: boolean) => {
          if (!this.waiting.delete(entry)) return;
          entry.cancelTimer();
          resolve(elapsed);
        },
        cancelTimer: () => {},
      };
      this.waiting.add(entry);
      entry.cancelTimer = this.clock.setTimeout(() => entry.settle(true), this.graceMs);
      void over?.then(() => entry.settle(true));
    });
  }

  private take(): void {
    if (++this.holds === 1) this.onChange();
  }

  private release(): void {
    if (--this.holds === 0) this.onChange();
  }
}
