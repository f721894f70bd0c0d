import type { Logger } from '../logging/logger.js';
import type { PeerTarget } from './dialer.js';

/** How often the inventory's change token is read between discoveries: one small query. */
export const INVENTORY_POLL_MS = 1_000;

export interface DiscoveryDeps {
  intervalMs: number;
  discover(): Promise<PeerTarget[]>;
  token?(): Promise<string>;
  found(targets: PeerTarget[]): void;
  log: Logger;
}

/**
 * SPEC 6.1 re-discovery: now, every `intervalMs`, and whenever the inventory's change token moves (another
 * server started, stopped or restarted). Runs never overlap; a change seen during a run causes one more.
 */
export class DiscoveryLoop {
  private timer: NodeJS.Timeout | undefined;
  private poller: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private lastToken: string | undefined;
  private stopped = false;

  constructor(private readonly deps: DiscoveryDeps) {}

  start(): void {
    if (this.timer || this.stopped) return;
    void this.run();
    if (this.deps.intervalMs > 0) {
      this.timer = setInterval(() => void this.run(), this.deps.intervalMs);
      this.timer.unref();
    }
    if (this.deps.token) {
      this.poller = setInterval(() => void this.poll(), INVENTORY_POLL_MS);
      this.poller.unref();
    }
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    clearInterval(this.poller);
  }

  /** One discovery now (or right after the one in progress). */
  run(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          const token = await this.deps.token?.();
          const targets = await this.deps.discover();
          // Read before the query: a change landing during it moves the token again and triggers a rerun.
          if (token !== undefined) this.lastToken = token;
          if (!this.stopped) this.deps.found(targets);
        } catch (error) {
          this.deps.log.warn({ err: error }, 'mesh discovery failed; retrying on the next round');
        }
      } while (this.again && !this.stopped);
      this.running = undefined;
    })();
    return this.running;
  }

  private async poll(): Promise<void> {
    if (this.running || this.stopped) return;
    try {
      const token = await this.deps.token!();
      if (token !== this.lastToken) await this.run();
    } catch (error) {
      this.deps.log.debug({ err: error }, 'inventory change token unavailable');
    }
  }
}
