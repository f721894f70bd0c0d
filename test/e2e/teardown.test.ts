import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { markedProcesses } from '../helpers/leftovers.mjs';
import { own } from '../helpers/processes.js';
import { cleanEnv, isAlive, tempDir } from '../helpers/server-process.js';
import { scaled } from '../helpers/wait.js';

t.setTimeout(scaled(300_000));

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const TAP = createRequire(import.meta.url).resolve('tap/package.json').replace(/package\.json$/, 'dist/esm/run.mjs');
const LEAKS = path.join(ROOT, 'test', 'fixtures', 'leaks');

/**
 * Runs the given files of test/fixtures/leaks with tap, as `npm test` runs the suite (this package's tap
 * config: its before and after scripts), in a run of its own; resolves once the runner exited.
 */
async function tapRun(files: string[]) {
  const reports = tempDir('fleetplane-leaks-');
  const runner = own(
    spawn(process.execPath, [TAP, '--reporter=tap', '--disable-coverage', ...files.map((file) => path.join(LEAKS, file))], {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...cleanEnv(), LEAK_REPORT: reports },
    }),
    { group: true },
  );
  let output = '';
  runner.stdout!.on('data', (chunk) => (output += chunk));
  runner.stderr!.on('data', (chunk) => (output += chunk));
  const started = Date.now();
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => runner.once('close', (...end) => resolve(end)));
  const reported = (name: string): number[] => {
    const file = path.join(reports, `${name}.json`);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { pids: number[] }).pids : [];
  };
  // How the run ended, in a line: a failed assertion's name is all a CI summary shows of it.
  const tail = output.trim().split('\n').slice(-2).join(' | ').slice(-240);
  const ending = `the run ended with ${signal ?? `exit ${code}`} after ${Date.now() - started} ms; its last lines: ${tail}`;
  return { code, output, run: String(runner.pid), reported, ending };
}

/**
 * Whether `pid` still runs: a process killed a moment ago may still be a zombie, until its new parent (the
 * machine's init) reaps it, and `kill(pid, 0)` finds zombies too.
 */
function running(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

t.test('test files that fail, time out or are killed with servers running leave no process behind', async (t) => {
  const { code, output, run, reported, ending } = await tapRun(['fails-while-starting.ts', 'times-out.ts', 'killed.ts']);
  t.not(code, 0, 'the run failed, as its tests do');
  for (const name of ['fails-while-starting', 'times-out', 'killed']) {
    const pids = reported(name);
    t.ok(pids.length >= 2, `${name}: its server and workers were running (${pids.join(' ')})${pids.length >= 2 ? '' : `: ${ending}`}`, { output });
    for (const pid of pids) t.notOk(running(pid), `${name}: ${pid} is gone`);
  }
  t.same(markedProcesses(run), [], 'no process of the run is left');
  // The `fleetplane start` of the killed file has no test process to notice: the suite's last teardown ends it.
  const [, , cli] = reported('killed');
  t.match(output, new RegExp(`killed \\d+ processes the tests left running:[^]*\\n  ${cli} `), 'the suite teardown killed what the SIGKILL left');
});

t.test('a bail-out with a server running leaves no process behind', async (t) => {
  const { code, output, run, reported, ending } = await tapRun(['bails-out.ts']);
  t.not(code, 0);
  t.match(output, /Bail out! on purpose, with a server running/);
  const pids = reported('bails-out');
  t.ok(pids.length >= 2, `its server and worker were running (${pids.join(' ')})${pids.length >= 2 ? '' : `: ${ending}`}`, { output });
  for (const pid of pids) t.notOk(running(pid), `${pid} is gone`);
  t.same(markedProcesses(run), [], 'no process of the run is left');
});

t.test('FLEETPLANE_TEST_TIME_SCALE that is not a number ≥ 1 stops the run before any test, with one line', async (t) => {
  const refusal = (value: string) => `FLEETPLANE_TEST_TIME_SCALE must be a number ≥ 1 (got ${JSON.stringify(value)})\n`;
  const runner = own(spawn(process.execPath, [TAP, '--reporter=tap', '--disable-coverage', path.join(LEAKS, 'bails-out.ts')], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...cleanEnv(), FLEETPLANE_TEST_TIME_SCALE: 'fast', LEAK_REPORT: tempDir('fleetplane-leaks-') },
  }), { group: false });
  let stdout = '';
  let stderr = '';
  runner.stdout!.on('data', (chunk) => (stdout += chunk));
  runner.stderr!.on('data', (chunk) => (stderr += chunk));
  t.equal(await new Promise<number | null>((resolve) => runner.once('close', resolve)), 1, 'the run exits 1');
  t.equal(stderr, refusal('fast'), 'saying why in one line');
  t.notMatch(stdout, /Subtest|Bail out/, 'no test ran');

  // The same check (the run's `before` script) for the other kinds of bad value, and what it accepts.
  const before = (value: string) => spawnSync(process.execPath, [path.join(ROOT, 'test', 'helpers', 'suite-start.mjs')], { encoding: 'utf8', env: { ...cleanEnv(), FLEETPLANE_TEST_TIME_SCALE: value }, timeout: scaled(20_000) });
  for (const value of ['0.5', '0', '-2', 'Infinity', '2x']) {
    const refused = before(value);
    t.same([refused.status, refused.stderr], [1, refusal(value)], `"${value}": refused`);
  }
  for (const value of ['1', '2.5', '']) {
    const accepted = before(value);
    t.equal(accepted.status, 0, `"${value}": accepted`);
    t.match(accepted.stderr, value === '' ? /^test time scale \d+ \((1-minute )?load / : new RegExp(`^test time scale ${value} \\(from FLEETPLANE_TEST_TIME_SCALE\\)`));
  }
});
