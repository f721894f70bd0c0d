import type { Clock } from '../runtime/clock.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { EventJournal } from './journal.js';
import { History } from './history.js';
import type { ProcessView, ServerSnapshot, ServerSummary, WorkerFigures } from './schema.js';

/** The fleet as the primary's supervision reports it (`getFleetHealth()`). */
export interface FleetReport {
  target: number;
  active: number;
  quarantined: number;
  restartsPending: number;
  breaker: { count: number; tripped: boolean };
  workers: Array<{ worker: number; pid: number; status: string; retiring: string | null; uptimeMs: number; rss: number | null; heapUsed: number | null; eventLoopLagMs: number | null }>;
}

export interface ServerOverviewDeps {
  serverId: string;
  cluster: string;
  host: string;
  version: string;
  clock: Clock;
  startedAt: number;
  status(): string;
  ready(): boolean;
  fleet(): FleetReport;
  /** The primary's own resident memory. */
  primaryRssBytes(): number;
  /** Each worker's own figures (connections, requests); a worker that does not answer is left out. */
  gatherWorkers(): Promise<WorkerFigures[]>;
  shed(): ReadonlySet<string>;
  organizations(): Array<{ organization_id: string; workers: number[]; sockets: number }>;
  /** `autoscaler.status` where the autoscaler runs. */
  autoscaler?(): Promise<unknown>;
  journal: EventJournal;
}

/** Where the overview learns of restarts, crashes, quarantines and heartbeats. */
export type OverviewSources = Pick<ServerEmitter, 'on'>;

interface SlotRecord {
  restarts: number;
  quarantined: boolean;
  lastCrash: ProcessView['lastCrash'];
}

interface RateBase {
  at: number;
  requests: number;
  rate: number;
}

/** Below this, two reads of a counter are too close to make a rate of: the previous rate stands. */
const MIN_RATE_INTERVAL_MS = 1_000;
/** The server's own figures are sampled at most this often (when someone asks for the overview). */
const SERVER_SAMPLE_MS = 5_000;

const PROCESS_FIGURES = ['rssBytes', 'heapUsedBytes', 'eventLoopLagMs'] as const;
const SERVER_FIGURES = ['requestsPerSecond', 'connections', 'rssBytes'] as const;

/**
 * The primary's picture of its server for the dashboard (`overview.server`): supervision (fleet health,
 * restarts and crashes per slot, quarantine, breaker, readiness), each worker's connections and request rate
 * (asked of the workers), shed and organization state, and the last ten minutes of each worker's heartbeats.
 * It costs nothing between questions: heartbeats are kept as they arrive, everything else is read when asked.
 */
export class ServerOverview {
  private readonly slots = new Map<number, SlotRecord>();
  private readonly rates = new Map<number, RateBase>();
  private readonly processHistory = new History<(typeof PROCESS_FIGURES)[number]>(PROCESS_FIGURES);
  private readonly serverHistory = new History<(typeof SERVER_FIGURES)[number]>(SERVER_FIGURES);
  private lastServerSample = -Infinity;

  constructor(private readonly deps: ServerOverviewDeps) {}

  /** Starts keeping what the snapshot needs from the server's events. */
  observe(source: OverviewSources): void {
    const now = () => this.deps.clock.now();
    source.on('worker:restart', ({ workerId }) => void this.slot(workerId).restarts++);
    source.on('worker:crash', ({ workerId, pid, code, signal }) => {
      this.slot(workerId).lastCrash = { at: now(), pid, exit: signal ? `signal ${signal}` : `exit code ${code ?? 'unknown'}` };
    });
    source.on('worker:quarantined', ({ workerId }) => void (this.slot(workerId).quarantined = true));
    source.on('worker:ready', ({ workerId }) => void (this.slot(workerId).quarantined = false));
    source.on('worker:health', ({ pid, rss, heapUsed, eventLoopLagMs }) => {
      this.processHistory.record(String(pid), now(), { rssBytes: rss, heapUsedBytes: heapUsed, eventLoopLagMs: Math.round(eventLoopLagMs * 10) / 10 });
    });
  }

  async snapshot(query: { processes?: boolean; historySince?: number } = {}): Promise<ServerSnapshot> {
    const { deps } = this;
    const now = deps.clock.now();
    const fleet = deps.fleet();
    const [figures, autoscaler] = await Promise.all([deps.gatherWorkers(), deps.autoscaler ? deps.autoscaler().catch(() => null) : Promise.resolve(null)]);
    const byPid = new Map(figures.map((entry) => [entry.pid, entry]));
    const rates = this.rateOf(figures, now);
    const processes = this.processes(fleet, byPid, rates);
    const connections = figures.reduce((sum, entry) => sum + entry.connections, 0);
    const requestsPerSecond = round([...rates.values()].reduce((sum, rate) => sum + rate, 0));
    // In single-process mode the primary is also the one process listed: counted once.
    const rssBytes = deps.primaryRssBytes() + processes.reduce((sum, entry) => sum + (entry.pid === process.pid ? 0 : (entry.rssBytes ?? 0)), 0);
    if (now - this.lastServerSample >= SERVER_SAMPLE_MS) {
      this.lastServerSample = now;
      this.serverHistory.record('server', now, { requestsPerSecond, connections, rssBytes });
    }
    const summary: ServerSummary = {
      server: deps.serverId,
      cluster: deps.cluster,
      host: deps.host,
      version: deps.version,
      pid: process.pid,
      status: deps.status(),
      ready: deps.ready(),
      startedAt: deps.startedAt,
      uptimeMs: now - deps.startedAt,
      workers: {
        target: fleet.target,
        active: fleet.active,
        cordoned: processes.filter((entry) => entry.status === 'cordoned').length,
        quarantined: fleet.quarantined,
        restartsPending: fleet.restartsPending,
        breaker: fleet.breaker,
      },
      connections,
      requestsPerSecond,
      rssBytes,
      shed: [...deps.shed()].sort(),
      organizations: deps.organizations(),
      autoscaler,
      latestEvent: deps.journal.latest,
    };
    if (query.processes === false) return summary;
    const snapshot: ServerSnapshot = { ...summary, processes };
    if (query.historySince !== undefined) snapshot.history = { ...this.processHistory.since(now, query.historySince), ...this.serverHistory.since(now, query.historySince) };
    return snapshot;
  }

  private slot(workerId: number): SlotRecord {
    let record = this.slots.get(workerId);
    if (!record) this.slots.set(workerId, (record = { restarts: 0, quarantined: false, lastCrash: null }));
    return record;
  }

  /** Requests per second per pid, from this read and the last one at least a second older. */
  private rateOf(figures: WorkerFigures[], now: number): Map<number, number> {
    const rates = new Map<number, number>();
    for (const entry of figures) {
      const base = this.rates.get(entry.pid);
      if (!base) {
        this.rates.set(entry.pid, { at: now, requests: entry.requests, rate: 0 });
        rates.set(entry.pid, 0);
      } else if (now - base.at >= MIN_RATE_INTERVAL_MS) {
        const rate = Math.max(0, ((entry.requests - base.requests) * 1000) / (now - base.at));
        this.rates.set(entry.pid, { at: now, requests: entry.requests, rate });
        rates.set(entry.pid, rate);
      } else {
        rates.set(entry.pid, base.rate);
      }
    }
    // Processes that are gone take their counters with them.
    for (const pid of this.rates.keys()) if (!figures.some((entry) => entry.pid === pid)) this.rates.delete(pid);
    return rates;
  }

  private processes(fleet: FleetReport, byPid: Map<number, WorkerFigures>, rates: Map<number, number>): ProcessView[] {
    const view = (worker: number, pid: number): Pick<ProcessView, 'restarts' | 'quarantined' | 'lastCrash' | 'connections' | 'requestsPerSecond'> => {
      const slot = this.slots.get(worker);
      const figures = byPid.get(pid);
      return {
        restarts: slot?.restarts ?? 0,
        quarantined: slot?.quarantined ?? false,
        lastCrash: slot?.lastCrash ?? null,
        connections: figures?.connections ?? null,
        requestsPerSecond: rates.has(pid) ? round(rates.get(pid)!) : null,
      };
    };
    const listed: ProcessView[] = fleet.workers.map((entry) => ({
      worker: entry.worker,
      pid: entry.pid,
      status: entry.status,
      retiring: entry.retiring,
      uptimeMs: entry.uptimeMs,
      rssBytes: entry.rss,
      heapUsedBytes: entry.heapUsed,
      eventLoopLagMs: entry.eventLoopLagMs === null ? null : round(entry.eventLoopLagMs),
      ...view(entry.worker, entry.pid),
    }));
    // Single-process mode: the primary is worker 0 and supervision lists no worker.
    for (const figures of byPid.values()) {
      if (listed.some((entry) => entry.pid === figures.pid)) continue;
      const memory = figures.pid === process.pid ? process.memoryUsage() : undefined;
      listed.push({
        worker: figures.worker,
        pid: figures.pid,
        status: figures.status,
        retiring: null,
        uptimeMs: figures.uptimeMs,
        rssBytes: memory?.rss ?? null,
        heapUsedBytes: memory?.heapUsed ?? null,
        eventLoopLagMs: null,
        ...view(figures.worker, figures.pid),
      });
    }
    return listed.sort((a, b) => a.worker - b.worker || a.pid - b.pid);
  }
}

const round = (value: number) => Math.round(value * 10) / 10;
