import t from 'tap';
import { RateLimitedWarnings } from '../../src/logging/rate-limited.js';
import { FakeClock } from '../helpers/fake-clock.js';

function setup() {
  const clock = new FakeClock(1_000);
  const lines: Array<{ via: string; fields: Record<string, unknown>; message: string }> = [];
  const logTo = (via: string) => ({ warn: (fields: object, message: string) => void lines.push({ via, fields: fields as Record<string, unknown>, message }) });
  const warnings = new RateLimitedWarnings({ max: 3, windowMs: 10_000, what: 'bad frames', log: logTo('summary'), clock });
  const warn = (i: number) => warnings.warn(logTo('request'), { i }, 'bad frame');
  return { clock, lines, warn };
}

t.test('at most `max` lines per window, then one summary at the end of the window with the count left out', async (t) => {
  const { clock, lines, warn } = setup();
  for (let i = 0; i < 50; i++) warn(i);
  t.same(lines.map((line) => line.fields.i), [0, 1, 2], 'the first three are written, on the logger they were given');
  t.ok(lines.every((line) => line.via === 'request'));
  t.equal(clock.pending, 1, 'one summary is scheduled, however many are left out');

  clock.advance(9_999);
  t.equal(lines.length, 3, 'nothing before the window ends');
  clock.advance(1);
  t.equal(lines.length, 4);
  t.same(lines[3], { via: 'summary', fields: { suppressed: 47, windowMs: 10_000 }, message: '47 more bad frames in the last 10 s were not logged' });
  t.equal(clock.pending, 0);

  for (let i = 100; i < 105; i++) warn(i);
  t.same(lines.slice(4).map((line) => line.fields.i), [100, 101, 102], 'a new window has a new quota');
});

t.test('a quiet window writes no summary', async (t) => {
  const { clock, lines, warn } = setup();
  warn(1);
  warn(2);
  clock.advance(60_000);
  t.equal(lines.length, 2);
  t.equal(clock.pending, 0, 'no timer while nothing is left out');
});

t.test('the old window is summarized before a new one starts, even when its timer is late', async (t) => {
  // A clock whose timers run only when the test says: the next line arrives before the summary timer ran.
  let now = 0;
  const timers = new Set<() => void>();
  const clock = {
    now: () => now,
    setTimeout: (fn: () => void) => {
      timers.add(fn);
      return () => void timers.delete(fn);
    },
  };
  const messages: string[] = [];
  const log = { warn: (_fields: object, message: string) => void messages.push(message) };
  const warnings = new RateLimitedWarnings({ max: 3, windowMs: 10_000, what: 'bad frames', log, clock });
  for (let i = 0; i < 5; i++) warnings.warn(log, {}, 'bad frame');
  t.equal(timers.size, 1);
  now = 10_000;
  warnings.warn(log, {}, 'bad frame');
  t.same(messages.slice(3), ['2 more bad frames in the last 10 s were not logged', 'bad frame']);
  t.equal(timers.size, 0, 'the late timer is cancelled: the count is not reported twice');
});
