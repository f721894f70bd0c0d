/** Time as the coordinators see it, so unit tests can drive them with a fake clock. */
export interface Clock {
  now(): number;
  /** Schedules `fn`; the returned function cancels it. Real timers are unref'd: they never hold the process. */
  setTimeout(fn: () => void, ms: number): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

export const sleep = (clock: Clock, ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
