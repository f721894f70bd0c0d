// Every process the test suite starts carries RUN_VARIABLE=<run> in its environment (the tap runner's pid), and
// so do its children (workers, servers a provider starts). The suite's last teardown finds what is left of a
// run by that mark in /proc, whichever test started it and however that test ended.
import { readdirSync, readFileSync } from 'node:fs';

/** Not FLEETPLANE_*: the product strips those from the servers it starts, and this must reach them. */
export const RUN_VARIABLE = 'FP_TEST_RUN';

/**
 * The run this process belongs to: a test file run by tap belongs to its runner (its parent), anything else to
 * itself.
 */
export const currentRun = () => String(process.env.TAP === '1' ? process.ppid : process.pid);

/** The value `name` has in the environment `pid` started with, if it can be read. */
function environmentValue(pid, name) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return undefined;
  }
  const prefix = `${name}=`;
  return text.split('\0').find((entry) => entry.startsWith(prefix))?.slice(prefix.length);
}

function commandOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '?';
  }
}

/**
 * The live processes carrying a run mark (all runs, or only `run`), except this process.
 * @param {string} [run]
 * @returns {Array<{ pid: number, run: string, command: string }>}
 */
export function markedProcesses(run) {
  let names;
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const found = [];
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const mark = environmentValue(name, RUN_VARIABLE);
    if (mark === undefined || (run !== undefined && mark !== run)) continue;
    // A zombie has no environment left to read, so whatever is found here is still running.
    found.push({ pid: Number(name), run: mark, command: commandOf(name) });
  }
  return found;
}

const alive = (pid) => {
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
};

/**
 * Kills (SIGKILL) what is left of `run`, or with `stale`, of every run whose runner is gone; returns what it
 * killed.
 * @param {{ run?: string, stale?: boolean }} which
 */
export function killLeftovers(which) {
  const victims = markedProcesses(which.run).filter((entry) => !which.stale || !alive(entry.run));
  for (const { pid } of victims) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  return victims;
}
