import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open.js';
import { StoreError } from '../../src/db/errors.js';

const tempDir = () => mkdtempSync(path.join(tmpdir(), 'fleetplane-open-'));

t.test('FLEETPLANE_MONGODB_URL, FLEETPLANE_MONGODB_DATABASE and FLEETPLANE_DB_PATH configure the store', async (t) => {
  const { config } = loadConfig({
    env: { FLEETPLANE_MONGODB_URL: 'mongodb://db.example:27017', FLEETPLANE_MONGODB_DATABASE: 'fleet', FLEETPLANE_DB_PATH: '/var/lib/fleetplane/store.db' },
    object: {},
  });
  t.same(config.mongodb, { url: 'mongodb://db.example:27017', database: 'fleet' });
  t.equal(config.db.path, '/var/lib/fleetplane/store.db');
  t.same(loadConfig({ env: {}, object: {} }).config.mongodb, { database: 'fleetplane' }, 'no URL: the embedded store');
});

t.test('with mongodb.url set the store is MongoDB; an unreachable server is a clear error without the password', async (t) => {
  const config = loadConfig({ env: {}, object: { dataDir: tempDir(), mongodb: { url: 'mongodb://fleet:hunter2@127.0.0.1:9/?serverSelectionTimeoutMS=300' } } }).config;
  const error = await openStore(config).then(
    () => undefined,
    (failure: unknown) => failure,
  );
  t.ok(error instanceof StoreError);
  t.match(error, { code: 'store_unavailable', message: /^cannot connect to MongoDB/ });
  t.notMatch(String((error as Error).message), 'hunter2');
});
