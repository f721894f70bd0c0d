import t from 'tap';
import { FakeCluster, flush } from './fake-cluster.js';

t.test('hand-over: writes wait from the freeze; aborted, they are made here in order', async (t) => {
  const old = new FakeCluster();
  const worker = await old.addWorker();
  await old.authority.set('a', 1);
  const snapshot = old.authority.freeze();
  t.same(snapshot, { revision: 1, entries: [['a', 1]] });
  let settled = false;
  const fromWorker = worker.replica.set('b', 2).then((revision) => ((settled = true), revision));
  const fromPrimary = old.authority.set('a', 3);
  await flush();
  t.notOk(settled, 'a write waits while frozen');
  t.equal(old.authority.revision, 1, 'and changes nothing');
  old.authority.thaw();
  // The primary's own write arrived first: the worker's still had the channel to cross when it was held.
  t.same(await Promise.all([fromPrimary, fromWorker]), [2, 3], 'aborted: made here, one revision each, in arrival order');
  t.same(await worker.replica.get('b'), 2, "with read-your-writes for the worker's replica");
});

t.test('hand-over: committed, waiting and later writes are made on the new primary, seeded with the entries', async (t) => {
  const old = new FakeCluster();
  const oldWorker = await old.addWorker();
  await old.authority.set('a', { n: 1 });
  const snapshot = JSON.parse(JSON.stringify(old.authority.freeze()));

  const next = new FakeCluster();
  next.authority.seed(snapshot);
  const newWorker = await next.addWorker();
  t.same(await newWorker.replica.get('a'), { n: 1 }, "the new primary's workers start from the seed");
  t.equal(newWorker.replica.revision, 1, 'at its revision');

  const waiting = oldWorker.replica.set('b', 'held');
  await flush();
  old.authority.forwardTo((draft) => next.authority.applyForwarded(JSON.parse(JSON.stringify(draft))));
  t.equal(await waiting, 2, 'the held write was made on the new primary (its revision)');
  t.equal(await old.authority.delete('a'), true, 'later ones too');
  t.same(await next.authority.keys(), ['b']);
  t.equal(old.authority.revision, 1, 'the old authority changed nothing');
  await flush();
  t.same(await newWorker.replica.get('b'), 'held', "and the new primary's workers see them");

  await t.rejects(next.authority.applyForwarded({ kind: 'rename', key: 'x' }), { code: 'E_STORAGE_BAD_MESSAGE' });
  t.throws(() => next.authority.seed(snapshot), /seeded before any worker subscribes/, 'a seed comes before anything else');
});

t.test('hand-over: a forwarded write the new primary cannot make fails in the writer, with a storage error', async (t) => {
  const old = new FakeCluster();
  const worker = await old.addWorker();
  old.authority.freeze();
  old.authority.forwardTo(() => Promise.reject(new Error('the new primary is gone: the write was not made')));
  await t.rejects(worker.replica.set('k', 1), { code: 'E_STORAGE_UNAVAILABLE', message: /the new primary is gone/ });
  await t.rejects(old.authority.set('k', 1), { code: 'E_STORAGE_UNAVAILABLE' });
});
