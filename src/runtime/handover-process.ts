import { spawn } from 'node:child_process';
import type { Logger } from '../logging/logger.js';
import type { ResolvedConfig } from '../config/schema.js';
import type { Clock } from './clock.js';
import type { Listeners } from './listeners.js';
import { FLEETPLANE_VERSION } from '../version.js';
import { HANDOVER_ENV } from './handover-messages.js';
import { parentExitsWithThisProcess, standIn } from './handover-stand-in.js';
import { Handover, type HandoverDeps, type SuccessorProcess } from './handover.js';

/** A primary runtime's hand-over: a real successor process, the runtime's HTTP and HTTPS listeners. */
export function primaryHandover(config: ResolvedConfig, log: Logger, clock: Clock, listeners: Listeners, runtime: Pick<HandoverDeps, 'refusal' | 'retire'>): Handover {
  return new Handover({
    clock,
    log,
    version: FLEETPLANE_VERSION,
    readyTimeoutMs: config.workers.readyTimeoutMs,
    spawn: spawnSuccessor,
    sockets: () => listeners.handles().map(({ secure, ...socket }) => ({ role: secure ? 'https' : 'http', ...socket })),
    // In a container whose init would end the container with this process, it stays as a stand-in instead.
    exit: () => (parentExitsWithThisProcess() ? standIn(config.dataDir, log) : process.exit(0)),
    ...runtime,
  });
}

/**
 * Starts the new primary the way this one was started: the same Node binary and flags, the same entry script
 * path (so a version deployed there is what starts), the same arguments, working directory and environment.
 *
 * It leads a new process group and session (`detached`): it and its workers outlive this process, and a
 * signal meant for this one's group (a terminal's Ctrl-C) does not reach them. Its stdout and stderr are this
 * process's own file descriptors, so its log goes where this one's went (a service manager's pipe, a file, a
 * terminal) and stays there after this process exits. No stdin: only the IPC channel.
 */
export function spawnSuccessor(): SuccessorProcess {
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    cwd: process.cwd(),
    env: { ...process.env, [HANDOVER_ENV]: String(process.pid) },
    detached: true,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const gone = new Set<(how: string) => void>();
  let reported = false;
  const report = (how: string) => {
    if (reported) return;
    reported = true;
    for (const listener of gone) listener(how);
  };
  child.once('error', (error: NodeJS.ErrnoException) => report(`could not be started (${error.code ?? error.message})`));
  // 'close', not 'exit': it comes after the last message on the channel, so a `failed` reason is read first.
  child.once('close', (code, signal) => report(signal ? `was killed by ${signal}` : `exited with code ${code}`));
  child.once('disconnect', () => {
    const timer = setTimeout(() => {
      if (child.exitCode === null && child.signalCode === null) report('closed its channel');
    }, 1_000);
    timer.unref();
  });
  return {
    pid: child.pid ?? -1,
    send(message, handle) {
      if (!child.connected) return;
      // A send that fails means the channel is gone; 'close' or 'disconnect' reports it.
      child.send(message, handle as never, (error) => void error);
    },
    onMessage: (listener) => void child.on('message', listener),
    onGone: (listener) => void gone.add(listener),
    kill() {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is already gone
      }
    },
    release() {
      gone.clear();
      if (child.connected) child.disconnect();
      child.unref();
    },
  };
}
