import t from 'tap';
import { scaled } from '../helpers/wait.js';
import { ServerProcess, request } from '../helpers/server-process.js';
import { spawnPluginServer, started } from './plugin-process.js';

/**
 * `/readyz` as each of `workers` workers answers it: fresh connections go round-robin over ready workers, so
 * 2 × workers requests reach every one of them.
 */
async function readyzByWorker(port: number, workers: number): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  for (let i = 0; i < workers * 2; i++) {
    const reply = await request(port, '/readyz');
    statuses[reply.json().worker as number] = reply.status;
  }
  return statuses;
}

t.test('server.setNotReady() turns every worker’s /readyz to 503 while traffic is still served; setReady() restores 200', async (t) => {
  const server = await ServerProcess.start({ workers: 2 });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  t.same(await readyzByWorker(server.port, 2), { 1: 200, 2: 200 }, 'ready to begin with');

  await server.command('setNotReady');
  // The readiness message travels on the same channel as, and before, the next handed-off connection.
  t.same(await readyzByWorker(server.port, 2), { 1: 503, 2: 503 }, 'both workers answer 503 once setNotReady resolved');
  t.equal((await server.command<{ ready: boolean }>('health')).ready, false, 'getHealth() says not ready');
  t.equal((await request(server.port, '/whoami')).status, 200, 'requests are still served');

  await server.command('setReady');
  t.same(await readyzByWorker(server.port, 2), { 1: 200, 2: 200 }, 'both workers answer 200 again');
  t.equal((await server.command<{ ready: boolean }>('health')).ready, true, 'getHealth() says ready');
});

t.test('a worker calling setNotReady() / setReady() changes the readiness of the whole server, through the primary', async (t) => {
  const server = spawnPluginServer(t, { workers: 2 }, [{ name: 'recorder', record: true }]);
  await started(server);
  await server.readyWorkers(2);
  const caller = (await request(server.port, '/fixture/readiness', { body: { ready: false } })).json().worker as number;
  t.same(await readyzByWorker(server.port, 2), { 1: 503, 2: 503 }, `worker ${caller}'s call took every worker out`);
  t.equal((await server.command<{ ready: boolean }>('health')).ready, false, "the primary's health agrees");
  await request(server.port, '/fixture/readiness', { body: { ready: true } });
  t.same(await readyzByWorker(server.port, 2), { 1: 200, 2: 200 }, 'and a worker can put it back');
});

t.test('resetCircuitBreaker() after a tripped breaker refills the missing worker; readiness returns unless the operator said not ready', async (t) => {
  const server = await ServerProcess.start(
    { workers: 2, restart: { backoffMs: 10, maxBackoffMs: 50, stabilityWindowMs: scaled(10_000), crashThreshold: 3, crashWindowMs: scaled(60_000), bootFailQuarantine: 0 } },
    { behaviour: 'crash:1', env: { FIXTURE_CRASH_AFTER_MS: '150' } },
  );
  t.teardown(() => server.stop());
  await server.waitFor((event) => event.event === 'circuit-breaker:tripped', 30_000);
  t.match(await server.command('fleet'), { active: 1, breaker: { tripped: true } }, 'slot 1 stays empty after the trip');
  t.same(await readyzByWorker(server.port, 1), { 2: 503 }, 'the survivor answers /readyz 503');

  // The operator takes the server out of rotation, fixes the crash's cause, and resets the breaker.
  await server.command('setNotReady');
  await server.command('setEnv', { env: { FIXTURE_BEHAVIOUR: '' } });
  const mark = server.events.length;
  await server.command('resetCircuitBreaker');
  const refill = await server.waitFor((event) => event.event === 'worker:ready' && event.workerId === 1, 15_000, mark);
  t.ok(server.events.slice(mark).some((event) => event.event === 'worker:restart' && event.workerId === 1), 'the reset forked slot 1 again');
  t.match(await server.command('fleet'), { target: 2, active: 2, breaker: { tripped: false, count: 0 } }, 'full capacity, breaker closed');
  t.same(await readyzByWorker(server.port, 2), { 1: 503, 2: 503 }, 'still not ready: the reset does not undo setNotReady');

  await server.command('setReady');
  t.same(await readyzByWorker(server.port, 2), { 1: 200, 2: 200 }, 'ready again on both workers');
  const seen = new Set<number>();
  for (let i = 0; i < 4; i++) seen.add((await request(server.port, '/whoami')).json().pid as number);
  t.ok(seen.has(refill.pid as number), 'the refilled worker takes connections');
  t.equal(server.count((event) => event.event === 'worker:crash' && server.events.indexOf(event) > mark), 0, 'the refilled worker does not crash');
});
