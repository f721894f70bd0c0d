import type { Clock } from '../runtime/clock.js';
import { systemClock } from '../runtime/clock.js';

interface WarnLog {
  warn(fields: object, message: string): void;
}

export interface RateLimitedWarningsOptions {
  /** Lines written per window; past that, lines are only counted. */
  max: number;
  windowMs: number;
  /** What is counted, for the summary line: `websocket protocol errors`. */
  what: string;
  /** Where the summary line goes. */
  log: WarnLog;
  clock?: Clock;
}

/**
 * Warnings that an unauthenticated client can cause at will (a malformed frame, say) must not let it flood
 * the log: at most `max` lines per window, then one summary line saying how many were left out.
 */
export class RateLimitedWarnings {
  private readonly clock: Clock;
  private windowStartMs = Number.NEGATIVE_INFINITY;
  private written = 0;
  private suppressed = 0;
  private cancelSummary: (() => void) | undefined;

  constructor(private readonly options: RateLimitedWarningsOptions) {
    this.clock = options.clock ?? systemClock;
  }

  /** Writes the line on `log` (a request's logger, say) unless this window's quota is spent. */
  warn(log: WarnLog, fields: object, message: string): void {
    const now = this.clock.now();
    if (now - this.windowStartMs >= this.options.windowMs) {
      // The summary timer may not have run yet: the old window's count is reported before the new window starts.
      this.summarize();
      this.windowStartMs = now;
      this.written = 0;
    }
    if (this.written < this.options.max) {
      this.written++;
      log.warn(fields, message);
      return;
    }
    if (this.suppressed++ === 0) {
      this.cancelSummary = this.clock.setTimeout(() => this.summarize(), this.windowStartMs + this.options.windowMs - now);
    }
  }

  private summarize(): void {
    this.cancelSummary?.();
    this.cancelSummary = undefined;
    if (this.suppressed === 0) return;
    const suppressed = this.suppressed;
    this.suppressed = 0;
    this.options.log.warn(
      { suppressed, windowMs: this.options.windowMs },
      `${suppressed} more ${this.options.what} in the last ${this.options.windowMs / 1000} s were not logged`,
    );
  }
}
