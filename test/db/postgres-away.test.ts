import t from 'tap';
import { StoreUnavailableError } from '../../src/db/errors.js';
import { PostgresStore } from '../../src/db/postgres/store.js';
import { operationDeadlineMs } from '../../src/db/postgres/settings.js';
import { postgresUnavailable, startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { scaled } from '../helpers/wait.js';

// A PostgreSQL server that hangs with its sockets open (frozen) or goes away: every operation answers within
// the store's deadline, and the pool is whole again once the server is back.

const settings = { connectTimeoutMs: 500, operationTimeoutMs: 500, maxPoolSize: 2 };
const deadlineMs = operationDeadlineMs(settings);
/** What a loaded machine may add to a deadline (timers late, a connection torn down). */
const slackMs = scaled(1_000);

async function timed(operation: Promise<unknown>): Promise<{ error: unknown; elapsedMs: number }> {
  const startedAt = Date.now();
  const error = await operation.then(() => undefined, (failure: unknown) => failure);
  return { error, elapsedMs: Date.now() - startedAt };
}

const unavailable = postgresUnavailable();
if (unavailable) {
  t.plan(0, unavailable);
} else {
  let server: PostgresServer;
  let store: PostgresStore;
  t.before(async () => {
    server = await startPostgres();
    store = await PostgresStore.connect({ url: server.url(), ...settings }, { changeFeed: false });
  });
  t.teardown(async () => {
    await server?.thaw();
    await store?.close();
    await server?.stop();
  });

  t.test('on a frozen server, reads and writes answer 503 store_unavailable by the deadline, more of them than the pool has connections', async (t) => {
    await store.collection('things').insertOne({ _id: 'kept', n: 1 });
    await server.freeze();
    const operations = [
      store.collection('things').insertOne({ n: 2 }),
      store.collection('things').updateOne({ _id: 'kept' }, { $inc: { n: 1 } }),
      store.collection('things').findOne({ _id: 'kept' }),
      store.collection('things').countDocuments(),
      store.collection('others').insertOne({ n: 3 }),
    ];
    const outcomes = await Promise.all(operations.map(timed));
    for (const { error, elapsedMs } of outcomes) {
      t.ok(error instanceof StoreUnavailableError, `503 store_unavailable (${(error as Error)?.message})`);
      t.ok(elapsedMs < deadlineMs + slackMs, `answered in ${elapsedMs} ms, by the deadline of ${deadlineMs} ms`);
    }
    await server.thaw();
    await store.collection('things').insertOne({ _id: 'after', n: 4 });
    t.same(await store.collection('things').findOne({ _id: 'kept' }, { projection: { n: 1 } }), { _id: 'kept', n: 1 }, 'the update cut off at the deadline was not made');
    t.equal(await store.collection('things').countDocuments({ _id: 'after' }), 1, 'writes are made again once thawed');
  });

  t.test('a stopped server is refused at once; after its restart the next operations succeed on new connections', async (t) => {
    await server.stopKeepingData();
    const { error, elapsedMs } = await timed(store.collection('things').insertOne({ n: 5 }));
    t.ok(error instanceof StoreUnavailableError, `503 store_unavailable (${(error as Error)?.message})`);
    t.ok(elapsedMs < deadlineMs, `answered in ${elapsedMs} ms`);
    await server.start();
    await store.collection('things').insertOne({ _id: 'restarted' });
    t.equal(await store.collection('things').countDocuments({ _id: 'restarted' }), 1);
  });
}
