import type { Clock } from '../runtime/clock.js';

export interface CleanupDeps {
  clock: Clock;
  delayMs: number;
  /** Deletes the platform and the tenant copies of the server's record; already missing counts as deleted. */
  deleteServer(serverId: string): Promise<void>;
  log: { info(details: Record<string, unknown>, message: string): void; warn(details: Record<string, unknown>, message: string): void };
}

/**
 * "Accepted termination retains lifecycle records": a server whose termination the provider accepted keeps its
 * `terminating` records for `delayMs`, then both copies are deleted once. Another `terminating` report does not
 * postpone it; a persisted `failed` cancels it. Timers live in this process only and never hold it open.
 */
export class TerminationCleanup {
  private readonly pending = new Map<string, () => void>();

  constructor(private readonly deps: CleanupDeps) {}

  /** A `terminating` update of this server persisted after the provider accepted its termination. */
  terminating(serverId: string): void {
    if (this.pending.has(serverId)) return;
    const cancel = this.deps.clock.setTimeout(() => void this.run(serverId), this.deps.delayMs);
    this.pending.set(serverId, cancel);
  }

  /** A `failed` update of this server persisted: its records stay for an operator to look at. */
  failed(serverId: string): void {
    const cancel = this.pending.get(serverId);
    if (!cancel) return;
    cancel();
    this.pending.delete(serverId);
  }

  scheduled(serverId: string): boolean {
    return this.pending.has(serverId);
  }

  close(): void {
    for (const cancel of this.pending.values()) cancel();
    this.pending.clear();
  }

  private async run(serverId: string): Promise<void> {
    if (!this.pending.delete(serverId)) return;
    try {
      await this.deps.deleteServer(serverId);
      this.deps.log.info({ server: serverId }, 'terminated server removed from the inventory');
    } catch (error) {
      this.deps.log.warn({ server: serverId, reason: error instanceof Error ? error.message : String(error) }, 'removing a terminated server from the inventory failed');
    }
  }
}
