import t from 'tap';
import http from 'node:http';
import path from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { CLI, isAlive, request, tempDir } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { createKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { CliNode, Deployment, boundedLoad, eventually, run } from './handover-fixture.js';

const SECRET = 'handover-mesh-secret-0123456789abcdef';
const run_ = randomBytes(3).toString('hex');
const A = `a-${run_}`;
const B = `b-${run_}`;

/** POST /control as a caller with `key` (or none), on the host of the platform organization. */
function postControl(port: number, body: unknown, key?: string): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const headers: http.OutgoingHttpHeaders = { host: 'localhost', 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
    if (key) headers.authorization = `Bearer ${key}`;
    const req = http.request({ host: '127.0.0.1', port, path: '/control', method: 'POST', agent: false, headers }, (res) => {
      let data = '';
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, json: data ? JSON.parse(data) : undefined }));
    });
    req.setTimeout(150_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(text);
  });
}

const ctlJson = async (dataDir: string, args: string[]) => {
  const result = await run(CLI, ['ctl', ...args, '--json', '--data-dir', dataDir]);
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')}: ${result.status} ${result.stderr}`);
  return JSON.parse(result.stdout) as { replies: Array<{ server: string; worker: number; ok: boolean; result: any }>; missing: unknown[] };
};

t.test('fleetplane upgrade under load: a new version takes the sockets, storage, control socket and mesh identity, with no failed request', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'platform', hosts: ['localhost', '127.0.0.1'] },
    { name: 'tenant', hosts: ['tenant.test'] },
  ]);
  const [platform, tenant] = tenants as [(typeof tenants)[0], (typeof tenants)[0]];
  const dbPath = path.join(dataDir, 'fleetplane.db');
  const store = await EmbeddedStore.open(dbPath);
  const noRestart = await createKey(store, { organizationId: platform.organization_id, name: 'ops', permissions: { status: true } });
  const tenantEverything = await createKey(store, { organizationId: tenant.organization_id, name: 'everything', permissions: { '*': true } });
  await store.close();

  const deployment = new Deployment('0.1.0-old');
  const mesh = { port: 0, host: '127.0.0.1', secret: SECRET, discoveryIntervalMs: 2_000 };
  const a = await CliNode.start(deployment.cli, { workers: { count: 2 }, dataDir, server: { id: A, cluster: `handover-${run_}` }, mesh });
  t.teardown(() => a.stop());
  const b = await CliNode.start(CLI, { workers: { count: 1 }, dataDir: tempDir(), db: { path: dbPath }, server: { id: B, cluster: `handover-${run_}` }, mesh });
  t.teardown(() => b.stop());
  const oldPid = a.child.pid!;
  await a.readyWorkers(2);
  await b.readyWorkers(1);
  const peerSees = (pid: number) => eventually(async () => {
    const reply = (await ctlJson(b.dataDir, ['status', '--server', A, '--master', '--timeout', '3000'])).replies[0];
    return reply?.ok && reply.result.pid === pid ? reply.result : undefined;
  }, `peer ${B} reaches ${A}'s primary ${pid}`, 120_000);
  await peerSees(oldPid);
  t.equal(readFileSync(path.join(dataDir, 'primary.pid'), 'utf8').trim(), String(oldPid), 'the pid file names the serving primary');

  await ctlJson(dataDir, ['storage.set', '--master', '--value', JSON.stringify({ key: 'kept', value: { n: 1 } })]);

  // Authority: the hand-over envelope over POST /control needs a platform key holding "restart".
  const envelope = { method: 'restart', master: true, data: { handover: true }, timeoutMs: 120_000 };
  for (const [who, key, status] of [
    ['no key', undefined, 403],
    ["another organization's admin key", tenant.adminKey, 403],
    ["another organization's key with every permission", tenantEverything.key, 403],
    ['a platform key without "restart"', noRestart.key, 403],
  ] as const) {
    const refused = await postControl(a.port, envelope, key);
    t.equal(refused.status, status, `${who}: refused with ${status}`);
    t.type(refused.json?.error?.code, 'string', `${who}: with an error code`);
  }
  t.equal(a.count((line) => line.msg === 'hand-over: starting a new primary from the code on disk'), 0, 'no refused call started a hand-over');

  const socket = new WebSocket(`ws://127.0.0.1:${a.port}/ws`, { headers: { host: 'localhost', authorization: `Bearer ${platform.adminKey}` } });
  const wsClosed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));

  const load = boundedLoad(a.port);
  await eventually(async () => (load.stats.ok > 50 ? true : undefined), 'load running');
  deployment.setVersion('0.2.0-new');
  const upgraded = await run(CLI, ['upgrade', '--data-dir', dataDir]);
  t.equal(upgraded.status, 0, `fleetplane upgrade exits 0: ${upgraded.stderr}`);
  const handed = /handed over from pid (\d+) \(0\.1\.0-old\) to pid (\d+) \(0\.2\.0-new\)/.exec(upgraded.stdout);
  t.ok(handed, `it names both primaries and versions: ${upgraded.stdout}`);
  const newPid = Number(handed?.[2]);
  t.equal(Number(handed?.[1]), oldPid);
  t.equal(await wsClosed, 1012, "the old primary's WebSockets are closed with 1012 (restart: reconnect)");
  await eventually(async () => (isAlive(oldPid) ? undefined : true), 'the old primary exits');
  t.equal(a.child.exitCode, 0, 'the old primary exits 0');
  await eventually(async () => (load.stats.versions.has('0.2.0-new') ? true : undefined), 'the new version answers');
  const served = await load.stop();
  t.equal(served.failed, 0, `no failed request of ${served.ok + served.failed}: ${served.errors.slice(0, 5).join('; ')}`);
  t.same([...served.versions].sort(), ['0.1.0-old', '0.2.0-new'], 'the load was served by the old version, then the new');

  t.equal(readFileSync(path.join(dataDir, 'primary.pid'), 'utf8').trim(), String(newPid), 'the pid file names the new primary');
  const status = await ctlJson(dataDir, ['status', '--server', A, '--master', '--broadcast']);
  const primary = status.replies.find((reply) => reply.worker === 0)!;
  t.match(primary.result, { pid: newPid, version: '0.2.0-new', status: 'ready' }, 'ctl status through the control socket: the new primary, its version');
  t.ok(Date.parse(primary.result.startedAt) > 0, 'and its start time');
  t.equal(status.replies.length, 3, 'and its two workers');
  t.equal(primary.server, A, 'the same server id');
  const kept = await ctlJson(dataDir, ['storage.get', '--server', A, '--master', '--broadcast', '--value', JSON.stringify({ key: 'kept' })]);
  t.same(kept.replies.map((reply) => reply.result.value), [{ n: 1 }, { n: 1 }, { n: 1 }], 'storage kept its contents, in the new primary and its workers');
  await peerSees(newPid);
  t.pass(`peer ${B} reaches the node again, now the new primary`);
  const inventory = await eventually(async () => {
    const reader = await EmbeddedStore.open(dbPath);
    try {
      const record = (await reader.collection('servers').findOne({ _id: A })) as { master?: { pid?: number; status?: string } } | null;
      return record?.master?.pid === newPid ? record.master : undefined;
    } finally {
      await reader.close();
    }
  }, 'the inventory names the new primary');
  t.equal(inventory.status, 'running', 'the inventory record stays running: the old primary wrote no "stopped"');

  // A second hand-over, asked over HTTP with the platform's admin key, from the primary a hand-over started.
  const load2 = boundedLoad(a.port, '/healthz', { keepAlive: 2, fresh: 1 });
  const again = await postControl(a.port, envelope, platform.adminKey);
  t.equal(again.status, 200, 'the platform admin key may ask for it');
  t.match(again.json.replies[0], { ok: true, result: { from: { pid: newPid }, to: { pid: Number } } });
  const thirdPid = again.json.replies[0].result.to.pid as number;
  await eventually(async () => (isAlive(newPid) ? undefined : true), 'the second primary exits');
  const served2 = await load2.stop();
  t.equal(served2.failed, 0, `no failed request in the second hand-over either: ${served2.errors.slice(0, 5).join('; ')}`);
  t.equal((await request(a.port, '/healthz')).status, 200);
  t.equal(readFileSync(path.join(dataDir, 'primary.pid'), 'utf8').trim(), String(thirdPid));

  process.kill(thirdPid, 'SIGTERM');
  await eventually(async () => (isAlive(thirdPid) ? undefined : true), 'a primary started by a hand-over stops on SIGTERM');
  t.notOk(existsSync(path.join(dataDir, 'control.sock')), 'its graceful stop removes the control socket');
  t.notOk(existsSync(path.join(dataDir, 'primary.pid')), 'and the pid file');
});
