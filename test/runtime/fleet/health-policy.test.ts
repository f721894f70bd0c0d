import t from 'tap';
import type { Beat } from '../../../src/runtime/heartbeat.js';
import { judgeBeat, wedgedFor, type BeatHistory, type HealthPolicy } from '../../../src/runtime/fleet/health-policy.js';

const MiB = 1024 * 1024;
const off: HealthPolicy = { maxRssMb: 0, maxEventLoopLagMs: 0, lagRecycleBeats: 3, lagSpikeMs: 0, wedgedTimeoutMs: 0 };
const beat = (overrides: Partial<Beat> = {}): Beat => ({ rss: 100 * MiB, heapUsed: 50 * MiB, lagMs: 1, ...overrides });
const fresh = (): BeatHistory => ({ laggyBeats: 0 });

/** Feeds beats in order and returns the verdict reason of each (undefined: keep the worker). */
function judgeAll(policy: HealthPolicy, beats: Beat[], history = fresh()) {
  return beats.map((one) => {
    const verdict = judgeBeat(policy, history, one);
    return verdict.recycle ? verdict.reason : undefined;
  });
}

t.test('RSS above maxRssMb recycles with reason rss', async (t) => {
  const policy = { ...off, maxRssMb: 256 };
  const verdict = judgeBeat(policy, fresh(), beat({ rss: 300 * MiB }));
  t.match(verdict, { recycle: true, reason: 'rss', detail: /300 MiB > 256 MiB/ });
});

t.test('RSS at or under maxRssMb keeps the worker', async (t) => {
  const policy = { ...off, maxRssMb: 256 };
  t.same(judgeBeat(policy, fresh(), beat({ rss: 256 * MiB })), { recycle: false });
  t.same(judgeBeat(policy, fresh(), beat({ rss: 10 * MiB })), { recycle: false });
  t.match(judgeBeat(policy, fresh(), beat({ rss: 256 * MiB + 1 })), { recycle: true, reason: 'rss' }, 'one byte over is over');
});

t.test('a single beat above lagSpikeMs recycles with reason lag', async (t) => {
  const policy = { ...off, lagSpikeMs: 500 };
  t.same(judgeAll(policy, [beat({ lagMs: 20 }), beat({ lagMs: 500 }), beat({ lagMs: 501 })]), [undefined, undefined, 'lag']);
  t.match(judgeBeat(policy, fresh(), beat({ lagMs: 2_000 })), { detail: /lag spike 2000 ms > 500 ms/ });
});

t.test('sustained lag recycles only after lagRecycleBeats consecutive laggy beats', async (t) => {
  const policy = { ...off, maxEventLoopLagMs: 100, lagRecycleBeats: 3 };
  const history = fresh();
  t.same(judgeAll(policy, [beat({ lagMs: 150 }), beat({ lagMs: 150 })], history), [undefined, undefined]);
  t.equal(history.laggyBeats, 2);
  const third = judgeBeat(policy, history, beat({ lagMs: 150 }));
  t.match(third, { recycle: true, reason: 'lag', detail: /lag above 100 ms for 3 beats/ });
});

t.test('a good beat resets the sustained-lag count', async (t) => {
  const policy = { ...off, maxEventLoopLagMs: 100, lagRecycleBeats: 3 };
  const history = fresh();
  const verdicts = judgeAll(policy, [150, 150, 20, 150, 150, 150].map((lagMs) => beat({ lagMs })), history);
  t.same(verdicts, [undefined, undefined, undefined, undefined, undefined, 'lag']);
});

t.test('lag exactly at maxEventLoopLagMs is not laggy', async (t) => {
  const policy = { ...off, maxEventLoopLagMs: 100, lagRecycleBeats: 1 };
  t.same(judgeAll(policy, [beat({ lagMs: 100 }), beat({ lagMs: 101 })]), [undefined, 'lag']);
});

t.test('lagRecycleBeats of 1 recycles on the first laggy beat', async (t) => {
  const policy = { ...off, maxEventLoopLagMs: 100, lagRecycleBeats: 1 };
  t.match(judgeBeat(policy, fresh(), beat({ lagMs: 101 })), { recycle: true, reason: 'lag' });
});

t.test('lag histories are per worker: one laggy worker does not push another over', async (t) => {
  const policy = { ...off, maxEventLoopLagMs: 100, lagRecycleBeats: 2 };
  const first = fresh();
  const second = fresh();
  judgeBeat(policy, first, beat({ lagMs: 150 }));
  t.same(judgeBeat(policy, second, beat({ lagMs: 150 })), { recycle: false });
  t.match(judgeBeat(policy, first, beat({ lagMs: 150 })), { recycle: true });
});

t.test('disabled policies (0) never recycle, whatever the beat says', async (t) => {
  const history = fresh();
  const extreme = beat({ rss: 64 * 1024 * MiB, lagMs: 60_000 });
  const verdicts = judgeAll(off, [extreme, extreme, extreme, extreme, extreme], history);
  t.same(verdicts, [undefined, undefined, undefined, undefined, undefined]);
  t.equal(history.laggyBeats, 0, 'no lag is counted while the sustained-lag policy is off');
});

t.test('RSS is judged before lag when both are over', async (t) => {
  const policy = { ...off, maxRssMb: 100, lagSpikeMs: 10 };
  t.match(judgeBeat(policy, fresh(), beat({ rss: 200 * MiB, lagMs: 1_000 })), { reason: 'rss' });
});

t.test('wedged: silent for at least wedgedTimeoutMs reports how long', async (t) => {
  const policy = { ...off, wedgedTimeoutMs: 10_000 };
  t.equal(wedgedFor(policy, 1_000, 10_999), 0, 'silent 9 999 ms is not wedged');
  t.equal(wedgedFor(policy, 1_000, 11_000), 10_000);
  t.equal(wedgedFor(policy, 1_000, 25_000), 24_000);
});

t.test('wedged detection is off when wedgedTimeoutMs is 0', async (t) => {
  t.equal(wedgedFor(off, 0, 1_000_000), 0);
});
