import t from 'tap';
import { HealthMonitor } from '../../../src/runtime/fleet/health-monitor.js';
import type { WorkerRecord } from '../../../src/runtime/fleet/worker-record.js';
import type { RecycleReason } from '../../../src/runtime/events.js';
import type { HealthPolicy } from '../../../src/runtime/fleet/health-policy.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { fakeRecord } from '../../helpers/fake-workers.js';
import { RecordedEvents, silentLog } from '../../helpers/fleet-fakes.js';

const OFF: HealthPolicy = { maxRssMb: 0, maxEventLoopLagMs: 0, lagRecycleBeats: 3, lagSpikeMs: 0, wedgedTimeoutMs: 0 };
const MiB = 1024 * 1024;

function setup(policy: Partial<HealthPolicy> = {}, options: { heartbeatMs?: number; maxAgeMs?: number } = {}) {
  const clock = new FakeClock();
  const events = new RecordedEvents();
  const records: WorkerRecord[] = [];
  const recycled: Array<{ slot: number; reason: RecycleReason; at: number }> = [];
  const monitor = new HealthMonitor({
    clock,
    log: silentLog,
    events,
    records,
    policy: { ...OFF, ...policy },
    heartbeatMs: options.heartbeatMs ?? 1_000,
    maxAgeMs: options.maxAgeMs ?? 0,
    recycle: (record, reason) => recycled.push({ slot: record.slot, reason, at: clock.now() }),
  });
  /** A worker that became ready now. */
  const ready = (slot: number) => {
    const record = fakeRecord(slot, { readyAt: clock.now() });
    records.push(record);
    monitor.workerReady(record);
    return record;
  };
  return { clock, events, records, recycled, monitor, ready };
}

t.test('a beat is recorded and announced whatever the policies', async (t) => {
  const { clock, events, monitor, ready, recycled } = setup();
  const record = ready(1);
  clock.advance(700);
  monitor.onBeat(record, { rss: 50 * MiB, heapUsed: 20 * MiB, lagMs: 3 });
  t.equal(record.lastBeatAt, 700);
  t.same(record.health, { rss: 50 * MiB, heapUsed: 20 * MiB, lagMs: 3 });
  t.same(events.of('worker:health'), [{ workerId: 1, pid: 101, rss: 50 * MiB, heapUsed: 20 * MiB, eventLoopLagMs: 3 }]);
  t.same(recycled, []);
});

t.test('a beat over maxRssMb recycles the worker for rss', async (t) => {
  const { monitor, ready, recycled } = setup({ maxRssMb: 100 });
  const record = ready(2);
  monitor.onBeat(record, { rss: 99 * MiB, heapUsed: 0, lagMs: 0 });
  t.same(recycled, []);
  monitor.onBeat(record, { rss: 101 * MiB, heapUsed: 0, lagMs: 0 });
  t.same(recycled, [{ slot: 2, reason: 'rss', at: 0 }]);
});

t.test('lag above the limit recycles only after lagRecycleBeats beats in a row', async (t) => {
  const { monitor, ready, recycled } = setup({ maxEventLoopLagMs: 100, lagRecycleBeats: 3 });
  const record = ready(1);
  const beat = (lagMs: number) => monitor.onBeat(record, { rss: 0, heapUsed: 0, lagMs });
  beat(150);
  beat(150);
  beat(20);
  beat(150);
  beat(150);
  t.same(recycled, [], 'a good beat in between starts the count again');
  beat(150);
  t.same(recycled.map(({ reason }) => reason), ['lag']);
});

t.test('beats of a worker being replaced or taken out decide nothing', async (t) => {
  const { monitor, ready, recycled } = setup({ maxRssMb: 100 });
  const replacing = ready(1);
  replacing.replacing = 'maxAge';
  const retiring = ready(2);
  retiring.retiring = 'restart';
  for (const record of [replacing, retiring]) monitor.onBeat(record, { rss: 500 * MiB, heapUsed: 0, lagMs: 0 });
  t.same(recycled, []);
});

t.test('a worker silent for wedgedTimeoutMs is recycled as wedged, its silence reported', async (t) => {
  const { clock, events, monitor, ready, recycled } = setup({ wedgedTimeoutMs: 3_000 }, { heartbeatMs: 1_000 });
  monitor.start();
  const talking = ready(1);
  const silent = ready(2);
  for (let second = 1; second <= 2; second++) {
    clock.advance(1_000);
    monitor.onBeat(talking, { rss: 0, heapUsed: 0, lagMs: 0 });
    monitor.onBeat(silent, { rss: 0, heapUsed: 0, lagMs: 0 });
  }
  for (let second = 3; second <= 4; second++) {
    clock.advance(1_000);
    monitor.onBeat(talking, { rss: 0, heapUsed: 0, lagMs: 0 });
  }
  t.same(recycled, [], '2 s of silence is under the threshold');
  clock.advance(1_000);
  monitor.onBeat(talking, { rss: 0, heapUsed: 0, lagMs: 0 });
  t.same(recycled, [{ slot: 2, reason: 'wedged', at: 5_000 }], 'the check after 3 s of silence recycles it');
  t.same(events.of('worker:wedged'), [{ workerId: 2, pid: 102, silentMs: 3_000 }]);
});

t.test('the wedged check skips workers still booting and those already being replaced', async (t) => {
  const { clock, records, monitor, ready, recycled } = setup({ wedgedTimeoutMs: 2_000 });
  monitor.start();
  records.push(fakeRecord(1, { status: 'starting' }));
  ready(2).replacing = 'rss';
  ready(3).retiring = 'wedged';
  clock.advance(30_000);
  t.same(recycled, []);
});

t.test('the wedged check runs at the heartbeat, at most every half timeout, at least every 50 ms', async (t) => {
  const checkEvery = (wedgedTimeoutMs: number, heartbeatMs: number) => {
    const { clock, monitor, ready, recycled } = setup({ wedgedTimeoutMs }, { heartbeatMs });
    monitor.start();
    ready(1);
    clock.advance(wedgedTimeoutMs * 10);
    return recycled[0]!.at;
  };
  t.equal(checkEvery(10_000, 1_000), 10_000, 'checked each heartbeat: found at the timeout');
  t.equal(checkEvery(3_000, 5_000), 3_000, 'heartbeat slower than the timeout: checked every half timeout');
  t.equal(checkEvery(60, 10), 100, '50 ms floor');
});

t.test('no wedged check at all when wedgedTimeoutMs is 0', async (t) => {
  const { clock, monitor } = setup({ wedgedTimeoutMs: 0 });
  monitor.start();
  t.equal(clock.pending, 0);
});

t.test('a worker reaching maxAgeMs is recycled for its age', async (t) => {
  const { clock, ready, recycled } = setup({}, { maxAgeMs: 60_000 });
  clock.advance(5_000);
  ready(1);
  clock.advance(59_999);
  t.same(recycled, []);
  clock.advance(1);
  t.same(recycled, [{ slot: 1, reason: 'maxAge', at: 65_000 }], 'counted from ready');
});

t.test('cancelling the age limit (a worker taken out another way) prevents the age recycle', async (t) => {
  const { clock, ready, recycled } = setup({}, { maxAgeMs: 60_000 });
  ready(1).cancelAge!();
  clock.advance(120_000);
  t.same(recycled, []);
});

t.test('stop ends the wedged checks and the beat verdicts', async (t) => {
  const { clock, monitor, ready, recycled } = setup({ wedgedTimeoutMs: 2_000, maxRssMb: 10 });
  monitor.start();
  const record = ready(1);
  monitor.stop();
  t.equal(clock.pending, 0);
  monitor.onBeat(record, { rss: 500 * MiB, heapUsed: 0, lagMs: 0 });
  clock.advance(60_000);
  t.same(recycled, []);
});
