import t from 'tap';
import { isAlive, request } from '../helpers/server-process.js';
import { startStorageServer, type ProcessReport } from './storage-process.js';

interface Attempt {
  accepted: boolean;
  name?: string;
  code?: string;
  message?: string;
}

const INVALID: Array<[kind: string, code: string, message: RegExp]> = [
  ['function', 'E_STORAGE_VALUE_NOT_JSON', /at \$ is a function; values must be JSON/],
  ['bigint', 'E_STORAGE_VALUE_NOT_JSON', /at \$ is a BigInt/],
  ['cycle', 'E_STORAGE_VALUE_NOT_JSON', /at \$\.self refers to an object that contains it \(a cycle\)/],
  ['undefined', 'E_STORAGE_VALUE_NOT_JSON', /at \$ is undefined/],
  ['long-key', 'E_STORAGE_KEY_TOO_LONG', /257 characters long; the limit is 256/],
  ['oversize', 'E_STORAGE_VALUE_TOO_LARGE', /262146 bytes serialized; the limit is 262144/],
];

t.test('a worker writing non-JSON values, a 257-character key or a value over 256 KiB gets clear errors; nothing is stored, no process sees an event', async (t) => {
  const server = await startStorageServer(t, { workers: 2 });
  await server.readyWorkers(2);
  for (const [kind, code, message] of INVALID) {
    const attempt = await server.command<Attempt>('worker', { worker: 1, op: 'attemptInvalid', args: { kind } });
    t.match(attempt, { accepted: false, name: 'StorageError', code }, kind);
    t.match(attempt.message, message, `${kind}: the message says what is wrong`);
  }
  const reports = await server.command<ProcessReport[]>('report');
  t.equal(reports.length, 3);
  for (const report of reports) {
    t.equal(report.revision, 0, `${report.name}: no revision taken`);
    t.same(report.entries, [], `${report.name}: nothing stored`);
    t.same(report.events, [], `${report.name}: no event`);
  }
});

t.test('malformed storage writes from a worker are answered with errors or refused; the primary keeps serving', async (t) => {
  const server = await startStorageServer(t, { workers: 1 });
  const [ready] = await server.readyWorkers(1);
  const raw = (params: unknown, replyId?: number) => server.command<{ ok?: boolean; code?: string } | null>('worker', { worker: 1, op: 'sendRaw', args: { params, replyId } });

  const polluting = JSON.parse('{"__proto__": {"polluted": true}}');
  t.match(await raw({ op: 'set', key: 'k0', value: polluting }, 900_000_001), { ok: false, code: 'E_STORAGE_VALUE_NOT_JSON' });
  t.match(await raw({ op: 'set', key: 'k'.repeat(300), value: 1 }, 900_000_002), { ok: false, code: 'E_STORAGE_KEY_TOO_LONG' });
  t.match(await raw({ op: 'drop-table' }, 900_000_003), { ok: false, code: 'rpc_refused', error: /primary\.storage\.write: parameters refused/ });
  t.match(await raw({ op: 'set', key: 'k0' }, 900_000_004), { ok: false, code: 'rpc_refused' });
  // As notifications, which nobody answers: refused by the protocol, told in the primary's rate-limited line.
  for (const params of [null, 'set k0 1', 42, [], { op: 'set', key: 'k0' }]) await raw(params);

  const revision = await server.command<number>('worker', { worker: 1, op: 'set', args: { key: 'k1', value: 'after the garbage' } });
  t.equal(revision, 1, 'the same worker is served normally afterwards, and nothing else was applied');
  const reports = await server.command<ProcessReport[]>('report');
  for (const report of reports) t.same(report.events, [{ revision: 1, event: 'change:k1', value: 'after the garbage' }], `${report.name}: only the valid write`);
  t.ok(isAlive(server.child.pid!), 'the primary is alive');
  t.equal(server.count((event) => event.event === 'worker:crash'), 0, 'no process crashed');
  t.ok(isAlive(ready!.pid as number), 'the worker is alive');
});

t.test("single-process mode: the primary's storage serves the in-process app, and each event fires once", async (t) => {
  const server = await startStorageServer(t, { workers: 0 });
  t.equal(await server.command('primary', { op: 'set', args: { key: 'k1', value: { hello: 'world' } } }), 1);
  t.equal(await server.command('primary', { op: 'set', args: { key: 'k2', value: [1, 2] } }), 2);
  t.equal(await server.command('primary', { op: 'set', args: { key: 'k1', value: 'again' } }), 3);
  const reply = await request(server.port, '/storage/k1');
  t.same(reply.json(), { worker: 0, value: 'again' }, 'the app reads what the primary wrote');

  const attempt = await server.command<Attempt>('primary', { op: 'attemptInvalid', args: { kind: 'function' } });
  t.match(attempt, { accepted: false, code: 'E_STORAGE_VALUE_NOT_JSON' });

  const reports = await server.command<ProcessReport[]>('report');
  t.equal(reports.length, 1, 'one process');
  t.same(reports[0]!.events, [
    { revision: 1, event: 'change:k1', value: { hello: 'world' } },
    { revision: 2, event: 'change:k2', value: [1, 2] },
    { revision: 3, event: 'change:k1', value: 'again', oldValue: { hello: 'world' } },
  ]);
  t.same(reports[0]!.entries, [
    ['k1', 'again'],
    ['k2', [1, 2]],
  ]);
});
