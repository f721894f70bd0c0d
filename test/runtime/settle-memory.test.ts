import t from 'tap';
import { spawnSync } from 'node:child_process';
import { LOOK_EVERY_MS, QUIET_FOR_MS, QUIET_UTILIZATION, settleWhenQuiet, takeCollector } from '../../src/runtime/settle-memory.js';
import { FakeClock } from '../helpers/fake-clock.js';

/**
 * A settler on a fake clock whose event loop reports the utilizations given, one per sampled period of
 * LOOK_EVERY_MS, and whose collections settle the young generation from the `settlesAt`-th on.
 */
function settler(utilizations: number[], settlesAt = 1) {
  const clock = new FakeClock();
  let collections = 0;
  // The first call marks the start of the first period.
  const periods = [0, ...utilizations];
  const utilization = () => periods.shift() ?? 1;
  const stop = settleWhenQuiet({ collect: () => ++collections >= settlesAt, clock, utilization });
  return { clock, stop, collections: () => collections };
}

t.test('a worker quiet from its ready on collects once, when it has been quiet for QUIET_FOR_MS', async (t) => {
  const { clock, collections } = settler([0.01, 0.01, 0.01]);
  clock.advance(QUIET_FOR_MS - 1);
  t.equal(collections(), 0, 'not before the window has passed');
  clock.advance(1);
  t.equal(collections(), 1);
  clock.advance(QUIET_FOR_MS * 20);
  t.equal(collections(), 1, 'once only');
  t.equal(clock.pending, 0, 'no timer is left');
});

t.test('a worker busy in its first seconds collects once the whole window after its work has been quiet', async (t) => {
  // 2 s busy at 30 %, then quiet: the windows ending at 6 s (10 %) and 8 s (0 %).
  const { clock, collections } = settler([0.3, 0, 0, 0]);
  clock.advance(QUIET_FOR_MS);
  t.equal(collections(), 0, 'the window still holds the busy period');
  clock.advance(LOOK_EVERY_MS);
  t.equal(collections(), 1, 'collected once the window slid past it');
});

t.test('a short burst inside a quiet stretch keeps the worker from collecting until the window is past it', async (t) => {
  const average = QUIET_UTILIZATION * 3;
  // A window averaging exactly the threshold is busy.
  const { clock, collections } = settler([0, 0, average, 0, 0, 0]);
  clock.advance(LOOK_EVERY_MS * 5);
  t.equal(collections(), 0, 'every window up to 10 s holds the burst');
  clock.advance(LOOK_EVERY_MS);
  t.equal(collections(), 1);
});

t.test('a collection that left the young generation as it was is followed by another at the next quiet look', async (t) => {
  const { clock, collections } = settler([0, 0, 0, 0, 0.5, 0, 0, 0], 2);
  clock.advance(QUIET_FOR_MS);
  t.equal(collections(), 1);
  clock.advance(LOOK_EVERY_MS);
  t.equal(collections(), 2, 'settled by the second');
  clock.advance(LOOK_EVERY_MS * 50);
  t.equal(collections(), 2);
  t.equal(clock.pending, 0);
});

t.test('a worker that stays busy stops looking after 22 samples', async (t) => {
  const { clock, collections } = settler(Array(30).fill(0.5));
  clock.advance(LOOK_EVERY_MS * 21);
  t.equal(clock.pending, 1, 'the 22nd sample is still to come');
  clock.advance(LOOK_EVERY_MS);
  t.equal(clock.pending, 0, 'none is scheduled after the 22nd');
  t.equal(collections(), 0);
});

t.test('stopping (the worker shuts down) cancels the look', async (t) => {
  const { clock, stop, collections } = settler([0]);
  stop();
  t.equal(clock.pending, 0);
  clock.advance(QUIET_FOR_MS * 2);
  t.equal(collections(), 0);
  stop();
});

t.test('the collector leaves the global scope unless the operator asked for it', async (t) => {
  let calls = 0;
  const scope: { gc?: unknown } = { gc: () => void calls++ };
  const collect = takeCollector(false, scope);
  t.equal(scope.gc, undefined, 'gone from the scope');
  t.type(collect!(), 'boolean', 'it says whether the young generation is settled');
  t.equal(calls, 1, 'and still callable by the worker');
  const kept: { gc?: unknown } = { gc: () => undefined };
  t.type(takeCollector(true, kept), 'function');
  t.type(kept.gc, 'function', 'kept when asked for');
  t.equal(takeCollector(false, {}), undefined, 'none without --expose-gc');
});

t.test('in a process started with --expose-gc, the settler collects what the start left behind', async (t) => {
  // A process that allocates as a start does, then is quiet: the settler's collection, made by the function taken
  // from the global scope, frees what the start dropped (the heap in use before and after it).
  const script = `
    const v8 = require('node:v8');
    const used = () => v8.getHeapStatistics().used_heap_size;
    let keep = [];
    for (let round = 0; round < 40; round += 1) { keep.push(Array.from({ length: 20000 }, (_, i) => ({ i, text: 'x' + i }))); if (keep.length > 8) keep.shift(); }
    import(${JSON.stringify(new URL('../../dist/src/runtime/settle-memory.js', import.meta.url).href)}).then(({ settleWhenQuiet, takeCollector }) => {
      const collect = takeCollector(false);
      if (globalThis.gc !== undefined) throw new Error('gc is still global');
      const clock = { now: Date.now, setTimeout: (fn, ms) => { const timer = setTimeout(fn, ms); return () => clearTimeout(timer); } };
      // The start's data is dropped only as the settler collects: V8 cannot have freed it on its own before.
      settleWhenQuiet({ collect: () => { const before = used(); keep = null; collect(); console.log(JSON.stringify({ before, after: used() })); return true; }, clock, everyMs: 100, quietForMs: 200 });
    });`;
  const result = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  t.equal(result.status, 0, result.stderr);
  const { before, after } = JSON.parse(result.stdout.trim()) as { before: number; after: number };
  t.ok(after < before / 2, `the heap in use fell from ${before} to ${after} bytes`);
});
