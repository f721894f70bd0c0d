import { AggregatorRegistry, Registry, collectDefaultMetrics } from 'prom-client';
import type { MetricsJson } from './protocol.js';

export type { MetricsJson };

/**
 * Gauges the default collectors name `*_total`, a suffix Prometheus keeps for counters. The same figures stay
 * available per type (`fleetplane_nodejs_active_handles{type}`...): `sum without (type)` gives the total.
 */
const GAUGES_NAMED_LIKE_COUNTERS = ['active_handles_total', 'active_requests_total', 'active_resources_total'].map((name) => `fleetplane_nodejs_${name}`);

/**
 * A process's own registry: process metrics (CPU, memory, heap, event loop lag, GC) labelled with the process's
 * worker number (0 for the primary), plus whatever the application registers.
 */
export function createWorkerRegistry(labels: Record<string, string>): Registry {
  const registry = new Registry();
  registry.setDefaultLabels(labels);
  collectDefaultMetrics({ register: registry, prefix: 'fleetplane_' });
  for (const name of GAUGES_NAMED_LIKE_COUNTERS) registry.removeSingleMetric(name);
  return registry;
}

/** Sums the workers' registries (counters add up, gauges per label set) with the primary's own. */
export async function aggregateMetrics(primary: Registry, workers: MetricsJson[], primaryProcess?: Registry): Promise<string> {
  const own = [await primary.getMetricsAsJSON(), ...(primaryProcess ? [await primaryProcess.getMetricsAsJSON()] : [])];
  const aggregated = AggregatorRegistry.aggregate([...workers, ...own] as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  return aggregated.metrics();
}
