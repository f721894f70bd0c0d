import t from 'tap';
import { FAST, ServerProcess, isAlive, request, steadyLoad } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';

t.test('graceful shutdown lets an in-flight slow request finish, then exits 0 with no worker left', async (t) => {
  const server = await ServerProcess.start({ workers: 2 });
  t.teardown(() => server.stop());
  const ready = await server.readyWorkers(2);
  const slow = request(server.port, '/slow?ms=1500');
  await server.waitFor((event) => event.event === 'fixture:slow');
  server.signal('SIGTERM');
  const reply = await slow;
  t.equal(reply.status, 200, 'the in-flight request completed');
  t.equal(reply.json().slow, 1500);
  t.equal(reply.headers.connection, 'close', 'its response closes the connection');
  t.equal(await server.exit(), 0);
  t.ok(server.events.some((event) => event.event === 'shutdown:complete'));
  for (const event of ready) t.notOk(isAlive(event.pid as number), `worker ${event.pid} is gone`);
});

t.test("shutdown.messagePrefix: each worker's shutdown notice carries type <prefix>:shutdown, as clusterkit's does", async (t) => {
  const server = await ServerProcess.start({ workers: 2, shutdown: { ...FAST.shutdown, messagePrefix: '__wm' } });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  server.signal('SIGTERM');
  t.equal(await server.exit(), 0);
  const notices = server.events.filter((event) => event.event === 'fixture:shutdown-notice').map((event) => [event.worker, event.type]);
  t.same(notices.sort(), [
    [1, '__wm:shutdown'],
    [2, '__wm:shutdown'],
  ]);
});

t.test('new connections during shutdown get the fallback', async (t) => {
  const server = await ServerProcess.start({ workers: 1, fallback: { redirect: 'http://lb.example.test' } });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);
  const slow = request(server.port, '/slow?ms=1500');
  await server.waitFor((event) => event.event === 'fixture:slow');
  server.signal('SIGTERM');
  await server.waitFor((event) => event.event === 'shutdown:start');
  const during = await request(server.port, '/whoami');
  t.equal(during.status, 307);
  t.equal((await slow).status, 200);
  t.equal(await server.exit(), 0);
});

let shared: Promise<ServerProcess> | undefined;
/** One two-worker server for the tests that keep it running (its workers may be replaced). */
function sharedServer(): Promise<ServerProcess> {
  shared ??= ServerProcess.start({ workers: 2 });
  return shared;
}
t.teardown(async () => (await shared)?.stop());

t.test('rolling restart under steady load: every worker replaced, zero failed requests', async (t) => {
  const server = await sharedServer();
  const ready = await server.readyWorkers(2);
  const oldPids = ready.map((event) => event.pid as number);
  const load = steadyLoad(server.port, '/whoami', 8);
  await until('the load to flow', () => (load.stats.ok >= 50 ? true : undefined));
  const mark = server.events.length;
  const before = load.stats.ok;
  await server.command('restart', {}, 60_000);
  const during = load.stats.ok - before;
  const after = load.stats.ok;
  await until('requests served after the restart', () => (load.stats.ok >= after + 50 ? true : undefined));
  const stats = await load.stop();
  t.equal(stats.failed, 0, `no failed request (errors: ${stats.errors.slice(0, 3).join('; ')})`);
  t.ok(during > 0, `requests were served during the restart (${during} of ${stats.ok})`);
  const fleet = await server.command<{ workers: Array<{ pid: number }> }>('fleet');
  t.equal(fleet.workers.length, 2);
  for (const worker of fleet.workers) t.notOk(oldPids.includes(worker.pid), 'worker replaced');
  t.ok(server.events.slice(mark).some((event) => event.event === 'restart:complete'));
  t.equal(server.count((event) => event.event === 'worker:crash'), 0);
});

t.test('SIGHUP starts a rolling restart', async (t) => {
  const server = await ServerProcess.start({ workers: 1 });
  t.teardown(() => server.stop());
  const [first] = await server.readyWorkers(1);
  server.signal('SIGHUP');
  const complete = await server.waitFor((event) => event.event === 'restart:complete', 30_000);
  t.same(complete.workers, [1]);
  const exit = await server.waitFor((event) => event.event === 'worker:exit' && event.pid === first!.pid);
  t.equal(exit.graceful, true);
  t.equal((await request(server.port, '/whoami')).status, 200);
});

t.test('drain lets an in-flight request finish and takes the worker out of rotation', async (t) => {
  const server = await sharedServer();
  await server.readyWorkers(2);
  // Connections go round-robin: the one after the probe lands on the other worker.
  const probe = await request(server.port, '/whoami');
  const slowWorker = probe.json().worker === 1 ? 2 : 1;
  const slow = request(server.port, '/slow?ms=1200');
  await server.waitFor((event) => event.event === 'fixture:slow');
  const drained = server.command<Array<{ status: string; remaining: number }>>('drain', { value: true, worker: slowWorker }, 20_000);
  for (let i = 0; i < 4; i++) t.not((await request(server.port, '/whoami')).json().worker, slowWorker, 'draining worker gets no new connections');
  const reply = await slow;
  t.equal(reply.status, 200, 'the in-flight request finished');
  const [result] = await drained;
  t.equal(result!.remaining, 0, 'drain resolved once no connection remained');
  await server.command('drain', { value: false, worker: slowWorker });
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) seen.add((await request(server.port, '/whoami')).json().worker);
  t.same([...seen].sort(), [1, 2], 'back in service');
});
