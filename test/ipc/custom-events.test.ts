import t from 'tap';
import { PrimaryChannels, type WorkerEndpoint } from '../../src/runtime/channels.js';
import { RpcChannel, type PrimaryEnd, type WorkerEnd } from '../../src/runtime/rpc.js';
import { primaryMethodChecks, primaryResultChecks, workerMethodChecks, workerResultChecks } from '../../src/runtime/protocol.js';
import type { RpcCall, RpcReply } from '../../src/runtime/messages.js';
import { customEvents, isReservedEventName, serverEvents, type ServerEmitter } from '../../src/runtime/events.js';
import { IpcRouter } from '../../src/ipc/router.js';
import { IpcClient } from '../../src/ipc/client.js';
import { HandlerRegistry } from '../../src/ipc/handlers.js';
import type { DeliveredEnvelope } from '../../src/ipc/envelope.js';
import { createLogger } from '../../src/logging/logger.js';

const SERVER = 'server-1';
const MAX_BYTES = 64 * 1024;
const silent = createLogger({ level: 'silent' });

/**
 * A primary and `count` workers as the boot code wires them: each process has its own server emitter, and its
 * handler registry emits a method it has no handler for on that emitter. Channel ends are wired back to back,
 * every message cloned and delivered asynchronously, as the IPC channel would.
 */
function cluster(count: number) {
  const channels = new PrimaryChannels(silent);
  const emitters = new Map<number, ServerEmitter>([[0, serverEvents(silent)]]);
  const endpoints = new Map<number, WorkerEndpoint>();
  const primaryEnds: PrimaryEnd[] = [];
  for (let workerId = 1; workerId <= count; workerId++) {
    const across = (to: () => PrimaryEnd | WorkerEnd) => (message: RpcCall | RpcReply) => {
      const copy = structuredClone(message);
      setImmediate(() => void to().receive(copy));
    };
    const primaryEnd: PrimaryEnd = new RpcChannel(across(() => workerEnd), { methods: primaryMethodChecks, results: workerResultChecks });
    const workerEnd: WorkerEnd = new RpcChannel(across(() => primaryEnd), { methods: workerMethodChecks, results: primaryResultChecks });
    const endpoint: WorkerEndpoint = { workerId, pid: 1000 + workerId, connected: true, rpc: primaryEnd };
    const events = serverEvents(silent);
    emitters.set(workerId, events);
    new IpcClient({ rpc: workerEnd } as ConstructorParameters<typeof IpcClient>[0], new HandlerRegistry(customEvents(events)), MAX_BYTES);
    endpoints.set(workerId, endpoint);
    primaryEnds.push(primaryEnd);
    channels.connected(endpoint);
    channels.listening(endpoint);
  }
  const router = new IpcRouter({
    serverId: SERVER,
    cluster: 'cluster-1',
    handlers: new HandlerRegistry(customEvents(emitters.get(0)!)),
    log: silent,
    maxEnvelopeBytes: MAX_BYTES,
    view: () => ({ serverId: SERVER, cluster: 'cluster-1', workers: [...endpoints.keys()], serves: () => true }),
    endpointOf: (workerId) => endpoints.get(workerId),
    answerWorkers: () => undefined,
  });
  const events = (process: number) => emitters.get(process)!;
  return { router, events };
}

const delivered = (method: string, data?: unknown): DeliveredEnvelope => ({ method, master: true, data, meta: { id: 'm-1', origin: { server: SERVER, worker: 0 }, hops: 0 } });

t.test('a broadcast method with no handler reaches a listener in each worker as an event, once, and each worker replies ok', async (t) => {
  const { router, events } = cluster(2);
  const heard: Array<{ worker: number; data: unknown; envelope: DeliveredEnvelope }> = [];
  for (const worker of [1, 2]) events(worker).on('custom_worker_event', (data: unknown, envelope: DeliveredEnvelope) => heard.push({ worker, data, envelope }));
  let primaryHeard = 0;
  events(0).on('custom_worker_event', () => primaryHeard++);

  const result = await router.route({ method: 'custom_worker_event', broadcast: true, data: { status: 'ok' } }, { wantReplies: true, timeoutMs: 2_000 });
  t.same(
    result.replies.map((reply) => [reply.worker, reply.ok, reply.result]).sort(),
    [
      [1, true, { event: 'custom_worker_event', listeners: 1 }],
      [2, true, { event: 'custom_worker_event', listeners: 1 }],
    ],
  );
  t.same(result.missing, []);
  t.same(heard.map((entry) => [entry.worker, entry.data]).sort(), [
    [1, { status: 'ok' }],
    [2, { status: 'ok' }],
  ], 'each worker heard it once, with its data');
  t.equal(heard[0]!.envelope.meta.id, result.id, "the listener gets the envelope: the message id, the origin, the caller's fields");
  t.equal(heard[0]!.envelope.broadcast, true);
  t.equal(primaryHeard, 0, 'the primary was not a target');

  const scoped = await router.route({ method: 'custom_worker_event', organization_id: 'org-a', data: 1 }, { wantReplies: true, timeoutMs: 2_000 });
  t.equal(scoped.replies.length, 2);
  t.same(heard.slice(2).map((entry) => entry.envelope.organization_id), ['org-a', 'org-a'], "an organization's envelope reaches the listener with its organization_id");
});

t.test('with no listener (and no handler) the method answers unknown_method, as before; the primary is a target like the workers', async (t) => {
  const { router, events } = cluster(2);
  events(1).on('custom_worker_event', () => undefined);
  const result = await router.route({ method: 'custom_worker_event', broadcast: true, master: true }, { wantReplies: true, timeoutMs: 2_000 });
  const byWorker = new Map(result.replies.map((reply) => [reply.worker, reply]));
  t.match(byWorker.get(1), { ok: true, result: { event: 'custom_worker_event', listeners: 1 } });
  t.match(byWorker.get(2), { ok: false, error: { code: 'unknown_method', message: 'no handler for "custom_worker_event"' } });
  t.match(byWorker.get(0), { ok: false, error: { code: 'unknown_method' } });

  let primaryHeard: unknown;
  events(0).on('custom_worker_event', (data: unknown) => (primaryHeard = data));
  const master = await router.route({ method: 'custom_worker_event', master: true, data: 'hi' }, { wantReplies: true, timeoutMs: 2_000 });
  t.match(master.replies, [{ worker: 0, ok: true, result: { event: 'custom_worker_event', listeners: 1 } }]);
  t.equal(primaryHeard, 'hi');
});

t.test("a handler wins over a listener; the listener of a handled method is not called by the envelope", async (t) => {
  const events = serverEvents(silent);
  const handlers = new HandlerRegistry(customEvents(events));
  let listened = 0;
  events.on('cache.flush', () => listened++);
  handlers.handle('cache.flush', () => ({ flushed: true }));
  t.same(await handlers.run(delivered('cache.flush')), { ok: true, result: { flushed: true } });
  t.equal(listened, 0);
});

t.test("the server's own event names cannot be sent: a caller naming one gets unknown_method and no listener hears it", async (t) => {
  const events = serverEvents(silent);
  const handlers = new HandlerRegistry(customEvents(events));
  const spoofable = [
    'worker:ready', 'worker:exit', 'worker:crash', 'shutdown:start', 'shutdown:complete', 'restart:start', 'fleet:degraded',
    'circuit-breaker:tripped', 'organization.active', 'organization.inactive', 'status_change', 'autoscaler:action',
    'mesh:link', 'overview.event', 'worker:anything', 'organization.renamed', 'error', 'newListener', 'removeListener',
  ];
  const heard: string[] = [];
  for (const name of spoofable) events.on(name, () => heard.push(name));
  // Registering them fired `newListener` itself: only what the envelopes cause counts.
  heard.length = 0;
  for (const name of spoofable) {
    t.ok(isReservedEventName(name), `${name} is reserved`);
    t.match(await handlers.run(delivered(name, { workerId: 1, pid: 1 })), { ok: false, error: { code: 'unknown_method' } }, `${name}: unknown_method`);
  }
  t.same(heard, [], 'no listener of a server event was called');
  for (const name of ['custom_worker_event', 'cache.flush', 'mesh.custom_command', 'app:event', 'workers_report']) t.notOk(isReservedEventName(name), `${name} is a custom name`);
});

t.test('a subsystem that is off keeps its explanation even when something listens on its name', async (t) => {
  const events = serverEvents(silent);
  const handlers = new HandlerRegistry(customEvents(events));
  handlers.explainAbsent('autoscaler', { code: 'disabled', message: 'the autoscaler is off' });
  events.on('autoscaler.status', () => undefined);
  t.match(await handlers.run(delivered('autoscaler.status')), { ok: false, error: { code: 'disabled' } });
});

t.test("a listener that throws is logged, the other listeners still run, and the target still replies ok", async (t) => {
  const failures: string[] = [];
  const events = serverEvents({ error: (fields: { event: string }) => failures.push(fields.event) } as never);
  const handlers = new HandlerRegistry(customEvents(events));
  const calls: string[] = [];
  events.on('custom_worker_event', () => {
    throw new Error('listener bug');
  });
  events.on('custom_worker_event', () => calls.push('second'));
  t.same(await handlers.run(delivered('custom_worker_event')), { ok: true, result: { event: 'custom_worker_event', listeners: 2 } });
  t.same(calls, ['second']);
  t.same(failures, ['custom_worker_event']);
});
