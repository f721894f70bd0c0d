import { hostname } from 'node:os';
import type { MasterSection } from './records.js';

/** What the membership needs of the primary: its state, ports and workers as they are when the record is written. */
export interface MembershipSource {
  readonly status: string;
  readonly workerCount: number;
  /** The URL clients reach this server at (the 307 fallback's target), or null. */
  publicUrl(): string | null;
  /** The URL peers dial, once the mesh listens; null without a mesh. */
  meshUrl(): string | null;
}

/** The inventory writer of this process (`ServerState`): the section it saves is described here. */
export interface MembershipStore {
  describeInventory(section: () => MasterSection): void;
  save(): Promise<unknown>;
}

export interface MembershipLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/**
 * SPEC 7.4, 6: this server's own record in `servers` over its life, the one peers discover it by. `running` from
 * `join` (after its ports are bound), marked serving once its workers first all served, `stopped` from the
 * start of a graceful shutdown (`leave`), so peers stop dialing a server that is going away. A save that fails
 * is logged and never stops the server: the next save writes the same section.
 */
export class ServerMembership {
  private joined = false;
  private leaving = false;
  /** When the workers first all served: a `running` record may be seen before, while they still boot. */
  private servingSince: string | null = null;
  private readonly startedAt = new Date().toISOString();

  constructor(
    host: MembershipSource,
    private readonly store: MembershipStore,
    private readonly log: MembershipLog,
  ) {
    store.describeInventory(() => ({
      // `stopping` covers the whole graceful shutdown.
      status: this.leaving || host.status === 'stopping' ? 'stopped' : 'running',
      pid: process.pid,
      hostname: hostname(),
      publicUrl: host.publicUrl(),
      meshUrl: host.meshUrl(),
      workers: host.workerCount,
      startedAt: this.startedAt,
      servingSince: this.servingSince,
      updatedAt: new Date().toISOString(),
    }));
  }

  /** The ports are bound: the record says `running`, and discovery can find this server. */
  async join(): Promise<void> {
    this.joined = true;
    await this.write('inventory record not written: peers will not discover this server');
  }

  /** Every worker served for the first time (the autoscaler counts the server as confirmed from here). */
  serving(): void {
    if (this.servingSince !== null || this.leaving) return;
    this.servingSince = new Date().toISOString();
    if (this.joined) void this.write('inventory record not marked serving');
  }

  /** A graceful shutdown began: the record says `stopped`. */
  async leave(): Promise<void> {
    this.leaving = true;
    await this.write('inventory record not marked stopped');
  }

  private async write(failure: string): Promise<void> {
    try {
      await this.store.save();
    } catch (error) {
      this.log.error({ err: error }, failure);
    }
  }
}
