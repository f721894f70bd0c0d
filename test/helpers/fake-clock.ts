import type { Clock } from '../../src/runtime/clock.js';

interface Timer {
  at: number;
  order: number;
  fn: () => void;
}

/**
 * A deterministic `Clock`: time moves only when the test says so, and due timers run in (time, creation)
 * order, including timers that other timers schedule while the clock is advancing.
 */
export class FakeClock implements Clock {
  private current: number;
  private created = 0;
  private timers: Timer[] = [];

  constructor(startMs = 0) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): () => void {
    const timer: Timer = { at: this.current + Math.max(0, ms), order: this.created++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((candidate) => candidate !== timer);
    };
  }

  /** Timers scheduled and not yet run or cancelled. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, running every timer that falls due on the way at its own instant. */
  advance(ms: number): void {
    const target = this.current + ms;
    for (let timer = this.takeDue(target); timer; timer = this.takeDue(target)) {
      this.current = timer.at;
      timer.fn();
    }
    this.current = target;
  }

  /** Runs the timers already due at the current instant (zero-delay timers included). */
  tick(): void {
    this.advance(0);
  }

  /**
   * Like `advance`, but lets promise callbacks settle after each timer and at the end, for code that awaits
   * between timers (a `sleep`, a promise race).
   */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.current + ms;
    await settle();
    for (let timer = this.takeDue(target); timer; timer = this.takeDue(target)) {
      this.current = timer.at;
      timer.fn();
      await settle();
    }
    this.current = target;
  }

  private takeDue(target: number): Timer | undefined {
    let next: Timer | undefined;
    for (const timer of this.timers) {
      if (timer.at > target) continue;
      if (!next || timer.at < next.at || (timer.at === next.at && timer.order < next.order)) next = timer;
    }
    if (next) this.timers = this.timers.filter((candidate) => candidate !== next);
    return next;
  }
}

/** Lets every queued promise callback run (one macrotask turn). */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Real timers that are unref'd by design (a request's timeout) do not hold the test process open: this does, while `promise` is due. */
export async function keptAlive<T>(promise: Promise<T>): Promise<T> {
  const hold = setInterval(() => {}, 1_000);
  try {
    return await promise;
  } finally {
    clearInterval(hold);
  }
}
