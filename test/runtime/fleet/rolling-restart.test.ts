import t from 'tap';
import { RollingRestart } from '../../../src/runtime/fleet/rolling-restart.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { fakeRecord } from '../../helpers/fake-workers.js';
import { RecordedEvents } from '../../helpers/fleet-fakes.js';
import type { WorkerRecord } from '../../../src/runtime/fleet/worker-record.js';

function setup(replacementReady: (slot: number) => boolean) {
  const records = [fakeRecord(1), fakeRecord(2), fakeRecord(3)];
  const recycled: number[] = [];
  const warnings: Array<{ fields: object; message: string }> = [];
  const events = new RecordedEvents();
  const rolling = new RollingRestart({
    clock: new FakeClock(),
    events,
    records,
    isStopping: () => false,
    patchEnv: () => undefined,
    freshStart: () => undefined,
    recycle: async (record: WorkerRecord) => {
      recycled.push(record.slot);
      return replacementReady(record.slot);
    },
    log: { warn: (fields, message) => warnings.push({ fields, message }) },
  });
  return { rolling, recycled, warnings, events };
}

t.test('a rolling restart replaces every worker one after the other', async (t) => {
  const { rolling, recycled, warnings, events } = setup(() => true);
  await rolling.restartWorkers();
  t.same(recycled, [1, 2, 3]);
  t.same(warnings, []);
  t.equal(events.of('restart:complete').length, 1);
});

t.test('a replacement that does not become ready stops the roll: that worker and the ones after it keep serving', async (t) => {
  const { rolling, recycled, warnings, events } = setup((slot) => slot !== 2);
  await rolling.restartWorkers();
  t.same(recycled, [1, 2], 'worker 3 is not touched once worker 2 could not be replaced');
  t.equal(warnings.length, 1, 'one warning');
  t.match(warnings[0], { fields: { worker: 2, kept: [2, 3] }, message: /rolling restart stopped/ });
  t.equal(events.of('restart:complete').length, 1, 'the roll still completes, so callers are answered');
});
