import { existsSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Collection, Document } from '../../src/db/types.js';
import { scaled } from '../helpers/wait.js';

/** A server of the cluster as its inventory says. */
export interface InventoryRecord extends Document {
  cluster_id?: string;
  master?: { status?: string; publicUrl?: string; pid?: number };
  infrastructure?: { instanceId?: string };
}

export interface Target {
  id: string;
  url: string;
}

/** The running servers of a cluster with a public URL: where a client of the cluster may send requests. */
export async function runningTargets(servers: Collection<InventoryRecord>, clusterId: string): Promise<Target[]> {
  const records = await servers.find({ cluster_id: clusterId, 'master.status': 'running' }, { limit: 0 });
  return records.filter((record) => typeof record.master?.publicUrl === 'string').map((record) => ({ id: record._id, url: record.master!.publicUrl! }));
}

/**
 * A client-side pool that follows the inventory, as a client of the cluster's servers would: it re-reads the
 * servers collection every `everyMs`, starts on every running server that appears and stops on one that is no
 * longer running.
 */
export class InventoryPool {
  private readonly active = new Map<string, Target>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly read: () => Promise<Target[]>,
    private readonly handlers: { added(target: Target): void; removed(target: Target): void },
    private readonly everyMs = 100,
  ) {}

  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.everyMs);
  }

  targets(): Target[] {
    return [...this.active.values()];
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.reading;
    for (const target of this.active.values()) this.handlers.removed(target);
    this.active.clear();
  }

  private refresh(): Promise<void> {
    this.reading ??= (async () => {
      try {
        const now = await this.read();
        for (const target of now) if (!this.active.has(target.id)) (this.active.set(target.id, target), this.handlers.added(target));
        for (const [id, target] of this.active) if (!now.some((entry) => entry.id === id)) (this.active.delete(id), this.handlers.removed(target));
      } catch {
        // The store is busy with the servers' own writes: the next read catches up.
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }
}

/** What every request of the tenant's client sends: a read of its own data, authorized by its key. */
export interface TenantRequest {
  host: string;
  key: string;
  body: Record<string, unknown>;
}

interface AutocannonInstance {
  on(event: 'response', listener: (client: unknown, statusCode: number) => void): void;
  on(event: 'done', listener: (result: { errors: number; non2xx: number; '2xx': number }) => void): void;
  stop(): void;
}
type Autocannon = (options: Record<string, unknown>) => AutocannonInstance;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/** Per target: one autocannon run (bounded by `durationS`), started and stopped as the pool follows the inventory. */
export class HeavyLoad {
  readonly served = new Map<string, { ok: number; other: number; firstOkAt?: number }>();
  private readonly runs = new Map<string, { instance: AutocannonInstance; done: Promise<void> }>();
  readonly pool: InventoryPool;

  constructor(read: () => Promise<Target[]>, request: TenantRequest, options: { connections: number; durationS: number }) {
    this.pool = new InventoryPool(read, {
      added: (target) => {
        const counts = { ok: 0, other: 0 } as { ok: number; other: number; firstOkAt?: number };
        this.served.set(target.id, counts);
        const instance = autocannon({
          url: `${target.url}/crud`,
          method: 'POST',
          headers: { host: request.host, authorization: `Bearer ${request.key}`, 'content-type': 'application/json' },
          body: JSON.stringify(request.body),
          connections: options.connections,
          duration: options.durationS,
        });
        instance.on('response', (_client, status) => {
          if (status !== 200) return void counts.other++;
          counts.ok++;
          counts.firstOkAt ??= Date.now();
        });
        this.runs.set(target.id, { instance, done: new Promise((resolve) => instance.on('done', () => resolve())) });
      },
      removed: (target) => this.runs.get(target.id)?.instance.stop(),
    });
  }

  async stop(): Promise<void> {
    await this.pool.stop();
    await Promise.all([...this.runs.values()].map((run) => run.done));
  }
}

/**
 * A light client of the cluster: `loops` sequential requests at a time, each on a new connection, `pauseMs`
 * apart, over the servers the pool knows. It follows a 307 (a drained server answers with one to a peer) and
 * then stops sending to the server that gave it, as a client told "go elsewhere" does. A failure is a socket
 * error or a 5xx; any other answer but 200 is counted apart.
 */
export class LightLoad {
  readonly stats = { ok: 0, failed: 0, redirected: 0, unexpected: 0, errors: [] as string[], byUrl: new Map<string, number>() };
  /** When each request ended and whether it failed: to count those of a given span. */
  readonly outcomes: Array<{ at: number; failed: boolean }> = [];
  readonly pool: InventoryPool;
  private readonly redirectedAway = new Set<string>();
  private running = true;
  private readonly loops: Promise<void>[] = [];
  private next = 0;

  constructor(
    read: () => Promise<Target[]>,
    private readonly request: TenantRequest,
    private readonly options: { loops: number; pauseMs: number },
  ) {
    this.pool = new InventoryPool(read, { added: () => undefined, removed: () => undefined });
  }

  async start(): Promise<void> {
    await this.pool.start();
    for (let index = 0; index < this.options.loops; index++) this.loops.push(this.loop());
  }

  async stop(): Promise<LightLoad['stats']> {
    this.running = false;
    await Promise.all(this.loops);
    await this.pool.stop();
    return this.stats;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const targets = this.pool.targets().filter((target) => !this.redirectedAway.has(target.id));
      const target = targets[this.next++ % Math.max(1, targets.length)];
      if (target) await this.once(target);
      await new Promise((resolve) => setTimeout(resolve, this.options.pauseMs));
    }
  }

  /** Requests that ended in [from, to], and how many of them failed. */
  between(from: number, to: number): { requests: number; failed: number } {
    const inside = this.outcomes.filter((outcome) => outcome.at >= from && outcome.at <= to);
    return { requests: inside.length, failed: inside.filter((outcome) => outcome.failed).length };
  }

  private async once(target: Target): Promise<void> {
    const failedBefore = this.stats.failed + this.stats.unexpected;
    await this.attempt(target);
    this.outcomes.push({ at: Date.now(), failed: this.stats.failed + this.stats.unexpected > failedBefore });
  }

  private async attempt(target: Target): Promise<void> {
    let url = `${target.url}/crud`;
    try {
      for (let hop = 0; hop < 3; hop++) {
        const reply = await post(url, this.request);
        if (reply.status === 307 && reply.location) {
          this.stats.redirected++;
          this.redirectedAway.add(target.id);
          url = reply.location;
          continue;
        }
        if (reply.status === 200) {
          this.stats.ok++;
          const origin = new URL(url).origin;
          this.stats.byUrl.set(origin, (this.stats.byUrl.get(origin) ?? 0) + 1);
        } else if (reply.status >= 500) {
          this.stats.failed++;
          this.stats.errors.push(`${url}: ${reply.status}`);
        } else {
          this.stats.unexpected++;
          this.stats.errors.push(`${url}: ${reply.status}`);
        }
        return;
      }
      this.stats.unexpected++;
      this.stats.errors.push(`${url}: too many redirects`);
    } catch (error) {
      this.stats.failed++;
      this.stats.errors.push(`${url}: ${(error as Error).message}`);
    }
  }
}

/** One POST on a new connection. */
function post(url: string, request: TenantRequest): Promise<{ status: number; location?: string }> {
  const text = JSON.stringify(request.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: { host: request.host, authorization: `Bearer ${request.key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, ...(res.headers.location ? { location: res.headers.location } : {}) }));
        res.on('error', reject);
      },
    );
    req.setTimeout(scaled(10_000), () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(text);
  });
}

/** The servers the local provider started under `root`: id, pid and data directory, from their own files. */
export function localInstances(root: string): Array<{ serverId: string; pid: number; dataDir: string }> {
  if (!existsSync(root)) return [];
  const found: Array<{ serverId: string; pid: number; dataDir: string }> = [];
  for (const name of readdirSync(root)) {
    const dataDir = path.join(root, name);
    try {
      const { pid } = JSON.parse(readFileSync(path.join(dataDir, 'instance.json'), 'utf8')) as { pid: number };
      const config = JSON.parse(readFileSync(path.join(dataDir, 'fleetplane.config.json'), 'utf8')) as { server: { id: string } };
      found.push({ serverId: config.server.id, pid, dataDir });
    } catch {
      // being written, or not an instance
    }
  }
  return found;
}

/** Kills every server the local provider started under `root` (each leads its own process group). */
export function killLocalInstances(root: string): void {
  for (const { pid } of localInstances(root)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** A started server's log lines (pino JSON, one per line), parsed. */
export function logOf(dataDir: string): Array<Record<string, unknown> & { time: number; msg: string }> {
  let text: string;
  try {
    text = readFileSync(path.join(dataDir, 'server.log'), 'utf8');
  } catch {
    return [];
  }
  const lines: Array<Record<string, unknown> & { time: number; msg: string }> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line) as Record<string, unknown> & { time: number | string; msg: string };
      // The server writes ISO times: milliseconds here, to compare with the test's own clock.
      lines.push({ ...parsed, time: typeof parsed.time === 'string' ? Date.parse(parsed.time) : parsed.time });
    } catch {
      // a line being written
    }
  }
  return lines;
}
