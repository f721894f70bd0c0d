import t from 'tap';
import { FakeClock } from '../helpers/fake-clock.js';
import { StorageError } from '../../src/storage/errors.js';
import { FakeCluster, entriesOf, flush, recordEvents } from './fake-cluster.js';

t.test('a worker that joins late is pushed a snapshot (with its revision) once it listens, unasked, before it is ready; reads wait for it', async (t) => {
  const cluster = new FakeCluster();
  await cluster.authority.set('a', { n: 1 });
  await cluster.authority.set('b', [1, 2]);
  await cluster.authority.delete('b');
  const late = await cluster.addWorker({ ready: false });
  let readSettled = false;
  const read = late.replica.get('a').then((value) => {
    readSettled = true;
    return value;
  });
  await flush();
  t.equal(readSettled, false, 'a read before the snapshot waits for it');
  t.same(late.toWorker, [], 'nothing sent to a worker that does not listen yet');

  cluster.listen(late);
  await late.becomeReady();
  t.same(late.toPrimary, [], 'the worker never asked for its snapshot');
  t.equal(late.replica.revision, 3, "the snapshot's revision");
  t.same(await entriesOf(late.replica), await entriesOf(cluster.authority));
  t.same(await read, { n: 1 });
});

t.test('a replica ignores mutations at or below its snapshot revision, then follows later ones', async (t) => {
  const cluster = new FakeCluster();
  await cluster.authority.set('a', 'current');
  const worker = await cluster.addWorker();
  const events = recordEvents(worker.replica, ['a']);
  worker.inject('worker.storage.mutation', { kind: 'set', revision: 1, key: 'a', value: 'stale' });
  worker.inject('worker.storage.mutation', { kind: 'delete', revision: 0, key: 'a' });
  await flush();
  t.equal(await worker.replica.get('a'), 'current');
  t.same(events, [], 'no event for what the snapshot already holds');
  t.same(worker.log.errors, [], 'not mistaken for a gap');
  t.same(worker.toPrimary, [], 'no snapshot asked for');
  await cluster.authority.set('a', 'next');
  await flush();
  t.same(events, [{ revision: 2, event: 'change:a', value: 'next', oldValue: 'current' }]);
});

t.test('a revision gap makes the replica resync from a snapshot and report what changed', async (t) => {
  const cluster = new FakeCluster();
  await cluster.authority.set('kept', 1);
  await cluster.authority.set('gone', 1);
  const worker = await cluster.addWorker();
  const events = recordEvents(worker.replica, ['kept', 'gone', 'new']);
  worker.dropNextToWorker = true;
  await cluster.authority.delete('gone');
  await cluster.authority.set('new', 'x');
  await cluster.authority.set('kept', 1);
  await flush(10);
  t.equal(worker.log.errors[0]?.message, 'storage revision gap: resyncing from a snapshot');
  t.equal(worker.replica.revision, cluster.authority.revision);
  t.same(await entriesOf(worker.replica), await entriesOf(cluster.authority));
  t.same(
    events.map((event) => `${event.revision} ${event.event}`),
    ['5 change:new', '5 delete:gone'],
    'the differences, at the snapshot revision; the unchanged key is not reported',
  );
  await cluster.authority.set('kept', 2);
  await flush();
  t.equal(await worker.replica.get('kept'), 2, 'follows mutations again after the resync');
});

t.test('a disconnected worker is sent nothing more', async (t) => {
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker();
  await cluster.authority.set('a', 1);
  const sent = worker.toWorker.length;
  cluster.disconnect(worker);
  worker.connected = true; // even if the endpoint object were reused, it is no longer subscribed
  await cluster.authority.set('a', 2);
  t.equal(worker.toWorker.length, sent);
});

t.test('a request the primary never answers rejects with E_STORAGE_TIMEOUT', async (t) => {
  const clock = new FakeClock();
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker({ clock, requestTimeoutMs: 1_000 });
  cluster.answering = false; // the primary stops answering
  const write = worker.replica.set('a', 1);
  await flush();
  clock.advance(999);
  await flush();
  let settled = false;
  void write.then(
    () => (settled = true),
    () => (settled = true),
  );
  await flush();
  t.equal(settled, false, 'still waiting just before the timeout');
  clock.advance(1);
  const error = await write.catch((failure: unknown) => failure);
  t.ok(error instanceof StorageError);
  t.equal((error as StorageError).code, 'E_STORAGE_TIMEOUT');
  t.equal(clock.pending, 0, 'no timer left behind');
});

t.test('answered requests leave no timer behind', async (t) => {
  const clock = new FakeClock();
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker({ clock });
  await worker.replica.set('a', 1);
  await worker.replica.delete('a');
  t.equal(clock.pending, 0);
});
