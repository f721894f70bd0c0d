import t from 'tap';
import { loadConfig } from '../../../src/config/load.js';
import { Fleet, GROUP_SIGNAL_SETTLE_MS } from '../../../src/runtime/fleet/fleet.js';
import { PrimaryChannels } from '../../../src/runtime/channels.js';
import { SafeEmitter, type ServerEventName } from '../../../src/runtime/events.js';
import { PrimaryMetrics } from '../../../src/runtime/primary-metrics.js';
import { FakeClock, settle } from '../../helpers/fake-clock.js';
import { FakeForkPort, fakeConnection } from '../../helpers/fake-workers.js';
import { silentLog } from '../../helpers/fleet-fakes.js';

function setup(object: Record<string, unknown> = {}) {
  const { config } = loadConfig({ object: { workers: 2, restart: { backoffMs: 100, crashThreshold: 3 }, ...object }, env: {} });
  const clock = new FakeClock();
  const port = new FakeForkPort();
  const channels = new PrimaryChannels();
  const events = new SafeEmitter(() => {});
  const seen: ServerEventName[] = [];
  for (const name of ['worker:ready', 'worker:crash', 'worker:restart', 'worker:recycle', 'worker:exit', 'circuit-breaker:tripped'] as const) events.on(name, () => seen.push(name));
  const exitCodes: number[] = [];
  const unrecoverable: string[] = [];
  let ready = true;
  const metrics = new PrimaryMetrics();
  const fleet = new Fleet({
    config,
    manager: { organization_id: 'platform-org', host: 'https://parent.example' },
    serverId: 'fleet-test',
    target: config.workers.count as number,
    log: silentLog,
    events,
    clock,
    metrics,
    forkWorker: port,
    exitCode: { setExitCode: (code) => exitCodes.push(code) },
    channels,
    configureRpc: () => {},
    onUnrecoverable: (reason) => unrecoverable.push(reason),
    fleetReady: () => ready,
    onReadinessChange: () => {},
  });
  return { config, clock, port, channels, fleet, metrics, seen, exitCodes, unrecoverable, setFleetReady: (value: boolean) => (ready = value) };
}

t.test('start forks one worker per slot through the fork port, with the internal environment', async (t) => {
  const { port, fleet, channels } = setup({ workers: { count: 3, env: { GREETING: 'hi' } } });
  fleet.patchEnv({ EXTRA: '1' });
  fleet.start();
  t.same(
    port.workers.map(({ env }) => [env.FLEETPLANE_INTERNAL_WORKER, env.FLEETPLANE_INTERNAL_TOTAL_WORKERS, env.FLEETPLANE_INTERNAL_SERVER_ID, env.GREETING, env.EXTRA]),
    [
      ['1', '3', 'fleet-test', 'hi', '1'],
      ['2', '3', 'fleet-test', 'hi', '1'],
      ['3', '3', 'fleet-test', 'hi', '1'],
    ],
  );
  t.notOk('FLEETPLANE_INTERNAL_CONFIG' in port.workers[0]!.env, 'the config is not in the environment');
  port.workers[0]!.say({ fp: 'boot' });
  const [boot] = port.workers[0]!.sentOf('boot');
  t.equal(boot?.config.workers.count, 3, 'a worker asking for its config gets it over IPC');
  t.same(boot?.manager, { organization_id: 'platform-org', host: 'https://parent.example' }, 'and the manager connection the primary resolved, so it reads no store for it');
  t.equal(channels.endpoints().length, 0, 'no channel endpoint before a worker reports its listener installed');
  for (const worker of port.workers) worker.say({ fp: 'listening' });
  t.equal(channels.endpoints().length, 3, 'each forked worker is a channel endpoint once listening');
  t.equal(fleet.active, 0, 'none ready yet');
  t.throws(() => fleet.resize(4), /cannot change once the workers were forked/);
});

t.test('workers become active on ready; connections go to them round-robin', async (t) => {
  const { port, fleet, seen } = setup();
  fleet.start();
  t.equal(fleet.pickForConnection(), undefined, 'none ready: fallback');
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  t.equal(fleet.active, 2);
  t.same(seen, ['worker:ready', 'worker:ready']);
  t.same([fleet.pickForConnection()?.pid, fleet.pickForConnection()?.pid, fleet.pickForConnection()?.pid], [1_000, 1_001, 1_000]);
});

t.test('a worker ready while the fleet is not ready is told so at once', async (t) => {
  const { port, fleet, setFleetReady } = setup();
  setFleetReady(false);
  fleet.start();
  port.workers[0]!.say({ fp: 'ready' });
  t.same(port.workers[0]!.sentOf('fleet'), [{ fp: 'fleet', ready: false }]);
});

t.test('a connection still queued for a worker that dies is handed to another one', async (t) => {
  const { port, fleet } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  const first = fleet.pickForConnection()!;
  const served: number[] = [];
  const hand = () => {
    const record = fleet.pickForConnection()!;
    fleet.handOff(record, connection, false, () => hand());
    served.push(record.pid);
  };
  const connection = fakeConnection();
  fleet.handOff(first, connection, false, hand);
  port.workers.find((worker) => worker.pid === first.pid)!.exit(1);
  t.same(served, [1_001], 'the survivor gets it');
  const [sent] = port.workers[1]!.connections;
  sent!.written(null);
  port.workers[1]!.say({ fp: 'taken', id: (sent!.message as { id: number }).id });
  t.equal(connection.closed, true);
});

t.test("a connection written to a worker whose channel then closes is re-routed at once, before its exit is seen", async (t) => {
  const { port, fleet } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  const connection = fakeConnection();
  const served: number[] = [];
  const hand = () => {
    const record = fleet.pickForConnection()!;
    served.push(record.pid);
    fleet.handOff(record, connection, false, hand);
  };
  hand();
  const victim = port.workers.find((worker) => worker.pid === served[0])!;
  victim.connections[0]!.written(null);
  victim.disconnect();
  t.same(served, [1_000, 1_001], 'handed to the other worker on the disconnect');
  t.equal(fleet.pickForConnection()?.pid, 1_001, 'and the dead one gets no more');
  victim.exit(null, 'SIGKILL');
  t.same(served, [1_000, 1_001], 'the exit re-routes nothing twice');
  t.equal(connection.closed, false);
});

t.test('a crashed worker is forked again after the backoff and the fleet is whole again', async (t) => {
  const { clock, port, fleet, seen, exitCodes } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  port.workers[0]!.exit(1);
  t.equal(fleet.active, 1);
  clock.advance(100);
  t.equal(port.workers.length, 3);
  t.equal(port.workers[2]!.env.FLEETPLANE_INTERNAL_WORKER, '1');
  port.workers[2]!.say({ fp: 'ready' });
  t.equal(fleet.active, 2);
  t.same(seen.filter((name) => name !== 'worker:ready'), ['worker:exit', 'worker:crash', 'worker:restart']);
  t.same(exitCodes, []);
});

t.test('a crash loop empties the fleet: exit code 1 and the primary is told nothing will come back', async (t) => {
  const { clock, port, fleet, seen, exitCodes, unrecoverable } = setup({ workers: 1 });
  fleet.start();
  for (let crash = 0; crash < 3; crash++) {
    port.alive[0]!.exit(1);
    clock.advance(1_000);
  }
  t.ok(fleet.breakerTripped);
  t.ok(seen.includes('circuit-breaker:tripped'));
  t.equal(exitCodes.at(-1), 1);
  t.same(unrecoverable, ['circuit breaker tripped']);
  t.equal(port.alive.length, 0);
  t.equal(fleet.fleetHealth().breaker.tripped, true);
});

t.test('a heartbeat over maxRssMb recycles the worker, replacement first', async (t) => {
  const { port, fleet, seen } = setup({ workers: { count: 1, maxRssMb: 100 } });
  fleet.start();
  const [old] = port.workers;
  old!.say({ fp: 'ready' });
  old!.say({ fp: 'health', rss: 200 * 1024 * 1024, heapUsed: 0, lagMs: 0 });
  t.equal(port.workers.length, 2, 'the replacement is forked');
  t.equal(fleet.active, 1, 'the old worker still serves');
  t.notOk(seen.includes('worker:recycle'), 'not announced while the old worker serves');
  port.workers[1]!.say({ fp: 'ready' });
  await settle();
  t.ok(seen.includes('worker:recycle'));
  t.same(old!.sentOf('shutdown'), [{ fp: 'shutdown', reason: 'rss', type: 'fleetplane:shutdown' }]);
  t.same(fleet.fleetHealth().workers.map(({ pid, retiring }) => [pid, retiring]), [[1_000, 'rss'], [1_001, null]]);
});

t.test('stop tells every worker not ready and retires them all, restarting none', async (t) => {
  const { clock, port, fleet, unrecoverable } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  const stopped = fleet.stop();
  for (const worker of port.workers) {
    t.same(worker.sentOf('fleet'), [{ fp: 'fleet', ready: false }]);
    t.same(worker.sentOf('shutdown'), [{ fp: 'shutdown', reason: 'shutdown', type: 'fleetplane:shutdown' }]);
    worker.say({ fp: 'ack' });
    worker.exit(0);
  }
  await stopped;
  clock.advance(60_000);
  t.equal(port.workers.length, 2, 'no restart');
  t.equal(fleet.records.length, 0);
  t.same(unrecoverable, []);
});

t.test('once a shutdown began, a worker leaving on its own copy of the signal is no crash and is not replaced', async (t) => {
  const { clock, port, fleet, seen, exitCodes } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  fleet.beginShutdown();
  // One shut down cleanly on the signal, the other was still booting and ended by it.
  port.workers[0]!.say({ fp: 'ack', signal: 'SIGTERM' });
  port.workers[0]!.exit(0);
  port.workers[1]!.exit(null, 'SIGTERM');
  clock.advance(60_000);
  t.equal(port.workers.length, 2, 'no replacement forked');
  t.notOk(seen.includes('worker:crash'), 'no crash reported');
  t.notOk(seen.includes('worker:restart'), 'no restart');
  t.same(exitCodes, []);
});

t.test('a worker that stops on a signal before the primary handled its own copy is judged once that copy arrived', async (t) => {
  const { clock, port, fleet, seen } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  port.workers[0]!.say({ fp: 'ack', signal: 'SIGINT' });
  port.workers[0]!.exit(0);
  t.equal(fleet.active, 1, 'out of rotation at once');
  clock.advance(GROUP_SIGNAL_SETTLE_MS - 1);
  fleet.beginShutdown();
  clock.advance(60_000);
  t.equal(port.workers.length, 2, 'not replaced');
  t.notOk(seen.includes('worker:crash'));
});

t.test('a worker signalled alone (the primary got no signal) is a crash, restarted after the settle time and the backoff', async (t) => {
  const { clock, port, fleet, seen } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  port.workers[1]!.say({ fp: 'ack', signal: 'SIGTERM' });
  port.workers[1]!.exit(0);
  clock.advance(GROUP_SIGNAL_SETTLE_MS - 1);
  t.notOk(seen.includes('worker:crash'), 'not judged before the settle time');
  clock.advance(1);
  t.ok(seen.includes('worker:crash'), 'then a crash');
  clock.advance(100);
  t.equal(port.workers.length, 3, 'and its slot forked again');
  t.equal(port.workers[2]!.env.FLEETPLANE_INTERNAL_WORKER, '2');
});

t.test('a worker exiting 0 without a signal is judged at once', async (t) => {
  const { port, fleet, seen } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  port.workers[0]!.exit(0);
  t.ok(seen.includes('worker:crash'));
});

t.test('noneServing resolves once the last serving worker stops taking traffic', async (t) => {
  const { port, fleet } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  let over = false;
  void fleet.noneServing().then(() => (over = true));
  port.workers[0]!.say({ fp: 'status', status: 'stopping' });
  await settle();
  t.equal(over, false, 'one still serves');
  port.workers[1]!.exit(null, 'SIGKILL');
  await settle();
  t.equal(over, true);
  t.equal(await Promise.race([fleet.noneServing().then(() => 'at once'), settle().then(() => 'later')]), 'at once', 'at once when none serves');
});

t.test('as the primary\'s pool, the fleet serves a connection only through a ready worker, and counts each one handed', async (t) => {
  const { port, fleet, metrics } = setup();
  const handed = async () => metrics.handedConnections.value() ?? 0;
  fleet.start();
  t.equal(fleet.serve(fakeConnection(), false, () => t.fail('no retry')), false, 'none ready: the caller answers it');
  t.equal(await handed(), 0);
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  t.equal(fleet.serve(fakeConnection(), true, () => t.fail('no retry')), true);
  t.same(port.workers.map((worker) => worker.connections.length), [1, 0], 'handed to one worker');
  t.equal(await handed(), 1);
});

t.test('a cordon addresses one worker or every worker not retiring; statuses are read per slot', async (t) => {
  const { port, fleet } = setup({ workers: 3 });
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  t.same(fleet.slots(), [1, 2, 3]);
  t.same(fleet.slots(2), [2]);
  void fleet.recycle(fleet.records[0]!, 'rss');
  t.same(fleet.slots(), [1, 2, 3], 'a recycled worker\'s slot is still addressed through its replacement');
  t.same(fleet.statuses([2, 3]), ['ready', 'ready']);
  t.equal(fleet.takesOutLast([1, 2, 3]), true);
  t.equal(fleet.takesOutLast([2]), false);
});

t.test('a worker asking to be recycled is answered first, then replaced', async (t) => {
  const { port, fleet } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  port.workers[0]!.say({ fp: 'rpc', id: 7, method: 'primary.recycleWorker' });
  await new Promise((resolve) => setImmediate(resolve));
  t.same(port.workers[0]!.sentOf('reply'), [{ fp: 'reply', id: 7, ok: true, result: { recycling: 1 } }]);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(port.workers.length, 3, 'a replacement is forked');
  t.equal(fleet.records.find((record) => record.pid === port.workers[0]!.pid)?.replacing, 'restart');
});

t.test('metrics come from every serving worker; one whose call fails is left out', async (t) => {
  const { port, fleet } = setup();
  fleet.start();
  for (const worker of port.workers) worker.say({ fp: 'ready' });
  const gathered = fleet.metricsJson();
  const [call] = port.workers[0]!.sentOf('rpc');
  t.equal(call?.method, 'worker.metrics');
  const [other] = port.workers[1]!.sentOf('rpc');
  t.equal(other?.method, 'worker.metrics', 'both are asked');
  const metric = { name: 'from_worker_1', help: 'h', type: 'counter', aggregator: 'sum', values: [{ value: 1, labels: { worker: '1' } }] };
  port.workers[0]!.say({ fp: 'reply', id: call!.id, ok: true, result: [metric] });
  port.workers[1]!.say({ fp: 'reply', id: other!.id, ok: false, error: 'registry busy' });
  t.same(await gathered, [[metric]]);
});
