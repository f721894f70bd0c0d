import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { PostgresStore } from '../../src/db/postgres/store.js';
import { pushdown } from '../../src/db/postgres/pushdown.js';
import type { Filter, NewDocument, Store } from '../../src/db/types.js';
import { rejection, storeContract } from './fixtures/store-contract/harness.js';
import { postgresUnavailable, startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

/** Values of every kind the query language tells apart, so a pushed-down condition that drops a match shows. */
const MIXED: NewDocument[] = [
  { _id: 'a', organization_id: 'o1', name: 'x', n: 1, flag: true, tags: ['red', 'blue'], nested: { k: 'v' } },
  { _id: 'b', organization_id: 'o2', name: 'x', n: '1', flag: 'true', tags: 'red' },
  { _id: 'c', organization_id: ['o1', 'o3'], name: ['x', 'y'], n: [1, 2], flag: [true], tags: [['red']] },
  { _id: 'd', name: null, n: 1.5, tags: [] },
  { _id: 'e', organization_id: 'o1', name: { x: 1 }, n: [[1]], flag: false, tags: [{ c: 'red' }], nested: [{ k: 'v' }] },
  { _id: 'f', organization_id: 'O1', name: 'X', n: 0, flag: null },
  { _id: 'g', organization_id: 'o1', name: 'x\\u0000', n: 1e21, tags: ['red', 'red'] },
];

const FILTERS: Filter[] = [
  { organization_id: 'o1' }, { organization_id: 'o3' }, { name: 'x' }, { name: 'y' }, { name: 'x\\u0000' }, { n: 1 }, { n: '1' }, { n: 2 },
  { n: 1.5 }, { n: 0 }, { n: 1e21 }, { flag: true }, { flag: 'true' }, { flag: false }, { tags: 'red' }, { tags: ['red'] }, { tags: [] },
  { organization_id: { $eq: 'o1' } }, { organization_id: { $in: ['o2', 'o3'] } }, { n: { $in: [1, '1'] } }, { name: { $in: ['x', null] } },
  { organization_id: 'o1', name: 'x' }, { $and: [{ organization_id: 'o1' }, { n: 1 }] }, { $or: [{ name: 'y' }, { flag: false }] },
  { $or: [{ name: 'y' }, { n: { $gt: 1 } }] }, { _id: { $in: ['a', 'c', 'zz'] } }, { _id: 'a', name: 'x' }, { 'nested.k': 'v' },
  { organization_id: { $eq: 'o1', $ne: 'o3' } }, { name: 'x\0' }, { organization_id: { $in: ['o1\0', 'o2'] } }, { name: null },
  { flag: { $exists: false } }, { _id: 'a\0' },
];

const ids = (documents: Array<{ _id: string }>) => documents.map((document) => document._id).sort();

const unavailable = postgresUnavailable();
if (unavailable) {
  t.plan(0, unavailable);
} else {
  let server: PostgresServer | undefined;
  let store: Store | undefined;
  t.before(async () => {
    server = await startPostgres();
    store = await PostgresStore.connect({ url: server.url() });
  });
  t.teardown(async () => {
    await store?.close();
    await server?.stop();
  });
  const url = () => server!.url();

  t.test('store contract: PostgreSQL backend', async (t) => {
    storeContract(t, { open: () => PostgresStore.connect({ url: url() }), spec: () => ({ backend: 'postgres', url: url() }) });
  });

  t.test('filters select the same documents as on the embedded store, whatever part of them is pushed down to SQL', async (t) => {
    const directory = mkdtempSync(path.join(tmpdir(), 'fleetplane-pg-diff-'));
    const embedded = await EmbeddedStore.open(path.join(directory, 'diff.db'));
    t.teardown(async () => {
      await embedded.close();
      rmSync(directory, { recursive: true, force: true });
    });
    const [here, there] = [store!.collection('mixed'), embedded.collection('mixed')];
    for (const document of MIXED) {
      await here.insertOne(document);
      await there.insertOne(document);
    }
    for (const filter of FILTERS) {
      const label = JSON.stringify(filter);
      t.same(ids(await here.find(filter)), ids(await there.find(filter)), label);
      t.equal((await here.findOne(filter))?._id, (await there.findOne(filter))?._id, `${label}: the first in insertion order`);
      t.equal(await here.countDocuments(filter), await there.countDocuments(filter), `${label}: count`);
    }
    const [scopedHere, scopedThere] = [store!.forOrganization('o1').collection('mixed'), embedded.forOrganization('o1').collection('mixed')];
    t.same(ids(await scopedHere.find({ name: 'x' })), ids(await scopedThere.find({ name: 'x' })), 'through an organization scope');
  });

  t.test('organization_id, _id and equality conditions become SQL conditions; comparisons and paths stay in JavaScript', async (t) => {
    const values: unknown[] = ['c'];
    t.same(pushdown({ organization_id: 'o1', name: { $in: ['a', 'b'] } }, values), [
      '(d.doc @> $2::jsonb OR d.doc @> $3::jsonb)',
      '(d.doc @> $4::jsonb OR d.doc @> $5::jsonb OR d.doc @> $6::jsonb OR d.doc @> $7::jsonb)',
    ]);
    t.same(values.slice(1, 3), ['{"organization_id":"o1"}', '{"organization_id":["o1"]}'], 'the field equals the value or is an array holding it');
    t.same(pushdown({ _id: { $in: ['a', 7] } }, []), ['d.id = ANY($1::text[])'], '_id by the primary key (ids are strings)');
    t.same(pushdown({ 'a.b': 1, n: { $gt: 1 }, m: null, k: { $ne: 1 } }, []), [], 'nothing that could drop a match');
    const kept: unknown[] = [];
    t.same(pushdown({ $or: [{ a: 1 }, { b: { $gt: 1 } }] }, kept), [], 'an $or with a branch left to JavaScript');
    t.same(kept, [], 'leaves no parameter behind');
    t.same(pushdown({ $or: [{ a: 1 }, { _id: 'x' }] }, kept), ['(((d.doc @> $1::jsonb OR d.doc @> $2::jsonb)) OR (d.id = ANY($3::text[])))']);
  });

  t.test('documents are jsonb, and a unique key is a row the server itself keeps unique', async (t) => {
    const collection = store!.collection('uniq');
    await collection.createIndex({ email: 1 }, { unique: true });
    await collection.insertOne({ _id: 'a', email: 'a@example.com' });
    await collection.insertOne({ _id: 'b', email: 'b@example.com' });
    const column = await server!.query("SELECT data_type FROM information_schema.columns WHERE table_name = 'fleetplane_documents' AND column_name = 'doc'");
    t.equal(column.rows[0]?.data_type, 'jsonb');
    const stored = await server!.query("SELECT doc->>'email' AS email FROM fleetplane_documents WHERE collection = 'uniq' ORDER BY seq");
    t.same(stored.rows.map((row) => row.email), ['a@example.com', 'b@example.com']);
    const keys = await server!.query("SELECT index_name, key, doc_id FROM fleetplane_unique_keys WHERE collection = 'uniq' ORDER BY doc_id");
    t.same(keys.rows, [{ index_name: 'email_1', key: '["a@example.com"]', doc_id: 'a' }, { index_name: 'email_1', key: '["b@example.com"]', doc_id: 'b' }]);
    const bypass = await server!
      .query("UPDATE fleetplane_unique_keys SET digest = (SELECT digest FROM fleetplane_unique_keys WHERE doc_id = 'a' AND collection = 'uniq') WHERE collection = 'uniq' AND doc_id = 'b'")
      .catch((error: unknown) => error);
    t.match(bypass, { code: '23505' }, 'even a statement that goes around the store is refused by the index');
    await collection.deleteOne({ _id: 'a' });
    t.equal((await server!.query("SELECT count(*)::int AS n FROM fleetplane_unique_keys WHERE collection = 'uniq'")).rows[0]?.n, 1, "a deleted document's keys go with it");
  });

  t.test('a string holding a NUL character is refused with 400 and nothing is written; the escaped text is kept', async (t) => {
    const collection = store!.collection('nul');
    t.match(await rejection(t, collection.insertOne({ _id: 'a', s: 'a\0b' })), { name: 'InvalidInputError', statusCode: 400, message: /NUL/ });
    await collection.insertOne({ _id: 'b', s: 'a\\u0000b' });
    t.match(await rejection(t, collection.updateOne({ _id: 'b' }, { $set: { s: '\0' } })), { statusCode: 400 });
    t.same(await collection.find(), [{ _id: 'b', s: 'a\\u0000b' }]);
  });

  t.test('a process never holds more than postgres.maxPoolSize connections, however many operations wait', async (t) => {
    const bounded = await PostgresStore.connect({ url: `${url()}?application_name=bounded`, maxPoolSize: 2 });
    t.teardown(() => bounded.close());
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await server!.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'bounded'");
        most = Math.max(most, rows[0]!.n as number);
      }
    })();
    const collection = bounded.collection('bounded');
    const operations = Array.from({ length: 60 }, (_, i) => (i % 2 ? collection.insertOne({ i }) : collection.find({ i: { $gt: 10 } })));
    await Promise.all(operations);
    sampling = false;
    await sampler;
    t.equal(await collection.countDocuments(), 30, 'every operation was carried out');
    t.ok(most >= 1 && most <= 2, `at most 2 connections on the server (saw ${most})`);
  });

  t.test("a write waiting past postgres.operationTimeoutMs for another writer's lock on the collection fails with 503 store_busy", async (t) => {
    const impatient = await PostgresStore.connect({ url: url(), operationTimeoutMs: 300 });
    t.teardown(() => impatient.close());
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    t.teardown(() => holder.end());
    await holder.query('BEGIN');
    await holder.query("INSERT INTO fleetplane_collection_versions VALUES ('held', 0) ON CONFLICT (collection) DO UPDATE SET version = fleetplane_collection_versions.version");
    const started = Date.now();
    t.match(await rejection(t, impatient.collection('held').insertOne({ _id: 'a' })), { code: 'store_busy', statusCode: 503 });
    t.ok(Date.now() - started >= 250, 'it waited for the lock first');
    await holder.query('ROLLBACK');
    await impatient.collection('held').insertOne({ _id: 'a' });
    t.equal(await impatient.collection('held').countDocuments(), 1, 'the lock released, the write goes through');
  });

  t.test("two stores on one database (two hosts) see each other's writes in the change token", async (t) => {
    const other = await PostgresStore.connect({ url: url() });
    t.teardown(() => other.close());
    const before = await store!.changeToken(['shared']);
    await other.collection('shared').insertOne({ v: 1 });
    // Heard through the change feed a moment after the commit, or read from the counters while it is down.
    await until("the other store's write to move the change token", async () => ((await store!.changeToken(['shared'])) !== before ? true : undefined), 5_000);
    t.equal(await store!.collection('shared').countDocuments(), 1);
  });
}
