import t from 'tap';
import { MongoServerError, MongoServerSelectionError, MongoWriteConcernError, MongoNetworkTimeoutError } from 'mongodb';
import { DocumentTooLargeError, StoreError } from '../../src/db/errors.js';
import { MongoStore } from '../../src/db/mongodb/store.js';
import { assertSupportedServer, clientOptions } from '../../src/db/mongodb/settings.js';
import { MAX_DOCUMENT_BYTES } from '../../src/db/validate.js';
import type { Collection } from '../../src/db/types.js';
import { FakeMongo } from './fixtures/fake-mongo.js';

const serverError = (code: number, labels: string[] = []) => new MongoServerError({ message: `server error ${code}`, errmsg: `server error ${code}`, code, errorLabels: labels });
const selectionError = () => new MongoServerSelectionError('Server selection timed out after 5000 ms (mongodb://fleet:hunter2@db.example:27017)', {} as never);
const writeConcernError = () => new MongoWriteConcernError({ writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' } } as never);

function setUp(operationTimeoutMs = 1_000) {
  const fake = new FakeMongo();
  const store = new MongoStore(fake.connection(), { operationTimeoutMs });
  const changes: string[] = [];
  store.onChange((collection) => changes.push(collection));
  return { fake, store, changes, items: store.collection('items') };
}

async function failure(promise: Promise<unknown>): Promise<StoreError> {
  try {
    await promise;
  } catch (error) {
    return error as StoreError;
  }
  throw new Error('expected a rejection');
}

/** Every write the store interface offers, against a collection holding `{ _id: 'a', n: 1 }`. */
const WRITES: Record<string, (items: Collection) => Promise<unknown>> = {
  insertOne: (items) => items.insertOne({ _id: 'b', n: 2 }),
  updateOne: (items) => items.updateOne({ _id: 'a' }, { $inc: { n: 1 } }),
  updateMany: (items) => items.updateMany({}, { $inc: { n: 1 } }),
  upsert: (items) => items.updateOne({ name: 'new' }, { $set: { n: 1 } }, { upsert: true }),
  deleteOne: (items) => items.deleteOne({ _id: 'a' }),
  deleteMany: (items) => items.deleteMany({}),
};
/** The driver call each write's data step makes (inside its transaction). */
const DRIVER_STEP: Record<string, string> = { insertOne: 'insertOne', updateOne: 'updateMany', updateMany: 'updateMany', upsert: 'updateOne', deleteOne: 'deleteOne', deleteMany: 'deleteMany' };

t.test('driver errors of a write map to the store statuses, and the failed write bumps the counter once more', async (t) => {
  const cases: Array<[string, () => unknown, number, string]> = [
    ['54 (a field matched twice in an upsert filter)', () => serverError(54), 400, 'InvalidInputError'],
    ['171 (parallel arrays in a unique index)', () => serverError(171), 400, 'InvalidInputError'],
    ['10334 (BSON object too large)', () => serverError(10334), 413, 'DocumentTooLargeError'],
    ['17419 (update result too large)', () => serverError(17419), 413, 'DocumentTooLargeError'],
    ['11000 (duplicate key)', () => serverError(11000), 409, 'DuplicateKeyError'],
    ['a write concern error', writeConcernError, 503, 'StoreUnavailableError'],
    ['a server selection timeout', selectionError, 503, 'StoreUnavailableError'],
    ['a socket timeout', () => new MongoNetworkTimeoutError('connection timed out'), 503, 'StoreUnavailableError'],
    ['a primary stepping down (189)', () => serverError(189), 503, 'StoreUnavailableError'],
    ['an unforeseen server code', () => serverError(8000), 500, 'StoreError'],
  ];
  for (const [label, make, status, name] of cases) {
    const { fake, items, changes } = setUp();
    fake.failNext('items', 'insertOne', make());
    const error = await failure(items.insertOne({ _id: 'a' }));
    t.match(error, { name, statusCode: status }, label);
    t.notMatch(error.message, /hunter2/, `${label}: no credentials in the message`);
    t.same(fake.bumps('items'), { inTransaction: 1, afterFailure: 1 }, `${label}: bumped in the transaction, then once more`);
    t.equal(fake.commits, 0, `${label}: nothing committed`);
    t.same(changes, ['items'], `${label}: this process's caches are told`);
  }
});

t.test('every write path that may have written bumps the counter, whether it succeeds or fails at its data step', async (t) => {
  for (const [write, run] of Object.entries(WRITES)) {
    const ok = setUp();
    ok.fake.rows.set('items', [{ _id: 'a', n: 1 }]);
    await run(ok.items);
    t.same(ok.fake.bumps('items'), { inTransaction: 1, afterFailure: 0 }, `${write}: bumped in its transaction`);
    t.equal(ok.fake.commits, 1, `${write}: committed once`);

    const failed = setUp();
    failed.fake.rows.set('items', [{ _id: 'a', n: 1 }]);
    failed.fake.failNext('items', DRIVER_STEP[write]!, writeConcernError());
    t.equal((await failure(run(failed.items))).statusCode, 503, `${write}: a write concern error is 503`);
    t.same(failed.fake.bumps('items'), { inTransaction: 1, afterFailure: 1 }, `${write}: bumped again after the failure`);

    const lost = setUp();
    lost.fake.rows.set('items', [{ _id: 'a', n: 1 }]);
    lost.fake.commitFailures.push(serverError(50, ['UnknownTransactionCommitResult']));
    t.equal((await failure(run(lost.items))).statusCode, 503, `${write}: an unknown commit result is 503`);
    t.equal(lost.fake.bumps('items').afterFailure, 1, `${write}: an unknown commit outcome bumps again`);
  }
});

t.test('a write that changes nothing still bumps: a retry after an unknown outcome must reach other caches', async (t) => {
  const { fake, items } = setUp();
  fake.rows.set('items', [{ _id: 'a', disabled: true }]);
  t.same(await items.updateOne({ _id: 'a' }, { $set: { disabled: true } }), { matchedCount: 1, modifiedCount: 0 });
  t.equal(fake.bumps('items').inTransaction, 1);
});

t.test('input refused before the write is sent does not count as a write attempt', async (t) => {
  const { fake, items } = setUp();
  t.match(await failure(items.updateOne({ a: { $where: 'x' } }, { $set: { n: 1 } })), { name: 'UnknownOperatorError', statusCode: 400 });
  t.match(await failure(items.insertOne({ 'a\0b': 1 })), { name: 'InvalidInputError', statusCode: 400 });
  t.same(fake.bumps('items'), { inTransaction: 0, afterFailure: 0 });
});

t.test('a write conflict is retried in a new transaction; past the operation deadline it is 503', async (t) => {
  const retried = setUp();
  retried.fake.failNext('items', 'insertOne', serverError(112, ['TransientTransactionError']));
  await retried.items.insertOne({ _id: 'a' });
  t.equal(retried.fake.commits, 1, 'the second attempt committed');
  t.equal(retried.fake.aborts, 1, 'the first was aborted');

  const exhausted = setUp(0);
  exhausted.fake.failNext('items', 'insertOne', serverError(112, ['TransientTransactionError']));
  t.match(await failure(exhausted.items.insertOne({ _id: 'a' })), { name: 'StoreUnavailableError', statusCode: 503 });
});

t.test('an update whose result is over the size limit aborts its transaction', async (t) => {
  const { fake, items } = setUp();
  const half = 'x'.repeat(MAX_DOCUMENT_BYTES / 2 + 1);
  fake.rows.set('items', [{ _id: 'a', parts: [half] }]);
  t.ok((await failure(items.updateMany({}, { $push: { parts: half } }))) instanceof DocumentTooLargeError);
  t.equal(fake.commits, 0);
  t.equal(fake.aborts, 1);
  t.equal(fake.bumps('items').afterFailure, 1);
});

t.test('an upsert gives the new document a string id and reports it', async (t) => {
  const { fake, items } = setUp();
  const result = await items.updateOne({ name: 'new' }, { $set: { n: 1 } }, { upsert: true });
  t.type(result.upsertedId, 'string');
  t.same(fake.rows.get('items'), [{ _id: result.upsertedId, name: 'new', n: 1 }]);
});

t.test('reads carry the operation timeout and map errors without counting a write', async (t) => {
  const { fake, items, store } = setUp(1_234);
  fake.failNext('items', 'find', serverError(31249));
  t.match(await failure(items.find({}, { projection: { a: 1 } })), { name: 'InvalidInputError', statusCode: 400 }, '31249: projection path collision');
  fake.failNext('items', 'find', serverError(31250));
  t.match(await failure(items.find({})), { statusCode: 400 }, '31250: projection path collision');
  fake.failNext('items', 'countDocuments', selectionError());
  t.match(await failure(items.countDocuments()), { code: 'store_unavailable', statusCode: 503 });
  fake.failNext('fleetplane_collection_versions', 'find', selectionError());
  t.match(await failure(store.changeToken(['items'])), { code: 'store_unavailable', statusCode: 503 }, 'the cache check fails fast too');
  await items.findOne({ _id: 'a' });
  t.match(fake.calls.at(-1), { method: 'findOne', args: [{ _id: 'a' }, { maxTimeMS: 1_234 }] });
  t.same(fake.bumps('items'), { inTransaction: 0, afterFailure: 0 });
});

t.test('the server must be 5.0 or later and a replica set or a sharded cluster, said plainly at boot', async (t) => {
  const fake = new FakeMongo();
  t.match(await assertSupportedServer(fake.db()), { version: '7.0.12', topology: 'replicaSet' });
  fake.adminReplies.hello = { msg: 'isdbgrid' };
  t.match(await assertSupportedServer(fake.db()), { topology: 'sharded' });
  fake.adminReplies.buildInfo = { version: '4.4.29' };
  t.match(await failure(assertSupportedServer(fake.db())), { code: 'store_unsupported', message: 'MongoDB 4.4.29 is too old: fleetplane needs MongoDB 5.0 or later' });
  fake.adminReplies.buildInfo = { version: '6.0.1' };
  fake.adminReplies.hello = { isWritablePrimary: true };
  t.match(await failure(assertSupportedServer(fake.db())), { code: 'store_unsupported', message: /6\.0\.1 is a standalone server: fleetplane needs a replica set .*--replSet/ });
});

t.test('client options: bounded waits from the settings, a capped pool, primary reads', async (t) => {
  t.match(clientOptions({ url: 'mongodb://db', serverSelectionTimeoutMs: 2_000, socketTimeoutMs: 9_000, operationTimeoutMs: 4_000, maxPoolSize: 7 }), {
    serverSelectionTimeoutMS: 2_000,
    socketTimeoutMS: 9_000,
    maxPoolSize: 7,
    readPreference: 'primary',
  });
});

t.test('a first write creates its collection and counter before its transaction, once per process', async (t) => {
  const { fake, items } = setUp();
  await items.insertOne({ _id: 'a' });
  await items.insertOne({ _id: 'b' });
  const setup = fake.calls.filter((call) => call.method === 'createCollection' || (call.method === 'updateOne' && '$setOnInsert' in (call.args[1] as object)));
  t.same(setup.map((call) => [call.collection, call.method, call.inTransaction]), [
    ['items', 'createCollection', false],
    ['fleetplane_collection_versions', 'updateOne', false],
  ]);
});
