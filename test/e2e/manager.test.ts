import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createKey } from '../../src/auth/keys.js';
import { freePort, request, tempDir, type ServerProcess } from '../helpers/server-process.js';
import { platformWithTenant, until } from './manager-fixture.js';
import { meshConfig, startMeshServer, type Result } from '../mesh/helpers.js';
import { scaled } from '../helpers/wait.js';

// Three server processes (P, the tenant's T, and the one P creates), each with a worker: slow on a busy machine.
t.setTimeout(scaled(240_000));

const MESH_SECRET = 'the-acme-cluster-mesh-secret-0123456789';
type Record_ = { _id: string; master?: { status?: string }; infrastructure?: { instanceId?: string } };

t.test('a platform server creates a tenant server with the local provider, sees it confirm and join its mesh, then retires it', async (t) => {
  const { parentDir, platform, acme, tenantDb, parentStore, tenantStore } = await platformWithTenant(t);
  // The acme cluster's own store: the same organization (same id), its admin key.
  const acmeOrganization = (await parentStore.collection('organizations').findOne({ _id: acme.organization_id }))!;
  await tenantStore.collection('organizations').insertOne({ ...acmeOrganization, platform: true });
  await createKey(tenantStore, { organizationId: acme.organization_id, name: 'admin', admin: true });

  const parentPort = await freePort();
  const parentUrl = `http://127.0.0.1:${parentPort}`;
  const localRoot = tempDir();
  const servers: ServerProcess[] = [];
  t.teardown(() => Promise.all(servers.map((server) => server.stop())));
  const parent = await startMeshServer({
    ...meshConfig('platform-p', path.join(parentDir, 'fleetplane.db'), { workers: 1, dataDir: parentDir }),
    http: { port: parentPort, host: '127.0.0.1' },
    server: { id: 'platform-p', cluster: 'platform', publicUrl: parentUrl },
    mesh: { enabled: false },
    manager: { startupTimeoutMs: scaled(60_000), cleanupDelayMs: 2_000, localRoot },
  });
  servers.push(parent);
  await parent.readyWorkers(1);
  await until('P to serve', async () => ((await request(parentPort, '/readyz')).status === 200 ? true : undefined));
  const post = (pathname: string, body: unknown) => request(parentPort, pathname, { host: 'localhost', body: { ...(body as object), apikey: platform.adminKey }, timeoutMs: 30_000 });
  const cluster = {
    name: 'acme',
    manager: { organization_id: platform.organization_id, host: parentUrl, for: acme.organization_id },
    initialDeployment: { cloud: 'local', workers: 1 },
    mesh: { secret: MESH_SECRET },
    store: { path: tenantDb },
  };
  const inserted = await post('/crud', { method: 'object.create', collection: 'clusters', documents: [cluster] });
  t.equal(inserted.status, 200, inserted.body);
  const clusterId = (inserted.json() as { insertedIds: string[] }).insertedIds[0]!;

  // T: the tenant's server already running in its cluster.
  const tenantServer = await startMeshServer(
    meshConfig('t-acme', tenantDb, { workers: 1, server: { id: 't-acme', cluster: clusterId, organization: acme.organization_id }, mesh: { secret: MESH_SECRET, discoveryIntervalMs: 1_000 } }),
  );
  servers.push(tenantServer);
  await tenantServer.readyWorkers(1);

  const created = await post('/manager', { method: 'createServer', cluster: clusterId });
  t.equal(created.status, 200, created.body);
  const { server_id: serverId, instanceId } = created.json() as { server_id: string; instanceId: string };
  t.match(instanceId, /^fp-local-/);

  const confirmed = await until('the confirmation on P', async () => {
    const record = await parentStore.collection<Record_>('servers').findOne({ _id: serverId });
    return record?.master?.status === 'running' ? record : undefined;
  });
  t.equal(confirmed.infrastructure?.instanceId, instanceId, "P's copy holds the provider's patch and the server's own running update");
  t.equal((await tenantStore.collection<Record_>('servers').findOne({ _id: serverId }))?.master?.status, 'running', 'the tenant copy too');

  const reached = await until('a broadcast status from T to reach the new server', async () => {
    const result = await tenantServer.command<Result>('request', { envelope: { method: 'status', broadcast: true } });
    return result.replies.some((reply) => reply.server === serverId) ? result : undefined;
  });
  t.ok(reached.replies.find((reply) => reply.server === serverId)?.ok, "the new server answers in the tenant's mesh");

  const { pid } = JSON.parse(readFileSync(path.join(localRoot, instanceId, 'instance.json'), 'utf8')) as { pid: number };
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  const serverConfig = JSON.parse(readFileSync(path.join(localRoot, instanceId, 'fleetplane.config.json'), 'utf8')) as { manager: { apiKey: string } };
  const secret = serverConfig.manager.apiKey.split('.')[1]!;
  t.notOk(cmdline.includes(secret), "the server's key is not in its argv");
  t.notOk(JSON.stringify(await parentStore.collection('servers').find({})).includes(secret), 'nor in an inventory record');

  const terminated = await post('/manager', { method: 'terminateServer', cluster: clusterId, server_id: serverId });
  t.equal(terminated.status, 200, terminated.body);
  t.match(terminated.json(), { server_id: serverId, status: 'terminating', provider: { instanceId, exitCode: 0 } }, 'the process stopped gracefully with exit 0');
  t.equal((await tenantStore.collection<Record_>('servers').findOne({ _id: serverId }))?.master?.status, 'terminating', 'its last save did not overwrite terminating');
  await until('the cleanup to remove both records', async () => {
    const left = (await parentStore.collection('servers').countDocuments({ _id: serverId })) + (await tenantStore.collection('servers').countDocuments({ _id: serverId }));
    return left === 0 ? true : undefined;
  });
  t.pass('both records removed after the cleanup delay');
  for (const server of [parent, tenantServer]) t.notOk(JSON.stringify(server.events).includes(secret) || server.stderr.join('\n').includes(secret), 'no key in any log (pino lines are its events)');
});
