import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { EgressPolicy } from '../../src/api/egress.js';
import { ApiService } from '../../src/api/service.js';
import { planApply } from '../../src/crud/apply-resources.js';
import type { ResourceFile } from '../../src/crud/resources.js';
import { withBuiltinProviders, type BuiltinProvider } from '../../src/manager/builtin-providers.js';
import { providerPort, type ProviderPort } from '../../src/manager/provider-port.js';
import { WorkflowService } from '../../src/workflows/service.js';
import { fleetSetup } from './fixtures.js';

const examples = path.resolve(import.meta.dirname, '..', '..', 'examples');
const example = (name: string) => JSON.parse(readFileSync(path.join(examples, name), 'utf8')) as ResourceFile & { apis?: Array<Record<string, unknown>> };

/** A fleet whose provider requests take the real path: the platform's workflows, built-ins, then `api.send`. */
async function realPathFleet(t: Test, file: ResourceFile, builtins: Record<string, BuiltinProvider> = {}) {
  let port: ProviderPort | undefined;
  const setup = await fleetSetup({ calls: [], port: { create: (request) => port!.create(request), terminate: (request) => port!.terminate(request) } });
  t.teardown(setup.close);
  await (await planApply(setup.store, setup.platform, file)).write();
  // As a server's own: the platform's providers are exempt from the egress policy.
  const apiService = new ApiService(setup.store, undefined, undefined, { policy: new EgressPolicy(), exempt: (organization) => organization === setup.platform });
  t.teardown(() => apiService.close());
  const api = withBuiltinProviders((envelope, options) => apiService.send(envelope, options), builtins, async (organization) => organization === setup.platform);
  const workflows = new WorkflowService({ store: setup.store, api: { send: api } });
  t.teardown(() => workflows.close());
  port = providerPort({ api, workflows, createWorkflow: 'create-organization-server', terminateWorkflow: 'terminate-organization-server' });
  return setup;
}

t.test('examples/manager-local.json hands the startup to the built-in local provider and its instance id back', async (t) => {
  const received: Array<{ endpoint: string; data: Record<string, unknown> }> = [];
  const local: BuiltinProvider = {
    endpoints: { create: 'post', terminate: 'post' },
    call: async (endpoint, data) => (received.push({ endpoint, data }), { status: 200, data: endpoint === 'create' ? { instanceId: 'fp-local-00000000000000aa', url: 'http://127.0.0.1:1' } : { instanceId: data.instanceId, exitCode: 0 } }),
  };
  const setup = await realPathFleet(t, example('manager-local.json'), { local });
  const created = await setup.fleet.createServer({ cluster: setup.cluster, serverId: 's1' });
  t.equal(created.instanceId, 'fp-local-00000000000000aa');
  const startup = received[0]!.data.startup as Record<string, unknown>;
  t.same(startup.server, { id: 's1', cluster: 'c1', organization: setup.tenant }, 'the whole startup reached the provider');
  await setup.fleet.terminateServer({ cluster: setup.cluster, serverId: 's1' });
  t.same(received[1], { endpoint: 'terminate', data: { instanceId: 'fp-local-00000000000000aa' } });
});

interface Hit {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A stand-in for the Hetzner Cloud API that answers only requests of the documented shapes: `POST /v1/servers`
 * with `name` (a host name), `server_type`, `image`, optional `location`, `start_after_create`, string `labels`
 * and `user_data` (at most 32 KiB), answered 201 `{ server, action, next_actions, root_password }`; and
 * `DELETE /v1/servers/{id}`, answered 200 `{ action }`. Anything else is 400 or 404 in its error shape.
 */
async function hetznerStandIn(t: Test) {
  const hits: Hit[] = [];
  const problems: string[] = [];
  const server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      hits.push({ method: request.method!, url: request.url!, headers: request.headers, body });
      const json = (status: number, value: unknown) => response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      const invalid = (message: string) => (problems.push(message), json(400, { error: { code: 'invalid_input', message } }));
      if (request.headers.authorization !== 'Bearer test-token') return json(401, { error: { code: 'unauthorized', message: 'unable to authenticate' } });
      if (request.method === 'POST' && request.url === '/v1/servers') {
        if (!/^application\/json/.test(request.headers['content-type'] ?? '')) return invalid('content-type');
        const input = JSON.parse(body) as Record<string, unknown>;
        if (typeof input.name !== 'string' || !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(input.name)) return invalid('name must be a valid host name');
        for (const field of ['server_type', 'image']) if (typeof input[field] !== 'string' || !input[field]) return invalid(`${field} is required`);
        if (input.location !== undefined && typeof input.location !== 'string') return invalid('location');
        if (input.start_after_create !== undefined && typeof input.start_after_create !== 'boolean') return invalid('start_after_create');
        const labels = (input.labels ?? {}) as Record<string, unknown>;
        if (Object.values(labels).some((value) => typeof value !== 'string' || !/^([a-z0-9A-Z]([a-z0-9A-Z._-]{0,61}[a-z0-9A-Z])?)?$/.test(value))) return invalid('labels');
        if (input.user_data !== undefined && (typeof input.user_data !== 'string' || Buffer.byteLength(input.user_data) > 32 * 1024)) return invalid('user_data');
        const known = new Set(['name', 'server_type', 'image', 'location', 'datacenter', 'start_after_create', 'labels', 'user_data', 'ssh_keys', 'networks', 'volumes', 'firewalls', 'automount', 'public_net', 'placement_group']);
        const unknown = Object.keys(input).find((field) => !known.has(field));
        if (unknown) return invalid(`unknown field ${unknown}`);
        return json(201, {
          server: { id: 4711, name: input.name, status: 'initializing', labels },
          action: { id: 1, command: 'create_server', status: 'running', progress: 0 },
          next_actions: [],
          root_password: null,
        });
      }
      const deleted = /^\/v1\/servers\/(\d+)$/.exec(request.url!);
      if (request.method === 'DELETE' && deleted) {
        if (deleted[1] !== '4711') return json(404, { error: { code: 'not_found', message: 'server not found' } });
        return json(200, { action: { id: 2, command: 'delete_server', status: 'running', progress: 0 } });
      }
      return json(404, { error: { code: 'not_found', message: 'not found' } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { hits, problems, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

t.test('examples/manager-hetzner.json creates and deletes a server with the requests of the Hetzner Cloud API', async (t) => {
  const stand = await hetznerStandIn(t);
  const file = example('manager-hetzner.json');
  file.apis![0]!.baseUrl = stand.baseUrl;
  file.apis![0]!.headers = { Authorization: { secret: 'Bearer test-token' } };
  const setup = await realPathFleet(t, file);
  const deployment = { cloud: 'hetzner', serverType: 'cx22', image: 'ubuntu-24.04', location: 'fsn1' };
  const created = await setup.fleet.createServer({ cluster: setup.cluster, serverId: '0190c0ffee00aa', deployment });
  t.same(stand.problems, []);
  t.equal(created.instanceId, '4711', "the cloud's server id, kept as text");
  const body = JSON.parse(stand.hits[0]!.body) as Record<string, unknown>;
  t.equal(body.name, 'fleetplane-0190c0ffee00aa');
  t.same(body.labels, { 'fleetplane-server': '0190c0ffee00aa', 'fleetplane-cluster': 'c1' });
  const userData = body.user_data as string;
  t.match(userData, /^#cloud-config\n/);
  t.match(userData, /permissions: '0600'/);
  const configLine = userData.split('\n').find((line) => line.trimStart().startsWith('{"server"'))!;
  t.same(JSON.parse(configLine.trim()).server, { id: '0190c0ffee00aa', cluster: 'c1', organization: setup.tenant }, 'the startup config is written as the server config file');
  const record = await setup.tenantStore.collection('servers').findOne({ _id: '0190c0ffee00aa' });
  t.same(record?.infrastructure, { cloud: 'hetzner', instanceId: '4711' });

  t.same(await setup.fleet.terminateServer({ cluster: setup.cluster, serverId: '0190c0ffee00aa' }), { server_id: '0190c0ffee00aa', status: 'terminating', provider: { instanceId: '4711', action: 2 } });
  t.equal(stand.hits[1]!.method, 'DELETE');
  t.equal(stand.hits[1]!.url, '/v1/servers/4711');
  t.equal(stand.hits[1]!.body, '', 'no body on delete');
  t.equal(stand.hits.length, 2);
});

t.test('a Hetzner refusal leaves the server failed in both inventories', async (t) => {
  const stand = await hetznerStandIn(t);
  const file = example('manager-hetzner.json');
  file.apis![0]!.baseUrl = stand.baseUrl;
  file.apis![0]!.headers = { Authorization: { secret: 'Bearer wrong-token' } };
  const setup = await realPathFleet(t, file);
  await t.rejects(setup.fleet.createServer({ cluster: setup.cluster, serverId: 's9', deployment: { cloud: 'hetzner', serverType: 'cx22', image: 'ubuntu-24.04', location: 'fsn1' } }), { code: 'provider_failed', statusCode: 502 });
  t.equal((await setup.store.collection<{ _id: string; master: { status: string } }>('servers').findOne({ _id: 's9' }))?.master.status, 'failed');
  t.equal((await setup.tenantStore.collection<{ _id: string; master: { status: string } }>('servers').findOne({ _id: 's9' }))?.master.status, 'failed');
});
