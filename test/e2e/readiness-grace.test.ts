import t from 'tap';
import { ServerProcess, request } from '../helpers/server-process.js';
import { scaled, until } from '../helpers/wait.js';

const REDIRECT = 'https://lb.example.test/';

/** Tracks whether a promise has settled, without awaiting it. */
function watch<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: unknown) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

/** Polls `/readyz` on fresh connections until a serving worker (not the fallback) answers 503. */
async function untilWorkersNotReady(port: number): Promise<void> {
  let last: unknown;
  await until('a serving worker to answer /readyz 503', async () => {
    const reply = await request(port, '/readyz');
    last = [reply.status, reply.body];
    return reply.status === 503 && reply.json().status !== 'fallback' ? true : undefined;
  }, 15_000, { everyMs: 1, last: () => last });
}

let shared: Promise<ServerProcess> | undefined;
/**
 * A grace far longer than the tests, shared by those that end every cordon they start by cancelling it: what
 * happens during the grace is observed, and it ends by cancellation only.
 */
function cordonServer(): Promise<ServerProcess> {
  shared ??= ServerProcess.start({ workers: 2, fallback: { redirect: REDIRECT }, lifecycle: { readinessGraceMs: 600_000 } }).then(async (server) => {
    await server.readyWorkers(2);
    return server;
  });
  return shared;
}
t.teardown(async () => (await shared)?.stop());

t.test('cordoning the last serving workers: /readyz 503 on every worker while they still serve 200; uncordon cancels the cordon', async (t) => {
  const server = await cordonServer();

  await server.command('cordon', { value: true, worker: 1 });
  t.pass('cordoning one of two workers resolves without a grace');
  for (let i = 0; i < 4; i++) {
    const reply = await request(server.port, '/readyz');
    t.same([reply.status, reply.json().worker], [200, 2], 'the other worker still reports ready');
  }

  const cordonCall = server.command('cordon', { value: true, worker: 2 }, 60_000);
  const cordon = watch(cordonCall);
  await untilWorkersNotReady(server.port);
  t.equal((await server.command<{ ready: boolean }>('health')).ready, false, "the primary's health says not ready");
  for (let i = 0; i < 4; i++) {
    const ready = await request(server.port, '/readyz');
    t.same([ready.status, ready.json().worker], [503, 2], 'the last worker answers /readyz 503');
    const served = await request(server.port, '/whoami');
    t.same([served.status, served.json().worker], [200, 2], 'and still serves requests, no redirect');
  }
  t.equal(cordon.settled, false, 'the cordon has not resolved during the grace');

  await server.command('cordon', { value: false });
  await server.command('cordon', { value: false, worker: 1 });
  await t.resolves(cordonCall, 'the cancelled cordon answers without an error');
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) {
    const ready = await request(server.port, '/readyz');
    t.equal(ready.status, 200, 'ready again');
    seen.add(ready.json().worker as number);
  }
  t.same([...seen].sort(), [1, 2], 'both workers serve: the cancelled cordon was not applied');
});

t.test('a small grace: the cordon of every worker resolves after it, and then the fallback answers', async (t) => {
  const server = await ServerProcess.start({ workers: 2, fallback: { redirect: REDIRECT }, lifecycle: { readinessGraceMs: 300 } });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  const mark = server.events.length;
  await server.command('cordon', { value: true });
  const cordoned = server.events.slice(mark).filter((event) => event.event === 'status_change' && event.newStatus === 'cordoned');
  t.equal(cordoned.length, 2, 'both workers were cordoned by the time the call resolved');
  const redirect = await request(server.port, '/whoami');
  t.equal(redirect.status, 307);
  t.equal(redirect.headers.location, `${REDIRECT}whoami`);
  const ready = await request(server.port, '/readyz');
  t.same([ready.status, ready.json().worker], [503, 0], 'readyz from the fallback');
});

t.test('draining the only worker of a single-process server waits the grace too, with /readyz 503 while it serves', async (t) => {
  const server = await ServerProcess.start({ workers: 0, fallback: { redirect: REDIRECT }, lifecycle: { readinessGraceMs: 600_000 } });
  t.teardown(() => server.stop());
  const drainCall = server.command('drain', { value: true }, 60_000);
  const drain = watch(drainCall);
  await untilWorkersNotReady(server.port);
  t.equal((await request(server.port, '/whoami')).status, 200, 'still served');
  t.equal(drain.settled, false);
  await server.command('drain', { value: false });
  await t.resolves(drainCall, 'the cancelled drain answers');
  const ready = await request(server.port, '/readyz');
  t.equal(ready.status, 200, 'undrained during the grace: ready again');
  t.equal((await request(server.port, '/whoami')).status, 200);
});

t.test('graceful shutdown: /readyz 503 while the workers still serve, then the server exits 0', async (t) => {
  // The grace must outlast the checks made during it on a busy machine too.
  const server = await ServerProcess.start({ workers: 2, fallback: { redirect: REDIRECT }, lifecycle: { readinessGraceMs: scaled(3_000) } });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  server.signal('SIGTERM');
  await server.waitFor((event) => event.event === 'shutdown:start');
  await untilWorkersNotReady(server.port);
  const served = await request(server.port, '/whoami');
  t.equal(served.status, 200, 'a request during the grace is served by a worker, not redirected');
  t.equal(server.count((event) => event.event === 'worker:exit'), 0, 'no worker has stopped yet');
  t.equal(await server.exit(), 0, 'then the shutdown completes');
  t.equal(server.count((event) => event.event === 'shutdown:complete'), 1);
});

t.test('a cordon envelope sent to the workers themselves (broadcast) waits the grace too, and is answered at once: the last one says accepted, and serves with /readyz 503 until the uncordon cancels it', async (t) => {
  const server = await cordonServer();
  const result = await server.command<{ replies: Array<{ worker: number; ok: boolean; result: any }>; missing: unknown[] }>('request', { envelope: { method: 'cordon', broadcast: true, data: true } });
  t.same(result.missing, [], 'both workers answered, within the default timeout of a grace of ten minutes');
  t.same(result.replies.map((reply) => reply.ok), [true, true]);
  const accepted = result.replies.filter((reply) => reply.result.accepted === true);
  t.equal(accepted.length, 1, 'one worker was the last serving: its cordon waits the grace');
  t.match(accepted[0]?.result, { status: 'ready', accepted: true, effectiveInMs: 600_000 }, 'it says so, and that it still serves');
  await untilWorkersNotReady(server.port);
  for (let i = 0; i < 4; i++) {
    t.equal((await request(server.port, '/readyz')).status, 503, '/readyz 503 during the grace');
    t.equal((await request(server.port, '/whoami')).status, 200, 'requests still served by a worker, no redirect');
  }
  await server.command('request', { envelope: { method: 'cordon', broadcast: true, data: false } });
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) {
    const ready = await request(server.port, '/readyz');
    t.equal(ready.status, 200, 'ready again');
    seen.add(ready.json().worker as number);
  }
  t.same([...seen].sort(), [1, 2], 'both serve: the cordon waiting for the grace was cancelled');
});

t.test('a cordon envelope with wait: true is answered once applied: the last worker waits the grace before it answers', async (t) => {
  const server = await cordonServer();
  const broadcast = server.command<{ replies: Array<{ worker: number; ok: boolean }> }>('request', { envelope: { method: 'cordon', broadcast: true, data: { value: true, wait: true } }, timeoutMs: 60_000 }, 70_000);
  const cordon = watch(broadcast);
  await untilWorkersNotReady(server.port);
  for (let i = 0; i < 4; i++) {
    t.equal((await request(server.port, '/readyz')).status, 503, '/readyz 503 during the grace');
    t.equal((await request(server.port, '/whoami')).status, 200, 'requests still served by a worker, no redirect');
  }
  t.equal(cordon.settled, false, 'the last worker waits the grace');
  await server.command('request', { envelope: { method: 'cordon', broadcast: true, data: false } });
  const result = await broadcast;
  t.same(result.replies.map((reply) => reply.ok), [true, true], 'both workers answered');
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) {
    const ready = await request(server.port, '/readyz');
    t.equal(ready.status, 200, 'ready again');
    seen.add(ready.json().worker as number);
  }
  t.same([...seen].sort(), [1, 2], 'both serve: the cordon waiting for the grace was cancelled');
});
