import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { InProcessPool } from '../../src/runtime/in-process-pool.js';
import { serverEvents } from '../../src/runtime/events.js';
import { WorkerRuntime } from '../../src/runtime/worker.js';
import { fakeConnection } from '../helpers/fake-workers.js';
import { silentLog } from '../helpers/fleet-fakes.js';

function setup() {
  const { config } = loadConfig({ object: { workers: 0 }, env: {} });
  const worker = new WorkerRuntime(config, 0, silentLog, serverEvents(silentLog), () => {});
  return { worker, pool: new InProcessPool(worker) };
}

t.test('single-process mode: one worker, worker 0, served in the primary; nothing forked', async (t) => {
  const { pool } = setup();
  t.equal(pool.workerCount, 0, 'no forked worker');
  t.equal(pool.target, 1, 'but one worker to have serving');
  t.same(pool.records, []);
  t.equal(pool.handsOver, false, 'no hand-over: the app runs in the primary itself');
  t.same(pool.slots(), [0]);
  t.same(pool.slots(3), [0], 'any worker number addresses the only worker');
});

t.test('a worker not ready yet serves nothing and takes no last worker out', async (t) => {
  const { pool } = setup();
  t.equal(pool.active, 0);
  t.equal(pool.serve(fakeConnection(), false), false, 'the caller answers it with the fallback');
  t.same(pool.statuses([0]), ['starting']);
  t.equal(pool.takesOutLast([0]), false);
  t.same(pool.fleetHealth(), { target: 1, active: 0, quarantined: 0, breaker: { count: 0, tripped: false }, restartsPending: 0, workers: [] });
  t.equal(pool.noneServing(), undefined, 'a shutdown grace runs its full length');
});

t.test('the worker count is chosen by config only; starting needs the app', async (t) => {
  const { pool } = setup();
  t.throws(() => pool.resize(), /this server runs in single-process mode \(workers: 0\)/);
  await t.rejects(pool.start({}), /single-process mode needs the app to serve/);
});

t.test('an environment patch lands on this process, where the app is built', async (t) => {
  const { pool } = setup();
  const name = `FLEETPLANE_POOL_TEST_${process.pid}`;
  t.teardown(() => delete process.env[name]);
  pool.patchEnv({ [name]: 'here' });
  t.equal(process.env[name], 'here');
});

t.test('metrics are the in-process worker\'s own registry, labelled worker 0', async (t) => {
  const { pool } = setup();
  const [metrics] = await pool.metricsJson();
  const sample = metrics?.find((metric) => metric.values.length > 0);
  t.equal(sample?.values[0]?.labels.worker, '0');
});
