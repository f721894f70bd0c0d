import t from 'tap';
import { FakeClock, keptAlive, settle } from '../helpers/fake-clock.js';
import { Type } from '@sinclair/typebox';
import { RpcChannel, RpcRemoteError } from '../../src/runtime/rpc.js';
import { lazyCheck } from '../../src/schema/lazy-check.js';
import { IpcError } from '../../src/ipc/envelope.js';
import type { RpcCall, RpcReply } from '../../src/runtime/messages.js';

/**
 * Two channels wired back to back like the two ends of an IPC channel: every message is cloned (as the
 * serialization would) and delivered asynchronously. `deliver` can be switched off to lose messages.
 */
function pair() {
  const wire = { deliver: true, sent: [] as Array<RpcCall | RpcReply> };
  const send = (to: () => RpcChannel) => (message: RpcCall | RpcReply) => {
    wire.sent.push(message);
    if (!wire.deliver) return;
    const copy = structuredClone(message);
    setImmediate(() => void to().receive(copy));
  };
  const primary: RpcChannel = new RpcChannel(send(() => worker));
  const worker: RpcChannel = new RpcChannel(send(() => primary));
  return { primary, worker, wire };
}

t.test('a call reaches the handler on the other side and resolves with its result', async (t) => {
  const { primary, worker } = pair();
  worker.handle('sum', (params) => (params as number[]).reduce((total, value) => total + value, 0));
  t.equal(await primary.call('sum', [1, 2, 3]), 6);
});

t.test('async handlers and calls in both directions work on the same pair', async (t) => {
  const { primary, worker } = pair();
  worker.handle('echo', async (params) => {
    await settle();
    return { echoed: params };
  });
  primary.handle('status', () => 'ready');
  const [echo, status] = await Promise.all([primary.call('echo', { a: 1 }), worker.call('status')]);
  t.same(echo, { echoed: { a: 1 } });
  t.equal(status, 'ready');
});

t.test('concurrent calls are matched to their own replies', async (t) => {
  const { primary, worker } = pair();
  worker.handle('double', async (params) => {
    // The first call answers last: replies come back out of order.
    for (let i = 0; i < 10 - (params as number); i++) await settle();
    return (params as number) * 2;
  });
  const results = await Promise.all([1, 2, 3, 4].map((value) => primary.call('double', value)));
  t.same(results, [2, 4, 6, 8]);
});

t.test('an unknown method answers with an error reply naming the method', async (t) => {
  const { primary, wire } = pair();
  await t.rejects(primary.call('nope'), { message: 'unknown method "nope"' });
  t.match(wire.sent.at(-1), { fp: 'reply', ok: false, error: 'unknown method "nope"', code: 'rpc_refused' });
});

t.test('a throwing handler answers with an error reply carrying its message', async (t) => {
  const { primary, worker } = pair();
  worker.handle('explode', () => {
    throw new Error('handler failed');
  });
  worker.handle('reject', async () => {
    throw new Error('async handler failed');
  });
  await t.rejects(primary.call('explode'), { message: 'handler failed' });
  await t.rejects(primary.call('reject'), { message: 'async handler failed' });
});

t.test('a handler failing with a non-Error value still answers with an error reply', async (t) => {
  const { primary, worker } = pair();
  worker.handle('throws-string', () => {
    throw 'plain string';
  });
  worker.handle('rejects-empty', () => Promise.reject(undefined));
  await t.rejects(primary.call('throws-string', undefined, 1_000), { message: 'plain string' });
  await t.rejects(primary.call('rejects-empty', undefined, 1_000), { message: /.+/ });
});

t.test('a call without a reply rejects with a timeout naming the method', async (t) => {
  const { primary, wire } = pair();
  wire.deliver = false;
  await t.rejects(keptAlive(primary.call('slowMethod', undefined, 10)), { message: /^slowMethod: no reply within 10 ms$/, code: 'rpc_timeout', name: 'RpcUnanswered' });
});

t.test("a call's answer is timed by the channel's clock: not a millisecond before its time, and no timer left", async (t) => {
  const clock = new FakeClock();
  const posted: unknown[] = [];
  const channel = new RpcChannel((message) => void posted.push(message), { clock });
  let settled: unknown;
  const call = channel.call('slow', undefined, 1_000).catch((error: unknown) => (settled = error));
  clock.advance(999);
  await Promise.resolve();
  t.equal(settled, undefined, 'still waiting 1 ms before the timeout');
  clock.advance(1);
  await call;
  t.match(settled, { name: 'RpcUnanswered', code: 'rpc_timeout', message: 'slow: no reply within 1000 ms' });
  const answered = channel.call('quick', undefined, 1_000);
  await channel.receive({ fp: 'reply', id: (posted.at(-1) as RpcCall).id, ok: true, result: 7 });
  t.equal(await answered, 7);
  t.equal(clock.pending, 0, 'no timer left behind');
});

t.test('a reply arriving after the timeout is ignored and later calls still match their replies', async (t) => {
  const { primary, worker, wire } = pair();
  worker.handle('late', () => 'fresh');
  wire.deliver = false;
  await t.rejects(keptAlive(primary.call('late', undefined, 10)), { message: /^late: no reply/ });
  const stale = wire.sent[0] as RpcCall;
  await primary.receive({ fp: 'reply', id: stale.id, ok: true, result: 'too late' });
  wire.deliver = true;
  t.equal(await primary.call('late'), 'fresh', 'the next call gets its own reply, not the stale one');
});

t.test('closeAll rejects every pending call with the reason', async (t) => {
  const { primary, wire } = pair();
  wire.deliver = false;
  const first = primary.call('a');
  const second = primary.call('b');
  primary.closeAll('worker 2 exited');
  await t.rejects(first, { message: 'worker 2 exited', code: 'rpc_closed' });
  await t.rejects(second, { message: 'worker 2 exited', code: 'rpc_closed' });
});

t.test('a channel that cannot post rejects the call at once', async (t) => {
  const channel = new RpcChannel(() => {
    throw new Error('ERR_IPC_CHANNEL_CLOSED');
  });
  await t.rejects(channel.call('ping'), { message: 'ping: channel closed', code: 'rpc_closed', cause: { message: 'ERR_IPC_CHANNEL_CLOSED' } });
});

t.test('a reply that cannot be posted back is dropped without failing the receiver', async (t) => {
  const calls: unknown[] = [];
  const channel = new RpcChannel(() => {
    throw new Error('ERR_IPC_CHANNEL_CLOSED');
  });
  channel.handle('ping', (params) => {
    calls.push(params);
    return 'pong';
  });
  await t.resolves(channel.receive({ fp: 'rpc', id: 1, method: 'ping', params: 'hello' }));
  t.same(calls, ['hello'], 'the handler ran');
});

t.test('a notification runs its handler and is never answered, even when the handler fails', async (t) => {
  const { primary, worker, wire } = pair();
  const heard: unknown[] = [];
  worker.handle('told', (params) => {
    heard.push(params);
    if ((params as { fail?: boolean }).fail) throw new Error('handler failed');
    return 'ignored';
  });
  primary.notify('told', { n: 1 });
  primary.notify('told', { n: 2, fail: true });
  while (heard.length < 2) await settle();
  await settle();
  t.same(heard, [{ n: 1 }, { n: 2, fail: true }]);
  t.same(
    wire.sent.map((message) => message.fp),
    ['rpc', 'rpc'],
    'no reply crossed the wire',
  );
});

t.test('a notification the other side refuses (unknown method, parameters) is told to its refusal callback, not answered', async (t) => {
  const refused: string[] = [];
  const posted: Array<RpcCall | RpcReply> = [];
  const methods = new Map([['count', lazyCheck(Type.Object({ n: Type.Integer() }))]]);
  const channel = new RpcChannel((message) => posted.push(message), { methods, refused: (reason) => refused.push(reason) });
  let handled = 0;
  channel.handle('count', () => ++handled);
  await channel.receive({ fp: 'rpc', id: 0, method: 'count', params: { n: 'one' } });
  await channel.receive({ fp: 'rpc', id: 0, method: 'nobody' });
  await channel.receive({ fp: 'rpc', id: 0, method: 'count', params: { n: 1 } });
  t.equal(handled, 1, 'only the well-formed notification ran');
  t.match(refused, [/count: parameters refused: \/n/, /unknown method "nobody"/]);
  t.same(posted, [], 'nothing was answered');
  // A request refused the same way is answered with the reason, not told to the callback.
  await channel.receive({ fp: 'rpc', id: 7, method: 'count', params: { n: 'one' } });
  t.match(posted, [{ fp: 'reply', id: 7, ok: false, error: /parameters refused/ }]);
  t.equal(refused.length, 2);
});

t.test("a handler's error code and field reach the caller", async (t) => {
  const { primary, worker } = pair();
  worker.handle('coded', () => {
    throw new IpcError('bad_request', 'data must be a list', 'data');
  });
  worker.handle('plain', () => {
    throw new Error('no code here');
  });
  const coded = await primary.call('coded').catch((error: unknown) => error);
  t.ok(coded instanceof RpcRemoteError);
  t.match(coded, { message: 'data must be a list', code: 'bad_request', field: 'data' });
  const plain = await primary.call('plain').catch((error: unknown) => error);
  t.match(plain, { message: 'no code here', code: undefined, field: undefined });
});
