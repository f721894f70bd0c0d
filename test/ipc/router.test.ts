import t from 'tap';
import { PrimaryChannels, type WorkerEndpoint } from '../../src/runtime/channels.js';
import { RpcChannel, type PrimaryEnd, type WorkerEnd } from '../../src/runtime/rpc.js';
import { primaryMethodChecks, primaryResultChecks, workerMethodChecks, workerResultChecks } from '../../src/runtime/protocol.js';
import type { RpcCall, RpcReply } from '../../src/runtime/messages.js';
import { IpcRouter } from '../../src/ipc/router.js';
import { IpcClient } from '../../src/ipc/client.js';
import { HandlerRegistry } from '../../src/ipc/handlers.js';
import { IpcError } from '../../src/ipc/envelope.js';
import { DELIVER, ROUTE_REQUEST, ROUTE_SEND } from '../../src/ipc/messages.js';
import { keptAlive, settle } from '../helpers/fake-clock.js';

const SERVER = 'server-1';
const MAX_BYTES = 64 * 1024;

/** A worker without a process: its end of the channel, its handlers and its IPC client, wired to the primary's end. */
interface FakeWorker {
  endpoint: WorkerEndpoint;
  /** The primary's end: requests to this worker, and where the worker's requests are answered. */
  primaryEnd: PrimaryEnd;
  workerEnd: WorkerEnd;
  handlers: HandlerRegistry;
  client: IpcClient;
  /** Switched off: what either side posts is lost, as with a worker that stopped reading. */
  wire: { deliver: boolean; sent: Array<RpcCall | RpcReply> };
}

/**
 * The primary's router and `count` workers, each pair of channel ends wired back to back as the IPC channel
 * would: every message cloned and delivered asynchronously, in order.
 */
function cluster(count: number) {
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const log = { warn: (fields: object, message: string) => warnings.push({ fields: fields as Record<string, unknown>, message }) };
  const channels = new PrimaryChannels(log);
  const answers = new Map<string, (params: unknown, from: WorkerEndpoint) => unknown>();
  const workers = new Map<number, FakeWorker>();
  for (let workerId = 1; workerId <= count; workerId++) {
    const wire = { deliver: true, sent: [] as Array<RpcCall | RpcReply> };
    const across = (to: () => PrimaryEnd | WorkerEnd) => (message: RpcCall | RpcReply) => {
      wire.sent.push(message);
      if (!wire.deliver) return;
      const copy = structuredClone(message);
      setImmediate(() => void to().receive(copy));
    };
    // As the spawner and the worker runtime build them: each end checks what arrives, both ways.
    const primaryEnd: PrimaryEnd = new RpcChannel(across(() => workerEnd), {
      methods: primaryMethodChecks,
      results: workerResultChecks,
      refused: (reason) => channels.refuse(endpoint, 'rpc', reason),
    });
    const workerEnd: WorkerEnd = new RpcChannel(across(() => primaryEnd), { methods: workerMethodChecks, results: primaryResultChecks });
    const endpoint: WorkerEndpoint = { workerId, pid: 1000 + workerId, connected: true, rpc: primaryEnd };
    const handlers = new HandlerRegistry();
    const client = new IpcClient({ rpc: workerEnd } as ConstructorParameters<typeof IpcClient>[0], handlers, MAX_BYTES);
    workers.set(workerId, { endpoint, primaryEnd, workerEnd, handlers, client, wire });
    channels.connected(endpoint);
    channels.listening(endpoint);
  }
  const router = new IpcRouter({
    serverId: SERVER,
    cluster: 'cluster-1',
    handlers: new HandlerRegistry(),
    log: { ...log, info: () => undefined, error: () => undefined, debug: () => undefined } as never,
    maxEnvelopeBytes: MAX_BYTES,
    view: () => ({ serverId: SERVER, cluster: 'cluster-1', workers: [...workers.keys()], serves: () => false }),
    endpointOf: (workerId) => workers.get(workerId)?.endpoint,
    answerWorkers: (method, handler) => {
      answers.set(method, handler);
      for (const worker of workers.values()) worker.primaryEnd.handle(method, (params) => handler(params, worker.endpoint));
    },
  });
  const worker = (workerId: number) => workers.get(workerId)!;
  return { router, worker, warnings, answers };
}

t.test('the router answers the routing requests of its workers, and delivers with one request method', async (t) => {
  const { answers } = cluster(1);
  t.same([...answers.keys()].sort(), [ROUTE_REQUEST, ROUTE_SEND].sort());
  t.ok(primaryMethodChecks.has(ROUTE_REQUEST) && primaryMethodChecks.has(ROUTE_SEND), 'both declared in the protocol');
  t.ok(workerMethodChecks.has(DELIVER));
});

t.test("a request gathers each targeted worker's reply; a worker's own request is routed by the primary with the worker as origin", async (t) => {
  const { router, worker } = cluster(2);
  for (const id of [1, 2]) worker(id).handlers.handle('who', (_data, envelope) => ({ worker: id, origin: envelope.meta.origin }));
  const all = await router.route({ method: 'who', broadcast: true }, { wantReplies: true });
  t.same(
    all.replies.map((reply) => [reply.server, reply.worker, reply.ok, (reply.result as { worker: number }).worker]),
    [
      [SERVER, 1, true, 1],
      [SERVER, 2, true, 2],
    ],
  );
  t.same(all.missing, []);
  const fromWorker = await worker(2).client.request({ method: 'who', worker: 1 });
  t.same(fromWorker.replies.map((reply) => reply.result), [{ worker: 1, origin: { server: SERVER, worker: 2 } }]);
});

t.test('a worker the server does not have is missing, and said so with the workers it has, to the primary and to a worker asking', async (t) => {
  const { router, worker } = cluster(2);
  for (const id of [1, 2]) worker(id).handlers.handle('who', () => ({ worker: id }));
  const expected = { missing: [{ server: SERVER, worker: 9 }], unknownWorkers: [{ server: SERVER, worker: 9, message: 'no such worker: 9 (this server has workers 1, 2)' }] };
  const here = await router.route({ method: 'who', worker: [1, 9] }, { wantReplies: true });
  t.match(here, { replies: [{ worker: 1, ok: true }], ...expected });
  const fromWorker = await worker(2).client.request({ method: 'who', worker: [1, 9] });
  t.match(fromWorker, { replies: [{ worker: 1, ok: true }], ...expected }, 'the reason crosses the channel to a worker');
  const known = await router.route({ method: 'who', worker: 1 }, { wantReplies: true });
  t.notOk('unknownWorkers' in known, 'absent when every named worker exists');
});

t.test("a handler's error is that target's reply, not a failure of the request", async (t) => {
  const { router, worker } = cluster(2);
  worker(1).handlers.handle('fails', () => {
    throw new IpcError('bad_request', 'data must be a number', 'data');
  });
  const result = await router.route({ method: 'fails', broadcast: true }, { wantReplies: true });
  t.same(
    result.replies.map((reply) => [reply.worker, reply.ok, reply.error?.code]),
    [
      [1, false, 'bad_request'],
      [2, false, 'unknown_method'],
    ],
  );
});

t.test('a worker that does not answer in time, or exits first, is missing; the others answer', async (t) => {
  const { router, worker } = cluster(3);
  for (const id of [1, 2, 3]) worker(id).handlers.handle('ping', () => 'pong');
  worker(2).wire.deliver = false;
  const late = await keptAlive(router.route({ method: 'ping', broadcast: true, timeoutMs: 50 }, { wantReplies: true }));
  t.same(late.replies.map((reply) => reply.worker), [1, 3]);
  t.same(late.missing, [{ server: SERVER, worker: 2 }]);

  // Worker 3 exits with the request on its way: missing at once, whatever the budget left.
  worker(3).wire.deliver = false;
  const pending = router.route({ method: 'ping', broadcast: true, timeoutMs: 120_000 }, { wantReplies: true });
  await settle();
  worker(2).primaryEnd.closeAll('worker 2 exited');
  worker(3).primaryEnd.closeAll('worker 3 exited');
  const exited = await pending;
  t.same(exited.replies.map((reply) => reply.worker), [1]);
  t.same(exited.missing, [
    { server: SERVER, worker: 2 },
    { server: SERVER, worker: 3 },
  ]);
});

t.test("a worker's malformed answer to a delivery is refused with one rate-limited line, and that worker counts as missing", async (t) => {
  const { router, worker, warnings } = cluster(2);
  worker(1).handlers.handle('ping', () => 'pong');
  // Worker 2's code answers deliveries itself, wrongly.
  worker(2).workerEnd.handle(DELIVER, () => ({ ok: 'yes', error: 42 }));
  for (let round = 0; round < 20; round++) {
    const result = await router.route({ method: 'ping', broadcast: true }, { wantReplies: true });
    t.same(result.replies.map((reply) => reply.worker), [1]);
    t.same(result.missing, [{ server: SERVER, worker: 2 }]);
  }
  const refusals = warnings.filter((warning) => warning.message === 'refused a malformed message from a worker');
  t.equal(refusals.length, 5, 'at most five lines a minute');
  t.match(refusals[0].fields, { targetWorker: 2, where: 'rpc', reason: /^worker\.ipc\.deliver: malformed answer: \/ok/ });
});

t.test("a routing error reaches the worker's caller with its code; a primary that never answers is unavailable", async (t) => {
  const { worker } = cluster(1);
  // No target: valid as an envelope (the client checks that), refused by the router's targeting.
  const refused = await worker(1).client.request({ method: 'ping' }).catch((error: unknown) => error);
  t.ok(refused instanceof IpcError);
  t.match(refused, { code: 'no_target', statusCode: 400 });

  // Invalid envelopes never leave the worker.
  const sentBefore = worker(1).wire.sent.length;
  t.throws(() => worker(1).client.request({ method: '' }), { code: 'invalid_envelope' });
  t.equal(worker(1).wire.sent.length, sentBefore);

  worker(1).wire.deliver = false;
  const silent = await keptAlive(worker(1).client.request({ method: 'ping', broadcast: true }, 1).catch((error: unknown) => error));
  t.match(silent, { code: 'unavailable', message: 'the primary did not answer' });
});

t.test("a worker's send is delivered without any reply crossing back", async (t) => {
  const { worker } = cluster(2);
  const heard: unknown[] = [];
  worker(1).handlers.handle('note', (data, envelope) => heard.push({ data, origin: envelope.meta.origin }));
  await worker(2).client.send({ method: 'note', worker: 1, data: { n: 1 } });
  while (heard.length === 0) await settle();
  t.same(heard, [{ data: { n: 1 }, origin: { server: SERVER, worker: 2 } }]);
  await settle();
  t.same(
    worker(1).wire.sent.filter((message) => message.fp === 'reply'),
    [],
    'worker 1 answered nothing',
  );
  t.same(
    worker(2).wire.sent.map((message) => [message.fp, message.id]),
    [['rpc', 0]],
    "worker 2's notification is never answered",
  );
});

t.test('a worker that sends a routing request with the wrong parameters is answered with the reason and routes nothing', async (t) => {
  const { worker } = cluster(1);
  let ran = 0;
  worker(1).handlers.handle('ping', () => ++ran);
  // A worker's code can send any shape: the protocol's types do not hold at the other end.
  const reply = await worker(1).workerEnd.call(ROUTE_REQUEST, { envelope: { method: 'ping', worker: 1 }, timeoutMs: 'soon' as never }).catch((error: unknown) => error);
  t.match(reply, { message: /primary\.ipc\.request: parameters refused: \/timeoutMs/ });
  t.equal(ran, 0);
});
