/**
 * What a fault test started, undone even when the test does not finish: tap ends a file that runs past its
 * timeout with SIGALRM, which skips every teardown. Process groups are killed and commands (namespaces,
 * mounts) run synchronously on `exit` and on that signal, or on SIGTERM, SIGINT and SIGHUP.
 */
import { execFileSync } from 'node:child_process';

const groups = new Set<number>();
const undo: Array<() => void> = [];
let armed = false;

function runAll(): void {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  groups.clear();
  for (const step of undo.splice(0).reverse()) {
    try {
      step();
    } catch {
      // best effort: the next step may still succeed
    }
  }
}

function arm(): void {
  if (armed) return;
  armed = true;
  process.once('exit', runAll);
  // tap's timeout (SIGALRM), and a run interrupted or stopped from outside (Ctrl-C, a CI job's kill): each skips
  // the teardowns, and the default action of a signal skips `exit` too.
  for (const signal of ['SIGALRM', 'SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.once(signal, () => {
      runAll();
      process.exit(1);
    });
  }
}

/** A process group (a detached child's pid) killed when the test file ends, however it ends. */
export function killOnExit(pid: number | undefined): void {
  if (pid === undefined) return;
  arm();
  groups.add(pid);
}

/** A synchronous undo step run at the end of the file, however it ends (last registered runs first). */
export function undoOnExit(step: () => void): () => void {
  arm();
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    step();
  };
  undo.push(once);
  return once;
}

/** Runs a command to its end; throws with its stderr when it fails. */
export function run(command: string, args: string[]): string {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs a command, ignoring a failure (cleanup of what may already be gone). */
export function tryRun(command: string, args: string[]): boolean {
  try {
    run(command, args);
    return true;
  } catch {
    return false;
  }
}
