import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { openStore, embeddedStorePath } from '../../src/db/open.js';
import { InvalidInputError } from '../../src/db/errors.js';
import { storeContract, rejection } from './fixtures/store-contract/harness.js';

const tmp = () => mkdtempSync(path.join(tmpdir(), 'fleetplane-db-'));

t.test('store contract: embedded SQLite backend', async (t) => {
  const file = path.join(tmp(), 'contract.db');
  storeContract(t, { open: () => EmbeddedStore.open(file), spec: () => ({ backend: 'embedded', file }) });
});

t.test('the embedded file defaults to <dataDir>/fleetplane.db and db.path overrides it', async (t) => {
  t.equal(embeddedStorePath({ dataDir: '/srv/data', db: {}, mongodb: { database: 'fleetplane' } }), path.join('/srv/data', 'fleetplane.db'));
  t.equal(embeddedStorePath({ dataDir: '/srv/data', db: { path: '/var/lib/fp.db' }, mongodb: { database: 'fleetplane' } }), '/var/lib/fp.db');
});

t.test('documents, indexes and counters survive closing and reopening the file', async (t) => {
  const dataDir = tmp();
  const config = { dataDir, db: {}, mongodb: { database: 'fleetplane' } };
  const first = await openStore(config);
  await first.collection('organizations').insertOne({ _id: 'o1', name: 'one', hosts: ['one.example'], createdAt: new Date().toISOString() });
  const token = await first.changeToken(['organizations']);
  await first.close();
  const second = await openStore(config);
  t.teardown(() => second.close());
  t.equal((await second.collection('organizations').findOne({ hosts: 'one.example' }))?._id, 'o1');
  t.equal(await second.changeToken(['organizations']), token);
  const duplicate = await rejection(t, second.collection('organizations').insertOne({ name: 'two', hosts: ['one.example'], createdAt: new Date().toISOString() }));
  t.match(duplicate, { name: 'DuplicateKeyError', index: 'hosts_1' }, 'the standard host index is in force after reopening');
});

t.test('the file is in WAL mode with a busy timeout', async (t) => {
  const file = path.join(tmp(), 'wal.db');
  const store = await EmbeddedStore.open(file);
  t.teardown(() => store.close());
  t.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
  t.ok((store.db.pragma('busy_timeout', { simple: true }) as number) > 0);
});

t.test('documents of the SPEC 7.2 collections must match their schema', async (t) => {
  const store = await EmbeddedStore.open(path.join(tmp(), 'schema.db'));
  t.teardown(() => store.close());
  const error = await rejection(t, store.collection('organizations').insertOne({ name: 'no hosts', hosts: 'one.example', createdAt: new Date().toISOString() }));
  t.ok(error instanceof InvalidInputError);
  t.match(error.message, /organizations.*hosts/);
  t.equal(await store.collection('organizations').countDocuments(), 0);
});

t.test('a lookup by a unique-indexed field reads through the index and still applies the whole filter', async (t) => {
  const store = await EmbeddedStore.open(path.join(tmp(), 'plan.db'));
  t.teardown(() => store.close());
  const collection = store.collection('plan');
  await collection.createIndex({ code: 1 }, { unique: true });
  await collection.insertOne({ _id: 'a', code: 'x1', state: 'on' });
  t.equal((await collection.findOne({ code: 'x1' }))?._id, 'a');
  t.equal(await collection.findOne({ code: 'x1', state: 'off' }), null, 'the other condition still applies');
  const raw = new Database(store.file, { readonly: true });
  t.teardown(() => raw.close());
  const entries = raw.prepare("SELECT key, doc_id FROM unique_keys WHERE collection = 'plan'").all();
  t.same(entries, [{ key: '["x1"]', doc_id: 'a' }], 'the side table holds exactly the key of the document');
});
