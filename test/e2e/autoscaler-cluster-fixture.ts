import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Test } from 'tap';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { FAST, request, type ServerEvent, type ServerProcess } from '../helpers/server-process.js';
import { dataDirWithTenants, type Tenant } from '../helpers/tenants.js';
import type { InventoryRecord } from './autoscaler-fleet-fixture.js';
import { until } from './manager-fixture.js';

/** What a request to a fake cloud carried, and when it arrived. */
export interface CloudRequest {
  path: string;
  body: Record<string, unknown>;
  at: number;
}

/**
 * A cloud API on 127.0.0.1 that answers at once, as a real cloud does: `create` with a new instance id (it starts
 * nothing), `terminate` with 200 while the machine is still there.
 */
export async function fakeCloud(t: Test): Promise<{ baseUrl: string; requests: CloudRequest[] }> {
  const requests: CloudRequest[] = [];
  let instances = 0;
  const server = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(text || '{}') as Record<string, unknown>;
      } catch {
        // answered all the same
      }
      requests.push({ path: req.url ?? '', body, at: Date.now() });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(req.url === '/create' ? { instanceId: `i-${++instances}` } : { accepted: true }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

/** The provider document of the fake cloud, as the platform writes it through `/crud`. */
export const cloudApi = (name: string, baseUrl: string) => ({
  name,
  baseUrl,
  endpoints: { create: { method: 'post', path: '/create' }, terminate: { method: 'post', path: '/terminate' } },
});

/** A platform organization (host platform.test) and a tenant (acme.test) in a fresh data directory, its store open. */
export async function clusterStore(t: Test): Promise<{ dataDir: string; dbPath: string; platform: Tenant; acme: Tenant; store: EmbeddedStore }> {
  const { dataDir, tenants } = await dataDirWithTenants([{ name: 'platform', hosts: ['platform.test'] }, { name: 'acme', hosts: ['acme.test'] }]);
  const dbPath = path.join(dataDir, 'fleetplane.db');
  const store = await EmbeddedStore.open(dbPath);
  t.teardown(() => store.close());
  return { dataDir, dbPath, platform: tenants[0]!, acme: tenants[1]!, store };
}

/** Config of one server of the test cluster `default` on the shared store, autoscaler on, short timings. */
export function clusterServer(id: string, dbPath: string, meshSecret: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...FAST,
    log: { level: 'info' },
    workers: 1,
    http: { port: 0, host: '127.0.0.1' },
    db: { path: dbPath },
    server: { id, cluster: 'default' },
    // A drained server's /readyz says 503 this long while it still serves: a light client's requests reach it.
    lifecycle: { readinessGraceMs: 300 },
    mesh: { port: 0, host: '127.0.0.1', secret: meshSecret, discoveryIntervalMs: 500, pingIntervalMs: 2_000, pongTimeoutMs: 5_000 },
    autoscaler: { enabled: true, intervalMs: 200, sweepIntervalMs: 1_500, maxClockSkewMs: 0 },
    ...overrides,
  };
}

/** `/crud` of the platform, through `port`. */
export function platformCrud(port: number, platform: Tenant) {
  return async (body: Record<string, unknown>) => {
    const reply = await request(port, '/crud', { host: platform.host, key: platform.adminKey, body });
    if (reply.status !== 200) throw new Error(`crud ${String(body.method)} ${String(body.collection)}: ${reply.status} ${reply.body}`);
    return reply.json() as Record<string, unknown>;
  };
}

/** A running record whose workers served, with its public URL: a confirmed server of the cluster. */
export async function confirmed(store: EmbeddedStore, id: string): Promise<InventoryRecord | undefined> {
  const record = await store.collection<InventoryRecord & { master?: { servingSince?: unknown } }>('servers').findOne({ _id: id });
  return record?.master?.status === 'running' && typeof record.master.servingSince === 'string' && record.master.publicUrl ? record : undefined;
}

export const messages = (server: ServerProcess): string[] => server.events.map((event) => String(event.msg ?? '')).filter(Boolean);

/** Log lines of a server (its events, or its log file's lines) that report a failure: an error, or "failed". */
export const failures = (lines: ReadonlyArray<ServerEvent | Record<string, unknown>>) =>
  lines.filter((line) => typeof line.msg === 'string' && ((typeof line.level === 'number' && line.level >= 50) || /fail/i.test(line.msg)));

/** Waits for a log line of `server` matching `match`. */
export const logLine = (server: ServerProcess, what: string, match: (event: ServerEvent) => boolean, timeoutMs = 60_000) =>
  until(what, () => server.events.find((event) => typeof event.msg === 'string' && match(event)), timeoutMs);
