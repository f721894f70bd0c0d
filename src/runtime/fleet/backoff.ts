export interface BackoffOptions {
  backoffMs: number;
  maxBackoffMs: number;
  backoffMultiplier: number;
}

/** Exponential restart delay: backoffMs, × multiplier per crash, capped at maxBackoffMs. */
export class Backoff {
  private attempts = 0;

  constructor(private readonly options: BackoffOptions) {}

  /** The delay for the next restart; each call grows the following one. */
  next(): number {
    const { backoffMs, maxBackoffMs, backoffMultiplier } = this.options;
    const delay = Math.min(maxBackoffMs, backoffMs * backoffMultiplier ** this.attempts);
    this.attempts++;
    return Math.round(delay);
  }

  get attempt(): number {
    return this.attempts;
  }

  reset(): void {
    this.attempts = 0;
  }
}
