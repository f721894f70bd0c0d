import t from 'tap';
import { TerminationCleanup } from '../../src/manager/cleanup.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';

function setup(deleteServer: (id: string) => Promise<void> = async () => undefined) {
  const clock = new FakeClock();
  const deleted: string[] = [];
  const warnings: Array<Record<string, unknown>> = [];
  const cleanup = new TerminationCleanup({
    clock,
    delayMs: 60_000,
    deleteServer: async (id) => {
      await deleteServer(id);
      deleted.push(id);
    },
    log: { info: () => undefined, warn: (details) => warnings.push(details) },
  });
  return { clock, deleted, warnings, cleanup };
}

t.test('a terminating server is deleted once, one delay after the first report', async (t) => {
  const { clock, deleted, cleanup } = setup();
  cleanup.terminating('s1');
  await clock.advanceAsync(30_000);
  cleanup.terminating('s1');
  t.ok(cleanup.scheduled('s1'));
  await clock.advanceAsync(30_000);
  await settle();
  t.same(deleted, ['s1'], 'a duplicate report did not postpone it');
  await clock.advanceAsync(120_000);
  t.same(deleted, ['s1'], 'and it ran once');
});

t.test('a persisted failed status cancels the pending cleanup', async (t) => {
  const { clock, deleted, cleanup } = setup();
  cleanup.terminating('s1');
  cleanup.failed('s1');
  t.notOk(cleanup.scheduled('s1'));
  t.equal(clock.pending, 0);
  await clock.advanceAsync(120_000);
  t.same(deleted, []);
});

t.test('a failing deletion is logged once and not retried', async (t) => {
  let calls = 0;
  const { clock, warnings, cleanup } = setup(async () => {
    calls++;
    throw new Error('store down');
  });
  cleanup.terminating('s1');
  await clock.advanceAsync(60_000);
  await settle();
  await clock.advanceAsync(600_000);
  t.equal(calls, 1);
  t.equal(warnings.length, 1);
  t.equal(warnings[0]!.server, 's1');
});
