import t from 'tap';
import path from 'node:path';
import { createKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { MESH_AUTHORITIES } from '../../src/tls/mesh-authority.js';
import { ServerProcess, fleetplane, request } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';

t.setTimeout(300_000);

// One server in `mesh.tls.mode: "auto"`, with a platform and a tenant organization: who may revoke a mesh
// certificate, and what a revocation that cannot be made answers.
const { dataDir, tenants } = await dataDirWithTenants([
  { name: 'platform', hosts: ['localhost', '127.0.0.1'] },
  { name: 'tenant', hosts: ['tenant.test'] },
]);
const [platform, tenant] = tenants as [(typeof tenants)[0], (typeof tenants)[0]];
const dbPath = path.join(dataDir, 'fleetplane.db');
let store = await EmbeddedStore.open(dbPath);
const revoker = await createKey(store, { organizationId: platform.organization_id, name: 'revoker', permissions: { 'tls.revoke': true } });
const statusOnly = await createKey(store, { organizationId: platform.organization_id, name: 'status', permissions: { status: true } });
const tenantEverything = await createKey(store, { organizationId: tenant.organization_id, name: 'everything', permissions: { '*': true } });
await store.close();

const server = await ServerProcess.start({ workers: { count: 1, readyTimeoutMs: 120_000 }, dataDir, mesh: { port: 0, host: '127.0.0.1', tls: { mode: 'auto' } } });
t.teardown(() => server.stop());
await server.readyWorkers(1, 0, 120_000);

const revokedSerials = async (): Promise<string[]> => {
  store = await EmbeddedStore.open(dbPath);
  try {
    const record = (await store.collection(MESH_AUTHORITIES).findOne({})) as { revoked: string[] } | null;
    return record?.revoked ?? [];
  } finally {
    await store.close();
  }
};
const revoke = (serial: unknown, key?: string, host = '127.0.0.1') => request(server.port, '/control', { body: { method: 'tls.revoke', master: true, data: serial }, key, host });

t.test('POST /control tls.revoke: refused for tenant keys, a platform key without the right and no key; nothing is revoked', async (t) => {
  for (const [who, key, host] of [
    ['a tenant admin', tenant.adminKey, 'tenant.test'],
    ['a tenant key granted everything', tenantEverything.key, 'tenant.test'],
    ['a platform key without tls.revoke', statusOnly.key, '127.0.0.1'],
    ['no key', undefined, '127.0.0.1'],
  ] as const) {
    const refused = await revoke('AB12', key, host);
    t.equal(refused.status, 403, `${who}: 403`);
    t.match(refused.json(), { error: { code: String, message: String } }, `${who}: a JSON error`);
  }
  const scoped = await request(server.port, '/control', { body: { method: 'tls.revoke', organization_id: tenant.organization_id, data: 'AB12' }, key: tenant.adminKey, host: 'tenant.test' });
  t.equal(scoped.status, 403, "a tenant admin's organization-scoped envelope is refused too");
  t.same(await revokedSerials(), [], 'nothing was revoked');
});

t.test('a serial that is not hex is refused with the reason and revokes nothing', async (t) => {
  for (const serial of ['not-hex', '', 42, null, 'A'.repeat(65)]) {
    const answer = await revoke(serial, revoker.key);
    t.match(answer.json().replies?.[0] ?? answer.json(), { error: { code: 'bad_request', message: /serial of a mesh certificate/ } }, `${JSON.stringify(serial)}: bad_request`);
  }
  t.same(await revokedSerials(), [], 'nothing was revoked');
});

t.test('a platform key holding tls.revoke revokes a serial (stored upper-case, once)', async (t) => {
  const answer = await revoke('ab12', revoker.key);
  t.equal(answer.status, 200);
  t.match(answer.json().replies[0], { ok: true, result: { revoked: 'AB12' } });
  t.equal((await revoke('AB12', platform.adminKey)).status, 200, 'the platform admin, the same serial again');
  t.same(await revokedSerials(), ['AB12']);
});

t.test('ctl tls revoke through the control socket', async (t) => {
  const done = await fleetplane(['ctl', 'tls', 'revoke', 'CD34', '--data-dir', dataDir]);
  t.equal(done.status, 0, done.stderr);
  const bad = await fleetplane(['ctl', 'tls', 'revoke', 'zz', '--data-dir', dataDir]);
  t.equal(bad.status, 1, 'a serial that is not hex: exit 1');
  t.match(bad.stdout + bad.stderr, /bad_request: give the serial of a mesh certificate/);
  t.same((await revokedSerials()).sort(), ['AB12', 'CD34']);
});
