import type { ChildProcess } from 'node:child_process';
import tap from 'tap';
import { RUN_VARIABLE, currentRun } from './leftovers.mjs';
import { SCALE, SCALE_VARIABLE } from './time-scale.mjs';

/**
 * What every process a test starts gets in its environment: the run's mark (see leftovers.mjs), and this file's
 * time scale, so a fixture stretches its budgets as its test does.
 */
export const TEST_ENV: Readonly<Record<string, string>> = { [RUN_VARIABLE]: currentRun(), [SCALE_VARIABLE]: String(SCALE) };
// What the product run inside this process starts (git, a provider's servers) inherits the mark too. A process's
// own mark is the one it started with (/proc/<pid>/environ): this one stays of the run that started it.
process.env[RUN_VARIABLE] = TEST_ENV[RUN_VARIABLE];

interface Owned {
  child: ChildProcess;
  /** The child leads its own process group (spawned `detached`): the whole group is killed. */
  group: boolean;
}

const owned = new Map<number, Owned>();

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function kill({ child, group }: Owned): void {
  try {
    process.kill(group ? -child.pid! : child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * Registers a started process for teardown: it is killed (its group, with `group`) when this test file ends,
 * passing, failing, timing out inside a test or bailing out. Call it right after `spawn`, before anything is
 * awaited.
 */
export function own<C extends ChildProcess>(child: C, options: { group: boolean }): C {
  const pid = child.pid;
  if (pid === undefined) return child; // the spawn failed: its 'error' event says why
  const entry = { child, group: options.group };
  owned.set(pid, entry);
  child.once('exit', () => {
    // A group outlives its leader while its other members run: it stays owned until they are gone.
    if (owned.get(pid) === entry && (!entry.group || !groupAlive(pid))) owned.delete(pid);
  });
  return child;
}

/** Kills an owned process (its group, if it leads one) now, and forgets it. */
export function killOwned(child: ChildProcess): void {
  const entry = child.pid === undefined ? undefined : owned.get(child.pid);
  if (!entry) return;
  kill(entry);
  owned.delete(child.pid!);
}

/** Every process still owned. */
export function killAllOwned(): void {
  for (const entry of owned.values()) kill(entry);
  owned.clear();
}

// The end of the file's tests, and the exit of its process (a bail-out exits at once): nothing outlives them.
// What a SIGKILL of this process leaves, the fixtures end themselves (their stdin closes) and the suite's last
// teardown ends by its mark.
tap.teardown(killAllOwned);
process.on('exit', killAllOwned);
