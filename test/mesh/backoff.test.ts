import t from 'tap';
import { DEFAULT_RECONNECT, reconnectDelayMs, stopsRetries } from '../../src/mesh/backoff.js';

t.test('production schedule: min(30000, 1000 × 1.5^attempt) + random(500, 4500)', async (t) => {
  t.same(DEFAULT_RECONNECT, { baseMs: 1_000, maxDelayMs: 30_000, jitterMinMs: 500, jitterMaxMs: 4_500, maxAttempts: 10 }, 'SPEC 6.3 defaults');
  const lowest = () => 0;
  t.same(
    Array.from({ length: 10 }, (_, attempt) => reconnectDelayMs(attempt, DEFAULT_RECONNECT, lowest)),
    [1_500, 2_000, 2_750, 3_875, 5_563, 8_094, 11_891, 17_586, 26_129, 30_500],
    'with the smallest jitter: 1000 × 1.5^n + 500, capped at 30000 from attempt 9',
  );
});

t.test('the jitter spans 500 to 4500 ms on top of the backoff', async (t) => {
  t.equal(reconnectDelayMs(0, DEFAULT_RECONNECT, () => 0), 1_500);
  t.equal(reconnectDelayMs(0, DEFAULT_RECONNECT, () => 0.5), 3_500);
  t.equal(reconnectDelayMs(0, DEFAULT_RECONNECT, () => 0.999_999), 5_500);
  t.equal(reconnectDelayMs(20, DEFAULT_RECONNECT, () => 0.999_999), 34_500, 'cap + largest jitter');
});

t.test('every delay stays inside its bounds with the real random source', async (t) => {
  for (let attempt = 0; attempt < 15; attempt++) {
    const backoff = Math.min(30_000, 1_000 * 1.5 ** attempt);
    // Delays are whole milliseconds, rounded from backoff + jitter: the bounds are rounded the same way.
    const [lowest, highest] = [Math.round(backoff + 500), Math.round(backoff + 4_500)];
    for (let i = 0; i < 50; i++) {
      const delay = reconnectDelayMs(attempt);
      if (!Number.isInteger(delay) || delay < lowest || delay > highest) t.fail(`attempt ${attempt}: ${delay} not in [${lowest}, ${highest}]`);
    }
  }
  t.pass('750 whole-millisecond delays within [backoff + 500, backoff + 4500], rounded');
});

t.test('huge or odd attempt numbers stay at the cap and never go below the base', async (t) => {
  t.equal(reconnectDelayMs(5_000, DEFAULT_RECONNECT, () => 0), 30_500, '1.5^5000 is Infinity: still the cap');
  t.equal(reconnectDelayMs(-3, DEFAULT_RECONNECT, () => 0), 1_500, 'negative attempts count as the first');
  t.equal(reconnectDelayMs(1.7, DEFAULT_RECONNECT, () => 0), 2_000, 'fractional attempts round down');
});

t.test('a shortened schedule (tests) keeps the same formula', async (t) => {
  const fast = { baseMs: 100, maxDelayMs: 400, jitterMinMs: 10, jitterMaxMs: 20, maxAttempts: 3 };
  t.same([0, 1, 2, 3, 4].map((attempt) => reconnectDelayMs(attempt, fast, () => 0)), [110, 160, 235, 348, 410]);
});

t.test('close code 1000 stops retries; 1012, 1001 and abnormal closes do not', async (t) => {
  t.equal(stopsRetries(1000), true, 'node shutdown / organization closed');
  t.equal(stopsRetries(1012), false, 'restart');
  t.equal(stopsRetries(1006), false, 'abnormal closure');
  t.equal(stopsRetries(1001), false, 'going away');
  t.equal(stopsRetries(1008), false, 'policy violation');
});
