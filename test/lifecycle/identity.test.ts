import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config/load.js';
import { resolveNodeIdentity } from '../../src/lifecycle/identity.js';
import { memoryLog } from './helpers.js';

type Routes = Record<string, { status?: number; body: string; needs?: Record<string, string> }>;

/** A stand-in instance metadata endpoint that answers the given paths and records every request. */
async function metadataServer(t: Test, routes: Routes) {
  const requests: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }> = [];
  const server = http.createServer((req, res) => {
    requests.push({ method: req.method!, url: req.url!, headers: req.headers });
    const route = routes[`${req.method} ${req.url}`];
    const allowed = route && Object.entries(route.needs ?? {}).every(([name, value]) => req.headers[name] === value);
    res.statusCode = !route ? 404 : allowed ? (route.status ?? 200) : 401;
    res.end(allowed ? route.body : '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

const configOf = (object: Record<string, unknown>) => loadConfig({ env: {}, object }).config;
const noInterfaces = () => ({});

t.test('config alone: nothing is asked and nothing is guessed about the infrastructure', async (t) => {
  const log = memoryLog();
  const config = configOf({ server: { publicUrl: 'https://node-1.example.com:8443' }, node: { privateIp: '10.1.2.3', location: 'rack 4' } });
  const identity = await resolveNodeIdentity(config, { warn: log.warn, interfaces: noInterfaces, osHostname: () => 'box' });
  t.same(identity, { ip: { private: '10.1.2.3' }, host: 'node-1.example.com', infrastructure: {}, location: 'rack 4' });
  t.same(log.lines, []);
});

t.test('the host falls back to the OS host name and the private address to the first non-internal IPv4', async (t) => {
  const interfaces = () => ({
    lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }],
    eth0: [{ address: 'fe80::1', family: 'IPv6', internal: false }, { address: '192.168.5.9', family: 'IPv4', internal: false }],
  }) as never;
  const identity = await resolveNodeIdentity(configOf({}), { warn: () => undefined, interfaces, osHostname: () => 'box-9' });
  t.same(identity, { ip: { private: '192.168.5.9' }, host: 'box-9', infrastructure: {} });
});

t.test('aws: IMDSv2 token, then instance id, region, zone and addresses; config wins field by field', async (t) => {
  const token = { 'x-aws-ec2-metadata-token': 'tok-1' };
  const { url, requests } = await metadataServer(t, {
    'PUT /latest/api/token': { body: 'tok-1', needs: { 'x-aws-ec2-metadata-token-ttl-seconds': '60' } },
    'GET /latest/meta-data/instance-id': { body: 'i-0abc', needs: token },
    'GET /latest/meta-data/placement/region': { body: 'eu-west-1', needs: token },
    'GET /latest/meta-data/placement/availability-zone': { body: 'eu-west-1b', needs: token },
    'GET /latest/meta-data/local-ipv4': { body: '172.31.0.5', needs: token },
    'GET /latest/meta-data/public-ipv4': { body: '203.0.113.9', needs: token },
  });
  const config = configOf({ node: { metadata: { kind: 'aws', url }, region: 'configured-region' } });
  const identity = await resolveNodeIdentity(config, { warn: () => undefined, interfaces: noInterfaces, osHostname: () => 'box' });
  t.same(identity, {
    ip: { public: '203.0.113.9', private: '172.31.0.5' },
    host: 'box',
    infrastructure: { provider: 'aws', region: 'configured-region', instanceId: 'i-0abc' },
    location: 'eu-west-1/eu-west-1b',
  });
  t.equal(requests[0]?.method, 'PUT', 'the session token comes first');
});

t.test('aws without a public address: the 404 leaves it out', async (t) => {
  const { url } = await metadataServer(t, {
    'PUT /latest/api/token': { body: 'tok' },
    'GET /latest/meta-data/instance-id': { body: 'i-1' },
    'GET /latest/meta-data/placement/region': { body: 'us-east-2' },
    'GET /latest/meta-data/placement/availability-zone': { body: 'us-east-2a' },
    'GET /latest/meta-data/local-ipv4': { body: '10.0.0.1' },
  });
  const identity = await resolveNodeIdentity(configOf({ node: { metadata: { kind: 'aws', url } } }), { warn: () => undefined, osHostname: () => 'b' });
  t.same(identity.ip, { private: '10.0.0.1' });
});

t.test('gcp: Metadata-Flavor header; the region is the zone without its letter', async (t) => {
  const flavor = { 'metadata-flavor': 'Google' };
  const prefix = 'GET /computeMetadata/v1/instance/';
  const { url } = await metadataServer(t, {
    [`${prefix}id`]: { body: '4711', needs: flavor },
    [`${prefix}zone`]: { body: 'projects/123/zones/europe-west1-b', needs: flavor },
    [`${prefix}network-interfaces/0/ip`]: { body: '10.132.0.2', needs: flavor },
    [`${prefix}network-interfaces/0/access-configs/0/external-ip`]: { body: '198.51.100.4', needs: flavor },
  });
  const identity = await resolveNodeIdentity(configOf({ node: { metadata: { kind: 'gcp', url } } }), { warn: () => undefined, osHostname: () => 'b' });
  t.same(identity.infrastructure, { provider: 'gcp', region: 'europe-west1', instanceId: '4711' });
  t.same(identity.ip, { public: '198.51.100.4', private: '10.132.0.2' });
  t.equal(identity.location, 'europe-west1/europe-west1-b');
});

t.test('digitalocean: one JSON document', async (t) => {
  const { url } = await metadataServer(t, {
    'GET /metadata/v1.json': {
      body: JSON.stringify({ droplet_id: 2756294, region: 'nyc3', interfaces: { public: [{ ipv4: { ip_address: '104.131.20.105' } }], private: [{ ipv4: { ip_address: '10.132.255.113' } }] } }),
    },
  });
  const identity = await resolveNodeIdentity(configOf({ node: { metadata: { kind: 'digitalocean', url } } }), { warn: () => undefined, osHostname: () => 'b' });
  t.same(identity, { ip: { public: '104.131.20.105', private: '10.132.255.113' }, host: 'b', infrastructure: { provider: 'digitalocean', region: 'nyc3', instanceId: '2756294' }, location: 'nyc3' });
});

t.test('an endpoint that fails is a warning and the identity comes from config', async (t) => {
  const { url } = await metadataServer(t, { 'PUT /latest/api/token': { status: 500, body: '' } });
  const log = memoryLog();
  const identity = await resolveNodeIdentity(configOf({ node: { metadata: { kind: 'aws', url }, instanceId: 'i-config' } }), { warn: log.warn, interfaces: noInterfaces, osHostname: () => 'b' });
  t.same(identity, { ip: {}, host: 'b', infrastructure: { provider: 'aws', instanceId: 'i-config' } });
  t.match(log.lines, [{ level: 'warn', details: { kind: 'aws', reason: /HTTP 500/ }, message: /did not answer/ }]);
});

t.test('a metadata kind outside the list, or a non-argv upload command, is a config error', async (t) => {
  t.throws(() => configOf({ node: { metadata: { kind: 'azure' } } }), { name: 'ConfigError', field: 'node.metadata.kind' });
  t.throws(() => configOf({ repositories: { uploadCommand: 'fleetplane upload --all' } }), { name: 'ConfigError', field: 'repositories.uploadCommand' });
  t.throws(() => configOf({ repositories: { uploadCommand: [] } }), { name: 'ConfigError', field: 'repositories.uploadCommand' });
  t.same(configOf({ repositories: { uploadCommand: ['upload', '--all'] } }).repositories.uploadCommand, ['upload', '--all']);
  t.same(configOf({}).routing, { enabled: true, workflow: 'configure-cluster-routing' });
});
