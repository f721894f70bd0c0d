import t from 'tap';
import { chmodSync, existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open.js';
import { StoreError, StoreUnavailableError } from '../../src/db/errors.js';
import { databaseName } from '../../src/db/mongodb/settings.js';

const tempDir = () => mkdtempSync(path.join(tmpdir(), 'fleetplane-open-'));

t.test('FLEETPLANE_MONGODB_URL, FLEETPLANE_MONGODB_DATABASE and FLEETPLANE_DB_PATH configure the store', async (t) => {
  const { config } = loadConfig({
    env: { FLEETPLANE_MONGODB_URL: 'mongodb://db.example:27017', FLEETPLANE_MONGODB_DATABASE: 'fleet', FLEETPLANE_DB_PATH: '/var/lib/fleetplane/store.db' },
    object: {},
  });
  t.match(config.mongodb, { url: 'mongodb://db.example:27017', database: 'fleet' });
  t.equal(config.db.path, '/var/lib/fleetplane/store.db');
  const defaults = loadConfig({ env: {}, object: {} }).config.mongodb;
  t.same(defaults, { serverSelectionTimeoutMs: 5_000, socketTimeoutMs: 10_000, operationTimeoutMs: 5_000, maxPoolSize: 10 }, 'no URL: the embedded store; bounded waits by default');
});

t.test('the MongoDB database is mongodb.database when configured, else the one the URL names, else fleetplane', async (t) => {
  t.equal(databaseName({ url: 'mongodb://a.example,b.example/fleet_prod?replicaSet=rs0', database: undefined }), 'fleet_prod');
  t.equal(databaseName({ url: 'mongodb+srv://u:p@cluster.example/tenant%2Done', database: undefined }), 'tenant-one');
  t.equal(databaseName({ url: 'mongodb://a.example/fleet_prod', database: 'other' }), 'other', 'the configured name wins');
  t.equal(databaseName({ url: 'mongodb://a.example/?replicaSet=rs0', database: undefined }), 'fleetplane');
  t.equal(databaseName({ url: 'mongodb://a.example', database: undefined }), 'fleetplane');
});

t.test('with mongodb.url set the store is MongoDB; an unreachable server is a clear error without the password', async (t) => {
  const config = loadConfig({ env: {}, object: { dataDir: tempDir(), mongodb: { url: 'mongodb://fleet:hunter2@127.0.0.1:9/', serverSelectionTimeoutMs: 300 } } }).config;
  const error = await openStore(config).then(
    () => undefined,
    (failure: unknown) => failure,
  );
  t.ok(error instanceof StoreUnavailableError);
  t.match(error, { code: 'store_unavailable', statusCode: 503, message: /^cannot connect to MongoDB/ });
  t.notMatch(String((error as Error).message), 'hunter2');
});

t.test("a new embedded store file and its WAL are the owner's only; closing the last connection folds the WAL back", async (t) => {
  const dir = tempDir();
  const config = loadConfig({ env: {}, object: { dataDir: path.join(dir, 'data') } }).config;
  const store = await openStore(config);
  await store.collection('clusters').insertOne({ organization_id: 'o1', name: 'one' });
  const file = path.join(dir, 'data', 'fleetplane.db');
  const mode = (name: string) => statSync(name).mode & 0o777;
  t.equal(mode(path.join(dir, 'data')), 0o700, 'the data directory it created');
  t.equal(mode(file), 0o600, 'the store file');
  t.equal(mode(`${file}-wal`), 0o600, 'its write-ahead log');
  await store.close();
  t.notOk(existsSync(`${file}-wal`), 'no WAL left after the close');
  t.notOk(existsSync(`${file}-shm`), 'no shared-memory file left');

  chmodSync(file, 0o640);
  const again = await openStore(config);
  t.equal(mode(file), 0o640, "an existing file keeps its operator's mode");
  await again.close();
});

t.test('an embedded store path that cannot be a file is a clear store error', async (t) => {
  const dir = tempDir();
  writeFileSync(path.join(dir, 'plain'), 'not a directory');
  const config = loadConfig({ env: {}, object: { dataDir: dir, db: { path: path.join(dir, 'plain', 'store.db') } } }).config;
  const error = await openStore(config).then(
    () => undefined,
    (failure: unknown) => failure,
  );
  t.ok(error instanceof StoreError);
  t.match(error, { code: 'store_unavailable', message: /^cannot open the embedded store at .*plain\/store\.db: / });
});

t.test('a connection string MongoDB cannot use is a store_misconfigured error, not an outage to retry', async (t) => {
  for (const url of ['mongodb://127.0.0.1:99999/', 'http://db.example/', 'mongodb://127.0.0.1:27017/?authMechanism=BOGUS']) {
    const config = loadConfig({ env: {}, object: { dataDir: tempDir(), mongodb: { url } } }).config;
    const error = await openStore(config).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    t.notOk(error instanceof StoreUnavailableError, url);
    t.match(error, { code: 'store_misconfigured', statusCode: 500, message: /^cannot connect to MongoDB: / }, url);
  }
});
