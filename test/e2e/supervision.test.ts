import t from 'tap';
import { scaled } from '../helpers/wait.js';
import { ServerProcess, isAlive, request } from '../helpers/server-process.js';

t.test('a worker killed with SIGKILL is replaced and the replacement serves; the fleet reports degraded then recovered', async (t) => {
  const server = await ServerProcess.start({ workers: 2, health: { degradedAfterMs: 0 } });
  t.teardown(() => server.stop());
  const ready = await server.readyWorkers(2);
  const victim = ready.find((event) => event.workerId === 1)!;

  process.kill(victim.pid as number, 'SIGKILL');
  const crash = await server.waitFor((event) => event.event === 'worker:crash' && event.pid === victim.pid);
  t.equal(crash.signal, 'SIGKILL');
  const mark = server.events.indexOf(crash);
  const replacement = await server.waitFor((event) => event.event === 'worker:ready' && event.workerId === 1, 15_000, mark);
  t.not(replacement.pid, victim.pid, 'a new process took slot 1');
  t.ok(server.events.slice(mark).some((event) => event.event === 'worker:restart' && event.workerId === 1), 'worker:restart emitted');

  const fleet = await server.command<{ active: number; target: number }>('fleet');
  t.equal(fleet.active, 2, 'full capacity again');
  const degraded = await server.waitFor((event) => event.event === 'fleet:degraded', 5_000, mark);
  t.match(degraded, { target: 2, active: 1 });
  const recovered = await server.waitFor((event) => event.event === 'fleet:recovered', 5_000, mark);
  t.match(recovered, { target: 2, active: 2 });
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) seen.add((await request(server.port, '/whoami')).json().pid);
  t.ok(seen.has(replacement.pid as number), 'the replacement takes connections');
});

t.test('a worker that exits by itself with an error code is a crash and is replaced', async (t) => {
  const server = await ServerProcess.start({ workers: 1, restart: { crashThreshold: 50, backoffMs: 10 } }, { behaviour: 'crash:1', env: { FIXTURE_CRASH_AFTER_MS: '300' } });
  t.teardown(() => server.stop());
  const [first] = await server.readyWorkers(1);
  const crash = await server.waitFor((event) => event.event === 'worker:crash');
  t.equal(crash.pid, first!.pid);
  t.equal(crash.code, 3);
  t.equal(crash.bootFailure, false);
  const replacement = await server.waitFor((event) => event.event === 'worker:ready' && event.pid !== first!.pid);
  t.equal(replacement.workerId, 1, 'the replacement took the same slot');
});

t.test('crash loop: the breaker trips, readiness goes, and the primary exits 1 once no capacity is left', async (t) => {
  const server = await ServerProcess.start(
    { workers: 2, restart: { backoffMs: 10, maxBackoffMs: 50, stabilityWindowMs: scaled(10_000), crashThreshold: 3, crashWindowMs: scaled(60_000), bootFailQuarantine: 0 } },
    { behaviour: 'crash:1', env: { FIXTURE_CRASH_AFTER_MS: '150' } },
  );
  t.teardown(() => server.stop());
  await server.waitFor((event) => event.event === 'circuit-breaker:tripped', 30_000);
  t.equal(server.count((event) => event.event === 'worker:crash' && event.workerId === 1), 3, 'three crashes trip it');

  const health = await server.command<{ ready: boolean }>('health');
  t.equal(health.ready, false, 'server not ready after the trip');
  const readyz = await request(server.port, '/readyz');
  t.equal(readyz.status, 503, 'the surviving worker answers readyz 503');
  t.equal((await request(server.port, '/whoami')).json().worker, 2, 'the surviving worker still serves');

  const survivor = server.events.find((event) => event.event === 'worker:ready' && event.workerId === 2)!;
  process.kill(survivor.pid as number, 'SIGKILL');
  t.equal(await server.exit(), 1, 'exit code 1 when the last worker is gone and no restart is coming');
});

t.test('boot loop: a slot that never boots is quarantined while the others serve', async (t) => {
  const server = await ServerProcess.start({ workers: 2, restart: { backoffMs: 10, maxBackoffMs: 50, bootFailQuarantine: 2, crashThreshold: 10 } }, { behaviour: 'boot-fail:2' });
  t.teardown(() => server.stop());
  const quarantined = await server.waitFor((event) => event.event === 'worker:quarantined', 30_000);
  t.equal(quarantined.workerId, 2);
  // Failures while no other worker serves count but do not quarantine (that is a crash loop for the breaker):
  // how many come before worker 1 is ready depends on how fast each boots, so at least the threshold.
  t.ok((quarantined.consecutiveBootFailures as number) >= 2, `quarantined after ${String(quarantined.consecutiveBootFailures)} consecutive boot failures`);
  const fleet = await server.command<{ quarantined: number; active: number; breaker: { count: number; tripped: boolean } }>('fleet');
  t.equal(fleet.quarantined, 1);
  t.equal(fleet.active, 1);
  t.equal(fleet.breaker.tripped, false, 'quarantined boot failures do not trip the breaker');
  t.equal((await request(server.port, '/whoami')).json().worker, 1, 'worker 1 serves');
});

t.test('RSS recycling: the replacement is ready before the bloated worker is retired', async (t) => {
  const server = await ServerProcess.start({ workers: { count: 1, maxRssMb: 200 }, health: { heartbeatMs: 150 } }, { behaviour: 'alloc:1' });
  t.teardown(() => server.stop());
  const [first] = await server.readyWorkers(1);
  const recycle = await server.waitFor((event) => event.event === 'worker:recycle', 20_000);
  t.equal(recycle.reason, 'rss');
  t.equal(recycle.pid, first!.pid);
  const replacementReady = await server.waitFor((event) => event.event === 'worker:ready' && event.pid !== first!.pid);
  const oldExit = await server.waitFor((event) => event.event === 'worker:exit' && event.pid === first!.pid);
  t.ok(server.events.indexOf(replacementReady) < server.events.indexOf(oldExit), 'replacement ready before the old worker exits');
  t.equal(oldExit.graceful, true, 'a recycle is not a crash');
  t.equal(server.count((event) => event.event === 'worker:crash'), 0);
});

t.test('wedged worker: silent heartbeat → recycled, and its stop escalates to SIGKILL', async (t) => {
  const server = await ServerProcess.start(
    { workers: 1, health: { heartbeatMs: 100, wedgedTimeoutMs: 600 }, shutdown: { timeoutMs: 1_000, ackTimeoutMs: 300, sigtermDelayMs: 200, sigintDelayMs: 200, drainTimeoutMs: 500 } },
    { behaviour: 'wedge:1' },
  );
  t.teardown(() => server.stop());
  const [first] = await server.readyWorkers(1);
  const wedged = await server.waitFor((event) => event.event === 'worker:wedged', 20_000);
  t.equal(wedged.pid, first!.pid);
  t.ok((wedged.silentMs as number) >= 600);
  const exit = await server.waitFor((event) => event.event === 'worker:exit' && event.pid === first!.pid, 20_000);
  t.equal(exit.signal, 'SIGKILL', 'a wedged worker cannot stop by itself');
  t.equal(server.count((event) => event.event === 'worker:crash'), 0, 'wedged recycles never count as crashes');
});

t.test('event-loop lag recycling after consecutive laggy beats', async (t) => {
  const server = await ServerProcess.start({ workers: 1, health: { heartbeatMs: 100, maxEventLoopLagMs: 150, lagRecycleBeats: 2 } }, { behaviour: 'lag:1' });
  t.teardown(() => server.stop());
  const [first] = await server.readyWorkers(1);
  const recycle = await server.waitFor((event) => event.event === 'worker:recycle', 20_000);
  t.equal(recycle.reason, 'lag');
  t.equal(recycle.pid, first!.pid);
});

t.test('shutdown: a worker ignoring SIGTERM and SIGINT is escalated to SIGKILL, the primary exits 0', async (t) => {
  // The polite worker must stop within the budget on a busy machine too; the stubborn one exceeds any budget.
  const server = await ServerProcess.start({ workers: 2, shutdown: { timeoutMs: scaled(1_000), ackTimeoutMs: scaled(500), sigtermDelayMs: 200, sigintDelayMs: 200, drainTimeoutMs: scaled(300) } }, { behaviour: 'stubborn:1' });
  t.teardown(() => server.stop());
  const ready = await server.readyWorkers(2);
  server.signal('SIGTERM');
  t.equal(await server.exit(), 0, 'the primary still exits 0');
  const stubborn = server.events.find((event) => event.event === 'worker:exit' && event.workerId === 1)!;
  t.equal(stubborn.signal, 'SIGKILL', 'escalated to SIGKILL');
  const polite = server.events.find((event) => event.event === 'worker:exit' && event.workerId === 2)!;
  t.equal(polite.code, 0, 'the other worker exited by itself');
  for (const event of ready) t.notOk(isAlive(event.pid as number), `worker ${event.pid} is gone`);
});
