import t, { type Test } from 'tap';
import { RoutingHooks, removeRequestOf, routingSettings, type RoutingDeps } from '../../src/lifecycle/routing.js';
import type { NodeIdentity } from '../../src/lifecycle/identity.js';
import { memoryLog, openTempStore } from './helpers.js';

const ORG = 'org_platform';
const identity: NodeIdentity = { ip: { public: '203.0.113.7', private: '10.0.0.7' }, host: 'node-7.example.com', infrastructure: { provider: 'aws', region: 'eu-west-1', instanceId: 'i-07' }, location: 'eu-west-1/eu-west-1a' };
const REMOVE = { api: 'edge', endpoint: 'deregister', method: 'post', data: { registration_ids: ['reg-1', 'reg-2'] } };

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((ok, fail) => ((resolve = ok), (reject = fail)));
  return { promise, resolve, reject };
}

async function setup(t: Test, run: RoutingDeps['workflows']['run'], settings = { enabled: true, workflow: 'configure-cluster-routing' }) {
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  const log = memoryLog();
  const workflowCalls: Array<{ name: string; input: unknown; context: unknown }> = [];
  const sent: Array<Record<string, unknown>> = [];
  const events: string[] = [];
  const hooks = new RoutingHooks({
    store,
    organizationId: ORG,
    serverId: 'srv-7',
    clusterId: 'blue',
    settings,
    workflows: {
      run: async (name, input, context) => {
        workflowCalls.push({ name, input, context });
        events.push('workflow');
        return run(name, input, context);
      },
    },
    api: { send: async (envelope) => void (sent.push(envelope), events.push('remove')) },
    log,
  });
  return { store, hooks, log, workflowCalls, sent, events };
}

t.test("readiness runs the routing workflow once with the node identity, its envelope scoped to the node's organization and host; repeated readiness shares it", async (t) => {
  const { hooks, workflowCalls } = await setup(t, async () => ({ 'configure-cluster-routing': [{ remove: REMOVE }] }));
  await Promise.all([hooks.register(identity), hooks.register(identity)]);
  await hooks.register(identity);
  t.equal(workflowCalls.length, 1);
  t.same(workflowCalls[0], {
    name: 'configure-cluster-routing',
    input: { server_id: 'srv-7', cluster_id: 'blue', ip: identity.ip, host: identity.host, infrastructure: identity.infrastructure, location: identity.location },
    context: { organization_id: ORG, host: identity.host },
  });
});

t.test("a stop sends the prepared remove request once through api.send with the stop reason, the registration ids and the node's organization and host", async (t) => {
  const { hooks, sent } = await setup(t, async () => ({ 'configure-cluster-routing': [{ remove: REMOVE }] }));
  await hooks.register(identity);
  await hooks.withdraw('SIGTERM');
  await hooks.withdraw('SIGINT');
  t.same(sent, [{ organization_id: ORG, host: identity.host, api: 'edge', endpoint: 'deregister', method: 'post', data: { registration_ids: ['reg-1', 'reg-2'], reason: 'SIGTERM' } }]);
});

t.test('a stop during a slow registration sends the removal after the registration finished', async (t) => {
  const slow = deferred<unknown>();
  const { hooks, events, sent } = await setup(t, () => slow.promise);
  void hooks.register(identity);
  const withdrawal = hooks.withdraw('SIGTERM');
  await new Promise((resolve) => setImmediate(resolve));
  t.same(sent, [], 'nothing sent while the registration runs');
  slow.resolve({ remove: REMOVE });
  await withdrawal;
  t.same(events, ['workflow', 'remove']);
  t.equal(sent[0]?.data && (sent[0].data as { reason: string }).reason, 'SIGTERM');
});

t.test('a registration still running when the shutdown budget ends is left, and nothing is sent', async (t) => {
  const never = deferred<unknown>();
  const { hooks, sent, log } = await setup(t, () => never.promise);
  void hooks.register(identity);
  const controller = new AbortController();
  const withdrawal = hooks.withdraw('SIGTERM', controller.signal);
  controller.abort();
  await withdrawal;
  t.same(sent, []);
  t.match(log.lines, [{ level: 'warn', message: /did not finish within the shutdown budget/ }]);
});

t.test('a workflow without a remove request is a warning and the stop sends nothing', async (t) => {
  const { hooks, sent, log } = await setup(t, async () => ({ 'configure-cluster-routing': [{ registered: true }] }));
  await hooks.register(identity);
  await hooks.withdraw('SIGTERM');
  t.same(sent, []);
  t.match(log.lines, [{ level: 'warn', message: /returned no remove request/ }]);
});

t.test('a failing workflow is logged, never thrown, and the stop sends nothing', async (t) => {
  const { hooks, sent, log } = await setup(t, async () => {
    throw Object.assign(new Error('edge said 500'), { code: 'upstream_error' });
  });
  await hooks.register(identity);
  await hooks.withdraw('SIGTERM');
  t.same(sent, []);
  t.match(log.lines, [{ level: 'warn', details: { code: 'upstream_error', reason: 'edge said 500' }, message: /routing workflow failed/ }]);
});

t.test('no stop without a registration looks anything up', async (t) => {
  const { hooks, sent, workflowCalls } = await setup(t, async () => ({ remove: REMOVE }));
  await hooks.withdraw('SIGINT');
  t.same(sent, []);
  t.equal(workflowCalls.length, 0);
});

t.test('a failing removal is logged and the stop goes on', async (t) => {
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  const log = memoryLog();
  const hooks = new RoutingHooks({
    store, organizationId: ORG, serverId: 'srv-7', clusterId: 'blue', settings: { enabled: true, workflow: 'r' }, log,
    workflows: { run: async () => ({ remove: REMOVE }) },
    api: { send: async () => { throw new Error('connect ECONNREFUSED'); } },
  });
  await hooks.register(identity);
  await hooks.withdraw('SIGTERM');
  t.match(log.lines.at(-1), { level: 'warn', message: 'the routing removal failed', details: { reason: 'connect ECONNREFUSED' } });
});

t.test('servers_config records of type routing override the settings: everywhere, then cluster, then server', async (t) => {
  const { store, hooks, workflowCalls } = await setup(t, async () => ({ remove: REMOVE }));
  const configs = store.collection('servers_config');
  await configs.insertOne({ _id: 'a', organization_id: ORG, name: 'routing', type: 'routing', config: { workflow: 'edge-everywhere' } });
  await configs.insertOne({ _id: 'b', organization_id: ORG, name: 'routing-blue', type: 'routing', cluster_id: 'blue', config: { workflow: 'edge-blue' } });
  await configs.insertOne({ _id: 'c', organization_id: ORG, name: 'routing-green', type: 'routing', cluster_id: 'green', config: { workflow: 'edge-green' } });
  await configs.insertOne({ _id: 'd', organization_id: 'org_tenant', name: 'routing', type: 'routing', config: { enabled: false } });
  const base = { store, organizationId: ORG, serverId: 'srv-7', clusterId: 'blue', settings: { enabled: true, workflow: 'configure-cluster-routing' } };
  t.same(await routingSettings(base), { enabled: true, workflow: 'edge-blue' }, 'the cluster record wins over the general one; other clusters and tenants do not apply');
  await hooks.register(identity);
  t.equal(workflowCalls[0]?.name, 'edge-blue');

  await configs.insertOne({ _id: 'e', organization_id: ORG, name: 'routing-srv-7', type: 'routing', server_id: 'srv-7', config: { enabled: false } });
  t.same(await routingSettings(base), { enabled: false, workflow: 'edge-blue' }, 'a record naming this server wins over the cluster one');
  t.same(await routingSettings({ ...base, serverId: 'srv-8' }), { enabled: true, workflow: 'edge-blue' }, 'another server of the cluster is not disabled');
});

t.test('enabled: false in a routing record disables the hooks: no workflow, nothing at stop', async (t) => {
  const { store, hooks, workflowCalls, sent, log } = await setup(t, async () => ({ remove: REMOVE }));
  await store.collection('servers_config').insertOne({ _id: 'x', organization_id: ORG, name: 'routing', type: 'routing', config: { enabled: false } });
  await hooks.register(identity);
  await hooks.withdraw('SIGTERM');
  t.equal(workflowCalls.length, 0);
  t.same(sent, []);
  t.match(log.lines, [{ message: 'routing hooks disabled' }]);
});

t.test('the remove request is found flat, in a list or under the workflow name, and must name api, endpoint and method', async (t) => {
  t.same(removeRequestOf({ remove: REMOVE }, 'w'), REMOVE);
  t.same(removeRequestOf([{ remove: REMOVE }], 'w'), REMOVE);
  t.same(removeRequestOf({ w: [{ remove: REMOVE }] }, 'w'), REMOVE);
  t.equal(removeRequestOf({ remove: { api: 'edge', endpoint: 'x' } }, 'w'), undefined);
  t.equal(removeRequestOf({ remove: { ...REMOVE, data: 'ids' } }, 'w'), undefined);
  t.equal(removeRequestOf(null, 'w'), undefined);
});

t.test('no workflow of that name is routing left unconfigured: an info line, not a warning', async (t) => {
  const { hooks, log, sent } = await setup(t, async () => {
    throw Object.assign(new Error('no workflow "configure-cluster-routing"'), { code: 'unknown_workflow' });
  });
  await hooks.register(identity);
  await hooks.withdraw('SIGTERM');
  t.same(sent, []);
  t.match(log.lines, [{ level: 'info', message: 'no routing workflow is defined; the node is not registered for routing' }]);
});
