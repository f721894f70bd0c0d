import t from 'tap';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const MODULE = pathToFileURL(path.join(ROOT, 'src', 'runtime', 'starting-signals.ts')).href;

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  lines: Array<Record<string, unknown>>;
}

/** Runs an ES module `script` in a process of its own; resolves with how it ended and the JSON lines it printed. */
async function runScript(script: string): Promise<Ended> {
  const child = spawn(process.execPath, ['--import', path.join(ROOT, 'test', 'helpers', 'ts-loader.mjs'), '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('close', (...end) => resolve(end)));
  return { code, signal, lines: output.trim().split('\n').filter(Boolean).map((text) => JSON.parse(text) as Record<string, unknown>) };
}

/** `body` in a process of its own (it signals itself), with `signals` a StartingSignals whose log lines go to stdout as JSON. */
function inProcess(body: string): Promise<Ended> {
  return runScript(`
    import { StartingSignals } from ${JSON.stringify(MODULE)};
    const line = (level) => (fields, msg) => process.stdout.write(JSON.stringify({ level, ...fields, msg }) + '\\n');
    const signals = new StartingSignals({ info: line('info'), warn: line('warn') });
    const delivered = (n) => new Promise((resolve) => { const check = () => (seen >= n ? resolve() : setImmediate(check)); check(); });
    let seen = 0;
    const counting = () => seen++;
    for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGUSR2']) process.on(s, counting);
    ${body}
  `);
}

t.test('while starting, a stop signal is remembered instead of ending the process; SIGHUP and SIGUSR2 are logged', async (t) => {
  const ended = await inProcess(`
    process.kill(process.pid, 'SIGTERM');
    await delivered(1);
    process.kill(process.pid, 'SIGINT');
    process.kill(process.pid, 'SIGHUP');
    process.kill(process.pid, 'SIGUSR2');
    await delivered(4);
    process.stdout.write(JSON.stringify({ released: signals.handOver(() => {}) ?? null }) + '\\n');
  `);
  t.same([ended.code, ended.signal], [0, null], 'the process lived through all four');
  t.same(ended.lines, [
    { level: 'info', signal: 'SIGTERM', msg: 'asked to stop while starting: the server stops once it has started' },
    { level: 'info', signal: 'SIGHUP', msg: 'SIGHUP while starting: no worker to restart yet' },
    { level: 'warn', reason: 'the server is still starting', msg: 'SIGUSR2: no hand-over' },
    { released: 'SIGTERM' },
  ], 'the first stop is the one carried out; the second is not logged again');
});

t.test('with no signal, the hand-over says none; after it a signal takes its default action again', async (t) => {
  const ended = await inProcess(`
    process.stdout.write(JSON.stringify({ released: signals.handOver(() => {}) ?? null }) + '\\n');
    for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGUSR2']) process.off(s, counting);
    process.kill(process.pid, 'SIGTERM');
    setTimeout(() => {}, 60_000);
  `);
  t.same(ended.lines, [{ released: null }]);
  t.same([ended.code, ended.signal], [null, 'SIGTERM'], 'ended by the signal: nothing of the latch is left listening');
});

t.test('a stop caught during the synchronous part of the boot reaches the handlers installed at the hand-over', async (t) => {
  // The signal is caught inside process.kill (sent to itself) and delivered at the loop's next turn, by which time
  // the starting latch has handed over: the runtime's handler is the one to receive it, and it is not lost.
  const ended = await inProcess(`
    for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGUSR2']) process.off(s, counting);
    process.kill(process.pid, 'SIGTERM');
    const released = signals.handOver(() => process.on('SIGTERM', () => {
      process.stdout.write(JSON.stringify({ runtime: 'SIGTERM' }) + '\\n');
      process.exit(0);
    }));
    process.stdout.write(JSON.stringify({ released: released ?? null }) + '\\n');
    let turns = 0;
    const turn = () => (++turns < 20 ? setImmediate(turn) : (process.stdout.write(JSON.stringify({ lost: true }) + '\\n'), process.exit(3)));
    turn();
  `);
  t.same(ended.lines, [{ released: null }, { runtime: 'SIGTERM' }], 'the runtime handled the stop within a few turns of the loop');
  t.same([ended.code, ended.signal], [0, null]);
});

t.test('the first stop aborts the starting signal that ends a wait for the store', async (t) => {
  const ended = await inProcess(`
    const reasons = [];
    signals.stopped.addEventListener('abort', () => reasons.push(signals.stopped.reason.message));
    process.stdout.write(JSON.stringify({ before: signals.stopped.aborted }) + '\\n');
    process.kill(process.pid, 'SIGINT');
    await delivered(1);
    process.kill(process.pid, 'SIGTERM');
    await delivered(2);
    process.stdout.write(JSON.stringify({ reasons }) + '\\n');
  `);
  t.same(ended.lines, [
    { before: false },
    { level: 'info', signal: 'SIGINT', msg: 'asked to stop while starting: the server stops once it has started' },
    { reasons: ['stopped by SIGINT while starting'] },
  ]);
});

/** `body` in a process of its own with `untilStopSignal` imported and `out` printing a JSON line. */
function waitingProcess(body: string): Promise<Ended> {
  return runScript(`
    import { untilStopSignal } from ${JSON.stringify(MODULE)};
    const out = (record) => process.stdout.write(JSON.stringify(record) + '\\n');
    ${body}
  `);
}

t.test("a worker's store wait: a stop during it aborts the wait, and nothing is left listening", async (t) => {
  const ended = await waitingProcess(`
    // What keeps a real worker's loop alive while it waits (its IPC channel; a signal's watch does not).
    const alive = setInterval(() => {}, 60_000);
    try {
      await untilStopSignal((signal) => new Promise((_, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason));
        process.kill(process.pid, 'SIGINT');
      }), 'stopped while waiting for the store');
    } catch (error) {
      out({ refused: error.message, listening: process.listenerCount('SIGINT') + process.listenerCount('SIGTERM') });
    }
    clearInterval(alive);
  `);
  t.same(ended.lines, [{ refused: 'stopped while waiting for the store', listening: 0 }]);
  t.same([ended.code, ended.signal], [0, null], 'the stop ended the wait, not the process');
});

t.test("a worker's store wait: a stop caught as the wait ends is not lost, it ends the process as it would a moment later", async (t) => {
  // The signal is caught inside process.kill, in the work's last synchronous stretch, and delivered at a later
  // turn of the loop: after the wait's listeners would have gone, were they removed at once.
  const ended = await waitingProcess(`
    const value = await untilStopSignal(async () => {
      process.kill(process.pid, 'SIGTERM');
      return 'store open';
    }, 'stopped while waiting for the store');
    out({ value, listening: process.listenerCount('SIGTERM') });
    process.exit(0);
  `);
  t.same(ended.lines, [], 'the boot went no further');
  t.same([ended.code, ended.signal], [null, 'SIGTERM'], 'ended by the stop it was sent');
});

t.test("a worker's store wait without a signal answers the work's value and leaves nothing listening", async (t) => {
  const ended = await waitingProcess(`
    const value = await untilStopSignal(async () => 'store open', 'stopped while waiting for the store');
    out({ value, listening: process.listenerCount('SIGINT') + process.listenerCount('SIGTERM') });
  `);
  t.same(ended.lines, [{ value: 'store open', listening: 0 }]);
  t.same([ended.code, ended.signal], [0, null]);
});

t.test("a worker's store wait: a stop another listener also heard is not raised again", async (t) => {
  // An embedding application's own handler: it hears the stop once, and the wait does not send it a second time.
  const ended = await waitingProcess(`
    let heard = 0;
    process.on('SIGTERM', () => heard++);
    const value = await untilStopSignal(async () => {
      process.kill(process.pid, 'SIGTERM');
      return 'store open';
    }, 'stopped while waiting for the store');
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    out({ value, heard });
  `);
  t.same(ended.lines, [{ value: 'store open', heard: 1 }]);
  t.same([ended.code, ended.signal], [0, null]);
});
