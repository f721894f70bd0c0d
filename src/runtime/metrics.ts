import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

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
  /** SPEC 14.4: set on the cluster's deciding server only (the others report nothing, so a sum stays the cluster's). */
  readonly autoscalerActions = new Counter({ name: 'fleetplane_autoscaler_actions_total', help: 'Scaling actions the autoscaler started', labelNames: ['action', 'reason'], registers: [this.registry] });
  readonly clusterSizeCurrent = new Gauge({ name: 'fleetplane_autoscaler_current_size', help: 'Servers of the cluster counted by the autoscaler (running, starting and failed)', registers: [this.registry] });
  readonly clusterSizeDesired = new Gauge({ name: 'fleetplane_autoscaler_desired_size', help: 'Servers the autoscaler wants in the cluster', registers: [this.registry] });
  /** The primary's own process metrics (`worker="0"`), kept apart so its counters above carry no label. */
  process: Registry | undefined;

  /** Starts the primary's process metrics; not in single-process mode, where its worker runtime has them. */
  trackProcess(): void {
    this.process ??= createWorkerRegistry({ worker: '0' });
  }
}

/** Sums the workers' registries (counters add up, gauges per label set) with the primary's own. */
export async function aggregateMetrics(primary: Registry, workers: MetricsJson[], primaryProcess?: Registry): Promise<string> {
  const own = [await primary.getMetricsAsJSON(), ...(primaryProcess ? [await primaryProcess.getMetricsAsJSON()] : [])];
  const aggregated = AggregatorRegistry.aggregate([...workers, ...own] as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  return aggregated.metrics();
}
