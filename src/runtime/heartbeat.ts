/** One heartbeat of a worker: what the fleet's health policy judges. */
export interface Beat {
  rss: number;
  heapUsed: number;
  lagMs: number;
}

/**
 * Reports RSS, heap and event-loop lag every `intervalMs`. Lag is how late the beat's own timer fired:
 * a worker whose loop is blocked reports a large lag, or nothing at all (wedged).
 */
export function startHeartbeat(intervalMs: number, report: (beat: Beat) => void): () => void {
  let expected = performance.now() + intervalMs;
  let timer: NodeJS.Timeout;
  const tick = () => {
    const now = performance.now();
    const lagMs = Math.max(0, now - expected);
    const memory = process.memoryUsage();
    report({ rss: memory.rss, heapUsed: memory.heapUsed, lagMs });
    expected = performance.now() + intervalMs;
    timer = setTimeout(tick, intervalMs);
    timer.unref();
  };
  timer = setTimeout(tick, intervalMs);
  timer.unref();
  return () => clearTimeout(timer);
}
