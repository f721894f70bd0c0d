import type { Clock } from '../runtime/clock.js';
import { decide, type ClusterNode, type Decision, type Sample, type ScaleReason } from './decide.js';
import { parsePolicy, PolicyError, type ScalePolicy } from './policy.js';

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
 */
export interface ScaleActions {
  scaleOut(reason: ScaleReason): Promise<void>;
  /** Cordon, readiness off, connections end. False: the node is gone (no longer in the inventory, unreachable). */
  drain(serverId: string): Promise<boolean>;
  /** Takes a drained node back into service (an action cancelled before the provider request). */
  undrain(serverId: string): Promise<void>;
  setStatus(serverId: string, status: 'running' | 'terminating' | 'failed'): Promise<void>;
  /** The provider request that removes the machine; `signal` gives up on its answer. */
  terminate(serverId: string, signal?: AbortSignal): Promise<void>;
  /** Stops the node's process through State. */
  shutdown(serverId: string): Promise<void>;
  /** Deletes this cluster's `terminating` records; returns how many. */
  sweep(): Promise<number>;
}

export interface AutoscalerLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface AutoscalerMetrics {
  action(action: 'scale-out' | 'scale-in', reason: string): void;
  size(current: number, desired: number): void;
}

export interface AutoscalerDeps {
  serverId: string;
  clock: Clock;
  intervalMs: number;
  sweepIntervalMs: number;
  /** This server's load (primary and workers), or undefined when no process could be read. */
  sample(): Sample | undefined;
  inventory: InventoryReader;
  /** Peers' recent samples, asked over the mesh (`autoscaler.signals`); a peer that does not answer is left out. */
  gather(serverIds: readonly string[]): Promise<Map<string, Sample[]>>;
  actions: ScaleActions;
  log: AutoscalerLog;
  metrics?: AutoscalerMetrics;
}

export type Outcome = 'done' | 'failed' | 'cancelled';

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
  /** Whether this server decides for the cluster (the lowest id among its running servers). */
  deciding: boolean;
  policy?: ScalePolicy;
  lastDecision?: Decision;
  lastAction?: ActionRecord;
  samples: number;
  /** Evaluations of the policy this server made since it started (it decides for the cluster). */
  evaluations: number;
}

/** Samples kept: enough for the longest window at one sample per second, bounded either way. */
const MAX_SAMPLES = 3_600;

/** The action was stopped before the provider request: the node goes back into service. */
class Cancelled extends Error {}

/**
 * SPEC 14.4: every `intervalMs`, samples this server and, on the cluster's deciding server only, gathers the
 * peers' samples, decides and runs the action. Actions run one at a time, beside the sampling; a scale-in is
 * drain-first and commits `terminating` before the provider request, so a crash in between leaves a record the
 * sweep removes rather than a serving node nobody knows about.
 */
export class Autoscaler {
  private samples: Sample[] = [];
  private stopped = true;
  private evaluations = 0;
  /** This server asked its provider to remove it (the last server of a cluster going to zero). */
  private terminatingSelf: AbortController | undefined;
  private deciding = false;
  private policy: ScalePolicy | undefined;
  private lastDecision: Decision | undefined;
  private lastAction: ActionRecord | undefined;
  private acting: Promise<void> | undefined;
  private cancelAction: (() => void) | undefined;
  private cancelTick: (() => void) | undefined;
  private cancelSweep: (() => void) | undefined;

  constructor(private readonly deps: AutoscalerDeps) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.scheduleTick();
    this.scheduleSweep();
  }

  /**
   * Stops the timers; an action still before its provider request is cancelled, one past it is waited for.
   * Except when this server asked its provider to remove it: the provider is what stops it, and may answer only
   * once this process has exited, so the request is given up rather than waited for until it times out.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTick?.();
    this.cancelSweep?.();
    this.cancelAction?.();
    if (this.terminatingSelf) this.terminatingSelf.abort();
    else await this.acting;
  }

  /** Pauses the cluster: written to its document, so it holds whichever server decides, and across restarts. */
  async pause(): Promise<AutoscalerStatus> {
    await this.deps.inventory.setPaused(true);
    this.deps.log.info({}, 'autoscaler paused for the cluster');
    return this.status();
  }

  async resume(): Promise<AutoscalerStatus> {
    await this.deps.inventory.setPaused(false);
    this.deps.log.info({}, 'autoscaler resumed for the cluster');
    return this.status();
  }

  /** This server's view, with the policy read now (a server that does not decide never reads it otherwise). */
  async status(): Promise<AutoscalerStatus> {
    const policy = await this.readPolicy();
    return {
      serverId: this.deps.serverId,
      paused: policy?.paused ?? false,
      deciding: this.deciding,
      ...(policy ? { policy } : {}),
      ...(this.lastDecision ? { lastDecision: this.lastDecision } : {}),
      ...(this.lastAction ? { lastAction: { ...this.lastAction } } : {}),
      samples: this.samples.length,
      evaluations: this.evaluations,
    };
  }

  /** The answer to `autoscaler.signals`: this server's samples, oldest first. */
  signals(): Sample[] {
    return [...this.samples];
  }

  /** One evaluation: sample, then decide and act when this server decides for the cluster. */
  async tick(): Promise<void> {
    const sample = this.deps.sample();
    if (sample) {
      this.samples.push(sample);
      if (this.samples.length > MAX_SAMPLES) this.samples.splice(0, this.samples.length - MAX_SAMPLES);
    }
    const nodes = await this.deps.inventory.nodes();
    const running = nodes.filter((node) => node.status === 'running').map((node) => node.id).sort();
    this.deciding = running[0] === this.deps.serverId;
    if (!this.deciding) return;
    const policy = await this.readPolicy();
    if (!policy) return;
    this.dropOlderThan(this.deps.clock.now() - policy.windowMs);
    if (this.acting) return;
    // A failed server still serves: its load is part of the cluster's when it answers.
    const peers = nodes.filter((node) => (node.status === 'running' || node.status === 'failed') && node.id !== this.deps.serverId).map((node) => node.id);
    const signals = peers.length > 0 ? await this.deps.gather(peers) : new Map<string, Sample[]>();
    signals.set(this.deps.serverId, this.signals());
    const decision = decide({
      policy,
      nodes,
      signals,
      now: this.deps.clock.now(),
      deciding: this.deps.serverId,
      organizationInactive: this.deps.inventory.organizationInactive?.() ?? false,
      ...(this.lastAction ? { lastActionAt: this.lastAction.at } : {}),
    });
    this.evaluations++;
    this.lastDecision = decision;
    this.deps.metrics?.size(decision.current, decision.desired);
    if (decision.action === 'none') return;
    this.deps.log.info({ decision }, `autoscaler decided ${decision.action} (${decision.reason})`);
    this.deps.metrics?.action(decision.action, decision.reason);
    this.acting = this.act(decision).finally(() => {
      this.acting = undefined;
      this.cancelAction = undefined;
    });
  }

  /** Resolves when the running action, if any, has ended. */
  async settled(): Promise<void> {
    await this.acting;
  }

  private async act(decision: Exclude<Decision, { action: 'none' }>): Promise<void> {
    const record: ActionRecord = { action: decision.action, reason: decision.reason, at: this.deps.clock.now(), ...(decision.action === 'scale-in' ? { serverId: decision.serverId } : {}) };
    this.lastAction = record;
    try {
      if (decision.action === 'scale-out') await this.deps.actions.scaleOut(decision.reason);
      else await this.scaleIn(decision.serverId);
      record.outcome = 'done';
      this.deps.log.info({ action: record }, `autoscaler ${record.action} done`);
    } catch (error) {
      record.outcome = error instanceof Cancelled ? 'cancelled' : 'failed';
      record.error = (error as Error).message;
      this.deps.log.warn({ action: record, err: error }, `autoscaler ${record.action} ${record.outcome}: ${record.error}`);
    }
  }

  /** Drain, commit `terminating`, the provider request, then the node's shutdown (SPEC 14.4). */
  private async scaleIn(serverId: string): Promise<void> {
    const { actions } = this.deps;
    let cancelled = false;
    this.cancelAction = () => {
      cancelled = true;
    };
    let drained: boolean;
    try {
      drained = await actions.drain(serverId);
    } catch (error) {
      // Refused or timed out half-way: whatever part of the node did drain serves again.
      await this.undrainQuietly(serverId);
      throw error;
    }
    if (!drained) throw new Cancelled(`server ${serverId} disappeared during the drain`);
    if (cancelled) {
      await actions.undrain(serverId);
      throw new Cancelled('stopped during the drain');
    }
    await actions.setStatus(serverId, 'terminating');
    if (cancelled) {
      await actions.setStatus(serverId, 'running');
      await actions.undrain(serverId);
      throw new Cancelled('stopped before the provider request');
    }
    // From here on the machine is going: nothing cancels the provider request.
    this.cancelAction = undefined;
    const self = serverId === this.deps.serverId;
    if (self) this.terminatingSelf = new AbortController();
    try {
      await actions.terminate(serverId, this.terminatingSelf?.signal);
    } catch (error) {
      // Asking to be removed, this server was stopped before the answer came: the provider did its part.
      if (self && this.stopped) return;
      this.terminatingSelf = undefined;
      // The node is still there: it goes back into service. Its record stays `failed`, left for people (the
      // sweep only removes `terminating`), and it is never picked again.
      await actions.setStatus(serverId, 'failed');
      await this.undrainQuietly(serverId);
      throw error;
    }
    await actions.shutdown(serverId);
  }

  private async undrainQuietly(serverId: string): Promise<void> {
    try {
      await this.deps.actions.undrain(serverId);
    } catch (error) {
      this.deps.log.warn({ server: serverId, err: error }, `autoscaler could not take ${serverId} back into service: ${(error as Error).message}`);
    }
  }

  private async readPolicy(): Promise<ScalePolicy | undefined> {
    const raw = await this.deps.inventory.policy();
    if (raw === undefined) {
      this.policy = undefined;
      return undefined;
    }
    try {
      this.policy = parsePolicy(raw);
    } catch (error) {
      // Refused when written; one that got through anyway (two writes racing) leaves the last valid one in force.
      if (!(error instanceof PolicyError)) throw error;
      this.deps.log.warn({ field: error.field }, `autoscaler policy ignored: ${error.message}`);
    }
    return this.policy;
  }

  private dropOlderThan(since: number): void {
    const first = this.samples.findIndex((sample) => sample.at >= since);
    this.samples = first < 0 ? [] : this.samples.slice(first);
  }

  private scheduleTick(): void {
    this.cancelTick = this.deps.clock.setTimeout(() => {
      void this.tick()
        .catch((error: unknown) => this.deps.log.warn({ err: error }, `autoscaler evaluation failed: ${(error as Error).message}`))
        .finally(() => {
          if (!this.stopped) this.scheduleTick();
        });
    }, this.deps.intervalMs);
  }

  private scheduleSweep(): void {
    this.cancelSweep = this.deps.clock.setTimeout(() => {
      void this.deps.actions
        .sweep()
        .then((deleted) => {
          if (deleted > 0) this.deps.log.info({ deleted }, 'autoscaler swept terminating records');
        })
        .catch((error: unknown) => this.deps.log.warn({ err: error }, `autoscaler sweep failed: ${(error as Error).message}`))
        .finally(() => {
          if (!this.stopped) this.scheduleSweep();
        });
    }, this.deps.sweepIntervalMs);
  }
}
