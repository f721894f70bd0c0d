import type { Registry } from 'prom-client';
import type { MetricsJson } from './metrics.js';

type Labels = Record<string, string>;

/**
 * A counter or gauge of the primary's, kept as plain numbers: the metrics library is loaded by the first scrape,
 * so a primary nobody scrapes never holds it. Same call shapes as the library's (`inc()`, `inc(labels)`, `set(n)`).
 */
export class Tally {
  private readonly values = new Map<string, { labels: Labels; value: number }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly kind: 'counter' | 'gauge',
    readonly labelNames: readonly string[] = [],
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    const key = this.keyOf(labels);
    const entry = this.values.get(key);
    if (entry) entry.value += by;
    else this.values.set(key, { labels: this.labelsOf(labels), value: by });
  }

  set(value: number, labels: Labels = {}): void {
    this.values.set(this.keyOf(labels), { labels: this.labelsOf(labels), value });
  }

  /** The value for these labels, or undefined when never counted nor set. */
  value(labels: Labels = {}): number | undefined {
    return this.values.get(this.keyOf(labels))?.value;
  }

  entries(): IterableIterator<{ labels: Labels; value: number }> {
    return this.values.values();
  }

  private labelsOf(labels: Labels): Labels {
    return Object.fromEntries(this.labelNames.filter((name) => labels[name] !== undefined).map((name) => [name, labels[name]!]));
  }

  private keyOf(labels: Labels): string {
    return this.labelNames.map((name) => labels[name] ?? '').join('\u0000');
  }
}

/** Supervision counters kept by the primary. */
export class PrimaryMetrics {
  readonly restarts = new Tally('fleetplane_worker_restarts_total', 'Workers forked to replace a crashed one', 'counter');
  readonly crashes = new Tally('fleetplane_worker_crashes_total', 'Non-graceful worker exits', 'counter');
  readonly recycles = new Tally('fleetplane_worker_recycles_total', 'Workers replaced through the bounded drain', 'counter', ['reason']);
  readonly handedConnections = new Tally('fleetplane_connections_handed_total', 'Connections handed to workers', 'counter');
  readonly fallbackResponses = new Tally('fleetplane_fallback_responses_total', 'Connections answered by the primary fallback', 'counter', ['status']);
  readonly workersActive = new Tally('fleetplane_workers_active', 'Workers ready to take connections', 'gauge');
  readonly workersTarget = new Tally('fleetplane_workers_target', 'Configured worker count', 'gauge');
  readonly breakerTripped = new Tally('fleetplane_circuit_breaker_tripped', '1 while the crash circuit breaker is tripped', 'gauge');
  /** SPEC 14.4: set on the cluster's deciding server only (the others report nothing, so a sum stays the cluster's). */
  readonly autoscalerActions = new Tally('fleetplane_autoscaler_actions_total', 'Scaling actions the autoscaler started', 'counter', ['action', 'reason']);
  readonly clusterSizeCurrent = new Tally('fleetplane_autoscaler_current_size', 'Servers of the cluster counted by the autoscaler (running, starting and failed)', 'gauge');
  readonly clusterSizeDesired = new Tally('fleetplane_autoscaler_desired_size', 'Servers the autoscaler wants in the cluster', 'gauge');
  private readonly tallies = [
    this.restarts, this.crashes, this.recycles, this.handedConnections, this.fallbackResponses, this.workersActive, this.workersTarget,
    this.breakerTripped, this.autoscalerActions, this.clusterSizeCurrent, this.clusterSizeDesired,
  ];
  private tracksProcess = false;
  private built: Promise<{ registry: Registry; process: Registry | undefined }> | undefined;

  /**
   * The primary's own process metrics (`worker="0"`, CPU, memory, heap, event loop, GC), kept apart so its
   * counters above carry no label; not in single-process mode, where its worker runtime has them. They start
   * with the first scrape.
   */
  trackProcess(): void {
    this.tracksProcess = true;
  }

  /** The current value of one of the counters or gauges, by its metric name. */
  value(name: string, labels: Labels = {}): number | undefined {
    return this.tallies.find((tally) => tally.name === name)?.value(labels);
  }

  /** Prometheus text: the workers' registries summed with the primary's own. */
  async text(workers: MetricsJson[]): Promise<string> {
    const { aggregateMetrics } = await import('./metrics.js');
    const { registry, process } = await (this.built ??= this.build());
    return aggregateMetrics(registry, workers, process);
  }

  /** The library's registry, whose metrics read the tallies at each collection. */
  private async build(): Promise<{ registry: Registry; process: Registry | undefined }> {
    const [prom, { createWorkerRegistry }] = await Promise.all([import('prom-client'), import('./metrics.js')]);
    const registry = new prom.Registry();
    for (const tally of this.tallies) {
      const configuration = { name: tally.name, help: tally.help, labelNames: [...tally.labelNames], registers: [registry] };
      if (tally.kind === 'counter') {
        new prom.Counter({ ...configuration, collect() { this.reset(); for (const { labels, value } of tally.entries()) this.inc(labels, value); } });
      } else {
        new prom.Gauge({ ...configuration, collect() { this.reset(); for (const { labels, value } of tally.entries()) this.set(labels, value); } });
      }
    }
    return { registry, process: this.tracksProcess ? createWorkerRegistry({ worker: '0' }) : undefined };
  }
}
