import type { Fence } from '../db/fence.js';
import type { StoreLease } from '../db/lease.js';
import type { Clock } from '../runtime/clock.js';
import type { ClusterNode, Decision, Sample, ScaleReason } from './decide.js';
import type { ScalePolicy } from './policy.js';

/**
 * What the autoscaler reads of the cluster (its servers and the `autoscaler` section of its document), and the
 * one thing it writes to that document: the pause, which is the cluster's, whichever server decides.
 */
export interface InventoryReader {
  nodes(): Promise<ClusterNode[]>;
  /** The raw `autoscaler` section of the cluster document (undefined: the cluster is not autoscaled). */
  policy(): Promise<unknown>;
  /** Writes the policy's `paused`; throws when the cluster document has no `autoscaler` section. */
  setPaused(paused: boolean): Promise<void>;
  /** A confirmed `organization.inactive` of the cluster's own organization (SPEC 14.4 scale to zero). */
  organizationInactive?(): boolean;
}

/**
 * The steps of an action, each one request. Scale-out goes through the manager's `createServer` when the
 * fleet is managed, else through the configured provider workflow; the service only orders the steps.
 *
 * Every write to the store carries the term the action was decided in (`fence`) and is refused by the store once
 * a later holder of the lease wrote the record: the step then throws `FencedWriteRefused` and changes nothing.
 */
export interface ScaleActions {
  /** A new term's first write: stamps it on every record of the cluster, so no earlier holder's write lands after. */
  claim(fence: Fence): Promise<void>;
  scaleOut(reason: ScaleReason, fence: Fence): Promise<void>;
  /** Cordon, readiness off, connections end. False: the node is gone (no longer in the inventory, unreachable). */
  drain(serverId: string): Promise<boolean>;
  /** Takes a drained node back into service (an action cancelled before the provider request). */
  undrain(serverId: string): Promise<void>;
  setStatus(serverId: string, status: 'running' | 'terminating' | 'failed', fence: Fence): Promise<void>;
  /** Stamps the term on the node's record again, right before its provider request: refused once a later term claimed it. */
  claimServer(serverId: string, fence: Fence): Promise<void>;
  /** The provider request that removes the machine; `signal` gives up on its answer. */
  terminate(serverId: string, signal?: AbortSignal): Promise<void>;
  /** Stops the removed node's Fleetplane server gracefully (`autoscaler.remove`), if it is still there. */
  shutdown(serverId: string): Promise<void>;
  /** Deletes this cluster's `terminating` records that no later term wrote; returns how many. */
  sweep(fence: Fence): Promise<number>;
}

export interface AutoscalerLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface AutoscalerMetrics {
  action(action: 'scale-out' | 'scale-in', reason: string): void;
  size(current: number, desired: number): void;
}

/** The cluster's decider lease (`src/db/lease.ts`): whoever holds it decides and acts for the cluster. */
export type DeciderLease = Pick<StoreLease, 'acquire' | 'held' | 'record' | 'release' | 'data' | 'onLost' | 'keep' | 'read' | 'fence' | 'refused'>;

export interface AutoscalerDeps {
  serverId: string;
  clock: Clock;
  intervalMs: number;
  sweepIntervalMs: number;
  /**
   * Between a removed node's `terminating` record and the provider request: the drained node still answers 307
   * to its peers this long, so clients that follow the inventory or the redirect have moved before it goes
   * (this server's readiness grace; 0 = none).
   */
  removalNoticeMs?: number;
  /** This server's load (primary and workers), or undefined when no process could be read. */
  sample(): Sample | undefined;
  inventory: InventoryReader;
  /** Peers' recent samples, asked over the mesh (`autoscaler.signals`); a peer that does not answer is left out. */
  gather(serverIds: readonly string[]): Promise<Map<string, Sample[]>>;
  actions: ScaleActions;
  lease: DeciderLease;
  log: AutoscalerLog;
  metrics?: AutoscalerMetrics;
}

/** `refused`: a write of the action was refused by the store, a later holder of the lease having written there. */
export type Outcome = 'done' | 'failed' | 'cancelled' | 'refused';

export interface ActionRecord {
  action: 'scale-out' | 'scale-in';
  reason: ScaleReason;
  serverId?: string;
  at: number;
  outcome?: Outcome;
  error?: string;
}

export interface AutoscalerStatus {
  serverId: string;
  /** The cluster's pause, as its document says now. */
  paused: boolean;
  /** Whether this server decides for the cluster: it holds the cluster's decider lease. */
  deciding: boolean;
  /** The decider lease as the store holds it now (null: never taken). */
  lease: { owner: string; term: number; expiresAt: string } | null;
  policy?: ScalePolicy;
  lastDecision?: Decision;
  lastAction?: ActionRecord;
  samples: number;
  /** Evaluations of the policy this server made since it started (it decides for the cluster). */
  evaluations: number;
}
