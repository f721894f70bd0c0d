import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** Each worker's own registry: process metrics plus whatever the application registers. */
export function createWorkerRegistry(labels: Record<string, string>): Registry {
  const registry = new Registry();
  registry.setDefaultLabels(labels);
  collectDefaultMetrics({ register: registry, prefix: 'fleetplane_' });
  return registry;
}

/** Supervision counters kept by the primary. */
export class PrimaryMetrics {
  readonly registry = new Registry();
  readonly restarts = new Counter({ name: 'fleetplane_worker_restarts_total', help: 'Workers forked to replace a crashed one', registers: [this.registry] });
  readonly crashes = new Counter({ name: 'fleetplane_worker_crashes_total', help: 'Non-graceful worker exits', registers: [this.registry] });
  readonly recycles = new Counter({ name: 'fleetplane_worker_recycles_total', help: 'Workers replaced through the bounded drain', labelNames: ['reason'], registers: [this.registry] });
  readonly handedConnections = new Counter({ name: 'fleetplane_connections_handed_total', help: 'Connections handed to workers', registers: [this.registry] });
  readonly fallbackResponses = new Counter({ name: 'fleetplane_fallback_responses_total', help: 'Connections answered by the primary fallback', labelNames: ['status'], registers: [this.registry] });
  readonly workersActive = new Gauge({ name: 'fleetplane_workers_active', help: 'Workers ready to take connections', registers: [this.registry] });
  readonly workersTarget = new Gauge({ name: 'fleetplane_workers_target', help: 'Configured worker count', registers: [this.registry] });
  readonly breakerTripped = new Gauge({ name: 'fleetplane_circuit_breaker_tripped', help: '1 while the crash circuit breaker is tripped', registers: [this.registry] });
}

/** Sums the workers' registries (counters add up, gauges per label set) with the primary's own. */
export async function aggregateMetrics(primary: Registry, workers: MetricsJson[]): Promise<string> {
  const aggregated = AggregatorRegistry.aggregate([...workers, await primary.getMetricsAsJSON()] as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  return aggregated.metrics();
}
