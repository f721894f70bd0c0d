import t from 'tap';
import { StartupWatchdog } from '../../src/manager/watchdog.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';

function setup(persisted: Record<string, string> = {}) {
  const clock = new FakeClock();
  const warnings: Array<Record<string, unknown>> = [];
  const watchdog = new StartupWatchdog({
    clock,
    timeoutMs: 120_000,
    persistedStatus: async (id) => persisted[id],
    log: { warn: (details) => warnings.push(details) },
  });
  return { clock, warnings, watchdog };
}

t.test('a server whose running update persists in time is confirmed and never logged', async (t) => {
  const { clock, warnings, watchdog } = setup();
  watchdog.watch('s1');
  await clock.advanceAsync(60_000);
  watchdog.confirmed('s1');
  await clock.advanceAsync(120_000);
  t.same(warnings, []);
  t.equal(clock.pending, 0, 'no timer left');
});

t.test('a server that never confirms is logged once, by id, at the timeout', async (t) => {
  const { clock, warnings, watchdog } = setup({ s1: 'starting' });
  watchdog.watch('s1');
  watchdog.watch('s1');
  await clock.advanceAsync(119_999);
  t.equal(warnings.length, 0, 'nothing before the timeout');
  await clock.advanceAsync(1);
  await settle();
  t.equal(warnings.length, 1);
  t.equal(warnings[0]!.server, 's1');
  t.equal(warnings[0]!.status, 'starting');
  await clock.advanceAsync(600_000);
  t.equal(warnings.length, 1, 'no retry, no second line');
});

t.test('an update that arrives before the provider answered is kept and confirms the watch at once', async (t) => {
  const { clock, warnings, watchdog } = setup();
  watchdog.confirmed('s1');
  watchdog.watch('s1');
  t.same(watchdog.pending, []);
  await clock.advanceAsync(300_000);
  t.same(warnings, []);
  t.equal(clock.pending, 0);
});

t.test('at the timeout a running status persisted by another worker or node counts as confirmed', async (t) => {
  const { clock, warnings, watchdog } = setup({ s1: 'running' });
  watchdog.watch('s1');
  await clock.advanceAsync(120_000);
  await settle();
  t.same(warnings, []);
});

t.test('an early confirmation is forgotten after the timeout, so a later watch still waits', async (t) => {
  const { clock, warnings, watchdog } = setup();
  watchdog.confirmed('s1');
  await clock.advanceAsync(120_000);
  watchdog.watch('s1');
  t.same(watchdog.pending, ['s1']);
  await clock.advanceAsync(120_000);
  await settle();
  t.equal(warnings.length, 1);
});

t.test('close stops every timer', async (t) => {
  const { clock, watchdog } = setup();
  watchdog.watch('a');
  watchdog.confirmed('b');
  watchdog.close();
  t.equal(clock.pending, 0);
});
