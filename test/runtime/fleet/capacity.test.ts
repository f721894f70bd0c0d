import t from 'tap';
import { Capacity } from '../../../src/runtime/fleet/capacity.js';
import type { WorkerRecord } from '../../../src/runtime/fleet/worker-record.js';
import { PrimaryMetrics } from '../../../src/runtime/primary-metrics.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { fakeRecord } from '../../helpers/fake-workers.js';
import { RecordedEvents, silentLog } from '../../helpers/fleet-fakes.js';

function setup(target = 3, degradedAfterMs = 1_000) {
  const clock = new FakeClock();
  const events = new RecordedEvents();
  const metrics = new PrimaryMetrics();
  const records: WorkerRecord[] = [];
  let completions = 0;
  const capacity = new Capacity({ clock, log: silentLog, events, metrics, records, degradedAfterMs, target, onComplete: () => completions++ });
  const gauge = async (name: string) => metrics.value(name);
  const fill = () => {
    for (let slot = 1; slot <= target; slot++) records.push(fakeRecord(slot));
    capacity.update();
  };
  return { clock, events, records, capacity, gauge, fill, completions: () => completions };
}

t.test('active counts ready workers that are not being taken out; the gauges follow', async (t) => {
  const { records, capacity, gauge } = setup();
  records.push(fakeRecord(1), fakeRecord(2, { status: 'starting' }), fakeRecord(3, { status: 'cordoned' }), fakeRecord(4, { retiring: 'rss' }), fakeRecord(5));
  capacity.update();
  t.equal(capacity.active, 2);
  t.equal(await gauge('fleetplane_workers_active'), 2);
  t.equal(await gauge('fleetplane_workers_target'), 3);
  capacity.resize(5);
  t.equal(capacity.target, 5);
  t.equal(await gauge('fleetplane_workers_target'), 5);
});

t.test('starting up short of the target is not degraded', async (t) => {
  const { clock, events, records, capacity } = setup();
  records.push(fakeRecord(1));
  capacity.update();
  clock.advance(60_000);
  t.same(events.of('fleet:degraded'), []);
  t.equal(clock.pending, 0);
});

t.test('fewer active workers than the target for degradedAfterMs fires fleet:degraded once', async (t) => {
  const { clock, events, records, capacity, fill } = setup();
  fill();
  records[0]!.status = 'cordoned';
  capacity.update();
  clock.advance(999);
  t.same(events.of('fleet:degraded'), [], 'not before the delay');
  records.pop();
  capacity.update();
  clock.advance(1);
  t.same(events.of('fleet:degraded'), [{ target: 3, active: 1 }], 'counted from the first shortfall, with the figures of the moment');
  clock.advance(60_000);
  t.equal(events.of('fleet:degraded').length, 1);
});

t.test('back to the target: fleet:recovered with how long the fleet was degraded', async (t) => {
  const { clock, events, records, capacity, fill } = setup();
  fill();
  const lost = records.pop()!;
  clock.advance(500);
  capacity.update();
  clock.advance(2_500);
  records.push(lost);
  capacity.update();
  t.same(events.of('fleet:recovered'), [{ target: 3, active: 3, degradedDurationMs: 2_500 }]);
  t.equal(events.of('fleet:degraded').length, 1);
});

t.test('a shortfall shorter than degradedAfterMs fires neither event', async (t) => {
  const { clock, events, records, capacity, fill } = setup();
  fill();
  const lost = records.pop()!;
  capacity.update();
  clock.advance(400);
  records.push(lost);
  capacity.update();
  clock.advance(10_000);
  t.same(events.names(), []);
  t.equal(clock.pending, 0, 'the pending degraded timer was cancelled');
});

t.test('every update at full strength reports the fleet complete', async (t) => {
  const { records, capacity, fill, completions } = setup(2);
  records.push(fakeRecord(1));
  capacity.update();
  t.equal(completions(), 0);
  fill();
  t.equal(completions(), 1);
});

t.test('after stop, shortfalls are a shutdown, not a degradation', async (t) => {
  const { clock, events, records, capacity, fill, completions } = setup();
  fill();
  const before = completions();
  records.pop();
  capacity.update();
  capacity.stop();
  records.length = 0;
  capacity.update();
  clock.advance(60_000);
  t.same(events.of('fleet:degraded'), []);
  t.equal(completions(), before);
});

t.test('takesOutLast: only when the given slots are every worker taking traffic', async (t) => {
  const { records, capacity } = setup();
  records.push(fakeRecord(1), fakeRecord(2), fakeRecord(3, { status: 'cordoned' }));
  t.equal(capacity.takesOutLast([1]), false);
  t.equal(capacity.takesOutLast([1, 2]), true);
  t.equal(capacity.takesOutLast([1, 2, 3]), true);
  records.length = 0;
  records.push(fakeRecord(3, { status: 'cordoned' }));
  t.equal(capacity.takesOutLast([3]), false, 'none serves now: nothing to take out');
});

t.test('announceReadiness tells every connected worker', async (t) => {
  const { records, capacity } = setup();
  const gone = fakeRecord(2);
  gone.worker.connected = false;
  records.push(fakeRecord(1), gone, fakeRecord(3, { status: 'starting' }));
  capacity.announceReadiness(false);
  t.same(
    records.map((record) => (record as ReturnType<typeof fakeRecord>).worker.sentOf('fleet')),
    [[{ fp: 'fleet', ready: false }], [], [{ fp: 'fleet', ready: false }]],
  );
});
