import t from 'tap';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/errors.js';
import { storeBackendOf } from '../../src/db/open.js';
import { fleetplane, tempDir } from '../helpers/server-process.js';

const thrown = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return error as Error;
  }
  return undefined;
};

t.test('postgres.* come from the file or FLEETPLANE_POSTGRES_*, with a small pool by default', async (t) => {
  t.same(loadConfig({ env: {}, object: {} }).config.postgres, { maxPoolSize: 4, connectTimeoutMs: 5_000, operationTimeoutMs: 5_000 }, 'no URL: the embedded store');
  const { config } = loadConfig({ env: { FLEETPLANE_POSTGRES_URL: 'postgres://fleet@db.example/fleet', FLEETPLANE_POSTGRES_MAX_POOL_SIZE: '2' }, object: {} });
  t.match(config.postgres, { url: 'postgres://fleet@db.example/fleet', maxPoolSize: 2 });
  t.equal(storeBackendOf(config), 'postgres');
  t.equal(storeBackendOf(loadConfig({ env: {}, object: { mongodb: { url: 'mongodb://db.example' } } }).config), 'mongodb');
  t.equal(storeBackendOf(loadConfig({ env: {}, object: {} }).config), 'embedded');
});

t.test('postgres.url and mongodb.url together are a config error naming both, wherever they come from', async (t) => {
  const inFile = thrown(() => loadConfig({ env: {}, object: { postgres: { url: 'postgres://db.example/fleet' }, mongodb: { url: 'mongodb://db.example' } } }));
  t.ok(inFile instanceof ConfigError);
  t.match(inFile, { field: 'postgres.url', message: /postgres\.url: cannot be set together with mongodb\.url/ });
  const fromEnv = thrown(() => loadConfig({ env: { FLEETPLANE_POSTGRES_URL: 'postgres://db.example/fleet' }, object: { mongodb: { url: 'mongodb://db.example' } } }));
  t.match(fromEnv, { name: 'ConfigError', message: /^environment variable FLEETPLANE_POSTGRES_URL: postgres\.url: cannot be set together with mongodb\.url/ });
  t.match(thrown(() => storeBackendOf({ dataDir: '.', db: {}, mongodb: { url: 'mongodb://a' }, postgres: { url: 'postgres://b' } })), { code: 'store_misconfigured' }, 'refused by the store too');
});

t.test('postgres.url must be a postgres:// connection string; the refusal does not show it', async (t) => {
  const error = thrown(() => loadConfig({ env: {}, object: { postgres: { url: 'mysql://fleet:hunter2@db.example/fleet' } } }));
  t.match(error, { name: 'ConfigError', field: 'postgres.url', message: /must be a connection string starting with postgres:\/\/ or postgresql:\/\// });
  t.notMatch(error!.message, 'hunter2');
  t.notOk(thrown(() => loadConfig({ env: {}, object: { postgres: { url: 'postgresql://db.example/fleet' } } })), 'postgresql:// is accepted');
});

t.test('fleetplane start with both store URLs exits 2 with one line naming both', async (t) => {
  const dataDir = tempDir();
  const file = path.join(dataDir, 'fleetplane.config.json');
  writeFileSync(file, JSON.stringify({ dataDir, postgres: { url: 'postgres://127.0.0.1:9/fleet' }, mongodb: { url: 'mongodb://127.0.0.1:9' } }));
  const result = await fleetplane(['start', '--config', file]);
  t.equal(result.status, 2);
  t.match(result.stderr, /^fleetplane: invalid configuration: .*postgres\.url: cannot be set together with mongodb\.url/);
  t.equal(result.stderr.trim().split('\n').length, 1);
});

t.test('the pg client is loaded only when PostgreSQL is the store', async (t) => {
  const dist = path.resolve(import.meta.dirname, '..', '..', 'dist', 'src', 'db');
  const script = `
    import { createRequire } from 'node:module';
    const require = createRequire(import.meta.url);
    const loaded = () => Object.keys(require.cache).some((file) => file.includes('/node_modules/pg/'));
    const { openStore } = await import(${JSON.stringify(path.join(dist, 'open.js'))});
    const store = await openStore({ dataDir: ${JSON.stringify(tempDir())}, db: {}, mongodb: {}, postgres: {} });
    await store.collection('clusters').insertOne({ organization_id: 'o1', name: 'one' });
    await store.close();
    const embedded = loaded();
    await import(${JSON.stringify(path.join(dist, 'postgres', 'store.js'))});
    console.log(JSON.stringify({ embedded, postgres: loaded() }));
  `;
  const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  t.same(JSON.parse(output), { embedded: false, postgres: true }, 'not by a server on the embedded store; by the PostgreSQL backend');
});
