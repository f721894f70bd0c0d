import type { PrimaryToWorker } from '../messages.js';
import type { ConnectionHandle } from '../listeners.js';
import { acceptsTraffic } from '../status.js';
import type { WorkerRecord } from './worker-record.js';

/** Which worker takes the next accepted connection, and the bookkeeping of handing it over. */
export class ConnectionBalancer {
  private cursor = 0;

  constructor(private readonly records: readonly WorkerRecord[]) {}

  /** Round-robin over workers that take traffic; undefined when none does (→ fallback). */
  pickForConnection(): WorkerRecord | undefined {
    const count = this.records.length;
    for (let step = 0; step < count; step++) {
      const record = this.records[(this.cursor + step) % count]!;
      if (acceptsTraffic(record.status) && !record.retiring && record.worker.isConnected()) {
        this.cursor = (this.cursor + step + 1) % count;
        return record;
      }
    }
    return undefined;
  }

  /**
   * Passes an accepted connection to the worker. Once the message carrying it is written, the worker has its
   * own copy and the primary closes its own, as Node's cluster round-robin does; if the send fails, the
   * connection is still only ours and `onFailure` serves it elsewhere.
   */
  handOff(record: WorkerRecord, handle: ConnectionHandle, secure: boolean, onFailure: () => void): void {
    const message: PrimaryToWorker = { fp: 'conn', secure };
    record.handOffs.set(handle, onFailure);
    record.worker.sendConnection(message, handle, (error) => {
      if (!record.handOffs.delete(handle)) return;
      if (error) onFailure();
      else handle.close();
    });
  }

  /**
   * Node sends one handle at a time and queues the rest; when the worker dies, queued handles are never sent
   * and their callbacks never run. They are still ours: give them to another worker.
   */
  rerouteUnsent(record: WorkerRecord): void {
    const unsent = [...record.handOffs.values()];
    record.handOffs.clear();
    for (const reroute of unsent) reroute();
  }
}
