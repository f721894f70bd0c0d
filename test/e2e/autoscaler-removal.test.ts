import { randomBytes } from 'node:crypto';
import t from 'tap';
import { FAST, isAlive, ServerProcess, tempDir } from '../helpers/server-process.js';
import { cloudApi, clusterServer, clusterStore, confirmed, failures, fakeCloud, logLine, messages, platformCrud } from './autoscaler-cluster-fixture.js';
import { killLocalInstances, LightLoad, localInstances, logOf, runningTargets, type InventoryRecord } from './autoscaler-fleet-fixture.js';
import { until } from './manager-fixture.js';

// Real servers on one host sharing one store; each start is a real process with one worker: slow on a busy machine.
t.setTimeout(300_000);

const MESH_SECRET = 'the-default-cluster-mesh-secret-0123456789';
/** Thresholds no idle server crosses: only the sizes move the cluster. */
const SIZES_ONLY = { windowMs: 2_000, cooldownMs: 2_000, cpu: { scaleOutAbove: 100, scaleInBelow: 0 }, memory: { scaleOutAbove: 100, scaleInBelow: 0 } };
const run = randomBytes(3).toString('hex');

t.test('an unmanaged cluster on the local provider: a scale-out starts a server that joins the cluster; the scale-in stops it with exit 0, no request failed, nothing failed', async (t) => {
  const { dataDir, dbPath, platform, store } = await clusterStore(t);
  const localRoot = tempDir('fleetplane-local-root-');
  const a = await ServerProcess.start(clusterServer(`a-${run}`, dbPath, MESH_SECRET, {
    dataDir,
    // What every server the local provider starts runs with, under the fields the provider sets.
    manager: { localRoot, localConfig: { log: { level: 'info' }, restart: FAST.restart, shutdown: FAST.shutdown, lifecycle: { readinessGraceMs: 300 }, mesh: { discoveryIntervalMs: 500, pingIntervalMs: 2_000, pongTimeoutMs: 5_000 } } },
  }));
  t.teardown(async () => {
    killLocalInstances(localRoot);
    await a.stop();
  });
  const aId = `a-${run}`;
  await a.readyWorkers(1);
  const crud = platformCrud(a.port, platform);
  await until(`${aId} to hold the decider lease`, async () => ((await store.collection('fleetplane_leases').findOne({ _id: 'decider:default' }))?.owner === aId ? true : undefined));
  await crud({ method: 'object.create', collection: 'clusters', documents: [{ name: 'default', initialDeployment: { cloud: 'local', workers: 1 }, autoscaler: { minClusterSize: 2, maxClusterSize: 2, ...SIZES_ONLY } }] });

  const inventory = store.collection<InventoryRecord>('servers');
  const decided = await logLine(a, 'the below-min scale-out', (event) => event.msg === 'autoscaler decided scale-out (below-min)');
  t.match(decided, { decision: { current: 1, desired: 2 } });
  const bId = await until('a new server in the inventory', async () => (await inventory.find({ cluster_id: 'default' }, { limit: 0 })).find((record) => record._id !== aId)?._id);
  const b = await until(`${bId} confirmed running`, () => confirmed(store, bId), 90_000);
  t.match(b, { cluster_id: 'default', master: { status: 'running' }, infrastructure: { cloud: 'local' } }, 'the new server records itself running, with the instance the provider made');
  const bNode = await until(`the local instance of ${bId}`, () => localInstances(localRoot).find((entry) => entry.serverId === bId));
  await until(`${bId} to link to ${aId}`, () => logOf(bNode.dataDir).find((line) => line.msg === 'mesh link open' && line.peer === aId));
  t.pass(`${bId} joined ${aId}'s mesh`);
  t.notOk(failures(messages(a).map((msg) => ({ msg }))).length, 'the scale-out logged nothing failed');
  t.equal((await inventory.find({ cluster_id: 'default' }, { limit: 0 })).length, 2, 'one server added, no more');

  const light = new LightLoad(() => runningTargets(inventory, 'default'), { host: platform.host, key: platform.adminKey, body: { method: 'object.read', collection: 'notes', limit: 5 } }, { loops: 2, pauseMs: 40 });
  t.teardown(() => light.stop());
  await light.start();
  await until('the light client to reach both servers', () => (light.stats.byUrl.size >= 2 ? true : undefined));
  await crud({ method: 'object.update', collection: 'clusters', filter: { name: 'default' }, update: { $set: { 'autoscaler.minClusterSize': 1, 'autoscaler.maxClusterSize': 1 } } });
  const done = await logLine(a, 'the scale-in to end', (event) => /^autoscaler scale-in (done|failed|cancelled)/.test(String(event.msg)));
  t.equal(done.msg, 'autoscaler scale-in done', String(done.msg));
  t.match(done, { action: { serverId: bId, reason: 'above-max' } }, 'the new server goes, not the deciding one');
  const exited = await logLine(a, `the local provider to see ${bId} exit`, (event) => event.msg === 'local server exited' && event.server === bId);
  t.equal(exited.code, 0, 'the removed server exited 0');
  t.notOk(isAlive(bNode.pid), 'its process is gone');
  t.ok(logOf(bNode.dataDir).some((line) => line.msg === 'shutdown complete'), 'it stopped gracefully');
  const stats = await light.stop();
  t.equal(stats.failed + stats.unexpected, 0, `no request of the light client failed (${stats.ok} served, ${stats.redirected} through a 307): ${stats.errors.slice(0, 5).join('; ')}`);
  t.same(failures(a.events), [], 'the deciding server logged nothing failed');
  t.same(failures(logOf(bNode.dataDir)), [], 'nor did the removed one');
  await until(`${bId}'s terminating record to be swept`, async () => ((await inventory.findOne({ _id: bId })) ? undefined : true));
});

t.test('a provider that answers the termination while the node still runs: the node is stopped gracefully by autoscaler.remove, exits 0, no request failed, nothing failed', async (t) => {
  const { dataDir, dbPath, platform, store } = await clusterStore(t);
  const cloud = await fakeCloud(t);
  const [aId, bId] = [`a-${run}-2`, `b-${run}-2`];
  const a = await ServerProcess.start(clusterServer(aId, dbPath, MESH_SECRET, { dataDir }));
  t.teardown(() => a.stop());
  await a.readyWorkers(1);
  const crud = platformCrud(a.port, platform);
  await crud({ method: 'object.create', collection: 'apis', documents: [cloudApi('fakecloud', cloud.baseUrl)] });
  await crud({ method: 'object.create', collection: 'clusters', documents: [{ name: 'default', initialDeployment: { cloud: 'fakecloud' }, autoscaler: { minClusterSize: 1, maxClusterSize: 2, ...SIZES_ONLY } }] });
  await until(`${aId} to hold the decider lease`, async () => ((await store.collection('fleetplane_leases').findOne({ _id: 'decider:default' }))?.owner === aId ? true : undefined));
  const b = await ServerProcess.start(clusterServer(bId, dbPath, MESH_SECRET, { dataDir: tempDir() }));
  t.teardown(() => b.stop());
  await b.readyWorkers(1);
  await until(`${bId} confirmed running`, () => confirmed(store, bId));
  // As a cloud's createServer would have recorded it.
  await store.collection('servers').updateOne({ _id: bId }, { $set: { 'infrastructure.cloud': 'fakecloud', 'infrastructure.instanceId': 'i-b' } });
  await logLine(a, `${aId} to link to ${bId}`, (event) => event.msg === 'mesh link open' && event.peer === bId);

  const inventory = store.collection<InventoryRecord>('servers');
  const light = new LightLoad(() => runningTargets(inventory, 'default'), { host: platform.host, key: platform.adminKey, body: { method: 'object.read', collection: 'notes', limit: 5 } }, { loops: 2, pauseMs: 40 });
  t.teardown(() => light.stop());
  await light.start();
  await until('the light client to reach both servers', () => (light.stats.byUrl.size >= 2 ? true : undefined));
  await crud({ method: 'object.update', collection: 'clusters', filter: { name: 'default' }, update: { $set: { 'autoscaler.maxClusterSize': 1 } } });

  const code = await Promise.race([b.exited, new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 90_000))]);
  t.equal(code, 0, 'the removed server exited 0');
  const done = await logLine(a, 'the scale-in to end', (event) => /^autoscaler scale-in (done|failed|cancelled)/.test(String(event.msg)));
  t.equal(done.msg, 'autoscaler scale-in done', String(done.msg));
  t.same(cloud.requests.map((entry) => [entry.path, entry.body.instanceId, entry.body.server_id]), [['/terminate', 'i-b', bId]], 'the provider was asked once, for its instance');
  const steps = messages(a).filter((msg) => msg.startsWith('autoscaler ') && msg.includes(bId));
  t.same(steps, [`autoscaler drained ${bId}`, `autoscaler marked ${bId} terminating`, `autoscaler stopped ${bId}`], 'drain, terminating, provider request, then the graceful stop');
  t.ok(messages(b).includes('removed from the cluster: stopping gracefully'), 'the node heard it was removed');
  t.ok(messages(b).includes('shutdown complete'), 'and stopped as a graceful stop does');
  t.notOk(messages(b).some((msg) => /power/.test(msg)), 'the host is not powered off: the operator did not opt in');
  const stats = await light.stop();
  t.equal(stats.failed + stats.unexpected, 0, `no request of the light client failed (${stats.ok} served, ${stats.redirected} through a 307): ${stats.errors.slice(0, 5).join('; ')}`);
  t.same(failures(a.events), [], 'the deciding server logged nothing failed');
  t.same(failures(b.events), [], 'nor did the removed one');
});
