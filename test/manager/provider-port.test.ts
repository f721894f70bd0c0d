import t from 'tap';
import { API_ERRORS } from '../../src/api/errors.js';
import type { ApiReply } from '../../src/api/service.js';
import { withBuiltinProviders, type BuiltinProvider } from '../../src/manager/builtin-providers.js';
import { providerPort } from '../../src/manager/provider-port.js';

const request = { organization_id: 'platform', cloud: 'hetzner', data: { server_id: 's1' } };

t.test('without a provider workflow the request goes to the cloud API, endpoint create or terminate', async (t) => {
  const sent: unknown[] = [];
  const port = providerPort({ api: async (envelope) => (sent.push(envelope), { status: 201, data: { instanceId: 'i-1' } }), createWorkflow: 'create-organization-server', terminateWorkflow: 'terminate-organization-server' });
  t.same(await port.create(request), { instanceId: 'i-1' });
  await port.terminate(request);
  t.same(sent, [
    { organization_id: 'platform', api: 'hetzner', endpoint: 'create', method: 'post', data: { server_id: 's1' } },
    { organization_id: 'platform', api: 'hetzner', endpoint: 'terminate', method: 'post', data: { server_id: 's1' } },
  ]);
});

t.test("an upstream's 4xx is a provider failure that says the provider's reason with its status", async (t) => {
  const port = providerPort({ api: async () => ({ status: 422, data: { error: 'bad image' } }), createWorkflow: 'c', terminateWorkflow: 't' });
  await t.rejects(port.create(request), { code: 'provider_failed', statusCode: 502, message: 'provider "hetzner" answered 422 to create: bad image' });
  const shaped = providerPort({ api: async () => ({ status: 400, data: { error: { code: 'invalid', message: 'server_type:\n unknown' } } }), createWorkflow: 'c', terminateWorkflow: 't' });
  await t.rejects(shaped.terminate(request), { message: 'provider "hetzner" answered 400 to terminate: server_type: unknown' }, 'an error object: its message, on one line');
  const silent = providerPort({ api: async () => ({ status: 503, data: null }), createWorkflow: 'c', terminateWorkflow: 't' });
  await t.rejects(silent.create(request), { message: 'provider "hetzner" answered 503 to create' }, 'no reason given: the status alone');
});

t.test('the platform workflow runs when it exists, with the cloud in its input', async (t) => {
  const runs: unknown[] = [];
  const port = providerPort({
    api: async () => t.fail('no direct call') as never,
    workflows: { resolve: async (_organization, name) => (name === 'create-organization-server' ? {} : null), run: async (name, input, context) => (runs.push({ name, input, context }), { instanceId: 'w-1' }) },
    createWorkflow: 'create-organization-server',
    terminateWorkflow: 'terminate-organization-server',
  });
  t.same(await port.create(request), { instanceId: 'w-1' });
  t.same(runs, [{ name: 'create-organization-server', input: { cloud: 'hetzner', server_id: 's1' }, context: { organization_id: 'platform' } }]);
});

t.test('built-in providers answer the platform only, with the endpoint and method checks of /api', async (t) => {
  const calls: unknown[] = [];
  const local: BuiltinProvider = { endpoints: { create: 'post' }, call: async (endpoint, data) => (calls.push({ endpoint, data }), { status: 200, data: { instanceId: 'x' } }) };
  const passed: unknown[] = [];
  const upstream = async (envelope: unknown): Promise<ApiReply> => (passed.push(envelope), { status: 200, data: 'upstream' });
  const send = withBuiltinProviders(upstream, { local }, async (organization) => organization === 'platform');
  t.same(await send({ organization_id: 'platform', api: 'local', endpoint: 'create', method: 'post', data: { a: 1 } }), { status: 200, data: { instanceId: 'x' } });
  t.same(calls, [{ endpoint: 'create', data: { a: 1 } }]);
  t.same(await send({ organization_id: 'tenant', api: 'local', endpoint: 'create', method: 'post' }), { status: 200, data: 'upstream' }, "a tenant's local is its own api");
  t.same(await send({ organization_id: 'platform', api: 'items', endpoint: 'x', method: 'get' }), { status: 200, data: 'upstream' });
  t.equal(passed.length, 2);
  await t.rejects(send({ organization_id: 'platform', api: 'local', endpoint: 'nope', method: 'post' }), API_ERRORS.unknownEndpoint('local', 'nope'));
  await t.rejects(send({ organization_id: 'platform', api: 'local', endpoint: 'create', method: 'get' }), { code: 'method_mismatch', statusCode: 400 });
  await t.rejects(send({ organization_id: 'platform', api: 'local', endpoint: 'create', method: 'post', data: [1] }), { code: 'invalid_envelope' });
  t.equal(calls.length, 1);
});
