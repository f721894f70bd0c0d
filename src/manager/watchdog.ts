import type { Clock } from '../runtime/clock.js';

export interface WatchdogDeps {
  clock: Clock;
  timeoutMs: number;
  /** The server's persisted `master.status` on the parent, read once at timeout. */
  persistedStatus(serverId: string): Promise<unknown>;
  log: { warn(details: Record<string, unknown>, message: string): void };
}

/**
 * Startup confirmation of managed servers ("Managed node startup confirmation"): from a provider's successful
 * instance-id reply, a server has `timeoutMs` to have its own authorized `master.status: running` update
 * persist. An update that lands before the provider's reply is kept and confirms at once; one handled by
 * another worker or node is seen in the persisted status at timeout. A miss logs the server id once: no
 * restart, no deletion, no retry. Timers live in this process only and never hold it open.
 */
export class StartupWatchdog {
  private readonly watching = new Map<string, () => void>();
  /** Confirmations that arrived before the watch began, forgotten after `timeoutMs`. */
  private readonly early = new Map<string, () => void>();

  constructor(private readonly deps: WatchdogDeps) {}

  /** Starts watching a server the provider has just created. */
  watch(serverId: string): void {
    const early = this.early.get(serverId);
    if (early) {
      early();
      this.early.delete(serverId);
      return;
    }
    if (this.watching.has(serverId)) return;
    const cancel = this.deps.clock.setTimeout(() => void this.expire(serverId), this.deps.timeoutMs);
    this.watching.set(serverId, cancel);
  }

  /** The server's own `running` update has persisted. */
  confirmed(serverId: string): void {
    const cancel = this.watching.get(serverId);
    if (cancel) {
      cancel();
      this.watching.delete(serverId);
      return;
    }
    if (this.early.has(serverId)) return;
    this.early.set(serverId, this.deps.clock.setTimeout(() => this.early.delete(serverId), this.deps.timeoutMs));
  }

  /** Servers still waiting for their confirmation. */
  get pending(): string[] {
    return [...this.watching.keys()];
  }

  /** Stops every timer (the process is shutting down). */
  close(): void {
    for (const cancel of [...this.watching.values(), ...this.early.values()]) cancel();
    this.watching.clear();
    this.early.clear();
  }

  private async expire(serverId: string): Promise<void> {
    if (!this.watching.delete(serverId)) return;
    let status: unknown;
    try {
      status = await this.deps.persistedStatus(serverId);
    } catch {
      status = undefined;
    }
    if (status === 'running') return;
    this.deps.log.warn({ server: serverId, status: status ?? null, timeoutMs: this.deps.timeoutMs }, 'managed server did not confirm its startup in time');
  }
}
