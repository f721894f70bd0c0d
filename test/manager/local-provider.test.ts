import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createOrganization } from '../../src/auth/organizations.js';
import { LocalProvider } from '../../src/manager/local-provider.js';
import { CLI, FAST, tempDir } from '../helpers/server-process.js';
import { testStore } from '../auth/fixtures/tenants.js';
import { logger } from './fixtures.js';
import { scaled, until } from '../helpers/wait.js';

const API_KEY = 'fpk_localproviderkey01.the-server-key-secret-value';
const MESH_SECRET = 'the-tenant-mesh-secret-0123456789';

function healthy(url: string, budgetMs = 30_000): Promise<Record<string, unknown>> {
  return until(`${url} to be healthy`, async () => {
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) return (await response.json()) as Record<string, unknown>;
    } catch {
      // not listening yet
    }
    return undefined;
  }, budgetMs, { everyMs: 100 });
}

t.test('create starts a real server with its own directory and ports; terminate stops it gracefully with exit 0', async (t) => {
  const tenantDir = tempDir();
  const dbPath = path.join(tenantDir, 'tenant.db');
  const store = await testStore(dbPath);
  const tenant = (await createOrganization(store, { name: 'tenant', hosts: ['tenant.test'] }))._id;
  await store.close();
  const { lines, log } = logger();
  const provider = new LocalProvider({ root: tempDir(), command: [process.execPath, CLI], baseConfig: { shutdown: FAST.shutdown, lifecycle: FAST.lifecycle, log: { level: 'warn' }, mesh: { pingIntervalMs: 3_000 }, workers: { readyTimeoutMs: scaled(30_000) } }, log });
  t.teardown(() => provider.stopAll());
  const created = await provider.call('create', {
    server_id: 'managed-1',
    cluster_id: 'c1',
    deployment: { cloud: 'local', workers: 1 },
    startup: {
      server: { id: 'managed-1', cluster: 'c1', organization: tenant },
      manager: { organizationId: 'platform', host: 'http://127.0.0.1:9', apiKey: API_KEY },
      mesh: { secret: MESH_SECRET },
      db: { path: dbPath },
    },
  });
  t.equal(created.status, 200, JSON.stringify(created.data));
  const { instanceId, pid, url, dataDir } = created.data as { instanceId: string; pid: number; url: string; dataDir: string };
  t.match(instanceId, /^fp-local-[0-9a-f]{16}$/);
  const health = await healthy(url);
  t.equal(health.server, 'managed-1', 'the server runs under the id the manager chose');
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
  for (const secret of ['the-server-key-secret-value', MESH_SECRET]) {
    t.notOk(cmdline.includes(secret), 'no secret in argv');
    t.notOk(environ.includes(secret), 'nor in the environment');
    t.notOk(JSON.stringify(lines).includes(secret), 'nor in the log');
    t.notOk(JSON.stringify(created).includes(secret), 'nor in the reply');
  }
  t.equal(statSync(path.join(dataDir, 'fleetplane.config.json')).mode & 0o777, 0o600, 'the config file holding them is 0600');
  const config = JSON.parse(readFileSync(path.join(dataDir, 'fleetplane.config.json'), 'utf8')) as { mesh: { secret: string; pingIntervalMs: number }; db: { path: string }; workers: unknown };
  t.equal(config.mesh.secret, MESH_SECRET, "the cluster's mesh secret");
  t.equal(config.mesh.pingIntervalMs, 3_000, "the base config's mesh section is kept beside the provider's fields");
  t.same(config.workers, { readyTimeoutMs: scaled(30_000), count: 1 }, "and its workers section beside the deployment's count");
  t.equal(config.db.path, dbPath, "and the cluster's store");

  const stopped = await provider.call('terminate', { instanceId });
  t.same(stopped, { status: 200, data: { instanceId, exitCode: 0 } }, 'SIGTERM, then exit 0');
  t.throws(() => process.kill(pid, 0), 'the process is gone');
  t.same(await provider.call('terminate', { instanceId }), { status: 200, data: { instanceId, exitCode: null } }, 'terminating it again is terminated');
});

t.test('bad requests are refused before anything starts', async (t) => {
  const root = tempDir();
  const provider = new LocalProvider({ root, log: logger().log });
  const missing = await provider.call('create', { server_id: 's1', cluster_id: 'c1', startup: { mesh: { secret: MESH_SECRET } } });
  t.equal(missing.status, 400);
  t.match(missing.data, { error: /^data\.startup\.server: is required/ });
  const badManager = await provider.call('create', { server_id: 's1', cluster_id: 'c1', startup: { server: { organization: 'o' }, manager: { organizationId: 'p' } } });
  t.match(badManager, { status: 400, data: { error: /^data\.startup\.manager\.host: is required/ } }, 'a parent connection, when given, is complete');
  t.same(await provider.call('terminate', { instanceId: '../../etc' }), { status: 400, data: { error: 'data.instanceId: not an instance of the local provider' } });
  t.equal((await provider.call('terminate', { instanceId: 'fp-local-0000000000000000' })).status, 404);
});
