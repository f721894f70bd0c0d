import t from 'tap';
import { ServerProcess, request } from '../helpers/server-process.js';
import { scaled } from '../helpers/wait.js';

interface Reply { server: string; worker: number; ok: boolean; result?: any; error?: { code: string; message: string } }
interface Result { id: string; replies: Reply[]; missing: Array<{ server: string; worker?: number }> }

/** Asks every process how many times it received message `id`. */
async function deliveries(server: ServerProcess, id: string): Promise<Map<string, number>> {
  const counts = await server.command<Result>('request', { envelope: { method: 'probe.count', master: true, broadcast: true, data: { id } } });
  return new Map(counts.replies.map((reply) => [reply.result.primary ? 'primary' : `worker ${reply.result.worker}`, reply.result.count]));
}

let shared: Promise<ServerProcess> | undefined;
/** One two-worker server for the tests that leave its workers as they found them. */
function sharedServer(): Promise<ServerProcess> {
  shared ??= ServerProcess.start({ workers: 2 }).then(async (server) => {
    await server.readyWorkers(2);
    return server;
  });
  return shared;
}
t.teardown(async () => (await shared)?.stop());

t.test('targeting matrix across real processes: each envelope reaches exactly the intended processes, once', async (t) => {
  const server = await ServerProcess.start({ workers: 3 });
  t.teardown(() => server.stop());
  await server.readyWorkers(3);
  const cases: Array<[string, Record<string, unknown>, string[]]> = [
    ['one worker', { worker: 2 }, ['worker 2']],
    ['several workers', { worker: [1, 3] }, ['worker 1', 'worker 3']],
    ['broadcast', { broadcast: true }, ['worker 1', 'worker 2', 'worker 3']],
    ['master', { master: true }, ['primary']],
    ['this server by id', { server: 'SELF' }, ['primary']],
    ['explicit worker beats broadcast', { worker: 3, broadcast: true }, ['worker 3']],
  ];
  for (const [name, target, expected] of cases) {
    const envelope = { method: 'probe', ...target, ...(target.server ? { server: server.events[0]!.id } : {}) };
    const result = await server.command<Result>('request', { envelope });
    t.same(result.replies.map((reply) => (reply.result.primary ? 'primary' : `worker ${reply.result.worker}`)).sort(), expected, `${name}: replies`);
    t.same(result.missing, [], `${name}: nobody missing`);
    const counts = await deliveries(server, result.id);
    for (const [process, count] of counts) t.equal(count, expected.includes(process) ? 1 : 0, `${name}: ${process} received it ${expected.includes(process) ? 'once' : 'never'}`);
  }
  await t.rejects(server.command('request', { envelope: { method: 'probe' } }), /names no target/, 'no target → error');
});

t.test('a worker can address other processes; the sender is in the metadata and not echoed', async (t) => {
  const server = await sharedServer();
  const reply = await request(server.port, '/fixture/request', { body: { envelope: { method: 'probe', broadcast: true, master: true } } });
  t.equal(reply.status, 200);
  const sender = reply.json().from as number;
  const result = reply.json().result as Result;
  t.equal(result.replies.length, 3, 'both workers and the primary');
  for (const entry of result.replies) t.same(entry.result.origin, { server: server.events[0]!.id, worker: sender }, 'origin names the sending worker');
  const counts = await deliveries(server, result.id);
  t.same([...counts.values()], [1, 1, 1], 'each exactly once');

  const invalid = await request(server.port, '/fixture/request', { body: { envelope: { method: 'probe', worker: 'x' } } });
  t.equal(invalid.status, 400);
  t.match(invalid.json().error.message, /^worker: expected a worker number/);
});

t.test('request(): a handler that throws answers an error and the process lives; unknown methods answer, never hang', async (t) => {
  const server = await sharedServer();
  const exploded = await server.command<Result>('request', { envelope: { method: 'explode', broadcast: true } });
  t.equal(exploded.replies.length, 2);
  for (const reply of exploded.replies) t.match(reply, { ok: false, error: { code: 'handler_failed', message: 'handler exploded on purpose' } });
  const unknown = await server.command<Result>('request', { envelope: { method: 'no.such.method', worker: 1, master: true } });
  for (const reply of unknown.replies) t.match(reply, { ok: false, error: { code: 'unknown_method' } });
  const status = await server.command<Result>('request', { envelope: { method: 'status', broadcast: true } });
  t.equal(status.replies.filter((reply) => reply.ok && reply.result.status === 'ready').length, 2, 'both workers still alive and ready');
  t.equal(server.count((event) => event.event === 'worker:crash'), 0);
});

t.test("the design's custom worker event: a broadcast method with no handler reaches a listener in each worker, and unknown_method is only where nothing listens", async (t) => {
  const server = await sharedServer();
  const result = await server.command<Result>('request', { envelope: { method: 'custom_worker_event', broadcast: true, data: { status: 'ok' } } });
  t.same(
    result.replies.map((reply) => [reply.worker, reply.ok, reply.result]).sort(),
    [
      [1, true, { event: 'custom_worker_event', listeners: 1 }],
      [2, true, { event: 'custom_worker_event', listeners: 1 }],
    ],
    'each worker replies ok: one listener heard it',
  );
  t.same(result.missing, []);
  const heard = await server.command<Result>('request', { envelope: { method: 'fixture.custom', broadcast: true, master: true } });
  t.equal(heard.replies.length, 3);
  for (const reply of heard.replies) {
    const events = (reply.result.heard as Array<{ id: string; data: unknown }>).filter((event) => event.id === result.id);
    if (reply.result.primary) t.same(events, [], 'the primary was not a target and heard nothing');
    else t.same(events, [{ id: result.id, data: { status: 'ok' }, organization_id: null }], `worker ${reply.result.worker} heard it once, with its data`);
  }

  const nobody = await server.command<Result>('request', { envelope: { method: 'nobody_listens', broadcast: true } });
  t.equal(nobody.replies.length, 2);
  for (const reply of nobody.replies) t.match(reply, { ok: false, error: { code: 'unknown_method', message: 'no handler for "nobody_listens"' } }, `worker ${reply.worker}: no listener, unknown_method`);

  // The primary listens to worker:crash (it reports it on stdout): an envelope naming it must not be believed.
  const spoofed = await server.command<Result>('request', { envelope: { method: 'worker:crash', master: true, broadcast: true, data: { workerId: 1, pid: 1, code: 1, signal: null, bootFailure: false } } });
  t.equal(spoofed.replies.length, 3);
  for (const reply of spoofed.replies) t.match(reply, { ok: false, error: { code: 'unknown_method' } }, `process ${reply.worker}: a server event's name is refused`);
  t.equal(server.count((event) => event.event === 'worker:crash'), 0, 'no worker:crash was emitted');
  t.equal(server.count((event) => event.event === 'shutdown:start'), 0);
});

t.test('request(): a target killed mid-request is reported missing; the others reply', async (t) => {
  const server = await ServerProcess.start({ workers: 2 });
  t.teardown(() => server.stop());
  const ready = await server.readyWorkers(2);
  const mark = server.events.length;
  const pending = server.command<Result>('request', { envelope: { method: 'sleep', broadcast: true, data: scaled(800) }, timeoutMs: scaled(3_000) });
  // Both workers hold the request: worker 2 dies with it in hand.
  await server.waitFor((event) => event.event === 'fixture:sleeping' && event.worker === 2, 15_000, mark);
  process.kill(ready.find((event) => event.workerId === 2)!.pid as number, 'SIGKILL');
  const result = await pending;
  t.same(result.replies.map((reply) => reply.worker), [1]);
  t.same(result.missing, [{ server: server.events[0]!.id, worker: 2 }]);

  // Silent far past the timeout, however late the primary's timer fires on a busy machine.
  const silent = await server.command<Result>('request', { envelope: { method: 'sleep', worker: 1, data: scaled(2_000) }, timeoutMs: 300 });
  t.same(silent.replies, []);
  t.same(silent.missing, [{ server: server.events[0]!.id, worker: 1 }], 'a target silent past the timeout is missing');
});

t.test('status: every process answers with its server, worker, pid, status, uptime and connections', async (t) => {
  const server = await sharedServer();
  const result = await server.command<Result>('request', { envelope: { method: 'status', broadcast: true, master: true } });
  t.equal(result.replies.length, 3);
  for (const reply of result.replies) {
    t.match(reply.result, { server: server.events[0]!.id, worker: Number, pid: Number, status: String, uptimeMs: Number, connections: Number });
  }
});
