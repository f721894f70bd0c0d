/** Sliding-window crash counter behind the circuit breaker. */
export class CrashTracker {
  private crashes: number[] = [];
  private trippedAt: number | undefined;

  constructor(
    private readonly threshold: number,
    private readonly windowMs: number,
  ) {}

  /** Records a crash at `now`; returns true when this crash trips the breaker. */
  record(now: number): boolean {
    this.prune(now);
    this.crashes.push(now);
    if (this.trippedAt === undefined && this.crashes.length >= this.threshold) {
      this.trippedAt = now;
      return true;
    }
    return false;
  }

  count(now: number): number {
    this.prune(now);
    return this.crashes.length;
  }

  get tripped(): boolean {
    return this.trippedAt !== undefined;
  }

  reset(): void {
    this.crashes = [];
    this.trippedAt = undefined;
  }

  private prune(now: number): void {
    const oldest = now - this.windowMs;
    while (this.crashes.length > 0 && this.crashes[0]! <= oldest) this.crashes.shift();
  }
}
