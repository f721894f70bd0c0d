import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { createKey } from '../../src/auth/keys.js';
import { FAST, fleetplane, freePort, isAlive, request, tempDir, type ServerProcess } from '../helpers/server-process.js';
import { meshConfig, startMeshServer } from '../mesh/helpers.js';
import { HeavyLoad, LightLoad, killLocalInstances, localInstances, logOf, runningTargets, type InventoryRecord, type TenantRequest } from './autoscaler-fleet-fixture.js';
import { platformWithTenant, until } from './manager-fixture.js';
import { scaled } from '../helpers/wait.js';

// A platform server P with the local provider, and the tenant cluster's servers it starts (up to two at once),
// each a real `fleetplane start` with one worker: slow on a busy machine.
t.setTimeout(scaled(240_000));

const MESH_SECRET = 'the-acme-cluster-mesh-secret-0123456789';
const INTERVAL_MS = 250;
const COOLDOWN_MS = 4_000;
const SWEEP_MS = 1_500;
/**
 * CPU in percent of the host's CPUs, for the cluster's servers together: one server under the load below
 * measures about 30 %, an idle one about 1 %.
 */
const POLICY = {
  minClusterSize: 1,
  maxClusterSize: 3,
  cpu: { scaleOutAbove: 12, scaleInBelow: 5 },
  memory: { scaleOutAbove: 95, scaleInBelow: 90 },
  windowMs: 2_000,
  cooldownMs: COOLDOWN_MS,
  decommissionStrategy: 'newest',
};
/** What every server the local provider starts runs with: the autoscaler on, short timings. */
const NODE_CONFIG = {
  log: { level: 'info' },
  restart: FAST.restart,
  shutdown: FAST.shutdown,
  // A drained server's /readyz says 503 this long while it still serves: the light client's requests reach it
  // during its scale-in.
  lifecycle: { readinessGraceMs: 500 },
  autoscaler: { enabled: true, intervalMs: INTERVAL_MS, sweepIntervalMs: SWEEP_MS },
  organizations: { graceMs: 300 },
  mesh: { discoveryIntervalMs: 1_000, pingIntervalMs: 2_000, pongTimeoutMs: scaled(5_000) },
  // The local provider answers a termination once the server has exited.
  manager: { timeoutMs: scaled(20_000) },
  workers: { readyTimeoutMs: scaled(30_000) },
};

/** Figures of one run, in ms; written to AUTOSCALER_E2E_FIGURES when set (bench/autoscaler.mjs runs this file). */
const figures: Record<string, number> = {};

t.test('an autoscaled cluster on the local provider grows under load, shrinks drain-first, keeps a refused server, and sleeps at zero', async (t) => {
  const { parentDir, parentDb, platform, acme, tenantDb, parentStore, tenantStore } = await platformWithTenant(t);
  // The acme cluster's own store: its organization (same id) is the platform there, with a key of its own.
  const acmeOrganization = (await parentStore.collection('organizations').findOne({ _id: acme.organization_id }))!;
  await tenantStore.collection('organizations').insertOne({ ...acmeOrganization, platform: true });
  const tenantKey = (await createKey(tenantStore, { organizationId: acme.organization_id, name: 'admin', admin: true })).key;
  const tenant: TenantRequest = { host: acme.host, key: tenantKey, body: { method: 'object.read', collection: 'notes', limit: 5 } };

  const localRoot = tempDir();
  const servers: ServerProcess[] = [];
  t.teardown(async () => {
    killLocalInstances(localRoot);
    await Promise.all(servers.map((server) => server.stop()));
  });
  const parentPort = await freePort();
  const parentUrl = `http://127.0.0.1:${parentPort}`;
  const parent = await startMeshServer({
    ...meshConfig('platform-p', parentDb, { workers: 1, dataDir: parentDir }),
    http: { port: parentPort, host: '127.0.0.1' },
    server: { id: 'platform-p', cluster: 'platform', publicUrl: parentUrl },
    mesh: { enabled: false },
    // The cleanup after a termination waits longer than the test: the records go through the cluster's sweep.
    manager: { startupTimeoutMs: scaled(60_000), cleanupDelayMs: 600_000, localRoot, localConfig: NODE_CONFIG },
  });
  servers.push(parent);
  await parent.readyWorkers(1);
  const post = (pathname: string, body: object, host = 'localhost', key = platform.adminKey) => request(parentPort, pathname, { host, key, body, timeoutMs: 30_000 });
  const inserted = await post('/crud', {
    method: 'object.create',
    collection: 'clusters',
    documents: [{ name: 'acme', manager: { organization_id: platform.organization_id, host: parentUrl, for: acme.organization_id }, initialDeployment: { cloud: 'local', workers: 1 }, mesh: { secret: MESH_SECRET }, store: { path: tenantDb } }],
  });
  t.equal(inserted.status, 200, inserted.body);
  const clusterId = (inserted.json() as { insertedIds: string[] }).insertedIds[0]!;
  // The policy is the cluster document in the cluster's own store, under the parent's cluster id.
  await tenantStore.forOrganization(acme.organization_id).collection('clusters').insertOne({ _id: clusterId, name: 'acme', autoscaler: POLICY });

  const inventory = tenantStore.collection<InventoryRecord>('servers');
  const parentInventory = parentStore.collection<InventoryRecord>('servers');
  const targets = () => runningTargets(inventory, clusterId);
  const record = (id: string) => inventory.findOne({ _id: id });
  const statusOf = async (id: string) => [(await record(id))?.master?.status, (await parentInventory.findOne({ _id: id }))?.master?.status];
  const instance = (id: string) => until(`the instance of ${id}`, () => localInstances(localRoot).find((entry) => entry.serverId === id));
  const logLine = (dataDir: string, what: string, match: (line: ReturnType<typeof logOf>[number]) => boolean, from = 0) =>
    until(what, () => logOf(dataDir).filter((line) => line.time >= from).find(match));
  const serving = (url: string) => until(`${url} to serve the tenant`, async () => {
    const reply = await request(Number(new URL(url).port), '/crud', { host: tenant.host, key: tenant.key, body: tenant.body }).catch(() => undefined);
    return reply?.status === 200 ? Date.now() : undefined;
  });
  const running = (id: string) => until(`${id} confirmed running on both copies`, async () => {
    const [own, parentCopy] = await statusOf(id);
    const found = await record(id);
    return own === 'running' && parentCopy === 'running' && found?.master?.publicUrl ? found.master.publicUrl : undefined;
  });
  const newServer = (known: string[]) => until('a new server in the inventory', async () => (await inventory.find({ cluster_id: clusterId }, { limit: 0 })).find((entry) => !known.includes(entry._id))?._id);
  const setPolicy = async (through: string, set: Record<string, unknown>) => {
    const reply = await request(Number(new URL(through).port), '/crud', { host: tenant.host, key: tenant.key, body: { method: 'object.update', collection: 'clusters', filter: { _id: clusterId }, update: { $set: set } } });
    t.equal(reply.status, 200, `policy ${JSON.stringify(set)}: ${reply.body}`);
  };

  // The cluster's first server, as an operator asks for it.
  const created = await post('/manager', { method: 'createServer', cluster: clusterId });
  t.equal(created.status, 200, created.body);
  const a = (created.json() as { server_id: string }).server_id;
  const aUrl = await running(a);
  await serving(aUrl);
  const aNode = await instance(a);

  let b = '';
  let c = '';
  // The light client of the cluster: from the moment the heavy load stops, through the scale-in.
  const light = new LightLoad(targets, tenant, { loops: 2, pauseMs: 40 });
  let heavyStoppedAt = 0;
  t.teardown(() => light.stop());

  t.test('1. load over the threshold: a second server is created, confirmed, joins the mesh and serves part of the load', async (t) => {
    const heavy = new HeavyLoad(targets, tenant, { connections: 6, durationS: scaled(60_000) / 1000 });
    const loadStartedAt = Date.now();
    await heavy.pool.start();
    try {
      const decided = await logLine(aNode.dataDir, 'the deciding server to scale out on CPU', (line) => line.msg === 'autoscaler decided scale-out (cpu)');
      b = await newServer([a]);
      const bUrl = await running(b);
      const served = await until(`${b} to serve part of the load`, () => {
        const counts = heavy.served.get(b);
        return counts && counts.ok >= 20 ? { ...counts } : undefined;
      });
      heavyStoppedAt = Date.now();
      await heavy.stop();
      await light.start();
      t.match(decided, { decision: { action: 'scale-out', reason: 'cpu', current: 1, desired: 2 } });
      t.ok(served.ok > 0, `${b} served ${served.ok} requests of the load (${a}: ${heavy.served.get(a)?.ok})`);
      t.not(new URL(bUrl).port, new URL(aUrl).port, 'a server of its own');
      const bNode = await instance(b);
      t.ok(await logLine(bNode.dataDir, `${b} to link to ${a}`, (line) => line.msg === 'mesh link open' && line.peer === a), `${b} joined ${a}'s mesh`);
      t.ok(await logLine(aNode.dataDir, `${a} to see ${b} link`, (line) => line.msg === 'mesh link open' && line.peer === b), `${a} saw it join`);
      figures.loadToDecisionMs = decided.time - loadStartedAt;
      figures.thresholdToServingMs = served.firstOkAt! - decided.time;
      t.comment(`threshold crossed (decision) → new server serving: ${figures.thresholdToServingMs} ms`);
    } finally {
      await heavy.stop();
    }
    t.same((await inventory.find({ cluster_id: clusterId }, { limit: 0 })).map((entry) => entry._id).sort(), [a, b].sort(), 'one server added, no more');
  });

  t.test('2. load stops: after the cooldown the new server is drained and removed with no failed request, and swept', async (t) => {
    const bNode = await instance(b);
    const from = heavyStoppedAt;
    const decided = await logLine(aNode.dataDir, 'the idle scale-in', (line) => line.msg === 'autoscaler decided scale-in (idle)', from);
    t.match(decided, { decision: { serverId: b, current: 2, desired: 1 } }, 'the newest server goes, not the deciding one');
    const done = await logLine(aNode.dataDir, 'the scale-in to end', (line) => /^autoscaler scale-in (done|failed|cancelled)/.test(line.msg) && (line.action as { serverId?: string }).serverId === b, from);
    t.equal(done.msg, 'autoscaler scale-in done');
    const exitedAt = await until(`${b}'s process to exit`, () => (isAlive(bNode.pid) ? undefined : Date.now()));
    const steps = logOf(aNode.dataDir).filter((line) => line.time >= decided.time && line.msg.startsWith('autoscaler ') && line.msg.includes(b));
    t.same(steps.slice(0, 2).map((line) => line.msg), [`autoscaler drained ${b}`, `autoscaler marked ${b} terminating`], 'drained first, then terminating committed before the provider request');
    const swept = await logLine(aNode.dataDir, 'the sweep', (line) => line.msg === 'autoscaler swept terminating records', steps[1]?.time ?? from);
    t.ok((swept.deleted as number) >= 1, 'the sweep deleted it');
    await until(`${b}'s records to be gone`, async () => ((await statusOf(b)).every((status) => status === undefined) ? true : undefined));
    const stats = await light.stop();
    t.equal(stats.failed, 0, `no failed request: ${stats.errors.slice(0, 5).join('; ')}`);
    t.equal(stats.unexpected, 0, stats.errors.slice(0, 5).join('; '));
    // The scale-in's span: from its decision until the removed server's process was seen gone.
    const during = light.between(decided.time, exitedAt);
    t.ok(during.requests > 0, `${during.requests} requests ended during the scale-in, ${during.failed} failed; ${stats.ok} served in all, ${stats.redirected} through a 307`);
    figures.loadStopToScaleInMs = decided.time - from;
    figures.scaleInMs = done.time - decided.time;
    figures.scaleInRequests = during.requests;
    figures.scaleInFailed = during.failed;
    t.comment(`scale-in decided → done: ${figures.scaleInMs} ms; during it ${during.requests} requests, ${during.failed} failed; in all ${stats.ok} served, ${stats.redirected} through a 307, ${stats.failed} failed`);
  });

  t.test('3. a provider that refuses the termination: failed on both copies, back in service, no second attempt', async (t) => {
    const startedAt = Date.now();
    await setPolicy(aUrl, { 'autoscaler.minClusterSize': 2 });
    await logLine(aNode.dataDir, 'a below-min scale-out', (line) => line.msg === 'autoscaler decided scale-out (below-min)', startedAt);
    c = await newServer([a, b]);
    const cUrl = await running(c);
    await serving(cUrl);
    const cNode = await instance(c);
    // The parent's copy names an instance its provider does not know: the provider refuses (404).
    const real = (await parentInventory.findOne({ _id: c }))!.infrastructure!.instanceId!;
    await parentInventory.updateOne({ _id: c }, { $set: { 'infrastructure.instanceId': 'fp-local-0000000000000000' } });
    await setPolicy(aUrl, { 'autoscaler.minClusterSize': 1 });
    const failed = await logLine(aNode.dataDir, 'the refused scale-in', (line) => /^autoscaler scale-in (done|failed|cancelled)/.test(line.msg) && (line.action as { serverId?: string }).serverId === c, startedAt);
    t.match(failed, { msg: /^autoscaler scale-in failed: /, action: { serverId: c, outcome: 'failed' } });
    const steps = logOf(aNode.dataDir).filter((line) => line.time >= startedAt && line.msg.startsWith('autoscaler ') && line.msg.includes(c)).map((line) => line.msg);
    t.same(steps, [`autoscaler drained ${c}`, `autoscaler marked ${c} terminating`, `autoscaler marked ${c} failed`, `autoscaler took ${c} back into service`]);
    t.same(await statusOf(c), ['failed', 'failed'], 'failed on the tenant copy and the parent copy');
    t.ok(isAlive(cNode.pid), 'the server is still there');
    await serving(cUrl);
    t.equal((await request(Number(new URL(cUrl).port), '/readyz')).status, 200, 'and back in service: ready, not drained');

    // Evaluations go on past the cooldown: the failed server counts and is never picked again.
    const ctlStatus = async () => JSON.parse((await fleetplane(['ctl', 'scale', 'status', '--json', '--data-dir', aNode.dataDir])).stdout).replies[0].result;
    // Until one evaluation follows the action, the last decision is the one that made it.
    const ended = await until('the refused action to be over', async () => {
      const status = await ctlStatus();
      return status.lastAction?.serverId === c && status.lastAction.outcome !== undefined ? status : undefined;
    });
    const after = await until('an evaluation after the cooldown', async () => {
      const status = await ctlStatus();
      return status.evaluations > ended.evaluations && status.lastDecision?.reason !== 'cooldown' ? status : undefined;
    });
    t.match(after.lastDecision, { action: 'none', current: 2 }, 'the refused server still counts toward the size');
    const attempts = logOf(aNode.dataDir).filter((line) => line.time >= startedAt && line.msg === 'autoscaler decided scale-in (idle)');
    t.equal(attempts.length, 1, 'one attempt, none after the cooldown');
    t.equal(parent.events.filter((event) => event.msg === 'the provider did not terminate the managed server' && event.server === c).length, 1, 'the provider was asked once');

    // People fix it: the parent's copy names the real instance again, and the server is terminated through it.
    await parentInventory.updateOne({ _id: c }, { $set: { 'infrastructure.instanceId': real } });
    const terminated = await post('/manager', { method: 'terminateServer', cluster: clusterId, server_id: c });
    t.match(terminated.json(), { server_id: c, status: 'terminating', provider: { exitCode: 0 } }, terminated.body);
    await until(`${c}'s records to be swept`, async () => ((await statusOf(c)).every((status) => status === undefined) ? true : undefined));
  });

  t.test('4. scale to zero on the organization going inactive, and back through the platform activation', async (t) => {
    const startedAt = Date.now();
    await setPolicy(aUrl, { 'autoscaler.minClusterSize': 0 });
    const socket = new WebSocket(`${aUrl.replace(/^http/, 'ws')}/ws`, { headers: { host: tenant.host } });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    socket.close();
    await new Promise((resolve) => socket.once('close', resolve));
    const inactive = await logLine(aNode.dataDir, 'the organization inactive after the grace', (line) => line.msg === "autoscaler: the cluster's organization is inactive", startedAt);
    const decided = await logLine(aNode.dataDir, 'the last server to remove itself', (line) => line.msg === 'autoscaler decided scale-in (organization-inactive)', startedAt);
    t.match(decided, { decision: { serverId: a, current: 1, desired: 0 } });
    await until(`${a}'s process to be stopped by the provider`, () => (isAlive(aNode.pid) ? undefined : true));
    const removedAt = Date.now();
    const steps = logOf(aNode.dataDir).filter((line) => line.time >= decided.time && line.msg.startsWith('autoscaler ') && line.msg.includes(a)).map((line) => line.msg);
    t.same(steps.slice(0, 2), [`autoscaler drained ${a}`, `autoscaler marked ${a} terminating`], 'it drained itself and committed terminating first');
    t.same(await statusOf(a), ['terminating', 'terminating'], 'its records say terminating, not failed');
    t.same(await targets(), [], 'no server runs');
    figures.inactiveToRemovedMs = removedAt - inactive.time;
    t.comment(`organization inactive → last server removed: ${figures.inactiveToRemovedMs} ms`);

    const activatedAt = Date.now();
    const activation = await post('/crud', tenant.body, acme.host, acme.adminKey);
    t.equal(activation.status, 200, 'the platform serves the tenant while its cluster sleeps');
    await parent.waitFor((event) => event.event === 'organization.active' && event.organization_id === acme.organization_id, 10_000);
    const d = await newServer([a, b, c]);
    const servingAt = await serving(await running(d));
    figures.activationToServingMs = servingAt - activatedAt;
    t.comment(`activation on the platform → new server serving: ${figures.activationToServingMs} ms`);
    await until(`${a}'s terminating records to be swept by the new server`, async () => ((await statusOf(a)).every((status) => status === undefined) ? true : undefined));
  });
});

t.teardown(() => {
  t.comment(`figures: ${JSON.stringify(figures)}`);
  const file = process.env.AUTOSCALER_E2E_FIGURES;
  if (file) writeFileSync(path.resolve(file), `${JSON.stringify(figures)}\n`);
});
