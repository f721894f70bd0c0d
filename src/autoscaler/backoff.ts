/** The longest wait between two attempts of an action that keeps failing, unless the cooldown is longer. */
export const MAX_RETRY_DELAY_MS = 3_600_000;

/**
 * How long after its last failed attempt an action may be tried again: one cooldown after the first failure,
 * then twice as long after each further one, up to an hour (or the cooldown, when that is longer).
 */
export function retryDelayMs(failures: number, cooldownMs: number): number {
  if (failures <= 0) return 0;
  return Math.min(cooldownMs * 2 ** Math.min(failures - 1, 30), Math.max(cooldownMs, MAX_RETRY_DELAY_MS));
}

/** Consecutive failures of one kind of action (scale-out or scale-in), and when it may be tried again. */
export class ActionBackoff {
  private readonly failures = new Map<string, { count: number; lastAt: number }>();

  failed(action: string, at: number): number {
    const count = (this.failures.get(action)?.count ?? 0) + 1;
    this.failures.set(action, { count, lastAt: at });
    return count;
  }

  succeeded(action: string): void {
    this.failures.delete(action);
  }

  /** When `action` may be tried again (undefined: now, it has not failed since its last success). */
  retryAt(action: string, cooldownMs: number): number | undefined {
    const entry = this.failures.get(action);
    return entry ? entry.lastAt + retryDelayMs(entry.count, cooldownMs) : undefined;
  }

  count(action: string): number {
    return this.failures.get(action)?.count ?? 0;
  }
}

/**
 * One warning per distinct reason per window (the policy's cooldown): the same failure repeated inside the window
 * is counted, not logged, and the next warning of that reason says how many were held back.
 */
export class WarningGate {
  private readonly seen = new Map<string, { at: number; held: number }>();

  constructor(private readonly maxReasons = 256) {}

  /** Undefined: hold this one back. Else the number of the same reason held back since its last warning. */
  admit(reason: string, now: number, windowMs: number): number | undefined {
    const entry = this.seen.get(reason);
    if (entry && now - entry.at < windowMs) {
      entry.held++;
      return undefined;
    }
    const held = entry?.held ?? 0;
    this.seen.delete(reason);
    // Reasons carry ids and figures: the map forgets the oldest rather than growing with them.
    if (this.seen.size >= this.maxReasons) this.seen.delete(this.seen.keys().next().value!);
    this.seen.set(reason, { at: now, held: 0 });
    return held;
  }
}
