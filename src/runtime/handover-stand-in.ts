import { readFileSync } from 'node:fs';
import type { Logger } from '../logging/logger.js';
import { readPidFile } from './pid-file.js';

/** Container inits that exit, ending the container, as soon as the one process they started exits. */
const CONTAINER_INITS: ReadonlySet<string> = new Set(['tini', 'docker-init', 'dumb-init', 'catatonit']);

/**
 * Whether this process's exit would end its container: its parent is PID 1 of its PID namespace and that is
 * a container init that exits with its child (`docker run --init` is tini). A service manager (systemd) as
 * PID 1 outlives its children and follows the pid file instead.
 */
export function parentExitsWithThisProcess(ppid = process.ppid, initName = () => readFileSync('/proc/1/comm', 'utf8').trim()): boolean {
  if (ppid !== 1) return false;
  try {
    return CONTAINER_INITS.has(initName());
  } catch {
    return false;
  }
}

const FORWARDED: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGUSR2'];

/**
 * After a hand-over in a container whose init exits with its child: this process stays, holding nothing (no
 * socket, no worker, no store), as long as a primary serves the data directory. The signals the init
 * forwards (`docker stop` is SIGTERM) go on to that primary, whichever it is after later hand-overs (the pid
 * file names it); when it is gone, this process exits too: 0 after a graceful stop (the pid file was
 * removed), 1 when the primary it names died.
 */
export function standIn(dataDir: string, log: Logger, pollMs = 500): void {
  log.warn({ primary: readPidFile(dataDir) }, "hand-over: staying as a stand-in, this container's init would end the container with this process");
  for (const signal of FORWARDED) {
    // Added before the old primary's listeners go: a signal caught and not yet delivered is forwarded, not lost
    // (see StartingSignals.handOver).
    const previous = process.listeners(signal);
    process.on(signal, () => {
      const pid = readPidFile(dataDir);
      if (pid === undefined) return;
      try {
        process.kill(pid, signal);
      } catch {
        // gone: the poll below ends this process
      }
    });
    for (const listener of previous) process.off(signal, listener as () => void);
  }
  // Referenced on purpose: this timer is what keeps the stand-in alive.
  setInterval(() => {
    const pid = readPidFile(dataDir);
    if (pid === undefined) process.exit(0);
    if (!alive(pid)) {
      log.error({ primary: pid }, 'stand-in: the primary is gone without a graceful stop');
      process.exit(1);
    }
  }, pollMs);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
