import type { Clock } from '../clock.js';

export interface Killable {
  kill(signal: NodeJS.Signals): void;
}

export interface EscalationDelays {
  /** Grace before the first signal. */
  graceMs: number;
  sigtermDelayMs: number;
  sigintDelayMs: number;
}

/**
 * Waits `graceMs` for `exited`, then SIGTERM, SIGINT and SIGKILL with the configured delays in between,
 * stopping as soon as the process is gone. Resolves with the last signal sent (or null: exited in grace).
 */
export function escalateUntilExit(
  target: Killable,
  exited: Promise<unknown>,
  delays: EscalationDelays,
  clock: Clock,
  onSignal: (signal: NodeJS.Signals) => void = () => {},
): Promise<NodeJS.Signals | null> {
  return new Promise((resolve) => {
    let done = false;
    let last: NodeJS.Signals | null = null;
    let cancel: () => void = () => {};
    exited.then(() => {
      done = true;
      cancel();
      resolve(last);
    });
    const steps: Array<[number, NodeJS.Signals | null]> = [
      [delays.graceMs, 'SIGTERM'],
      [delays.sigtermDelayMs, 'SIGINT'],
      [delays.sigintDelayMs, 'SIGKILL'],
    ];
    const next = (index: number) => {
      const step = steps[index];
      if (!step || done) return;
      cancel = clock.setTimeout(() => {
        if (done) return;
        last = step[1];
        onSignal(step[1]!);
        try {
          target.kill(step[1]!);
        } catch {
          // already gone: `exited` settles on its own
        }
        next(index + 1);
      }, step[0]);
    };
    next(0);
  });
}
