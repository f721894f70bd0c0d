import t from 'tap';
import { StorageError } from '../../src/storage/errors.js';
import { MAX_VALUE_BYTES } from '../../src/storage/json-value.js';
import { FakeCluster, flush, recordEvents } from './fake-cluster.js';

const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (error: unknown) => (error instanceof StorageError ? error.code : `not a StorageError: ${String(error)}`),
  );

t.test('invalid writes are rejected in the calling process: nothing sent, nothing stored, no event', async (t) => {
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker();
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  const attempts: Array<[string, (storage: typeof worker.replica | typeof cluster.authority) => Promise<unknown>, string]> = [
    ['function', (storage) => storage.set('a', (() => 1) as never), 'E_STORAGE_VALUE_NOT_JSON'],
    ['BigInt', (storage) => storage.set('a', 1n as never), 'E_STORAGE_VALUE_NOT_JSON'],
    ['cycle', (storage) => storage.set('a', cycle as never), 'E_STORAGE_VALUE_NOT_JSON'],
    ['undefined', (storage) => storage.set('a', undefined as never), 'E_STORAGE_VALUE_NOT_JSON'],
    ['257-character key', (storage) => storage.set('k'.repeat(257), 1), 'E_STORAGE_KEY_TOO_LONG'],
    ['value over 256 KiB', (storage) => storage.set('a', 'x'.repeat(MAX_VALUE_BYTES)), 'E_STORAGE_VALUE_TOO_LARGE'],
    ['empty key on delete', (storage) => storage.delete(''), 'E_STORAGE_KEY_INVALID'],
    ['non-string key on get', (storage) => storage.get(7 as never), 'E_STORAGE_KEY_INVALID'],
  ];
  const primaryMutations: unknown[] = [];
  const workerMutations: unknown[] = [];
  cluster.authority.on('mutation', (mutation) => primaryMutations.push(mutation));
  worker.replica.on('mutation', (mutation) => workerMutations.push(mutation));
  const sentBefore = worker.toPrimary.length;
  for (const [name, attempt, code] of attempts) {
    t.equal(await codeOf(attempt(worker.replica)), code, `worker: ${name}`);
    t.equal(await codeOf(attempt(cluster.authority)), code, `primary: ${name}`);
  }
  await flush();
  t.equal(worker.toPrimary.length, sentBefore, 'the worker sent nothing to the primary');
  t.equal(cluster.authority.revision, 0, 'no revision taken');
  t.equal(await cluster.authority.size(), 0);
  t.same(primaryMutations, []);
  t.same(workerMutations, []);
});

t.test('malformed writes from a worker never throw in the primary: each is answered with why, nothing is applied', async (t) => {
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker();
  const events = recordEvents(cluster.authority, ['a', 'k'.repeat(300)]);
  // Parameters of `primary.storage.write` as a worker's code could send them: refused by the protocol before the
  // storage sees them (rpc_refused), or by the storage's own key and value rules, with their codes.
  const garbage: Array<[unknown, string]> = [
    [null, 'rpc_refused'],
    ['set a 1', 'rpc_refused'],
    [42, 'rpc_refused'],
    [[1, 2], 'rpc_refused'],
    [{ op: 'explode' }, 'rpc_refused'],
    [{ op: 'set', key: 'a' }, 'rpc_refused'],
    [{ op: 'set', key: { toString: 'a' }, value: 1 }, 'rpc_refused'],
    [{ op: 'delete' }, 'rpc_refused'],
    [{ op: 'set', key: 'k'.repeat(300), value: 1 }, 'E_STORAGE_KEY_TOO_LONG'],
    [{ op: 'set', key: '', value: 1 }, 'E_STORAGE_KEY_INVALID'],
    [{ op: 'set', key: 'a', value: JSON.parse('{"__proto__":{"polluted":true}}') }, 'E_STORAGE_VALUE_NOT_JSON'],
    [{ op: 'set', key: 'a', value: 'x'.repeat(MAX_VALUE_BYTES) }, 'E_STORAGE_VALUE_TOO_LARGE'],
    [{ op: 'set', key: 'a', value: JSON.parse('['.repeat(5_000) + ']'.repeat(5_000)) }, 'E_STORAGE_VALUE_TOO_DEEP'],
  ];
  const repliesBefore = worker.toWorker.length;
  garbage.forEach(([params], index) => t.doesNotThrow(() => worker.callPrimary(1_000 + index, 'primary.storage.write', params)));
  await flush();
  const replies = worker.toWorker.slice(repliesBefore);
  t.same(
    replies.map((reply) => (reply.fp === 'reply' ? { id: reply.id, ok: reply.ok, code: reply.code } : reply)),
    garbage.map(([, code], index) => ({ id: 1_000 + index, ok: false, code })),
    'one error answer per request, with its code, and nothing else',
  );
  t.equal(cluster.authority.revision, 0, 'nothing applied');
  t.same(events, []);
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution');

  t.equal(await worker.replica.set('a', 'still works'), 1, 'the same worker is served normally afterwards');
});
