import t from 'tap';
import { FakeClock } from '../../helpers/fake-clock.js';
import { MAX_CONSECUTIVE_FORK_FAILURES, RestartCoordinator } from '../../../src/runtime/fleet/restart-coordinator.js';

interface Restart {
  slot: number;
  pid: number;
  attempt: number;
  delayMs: number;
  at: number;
}

function setup(options: Partial<{ backoffMs: number; maxBackoffMs: number; backoffMultiplier: number; stabilityWindowMs: number }> = {}) {
  const clock = new FakeClock();
  const restarts: Restart[] = [];
  const forkAttempts: Array<{ slot: number; at: number }> = [];
  const forkErrors: Array<{ slot: number; error: unknown }> = [];
  const exhausted: unknown[] = [];
  let failuresToCome = 0;
  let nextPid = 1_000;
  const coordinator = new RestartCoordinator(
    {
      clock,
      fork(slot) {
        forkAttempts.push({ slot, at: clock.now() });
        if (failuresToCome > 0) {
          failuresToCome--;
          throw new Error('spawn EMFILE');
        }
        return { pid: nextPid++ };
      },
      onRestart: (slot, pid, attempt, delayMs) => restarts.push({ slot, pid, attempt, delayMs, at: clock.now() }),
      onForkError: (slot, error) => forkErrors.push({ slot, error }),
      onForkExhausted: (error) => exhausted.push(error),
    },
    { backoffMs: 100, maxBackoffMs: 1_000, backoffMultiplier: 2, stabilityWindowMs: 5_000, ...options },
  );
  return {
    clock,
    coordinator,
    restarts,
    forkAttempts,
    forkErrors,
    exhausted,
    failNextForks(count: number) {
      failuresToCome = count;
    },
  };
}

/** Crash a slot and let its replacement fork; returns the delay it waited. */
function crashAndReplace(harness: ReturnType<typeof setup>, slot: number): number {
  const before = harness.restarts.length;
  harness.coordinator.enqueue(slot);
  harness.clock.advance(10_000);
  if (harness.restarts.length !== before + 1) throw new Error(`slot ${slot} was not replaced`);
  return harness.restarts.at(-1)!.delayMs;
}

t.test('a crashed slot is forked again after the first backoff delay', async (t) => {
  const { clock, coordinator, restarts } = setup();
  coordinator.enqueue(3);
  t.same(coordinator.pending, [3]);
  clock.advance(99);
  t.equal(restarts.length, 0, 'nothing forks before the delay');
  clock.advance(1);
  t.same(restarts, [{ slot: 3, pid: 1_000, attempt: 1, delayMs: 100, at: 100 }]);
  t.same(coordinator.pending, []);
});

t.test('restarts go one at a time through the queue, each waiting the next backoff delay', async (t) => {
  const { clock, coordinator, restarts } = setup();
  coordinator.enqueue(1);
  coordinator.enqueue(2);
  coordinator.enqueue(3);
  t.equal(clock.pending, 1, 'only one restart is scheduled at a time');
  t.same(coordinator.pending, [1, 2, 3]);
  clock.advance(10_000);
  t.same(
    restarts.map(({ slot, at, delayMs, attempt }) => ({ slot, at, delayMs, attempt })),
    [
      { slot: 1, at: 100, delayMs: 100, attempt: 1 },
      { slot: 2, at: 300, delayMs: 200, attempt: 2 },
      { slot: 3, at: 700, delayMs: 400, attempt: 3 },
    ],
  );
});

t.test('a slot already waiting in the queue is not queued twice', async (t) => {
  const { clock, coordinator, restarts } = setup();
  coordinator.enqueue(1);
  coordinator.enqueue(1);
  t.same(coordinator.pending, [1]);
  clock.advance(10_000);
  t.equal(restarts.length, 1);
});

t.test('repeated crashes follow the backoff up to its cap', async (t) => {
  const harness = setup();
  const delays = Array.from({ length: 7 }, () => crashAndReplace(harness, 1));
  t.same(delays, [100, 200, 400, 800, 1_000, 1_000, 1_000]);
  t.same(
    harness.restarts.map((restart) => restart.attempt),
    [1, 2, 3, 4, 5, 6, 7],
  );
});

t.test('the backoff resets once a replacement stayed ready for the whole stability window', async (t) => {
  const harness = setup();
  crashAndReplace(harness, 1);
  crashAndReplace(harness, 1);
  harness.coordinator.replacementReady();
  harness.clock.advance(4_999);
  t.equal(harness.coordinator.currentAttempt, 2, 'not yet: the window is not over');
  harness.clock.advance(1);
  t.equal(harness.coordinator.currentAttempt, 0);
  t.equal(crashAndReplace(harness, 1), 100, 'the next crash starts again from backoffMs');
});

t.test('a crash inside the stability window keeps the backoff growing', async (t) => {
  const harness = setup();
  crashAndReplace(harness, 1);
  harness.coordinator.replacementReady();
  harness.clock.advance(4_000);
  t.equal(crashAndReplace(harness, 2), 200, 'the crash 4 s into the window waits the grown delay');
  t.equal(harness.coordinator.currentAttempt, 2, 'the interrupted window never reset the backoff');
  harness.clock.advance(60_000);
  t.equal(harness.coordinator.currentAttempt, 2, 'no window is running until a replacement is ready again');
  t.equal(crashAndReplace(harness, 1), 400);
});

t.test('a new ready worker restarts the stability window rather than stacking a second one', async (t) => {
  const harness = setup();
  crashAndReplace(harness, 1);
  harness.coordinator.replacementReady();
  harness.clock.advance(3_000);
  harness.coordinator.replacementReady();
  harness.clock.advance(2_000);
  t.equal(harness.coordinator.currentAttempt, 1, 'the first window was replaced by the second');
  harness.clock.advance(3_000);
  t.equal(harness.coordinator.currentAttempt, 0);
});

t.test('the stability window does not reset the backoff while restarts are still queued', async (t) => {
  const { clock, coordinator, restarts } = setup({ backoffMs: 10_000, maxBackoffMs: 60_000 });
  coordinator.enqueue(1);
  coordinator.enqueue(2);
  clock.advance(10_000);
  t.equal(restarts.length, 1, 'slot 1 replaced, slot 2 still waiting its 20 s');
  coordinator.replacementReady();
  clock.advance(5_000);
  t.same(coordinator.pending, [2]);
  t.equal(coordinator.currentAttempt, 2, 'the backoff kept its growth');
});

t.test('a stability window of 0 resets the backoff as soon as a replacement is ready', async (t) => {
  const harness = setup({ stabilityWindowMs: 0 });
  crashAndReplace(harness, 1);
  crashAndReplace(harness, 1);
  harness.coordinator.replacementReady();
  t.equal(harness.coordinator.currentAttempt, 0);
  t.equal(crashAndReplace(harness, 1), 100);
});

t.test('a failed fork is retried through the backoff', async (t) => {
  const { clock, coordinator, restarts, forkAttempts, forkErrors, exhausted, failNextForks } = setup();
  failNextForks(1);
  coordinator.enqueue(4);
  clock.advance(100);
  t.same(forkAttempts, [{ slot: 4, at: 100 }]);
  t.equal(forkErrors.length, 1);
  t.equal(forkErrors[0]!.slot, 4);
  t.match(forkErrors[0]!.error, { message: 'spawn EMFILE' });
  t.same(coordinator.pending, [4], 'the slot is queued again');
  clock.advance(200);
  t.same(restarts.map(({ slot, attempt, delayMs, at }) => ({ slot, attempt, delayMs, at })), [{ slot: 4, attempt: 2, delayMs: 200, at: 300 }]);
  t.same(exhausted, []);
});

t.test('after three consecutive fork failures onForkExhausted fires once and the queue stops', async (t) => {
  t.equal(MAX_CONSECUTIVE_FORK_FAILURES, 3);
  const { clock, coordinator, restarts, forkAttempts, forkErrors, exhausted, failNextForks } = setup();
  failNextForks(100);
  coordinator.enqueue(1);
  coordinator.enqueue(2);
  clock.advance(100 + 200 + 400);
  t.equal(forkErrors.length, 3);
  t.equal(exhausted.length, 1);
  t.match(exhausted[0], { message: 'spawn EMFILE' }, 'the last fork error is reported');
  t.same(coordinator.pending, [], 'queued restarts are abandoned');
  coordinator.enqueue(3);
  clock.advance(60_000);
  t.equal(forkAttempts.length, 3, 'no fork is attempted any more, not even for new crashes');
  t.equal(restarts.length, 0);
  t.equal(exhausted.length, 1);
  t.equal(clock.pending, 0, 'no timer is left behind');
});

t.test('a successful fork resets the consecutive failure count', async (t) => {
  const { clock, coordinator, restarts, forkErrors, exhausted, failNextForks } = setup();
  failNextForks(2);
  coordinator.enqueue(1);
  clock.advance(10_000);
  t.equal(restarts.length, 1, 'third attempt succeeded');
  failNextForks(2);
  coordinator.enqueue(1);
  clock.advance(10_000);
  t.equal(forkErrors.length, 4);
  t.equal(restarts.length, 2);
  t.same(exhausted, [], 'never three failures in a row');
});

t.test('stop() drops queued restarts and refuses new ones', async (t) => {
  const { clock, coordinator, forkAttempts } = setup();
  coordinator.enqueue(1);
  coordinator.enqueue(2);
  coordinator.stop();
  t.same(coordinator.pending, []);
  t.equal(clock.pending, 0, 'the scheduled restart is cancelled');
  coordinator.enqueue(3);
  clock.advance(60_000);
  t.same(forkAttempts, []);
});

t.test('stop() also cancels a running stability window', async (t) => {
  const harness = setup();
  crashAndReplace(harness, 1);
  harness.coordinator.replacementReady();
  harness.coordinator.stop();
  t.equal(harness.clock.pending, 0);
});

t.test('resume() after stop() lets restarts through again with a fresh failure count', async (t) => {
  const { clock, coordinator, restarts, exhausted, failNextForks } = setup();
  failNextForks(3);
  coordinator.enqueue(1);
  clock.advance(10_000);
  t.equal(exhausted.length, 1);
  coordinator.resume();
  failNextForks(2);
  coordinator.enqueue(1);
  clock.advance(60_000);
  t.equal(restarts.length, 1, 'two failures after resume() are retried, not exhausted');
  t.equal(exhausted.length, 1);
});
