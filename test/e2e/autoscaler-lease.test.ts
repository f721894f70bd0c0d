import { randomBytes } from 'node:crypto';
import t from 'tap';
import { createKey } from '../../src/auth/keys.js';
import { request, tempDir, type ServerProcess } from '../helpers/server-process.js';
import { startMeshServer, type Peer } from '../mesh/helpers.js';
import { cloudApi, clusterServer, clusterStore, confirmed, failures, fakeCloud, platformCrud } from './autoscaler-cluster-fixture.js';
import { until } from './manager-fixture.js';

// Three real servers on one store file, each alone in its mesh: slow to start on a busy machine.
t.setTimeout(300_000);

const COOLDOWN_MS = 3_000;
/** Far below its minimum: the cluster wants a new server every cooldown, whatever is pending. */
const POLICY = { minClusterSize: 50, maxClusterSize: 60, windowMs: 2_000, cooldownMs: COOLDOWN_MS, cpu: { scaleOutAbove: 100, scaleInBelow: 0 }, memory: { scaleOutAbove: 100, scaleInBelow: 0 } };
const LEASE = 'decider:default';
const decisions = (server: ServerProcess) => server.events.filter((event) => event.msg === 'autoscaler decided scale-out (below-min)');

t.test('servers that share a store but not a mesh: one decides at a time, at most one scale-out per cooldown, also when the decider stops; no key reads or forges the lease', async (t) => {
  const { dataDir, dbPath, platform, acme, store } = await clusterStore(t);
  const acmeMember = (await createKey(store, { organizationId: acme.organization_id, name: 'member', permissions: { '*': true } })).key;
  const platformNoRights = (await createKey(store, { organizationId: platform.organization_id, name: 'no rights', permissions: {} })).key;
  const cloud = await fakeCloud(t);
  const run = randomBytes(3).toString('hex');
  const ids = ['s1', 's2', 's3'].map((name) => `${name}-${run}`);
  // A mesh secret each: their links can never form, and each sees itself alone (the lowest running id it reaches).
  const servers = await Promise.all(ids.map((id, index) => startMeshServer(clusterServer(id, dbPath, `mesh-secret-of-${id}-only-0123456789`, { dataDir: index === 0 ? dataDir : tempDir() }))));
  t.teardown(() => Promise.all(servers.map((server) => server.stop())));
  for (const id of ids) await until(`${id} confirmed running`, () => confirmed(store, id));
  const crud = platformCrud(servers[0]!.port, platform);
  await crud({ method: 'object.create', collection: 'apis', documents: [cloudApi('fakecloud', cloud.baseUrl)] });
  // The larger ids dial the smaller ones: each dial is refused (another secret), and retried.
  await until('the dials between them to be refused', () => (servers[0]!.events.some((event) => event.event === 'mesh:refused') && servers.slice(1).every((server) => server.events.some((event) => event.event === 'mesh:reconnect')) ? true : undefined));
  for (const server of servers) t.same(await server.command<Peer[]>('mesh.peers'), [], `${server.events.find((event) => event.event === 'started')!.id as string} has no peer`);

  await crud({ method: 'object.create', collection: 'clusters', documents: [{ name: 'default', initialDeployment: { cloud: 'fakecloud' }, autoscaler: POLICY }] });
  const startedAt = Date.now();
  await until('four cooldowns of wanting to grow', () => (Date.now() - startedAt > 4 * COOLDOWN_MS ? true : undefined));
  const holder = await store.collection('fleetplane_leases').findOne({ _id: LEASE });
  t.ok(holder && ids.includes(holder.owner as string), `the lease is held by one of them (${String(holder?.owner)}, term ${String(holder?.term)})`);
  const deciding = servers.filter((server) => decisions(server).length > 0);
  t.same(deciding.map((server) => server.events.find((event) => event.event === 'started')!.id), [holder!.owner], 'the holder alone decided');

  // The decider stops gracefully right after an action: another takes over, and still waits out the cooldown.
  const decider = deciding[0]!;
  const seen = decisions(decider).length;
  await until('the next decision', () => (decisions(decider).length > seen ? true : undefined), 3 * COOLDOWN_MS);
  decider.signal('SIGTERM');
  t.equal(await decider.exit(), 0, 'the decider stopped gracefully');
  const stoppedAt = Date.now();
  const next = await until('a new holder', async () => {
    const lease = await store.collection('fleetplane_leases').findOne({ _id: LEASE });
    return lease && lease.owner !== holder!.owner && (lease.expiresAt as number) > Date.now() ? lease : undefined;
  }, 20_000);
  t.ok((next.term as number) > (holder!.term as number), `taken over in a new term (${String(next.term)})`);
  await until('three more cooldowns', () => (Date.now() - stoppedAt > 3 * COOLDOWN_MS ? true : undefined));
  // Paused, then settled: an action under way when the count is taken ends first, and no new one starts.
  const live = servers.find((server) => server.exitCode === undefined)!;
  const pausing = await request(live.port, '/crud', { host: platform.host, key: platform.adminKey, body: { method: 'object.update', collection: 'clusters', filter: { name: 'default' }, update: { $set: { 'autoscaler.paused': true } } } });
  t.equal(pausing.status, 200, `paused: ${pausing.body}`);
  const starting = () => store.collection('servers').countDocuments({ cluster_id: 'default', 'master.status': 'starting' });
  await until('every action under way to end', async () => {
    const count = await starting();
    const asked = cloud.requests.filter((entry) => entry.path === '/create').length;
    return asked === count && servers.reduce((sum, server) => sum + decisions(server).length, 0) === count ? true : undefined;
  }, 20_000).catch(() => undefined);

  // Counted from the inventory: each scale-out writes its server's record (createdAt) before the provider request.
  const records = (await store.collection<{ _id: string; master?: { status?: string; createdAt?: string } }>('servers').find({ cluster_id: 'default', 'master.status': 'starting' }, { limit: 0 }))
    .map((record) => Date.parse(record.master!.createdAt!))
    .sort((a, b) => a - b);
  const decidedAt = servers.flatMap((server) => decisions(server).map((event) => Date.parse(String(event.time)))).sort((a, b) => a - b);
  const creates = cloud.requests.filter((entry) => entry.path === '/create');
  t.ok(records.length >= 4, `the cluster grew while it could: ${records.length} scale-outs`);
  t.equal(creates.length, records.length, 'each scale-out asked the provider once');
  t.equal(decidedAt.length, records.length, 'and each was one decision');
  // A decision's log line and its record follow the decision by the store's write time: a little on a busy host.
  const gaps = (times: number[]) => times.slice(1).map((at, index) => at - times[index]!);
  for (const gap of gaps(records)) t.ok(gap >= COOLDOWN_MS - 500, `scale-outs in the inventory ${gap} ms apart: at most one per cooldown`);
  for (const gap of gaps(decidedAt)) t.ok(gap >= COOLDOWN_MS - 500, `decisions, on whichever server, ${gap} ms apart`);
  t.ok(servers.filter((server) => decisions(server).length > 0).length >= 2, `deciders in turn: ${servers.map((server) => decisions(server).length).join(' / ')} decisions`);
  // The host is busy with three servers: a slow worker boot may be logged; nothing of the autoscaler fails.
  for (const server of servers) t.same(failures(server.events.filter((event) => event.component === 'autoscaler' || /autoscaler|lease/.test(String(event.msg ?? '')))), [], 'nothing of the autoscaler failed');

  // The lease is no tenant's data, and nobody's through /crud: not read, not written, not forged.
  const before = await store.collection('fleetplane_leases').findOne({ _id: LEASE });
  const callers = [
    ['a tenant admin key', acme.host, acme.adminKey],
    ['a tenant key granted every method', acme.host, acmeMember],
    ["a tenant admin key on the platform's host", platform.host, acme.adminKey],
    ['a platform key without rights', platform.host, platformNoRights],
    ['no key', acme.host, undefined],
    ['the platform admin key', platform.host, platform.adminKey],
  ] as const;
  const envelopes = [
    { method: 'object.read', collection: 'fleetplane_leases' },
    { method: 'object.read', collection: 'fleetplane_leases', filter: { _id: LEASE } },
    { method: 'object.create', collection: 'fleetplane_leases', documents: [{ owner: 'forged', term: 99, expiresAt: 9e15 }] },
    { method: 'object.update', collection: 'fleetplane_leases', filter: { _id: LEASE }, update: { $set: { owner: 'forged', token: 'forged', expiresAt: 9e15 } } },
    { method: 'object.delete', collection: 'fleetplane_leases', filter: { _id: LEASE } },
  ];
  for (const [who, host, key] of callers) {
    for (const body of envelopes) {
      const reply = await request(live.port, '/crud', { host, ...(key ? { key } : {}), body });
      t.ok(reply.status === 400 || reply.status === 403, `${who}: ${body.method} answers ${reply.status}`);
      t.notMatch(reply.body, new RegExp(`${String(before!.token)}|"owner"|"term"`), `${who}: ${body.method} shows nothing of the lease`);
    }
  }
  const after = await store.collection('fleetplane_leases').findOne({ _id: LEASE });
  t.same([after?.owner, after?.token, after?.term], [before?.owner, before?.token, before?.term], 'the lease is unchanged');
});
