import t, { type Test } from 'tap';
import path from 'node:path';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import { clusterOf, clusterRecords, isHeldStatus } from '../../src/inventory/records.js';
import { clusterOfIssuedKey, countRunning, issuedKeys, runningPeers, saveInventorySection, serverStatus, terminatingServers } from '../../src/inventory/servers.js';
import { tempDir } from '../helpers/server-process.js';

async function store(t: Test): Promise<EmbeddedStore> {
  const db = await EmbeddedStore.open(path.join(tempDir('fleetplane-inventory-'), 'store.db'));
  await ensureStandardIndexes(db);
  t.teardown(() => db.close());
  return db;
}

t.test('sections are merged field by field: the master and each worker write their own part', async (t) => {
  const db = await store(t);
  t.same(await saveInventorySection(db, 's1', 'blue', 'master', { status: 'running', pid: 10, meshUrl: 'ws://h:1', absent: undefined }), { saved: true });
  await saveInventorySection(db, 's1', 'blue', 'workers.1', { status: 'ready', pid: 11 });
  await db.collection('servers').updateOne({ _id: 's1' }, { $set: { 'master.infrastructure': { instanceId: 'i-1' } } });
  await saveInventorySection(db, 's1', 'blue', 'master', { status: 'stopped' });
  t.same(await db.collection('servers').findOne({ _id: 's1' }), {
    _id: 's1',
    cluster_id: 'blue',
    master: { status: 'stopped', pid: 10, meshUrl: 'ws://h:1', infrastructure: { instanceId: 'i-1' } },
    workers: { '1': { status: 'ready', pid: 11 } },
  });
});

t.test('a record marked terminating or failed by another subsystem is left alone', async (t) => {
  const db = await store(t);
  for (const held of ['terminating', 'failed']) {
    await db.collection('servers').insertOne({ _id: `s-${held}`, cluster_id: 'blue', master: { status: held } });
    t.same(await saveInventorySection(db, `s-${held}`, 'blue', 'master', { status: 'running' }), { saved: false, skipped: `the record is ${held}` });
    t.same((await db.collection('servers').findOne({ _id: `s-${held}` }))!.master, { status: held }, 'unchanged');
  }
});

t.test('a stopping server whose record was deleted under it (swept) does not write it back', async (t) => {
  const db = await store(t);
  t.same(await saveInventorySection(db, 'gone', 'blue', 'master', { status: 'stopped', pid: 12 }), { saved: false, skipped: 'the record is gone and this server is stopping' });
  t.equal(await db.collection('servers').findOne({ _id: 'gone' }), null, 'no record created');
  t.same(await saveInventorySection(db, 'gone', 'blue', 'master', { status: 'running', pid: 12 }), { saved: true }, 'a starting server creates its record');
});

t.test('discovery lists running servers of the same group with a smaller id and a mesh URL', async (t) => {
  const db = await store(t);
  const servers = db.collection('servers');
  await servers.insertOne({ _id: 'a', cluster_id: 'blue', master: { status: 'running', meshUrl: 'ws://a:8090', startedAt: 't1' } });
  await servers.insertOne({ _id: 'b', cluster_id: 'blue', master: { status: 'stopped', meshUrl: 'ws://b:8090' } });
  await servers.insertOne({ _id: 'c', cluster_id: 'green', master: { status: 'running', meshUrl: 'ws://c:8090' } });
  await servers.insertOne({ _id: 'd', cluster_id: 'blue', master: { status: 'running' } });
  await servers.insertOne({ _id: 'e', cluster_id: 'blue', master: { status: 'running', meshUrl: 'http://e' } });
  await servers.insertOne({ _id: 'f', cluster_id: 'blue', master: { status: 'running', meshUrl: 'wss://f:8090' } });
  await servers.insertOne({ _id: 'm', cluster_id: 'blue', master: { status: 'running', meshUrl: 'ws://m:8090' } });
  await servers.insertOne({ _id: 'z', cluster_id: 'blue', master: { status: 'running', meshUrl: 'ws://z:8090' } });
  t.same(await runningPeers(db, 'm', 'blue'), [
    { id: 'a', url: 'ws://a:8090', startedAt: 't1' },
    { id: 'f', url: 'wss://f:8090' },
  ], 'not stopped, not another group, not without a usable URL, not itself, not a larger id');
  t.same(await runningPeers(db, 'a', 'blue'), [], 'the smallest id dials nobody');
});

t.test('discovery trusts only records of the platform organization (or written before owners were recorded) with a dialable URL', async (t) => {
  const db = await store(t);
  const servers = db.collection('servers');
  await saveInventorySection(db, 'a', 'blue', 'master', { status: 'running', meshUrl: 'ws://a:8090' }, 'platform-org');
  t.equal((await servers.findOne({ _id: 'a' }))!.organization_id, 'platform-org', 'the primary records its owner');
  await servers.insertOne({ _id: 'b', cluster_id: 'blue', master: { status: 'running', meshUrl: 'ws://b:8090' } });
  await servers.insertOne({ _id: 'c', organization_id: 'tenant-org', cluster_id: 'blue', master: { status: 'running', meshUrl: 'ws://attacker.example:1' } });
  for (const [id, url] of [['d', 'ws://user:pass@d:8090'], ['e', 'ws://'], ['f', 'ws://f:8090/#x'], ['g', `ws://${'g'.repeat(3000)}`]] as const) {
    await servers.insertOne({ _id: id, cluster_id: 'blue', master: { status: 'running', meshUrl: url } });
  }
  t.same((await runningPeers(db, 'z', 'blue', 'platform-org')).map((peer) => peer.id), ['a', 'b'], "a tenant's planted record and undialable URLs are skipped");
});

t.test("a server's status, a cluster's running count and its terminating records, as the autoscaler and the manager read them", async (t) => {
  const db = await store(t);
  const servers = db.collection('servers');
  await servers.insertOne({ _id: 'a', cluster_id: 'blue', master: { status: 'running' } });
  await servers.insertOne({ _id: 'b', cluster_id: 'blue', master: { status: 'terminating' } });
  await servers.insertOne({ _id: 'c', cluster_id: 'blue', master: { status: 'running' } });
  await servers.insertOne({ _id: 'd', cluster_id: 'green', master: { status: 'running' } });
  await servers.insertOne({ _id: 'e', cluster_id: 'green', master: { status: 'terminating' } });
  await servers.insertOne({ _id: 'f', cluster_id: 'blue' });
  t.equal(await serverStatus(db, 'b'), 'terminating');
  t.equal(await serverStatus(db, 'f'), undefined, 'a record without a status');
  t.equal(await serverStatus(db, 'nobody'), undefined, 'no record');
  t.equal(await countRunning(db, 'blue'), 2);
  t.equal(await countRunning(db, 'none'), 0);
  t.same((await servers.find(terminatingServers('blue'))).map((record) => record._id), ['b'], "only the cluster's own terminating records");
  t.ok(isHeldStatus('terminating') && isHeldStatus('failed'), 'terminating and failed are held');
  t.notOk(isHeldStatus('running') || isHeldStatus('stopped') || isHeldStatus(undefined), 'the server owns the others');
});

t.test('the keys a parent issued: each with its cluster, found by the key id; a record without a key is not one', async (t) => {
  const db = await store(t);
  const servers = db.collection('servers');
  await servers.insertOne({ _id: 'a', cluster_id: 'blue', manager: { key_id: 'fpk_a', for: 'tenant' } });
  await servers.insertOne({ _id: 'b', cluster_id: 'green', manager: { key_id: 'fpk_b' } });
  await servers.insertOne({ _id: 'c', cluster_id: 'green', manager: { host: 'parent.example' } });
  t.same((await issuedKeys(db)).sort((x, y) => String(x.keyId).localeCompare(String(y.keyId))), [
    { keyId: 'fpk_a', clusterId: 'blue' },
    { keyId: 'fpk_b', clusterId: 'green' },
  ]);
  t.equal(await clusterOfIssuedKey(db, 'fpk_b'), 'green');
  t.equal(await clusterOfIssuedKey(db, 'fpk_unknown'), null);
});

t.test("a server finds its cluster's document by id or by name, of one organization when named", async (t) => {
  const db = await store(t);
  const clusters = clusterRecords(db);
  await clusters.insertOne({ _id: 'c1', organization_id: 'platform', name: 'blue' });
  await clusters.insertOne({ _id: 'c2', organization_id: 'tenant', name: 'green' });
  t.equal((await clusters.findOne(clusterOf('c1')))?._id, 'c1', 'by id');
  t.equal((await clusters.findOne(clusterOf('blue')))?._id, 'c1', 'by name');
  t.equal((await clusters.findOne(clusterOf('blue', 'platform')))?._id, 'c1');
  t.equal(await clusters.findOne(clusterOf('green', 'platform')), null, "not another organization's");
});
