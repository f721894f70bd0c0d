import t from 'tap';
import { FakeClock } from '../helpers/fake-clock.js';
import { ReadinessGrace } from '../../src/runtime/readiness-grace.js';

function grace(ms: number) {
  const clock = new FakeClock();
  const changes: boolean[] = [];
  const subject: ReadinessGrace = new ReadinessGrace(ms, clock, () => changes.push(subject.active));
  return { clock, changes, subject };
}

t.test('readiness is off for the grace and while the action runs, and the action runs only after the grace', async (t) => {
  const { clock, changes, subject } = grace(5_000);
  const ran: number[] = [];
  let finish!: () => void;
  const held = subject.hold(async () => {
    ran.push(clock.now());
    await new Promise<void>((resolve) => (finish = resolve));
    return 'done';
  });
  t.equal(subject.active, true, 'off at once');
  t.same(changes, [true]);
  await clock.advanceAsync(4_999);
  t.same(ran, [], 'not before the grace ends');
  await clock.advanceAsync(1);
  t.same(ran, [5_000], 'the action runs when it ends');
  t.equal(subject.active, true, 'still off while the action runs');
  finish();
  t.equal(await held, 'done');
  t.equal(subject.active, false);
  t.same(changes, [true, false], 'one change each way');
});

t.test('overlapping holds keep readiness off until the last one is done', async (t) => {
  const { clock, changes, subject } = grace(1_000);
  const first = subject.hold(async () => 1);
  await clock.advanceAsync(500);
  const second = subject.hold(async () => 2);
  await clock.advanceAsync(500);
  t.equal(await first, 1);
  t.equal(subject.active, true, 'the second grace is still running');
  await clock.advanceAsync(500);
  t.equal(await second, 2);
  t.same(changes, [true, false]);
});

t.test('cancel() ends waiting holds without their action', async (t) => {
  const { clock, subject } = grace(1_000);
  let ran = false;
  const held = subject.hold(async () => {
    ran = true;
  });
  await clock.advanceAsync(10);
  subject.cancel();
  t.equal(await held, undefined);
  t.equal(ran, false);
  t.equal(subject.active, false, 'ready again');
  t.equal(clock.pending, 0, 'the timer is gone');
});

t.test('0 turns the grace off: the action runs at once and readiness never changes', async (t) => {
  const { changes, subject } = grace(0);
  t.equal(await subject.hold(async () => 'now'), 'now');
  t.same(changes, []);
});

t.test('an action that throws still turns readiness back on', async (t) => {
  const { clock, subject } = grace(100);
  const held = t.rejects(
    subject.hold(async () => {
      throw new Error('boom');
    }),
    /boom/,
  );
  await clock.advanceAsync(100);
  await held;
  t.equal(subject.active, false);
});

t.test('a hold ends its wait early when its `over` promise settles, and runs the action then', async (t) => {
  const { clock, subject } = grace(5_000);
  let end!: () => void;
  const over = new Promise<void>((resolve) => (end = resolve));
  const ran: number[] = [];
  const held = subject.hold(async () => ran.push(clock.now()), over);
  await clock.advanceAsync(1_000);
  end();
  await held;
  t.same(ran, [1_000], 'the action ran when nothing was left to protect');
  t.equal(subject.active, false);
});
