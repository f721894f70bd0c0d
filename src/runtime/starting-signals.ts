import type { Logger } from '../logging/logger.js';

const STOPS = ['SIGTERM', 'SIGINT', 'SIGBREAK'] as const;

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
