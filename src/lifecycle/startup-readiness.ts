/** A forked worker became ready (`worker:ready`), or the primary's own in-process worker did (`status_change`). */
export const READINESS_EVENTS = ['worker:ready', 'status_change'] as const;
type ReadinessEvent = (typeof READINESS_EVENTS)[number];

/** What startup readiness needs of the primary: its events and the fleet's counts. */
export interface ReadinessSource {
  on(event: ReadinessEvent, listener: () => void): unknown;
  off(event: ReadinessEvent, listener: () => void): unknown;
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
  for (const event of READINESS_EVENTS) source.on(event, check);
  check();
  return () => {
    for (const event of READINESS_EVENTS) source.off(event, check);
  };
}
