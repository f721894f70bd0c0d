import type { Clock } from '../runtime/clock.js';

/** How request handlers report organizations to the primary's organization map (SPEC 5.5). */
export interface OrganizationPresence {
  /** A request of this organization was served here. */
  touch(organizationId: string): void;
  socketOpened(organizationId: string): void;
  socketClosed(organizationId: string): void;
  /** Organizations active on this server (primary) or seen by this worker. */
  active(): string[];
}

export interface OrganizationEvents {
  active(organizationId: string): void;
  inactive(organizationId: string): void;
}

interface Presence {
  workers: Set<number>;
  sockets: Map<number, number>;
  cancelGrace?: () => void;
}

/**
 * SPEC 5.5, kept by the primary: which workers serve which organization. An organization becomes active
 * with its first request or socket on this server; when its last WebSocket closes a grace period starts,
 * and if no socket opens before it ends the organization is inactive (caches released, peers told).
 * Organizations that only ever made HTTP requests stay active: there is no "last" moment for them.
 */
export class OrganizationTracker {
  private readonly presence = new Map<string, Presence>();

  constructor(
    private readonly clock: Clock,
    private readonly graceMs: number,
    private readonly events: OrganizationEvents,
  ) {}

  workersServing(organizationId: string): ReadonlySet<number> {
    return this.presence.get(organizationId)?.workers ?? new Set();
  }

  organizationsOf(workerId: number): Set<string> {
    const served = new Set<string>();
    for (const [organizationId, entry] of this.presence) if (entry.workers.has(workerId)) served.add(organizationId);
    return served;
  }

  active(): string[] {
    return [...this.presence.keys()];
  }

  /** Each active organization with the workers serving it and its open WebSockets here. */
  describe(): Array<{ organization_id: string; workers: number[]; sockets: number }> {
    return [...this.presence].map(([organization_id, entry]) => ({
      organization_id,
      workers: [...entry.workers].sort((a, b) => a - b),
      sockets: [...entry.sockets.values()].reduce((sum, count) => sum + count, 0),
    }));
  }

  touch(organizationId: string, workerId: number): void {
    const entry = this.entry(organizationId);
    entry.workers.add(workerId);
  }

  socketOpened(organizationId: string, workerId: number): void {
    const entry = this.entry(organizationId);
    entry.workers.add(workerId);
    entry.sockets.set(workerId, (entry.sockets.get(workerId) ?? 0) + 1);
    entry.cancelGrace?.();
    entry.cancelGrace = undefined;
  }

  socketClosed(organizationId: string, workerId: number): void {
    const entry = this.presence.get(organizationId);
    const count = entry?.sockets.get(workerId);
    if (!entry || !count) return;
    if (count > 1) entry.sockets.set(workerId, count - 1);
    else entry.sockets.delete(workerId);
    this.maybeStartGrace(organizationId, entry);
  }

  /** A worker exited: its sockets are gone with it. */
  workerGone(workerId: number): void {
    for (const [organizationId, entry] of this.presence) {
      entry.workers.delete(workerId);
      if (entry.sockets.delete(workerId)) this.maybeStartGrace(organizationId, entry);
    }
  }

  private entry(organizationId: string): Presence {
    let entry = this.presence.get(organizationId);
    if (!entry) {
      entry = { workers: new Set(), sockets: new Map() };
      this.presence.set(organizationId, entry);
      this.events.active(organizationId);
    }
    return entry;
  }

  private maybeStartGrace(organizationId: string, entry: Presence): void {
    if (entry.sockets.size > 0 || entry.cancelGrace) return;
    entry.cancelGrace = this.clock.setTimeout(() => {
      entry.cancelGrace = undefined;
      if (entry.sockets.size > 0 || this.presence.get(organizationId) !== entry) return;
      this.presence.delete(organizationId);
      this.events.inactive(organizationId);
    }, this.graceMs);
  }
}
