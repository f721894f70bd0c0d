import t from 'tap';
import type { ClusterStorage } from '../../src/storage/cluster-storage.js';
import { FakeCluster, entriesOf, flush, recordEvents } from './fake-cluster.js';
import { assertOneHistory, assertReadYourWrites, type EventRecord, type WriteCheck } from './history.js';

const KEYS = Array.from({ length: 8 }, (_, index) => `k${index}`);

/** A small seeded generator, so a failing interleaving can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = Math.imul(state ^ (state >>> 15), 1 | state);
    value ^= value + Math.imul(value ^ (value >>> 7), 61 | value);
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Issues `count` operations at once (none awaited before the next starts); each set is read back as soon as it resolves. */
async function concurrentWrites(storage: ClusterStorage, name: string, count: number, seed: number): Promise<WriteCheck[]> {
  const next = random(seed);
  const checks: WriteCheck[] = [];
  await Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const key = KEYS[Math.floor(next() * KEYS.length)]!;
      const roll = next();
      if (roll < 0.7) {
        const value = { from: name, index };
        const revision = await storage.set(key, value);
        const observed = await storage.get(key);
        checks.push({ key, value, revision, revisionAtRead: storage.revision, observed });
      } else if (roll < 0.98) {
        await storage.delete(key);
      } else {
        await storage.clear();
      }
    }),
  );
  return checks;
}

t.test('interleaved writers (primary and three workers): one event sequence everywhere, each once, equal replicas, read-your-writes', async (t) => {
  const cluster = new FakeCluster();
  const workers = [await cluster.addWorker(), await cluster.addWorker(), await cluster.addWorker()];
  const processes: Array<[string, ClusterStorage]> = [['primary', cluster.authority], ...workers.map((worker) => [`worker${worker.workerId}`, worker.replica] as [string, ClusterStorage])];
  const histories = processes.map(([name, storage]) => [name, recordEvents(storage, KEYS)] as [string, EventRecord[]]);

  const checks = await Promise.all(processes.map(([name, storage], index) => concurrentWrites(storage, name, 300, index + 1)));
  await flush();

  const primaryHistory = histories[0]![1];
  t.ok(primaryHistory.length > 600, `many mutations happened (${primaryHistory.length})`);
  assertOneHistory(t, histories);
  const primaryEntries = await entriesOf(cluster.authority);
  for (const worker of workers) t.same(await entriesOf(worker.replica), primaryEntries, `worker${worker.workerId} holds the primary's entries`);
  assertReadYourWrites(t, primaryHistory, checks.flat());
});

t.test("a worker's write resolves only after its own replica applied it", async (t) => {
  const cluster = new FakeCluster();
  const writer = await cluster.addWorker();
  const receivedBefore = writer.toWorker.length;
  const order: string[] = [];
  writer.replica.on('change:a', () => order.push('event in the writer'));
  const written = writer.replica.set('a', 1).then((revision) => {
    order.push('set resolved');
    return revision;
  });
  await flush(1);
  t.same(order, [], 'still in flight after one delivery turn: the write is not resolved early');
  const revision = await written;
  t.same(order, ['event in the writer', 'set resolved']);
  t.equal(writer.replica.revision, revision);
  t.equal(await writer.replica.get('a'), 1);
  t.same(
    writer.toWorker.slice(receivedBefore).map((message) => (message.fp === 'rpc' ? message.method : `reply to ${message.id}`)),
    ['worker.storage.mutation', `reply to ${writer.toPrimary.at(-1)!.id}`],
    'from the primary: the change, then the answer behind it on the same channel',
  );
});

t.test('a write made inside a listener is ordered after the event being delivered, in every process', async (t) => {
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker();
  const primaryLog = recordEvents(cluster.authority, ['a', 'b']);
  const workerLog = recordEvents(worker.replica, ['a', 'b']);
  const revisionSeenByLaterListener: number[] = [];
  cluster.authority.on('change:a', () => void cluster.authority.set('b', 'from listener'));
  cluster.authority.on('change:a', () => revisionSeenByLaterListener.push(cluster.authority.revision));
  await cluster.authority.set('a', 1);
  await flush();
  t.same(revisionSeenByLaterListener, [1], 'the listener after the writing one still sees the entries as of change:a');
  t.same(
    primaryLog.map((event) => [event.revision, event.event]),
    [
      [1, 'change:a'],
      [2, 'change:b'],
    ],
  );
  t.same(workerLog, primaryLog);
});

t.test('a listener that throws is logged; other listeners and later mutations still run', async (t) => {
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker();
  for (const storage of [cluster.authority, worker.replica]) {
    storage.on('change:a', () => {
      throw new Error('listener bug');
    });
    storage.on('change:a', async () => {
      throw new Error('async listener bug');
    });
  }
  const afterPrimary: number[] = [];
  const afterWorker: number[] = [];
  cluster.authority.on('change:a', (value) => afterPrimary.push(value as number));
  worker.replica.on('change:a', (value) => afterWorker.push(value as number));
  await worker.replica.set('a', 1);
  await cluster.authority.set('a', 2);
  await flush();
  t.same(afterPrimary, [1, 2]);
  t.same(afterWorker, [1, 2]);
  t.equal(cluster.log.errors.filter((entry) => entry.message === 'storage listener failed').length, 4, 'primary: both failures of both events logged');
  t.equal(worker.log.errors.filter((entry) => entry.message === 'storage listener failed').length, 4, 'worker: likewise');
});

t.test('delete and clear of what is missing resolve false, fire no event and take no revision', async (t) => {
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker();
  const primaryLog = recordEvents(cluster.authority, ['a']);
  const workerLog = recordEvents(worker.replica, ['a']);
  t.equal(await cluster.authority.delete('a'), false);
  t.equal(await worker.replica.delete('a'), false);
  t.equal(await cluster.authority.clear(), false);
  t.equal(await worker.replica.clear(), false);
  t.equal(cluster.authority.revision, 0);
  await worker.replica.set('a', 1);
  t.equal(await worker.replica.delete('a'), true);
  await cluster.authority.set('a', 2);
  t.equal(await worker.replica.clear(), true);
  await flush();
  const kinds = primaryLog.map((event) => `${event.revision} ${event.event}`);
  t.same(kinds, ['1 change:a', '2 delete:a', '3 change:a', '4 clear']);
  t.same(workerLog, primaryLog);
});
