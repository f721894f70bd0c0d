import t from 'tap';
import { StoreError, StoreUnavailableError } from '../../src/db/errors.js';
import { openStoreWithRetry, type StoreOpenAttempt } from '../../src/db/open-retry.js';
import type { StoreConfig } from '../../src/db/open.js';
import type { Store } from '../../src/db/types.js';

const config: StoreConfig = { dataDir: '/unused', db: {}, mongodb: { url: 'mongodb://db.example/fleet' } };
const store = { backend: 'mongodb' } as Store;

function recorder() {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const waits: number[] = [];
  return {
    lines,
    waits,
    log: { warn: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }) },
    wait: async (ms: number) => {
      waits.push(ms);
    },
  };
}

t.test('an unreachable store is retried with a growing, capped backoff and one log line per attempt', async (t) => {
  const { lines, waits, log, wait } = recorder();
  const attempts: StoreOpenAttempt[] = [];
  let calls = 0;
  const opened = await openStoreWithRetry(config, log, {
    wait,
    initialDelayMs: 100,
    maxDelayMs: 400,
    onAttempt: (attempt) => attempts.push(attempt),
    connect: async () => {
      calls += 1;
      if (calls <= 5) throw new StoreUnavailableError('cannot connect to MongoDB: connect ECONNREFUSED');
      return store;
    },
  });
  t.equal(opened, store, 'the store of the attempt that succeeded');
  t.equal(calls, 6);
  t.equal(lines.length, 5, 'one line per failed attempt');
  t.match(lines[0], { fields: { attempt: 1, code: 'store_unavailable' }, message: /attempt 1.*retrying in \d+ ms/ });
  t.same(attempts.map((attempt) => attempt.attempt), [1, 2, 3, 4, 5], 'onAttempt told of each failure (e.g. to keep /readyz at 503)');
  t.same(attempts.map((attempt) => attempt.retryInMs), waits, 'it waits what it announced');
  for (const [i, ms] of waits.entries()) {
    const base = Math.min(400, 100 * 2 ** i);
    t.ok(ms >= base / 2 && ms <= base, `wait ${i + 1} (${ms} ms) within the jittered step ${base / 2}–${base} ms`);
  }
});

t.test('a store that cannot be served is not retried: the error comes back at once', async (t) => {
  const { lines, log, wait } = recorder();
  const tooOld = new StoreError('MongoDB 4.4.1 is too old: fleetplane needs MongoDB 5.0 or later', 'store_unsupported');
  let calls = 0;
  const error = await openStoreWithRetry(config, log, {
    wait,
    connect: async () => {
      calls += 1;
      throw tooOld;
    },
  }).catch((failure: unknown) => failure);
  t.equal(error, tooOld);
  t.equal(calls, 1);
  t.equal(lines.length, 0);
});

t.test('an abort stops the retries with the last error', async (t) => {
  const { log } = recorder();
  const controller = new AbortController();
  let calls = 0;
  const error = await openStoreWithRetry(config, log, {
    signal: controller.signal,
    onAttempt: () => controller.abort(),
    connect: async () => {
      calls += 1;
      throw new StoreUnavailableError('cannot connect to MongoDB');
    },
  }).catch((failure: unknown) => failure);
  t.match(error, { code: 'store_unavailable' });
  t.equal(calls, 1, 'no attempt after the abort');
});
