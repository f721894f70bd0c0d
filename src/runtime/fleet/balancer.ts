import type { PrimaryToWorker } from '../messages.js';
import type { ConnectionHandle } from '../listeners.js';
import { acceptsTraffic } from '../status.js';
import type { WorkerRecord } from './worker-record.js';

/** Which worker takes the next accepted connection, and the bookkeeping of handing it over. */
export class ConnectionBalancer {
  private cursor = 0;
  private nextId = 1;

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
   * Passes an accepted connection to the worker. The primary keeps its own copy until the worker confirms it
   * took the connection (`taken`), as Node's cluster round-robin does: a worker killed after the message left
   * but before it read it (the kernel drops what a dead process never read) would otherwise take the
   * connection down with it. If the send fails, the connection is only ours and `onFailure` serves it elsewhere.
   */
  handOff(record: WorkerRecord, connection: ConnectionHandle, secure: boolean, onFailure: () => void): void {
    const id = this.nextId++;
    const message: PrimaryToWorker = { fp: 'conn', secure, id };
    record.handOffs.set(id, { connection, reroute: onFailure });
    record.worker.sendConnection(message, connection, (error) => {
      if (error && record.handOffs.delete(id)) onFailure();
    });
  }

  /** The worker has the connection of hand-off `id`: the primary's copy is closed. */
  taken(record: WorkerRecord, id: number): void {
    const handOff = record.handOffs.get(id);
    if (!handOff) return;
    record.handOffs.delete(id);
    handOff.connection.close();
  }

  /**
   * The worker is gone (its channel closed or it exited): connections it never confirmed are still ours, queued
   * in Node or in a socket buffer nobody will read. Give them to another worker.
   */
  rerouteUntaken(record: WorkerRecord): void {
    const untaken = [...record.handOffs.values()];
    record.handOffs.clear();
    for (const { reroute } of untaken) reroute();
  }
}
