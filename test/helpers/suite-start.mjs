// Runs once before the test files (tap's `before`): refuses a bad FLEETPLANE_TEST_TIME_SCALE with one line and
// a non-zero exit, which stops the whole run; ends what earlier runs that died left behind; says which time
// scale the files start with.
import { RUN_VARIABLE, killLeftovers } from './leftovers.mjs';

let timeScale;
try {
  // Reading the factor throws on a bad value: the one line is its message.
  timeScale = await import('./time-scale.mjs');
} catch (error) {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
// A run started inside another run (a test of the suite's own teardown) carries that run's mark: it leaves the
// sweep to the outermost run, whose tests are still running beside it.
const nested = process.env[RUN_VARIABLE] !== undefined;
const stale = nested ? [] : killLeftovers({ stale: true });
if (stale.length > 0) process.stderr.write(`killed ${stale.length} processes left by earlier test runs: ${stale.map((entry) => entry.pid).join(' ')}\n`);
process.stderr.write(`${timeScale.describeTimeScale()}; each test file re-reads the load when it starts\n`);

// Every TypeScript file the test files may load, turned into JavaScript here once, in one process: each test
// file's process then only reads the cache.
const { transpileAll } = await import('./ts-transpile.mjs');
const started = performance.now();
const count = transpileAll();
process.stderr.write(`${count} TypeScript files ready as JavaScript in ${Math.round(performance.now() - started)} ms\n`);
