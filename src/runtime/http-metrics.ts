import type { Registry } from 'prom-client';

/** Request durations of a control plane: from a cached read (a few ms) to a slow workflow (seconds). */
export const HTTP_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** The route of a request that matched none (404s, probes of unknown paths): one series, whatever the URL. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Status classes shown (as 0) for every declared route before its first request. */
const CLASSES_AT_ZERO = [2, 4, 5];

interface RouteSeries {
  readonly labels: { route: string; method: string };
  /** Requests by status class: index 2 counts 2xx. */
  readonly byClass: number[];
  /** Observations per bucket, not cumulative (the last slot is +Inf). */
  readonly buckets: number[];
  sum: number;
  count: number;
}

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/**
 * Requests per route pattern, method and status class, and their duration. The request path only bumps numbers
 * in a series found by two map lookups (no label hashing, no allocation); the Prometheus values are built when
 * the registry is read.
 */
export class HttpMetrics {
  private readonly routes = new Map<string, Map<string, RouteSeries>>();

  /** Shows these counts in `registry` (read at each collection); the counting needs no registry. */
  register(registry: Registry): void {
    const metric = (name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValue[]) => {
      const get = () => ({ name, help, type, aggregator: 'sum' as const, values: values() });
      registry.registerMetric({ name, help, type, aggregator: 'sum', get } as unknown as Parameters<Registry['registerMetric']>[0]);
    };
    metric('fleetplane_http_requests_total', 'HTTP requests answered, by route pattern, method and status class', 'counter', () => this.counterValues());
    metric('fleetplane_http_request_duration_seconds', 'Time from receiving an HTTP request to finishing its answer, by route pattern and method', 'histogram', () =>
      this.histogramValues(),
    );
  }

  /** A route the app serves: its counters exist (at 0) from the start. Idempotent. */
  declare(method: string, route: string): RouteSeries {
    let byMethod = this.routes.get(route);
    if (!byMethod) this.routes.set(route, (byMethod = new Map()));
    let series = byMethod.get(method);
    if (!series) {
      series = { labels: { route, method }, byClass: new Array<number>(10).fill(0), buckets: new Array<number>(HTTP_DURATION_BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
      byMethod.set(method, series);
    }
    return series;
  }

  /** One answered request; `route` is the matched pattern, undefined when none matched. */
  record(method: string, route: string | undefined, statusCode: number, seconds: number): void {
    const pattern = route ?? UNMATCHED_ROUTE;
    const series = this.routes.get(pattern)?.get(method) ?? this.declare(method, pattern);
    const statusClass = Math.trunc(statusCode / 100);
    if (statusClass >= 1 && statusClass <= 9) series.byClass[statusClass]! += 1;
    let bucket = 0;
    while (bucket < HTTP_DURATION_BUCKETS.length && seconds > HTTP_DURATION_BUCKETS[bucket]!) bucket += 1;
    series.buckets[bucket]! += 1;
    series.sum += seconds;
    series.count += 1;
  }

  /** Requests answered since the process started, every route together. */
  get answered(): number {
    let total = 0;
    for (const series of this.allSeries()) total += series.count;
    return total;
  }

  private counterValues(): MetricValue[] {
    const values: MetricValue[] = [];
    for (const series of this.allSeries()) {
      series.byClass.forEach((value, statusClass) => {
        if (value > 0 || CLASSES_AT_ZERO.includes(statusClass)) values.push({ labels: { ...series.labels, status_class: `${statusClass}xx` }, value });
      });
    }
    return values;
  }

  private histogramValues(): MetricValue[] {
    const values: MetricValue[] = [];
    const name = 'fleetplane_http_request_duration_seconds';
    for (const series of this.allSeries()) {
      if (series.count === 0) continue;
      let cumulative = 0;
      series.buckets.forEach((observed, index) => {
        cumulative += observed;
        const le = index < HTTP_DURATION_BUCKETS.length ? HTTP_DURATION_BUCKETS[index]! : '+Inf';
        values.push({ labels: { ...series.labels, le }, value: cumulative, metricName: `${name}_bucket` });
      });
      values.push({ labels: { ...series.labels }, value: series.sum, metricName: `${name}_sum` });
      values.push({ labels: { ...series.labels }, value: series.count, metricName: `${name}_count` });
    }
    return values;
  }

  private *allSeries(): Iterable<RouteSeries> {
    for (const byMethod of this.routes.values()) yield* byMethod.values();
  }
}
