import t from 'tap';
import { CrashRecovery } from '../../../src/runtime/fleet/crash-recovery.js';
import type { WorkerRecord } from '../../../src/runtime/fleet/worker-record.js';
import { PrimaryMetrics } from '../../../src/runtime/primary-metrics.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { fakeRecord } from '../../helpers/fake-workers.js';
import { RecordedEvents, silentLog } from '../../helpers/fleet-fakes.js';

const RESTART = { backoffMs: 100, maxBackoffMs: 1_000, backoffMultiplier: 2, stabilityWindowMs: 5_000, crashThreshold: 3, crashWindowMs: 10_000, bootFailQuarantine: 2 };

function setup(target = 2, restart: Partial<typeof RESTART> = {}) {
  const clock = new FakeClock();
  const events = new RecordedEvents();
  const metrics = new PrimaryMetrics();
  const records: WorkerRecord[] = [];
  const exitCodes: number[] = [];
  const unrecoverable: string[] = [];
  const warnings: string[] = [];
  const forks: Array<{ slot: number; at: number }> = [];
  let readinessChanges = 0;
  let forkFailures = 0;
  let nextPid = 1_000;
  const recovery = new CrashRecovery({
    clock,
    log: silentLog,
    events,
    metrics,
    restart: { ...RESTART, ...restart },
    records,
    target,
    exitCode: { setExitCode: (code) => exitCodes.push(code) },
    fork: (slot) => {
      if (forkFailures > 0) {
        forkFailures--;
        throw new Error('spawn EAGAIN');
      }
      forks.push({ slot, at: clock.now() });
      const record = fakeRecord(slot, { status: 'starting' }, nextPid++);
      records.push(record);
      return record;
    },
    active: () => records.filter((record) => record.status === 'ready' && !record.retiring).length,
    onReadinessChange: () => readinessChanges++,
    onUnrecoverable: (reason) => unrecoverable.push(reason),
    emitWarning: (message, code) => warnings.push(`${code}: ${message}`),
  });
  /** A ready worker in every slot. */
  const serving = () => {
    for (const slot of recovery.slotNumbers) {
      const record = fakeRecord(slot, { readyAt: clock.now() }, nextPid++);
      records.push(record);
      recovery.workerReady(slot);
    }
  };
  /** The worker leaves the record list (as the fleet does on exit) and the recovery hears of it. */
  const crash = (record: WorkerRecord, graceful = false) => {
    records.splice(records.indexOf(record), 1);
    recovery.workerExited(record, graceful ? 0 : 1, null, graceful);
  };
  const gauge = async (name: string) => metrics.value(name);
  return {
    clock,
    events,
    records,
    recovery,
    exitCodes,
    unrecoverable,
    warnings,
    forks,
    serving,
    crash,
    gauge,
    readinessChanges: () => readinessChanges,
    failForks: (count: number) => (forkFailures = count),
  };
}

t.test('a crashed worker is reported and its slot forked again after the backoff', async (t) => {
  const { clock, events, records, recovery, forks, serving, crash, gauge, exitCodes } = setup();
  serving();
  const [first] = records;
  crash(first!);
  t.same(events.of('worker:crash'), [{ workerId: 1, pid: first!.pid, code: 1, signal: null, bootFailure: false }]);
  t.equal(await gauge('fleetplane_worker_crashes_total'), 1);
  clock.advance(99);
  t.same(forks, []);
  clock.advance(1);
  t.same(forks, [{ slot: 1, at: 100 }]);
  t.same(events.of('worker:restart'), [{ workerId: 1, pid: 1_002, attempt: 1, delayMs: 100 }]);
  t.equal(await gauge('fleetplane_worker_restarts_total'), 1);
  t.same(exitCodes, [], 'others were serving: no failure exit code');
  t.equal(recovery.state(clock.now()).breaker.count, 1);
});

t.test('a graceful exit is no crash: no restart, no count', async (t) => {
  const { clock, events, records, recovery, forks, serving, crash } = setup();
  serving();
  crash(records[0]!, true);
  clock.advance(60_000);
  t.same(forks, []);
  t.same(events.of('worker:crash'), []);
  t.equal(recovery.state(clock.now()).breaker.count, 0);
});

t.test('crashThreshold crashes within the window trip the breaker: restarts stop, exit code 1', async (t) => {
  const { clock, events, records, recovery, forks, serving, crash, gauge, exitCodes, warnings, readinessChanges, unrecoverable } = setup(4);
  serving();
  crash(records[0]!);
  crash(records[0]!);
  t.equal(recovery.breakerTripped, false);
  crash(records[0]!);
  t.equal(recovery.breakerTripped, true);
  t.same(events.of('circuit-breaker:tripped'), [{ count: 3, windowMs: 10_000 }]);
  t.equal(await gauge('fleetplane_circuit_breaker_tripped'), 1);
  t.same(exitCodes, [1]);
  t.equal(readinessChanges(), 1, 'workers are told readiness changed');
  t.same(warnings, ['FleetplaneCrashLoop: 3 worker crashes within 10000 ms: restarts stopped']);
  clock.advance(60_000);
  t.same(forks, [], 'the queued restarts were dropped');
  t.same(unrecoverable, [], 'one worker still serves');
  crash(records[0]!, true);
  t.same(unrecoverable, ['worker exited'], 'the last worker gone with the breaker tripped: nothing will come back');
  t.same(recovery.state(clock.now()), { quarantined: 0, breaker: { count: 0, tripped: true }, restartsPending: 0 }, 'the crashes left the window, the breaker stays tripped');
});

t.test('crashes further apart than the window do not trip the breaker', async (t) => {
  const { clock, records, recovery, serving, crash } = setup(4);
  serving();
  for (let crashes = 0; crashes < 4; crashes++) {
    crash(records[0]!);
    clock.advance(5_001);
  }
  t.equal(recovery.breakerTripped, false);
});

t.test('the breaker tripping on the last worker is unrecoverable at once', async (t) => {
  const { records, serving, crash, unrecoverable } = setup(1, { crashThreshold: 1 });
  serving();
  crash(records[0]!);
  t.same(unrecoverable, ['circuit breaker tripped']);
});

t.test('no worker left: exit code 1 while restarts are coming, 0 again once the fleet is complete', async (t) => {
  const { clock, records, recovery, serving, crash, exitCodes } = setup(1);
  serving();
  crash(records[0]!);
  t.same(exitCodes, [1]);
  clock.advance(100);
  t.equal(records.length, 1, 'restarted');
  recovery.fleetComplete();
  t.same(exitCodes, [1, 0]);
  recovery.fleetComplete();
  t.same(exitCodes, [1, 0], 'withdrawn once');
});

t.test('a tripped breaker keeps exit code 1 even when the fleet is complete', async (t) => {
  const { records, recovery, serving, crash, exitCodes } = setup(3, { crashThreshold: 1 });
  serving();
  crash(records[0]!);
  recovery.fleetComplete();
  t.same(exitCodes, [1]);
});

t.test('repeated boot failures quarantine the slot while others serve', async (t) => {
  const { clock, events, records, recovery, forks, serving, crash } = setup();
  serving();
  crash(records[0]!);
  clock.advance(100);
  const booting = records.find((record) => record.slot === 1)!;
  t.equal(booting.readyAt, undefined);
  crash(booting);
  t.same(events.of('worker:crash').map(({ bootFailure }) => bootFailure), [false, true]);
  clock.advance(200);
  crash(records.find((record) => record.slot === 1)!);
  t.same(events.of('worker:quarantined'), [{ workerId: 1, consecutiveBootFailures: 2 }]);
  t.equal(events.of('worker:crash').length, 2, 'the quarantining failure is no crash for the breaker');
  clock.advance(60_000);
  t.same(forks.map(({ slot }) => slot), [1, 1], 'no more forks for the quarantined slot');
  t.equal(recovery.state(clock.now()).quarantined, 1);
});

t.test('a fleet that cannot boot at all is not quarantined: its boot failures are crashes for the breaker', async (t) => {
  const { clock, events, records, recovery, crash, unrecoverable } = setup(1);
  records.push(fakeRecord(1, { status: 'starting' }));
  for (let attempt = 1; attempt <= 3; attempt++) {
    crash(records[0]!);
    clock.advance(1_000);
  }
  t.same(events.of('worker:quarantined'), []);
  t.same(events.of('worker:crash').map(({ bootFailure }) => bootFailure), [true, true, true]);
  t.equal(recovery.breakerTripped, true);
  t.same(unrecoverable, ['circuit breaker tripped']);
});

t.test('a worker reaching ready forgives its slot\'s boot failures', async (t) => {
  const { clock, events, records, recovery, serving, crash } = setup();
  serving();
  crash(records[0]!);
  clock.advance(100);
  crash(records.find((record) => record.slot === 1)!);
  clock.advance(200);
  recovery.workerReady(1);
  crash(records.find((record) => record.slot === 1)!);
  t.same(events.of('worker:quarantined'), [], 'one boot failure since the last ready');
});

t.test('a fresh start forks quarantined slots again at once and resets a tripped breaker', async (t) => {
  const { clock, records, recovery, forks, serving, crash, gauge, readinessChanges } = setup(3);
  serving();
  crash(records[0]!);
  clock.advance(100);
  crash(records.find((record) => record.slot === 1 && record.readyAt === undefined)!);
  clock.advance(200);
  crash(records.find((record) => record.slot === 1 && record.readyAt === undefined)!);
  t.equal(recovery.state(clock.now()).quarantined, 1);
  crash(records[0]!);
  crash(records[0]!);
  t.equal(recovery.breakerTripped, true);
  const before = forks.length;
  recovery.freshStart();
  t.equal(recovery.breakerTripped, false);
  t.equal(await gauge('fleetplane_circuit_breaker_tripped'), 0);
  t.equal(readinessChanges(), 2, 'tripped, then reset');
  t.same(forks.slice(before).map(({ slot, at }) => ({ slot, at })), [{ slot: 1, at: 300 }], 'the quarantined slot at once');
  t.equal(recovery.state(clock.now()).quarantined, 0);
  clock.advance(10_000);
  t.same(forks.slice(before + 1).map(({ slot }) => slot).sort(), [2, 3], 'the crashed slots through the restart queue');
});

t.test('resetting the breaker refills every missing slot but not during a shutdown', async (t) => {
  const { clock, records, recovery, forks, serving, crash } = setup(3, { crashThreshold: 2 });
  serving();
  crash(records[0]!);
  crash(records[0]!);
  t.equal(recovery.breakerTripped, true);
  recovery.stop();
  recovery.resetCircuitBreaker();
  t.equal(recovery.breakerTripped, true, 'ignored while stopping');
  clock.advance(60_000);
  t.same(forks, []);
});

t.test('three failed forks in a row: exit code 1 for good, unrecoverable once the fleet is empty', async (t) => {
  const { clock, records, recovery, serving, crash, exitCodes, unrecoverable, failForks } = setup(2);
  serving();
  failForks(100);
  crash(records[0]!);
  clock.advance(60_000);
  t.same(exitCodes, [1]);
  t.same(unrecoverable, []);
  recovery.fleetComplete();
  t.same(exitCodes, [1], 'the exit code stays: the environment cannot fork');
  crash(records[0]!, true);
  t.same(unrecoverable, ['worker exited']);
});

t.test('after stop, an empty fleet is a shutdown, not an unrecoverable one', async (t) => {
  const { records, recovery, serving, crash, unrecoverable } = setup(2, { crashThreshold: 1 });
  serving();
  crash(records[0]!);
  recovery.stop();
  crash(records[0]!, true);
  t.same(unrecoverable, []);
});
