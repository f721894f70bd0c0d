import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { planApply } from '../../src/crud/apply-resources.js';
import { request, type ServerProcess } from '../helpers/server-process.js';
import { meshConfig, startMeshServer } from '../mesh/helpers.js';
import { platformWithTenant, until } from './manager-fixture.js';
import { scaled } from '../helpers/wait.js';

t.setTimeout(scaled(120_000));

const MISSED_LINE = 'managed server did not confirm its startup in time';
type Record_ = { _id: string; master?: { status?: string } };

/**
 * A cloud that answers every creation with an instance id and starts nothing; it refuses to terminate the
 * instances named in `refused` and accepts the others.
 */
async function emptyCloud(refused: Set<string>) {
  let created = 0;
  const server = http.createServer((incoming, outgoing) => {
    let body = '';
    incoming.on('data', (chunk) => (body += chunk));
    incoming.on('end', () => {
      const json = (status: number, value: unknown) => outgoing.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (incoming.url === '/create') return json(200, { instanceId: `empty-${++created}` });
      const { instanceId } = JSON.parse(body || '{}') as { instanceId?: string };
      if (incoming.url === '/terminate') return refused.has(String(instanceId)) ? json(500, { error: 'refused' }) : json(200, { instanceId });
      return json(404, {});
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((resolve) => server.close(resolve)) };
}

t.test('a server that never starts is logged once by id; a refused termination leaves it failed in both copies with no cleanup', async (t) => {
  const { parentDir, parentDb, platform, acme, tenantDb, parentStore, tenantStore } = await platformWithTenant(t);
  const refused = new Set(['empty-1']);
  const cloud = await emptyCloud(refused);
  t.teardown(() => cloud.close());
  // The platform's provider API "empty": `create` and `terminate` go straight to it (no workflow).
  const apis = [{ name: 'empty', baseUrl: cloud.url, endpoints: { create: { method: 'post', path: '/create' }, terminate: { method: 'post', path: '/terminate' } } }];
  await (await planApply(parentStore, platform.organization_id, { apis } as never)).write();

  const servers: ServerProcess[] = [];
  t.teardown(() => Promise.all(servers.map((server) => server.stop())));
  const parent = await startMeshServer({
    ...meshConfig('platform-p', parentDb, { workers: 1, dataDir: parentDir }),
    server: { id: 'platform-p', cluster: 'platform' },
    mesh: { enabled: false },
    manager: { startupTimeoutMs: 1_000, cleanupDelayMs: 500, activation: false },
  });
  servers.push(parent);
  await parent.readyWorkers(1);
  const post = (body: Record<string, unknown>) => request(parent.port, '/manager', { host: 'localhost', body: { ...body, apikey: platform.adminKey }, timeoutMs: 30_000 });
  const cluster = { name: 'acme', manager: { organization_id: platform.organization_id, for: acme.organization_id }, initialDeployment: { cloud: 'empty' }, store: { path: tenantDb } };
  const inserted = await request(parent.port, '/crud', { host: 'localhost', body: { method: 'object.create', collection: 'clusters', documents: [cluster], apikey: platform.adminKey } });
  t.equal(inserted.status, 200, inserted.body);
  const clusterId = (inserted.json() as { insertedIds: string[] }).insertedIds[0]!;
  const create = async () => {
    const created = await post({ method: 'createServer', cluster: clusterId });
    t.equal(created.status, 200, created.body);
    return created.json() as { server_id: string; instanceId: string };
  };
  const misses = (serverId: string) => parent.events.filter((event) => event.msg === MISSED_LINE && event.server === serverId);

  const first = await create();
  t.equal(first.instanceId, 'empty-1', "the cloud's instance id");
  await until('the watchdog to miss the first server', () => (misses(first.server_id).length > 0 ? true : undefined));
  // The second server's miss is the barrier: a repeated line for the first would have come before it.
  const second = await create();
  await until('the watchdog to miss the second server', () => (misses(second.server_id).length > 0 ? true : undefined));
  t.equal(misses(first.server_id).length, 1, 'exactly one line names the server that never started');
  const parentCopy = async (id: string) => parentStore.collection<Record_>('servers').findOne({ _id: id });
  const tenantCopy = async (id: string) => tenantStore.collection<Record_>('servers').findOne({ _id: id });
  t.ok(await parentCopy(first.server_id), 'a miss deletes nothing');

  const refusedReply = await post({ method: 'terminateServer', cluster: clusterId, server_id: first.server_id });
  t.equal(refusedReply.status, 502, 'the refusal is the caller\'s answer');
  t.equal((await parentCopy(first.server_id))?.master?.status, 'failed', "P's copy is failed");
  t.equal((await tenantCopy(first.server_id))?.master?.status, 'failed', "the tenant's copy is failed");

  // The second termination is accepted: its cleanup running shows the delay has passed for the first too.
  const accepted = await post({ method: 'terminateServer', cluster: clusterId, server_id: second.server_id });
  t.equal(accepted.status, 200, accepted.body);
  await until('the cleanup of the accepted termination', async () => ((await parentCopy(second.server_id)) === null && (await tenantCopy(second.server_id)) === null ? true : undefined));
  t.equal((await parentCopy(first.server_id))?.master?.status, 'failed', "the refused server's record is still on P after the cleanup delay");
  t.equal((await tenantCopy(first.server_id))?.master?.status, 'failed', 'and in the tenant copy');
});
