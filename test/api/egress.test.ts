import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import type { buildConnector } from 'undici';
import { EgressPolicy, allowEntry } from '../../src/api/egress.js';
import { EgressRefusedError, guardedConnector, type ResolveAll } from '../../src/api/egress-connector.js';
import { ApiError } from '../../src/api/errors.js';
import { ApiService } from '../../src/api/service.js';
import { platformOrganizationId } from '../../src/auth/organizations.js';
import { ConfigError } from '../../src/config/errors.js';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/logging/logger.js';
import { testStore } from '../auth/fixtures/tenants.js';
import { automationApp } from './fixtures/app.js';

const TENANT = 'org-tenant';
const PLATFORM = 'org-platform';

t.test('the policy names the rule of every address a tenant may not reach, and lets public ones through', async (t) => {
  const policy = new EgressPolicy({ ownAddresses: () => ['203.0.113.7', '2001:db8::7', '127.0.0.1'] });
  const cases: Array<[string, string | undefined]> = [
    ['127.0.0.1', 'loopback'],
    ['127.8.9.10', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['2002:7f00:1::', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.254', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['fd00::1', 'unique-local'],
    ['fc12:3456::1', 'unique-local'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['255.255.255.255', 'reserved'],
    ['203.0.113.7', 'own-address'],
    ['2001:0db8:0:0::7', 'own-address'],
    ['::ffff:203.0.113.7', 'own-address'],
    ['93.184.215.14', undefined],
    ['172.32.0.1', undefined],
    ['2606:4700::1111', undefined],
  ];
  for (const [address, rule] of cases) t.equal(policy.refusal(address), rule, `${address}: ${rule ?? 'allowed'}`);
});

t.test('egress.allow lets the platform name the private upstreams it means: ranges, hosts and domains', async (t) => {
  const policy = new EgressPolicy({ allow: ['10.20.0.0/16', 'fd12::/16', '127.0.0.2', 'Internal.Example', '*.corp.example'] });
  t.equal(policy.refusal('10.20.1.1'), undefined);
  t.equal(policy.refusal('10.21.0.1'), 'private', 'outside the allowed range stays refused');
  t.equal(policy.refusal('fd12:1::5'), undefined);
  t.equal(policy.refusal('127.0.0.2'), undefined);
  t.equal(policy.refusal('127.0.0.1'), 'loopback');
  t.ok(policy.allowsHost('internal.example'));
  t.ok(policy.allowsHost('INTERNAL.example.'), 'case and the root dot do not matter');
  t.ok(policy.allowsHost('db.corp.example'));
  t.notOk(policy.allowsHost('corp.example'), 'a domain entry covers its hosts, not itself');
  t.notOk(policy.allowsHost('evilcorp.example'));
  t.notOk(policy.allowsHost('internal.example.attacker.test'));
  for (const bad of ['not a host!', '10.0.0.0/33', 'http://x.example', '*.', 'a..b', '-a.example']) t.equal(allowEntry(bad), undefined, `"${bad}" is no entry`);
});

t.test('an egress.allow entry that is neither a range nor a host name fails the start naming it', async (t) => {
  const error = t.throws(() => loadConfig({ env: {}, object: { egress: { allow: ['ok.example', '10.0.0.0/8', 'bad host'] } } })) as ConfigError;
  t.type(error, ConfigError);
  t.equal(error.field, 'egress.allow[2]');
  t.match(error.message, /"bad host" is not an IP address, CIDR range or host name/);
  t.throws(() => loadConfig({ env: {}, object: { egress: { platform: 'open' } } }), /egress\.platform/);
  t.same(loadConfig({ env: {}, object: {} }).config.egress, { allow: [], platform: 'unrestricted' });
  t.same(loadConfig({ env: { FLEETPLANE_EGRESS_ALLOW: '["10.0.0.0/8"]' } }).config.egress.allow, ['10.0.0.0/8']);
});

/** A connector that opens nothing: it records where it was asked to connect, then fails as an unreachable host would. */
function recordingConnector() {
  const calls: buildConnector.Options[] = [];
  const connect: buildConnector.connector = (options, callback) => {
    calls.push(options);
    callback(Object.assign(new Error('not connected in this test'), { code: 'ECONNREFUSED' }), null);
  };
  return { calls, connect };
}

const connectVia = (connector: buildConnector.connector, hostname: string) =>
  new Promise<Error | null>((resolve) => connector({ hostname, protocol: 'http:', port: '80' }, (...result) => resolve(result[0])));

t.test('addresses outside this machine are refused at the connect hook, before any socket is asked for', async (t) => {
  const answers: Record<string, string[]> = {
    'metadata.test': ['169.254.169.254'],
    'intranet.test': ['10.0.0.8'],
    'mixed.test': ['198.51.100.9', '192.168.0.9'],
    'public.test': ['198.51.100.9'],
  };
  const resolveAll: ResolveAll = async (hostname) => answers[hostname] ?? [];
  const { calls, connect } = recordingConnector();
  const connector = guardedConnector(new EgressPolicy(), connect, resolveAll);
  const refused: Array<[string, string]> = [
    ['169.254.169.254', 'link-local'],
    ['10.0.0.5', 'private'],
    ['192.168.1.20', 'private'],
    ['[fe80::1]', 'link-local'],
    ['fd00::1', 'unique-local'],
    ['metadata.test', 'link-local'],
    ['intranet.test', 'private'],
    ['mixed.test', 'private'],
  ];
  for (const [hostname, rule] of refused) {
    const error = await connectVia(connector, hostname);
    t.type(error, EgressRefusedError, hostname);
    t.equal((error as EgressRefusedError).rule, rule, `${hostname}: ${rule}`);
  }
  t.same(calls, [], 'no connection was asked for');
  await connectVia(connector, 'public.test');
  t.same(
    calls.map(({ hostname, servername }) => ({ hostname, servername })),
    [{ hostname: '198.51.100.9', servername: 'public.test' }],
    'a permitted name is connected to at the address that was checked, with the name kept for TLS',
  );
});

/** A loopback server that only counts the connections it is offered: what a refused provider must never reach. */
async function secretServer(t: Test, host: string, port = 0) {
  const seen = { connections: 0 };
  const server = net.createServer((socket) => {
    seen.connections++;
    socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 20\r\nconnection: close\r\n\r\n{"secret":"answer!"}');
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { seen, port: (server.address() as AddressInfo).port };
}

/** An upstream that answers `{ ok: true }` and closes each connection, or redirects `/redirect` to `location`. */
async function upstream(t: Test, host: string, location?: string) {
  const seen = { requests: 0 };
  const server = http.createServer((request, response) => {
    seen.requests++;
    if (request.url === '/redirect' && location) response.writeHead(302, { location, connection: 'close' }).end();
    else response.writeHead(200, { 'content-type': 'application/json', connection: 'close' }).end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { seen, port: (server.address() as AddressInfo).port };
}

/** ApiService over a real store with one provider per name, calling through real undici sockets. */
async function service(t: Test, options: { allow?: string[]; resolveAll?: ResolveAll } = {}) {
  const store = await testStore();
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      callback();
    },
  });
  const api = new ApiService(store, createLogger({ level: 'info', destination }), undefined, {
    policy: new EgressPolicy({ allow: options.allow ?? [] }),
    exempt: (organizationId) => organizationId === PLATFORM,
    ...(options.resolveAll ? { resolveAll: options.resolveAll } : {}),
  });
  t.teardown(async () => {
    await api.close();
    await store.close();
  });
  const provider = (organizationId: string, name: string, baseUrl: string) =>
    store.forOrganization(organizationId).collection('apis').insertOne({ name, baseUrl, endpoints: { get: { method: 'get', path: '/' }, redirect: { method: 'get', path: '/redirect' } } });
  const call = async (organizationId: string, name: string, endpoint = 'get') => {
    try {
      return await api.send({ organization_id: organizationId, api: name, endpoint, method: 'get' });
    } catch (error) {
      return error as ApiError;
    }
  };
  return { api, provider, call, lines };
}

t.test("a tenant's provider on this machine's loopback is refused with egress_refused, and the address never answers", async (t) => {
  const v4 = await secretServer(t, '127.0.0.1');
  const v6 = await secretServer(t, '::1');
  const { provider, call, lines } = await service(t);
  const targets: Array<[string, string]> = [
    ['v4', `http://127.0.0.1:${v4.port}`],
    ['v6', `http://[::1]:${v6.port}`],
    ['mapped', `http://[::ffff:127.0.0.1]:${v4.port}`],
    ['name', `http://localhost:${v4.port}`],
    // Other spellings of 127.0.0.1 that URL parsing turns into it.
    ['decimal', `http://2130706433:${v4.port}`],
    ['hex', `http://0x7f000001:${v4.port}`],
    ['short', `http://127.1:${v4.port}`],
  ];
  for (const [name, baseUrl] of targets) {
    await provider(TENANT, name, baseUrl);
    const error = await call(TENANT, name);
    t.type(error, ApiError, `${baseUrl}: refused`);
    t.equal((error as ApiError).code, 'egress_refused');
    t.equal((error as ApiError).statusCode, 403);
    t.match((error as ApiError).message, new RegExp(`^provider "${name}": the egress policy refuses .+ \\(loopback address\\)`));
    t.notMatch((error as ApiError).message, /secret|answer!/);
  }
  t.equal(v4.seen.connections + v6.seen.connections, 0, 'no connection reached the loopback servers');
  // Called again within the minute: the refusal is logged once per provider, not per call.
  await call(TENANT, 'v4');
  await call(TENANT, 'v4');
  const refusals = lines.filter((line) => line.msg === 'the egress policy refused a provider connection (logged once a minute per provider)');
  t.same(refusals.map((line) => line.api).sort(), ['decimal', 'hex', 'mapped', 'name', 'short', 'v4', 'v6']);
  t.match(refusals.find((line) => line.api === 'name'), { host: 'localhost', address: '127.0.0.1', rule: 'loopback', organization: TENANT });
});

t.test("the platform's own provider reaches loopback, and an allow-listed private upstream is reached by tenants", async (t) => {
  const allowed = await upstream(t, '127.0.0.2');
  const local = await upstream(t, '127.0.0.1');
  const { provider, call } = await service(t, { allow: ['127.0.0.2/32'] });
  await provider(PLATFORM, 'own', `http://127.0.0.1:${local.port}`);
  await provider(TENANT, 'allowed', `http://127.0.0.2:${allowed.port}`);
  t.same(await call(PLATFORM, 'own'), { status: 200, data: { ok: true } });
  t.same(await call(TENANT, 'allowed'), { status: 200, data: { ok: true } });
  await provider(TENANT, 'own', `http://127.0.0.1:${local.port}`);
  t.match(await call(TENANT, 'own'), { code: 'egress_refused' }, 'the same address is refused to a tenant');
  t.equal(local.seen.requests, 1, "only the platform's call reached the loopback upstream");
});

t.test('a redirect to loopback is answered to the caller, never followed', async (t) => {
  const target = await secretServer(t, '127.0.0.1');
  const redirecting = await upstream(t, '127.0.0.2', `http://127.0.0.1:${target.port}/`);
  const { provider, call } = await service(t, { allow: ['127.0.0.2'], resolveAll: async () => ['127.0.0.2'] });
  await provider(TENANT, 'public-looking', `http://upstream.test:${redirecting.port}`);
  t.match(await call(TENANT, 'public-looking', 'redirect'), { status: 302 });
  t.equal(redirecting.seen.requests, 1);
  t.equal(target.seen.connections, 0, 'the redirect target was never connected to');
});

t.test('a DNS answer that changes to loopback is refused on the next connection, and the socket only goes where the check looked', async (t) => {
  // The allowed upstream and the secret share a port on two loopback addresses: only the address differs.
  const allowed = await upstream(t, '127.0.0.2');
  const secret = await secretServer(t, '127.0.0.1', allowed.port);
  const answers = [['127.0.0.2'], ['127.0.0.1'], ['127.0.0.2', '127.0.0.1']];
  const asked: string[] = [];
  const resolveAll: ResolveAll = async (hostname) => {
    asked.push(hostname);
    return answers.shift() ?? ['127.0.0.1'];
  };
  const { provider, call } = await service(t, { allow: ['127.0.0.2'], resolveAll });
  await provider(TENANT, 'rebinding', `http://rebind.test:${allowed.port}`);
  t.same(await call(TENANT, 'rebinding'), { status: 200, data: { ok: true } }, 'first answer: the allowed upstream');
  t.match(await call(TENANT, 'rebinding'), { code: 'egress_refused', statusCode: 403 }, 'the name now resolves to loopback');
  t.match(await call(TENANT, 'rebinding'), { code: 'egress_refused' }, 'one refused address among several refuses the name');
  t.same(asked, ['rebind.test', 'rebind.test', 'rebind.test'], 'resolved once per connection, by the check itself');
  t.equal(allowed.seen.requests, 1);
  t.equal(secret.seen.connections, 0, 'loopback never saw a connection');
});

t.test('POST /api of a tenant admin whose provider points at the server itself answers 403 egress_refused', async (t) => {
  const target = await secretServer(t, '127.0.0.1');
  const fixture = await automationApp();
  t.teardown(fixture.close);
  const platformId = await platformOrganizationId(fixture.store);
  const tenant = fixture.acme.organization_id === platformId ? fixture.globex : fixture.acme;
  const post = (url: string, body: unknown) =>
    fixture.app.inject({ method: 'POST', url, headers: { host: tenant.host, authorization: `Bearer ${tenant.adminKey}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  const created = await post('/crud', {
    method: 'object.create',
    collection: 'apis',
    documents: [{ name: 'ssrf', baseUrl: `http://127.0.0.1:${target.port}`, endpoints: { h: { method: 'get', path: '/healthz' } } }],
  });
  t.equal(created.statusCode, 200, created.body);
  const reply = await post('/api', { api: 'ssrf', endpoint: 'h', method: 'get' });
  t.equal(reply.statusCode, 403);
  t.match(reply.json(), { error: { code: 'egress_refused', message: /provider "ssrf": the egress policy refuses 127\.0\.0\.1 \(loopback address\)/ } });
  t.notMatch(reply.body, /secret/);
  t.equal(target.seen.connections, 0);
});
