import { Socket } from 'node:net';
import { Writable } from 'node:stream';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/logging/logger.js';
import { serverEvents } from '../../src/runtime/events.js';
import { WorkerRuntime } from '../../src/runtime/worker.js';
import { PrimaryChannels, type WorkerEndpoint } from '../../src/runtime/channels.js';
import type { RpcCall, RpcReply } from '../../src/runtime/messages.js';
import { PRIMARY_METHODS, primaryMethodChecks, primaryResultChecks, refuseFromPrimary, refuseFromWorker, WORKER_METHODS, workerMethodChecks, workerResultChecks } from '../../src/runtime/protocol.js';
import { RpcChannel } from '../../src/runtime/rpc.js';

t.test('every message a worker sends is checked by its kind: well-formed ones pass, any other shape is refused with why', async (t) => {
  const good = [
    { fp: 'boot' },
    { fp: 'ready' },
    { fp: 'taken', id: 3 },
    { fp: 'status', status: 'draining' },
    { fp: 'health', rss: 1_000, heapUsed: 500, lagMs: 0 },
    { fp: 'ack' },
    { fp: 'ack', signal: 'SIGTERM' },
    { fp: 'listening' },
    { fp: 'rpc', id: 1, method: 'primary.health' },
    { fp: 'reply', id: 1, ok: false, error: 'no' },
  ];
  for (const message of good) t.equal(refuseFromWorker(message), undefined, JSON.stringify(message));
  const bad: Array<[object, RegExp]> = [
    [{ fp: 'nonsense' }, /unknown kind "nonsense"/],
    [{ fp: 'x'.repeat(10_000) }, /^unknown kind "x{32}"$/],
    [{ fp: 'conn', secure: true, id: 1 }, /unknown kind "conn"/],
    [{ fp: 'status', status: 'bogus' }, /"status" \/status/],
    [{ fp: 'status' }, /"status"/],
    [{ fp: 'health', rss: -1, heapUsed: 1, lagMs: 1 }, /\/rss/],
    [{ fp: 'health', rss: 'big', heapUsed: 1, lagMs: 1 }, /\/rss/],
    [{ fp: 'taken', id: 'one' }, /\/id/],
    [{ fp: 'taken', id: 1.5 }, /\/id/],
    [{ fp: 'ack', signal: 12 }, /\/signal/],
    [{ fp: 'ch', channel: 'storage', payload: 1 }, /unknown kind "ch"/],
    [{ fp: 'rpc', id: 1 }, /\/method/],
    [{ fp: 'rpc', id: -1, method: 'primary.health' }, /\/id/],
    [{ fp: 'reply', id: 1, ok: 'yes' }, /\/ok/],
  ];
  for (const [message, why] of bad) t.match(refuseFromWorker(message as { fp: string }), why, JSON.stringify(message).slice(0, 80));
});

t.test('every message the primary sends is checked by its kind too', async (t) => {
  for (const message of [{ fp: 'conn', secure: false, id: 0 }, { fp: 'shutdown', reason: 'SIGTERM' }, { fp: 'fleet', ready: true }, { fp: 'boot', config: {}, manager: {} }]) {
    t.equal(refuseFromPrimary(message), undefined, JSON.stringify(message));
  }
  for (const message of [{ fp: 'conn', secure: 'yes', id: 0 }, { fp: 'shutdown' }, { fp: 'fleet', ready: 1 }, { fp: 'boot' }, { fp: 'health', rss: 1, heapUsed: 1, lagMs: 1 }]) {
    t.type(refuseFromPrimary(message), 'string', JSON.stringify(message));
  }
});

/** Two channels back to back, as the two ends of a worker's IPC channel, each with the methods its side declares. */
function pair() {
  const link = (to: () => RpcChannel) => (message: RpcCall | RpcReply) => setImmediate(() => void to().receive(structuredClone(message)));
  const primary: RpcChannel = new RpcChannel(link(() => worker), { methods: primaryMethodChecks });
  const worker: RpcChannel = new RpcChannel(link(() => primary), { methods: workerMethodChecks });
  return { primary, worker };
}

t.test("a request whose parameters its method's declaration refuses is answered with why, and its handler never runs", async (t) => {
  const { primary, worker } = pair();
  const calls: unknown[] = [];
  primary.handle('primary.workerState', (params) => {
    calls.push(params);
    return 'applied';
  });
  primary.handle('primary.shed', (params) => calls.push(params));
  t.equal(await worker.call('primary.workerState', { action: 'drain', value: true }), 'applied');
  await t.rejects(worker.call('primary.workerState', { action: 'explode', value: true }), /primary\.workerState: parameters refused: \/action/);
  await t.rejects(worker.call('primary.workerState', { action: 'cordon', value: 'yes' }), /parameters refused: \/value/);
  await t.rejects(worker.call('primary.shed', { organizations: 'all' }), /primary\.shed: parameters refused: \/organizations/);
  await t.rejects(worker.call('primary.shed'), /parameters refused/);
  await t.rejects(worker.call('primary.nothing', {}), /unknown method "primary\.nothing"/);
  t.same(calls, [{ action: 'drain', value: true }], 'only the well-formed request reached a handler');
  primary.handle('primary.health', () => 'healthy');
  t.equal(await worker.call('primary.health'), 'healthy', 'a method without parameters takes none');
  t.equal(await worker.call('primary.health', null), 'healthy', 'or null');
});

t.test('only declared methods can be handled: the method map is the protocol', async (t) => {
  const { primary, worker } = pair();
  t.throws(() => primary.handle('primary.madeUp', () => 1), /RPC method "primary\.madeUp" is not declared in the protocol/);
  t.throws(() => worker.handle('primary.health', () => 1), /not declared/, "a worker does not answer the primary's methods");
  for (const method of Object.keys(PRIMARY_METHODS)) t.doesNotThrow(() => primary.handle(method, () => null), method);
  for (const method of Object.keys(WORKER_METHODS)) t.doesNotThrow(() => worker.handle(method, () => null), method);
});

t.test('refused messages from workers are told in at most five lines a minute; a worker that does not listen is notified nothing', async (t) => {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const channels = new PrimaryChannels({ warn: (fields, message) => void lines.push({ fields: fields as Record<string, unknown>, message }) });
  const notified: unknown[] = [];
  const rpc = new RpcChannel((message) => void notified.push(message));
  const endpoint: WorkerEndpoint = { workerId: 2, pid: 1234, connected: true, rpc };
  const inProcess: WorkerEndpoint = { workerId: 0, pid: process.pid, connected: true, inProcess: true, rpc: new RpcChannel(() => t.fail('the in-process worker is notified nothing')) };
  channels.connected(endpoint);
  t.equal(channels.notify(endpoint, 'worker.shed', { organizations: [] }), false, 'not yet listening: nothing sent');
  channels.broadcast('worker.organization', { kind: 'active', organization_id: 'o' });
  t.same(notified, []);
  channels.listening(endpoint);
  channels.connected(inProcess);
  channels.listening(inProcess);
  t.same(channels.endpoints(), [endpoint, inProcess]);
  channels.broadcast('worker.organization', { kind: 'active', organization_id: 'o' });
  t.match(notified, [{ fp: 'rpc', id: 0, method: 'worker.organization', params: { kind: 'active', organization_id: 'o' } }], "a broadcast reaches the listening worker process, not the primary's own runtime");
  for (let i = 0; i < 50; i++) channels.refuse(endpoint, 'rpc', `unknown method "nobody-${i}"`);
  t.equal(lines.length, 5, 'five lines, the rest counted');
  t.match(lines[0], { fields: { targetWorker: 2, pid: 1234, where: 'rpc', reason: 'unknown method "nobody-0"' }, message: 'refused a malformed message from a worker' });
  channels.disconnected(endpoint);
  t.equal(channels.notify(endpoint, 'worker.shed', { organizations: [] }), false, 'gone: nothing sent');
});

t.test('a worker refuses a malformed message from its primary: one line, nothing applied, a connection that came with it closed', async (t) => {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const log = createLogger({ level: 'info', destination });
  const posted: unknown[] = [];
  const runtime = new WorkerRuntime(loadConfig({ env: {}, object: {} }).config, 1, log, serverEvents(log), (message) => void posted.push(message));
  const socket = new Socket();
  runtime.receive({ fp: 'conn', secure: 'yes', id: 7 }, socket);
  runtime.receive({ fp: 'shutdown', reason: 42 });
  runtime.receive({ fp: 'fleet', ready: 'no' });
  runtime.receive({ fp: 'made-up' });
  runtime.receive({ no: 'fp' });
  await new Promise((resolve) => setImmediate(resolve));
  t.ok(socket.destroyed, 'the connection handed with a malformed message is closed');
  t.same(posted, [], 'nothing confirmed or answered: no taken, no ack');
  t.equal(runtime.status, 'starting', 'no shutdown started');
  const refused = lines.filter((line) => line.msg === 'refused a malformed message from the primary');
  t.equal(refused.length, 4, 'one line per malformed message (a message without fp is not the protocol’s)');
  t.match(refused[0], { level: 40, reason: /"conn" \/secure/ });
});

t.test("an answer is checked against its method's declaration before its caller reads it: a malformed one fails the call and is told once", async (t) => {
  const refused: string[] = [];
  const link = (to: () => RpcChannel) => (message: RpcCall | RpcReply) => setImmediate(() => void to().receive(structuredClone(message)));
  const primary: RpcChannel = new RpcChannel(link(() => worker), { methods: primaryMethodChecks, results: workerResultChecks, refused: (reason) => refused.push(reason) });
  const worker: RpcChannel = new RpcChannel(link(() => primary), { methods: workerMethodChecks, results: primaryResultChecks });
  // A worker's code answering its primary's requests with what their declarations do not allow.
  worker.handle('worker.status', () => ({ worker: 1, pid: 'one', status: 'ready' }));
  worker.handle('worker.drain', () => ({ status: 'exploded', remaining: 0 }));
  worker.handle('worker.cordon', () => 'cordoned');
  await t.rejects(primary.call('worker.status'), { name: 'RpcUnanswered', code: 'rpc_malformed', message: /^worker\.status: malformed answer: \/pid/ });
  await t.rejects(primary.call('worker.drain', { value: true }), { code: 'rpc_malformed', message: /\/status/ });
  t.equal(await primary.call('worker.cordon', { value: true }), 'cordoned', 'a well-formed answer passes');
  t.match(refused, [/^worker\.status: malformed answer/, /^worker\.drain: malformed answer/]);

  primary.handle('primary.storage.write', () => ({ revision: -1, result: true }));
  await t.rejects(worker.call('primary.storage.write', { op: 'clear' }), { code: 'rpc_malformed', message: /primary\.storage\.write: malformed answer: \/revision/ }, 'the worker checks the primary’s answers too');
});

t.test("every answer a worker runtime gives its primary passes the check its method declares", async (t) => {
  const refused: string[] = [];
  // The channel's serialization (JSON), as a forked worker's.
  const wire = <T>(message: T): T => JSON.parse(JSON.stringify(message)) as T;
  const primary: RpcChannel = new RpcChannel((message) => setImmediate(() => runtime.receive(wire(message))), { results: workerResultChecks, refused: (reason) => refused.push(reason) });
  const log = createLogger({ level: 'silent' });
  const runtime = new WorkerRuntime(loadConfig({ env: {}, object: {} }).config, 1, log, serverEvents(log), (message) => {
    if (message.fp === 'reply' || message.fp === 'rpc') setImmediate(() => void primary.receive(wire(message)));
  });
  t.match(await primary.call('worker.status'), { worker: 1, pid: process.pid, status: 'starting' });
  const metrics = (await primary.call('worker.metrics')) as Array<{ name: string }>;
  t.ok(metrics.some((metric) => metric.name === 'fleetplane_process_cpu_user_seconds_total'), 'the process metrics');
  t.equal(await primary.call('worker.cordon', { value: false }), 'starting');
  t.match(await primary.call('worker.drain', { value: false }), { status: 'starting', remaining: 0 });
  t.same(refused, [], 'nothing refused');
});
