import t from 'tap';
import { FakeClock, settle } from '../../helpers/fake-clock.js';
import { escalateUntilExit, type EscalationDelays, type Killable } from '../../../src/runtime/fleet/escalation.js';

const delays: EscalationDelays = { graceMs: 5_000, sigtermDelayMs: 2_000, sigintDelayMs: 1_000 };

function target(options: { throwOnKill?: boolean } = {}) {
  const signals: Array<{ signal: NodeJS.Signals; at: number }> = [];
  let markExited: () => void = () => {};
  const exited = new Promise<void>((resolve) => (markExited = resolve));
  const clock = new FakeClock();
  const killable: Killable = {
    kill(signal) {
      signals.push({ signal, at: clock.now() });
      if (options.throwOnKill) throw Object.assign(new Error('kill ESRCH'), { code: 'ESRCH' });
    },
  };
  return { clock, killable, signals, exited, exit: () => markExited() };
}

/** Tracks whether the escalation promise has settled, without awaiting it. */
function watch<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T } = { settled: false };
  void promise.then((value) => Object.assign(state, { settled: true, value }));
  return state;
}

t.test('a target that exits during the grace gets no signal', async (t) => {
  const { clock, killable, signals, exited, exit } = target();
  const result = escalateUntilExit(killable, exited, delays, clock);
  await clock.advanceAsync(4_999);
  exit();
  t.equal(await result, null);
  await clock.advanceAsync(60_000);
  t.same(signals, []);
  t.equal(clock.pending, 0, 'the pending SIGTERM was cancelled');
});

t.test('a target that never exits gets SIGTERM, SIGINT then SIGKILL at the configured delays', async (t) => {
  const { clock, killable, signals, exited, exit } = target();
  const notified: NodeJS.Signals[] = [];
  const state = watch(escalateUntilExit(killable, exited, delays, clock, (signal) => notified.push(signal)));
  await clock.advanceAsync(4_999);
  t.same(signals, [], 'nothing during the grace');
  await clock.advanceAsync(60_000);
  t.same(signals, [
    { signal: 'SIGTERM', at: 5_000 },
    { signal: 'SIGINT', at: 7_000 },
    { signal: 'SIGKILL', at: 8_000 },
  ]);
  t.same(notified, ['SIGTERM', 'SIGINT', 'SIGKILL'], 'each signal is announced');
  t.equal(state.settled, false, 'still waiting for the exit after SIGKILL');
  exit();
  await settle();
  t.same(state, { settled: true, value: 'SIGKILL' });
});

t.test('escalation stops as soon as the target exits', async (t) => {
  const { clock, killable, signals, exited, exit } = target();
  const result = escalateUntilExit(killable, exited, delays, clock);
  await clock.advanceAsync(5_000);
  t.same(signals.map((sent) => sent.signal), ['SIGTERM']);
  await clock.advanceAsync(1_000);
  exit();
  t.equal(await result, 'SIGTERM', 'resolves with the last signal sent');
  await clock.advanceAsync(60_000);
  t.same(signals.map((sent) => sent.signal), ['SIGTERM'], 'no SIGINT or SIGKILL after the exit');
});

t.test('an exit after SIGINT stops before SIGKILL', async (t) => {
  const { clock, killable, signals, exited, exit } = target();
  const result = escalateUntilExit(killable, exited, delays, clock);
  await clock.advanceAsync(7_500);
  exit();
  t.equal(await result, 'SIGINT');
  await clock.advanceAsync(60_000);
  t.same(signals.map((sent) => sent.signal), ['SIGTERM', 'SIGINT']);
});

t.test('a zero grace signals at once', async (t) => {
  const { clock, killable, signals, exited, exit } = target();
  const result = escalateUntilExit(killable, exited, { ...delays, graceMs: 0 }, clock);
  await clock.advanceAsync(0);
  t.same(signals, [{ signal: 'SIGTERM', at: 0 }]);
  exit();
  t.equal(await result, 'SIGTERM');
});

t.test('a target already gone when signalled does not break the escalation', async (t) => {
  const { clock, killable, signals, exited, exit } = target({ throwOnKill: true });
  const state = watch(escalateUntilExit(killable, exited, delays, clock));
  await clock.advanceAsync(60_000);
  t.same(signals.map((sent) => sent.signal), ['SIGTERM', 'SIGINT', 'SIGKILL'], 'every step still ran');
  exit();
  await settle();
  t.same(state, { settled: true, value: 'SIGKILL' });
});

t.test('a target that is already gone is never signalled', async (t) => {
  const { clock, killable, signals, exited, exit } = target();
  exit();
  const result = escalateUntilExit(killable, exited, { ...delays, graceMs: 0 }, clock);
  t.equal(await result, null);
  await clock.advanceAsync(60_000);
  t.same(signals, []);
});
