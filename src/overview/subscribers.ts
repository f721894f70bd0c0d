import { lazyCheck } from '../schema/lazy-check.js';
import { IpcError } from '../ipc/envelope.js';
import { FleetEventSchema, type FleetEvent } from './journal.js';

/** The method a platform socket sends to receive the fleet's events, and the one that delivers them. */
export const OVERVIEW_SUBSCRIBE = 'overview.subscribe';
export const OVERVIEW_EMIT = 'overview.emit';
/** The `event` of the frames those sockets receive. */
export const OVERVIEW_EVENT = 'overview.event';

const eventCheck = lazyCheck(FleetEventSchema);

/**
 * A worker's sockets that asked for the fleet's events. Each primary sends every entry of its journal to the
 * workers serving the platform organization, here and on peers (`overview.emit`, scoped by organization), and
 * each worker hands it to these sockets.
 */
export class OverviewSubscribers {
  private readonly senders = new Set<(event: FleetEvent) => void>();

  get size(): number {
    return this.senders.size;
  }

  /** Adds a socket's sender; the returned function removes it (call it when the socket closes). */
  add(send: (event: FleetEvent) => void): () => void {
    this.senders.add(send);
    return () => this.senders.delete(send);
  }

  /** The `overview.emit` handler: `data` is one journal entry. */
  deliver(data: unknown): { delivered: number } {
    if (!eventCheck.Check(data)) throw new IpcError('bad_request', 'overview.emit takes one journal entry as data', 'data');
    for (const send of this.senders) send(data);
    return { delivered: this.senders.size };
  }
}
