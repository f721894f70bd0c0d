import t from 'tap';
import { PlatformActivation } from '../../src/manager/activation.js';
import type { CreateServerInput } from '../../src/manager/fleet.js';
import { fleetSetup, logger } from './fixtures.js';

async function setup() {
  const base = await fleetSetup();
  const created: CreateServerInput[] = [];
  let release: () => void = () => undefined;
  let hold = false;
  const { lines, log } = logger();
  const activation = new PlatformActivation({
    store: base.store,
    platformOrganization: base.platform,
    log,
    createServer: async (input) => {
      created.push(input);
      if (hold) await new Promise<void>((resolve) => (release = resolve));
    },
  });
  return { ...base, created, activation, lines, holdCreation: () => (hold = true), release: () => release() };
}

t.test('an activated tenant whose cluster has no running server gets one', async (t) => {
  const s = await setup();
  t.teardown(s.close);
  t.equal(await s.activation.organizationActive(s.tenant), 'created');
  t.equal(s.created.length, 1);
  t.equal(s.created[0]!.cluster._id, 'c1');
  t.equal(s.created[0]!.deployment, undefined, "the cluster's initialDeployment decides");
});

t.test('servers that are not running neither block the creation nor get deleted', async (t) => {
  const s = await setup();
  t.teardown(s.close);
  const servers = s.store.forOrganization(s.platform).collection('servers');
  await servers.insertOne({ _id: 'old-failed', cluster_id: 'c1', master: { status: 'failed' } });
  await servers.insertOne({ _id: 'old-terminating', cluster_id: 'c1', master: { status: 'terminating' } });
  t.equal(await s.activation.organizationActive(s.tenant), 'created');
  t.equal(await servers.countDocuments({ cluster_id: 'c1' }), 2);
});

t.test('a running server of the cluster means no creation', async (t) => {
  const s = await setup();
  t.teardown(s.close);
  await s.store.forOrganization(s.platform).collection('servers').insertOne({ _id: 'up', cluster_id: 'c1', master: { status: 'running' } });
  t.equal(await s.activation.organizationActive(s.tenant), 'running');
  t.equal(s.created.length, 0);
});

t.test('organizations without a managed cluster, and the platform itself, are left alone', async (t) => {
  const s = await setup();
  t.teardown(s.close);
  t.equal(await s.activation.organizationActive('someone-else'), 'unmanaged');
  t.equal(await s.activation.organizationActive(s.platform), 'unmanaged');
  t.equal(s.created.length, 0);
});

t.test('activations while a creation for the cluster runs add none', async (t) => {
  const s = await setup();
  t.teardown(s.close);
  s.holdCreation();
  const first = s.activation.organizationActive(s.tenant);
  await new Promise((resolve) => setImmediate(resolve));
  while (s.created.length === 0) await new Promise((resolve) => setImmediate(resolve));
  t.equal(await s.activation.organizationActive(s.tenant), 'busy');
  s.release();
  t.equal(await first, 'created');
  t.equal(s.created.length, 1);
});

t.test('a failing creation is logged, not thrown', async (t) => {
  const base = await fleetSetup();
  t.teardown(base.close);
  const { lines, log } = logger();
  const activation = new PlatformActivation({ store: base.store, platformOrganization: base.platform, log, createServer: () => Promise.reject(new Error('provider down')) });
  t.equal(await activation.organizationActive(base.tenant), 'failed');
  t.equal(lines.length, 1);
  t.equal(lines[0]!.details.organization, base.tenant);
});
