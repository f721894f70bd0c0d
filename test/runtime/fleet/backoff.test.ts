import t from 'tap';
import { Backoff } from '../../../src/runtime/fleet/backoff.js';

const options = { backoffMs: 100, maxBackoffMs: 1_000, backoffMultiplier: 2 };

t.test('the first delay is backoffMs and each following one grows by the multiplier', async (t) => {
  const backoff = new Backoff(options);
  t.same([backoff.next(), backoff.next(), backoff.next(), backoff.next()], [100, 200, 400, 800]);
  t.equal(backoff.attempt, 4, 'every delay handed out counts as an attempt');
});

t.test('delays stop growing at maxBackoffMs', async (t) => {
  const backoff = new Backoff(options);
  const delays = Array.from({ length: 8 }, () => backoff.next());
  t.same(delays, [100, 200, 400, 800, 1_000, 1_000, 1_000, 1_000]);
});

t.test('a huge attempt count stays at the cap instead of overflowing', async (t) => {
  const backoff = new Backoff(options);
  for (let i = 0; i < 2_000; i++) backoff.next();
  t.equal(backoff.next(), 1_000);
});

t.test('reset starts again from backoffMs', async (t) => {
  const backoff = new Backoff(options);
  backoff.next();
  backoff.next();
  backoff.next();
  backoff.reset();
  t.equal(backoff.attempt, 0);
  t.equal(backoff.next(), 100);
  t.equal(backoff.next(), 200);
});

t.test('fractional multipliers give whole-millisecond delays', async (t) => {
  const backoff = new Backoff({ backoffMs: 100, maxBackoffMs: 10_000, backoffMultiplier: 1.5 });
  t.same([backoff.next(), backoff.next(), backoff.next(), backoff.next()], [100, 150, 225, 338]);
});

t.test('a multiplier of 1 keeps a constant delay', async (t) => {
  const backoff = new Backoff({ backoffMs: 250, maxBackoffMs: 10_000, backoffMultiplier: 1 });
  t.same([backoff.next(), backoff.next(), backoff.next()], [250, 250, 250]);
});
