import t from 'tap';
import path from 'node:path';
import { createKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ServerProcess, fleetplane, request, tempDir } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { until } from '../helpers/wait.js';

const ctl = (args: string[]) => fleetplane(['ctl', ...args]);

const scale = async (command: string, dataDir: string) => {
  const reply = await ctl(['scale', command, '--json', '--data-dir', dataDir]);
  if (reply.status !== 0) throw new Error(`ctl scale ${command}: ${reply.status} ${reply.stderr}`);
  return JSON.parse(reply.stdout).replies[0].result;
};

/**
 * Waits until the autoscaler's status (asked over /control, cheaper than a `ctl` process per poll) satisfies
 * `check`; the test then reads it through `ctl scale status`.
 */
const statusUntil = (server: ServerProcess, key: string, host: string, what: string, check: (status: any) => boolean) => {
  let last: unknown;
  return until(what, async () => {
    const reply = await request(server.port, '/control', { host, key, body: { method: 'autoscaler.status', master: true } });
    last = reply.json().replies?.[0]?.result ?? reply.body;
    return check(last) ? true : undefined;
  }, 30_000, { everyMs: 50, last: () => last });
};

t.test('an enabled autoscaler samples its server, decides for its cluster alone, and ctl scale pauses and resumes the cluster through its document', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([{ name: 'platform', hosts: ['platform.test'] }, { name: 'acme', hosts: ['acme.test'] }]);
  const [platform, acme] = [tenants[0]!, tenants[1]!];
  const keys = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
  const acmeMember = (await createKey(keys, { organizationId: acme.organization_id, name: 'member', permissions: { '*': true } })).key;
  const platformNoRights = (await createKey(keys, { organizationId: platform.organization_id, name: 'no rights', permissions: {} })).key;
  await keys.close();
  const server = await ServerProcess.start({ workers: 1, dataDir, autoscaler: { enabled: true, intervalMs: 100 } });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);

  await statusUntil(server, platform.adminKey, platform.host, 'the autoscaler deciding with 2 samples', (status) => status.deciding && status.samples >= 2);
  let status = await scale('status', dataDir);
  t.match(status, { paused: false, deciding: true }, 'the only running server of its cluster decides');
  t.ok(status.samples >= 2, 'the primary and its worker are sampled every interval');

  const refused = await ctl(['scale', 'pause', '--json', '--data-dir', dataDir]);
  t.equal(refused.status, 1, 'a cluster without a policy has nothing to pause');
  t.match(JSON.parse(refused.stdout).replies[0].error, { code: 'bad_request', message: /no autoscaler section/ });

  const crud = (body: Record<string, unknown>) => request(server.port, '/crud', { host: platform.host, key: platform.adminKey, body });
  const created = await crud({ method: 'object.create', collection: 'clusters', documents: [{ name: 'default', autoscaler: { minClusterSize: 1, maxClusterSize: 1 } }] });
  t.equal(created.status, 200, created.body);
  t.match(await scale('pause', dataDir), { paused: true });
  const stored = await crud({ method: 'object.read', collection: 'clusters', filter: { name: 'default' } });
  t.match(stored.json().documents[0].autoscaler, { minClusterSize: 1, maxClusterSize: 1, paused: true }, "the pause is written to the cluster's document");
  await statusUntil(server, platform.adminKey, platform.host, 'a decision held by the pause', (status) => status.lastDecision?.reason === 'paused');
  status = await scale('status', dataDir);
  t.match(status, { paused: true, lastDecision: { action: 'none', reason: 'paused' } }, 'the pause holds');
  t.match(await scale('resume', dataDir), { paused: false });

  // The autoscaler's methods act on the server and its cluster: no tenant key (admin or not), no platform key
  // without the right, and no request without a key reaches them.
  const callers = [
    ['a tenant admin key', acme.host, acme.adminKey],
    ['a tenant key granted every method', acme.host, acmeMember],
    ["a tenant admin key on the platform's host", platform.host, acme.adminKey],
    ['a platform key without rights', platform.host, platformNoRights],
    ['no key', platform.host, undefined],
  ] as const;
  for (const [who, host, key] of callers) {
    for (const method of ['autoscaler.pause', 'autoscaler.resume', 'autoscaler.status', 'autoscaler.signals']) {
      const reply = await request(server.port, '/control', { host, ...(key ? { key } : {}), body: { method, master: true } });
      t.equal(reply.status, 403, `${who}: ${method}`);
      t.notMatch(reply.body, /"paused"|"samples"|"deciding"/, `${who}: ${method} answers nothing of the autoscaler`);
    }
  }
  const tenantWrite = await request(server.port, '/crud', { host: acme.host, key: acme.adminKey, body: { method: 'object.update', collection: 'clusters', filter: { name: 'default' }, update: { $set: { 'autoscaler.paused': true } } } });
  t.not(tenantWrite.status, 200, `a tenant cannot write the platform's cluster document: ${tenantWrite.status}`);
  const unchanged = await crud({ method: 'object.read', collection: 'clusters', filter: { name: 'default' } });
  t.equal(unchanged.json().documents[0].autoscaler.paused, false, 'the cluster is not paused');
  t.match(await scale('status', dataDir), { paused: false });
});

t.test("the cluster document's policy: a bad one is refused over /crud naming the field, a valid one is evaluated and its sizes are in the metrics", async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([{ name: 'platform', hosts: ['platform.test'] }]);
  const platform = tenants[0]!;
  const server = await ServerProcess.start({ workers: 1, dataDir, autoscaler: { enabled: true, intervalMs: 100 } });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);
  const crud = (body: Record<string, unknown>) => request(server.port, '/crud', { host: platform.host, key: platform.adminKey, body });

  const refused = await crud({ method: 'object.create', collection: 'clusters', documents: [{ name: 'default', autoscaler: { minClusterSize: 2, maxClusterSize: 1 } }] });
  t.equal(refused.status, 400);
  t.match(refused.json().error, { code: 'invalid_policy', message: /autoscaler\.minClusterSize/ });
  const created = await crud({ method: 'object.create', collection: 'clusters', documents: [{ name: 'default', autoscaler: { minClusterSize: 1, maxClusterSize: 1 } }] });
  t.equal(created.status, 200, created.body);

  await statusUntil(server, platform.adminKey, platform.host, 'a decision on the stored policy', (status) => status.lastDecision !== undefined);
  const status = await scale('status', dataDir);
  t.match(status, { policy: { minClusterSize: 1, maxClusterSize: 1 }, lastDecision: { action: 'none', current: 1, desired: 1 } }, 'the policy in force is the stored one');
  const metrics = await request(server.port, '/metrics', { host: platform.host, key: platform.adminKey });
  t.equal(metrics.status, 200);
  t.match(metrics.body, /^fleetplane_autoscaler_current_size 1$/m);
  t.match(metrics.body, /^fleetplane_autoscaler_desired_size 1$/m);
});

t.test('a disabled autoscaler answers no autoscaler method', async (t) => {
  const dataDir = tempDir();
  const server = await ServerProcess.start({ workers: 1, dataDir });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);
  const reply = await ctl(['scale', 'status', '--json', '--data-dir', dataDir]);
  t.equal(reply.status, 1, 'the primary answers with an error');
  t.equal(JSON.parse(reply.stdout).replies[0].ok, false);
});
