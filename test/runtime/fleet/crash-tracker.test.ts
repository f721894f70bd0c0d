import t from 'tap';
import { CrashTracker } from '../../../src/runtime/fleet/crash-tracker.js';

t.test('trips exactly when the threshold-th crash lands inside the window', async (t) => {
  const tracker = new CrashTracker(3, 60_000);
  t.equal(tracker.record(0), false);
  t.equal(tracker.record(1_000), false);
  t.equal(tracker.tripped, false, 'two crashes are below a threshold of three');
  t.equal(tracker.record(2_000), true, 'the third crash trips');
  t.equal(tracker.tripped, true);
});

t.test('trips only once: later crashes do not report a new trip', async (t) => {
  const tracker = new CrashTracker(2, 60_000);
  tracker.record(0);
  t.equal(tracker.record(1), true);
  t.equal(tracker.record(2), false);
  t.equal(tracker.record(3), false);
  t.equal(tracker.tripped, true, 'stays tripped');
  t.equal(tracker.count(3), 4, 'crashes after the trip are still counted');
});

t.test('crashes that leave the sliding window no longer count', async (t) => {
  const tracker = new CrashTracker(3, 10_000);
  tracker.record(0);
  tracker.record(5_000);
  t.equal(tracker.count(9_999), 2);
  t.equal(tracker.count(10_000), 1, 'a crash exactly windowMs old has left the window');
  t.equal(tracker.count(15_000), 0);
});

t.test('crashes spread wider than the window never trip the breaker', async (t) => {
  const tracker = new CrashTracker(3, 10_000);
  const trips = [0, 6_000, 12_000, 18_000, 24_000, 30_000].map((at) => tracker.record(at));
  t.same(trips, [false, false, false, false, false, false]);
  t.equal(tracker.tripped, false);
});

t.test('an old crash falling out of the window delays the trip by one crash', async (t) => {
  const tracker = new CrashTracker(3, 10_000);
  tracker.record(0);
  tracker.record(8_000);
  t.equal(tracker.record(11_000), false, 'the crash at 0 is gone: only two in the window');
  t.equal(tracker.record(12_000), true);
});

t.test('reset clears the count and re-arms the breaker', async (t) => {
  const tracker = new CrashTracker(2, 60_000);
  tracker.record(0);
  tracker.record(1);
  t.equal(tracker.tripped, true);
  tracker.reset();
  t.equal(tracker.tripped, false);
  t.equal(tracker.count(2), 0);
  t.equal(tracker.record(3), false);
  t.equal(tracker.record(4), true, 'trips again after a reset');
});
