import t from 'tap';
import { ManagerError } from '../../src/manager/errors.js';
import { settle } from '../helpers/fake-clock.js';
import { fleetSetup, stubProvider } from './fixtures.js';

type Record_ = { _id: string; organization_id?: string; cluster_id?: string; master?: { status?: string }; infrastructure?: { instanceId?: string; cloud?: string }; manager?: { key_id?: string } };

async function copies(setup: Awaited<ReturnType<typeof fleetSetup>>, id: string) {
  return {
    platform: await setup.store.collection<Record_>('servers').findOne({ _id: id }),
    tenant: await setup.tenantStore.collection<Record_>('servers').findOne({ _id: id }),
  };
}

t.test('createServer writes both inventories with the same ids, asks the provider, and mirrors its patch into both', async (t) => {
  let seenAtCall: Awaited<ReturnType<typeof copies>> | undefined;
  const setup = await fleetSetup(
    stubProvider(async () => {
      seenAtCall = await copies(setup, 's1');
      return { instanceId: 'i-42' };
    }),
  );
  t.teardown(setup.close);
  const result = await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' });
  t.same(result, { server_id: 's1', cluster_id: 'c1', instanceId: 'i-42', status: 'starting' });
  t.equal(seenAtCall?.platform?.master?.status, 'starting', 'the platform copy existed before the provider was asked');
  t.equal(seenAtCall?.tenant?.master?.status, 'starting', 'and the tenant copy too');
  const { platform, tenant } = await copies(setup, 's1');
  t.equal(platform?.organization_id, setup.platform);
  t.equal(tenant?.organization_id, setup.tenant);
  t.equal(platform?.cluster_id, 'c1');
  t.equal(tenant?.cluster_id, 'c1');
  t.same(platform?.infrastructure, { cloud: 'local', instanceId: 'i-42' });
  t.same(tenant?.infrastructure, { cloud: 'local', instanceId: 'i-42' });
  const [call] = setup.provider.calls;
  t.equal(call!.request.cloud, 'local', "the cluster's initialDeployment names the cloud");
  t.equal(call!.request.organization_id, setup.platform, 'provider requests run in the platform scope');
  const startup = call!.request.data.startup as { server: Record<string, unknown>; manager: { apiKey: string }; mesh: { secret: string } };
  t.same(startup.server, { id: 's1', cluster: 'c1', organization: setup.tenant });
  t.equal(startup.mesh.secret, 'a-mesh-secret-of-the-tenant-cluster');
  t.match(startup.manager.apiKey, /^fpk_/, 'the new server gets a key of its own');
  t.notOk(JSON.stringify(platform).includes(startup.manager.apiKey.split('.')[1]!), 'which no inventory record carries');
  t.notOk(JSON.stringify(tenant).includes(startup.manager.apiKey.split('.')[1]!));
  t.same(setup.fleet.watchdog.pending, ['s1'], 'the watchdog waits for its confirmation');
});

t.test('a server that never confirms is logged once with its id; nothing is retried or deleted', async (t) => {
  const setup = await fleetSetup();
  t.teardown(setup.close);
  await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' });
  await setup.clock.advanceAsync(120_000);
  await settle();
  const misses = setup.lines.filter((line) => line.message.includes('did not confirm'));
  t.equal(misses.length, 1);
  t.equal(misses[0]!.details.server, 's1');
  await setup.clock.advanceAsync(600_000);
  t.equal(setup.lines.filter((line) => line.message.includes('did not confirm')).length, 1);
  t.equal(setup.provider.calls.length, 1, 'no second creation');
  t.ok((await copies(setup, 's1')).platform, 'the record stays');
});

t.test('a confirmation persisted before the provider answered still confirms', async (t) => {
  const setup = await fleetSetup(
    stubProvider(async () => {
      setup.fleet.statusPersisted('s1', 'running');
      return { instanceId: 'i-1' };
    }),
  );
  t.teardown(setup.close);
  await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' });
  t.same(setup.fleet.watchdog.pending, []);
  await setup.clock.advanceAsync(300_000);
  await settle();
  t.equal(setup.lines.filter((line) => line.message.includes('did not confirm')).length, 0);
});

for (const [what, answer] of [
  ['a provider rejection', async () => Promise.reject(new Error('quota exceeded'))],
  ['a reply without an instance id', async () => ({ id: 'no-instance-field' })],
  ['a reply that is not JSON', async () => '<html>bad gateway</html>'],
] as const) {
  t.test(`${what} on create leaves both copies failed, the key revoked, and nothing running or watched`, async (t) => {
    const setup = await fleetSetup(stubProvider(answer));
    t.teardown(setup.close);
    const error = await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' }).catch((caught: unknown) => caught);
    t.ok(error instanceof ManagerError);
    t.equal((error as ManagerError).statusCode, 502);
    const { platform, tenant } = await copies(setup, 's1');
    t.equal(platform?.master?.status, 'failed');
    t.equal(tenant?.master?.status, 'failed');
    const key = await setup.store.collection('keys').findOne({ _id: platform!.manager!.key_id! });
    t.equal(key?.disabled, true, 'the key issued for it is revoked');
    t.same(setup.fleet.watchdog.pending, []);
    t.equal(setup.lines.filter((line) => line.level === 'error').length, 1, 'logged once');
  });
}

t.test('terminateServer marks both copies terminating before the provider call, then deletes them once after the delay', async (t) => {
  let atTerminate: Awaited<ReturnType<typeof copies>> | undefined;
  const setup = await fleetSetup(
    stubProvider(async (action) => {
      if (action === 'terminate') atTerminate = await copies(setup, 's1');
      return { instanceId: 'i-7' };
    }),
  );
  t.teardown(setup.close);
  await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' });
  const keyId = (await copies(setup, 's1')).platform!.manager!.key_id!;
  t.same(await setup.fleet.terminateServer({ cluster: setup.cluster, serverId: 's1' }), { server_id: 's1', status: 'terminating', provider: { instanceId: 'i-7' } });
  t.equal(atTerminate?.platform?.master?.status, 'terminating');
  t.equal(atTerminate?.tenant?.master?.status, 'terminating');
  t.same(setup.provider.calls[1]!.request.data, { server_id: 's1', cluster_id: 'c1', instanceId: 'i-7' }, 'the persisted instance id is what the provider gets');
  t.equal((await copies(setup, 's1')).platform?.master?.status, 'terminating', 'success keeps terminating');
  await setup.clock.advanceAsync(30_000);
  setup.fleet.statusPersisted('s1', 'terminating');
  await setup.clock.advanceAsync(30_000);
  await settle();
  t.same(await copies(setup, 's1'), { platform: null, tenant: null }, 'both copies deleted on time despite the duplicate report');
  t.equal((await setup.store.collection('keys').findOne({ _id: keyId }))?.disabled, true, 'and its key revoked');
});

t.test('a provider rejection on terminate marks both copies failed and schedules no cleanup', async (t) => {
  const setup = await fleetSetup(stubProvider(async (action) => (action === 'create' ? { instanceId: 'i-1' } : Promise.reject(new Error('instance locked')))));
  t.teardown(setup.close);
  await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' });
  setup.fleet.statusPersisted('s1', 'running');
  await t.rejects(setup.fleet.terminateServer({ cluster: setup.cluster, serverId: 's1' }), { code: 'provider_failed', statusCode: 502 });
  const { platform, tenant } = await copies(setup, 's1');
  t.equal(platform?.master?.status, 'failed');
  t.equal(tenant?.master?.status, 'failed');
  t.notOk(setup.fleet.cleanup.scheduled('s1'));
  t.equal(setup.clock.pending, 0, 'no timer at all');
});

t.test('records already deleted count as deleted', async (t) => {
  const setup = await fleetSetup();
  t.teardown(setup.close);
  await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' });
  await setup.fleet.terminateServer({ cluster: setup.cluster, serverId: 's1' });
  await setup.tenantStore.collection('servers').deleteOne({ _id: 's1' });
  await setup.clock.advanceAsync(60_000);
  await settle();
  t.same(await copies(setup, 's1'), { platform: null, tenant: null });
  t.equal(setup.lines.filter((line) => line.message.includes('failed')).length, 0);
});

t.test('terminating an unknown server is refused and asks no provider', async (t) => {
  const setup = await fleetSetup();
  t.teardown(setup.close);
  await t.rejects(setup.fleet.terminateServer({ cluster: setup.cluster, serverId: 'nope' }), { code: 'unknown_server', statusCode: 404 });
  t.equal(setup.provider.calls.length, 0);
});

t.test('a cluster without a deployment or a tenant is refused before anything is written', async (t) => {
  const setup = await fleetSetup();
  t.teardown(setup.close);
  await t.rejects(setup.fleet.createServer({ cluster: { ...setup.cluster, initialDeployment: undefined } }), { code: 'invalid_envelope', statusCode: 400 });
  await t.rejects(setup.fleet.createServer({ cluster: { ...setup.cluster, manager: {} } }), { code: 'invalid_envelope' });
  t.equal(await setup.store.collection('servers').countDocuments(), 0);
  t.equal(setup.provider.calls.length, 0);
});
