import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import { freePort, request, tempDir, type ServerProcess } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { meshConfig, startMeshServer } from '../mesh/helpers.js';
import { until } from './manager-fixture.js';
import { scaled } from '../helpers/wait.js';

// Two server processes (the parent P and its child C), each with a worker: slow on a busy machine.
t.setTimeout(scaled(180_000));

const FAILED_LINE = 'mirroring an inventory save to the manager failed';
// Log lines are pino JSON on stdout: the server's events.
const warningsOf = (server: ServerProcess) => server.events.filter((event) => event.msg === FAILED_LINE);
type Mirror = { from: string; updatedAt: unknown };
type Record_ = { _id: string; master?: { status?: string; updatedAt?: string } };

/**
 * The road to P's `/manager`: counts every envelope that reaches it (by the server whose record it updates)
 * and passes it on. Closing it is the parent going down for everyone that reports to it; it comes back on the
 * same port.
 */
class CountingRoad {
  readonly mirrors: Mirror[] = [];
  /** Envelopes received and not yet answered. */
  pending = 0;
  private server: http.Server | undefined;

  constructor(
    readonly port: number,
    private readonly target: () => number,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  count(from: string): number {
    return this.mirrors.filter((mirror) => mirror.from === from).length;
  }

  async open(): Promise<void> {
    const server = http.createServer((incoming, outgoing) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        this.pending++;
        outgoing.on('close', () => this.pending--);
        const envelope = JSON.parse(body) as { filter?: { _id?: string }; update?: { $set?: Record<string, unknown> } };
        this.mirrors.push({ from: String(envelope.filter?._id), updatedAt: envelope.update?.$set?.['master.updatedAt'] });
        const onward = http.request(
          { host: '127.0.0.1', port: this.target(), path: incoming.url, method: 'POST', headers: { ...incoming.headers, host: 'localhost' } },
          (reply) => {
            outgoing.writeHead(reply.statusCode ?? 502, reply.headers);
            reply.pipe(outgoing);
          },
        );
        onward.on('error', () => outgoing.writeHead(502).end());
        onward.end(body);
      });
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.server = server;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

t.test("a child's saves reach its parent once each, never wait for it, are not replayed, and P's own writes do not loop", async (t) => {
  const { dataDir: parentDir, tenants } = await dataDirWithTenants([{ name: 'platform', hosts: ['localhost', '127.0.0.1'] }]);
  const platform = tenants[0]!;
  const parentDb = path.join(parentDir, 'fleetplane.db');
  const childId = 'child-c';
  const parentStore = await EmbeddedStore.open(parentDb);
  t.teardown(() => parentStore.close());
  // P's copy of C's record, in the platform scope, as `createServer` would have left it.
  await parentStore.forOrganization(platform.organization_id).collection('servers').insertOne({ _id: childId, cluster_id: 'acme-cluster', cluster: 'acme-cluster' });
  const childDb = path.join(tempDir(), 'child.db');
  const childStore = await EmbeddedStore.open(childDb);
  await ensureStandardIndexes(childStore);
  await childStore.close();

  let parentPort = 0;
  const road = new CountingRoad(await freePort(), () => parentPort);
  await road.open();
  t.teardown(() => road.close());
  const servers: ServerProcess[] = [];
  t.teardown(() => Promise.all(servers.map((server) => server.stop())));
  // P reports to itself through the road: a write its `/manager` makes that were mirrored would come back.
  const manager = { organizationId: platform.organization_id, host: road.url, apiKey: platform.adminKey };
  const parent = await startMeshServer({
    ...meshConfig('platform-p', parentDb, { workers: 1, dataDir: parentDir }),
    server: { id: 'platform-p', cluster: 'platform' },
    mesh: { enabled: false },
    manager: { ...manager, activation: false },
  });
  servers.push(parent);
  parentPort = parent.port;
  await parent.readyWorkers(1);
  const child = await startMeshServer(meshConfig(childId, childDb, { workers: 1, server: { id: childId, cluster: 'acme-cluster' }, manager }));
  servers.push(child);
  await child.readyWorkers(1);

  // Each of C's saves carries its own `updatedAt`: the mirror of one is told from the mirror of another.
  const save = async (server: ServerProcess) => (await server.command<{ saved: boolean }>('save')).saved;
  const lastUpdatedAt = async (server: ServerProcess, id: string) =>
    ((await server.command<Record_[]>('inventory')).find((record) => record._id === id)?.master?.updatedAt);
  const mirroredOnce = async (id: string, updatedAt: string) => until(`the mirror of ${id}'s save ${updatedAt}`, () => (road.mirrors.some((mirror) => mirror.from === id && mirror.updatedAt === updatedAt) ? true : undefined));

  t.ok(await save(child), "C's save is written");
  const first = (await lastUpdatedAt(child, childId))!;
  await mirroredOnce(childId, first);
  const onParent = await until("C's save on P", async () => {
    const record = await parentStore.collection<Record_>('servers').findOne({ _id: childId });
    return record?.master?.updatedAt === first ? record : undefined;
  });
  t.equal(onParent.master?.status, 'running', "P's copy holds C's saved section");
  // A second save is the barrier: once its mirror arrived, a duplicate of the first would have arrived before it.
  t.ok(await save(child), "C's second save is written");
  await mirroredOnce(childId, (await lastUpdatedAt(child, childId))!);
  t.equal(road.mirrors.filter((mirror) => mirror.updatedAt === first).length, 1, "C's save reached P exactly once");

  // P's own save goes through P's `/manager`, which writes P's record: that write is not mirrored again.
  const parentBefore = road.count('platform-p');
  t.ok(await save(parent), "P's save is written");
  await mirroredOnce('platform-p', (await lastUpdatedAt(parent, 'platform-p'))!);
  t.ok(await save(child), "C's third save is written");
  await mirroredOnce(childId, (await lastUpdatedAt(child, childId))!);
  t.equal(road.count('platform-p') - parentBefore, 1, "P's own save reached /manager once: the write /manager made was not mirrored");

  // P down: C saves and serves, each failed mirror is one warning, and nothing is kept for later.
  await until('the answers to the mirrors so far', () => (road.pending === 0 ? true : undefined));
  await road.close();
  const warningsBefore = warningsOf(child).length;
  const mirrorsWhileDown = road.mirrors.length;
  const failures = 3;
  for (let index = 0; index < failures; index++) {
    t.ok(await save(child), `save ${index + 1} with the parent down is written`);
    const served = await request(child.port, '/whoami');
    t.equal(served.status, 200, 'C keeps serving with its parent down');
  }
  await until(`${failures} warnings`, () => (warningsOf(child).length - warningsBefore >= failures ? true : undefined));
  const warnings = warningsOf(child).slice(warningsBefore);
  t.equal(warnings.length, failures, 'one warning per failed mirror');
  t.notOk(JSON.stringify(warnings).includes(platform.adminKey.split('.')[1]!), 'no warning carries the key');

  await road.open();
  t.ok(await save(child), 'the first save after P returns is written');
  const after = (await lastUpdatedAt(child, childId))!;
  await mirroredOnce(childId, after);
  const sinceReturn = road.mirrors.slice(mirrorsWhileDown).filter((mirror) => mirror.from === childId);
  t.same(sinceReturn.map((mirror) => mirror.updatedAt), [after], 'P received only the new save: 0 replays of the failed ones');
  t.equal(warningsOf(child).length - warningsBefore, failures, 'no warning once P is back', { warnings: warningsOf(child).slice(warningsBefore) });
});
