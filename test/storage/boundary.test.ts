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

t.test('malformed messages from a worker never throw in the primary: answered when they carry an id, else ignored', async (t) => {
  const cluster = new FakeCluster();
  const worker = await cluster.addWorker();
  const events = recordEvents(cluster.authority, ['a', 'k'.repeat(300)]);
  const garbage: Array<[unknown, string | undefined]> = [
    [null, undefined],
    ['set a 1', undefined],
    [42, undefined],
    [[1, 2], undefined],
    [{ op: 'set', key: 'a', value: 1 }, undefined],
    [{ op: 'set', id: 'one', key: 'a', value: 1 }, undefined],
    [{ op: 'set', id: -3, key: 'a', value: 1 }, undefined],
    [{ op: 'explode', id: 11 }, 'E_STORAGE_BAD_MESSAGE'],
    [{ op: 'set', id: 12, key: 'a' }, 'E_STORAGE_BAD_MESSAGE'],
    [{ op: 'set', id: 13, key: { toString: 'a' }, value: 1 }, 'E_STORAGE_BAD_MESSAGE'],
    [{ op: 'delete', id: 14 }, 'E_STORAGE_BAD_MESSAGE'],
    [{ op: 'set', id: 15, key: 'k'.repeat(300), value: 1 }, 'E_STORAGE_KEY_TOO_LONG'],
    [{ op: 'set', id: 16, key: '', value: 1 }, 'E_STORAGE_KEY_INVALID'],
    [{ op: 'set', id: 17, key: 'a', value: JSON.parse('{"__proto__":{"polluted":true}}') }, 'E_STORAGE_VALUE_NOT_JSON'],
    [{ op: 'set', id: 18, key: 'a', value: 'x'.repeat(MAX_VALUE_BYTES) }, 'E_STORAGE_VALUE_TOO_LARGE'],
    [{ op: 'set', id: 19, key: 'a', value: JSON.parse('['.repeat(5_000) + ']'.repeat(5_000)) }, 'E_STORAGE_VALUE_TOO_DEEP'],
  ];
  const repliesBefore = worker.toWorker.length;
  for (const [payload] of garbage) t.doesNotThrow(() => cluster.receive(worker.endpoint, payload));
  await flush();
  const replies = worker.toWorker.slice(repliesBefore) as Array<{ id: number; ok: boolean; error?: { code: string } }>;
  const expected = garbage.filter(([, code]) => code).map(([payload, code]) => ({ id: (payload as { id: number }).id, ok: false, code }));
  t.same(
    replies.map((reply) => ({ id: reply.id, ok: reply.ok, code: reply.error?.code })),
    expected,
    'one error reply per request with a usable id, and nothing else',
  );
  t.equal(cluster.authority.revision, 0, 'nothing applied');
  t.same(events, []);
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution');
  t.ok(cluster.log.warnings.length >= 10, 'malformed messages are logged');

  t.equal(await worker.replica.set('a', 'still works'), 1, 'the same worker is served normally afterwards');
});
