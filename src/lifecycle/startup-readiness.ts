/** What startup readiness needs of the primary: worker-ready events and the fleet's counts. */
export interface ReadinessSource {
  on(event: 'worker:ready', listener: () => void): unknown;
  off(event: 'worker:ready', listener: () => void): unknown;
  fleetHealth(): { target: number; active: number };
}

/**
 * Calls `onReady` each time every worker of the fleet is serving: once after startup, and again after the fleet
 * recovered from losing workers (the routing hooks and the initial upload share their first run). In
 * single-process mode (`target` 1, the primary serving) the first call comes as soon as it listens. Returns a
 * function that stops listening.
 */
export function onFleetReady(source: ReadinessSource, onReady: () => void): () => void {
  let complete = false;
  const check = () => {
    const { target, active } = source.fleetHealth();
    const now = target > 0 && active >= target;
    if (now && !complete) onReady();
    complete = now;
  };
  const listener = () => check();
  source.on('worker:ready', listener);
  check();
  return () => source.off('worker:ready', listener);
}
