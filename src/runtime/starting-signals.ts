import type { Logger } from '../logging/logger.js';

const STOPS = ['SIGTERM', 'SIGINT', 'SIGBREAK'] as const;

/**
 * The primary's signals while it is still being put together: after its store is open (that wait has its own
 * stop) and until the runtime installs its own handlers (repository checkouts, the mesh, the control socket).
 * Without it, a signal there takes its default action and ends the process at once, with no exit code and nothing
 * closed. A stop (SIGTERM, SIGINT, SIGBREAK) is remembered, and the boot carries it out once the server has
 * started, as the graceful shutdown it would have been a moment later; SIGHUP and SIGUSR2 have nothing to act on
 * yet and are logged.
 */
export class StartingSignals {
  private stop: NodeJS.Signals | undefined;
  private readonly listeners = new Map<NodeJS.Signals, () => void>();

  constructor(log: Logger) {
    for (const signal of STOPS) {
      this.listen(signal, () => {
        if (this.stop) return;
        this.stop = signal;
        log.info({ signal }, 'asked to stop while starting: the server stops once it has started');
      });
    }
    this.listen('SIGHUP', () => log.info({ signal: 'SIGHUP' }, 'SIGHUP while starting: no worker to restart yet'));
    this.listen('SIGUSR2', () => log.warn({ reason: 'the server is still starting' }, 'SIGUSR2: no hand-over'));
  }

  private listen(signal: NodeJS.Signals, listener: () => void): void {
    this.listeners.set(signal, listener);
    process.on(signal, listener);
  }

  /** Stops listening; returns the stop signal received meanwhile, if one was. */
  release(): NodeJS.Signals | undefined {
    for (const [signal, listener] of this.listeners) process.off(signal, listener);
    this.listeners.clear();
    return this.stop;
  }
}
