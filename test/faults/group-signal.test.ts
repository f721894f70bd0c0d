import t from 'tap';
import { FAST, ServerProcess } from '../helpers/server-process.js';
import { killOnExit } from './cleanup.js';

// Ctrl-C in a terminal and a service manager's control-group kill signal the primary and every worker at once.
// The workers stop on their own copy; the primary must take that for what it is (its own shutdown), never for
// a crash to repair.

const RUNS_PER_SIGNAL = 20;
const PARALLEL = 4;
const config = {
  workers: 2,
  ...FAST,
  // The production grace: a shutdown holds /readyz at 503 while workers serve, the window in which
  // workers that got the same signal used to be taken for crashed ones and replaced.
  lifecycle: { readinessGraceMs: 5_000 },
};
// The configured bound of a graceful stop: the readiness grace, the ACK wait, the shutdown budget, the
// escalation delays; and the primary's own last steps (store close, exit) which no setting bounds, given 2 s.
const { ackTimeoutMs, timeoutMs, sigtermDelayMs, sigintDelayMs } = config.shutdown;
const BUDGET_MS = config.lifecycle.readinessGraceMs + ackTimeoutMs + timeoutMs + sigtermDelayMs + sigintDelayMs + 2_000;

interface Outcome {
  signal: NodeJS.Signals;
  delayMs: number;
  readyBefore: number;
  code: number | null;
  stopMs: number;
  crashedLines: number;
  crashEvents: number;
  forks: number;
  restarts: number;
}

/**
 * Starts a server, signals its whole process group `delayMs` after the workers were forked (or, `afterReady`,
 * that long after both reported ready), and watches it stop.
 */
async function signalGroup(signal: NodeJS.Signals, delayMs: number, afterReady: boolean): Promise<Outcome> {
  const server = await ServerProcess.start(config);
  killOnExit(server.child.pid);
  try {
    if (afterReady) await server.readyWorkers(2, 0, 120_000);
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    const readyBefore = server.count((event) => event.event === 'worker:ready');
    const sentAt = Date.now();
    process.kill(-server.child.pid!, signal);
    const code = await Promise.race([server.exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), BUDGET_MS + 10_000))]);
    const stopMs = Date.now() - sentAt;
    return {
      signal,
      delayMs,
      readyBefore,
      code: code === 'hung' ? -1 : code,
      stopMs,
      crashedLines: server.count((event) => event.msg === 'worker crashed'),
      crashEvents: server.count((event) => event.event === 'worker:crash'),
      forks: server.count((event) => event.event === 'worker:online'),
      restarts: server.count((event) => event.event === 'worker:restart'),
    };
  } finally {
    await server.stop();
  }
}

t.test('a signal to the whole process group at any point from fork to ready is a shutdown, not a crash', async (t) => {
  // How long a boot takes here, so the signals land across it (and some just after it).
  const calibration = await ServerProcess.start(config);
  killOnExit(calibration.child.pid);
  const forkedAt = Date.now();
  await calibration.readyWorkers(2, 0, 120_000);
  const bootMs = Date.now() - forkedAt;
  await calibration.stop();

  // Three in four land anywhere in the boot; one in four just after both workers turned ready.
  const plan: Array<{ signal: NodeJS.Signals; delayMs: number; afterReady: boolean }> = [];
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (let run = 0; run < RUNS_PER_SIGNAL; run++) {
      const afterReady = run % 4 === 3;
      plan.push({ signal, afterReady, delayMs: Math.round(Math.random() * (afterReady ? 200 : bootMs)) });
    }
  }
  const outcomes: Outcome[] = [];
  for (let next = 0; next < plan.length; next += PARALLEL) {
    outcomes.push(...(await Promise.all(plan.slice(next, next + PARALLEL).map(({ signal, delayMs, afterReady }) => signalGroup(signal, delayMs, afterReady)))));
  }

  const stops = outcomes.map((outcome) => outcome.stopMs).sort((a, b) => a - b);
  const before = outcomes.filter((outcome) => outcome.readyBefore < 2).length;
  t.comment(`boot ${bootMs} ms; ${before} signals before both workers were ready, ${outcomes.length - before} after; stops: median ${stops[stops.length >> 1]} ms, slowest ${stops.at(-1)} ms`);
  const describe = (outcome: Outcome) => `${outcome.signal} at +${outcome.delayMs} ms (${outcome.readyBefore} ready)`;
  for (const outcome of outcomes) {
    t.equal(outcome.code, 0, `${describe(outcome)}: exit 0`);

    t.equal(outcome.crashedLines + outcome.crashEvents, 0, `${describe(outcome)}: no "worker crashed"`);
    t.equal(outcome.restarts, 0, `${describe(outcome)}: no restart`);
    t.ok(outcome.forks <= 2, `${describe(outcome)}: no replacement forked (${outcome.forks} forks)`);
    t.ok(outcome.stopMs <= BUDGET_MS, `${describe(outcome)}: stopped in ${outcome.stopMs} ms, within the ${BUDGET_MS} ms budget`);
  }
  const signalled = (signal: string) => outcomes.filter((outcome) => outcome.signal === signal);
  t.equal(signalled('SIGINT').length, RUNS_PER_SIGNAL);
  t.equal(signalled('SIGTERM').length, RUNS_PER_SIGNAL);
});
