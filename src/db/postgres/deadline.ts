import type pg from 'pg';
import type { Socket } from 'node:net';
import { StoreUnavailableError } from '../errors.js';

/** What an operation running under `withinDeadline` learns of its deadline. */
export interface Cutoff {
  /** True once the caller was answered: what the operation still does, nobody waits for. */
  readonly expired: boolean;
  /** The error the caller was answered with. */
  readonly error: StoreUnavailableError;
  /** What to tear down when the deadline passes (the connection the operation holds); one at a time. */
  onExpire(tearDown: () => void): void;
}

/**
 * Runs `operation` and answers within `deadlineMs` whatever the server does: past it, the caller hears 503
 * store_unavailable while the operation's own teardown runs. The client's per-statement limits do not bound an
 * operation — it waits for a connection, opens one, then runs several statements, each with its own limit —
 * and a server that hangs with its sockets open (frozen, or cut off without a reset) answers none of them.
 */
export function withinDeadline<T>(deadlineMs: number, collection: string, operation: (cutoff: Cutoff) => Promise<T>): Promise<T> {
  let expired = false;
  let tearDown: (() => void) | undefined;
  // Made only when the deadline passes: an error's stack costs more than the rest of this on every operation.
  let error: StoreUnavailableError | undefined;
  const cutoff: Cutoff = {
    get expired() {
      return expired;
    },
    get error() {
      return (error ??= new StoreUnavailableError(`PostgreSQL ${collection} is unavailable: no answer within ${deadlineMs} ms`));
    },
    onExpire: (fn) => void (tearDown = fn),
  };
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      expired = true;
      reject(cutoff.error);
      tearDown?.();
    }, deadlineMs);
    timer.unref();
    operation(cutoff).then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (failure: unknown) => {
        clearTimeout(timer);
        reject(failure);
      },
    );
  });
}

/**
 * Closes a checked-out connection's socket at once: its pending statement fails ("Connection terminated"), and
 * the pool, told it is broken when it comes back, opens a new one. `end()` would wait for the server's goodbye.
 */
export function tearDown(client: pg.PoolClient): void {
  (client as unknown as { connection?: { stream?: Socket } }).connection?.stream?.destroy();
}
