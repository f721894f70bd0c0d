/** What startup readiness needs of the primary: worker-ready events and the fleet's counts. */
export interface ReadinessSource {
  on(event: 'worker:ready', listener: () => void): unknown;
  off(event: 'worker:ready', listener: () => void): unknown;
  fleetHealth(): { target: number; active: number };
}

/**
 * Calls `onReady` whenever every worker of the fleet is serving: after startup, and again each time a worker
 * becomes ready in a complete fleet (a replacement after a crash or a restart). Its consumers share their
 * first run, so repeated readiness is harmless. Already complete when called (single-process mode after
 * listening): called at once. Returns a function that stops listening.
 */
export function onFleetReady(source: ReadinessSource, onReady: () => void): () => void {
  const check = () => {
    const { target, active } = source.fleetHealth();
    if (target > 0 && active >= target) onReady();
  };
  source.on('worker:ready', check);
  check();
  return () => source.off('worker:ready', check);
}
