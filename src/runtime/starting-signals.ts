import type { Logger } from '../logging/logger.js';

const STOPS = ['SIGTERM', 'SIGINT', 'SIGBREAK'] as const;
/** What ends a worker's wait for its store. */
const WAIT_STOPS = ['SIGTERM', 'SIGINT'] as const;

/**
 * The primary's signals while it is still being put together: from before its store is opened until the runtime
 * installs its own handlers (repository checkouts, the mesh, the control socket). Without it, a signal there
 * takes its default action and ends the process at once, with no exit code and nothing closed. A stop (SIGTERM,
 * SIGINT, SIGBREAK) is remembered, and the boot carries it out once the server has started, as the graceful
 * shutdown it would have been a moment later; while the store is still unreachable it also aborts `stopped`,
 * which ends that wait. SIGHUP and SIGUSR2 have nothing to act on yet and are logged.
 */
export class StartingSignals {
  private stop: NodeJS.Signals | undefined;
  private readonly listeners = new Map<NodeJS.Signals, () => void>();
  private readonly stopping = new AbortController();
  /** Aborted by the first stop signal. */
  readonly stopped: AbortSignal = this.stopping.signal;

  constructor(log: Logger) {
    for (const signal of STOPS) {
      this.listen(signal, () => {
        if (this.stop) return;
        this.stop = signal;
        log.info({ signal }, 'asked to stop while starting: the server stops once it has started');
        this.stopping.abort(new Error(`stopped by ${signal} while starting`));
      });
    }
    this.listen('SIGHUP', () => log.info({ signal: 'SIGHUP' }, 'SIGHUP while starting: no worker to restart yet'));
    this.listen('SIGUSR2', () => log.warn({ reason: 'the server is still starting' }, 'SIGUSR2: no hand-over'));
  }

  private listen(signal: NodeJS.Signals, listener: () => void): void {
    this.listeners.set(signal, listener);
    process.on(signal, listener);
  }

  /**
   * Hands the signals over to `install` (the runtime's own handlers), then stops listening; returns the stop
   * signal received meanwhile, if one was. The order matters: Node watches a signal only while it has a
   * listener, and a signal the process has caught is delivered later, at the event loop's next turn, to the
   * listeners there are then. Removing these first would stop the watch, and a signal caught during the
   * synchronous part of the boot would reach no one; installed first, the runtime's handlers receive it.
   */
  handOver(install: () => void): NodeJS.Signals | undefined {
    install();
    for (const [signal, listener] of this.listeners) process.off(signal, listener);
    this.listeners.clear();
    return this.stop;
  }
}

/**
 * `work` with a signal that SIGTERM or SIGINT aborts (`reason` says why), in a process with no handler of its
 * own for them yet: a worker waiting for its store. A signal caught in the work's last synchronous stretch is
 * delivered at a later turn of the event loop; these listeners stay until the loop has polled once more, so it
 * reaches them and is not lost. A stop that came after the work finished, and that no other listener heard, is
 * raised again once they are gone: the process takes the default action it would have taken a moment later.
 */
export async function untilStopSignal<T>(work: (signal: AbortSignal) => Promise<T>, reason: string): Promise<T> {
  const stop = new AbortController();
  let received: NodeJS.Signals | undefined;
  const onStop = (signal: NodeJS.Signals) => {
    received ??= signal;
    stop.abort(new Error(reason));
  };
  for (const signal of WAIT_STOPS) process.on(signal, onStop);
  let finished = false;
  try {
    const value = await work(stop.signal);
    finished = true;
    return value;
  } finally {
    // Two turns: the first may end before the loop polls again; the second comes after that poll.
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    for (const signal of WAIT_STOPS) process.off(signal, onStop);
    if (finished && received && process.listenerCount(received) === 0) process.kill(process.pid, received);
  }
}
