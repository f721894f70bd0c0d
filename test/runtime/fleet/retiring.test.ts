import t from 'tap';
import { Retirement } from '../../../src/runtime/fleet/retiring.js';
import { PrimaryMetrics } from '../../../src/runtime/primary-metrics.js';
import { FakeClock, settle } from '../../helpers/fake-clock.js';
import { fakeRecord, type FakeRecord } from '../../helpers/fake-workers.js';
import { RecordedEvents, silentLog } from '../../helpers/fleet-fakes.js';

const SHUTDOWN = { ackTimeoutMs: 1_000, timeoutMs: 5_000, sigtermDelayMs: 2_000, sigintDelayMs: 3_000, messagePrefix: 'fleetplane' };

function setup(shutdown: Partial<typeof SHUTDOWN> = {}) {
  const clock = new FakeClock();
  const events = new RecordedEvents();
  const metrics = new PrimaryMetrics();
  const replacements: FakeRecord[] = [];
  let stopping = false;
  let leftRotation = 0;
  let forkFails = false;
  const retirement = new Retirement({
    clock,
    log: silentLog,
    events,
    metrics,
    shutdown: { ...SHUTDOWN, ...shutdown },
    isStopping: () => stopping,
    forkReplacement: (slot) => {
      if (forkFails) throw new Error('spawn EAGAIN');
      const replacement = fakeRecord(slot, { status: 'starting' }, 500 + replacements.length);
      replacements.push(replacement);
      return replacement;
    },
    onLeftRotation: () => leftRotation++,
  });
  /** Times of each signal the worker received. */
  const signalTimes = (record: FakeRecord) => {
    const times: Array<[NodeJS.Signals, number]> = [];
    const kill = record.worker.kill.bind(record.worker);
    record.worker.kill = (signal) => {
      times.push([signal, clock.now()]);
      kill(signal);
    };
    return times;
  };
  const recycles = async (reason: string) => metrics.value('fleetplane_worker_recycles_total', { reason }) ?? 0;
  return {
    clock,
    events,
    retirement,
    replacements,
    signalTimes,
    recycles,
    leftRotation: () => leftRotation,
    stop: () => (stopping = true),
    failForks: () => (forkFails = true),
  };
}

t.test('retire takes the worker out of rotation, asks it to shut down, and waits for it to exit', async (t) => {
  const { clock, events, retirement, leftRotation, signalTimes } = setup();
  const record = fakeRecord(1);
  const signals = signalTimes(record);
  const done = retirement.retire(record, 'maxAge');
  t.equal(record.retiring, 'maxAge');
  t.equal(record.status, 'draining');
  t.equal(leftRotation(), 1);
  t.same(record.worker.sentOf('shutdown'), [{ fp: 'shutdown', reason: 'maxAge', type: 'fleetplane:shutdown' }]);
  t.same(events.of('worker:draining'), [{ workerId: 1, pid: 101, reason: 'maxAge' }]);
  await clock.advanceAsync(100);
  record.acked = true;
  await clock.advanceAsync(4_000);
  record.worker.exit(0);
  await done;
  t.same(signals, [], 'a worker that finishes within the shutdown budget gets no signal');
});

t.test("the shutdown notice carries type <shutdown.messagePrefix>:shutdown, clusterkit's spelling, beside fp", async (t) => {
  const { retirement } = setup({ messagePrefix: '__wm' });
  const record = fakeRecord(1);
  const done = retirement.retire(record, 'shutdown', 'SIGTERM');
  t.same(record.worker.sentOf('shutdown'), [{ fp: 'shutdown', reason: 'SIGTERM', type: '__wm:shutdown' }]);
  record.acked = true;
  record.worker.exit(0);
  await done;
});

t.test('an acknowledged worker that does not exit gets SIGTERM after the budget, then SIGINT, then SIGKILL', async (t) => {
  const { clock, retirement, signalTimes } = setup();
  const record = fakeRecord(1);
  const signals = signalTimes(record);
  const done = retirement.retire(record, 'shutdown');
  record.acked = true;
  await clock.advanceAsync(60_000);
  await done;
  t.same(signals, [
    ['SIGTERM', 5_020],
    ['SIGINT', 7_020],
    ['SIGKILL', 10_020],
  ], 'ack seen at the first poll (20 ms), then timeoutMs, sigtermDelayMs, sigintDelayMs');
  t.same(record.worker.exitedWith, { code: null, signal: 'SIGKILL' });
});

t.test('escalation stops at the first signal the worker obeys', async (t) => {
  const { clock, retirement, signalTimes } = setup();
  const record = fakeRecord(1);
  record.worker.diesOn = ['SIGTERM', 'SIGINT', 'SIGKILL'];
  const signals = signalTimes(record);
  const done = retirement.retire(record, 'restart');
  record.acked = true;
  await clock.advanceAsync(60_000);
  await done;
  t.same(signals.map(([signal]) => signal), ['SIGTERM']);
});

t.test('a worker that never acknowledges is escalated as soon as ackTimeoutMs is over, without the budget', async (t) => {
  const { clock, retirement, signalTimes } = setup();
  const record = fakeRecord(1);
  const signals = signalTimes(record);
  const done = retirement.retire(record, 'wedged');
  await clock.advanceAsync(60_000);
  await done;
  t.same(signals, [
    ['SIGTERM', 1_000],
    ['SIGINT', 3_000],
    ['SIGKILL', 6_000],
  ]);
});

t.test('recycle forks the replacement first; the old worker serves until it is ready, then is retired', async (t) => {
  const { clock, events, retirement, replacements, recycles } = setup();
  const old = fakeRecord(2);
  const done = retirement.recycle(old, 'rss');
  t.equal(replacements.length, 1);
  t.equal(replacements[0]!.slot, 2);
  t.equal(old.replacing, 'rss');
  t.equal(old.retiring, undefined, 'still in rotation while the replacement boots');
  t.equal(old.status, 'ready');
  t.same(events.of('worker:recycle'), [], 'announced once the old worker is taken out, not while it still serves');
  t.equal(await recycles('rss'), 1);
  await clock.advanceAsync(30_000);
  t.same(old.worker.sentOf('shutdown'), [], 'nothing happens to the old worker before the replacement is ready');
  replacements[0]!.settleReady(true);
  await settle();
  t.equal(old.retiring, 'rss');
  t.same(old.worker.sentOf('shutdown'), [{ fp: 'shutdown', reason: 'rss', type: 'fleetplane:shutdown' }]);
  old.acked = true;
  old.worker.exit(0);
  await done;
});

t.test('as clusterkit orders them: worker:draining, then worker:recycle, when the old worker leaves rotation', async (t) => {
  const { events, retirement, replacements } = setup();
  const old = fakeRecord(2);
  const done = retirement.recycle(old, 'maxAge');
  t.same(events.names(), [], 'nothing is announced while the replacement boots and the old worker serves');
  replacements[0]!.settleReady(true);
  await settle();
  t.same(
    events.emitted.filter((event) => event.event === 'worker:draining' || event.event === 'worker:recycle'),
    [
      { event: 'worker:draining', payload: { workerId: 2, pid: 102, reason: 'maxAge' } },
      { event: 'worker:recycle', payload: { workerId: 2, pid: 102, reason: 'maxAge' } },
    ],
  );
  t.same(old.worker.sentOf('shutdown').length, 1, 'the drain is under way when worker:recycle fires');
  old.acked = true;
  old.worker.exit(0);
  await done;
});

t.test('a replacement that never becomes ready leaves the old worker serving (rss, lag, maxAge)', async (t) => {
  const { retirement, replacements } = setup();
  const old = fakeRecord(1);
  const done = retirement.recycle(old, 'maxAge');
  replacements[0]!.worker.exit(1);
  await done;
  t.equal(old.replacing, undefined);
  t.equal(old.retiring, undefined);
  t.same(old.worker.sentOf('shutdown'), []);
});

t.test('a failed fork leaves the old worker serving, for a health recycle and for a restart alike', async (t) => {
  for (const reason of ['lag', 'restart'] as const) {
    const kept = setup();
    kept.failForks();
    const healthy = fakeRecord(1);
    t.equal(await kept.retirement.recycle(healthy, reason), false, `${reason}: the recycle says the old worker was kept`);
    t.equal(healthy.retiring, undefined, `${reason}: not retired`);
    t.equal(healthy.replacing, undefined, `${reason}: not marked as being replaced any more`);
    t.same(healthy.worker.sentOf('shutdown'), [], `${reason}: never told to shut down`);
  }
});

t.test('a restart whose replacement exits before it is ready keeps the old worker; one that is ready retires it', async (t) => {
  const failed = setup();
  const old = fakeRecord(1);
  const kept = failed.retirement.recycle(old, 'restart');
  failed.replacements[0]!.worker.exit(1);
  t.equal(await kept, false);
  t.same(old.worker.sentOf('shutdown'), [], 'the old worker still serves');

  const good = setup();
  const rolled = fakeRecord(1);
  const done = good.retirement.recycle(rolled, 'restart');
  good.replacements[0]!.settleReady(true);
  await settle();
  t.equal(rolled.retiring, 'restart', 'retiring once its replacement was ready');
  rolled.acked = true;
  rolled.worker.exit(0);
  t.equal(await done, true, 'the recycle says the old worker was retired');
});

t.test('a wedged worker leaves rotation at once and is retired even without a replacement', async (t) => {
  const { retirement, replacements } = setup();
  const wedged = fakeRecord(1);
  const done = retirement.recycle(wedged, 'wedged');
  t.equal(wedged.retiring, 'wedged', 'out of rotation before the replacement is forked');
  replacements[0]!.worker.exit(1);
  await settle();
  t.same(wedged.worker.sentOf('shutdown'), [{ fp: 'shutdown', reason: 'wedged', type: 'fleetplane:shutdown' }]);
  wedged.worker.exit(null, 'SIGKILL');
  await done;
});

t.test('a worker already being replaced or retired is not recycled twice; nothing is recycled while stopping', async (t) => {
  const { retirement, replacements, stop } = setup();
  const record = fakeRecord(1);
  void retirement.recycle(record, 'rss');
  await retirement.recycle(record, 'lag');
  await retirement.recycle(fakeRecord(2, { retiring: 'shutdown' }), 'rss');
  t.equal(replacements.length, 1);
  stop();
  await retirement.recycle(fakeRecord(3), 'maxAge');
  t.equal(replacements.length, 1);
});

t.test('a shutdown starting while the replacement boots does not retire the old worker from the recycle', async (t) => {
  const { retirement, replacements, stop } = setup();
  const old = fakeRecord(1);
  const done = retirement.recycle(old, 'restart');
  stop();
  replacements[0]!.settleReady(true);
  await done;
  t.same(old.worker.sentOf('shutdown'), [], 'the shutdown retires it on its own path');
});
