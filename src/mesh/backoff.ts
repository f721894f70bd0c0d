export interface ReconnectSchedule {
  baseMs: number;
  maxDelayMs: number;
  jitterMinMs: number;
  jitterMaxMs: number;
  maxAttempts: number;
}

/** SPEC 6.3 defaults: `min(30000, 1000 × 1.5^attempt) + random(500, 4500)` ms, 10 attempts per discovery. */
export const DEFAULT_RECONNECT: ReconnectSchedule = { baseMs: 1_000, maxDelayMs: 30_000, jitterMinMs: 500, jitterMaxMs: 4_500, maxAttempts: 10 };

/**
 * The delay before reconnect attempt `attempt` (0 = the first after a link dropped). The jitter spreads the
 * peers of a node that went away, so they do not all dial it back in the same instant when it returns.
 * `random` returns a number in [0, 1), like `Math.random`.
 */
export function reconnectDelayMs(attempt: number, schedule: ReconnectSchedule = DEFAULT_RECONNECT, random: () => number = Math.random): number {
  const { baseMs, maxDelayMs, jitterMinMs, jitterMaxMs } = schedule;
  const exponent = Math.max(0, Math.floor(attempt));
  // 1.5^n overflows to Infinity for huge n; min() keeps the cap either way.
  const backoff = Math.min(maxDelayMs, baseMs * 1.5 ** exponent);
  const jitter = jitterMinMs + random() * (jitterMaxMs - jitterMinMs);
  return Math.round(backoff + jitter);
}

/** Close codes after which a dialer stops retrying: the peer said it is going away for good (SPEC 6.3). */
export function stopsRetries(code: number): boolean {
  return code === 1000;
}
